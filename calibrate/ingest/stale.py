"""Verdicts on content that changed: set aside as history, so no figure reads them and the next pass judges again.

`stale_verdicts` is called by the samples import's publish (ingest/sample_updates.py), in the
transaction that changes the samples, as the labels on them are flagged stale there.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, insert, select
from sqlmodel import Session

from calibrate.ingest.bulk import in_parts
from calibrate.models import StaleVerdict, Verdict

_VERDICTS, _STALE_VERDICTS = Verdict.__table__, StaleVerdict.__table__
_VERDICT_COPIED = ("judge_id", "run_id", "task_id", "sample_id", "target_key", "order", "order_key", "sample_index", "value",
                   "status", "reason", "raw", "error", "latency_ms", "input_tokens", "output_tokens", "cached", "source",
                   "created_at")


def stale_verdicts(session: Session, now: Any, samples: dict[str, str]) -> int:
    """Move the sample-level verdicts of changed samples (target key → why) to `staleverdict`; return how many.

    As the labels on them are flagged stale: kept as history, out of every figure (no reader of
    `verdict` sees them), and the target is pending again, so the next `judge run` or watcher pass
    judges the new content. Claim and context verdicts need no move: a changed claim or context is
    retired and a new row stands for the new text.
    """
    moved = 0
    for part in in_parts(sorted(samples)):
        rows = session.execute(select(_VERDICTS).where(_VERDICTS.c.target_key.in_(part), _VERDICTS.c.claim_id.is_(None),
                                                       _VERDICTS.c.context_id.is_(None))).mappings().all()
        if not rows:
            continue
        session.execute(insert(_STALE_VERDICTS), [
            {"verdict_id": row["id"], **{name: row[name] for name in _VERDICT_COPIED}, "stale_at": now,
             "stale_reason": samples[row["target_key"]][:500]} for row in rows])
        session.execute(delete(_VERDICTS).where(_VERDICTS.c.id.in_([row["id"] for row in rows])))
        moved += len(rows)
    return moved

