"""Replacing stored samples: what an `--update` import changes, planned before its write and applied when it is published.

The updating half of the samples import (ingest/sample_records.py validates, ingest/samples.py
writes): `stored_records` reads stored samples in the import's canonical form, `changed_fields`
names what differs, `plan_replacement` matches a replacement's contexts and claims with the
stored ones by rank/index and text (unchanged rows stay, changed or dropped ones are retired,
new ones added inactive), and `publish_samples` makes a batch visible in one transaction:
fields copied from the hidden copies, rows retired and activated, labels on what changed
flagged stale with a LabelRevision each and the verdicts on changed samples set aside
(ingest/stale.py; docs/formats.md, "Importing again").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import bindparam, delete, insert, or_, select, update
from sqlmodel import Session

from calibrate.ingest.bulk import in_parts
from calibrate.ingest.sample_records import GIVEN, SAMPLE_FIELDS, claim_origin, claim_spans, response_record, short_id
from calibrate.ingest.stale import stale_verdicts
from calibrate.ingest.step_records import STEP_COLUMNS, step_rows, stored_steps
from calibrate.models import (
    IMPORT,
    SEGMENTER,
    Claim,
    Context,
    Dataset,
    ImportBatch,
    ImportStep,
    Label,
    LabelRevision,
    Response,
    Sample,
    Step,
    utcnow,
)
from calibrate.text.sentences import ClaimSpan

# A sample label judged the whole sample: it is stale when one of these changed.
SAMPLE_LABEL_FIELDS = ("question", "answer", "ground_truth", "contexts", "responses", "steps")

_SAMPLES, _CONTEXTS, _CLAIMS, _RESPONSES = Sample.__table__, Context.__table__, Claim.__table__, Response.__table__
_LABELS, _REVISIONS = Label.__table__, LabelRevision.__table__
_TRAJECTORY = Step.__table__


def stored_records(session: Session, pks: list[int]) -> dict[int, dict[str, Any]]:
    """Return the stored samples in normalised form, with their active context and claim rows."""
    out: dict[int, dict[str, Any]] = {}
    for row in session.execute(select(_SAMPLES).where(_SAMPLES.c.id.in_(pks))).mappings():
        out[row["id"]] = {
            "id": row["external_id"], "question": row["question"], "answer": row["answer"],
            "ground_truth": row["ground_truth"], "metadata": row["metadata"], "feedback": row["feedback"],
            "retrieved_ids": row["retrieved_ids"], "relevant_ids": row["relevant_ids"],
            "segmenter": row["segmenter"], "claim_source": row["claim_source"], "context_rows": [], "claim_rows": [],
        }
    for row in session.execute(select(_CONTEXTS.c.id, _CONTEXTS.c.sample_id, _CONTEXTS.c.rank, _CONTEXTS.c.text,
                                      _CONTEXTS.c.doc_id)
                               .where(_CONTEXTS.c.sample_id.in_(pks), _CONTEXTS.c.active.is_(True))
                               .order_by(_CONTEXTS.c.sample_id, _CONTEXTS.c.rank)):
        out[row.sample_id]["context_rows"].append(row)
    for row in session.execute(select(_CLAIMS.c.id, _CLAIMS.c.sample_id, _CLAIMS.c.index, _CLAIMS.c.text,
                                      _CLAIMS.c.start, _CLAIMS.c.end)
                               .where(_CLAIMS.c.sample_id.in_(pks), _CLAIMS.c.active.is_(True))
                               .order_by(_CLAIMS.c.sample_id, _CLAIMS.c.index)):
        out[row.sample_id]["claim_rows"].append(row)
    for row in session.execute(select(_RESPONSES.c.sample_id, _RESPONSES.c.key, _RESPONSES.c.text, _RESPONSES.c.model,
                                      _RESPONSES.c.metadata)
                               .where(_RESPONSES.c.sample_id.in_(pks)).order_by(_RESPONSES.c.sample_id, _RESPONSES.c.position)):
        out[row.sample_id].setdefault("responses", []).append(response_record(row.key, row.text, row.model, row.metadata))
    step_rows_: dict[int, list[Any]] = {}
    for row in session.execute(select(_TRAJECTORY.c.id, _TRAJECTORY.c.sample_id, *(_TRAJECTORY.c[name] for name in STEP_COLUMNS))
                               .where(_TRAJECTORY.c.sample_id.in_(pks), _TRAJECTORY.c.active.is_(True))
                               .order_by(_TRAJECTORY.c.sample_id, _TRAJECTORY.c.index)):
        step_rows_.setdefault(row.sample_id, []).append(row)
    for pk, rows in step_rows_.items():
        out[pk]["step_ids"] = [row.id for row in rows]
        out[pk]["steps"] = stored_steps(rows)
    for stored in out.values():
        stored["contexts"] = [[row.text, row.doc_id] for row in stored["context_rows"]]
        stored["claims"] = [row.text for row in stored["claim_rows"]] if stored["segmenter"] == GIVEN else None
    return out


def changed_fields(stored: dict[str, Any], norm: dict[str, Any]) -> list[str]:
    changed = [name for name in SAMPLE_FIELDS if name not in ("id", "claims", "claim_source")
               and stored.get(name) != norm.get(name)]
    claims = norm["claims"]
    if claims and isinstance(claims[0], dict):
        old = [{"text": row.text, "start": row.start, "end": row.end} for row in stored["claim_rows"]]
    else:
        old = stored["claims"]
    if old != claims:
        changed.append("claims")
    if "claim_source" in norm and norm["claim_source"] != stored["claim_source"]:
        changed.append("claim_source")
    return changed


@dataclass
class Plan:
    """What replacing one stored sample changes, computed before the chunk's write transaction."""

    pk: int
    norm: dict[str, Any]
    digest: str
    segmenter: str
    source: str  # Sample.claim_source after the replacement
    stale_reason: str  # for the sample's own labels ("" when they stay valid)
    new_contexts: list[tuple[int, str, str | None]] = field(default_factory=list)
    new_claims: list[tuple[int, str, int, int]] = field(default_factory=list)
    new_steps: list[tuple] = field(default_factory=list)  # rows of step_records.step_rows, written inactive
    retired: list[tuple[str, int, str]] = field(default_factory=list)  # (context|claim, row id, why its labels go stale)
    kept: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)  # (context|claim, row id, new doc_id or span)
    responses: tuple | None = None  # the new responses when they changed (they replace the stored ones whole)


