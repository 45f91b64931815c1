"""Claim sets: where a sample's claims come from, replacing them, and how much experts changed them.

Every sample records the method behind its active claims in `Sample.claim_source`:

    segmenter        the deterministic sentence segmenter (calibrate/text/sentences.py) at import
    import           the claims given in the samples file
    NAME@V           an LLM extraction by prompt version NAME@V (`calibrate claims extract`)
    SOURCE+edited    any of these once an expert split, merged or edited one of its claims

and every claim its `origin` (the same names, or `expert` for a claim an expert's edit made).
Reports, judge runs and exports say which claim sets they used by counting samples per source
(`source_counts`).

`replace_claim_sets` is the one way a method's claims replace samples': unchanged claims (same
index and text) stay, with their labels; the others are retired (`active = false`, never
deleted) and the labels on them flagged stale with a reason and a LabelRevision, so they stay
in the history and the report counts them. `expert_changes` is the measure of an extractor's
quality the dataset page and the report show (docs/annotation.md, "Editing claims").

Domain code: takes a Session, never commits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import and_, bindparam, case, func, insert, update
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from calibrate.db import read_frame
from calibrate.models import EDITED, EXPERT, IMPORT, SEGMENTER, Claim, ClaimEdit, Dataset, Label, LabelRevision, Sample, utcnow
from calibrate.text.sentences import ClaimSpan

__all__ = ["EDITED", "EXPERT", "IMPORT", "SEGMENTER", "active_claims", "base_source", "edited",
           "expert_changes", "expert_work", "flag_stale", "labelled_samples", "replace_claim_sets", "replace_claims",
           "source_counts", "verbatim_spans"]


def base_source(source: str) -> str:
    """Return the method of a claim source without the "+edited" mark ("claims@2+edited" → "claims@2")."""
    return source[: -len(EDITED)] if source.endswith(EDITED) else source


def edited(source: str) -> str:
    """Return the claim source once an expert changed a claim of it."""
    return source if source.endswith(EDITED) else source + EDITED


def verbatim_spans(answer: str, texts: Sequence[str]) -> list[ClaimSpan]:
    """Return each claim with the span where its text occurs verbatim in the answer, else (-1, -1).

    Claims are placed in order; each takes the first occurrence of its (stripped) text that no
    earlier claim of the answer has taken, so a repeated claim takes the next occurrence. No
    whitespace or case folding: an extraction that rewrote the text (a resolved pronoun) has
    no span, and the item page shows it on its own line under the answer.
    """
    taken: set[int] = set()
    out = []
    for text in texts:
        needle = text.strip()
        start = answer.find(needle) if needle else -1
        while start >= 0 and start in taken:
            start = answer.find(needle, start + 1)
        if start >= 0:
            taken.add(start)
            out.append(ClaimSpan(text, start, start + len(needle)))
        else:
            out.append(ClaimSpan(text, -1, -1))
    return out


def active_claims(session: Session, sample_id: int) -> list[Claim]:
    """Return a sample's active claims in index order."""
    return list(session.exec(select(Claim).where(Claim.sample_id == sample_id, col(Claim.active).is_(True))
                             .order_by(Claim.index)).all())


def labelled_samples(session: Session, sample_ids: Iterable[int]) -> dict[int, int]:
    """Return sample id → number of current (not stale) labels on its active claims, for the samples that have any."""
    ids = sorted(set(sample_ids))
    out: dict[int, int] = {}
    for start in range(0, len(ids), 500):
        rows = session.execute(
            sa_select(Label.sample_id, func.count()).join(Claim, Claim.id == Label.claim_id)
            .where(Label.sample_id.in_(ids[start:start + 500]), col(Label.stale).is_(False), col(Claim.active).is_(True))
            .group_by(Label.sample_id)).all()
        out.update({sample_id: n for sample_id, n in rows})
    return out


