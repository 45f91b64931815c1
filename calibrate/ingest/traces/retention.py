"""Retention of production samples: `calibrate traces purge` and the per-dataset setting the traces server applies daily.

A sample is *old* when its time — `metadata.started_at` when that is an ISO 8601 time within
calibrate.bounds, else its creation time: calibrate/sample_time.py, the time `calibrate monitor` puts it
in a window by — is before now minus the window. An old sample is deleted with what hangs on it and is nobody's work:
its verdicts and stale verdicts, its assignments (none of them labelled, or it would be kept), its
audit draws, claims, contexts and responses. It is **kept** when people put work in it, counted
under the first reason that holds: a member of a golden set (any version, retired ones included:
an old version's hash must stay checkable), a few-shot example of a prompt version, an
adjudicated label, any other label (a stale one included), an expert's claim edit. Labels are
never deleted by retention: the keep rule is checked again inside each deleting transaction, under
the write lock, so a label saved between the look and the delete keeps its sample.

Deleting goes in write transactions of at most `chunk` samples (DROP_CHUNK, as the rootless drop),
the writer lock given back between two. The staged spans of traces that never got their root are
dropped with it (`staging.drop_rootless`, by the caller: the CLI and the settler).

The setting (`RetentionPolicy`, one per dataset, `calibrate traces retention`) is applied by the
settler of every `calibrate serve` with the traces receiver, once a day (`apply_due`): the first
settler whose transaction finds the day's run not yet claimed claims it, so two servers never purge
twice the same day. docs/production.md, "Retention".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from sqlalchemy import Engine, delete, func, or_, select, update
from sqlmodel import Session, col

from calibrate import lookup
from calibrate.db import write_session
from calibrate.errors import NotFound
from calibrate.ingest.bulk import in_parts
from calibrate.ingest.problems import reject
from calibrate.models import (
    Assignment,
    AuditDraw,
    Claim,
    ClaimEdit,
    Context,
    Dataset,
    FewShot,
    GoldenMember,
    Label,
    Response,
    RetentionPolicy,
    Sample,
    StaleVerdict,
    Triage,
    Verdict,
    WatchLease,
    utcnow,
)
from calibrate.sample_time import sample_times

PURGE_CHUNK = 250  # samples deleted per write transaction (as staging.DROP_CHUNK's traces)
QUERY_CHUNK = 500  # ids per IN (…) list
MAX_DAYS = 36_500
OLDER_THAN = re.compile(r"\s*(\d{1,5})\s*d\s*")
DAY_SECONDS = 24 * 3600
# Why an old sample is kept, in the order a sample is counted (first that holds); "recent": not old.
KEPT_REASONS = ("recent", "golden", "few_shot", "adjudicated", "labelled", "claim_edits")
KEPT_WORDS = {"recent": "recent", "golden": "golden set members", "few_shot": "few-shot examples",
              "adjudicated": "adjudicated", "labelled": "labelled", "claim_edits": "with expert claim edits"}
# What is deleted with a sample (the summary's `removed` keys, besides `samples`), each a table with sample_id.
WITH_SAMPLE = (("verdicts", Verdict), ("stale_verdicts", StaleVerdict), ("assignments", Assignment),
               ("audit_draws", AuditDraw), ("watch_leases", WatchLease), ("triage", Triage), ("responses", Response),
               ("claims", Claim), ("contexts", Context))


def parse_older_than(text: str) -> int:
    """Return the days of a window written `Nd` (1 to 36,500 days); ImportRejected naming `older-than` otherwise."""
    found = OLDER_THAN.fullmatch(text or "")
    if not found or not 1 <= int(found.group(1)) <= MAX_DAYS:
        raise reject(f"write the window as days, such as 90d (1d to {MAX_DAYS}d), got {text!r}", field="older-than")
    return int(found.group(1))


def kept_for(session: Session, ids: list[int]) -> dict[int, str]:
    """Return, for the samples among `ids` that people put work in, the first reason to keep each (KEPT_REASONS)."""
    out: dict[int, str] = {}
    for part in in_parts(sorted(ids), QUERY_CHUNK):
        found: dict[str, set[int]] = {
            "golden": set(session.scalars(select(GoldenMember.sample_id).where(col(GoldenMember.sample_id).in_(part)))),
            "few_shot": set(session.scalars(select(FewShot.sample_id).where(col(FewShot.sample_id).in_(part)))),
            "adjudicated": set(session.scalars(select(Label.sample_id).where(col(Label.sample_id).in_(part),
                                                                              col(Label.adjudicated).is_(True)))),
            "labelled": set(session.scalars(select(Label.sample_id).where(col(Label.sample_id).in_(part)))),
            "claim_edits": set(session.scalars(select(ClaimEdit.sample_id).where(col(ClaimEdit.sample_id).in_(part)))),
        }
        for reason in KEPT_REASONS[1:]:
            for sample_id in found[reason]:
                out.setdefault(sample_id, reason)
    return out


def _count_with(session: Session, ids: list[int]) -> Counter[str]:
    """Count the rows of each WITH_SAMPLE table that hang on the samples `ids`."""
    counts: Counter[str] = Counter()
    for part in in_parts(ids, QUERY_CHUNK):
        for name, table in WITH_SAMPLE:
            counts[name] += session.scalar(select(func.count()).select_from(table).where(col(table.sample_id).in_(part))) or 0
    return counts


def _delete_some(session: Session, ids: list[int]) -> Counter[str]:
    """Delete the samples `ids` that nobody's work keeps (checked again here, under the write lock) and what hangs on them;
    return what was deleted and (under `kept_now`) the samples kept after all."""
    keep = kept_for(session, ids)
    gone = [sample_id for sample_id in ids if sample_id not in keep]
    counts = _count_with(session, gone)
    for part in in_parts(gone, QUERY_CHUNK):
        # Explicitly, in this order (what names a claim or a context before them), rather than by the foreign keys' cascade.
        for _, table in WITH_SAMPLE:
            session.execute(delete(table).where(col(table.sample_id).in_(part)))
        session.execute(delete(Sample).where(col(Sample.id).in_(part)))
    counts["samples"] = len(gone)
    counts.update(f"kept_now:{reason}" for reason in keep.values())
    return counts


def purge(engine: Engine, dataset: str, *, older_than_days: int, dry_run: bool = False, now: datetime | None = None,
          background: bool = False, chunk: int = PURGE_CHUNK) -> dict[str, Any]:
    """Delete `dataset`'s samples older than `older_than_days` that no one's work keeps (module docstring); return the summary.

    `dry_run`: delete nothing, say what would go. The summary: {dataset, older_than_days, cutoff, dry_run, samples
    (before), removed {samples, verdicts, stale_verdicts, assignments, audit_draws, …}, kept {recent, golden, few_shot,
    adjudicated, labelled, claim_edits}} (docs/cli.md, `calibrate traces purge`).
    """
    if not 1 <= older_than_days <= MAX_DAYS:
        raise reject(f"the window must be 1 to {MAX_DAYS} days, got {older_than_days}", field="older-than")
    now = now or utcnow()
    cutoff = (now if now.tzinfo else now.replace(tzinfo=UTC)) - timedelta(days=older_than_days)
    with Session(engine) as session:
        ds = lookup.dataset(session, dataset)
        times = sample_times(session, ds.id)
        old = sorted(int(i) for i in times.index[times["time"] < pd.Timestamp(cutoff)])
        keep = kept_for(session, old)
        kept = Counter({"recent": len(times) - len(old)})
        kept.update(keep.values())
        doomed = [sample_id for sample_id in old if sample_id not in keep]
        removed: Counter[str] = _count_with(session, doomed) if dry_run else Counter()
        dataset_id, name = ds.id, ds.name
    if dry_run:
        removed["samples"] = len(doomed)
    else:
        for part in in_parts(doomed, chunk):
            with write_session(engine, background=background) as session:
                if session.get(Dataset, dataset_id) is None:
                    break  # the dataset was removed meanwhile
                done = _delete_some(session, part)
            for key, n in done.items():
                if key.startswith("kept_now:"):  # work saved on it since the look: kept after all
                    kept[key.removeprefix("kept_now:")] += n
                else:
                    removed[key] += n
    return {"dataset": name, "older_than_days": older_than_days, "cutoff": cutoff.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "dry_run": dry_run, "samples": len(times),
            "removed": {key: int(removed.get(key, 0)) for key in ("samples", *(name for name, _ in WITH_SAMPLE))},
            "kept": {reason: int(kept.get(reason, 0)) for reason in KEPT_REASONS}}


def purge_lines(done: dict[str, Any]) -> list[str]:
    """Return the lines `calibrate traces purge` prints: what went (or would go) and what was kept, by reason."""
    verb = "would remove" if done["dry_run"] else "removed"
    removed, kept = done["removed"], done["kept"]
    hanging = ", ".join(f"{n:,} {name.replace('_', ' ')}" for name, n in removed.items() if name != "samples" and n)
    lines = [f"purge {done['dataset']} (older than {done['older_than_days']}d: before {done['cutoff']}): "
             f"{verb} {removed['samples']:,} of {done['samples']:,} samples" + (f" (with {hanging})" if hanging else ""),
             f"kept {sum(kept.values()):,}: " + ", ".join(f"{n:,} {KEPT_WORDS[reason]}" for reason, n in kept.items())]
    staged = done.get("staged")
    if staged:
        lines.append(f"staged: {verb} {staged['traces']:,} traces without a root or quarantined ({staged['spans']:,} "
                     f"spans) and {staged['feedback']:,} feedback records, a day after their last arrival")
    return lines


# --------------------------------------------------------------------------- the setting


def set_retention(session: Session, dataset: str, days: int | None) -> dict[str, Any] | None:
    """Save `dataset`'s retention (`days`; None removes it) in the caller's transaction; return it as `retention_of` does."""
    ds = lookup.dataset(session, dataset)
    row = session.scalars(select(RetentionPolicy).where(RetentionPolicy.dataset_id == ds.id)).first()
    if days is None:
        if row is not None:
            session.delete(row)
        return None
    if not 1 <= days <= MAX_DAYS:
        raise reject(f"the window must be 1 to {MAX_DAYS} days, got {days}", field="older-than")
    if row is None:
        row = RetentionPolicy(dataset_id=ds.id, older_than_days=days)
    row.older_than_days, row.updated_at = days, utcnow()
    session.add(row)
    session.flush()
    return retention_of(session, ds)


def retention_of(session: Session, dataset: Dataset) -> dict[str, Any] | None:
    """Return a dataset's retention {older_than_days, applied_at, last_result}, or None when it has none."""
    row = session.scalars(select(RetentionPolicy).where(RetentionPolicy.dataset_id == dataset.id)).first()
    if row is None:
        return None
    applied = row.applied_at.replace(tzinfo=UTC) if row.applied_at and row.applied_at.tzinfo is None else row.applied_at
    return {"dataset": dataset.name, "older_than_days": row.older_than_days, "applied_at": applied,
            "last_result": row.last_result}