def plan_replacement(pk: int, norm: dict[str, Any], digest: str, stored: dict[str, Any]) -> Plan:
    """Match a replacement's contexts and claims with the stored ones by rank/index and text (see the module's docstring)."""
    spans, segmenter, source = claim_spans(norm)
    if norm["claims"] is None and "claim_source" not in norm and norm["answer"] == stored["answer"] \
            and claim_origin(stored["claim_source"]) not in (SEGMENTER, IMPORT):
        # An extraction's or an expert's claims of an unchanged answer stay: the file says nothing new.
        spans = [ClaimSpan(row.text, row.start, row.end) for row in stored["claim_rows"]]
        segmenter, source = stored["segmenter"], stored["claim_source"]
    name = short_id(norm["id"])
    changed = changed_fields(stored, norm)
    judged = [name_ for name_ in changed if name_ in SAMPLE_LABEL_FIELDS]
    plan = Plan(pk, norm, digest, segmenter, source,
                 f"sample {name} changed in an --update import ({', '.join(judged)})" if judged else "",
                 responses=() if "responses" in changed else None)
    old_contexts = {row.rank: row for row in stored["context_rows"]}
    for rank, (text, doc_id) in enumerate(norm["contexts"]):
        old = old_contexts.pop(rank, None)
        if old is not None and old.text == text:
            if old.doc_id != doc_id:
                plan.kept.append(("context", old.id, {"doc_id": doc_id}))
            continue
        if old is not None:
            plan.retired.append(("context", old.id, f"context at rank {rank} of sample {name} changed in an --update import"))
        plan.new_contexts.append((rank, text, doc_id))
    for rank, old in old_contexts.items():
        plan.retired.append(("context", old.id, f"context at rank {rank} of sample {name} was removed by an --update import"))
    # Claims: the same by index and text; a kept claim's span follows the new answer.
    old_claims = {row.index: row for row in stored["claim_rows"]}
    for index, span in enumerate(spans):
        old = old_claims.pop(index, None)
        if old is not None and old.text == span.text:
            if (old.start, old.end) != (span.start, span.end):
                plan.kept.append(("claim", old.id, {"start": span.start, "end": span.end}))
            continue
        if old is not None:
            plan.retired.append(("claim", old.id, f"claim {index} of sample {name} changed in an --update import"))
        plan.new_claims.append((index, span.text, span.start, span.end))
    for index, old in old_claims.items():
        plan.retired.append(("claim", old.id, f"claim {index} of sample {name} was removed by an --update import"))
    _plan_steps(plan, stored, name)
    return plan


