"""Labels out: a dataset's expert labels in the format `calibrate import labels` reads.

The experts' work lives in the database; teams also need it as a file — to back it up, to
train or evaluate elsewhere, to move it to another calibrate. By default the export is exactly
the labels import format (docs/formats.md, "Labels"), so exporting and importing into another
database gives back the same labels: only current labels on current targets are written
(stale labels, whose claim, context or step changed under them, and adjudicated gold labels are
counted and left out: the import takes neither). `full=True` adds what the import does not
read — evidence, guideline version, adjudicated and stale flags, source, timestamps — and then
includes adjudicated and stale labels too, for an archive rather than a round trip. A label of a
pairwise task carries the presentation order its annotator saw (`order`), when recorded.
A label whose claim or context was retired counts as stale whatever its flag says (a claim
split racing a label must never export the label under an index that now names another claim).

`export_verdicts` writes judges' verdicts in the verdicts import format the same way: only
verdicts on current targets, not the claim extraction's (whose value is a claim list the
import does not take), one line per verdict and presentation order.

`export_assignments` writes who was given which sample in which production stream (audit,
triage, or none for `calibrate sample`'s), with the audit's probability and whether the expert
has labelled the sample yet: the audit in sight (docs/formats.md, "Assignments"). Its rows are
a generator over one streamed query, labels read a chunk of samples at a time, so 10^5
assignments never sit in memory at once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import groupby
from typing import Any

from sqlalchemy import or_
from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from calibrate import lookup
from calibrate.annotation.auto_queue import STREAMS
from calibrate.datasets import split_samples
from calibrate.ingest.label_records import LABEL_FIELDS
from calibrate.models import EXTRACTION, Assignment, Claim, Context, Judge, Label, Sample, Step, Task, User, Verdict

FULL_FIELDS = LABEL_FIELDS + ("evidence", "guideline_version", "adjudicated", "stale", "source", "created_at", "updated_at")


@dataclass
class LabelExport:
    """The exported rows (dicts in `fields` order, absent keys for fields that do not apply) and what was left out."""

    dataset: str
    fields: tuple[str, ...]
    rows: list[dict[str, Any]] = field(default_factory=list)
    n_stale: int = 0  # left out (default export): the target changed under the label
    n_adjudicated: int = 0  # left out (default export): gold decisions, not an annotator's label

    def summary(self) -> str:
        """Return the line the CLI prints on stderr."""
        left = [f"{n} {what}" for n, what in ((self.n_stale, "stale"), (self.n_adjudicated, "adjudicated")) if n]
        return (f"exported {len(self.rows)} labels of {self.dataset}"
                + (f" (left out: {', '.join(left)}; --full includes them)" if left else ""))


def export_labels(session: Session, dataset_name: str, *, tasks: list[str] | None = None, split: str | None = None,
                  full: bool = False) -> LabelExport:
    """Return the labels of a dataset, in sample order, then task, target and annotator.

    Raises NotFound for an unknown dataset or task and CalibrationError for a split the dataset
    does not have (each naming the ones that exist).
    """
    dataset = lookup.dataset(session, dataset_name)
    query = (
        sa_select(Sample.external_id, User.username, Task.name, Label.value, Claim.index, Context.rank, Step.index,
                  Label.rationale, Label.evidence, Label.guideline_version, Label.adjudicated, Label.stale, Label.source,
                  Label.created_at, Label.updated_at, Label.order, Claim.active, Context.active, Step.active)
        .join(Sample, Sample.id == Label.sample_id)
        .join(User, User.id == Label.annotator_id)
        .join(Task, Task.id == Label.task_id)
        .outerjoin(Claim, Claim.id == Label.claim_id)
        .outerjoin(Context, Context.id == Label.context_id)
        .outerjoin(Step, Step.id == Label.step_id)
        .where(Sample.dataset_id == dataset.id)
        .order_by(Sample.id, Task.id, Claim.index, Context.rank, Step.index, User.username, Label.adjudicated)
    )
    if tasks:
        query = query.where(Task.id.in_([lookup.task(session, name).id for name in tasks]))
    if split:
        split_samples(session, dataset, split)  # a split without samples: an error naming the splits
        query = query.where(Sample.split == split)
    out = LabelExport(dataset.name, FULL_FIELDS if full else LABEL_FIELDS)
    for (sample, annotator, task, value, claim, context, step, rationale, evidence, guideline, adjudicated, stale, source,
         created, updated, order, claim_active, context_active, step_active) in session.exec(query):
        # a retired target: stale whatever the flag
        stale = bool(stale) or claim_active is False or context_active is False or step_active is False
        if not full and (stale or adjudicated):
            out.n_stale += bool(stale)
            out.n_adjudicated += bool(adjudicated) and not stale
            continue
        row: dict[str, Any] = {"sample_id": sample, "annotator": annotator, "task": task, "value": value}
        if claim is not None:
            row["claim"] = claim
        if context is not None:
            row["context"] = context
        if step is not None:
            row["step"] = step
        if rationale:
            row["rationale"] = rationale
        if order:
            row["order"] = order
        if full:
            row.update(evidence=evidence or [], guideline_version=guideline, adjudicated=bool(adjudicated),
                       stale=bool(stale), source=source, created_at=_iso(created), updated_at=_iso(updated))
        out.rows.append(row)
    # Only pairwise labels have an order, only step tasks' a step: other files keep their columns.
    out.fields = tuple(name for name in out.fields if name not in ("order", "step") or any(name in row for row in out.rows))
    return out


VERDICT_EXPORT_FIELDS = ("sample_id", "judge", "task", "value", "claim", "context", "step", "reason", "error", "raw",
                         "latency_ms", "input_tokens", "output_tokens", "order")


@dataclass
class VerdictExport:
    """The exported verdicts (dicts in `fields` order, absent keys for fields without a value) and what was left out."""

    dataset: str
    fields: tuple[str, ...] = VERDICT_EXPORT_FIELDS
    rows: list[dict[str, Any]] = field(default_factory=list)
    n_retired: int = 0  # left out: on a claim, context or step that is no longer current

    def summary(self) -> str:
        """Return the line the CLI prints on stderr."""
        judges = len({row["judge"] for row in self.rows})
        left = f" (left out: {self.n_retired} on retired claims, contexts or steps)" if self.n_retired else ""
        return f"exported {len(self.rows)} verdicts of {judges} judge(s) on {self.dataset}{left}"


def export_verdicts(session: Session, dataset_name: str, *, judge: str | None = None,
                    tasks: list[str] | None = None) -> VerdictExport:
    """Return the verdicts on a dataset's current targets, in sample order, then task, target, judge and order.

    Raises NotFound for an unknown dataset, judge or task.
    """
    dataset = lookup.dataset(session, dataset_name)
    query = (
        sa_select(Sample.external_id, Judge.name, Task.name, Verdict.value, Claim.index, Context.rank, Step.index,
                  Verdict.reason, Verdict.error, Verdict.raw, Verdict.latency_ms, Verdict.input_tokens, Verdict.output_tokens,
                  Verdict.order, Claim.active, Context.active, Step.active)
        .join(Sample, Sample.id == Verdict.sample_id)
        .join(Judge, Judge.id == Verdict.judge_id)
        .join(Task, Task.id == Verdict.task_id)
        .outerjoin(Claim, Claim.id == Verdict.claim_id)
        .outerjoin(Context, Context.id == Verdict.context_id)
        .outerjoin(Step, Step.id == Verdict.step_id)
        .where(Sample.dataset_id == dataset.id, Task.kind != EXTRACTION, Verdict.sample_index == 0)  # the import format's one verdict
        .order_by(Sample.id, Task.id, Claim.index, Context.rank, Step.index, Judge.name, Verdict.order_key)
    )
    if judge is not None:
        query = query.where(Verdict.judge_id == lookup.judge(session, judge).id)
    if tasks:
        query = query.where(Task.id.in_([lookup.task(session, name).id for name in tasks]))
    out = VerdictExport(dataset.name)
    for (sample, judge_name, task, value, claim, context, step, reason, error, raw, latency, tokens_in, tokens_out, order,
         claim_active, context_active, step_active) in session.exec(query):
        if claim_active is False or context_active is False or step_active is False:
            out.n_retired += 1
            continue
        record = {"sample_id": sample, "judge": judge_name, "task": task, "value": value, "claim": claim,
                  "context": context, "step": step, "reason": reason or None, "error": (error or None) if value is None else None,
                  "raw": raw or None, "latency_ms": latency, "input_tokens": tokens_in, "output_tokens": tokens_out,
                  "order": order or None}
        # `value` is always written: null is an unusable verdict, and the import needs the key.
        out.rows.append({name: record[name] for name in VERDICT_EXPORT_FIELDS if name == "value" or record[name] is not None})
    if not any("step" in row for row in out.rows):  # only step tasks' verdicts have one: other files keep their columns
        out.fields = tuple(name for name in out.fields if name != "step")
    return out


def _iso(moment: Any) -> str | None:
    return moment.isoformat() if moment is not None else None


ASSIGNMENT_FIELDS = ("sample_id", "annotator", "task", "stream", "audit_prob", "status", "created_at", "labelled")
SAMPLES_PER_CHUNK = 500  # samples whose labels are read at once (an IN list under SQLite's parameter limit)


@dataclass
class AssignmentExport:
    """A dataset's assignments as a generator of rows (`rows()`, read once), and what they held once read."""

    session: Session
    dataset_id: int
    dataset: str
    stream: str | None = None
    fields: tuple[str, ...] = ASSIGNMENT_FIELDS
    per_stream: Counter = field(default_factory=Counter)  # rows written per stream ("none": no stream)
    n_labelled: int = 0

    @property
    def n_rows(self) -> int:
        return sum(self.per_stream.values())

    def summary(self) -> str:
        """Return the line the CLI prints (after the rows were read)."""
        streams = ", ".join(f"{self.per_stream[name]} {name}" for name in ("audit", "triage", "none") if self.per_stream[name])
        return (f"exported {self.n_rows} assignments of {self.dataset}" + (f" in the {self.stream} stream" if self.stream else "")
                + (f" ({streams}; {self.n_labelled} labelled)" if self.n_rows else ""))

    def rows(self) -> Iterator[dict[str, Any]]:
        """Yield one row per assignment (fields in `fields` order): by sample in import order, then annotator, open slots last.

        One query, its rows streamed (`yield_per`: SQLite steps its cursor, PostgreSQL reads a server-side one) and
        cut into chunks of whole samples, each chunk's labels read with one more query: memory stays that of a chunk.
        """
        query = (sa_select(Assignment.id, Assignment.sample_id, Assignment.user_id, Sample.external_id, User.username,
                           Assignment.stream, Assignment.audit_prob, Assignment.status, Assignment.created_at)
                 .join(Sample, Sample.id == Assignment.sample_id).outerjoin(User, User.id == Assignment.user_id)
                 .where(Sample.dataset_id == self.dataset_id,
                        *([Assignment.stream == self.stream] if self.stream else []))
                 .order_by(Assignment.sample_id, Assignment.id).execution_options(yield_per=1000))
        chunk: list = []
        n_samples = 0
        for _sample, assignments in groupby(self.session.execute(query), key=lambda a: a.sample_id):
            if n_samples == SAMPLES_PER_CHUNK:
                yield from self._chunk(chunk)
                chunk, n_samples = [], 0
            chunk.extend(assignments)
            n_samples += 1
        if chunk:
            yield from self._chunk(chunk)

    def _chunk(self, assignments: list) -> Iterator[dict[str, Any]]:
        tasks = _labelled_tasks(self.session, sorted({a.sample_id for a in assignments}))
        assignments.sort(key=lambda a: (a.sample_id, a.username is None, a.username or "", a.id))
        for a in assignments:
            labelled = sorted(tasks.get((a.sample_id, a.user_id), ())) if a.user_id is not None else []
            self.per_stream[a.stream or "none"] += 1
            self.n_labelled += bool(labelled)
            yield {"sample_id": a.external_id, "annotator": a.username, "task": labelled, "stream": a.stream,
                   "audit_prob": a.audit_prob, "status": a.status, "created_at": _utc_iso(a.created_at),
                   "labelled": bool(labelled)}