def apply_due(engine: Engine, *, now: datetime | None = None, background: bool = False,
              after: Callable[[str], Any] | None = None) -> list[dict[str, Any]]:
    """Apply every retention setting not applied in the last day (the settler calls this at each wake-up); return the
    purges made.

    Each is claimed first, in a write transaction (`applied_at` moved to now only where it was
    more than a day ago), so of two servers only one purges a dataset on a given day. `after(name)`:
    called after a dataset's purge (the settler drops its stale staged traces).
    """
    now = now or utcnow()
    before = now - timedelta(seconds=DAY_SECONDS)
    with Session(engine) as session:
        due = session.execute(select(RetentionPolicy.id, RetentionPolicy.older_than_days, Dataset.name)
                              .join(Dataset, Dataset.id == RetentionPolicy.dataset_id)
                              .where(or_(col(RetentionPolicy.applied_at).is_(None), RetentionPolicy.applied_at < before))
                              .order_by(RetentionPolicy.id)).all()
    done = []
    for policy_id, days, name in due:
        with write_session(engine, background=background) as session:
            claimed = session.execute(update(RetentionPolicy).where(
                RetentionPolicy.id == policy_id,
                or_(col(RetentionPolicy.applied_at).is_(None), RetentionPolicy.applied_at < before)).values(applied_at=now))
            if claimed.rowcount != 1:
                continue  # another server claimed it first
        try:
            result = purge(engine, name, older_than_days=days, now=now, background=background)
        except NotFound:
            continue  # the dataset went meanwhile
        if after is not None:
            after(name)
        with write_session(engine, background=background) as session:
            session.execute(update(RetentionPolicy).where(RetentionPolicy.id == policy_id).values(last_result=result))
        done.append(result)
    return done