def _plan_steps(plan: Plan, stored: dict[str, Any], name: str) -> None:
    """Steps by index: an equal step stays (labels on it stay valid), a changed or removed one is retired, new ones added."""
    old_steps, old_ids = stored.get("steps") or [], stored.get("step_ids") or []
    new_steps = plan.norm.get("steps") or []
    if old_steps == new_steps:
        return
    rows = step_rows(new_steps)
    for index, step in enumerate(new_steps):
        if index < len(old_steps) and old_steps[index] == step:
            continue
        if index < len(old_steps):
            plan.retired.append(("step", old_ids[index], f"step {index} of sample {name} changed in an --update import"))
        plan.new_steps.append(rows[index])
    for index in range(len(new_steps), len(old_steps)):
        plan.retired.append(("step", old_ids[index], f"step {index} of sample {name} was removed by an --update import"))


def publish_samples(session: Session, batch_id: int, staging_id: int, dataset: str) -> tuple[int, int]:
    """Make a samples batch visible in one transaction; return how many labels went stale and how many verdicts.

    A new dataset is unhidden; into an existing one the staged samples move (one UPDATE).
    An --update's steps are applied: fields copied from the hidden copies, old rows retired and
    new ones activated, kept rows' doc_id and spans updated, labels on what changed flagged, and
    the sample-level verdicts of a sample whose judged fields changed set aside (`stale_verdicts`).
    """
    now = utcnow()
    steps = session.exec(select(ImportStep).where(ImportStep.batch_id == batch_id)).scalars().all()
    copies = {step.row_id: step for step in steps if step.action == "sample"}
    copy_ids = [step.other_id for step in copies.values()]
    staging = session.get(Dataset, staging_id)
    if staging.name == dataset:
        session.execute(update(Dataset).where(Dataset.id == staging_id).values(import_batch_id=None))
    else:
        real = session.scalars(select(Dataset).where(Dataset.name == dataset, Dataset.import_batch_id.is_(None))).one()
        moving = update(_SAMPLES).where(_SAMPLES.c.dataset_id == staging_id).values(dataset_id=real.id)
        session.execute(moving.where(_SAMPLES.c.id.not_in(copy_ids)) if copy_ids else moving)
    flagged = stale = 0
    if copies:
        fields = ("question", "answer", "ground_truth", "metadata", "feedback", "retrieved_ids", "relevant_ids",
                  "content_hash", "segmenter", "claim_source", "content_sha256")
        updates = []
        for part in in_parts(copy_ids):
            for row in session.execute(select(_SAMPLES).where(_SAMPLES.c.id.in_(part))).mappings():
                updates.append({"b_id": row["id"], **{name: row[name] for name in fields}, "updated_at": now})
        by_copy = {step.other_id: pk for pk, step in copies.items()}
        for row in updates:
            row["b_id"] = by_copy[row["b_id"]]
        session.execute(update(_SAMPLES).where(_SAMPLES.c.id == bindparam("b_id")), updates)
        # Responses are replaced whole (labels and verdicts name them by id, never by row): the
        # stored ones go, the copy's move over.
        replaced = [(pk, step.other_id) for pk, step in copies.items() if (step.data or {}).get("responses")]
        for part in in_parts([pk for pk, _ in replaced]):
            session.execute(delete(_RESPONSES).where(_RESPONSES.c.sample_id.in_(part)))
        if replaced:
            session.execute(update(_RESPONSES).where(_RESPONSES.c.sample_id == bindparam("b_copy")).values(sample_id=bindparam("b_pk")),
                            [{"b_copy": copy, "b_pk": pk} for pk, copy in replaced])
        for target, table in (("context", _CONTEXTS), ("claim", _CLAIMS), ("step", _TRAJECTORY)):
            retired = [step.row_id for step in steps if step.action == "retire" and step.target == target]
            activated = [step.row_id for step in steps if step.action == "activate" and step.target == target]
            for part in in_parts(retired):
                session.execute(update(table).where(table.c.id.in_(part)).values(active=False))
            for part in in_parts(activated):
                session.execute(update(table).where(table.c.id.in_(part)).values(active=True))
            kept = [{"b_id": step.row_id, **step.data} for step in steps if step.action == "keep" and step.target == target]
            for columns in {tuple(sorted(row)) for row in kept}:
                rows = [row for row in kept if tuple(sorted(row)) == columns]
                session.execute(update(table).where(table.c.id == bindparam("b_id")), rows)
        changed = {step.key: step.note for step in copies.values() if step.note}
        retired = {target: {step.row_id: step.note for step in steps if step.action == "retire" and step.target == target}
                   for target in ("context", "claim", "step")}
        flagged = _flag(session, now, retired, changed)
        stale = stale_verdicts(session, now, changed)
        for part in in_parts(copy_ids):
            session.execute(delete(_SAMPLES).where(_SAMPLES.c.id.in_(part)))
    if staging.name != dataset:
        session.execute(delete(Dataset).where(Dataset.id == staging_id))
    session.execute(update(ImportBatch).where(ImportBatch.id == batch_id).values(state="published"))
    return flagged, stale