def export_assignments(session: Session, dataset_name: str, *, stream: str | None = None) -> AssignmentExport:
    """Return a dataset's assignments (of one stream, `audit` or `triage`, if given) to read with `rows()`.

    Raises NotFound for an unknown dataset or stream (naming the ones that exist).
    """
    dataset = lookup.dataset(session, dataset_name)
    if stream is not None and stream not in STREAMS:
        raise lookup.not_found("stream", stream, sorted(STREAMS))
    return AssignmentExport(session, dataset.id, dataset.name, stream)


def _labelled_tasks(session: Session, sample_ids: list[int]) -> dict[tuple[int, int], set[str]]:
    """Return (sample id, annotator id) → the tasks she has a current label on (not stale, not adjudicated, on a current target)."""
    out: dict[tuple[int, int], set[str]] = {}
    for sample_id, annotator_id, task in session.execute(
        sa_select(Label.sample_id, Label.annotator_id, Task.name).distinct()
        .join(Task, Task.id == Label.task_id)
        .outerjoin(Claim, Claim.id == Label.claim_id).outerjoin(Context, Context.id == Label.context_id)
        .outerjoin(Step, Step.id == Label.step_id)
        .where(col(Label.sample_id).in_(sample_ids), Label.adjudicated.is_(False), Label.stale.is_(False),
               or_(col(Label.claim_id).is_(None), Claim.active.is_(True)),
               or_(col(Label.context_id).is_(None), Context.active.is_(True)),
               or_(col(Label.step_id).is_(None), Step.active.is_(True)))):
        out.setdefault((sample_id, annotator_id), set()).add(task)
    return out


def _utc_iso(moment: datetime) -> str:
    """Return a stored time as ISO 8601 in UTC, to the second (stored naive times are UTC)."""
    aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return aware.isoformat(timespec="seconds")