def expert_work(session: Session, sample_ids: Iterable[int]) -> set[int]:
    """Return the samples whose claims carry expert work: a current label on an active claim, or an
    expert's correction (claim source "…+edited")."""
    ids = sorted(set(sample_ids))
    out = set(labelled_samples(session, ids))
    for start in range(0, len(ids), 500):
        rows = session.execute(sa_select(Sample.id, Sample.claim_source).where(Sample.id.in_(ids[start:start + 500]))).all()
        out |= {sid for sid, source in rows if source.endswith(EDITED)}
    return out


def flag_stale(session: Session, claim_ids: Sequence[int], reason: str, *, user_id: int | None = None) -> list[int]:
    """Flag the current labels on these claims stale (with a LabelRevision "stale" each); return their ids."""
    if not claim_ids:
        return []
    labels = session.exec(select(Label).where(col(Label.claim_id).in_(list(claim_ids)), col(Label.stale).is_(False))).all()
    now = utcnow()
    for label in labels:
        session.add(LabelRevision(label_id=label.id, action="stale", value=label.value, rationale=label.rationale,
                                  evidence=label.evidence, guideline_version=label.guideline_version,
                                  changed_by_id=user_id, changed_at=now))
        label.stale, label.stale_reason, label.updated_at = True, reason[:500], now
        session.add(label)
    return [label.id for label in labels]


_CLAIMS, _SAMPLES = Claim.__table__, Sample.__table__
CHUNK = 500  # ids per IN (…): SQLite limits bound parameters


def replace_claim_sets(session: Session, changes: dict[int, Sequence[ClaimSpan]], *, source: str, origin: str,
                       reason: str, user_id: int | None = None) -> list[int]:
    """Make each sample's `spans` its active claims (claims made by `origin`), the sets' source `source`.

    `changes`: sample id → its new claims with spans. A claim whose index and text are unchanged
    stays (its span and origin follow the new set, its labels stay valid); the others are
    retired and their labels flagged stale with `reason`. Returns the ids of those labels.
    Core statements, a handful per call whatever the number of samples (an extraction run's
    writer applies a batch at a time).
    """
    ids = sorted(changes)
    if not ids:
        return []
    old: dict[int, dict[int, Any]] = {}
    for start in range(0, len(ids), CHUNK):
        rows = session.execute(sa_select(_CLAIMS.c.id, _CLAIMS.c.sample_id, _CLAIMS.c.index, _CLAIMS.c.text)
                               .where(_CLAIMS.c.sample_id.in_(ids[start:start + CHUNK]), _CLAIMS.c.active.is_(True))).all()
        for row in rows:
            old.setdefault(row.sample_id, {})[row.index] = row
    retired: list[int] = []
    kept: list[dict[str, Any]] = []
    added: list[dict[str, Any]] = []
    for sample_id in ids:
        current = old.get(sample_id, {})
        for index, span in enumerate(changes[sample_id]):
            row = current.pop(index, None)
            if row is not None and row.text == span.text:
                kept.append({"b_id": row.id, "b_start": span.start, "b_end": span.end, "b_origin": origin})
                continue
            if row is not None:
                retired.append(row.id)
            added.append({"sample_id": sample_id, "index": index, "text": span.text, "start": span.start, "end": span.end,
                          "active": True, "origin": origin})
        retired += [row.id for row in current.values()]
    for start in range(0, len(retired), CHUNK):
        session.execute(update(_CLAIMS).where(_CLAIMS.c.id.in_(retired[start:start + CHUNK])).values(active=False))
    if kept:
        session.execute(update(_CLAIMS).where(_CLAIMS.c.id == bindparam("b_id"))
                        .values(start=bindparam("b_start"), end=bindparam("b_end"), origin=bindparam("b_origin")), kept)
    if added:
        session.execute(insert(_CLAIMS), added)
    now = utcnow()
    for start in range(0, len(ids), CHUNK):
        session.execute(update(_SAMPLES).where(_SAMPLES.c.id.in_(ids[start:start + CHUNK]))
                        .values(claim_source=source, updated_at=now))
    return flag_stale(session, retired, reason, user_id=user_id)