def _flag(session: Session, now: Any, retired: dict[str, dict[int, str]], samples: dict[str, str]) -> int:
    """Mark the labels on retired targets ({context|claim|step: {row id: why}}) and on changed samples stale, with a
    revision each; return how many."""
    contexts, claims, steps = retired["context"], retired["claim"], retired["step"]
    conditions = []
    if contexts:
        conditions.append(_LABELS.c.context_id.in_(list(contexts)))
    if claims:
        conditions.append(_LABELS.c.claim_id.in_(list(claims)))
    if steps:
        conditions.append(_LABELS.c.step_id.in_(list(steps)))
    if samples:
        conditions.append(_LABELS.c.target_key.in_(list(samples)))
    if not conditions:
        return 0
    rows = session.execute(
        select(_LABELS.c.id, _LABELS.c.value, _LABELS.c.rationale, _LABELS.c.claim_id, _LABELS.c.context_id,
               _LABELS.c.step_id, _LABELS.c.target_key)
        .where(_LABELS.c.stale.is_(False), or_(*conditions))
    ).all()
    flags, revisions = [], []
    for row in rows:
        if row.claim_id is not None:
            reason = claims.get(row.claim_id)
        elif row.context_id is not None:
            reason = contexts.get(row.context_id)
        elif row.step_id is not None:
            reason = steps.get(row.step_id)
        else:
            reason = samples.get(row.target_key)
        if reason is None:
            continue
        flags.append({"b_id": row.id, "stale": True, "stale_reason": reason[:500]})
        revisions.append({"label_id": row.id, "action": "stale", "value": row.value, "rationale": row.rationale,
                          "changed_by_id": None, "changed_at": now})
    if flags:
        session.execute(update(_LABELS).where(_LABELS.c.id == bindparam("b_id")), flags)
        session.execute(insert(_REVISIONS), revisions)
    return len(flags)