def replace_claims(session: Session, sample: Sample, spans: Sequence[ClaimSpan], *, source: str, origin: str,
                   reason: str, user_id: int | None = None) -> list[int]:
    """Make `spans` one sample's active claims (`replace_claim_sets` for one sample); return the labels made stale."""
    stale = replace_claim_sets(session, {sample.id: spans}, source=source, origin=origin, reason=reason, user_id=user_id)
    session.expire(sample)  # the Core UPDATE changed its claim source
    return stale


# source_counts reads the whole id range of its samples when it is at most this many times their number, else only them.
RANGE_READ_SPAN = 4


def source_counts(session: Session, sample_ids: Iterable[int] | None = None, *, dataset: Dataset | None = None) -> dict[str, int]:
    """Return claim source → number of samples, over these samples (or the dataset's), sorted by source."""
    counts: Counter[str] = Counter()
    if dataset is not None:
        rows = session.execute(sa_select(Sample.claim_source, func.count()).where(Sample.dataset_id == dataset.id)
                               .group_by(Sample.claim_source)).all()
        counts.update({source: n for source, n in rows})
    else:
        ids = sorted(set(sample_ids or ()))
        if ids and ids[-1] - ids[0] + 1 == len(ids):
            # every id of a range (a report's samples, imported together): the database counts them
            rows = session.execute(sa_select(Sample.claim_source, func.count()).where(Sample.id.between(ids[0], ids[-1]))
                                   .group_by(Sample.claim_source)).all()
            counts.update({source: n for source, n in rows})
        elif ids and ids[-1] - ids[0] < RANGE_READ_SPAN * len(ids):
            # dense ids (a report's 10^5 samples): one read of their range through the primary key, not 200 queries
            query = sa_select(Sample.id, Sample.claim_source).where(Sample.id.between(ids[0], ids[-1]))
            frame = read_frame(session, query, ["id", "source"])
            counts.update({source: int(n) for source, n in frame.loc[frame["id"].isin(ids), "source"].value_counts().items()})
        else:  # sparse ids (a watcher's few new samples among millions): read only them
            for start in range(0, len(ids), 500):
                rows = session.execute(sa_select(Sample.claim_source, func.count()).where(Sample.id.in_(ids[start:start + 500]))
                                       .group_by(Sample.claim_source)).all()
                counts.update({source: n for source, n in rows})
    return dict(sorted(counts.items()))


def expert_changes(session: Session, dataset: Dataset, *, sample_ids: set[int] | None = None) -> dict[str, dict[str, Any]]:
    """Return, per claim method (source without "+edited"), how many of its claims experts changed.

    Over the samples whose current claims that method made: `n_answers`, `n_answers_edited`
    (their source is METHOD+edited), `n_claims` (the method's claims still active plus those an
    expert changed), `n_changed` (the method's claims an expert split, merged or edited, edits
    undone not counted), `changed_share` (n_changed / n_claims, None without claims), and
    `split`, `merged`, `edited` (n_changed by the action that changed them).

    Read as counts: the database counts the samples per claim source and, in one pass, the active claims each method
    made on its own samples — a few numbers, not a row per sample or claim —, and the inactive claims are read only
    when an expert edit (not undone) names them (`sample_ids`: the same counts over those samples, in chunks of ids).
    """
    out: dict[str, dict[str, Any]] = {}
    for source, n in _sample_sources(session, dataset, sample_ids):
        row = out.setdefault(base_source(source), {"n_answers": 0, "n_answers_edited": 0, "n_claims": 0, "n_changed": 0,
                                                   "changed_share": None, "split": 0, "merged": 0, "edited": 0})
        row["n_answers"] += n
        row["n_answers_edited"] += n if source.endswith(EDITED) else 0
    for method, n in _active_method_claims(session, dataset, sorted(out), sample_ids).items():
        out[method]["n_claims"] += n
    changed_by: dict[int, str] = {}
    edits = session.execute(sa_select(ClaimEdit.action, ClaimEdit.before).join(Sample, Sample.id == ClaimEdit.sample_id)
                            .where(Sample.dataset_id == dataset.id, ClaimEdit.undone_at.is_(None))).all()
    for action, before in edits:
        for claim in before or []:
            changed_by[int(claim["id"])] = action
    words = {"split": "split", "merge": "merged", "edit": "edited"}
    for claim_id, sid, origin, source in _inactive_claims(session, dataset, sorted(changed_by)):
        if (sample_ids is not None and sid not in sample_ids) or base_source(source) != origin:
            continue
        row = out[origin]
        row["n_claims"] += 1
        row["n_changed"] += 1
        row[words.get(changed_by[claim_id], "edited")] += 1
    for row in out.values():
        row["changed_share"] = row["n_changed"] / row["n_claims"] if row["n_claims"] else None
    return dict(sorted(out.items()))


def _id_chunks(sample_ids: set[int] | None) -> list[list[int] | None]:
    """Return the id lists of `IN (…)` reads of these samples (one None: every sample of the dataset)."""
    if sample_ids is None:
        return [None]
    ids = sorted(sample_ids)
    return [ids[start:start + CHUNK] for start in range(0, len(ids), CHUNK)]


def _sample_sources(session: Session, dataset: Dataset, sample_ids: set[int] | None) -> list[tuple[str, int]]:
    """Return (claim source, samples) over the dataset's samples (or these of them), as the database counts them."""
    rows: list[tuple[str, int]] = []
    for chunk in _id_chunks(sample_ids):
        query = sa_select(Sample.claim_source, func.count()).where(Sample.dataset_id == dataset.id)
        if chunk is not None:
            query = query.where(Sample.id.in_(chunk))
        rows += [(source, int(n)) for source, n in session.execute(query.group_by(Sample.claim_source)).all()]
    return rows


#: Methods counted per read of the active claims (three bound parameters each).
METHODS_PER_READ = 100


def _active_method_claims(session: Session, dataset: Dataset, methods: list[str],
                          sample_ids: set[int] | None) -> dict[str, int]:
    """Return method → the dataset's active claims (or these samples') that it made on a sample whose current claims it
    made: one conditional count per method in one pass over the claims (no GROUP BY: 10^6 claims are not sorted)."""
    out = dict.fromkeys(methods, 0)
    for start in range(0, len(methods), METHODS_PER_READ):
        part = methods[start:start + METHODS_PER_READ]
        columns = [func.count(case((and_(Claim.origin == method, Sample.claim_source.in_(_sources_of(method))), 1)))
                   for method in part]
        for chunk in _id_chunks(sample_ids):
            query = (sa_select(*columns).select_from(Claim).join(Sample, Sample.id == Claim.sample_id)
                     .where(Sample.dataset_id == dataset.id, Claim.active.is_(True)))
            if chunk is not None:
                query = query.where(Claim.sample_id.in_(chunk))
            for method, n in zip(part, session.execute(query).one(), strict=True):
                out[method] += int(n or 0)
    return out


def _sources_of(method: str) -> list[str]:
    """Return the claim sources whose method (base_source) is `method`."""
    return [method + EDITED] if method.endswith(EDITED) else [method, method + EDITED]


def _inactive_claims(session: Session, dataset: Dataset, claim_ids: list[int]) -> list[tuple[int, int, str, str]]:
    """Return (id, sample id, origin, the sample's claim source) of these claims that are inactive, in the dataset."""
    rows: list[tuple[int, int, str, str]] = []
    for start in range(0, len(claim_ids), CHUNK):
        rows += session.execute(sa_select(Claim.id, Claim.sample_id, Claim.origin, Sample.claim_source)
                                .join(Sample, Sample.id == Claim.sample_id)
                                .where(Claim.id.in_(claim_ids[start:start + CHUNK]), Sample.dataset_id == dataset.id,
                                       Claim.active.is_(False))).all()
    return rows
