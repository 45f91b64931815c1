"""How many more labels would settle a decision or narrow a confidence interval."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from sqlalchemy import func
from sqlmodel import Session, col, select

from calibrate.judged import target_kind
from calibrate.models import Sample
from calibrate.reasons import Reason, noted


def labels_needed(n: int, ci: tuple[float, float] | None, value: float | None, threshold: float) -> dict | None:
    """Estimate how many more labelled targets would settle pass/fail at `threshold`.

    Assumes the CI half-width shrinks as 1/√n around an unchanged estimate: to exclude the
    threshold the half-width must fall below |value − threshold|, so
    n_needed = n · (half_width / |value − threshold|)². Returns None when the CI already
    excludes the threshold.
    """
    if ci is None or value is None or n <= 0:
        return None
    low, high = ci
    if not (low <= threshold <= high):
        return None
    half = (high - low) / 2
    gap = abs(value - threshold)
    if gap < 1e-9:
        return {"more_targets": None, **noted(Reason("on_threshold"))}
    total = math.ceil(n * (half / gap) ** 2)
    if total > 100 * n:
        return {"more_targets": None, **noted(Reason("too_close", value=value, threshold=threshold, limit=100 * n))}
    return {
        "more_targets": max(total - n, 0),
        **noted(Reason("straddles_half_width", low=low, high=high, threshold=threshold, more=max(total - n, 0), total=total,
                       value=value)),
    }


BUDGET_CANDIDATES = 200


def label_budget(n: int, ci: tuple[float, float] | list | None, target_half_width: float,
                 candidates: list[str] | None = None) -> dict | None:
    """Estimate how many more labelled targets would bring the CI half-width under `target_half_width`.

    Assumes the half-width shrinks as 1/√n: n_needed = n · (half_width / target)². `candidates`
    (target keys the judge already judged but that have no gold, in data order) say which to label
    first; the first `more_targets` of them (at most 200) are listed. None without a CI.
    """
    if ci is None or n <= 0 or None in ci or target_half_width <= 0:
        return None
    half = (ci[1] - ci[0]) / 2
    total = n if half <= target_half_width else math.ceil(round(n * (half / target_half_width) ** 2, 9))  # round: float noise
    more = max(total - n, 0)
    candidates = candidates or []
    chosen = candidates[: min(more, BUDGET_CANDIDATES)]
    if more == 0:
        note = Reason("half_width_reached", half=half, target=target_half_width)
    elif len(candidates) < more:
        note = Reason("half_width_judge_more", half=half, n=n, more=more, total=total, target=target_half_width,
                      candidates=len(candidates), judge_more=more - len(candidates))
    else:
        note = Reason("half_width", half=half, n=n, more=more, total=total, target=target_half_width)
    return {"target_half_width": target_half_width, "half_width": half, "more_targets": more,
            "candidates": chosen, "n_candidates": len(candidates), **noted(note)}


def budget_candidates(merged: pd.DataFrame) -> list[str]:
    """Return the targets with a usable verdict but no gold (labelling them adds to n), by sample then target."""
    mask = (merged["excluded"] == "no_gold").to_numpy()
    if not mask.any():
        return []
    column = merged["target_key"]
    if isinstance(column.dtype, pd.CategoricalDtype):  # the report's keys: only the chosen rows' text
        keys = np.asarray(column.cat.categories, dtype=object)[column.cat.codes.to_numpy()[mask]]
    else:
        keys = column.to_numpy(dtype=object)[mask]
    sample_ids = merged["sample_id"].to_numpy()[mask]
    if sample_ids.dtype == object:
        sample_ids = np.asarray(sample_ids.tolist(), dtype=np.int64)
    ids = np.fromiter((int(key.partition(":")[2]) for key in keys.tolist()), dtype=np.int64, count=len(keys))
    # One stable sort of integers (the last key of lexsort is the primary): the order of a stable sort by
    # (sample id, target id), without a Python key per target.
    return keys[np.lexsort((ids, sample_ids))].tolist()



def targets_in_dataset(session: Session, dataset_id: int, target: str, sample_ids: set[int] | None = None) -> int:
    """Return how many targets of a task's kind the dataset has: its active claims, contexts or steps, or its samples
    (every task on samples, pairwise included); only those of `sample_ids` (a split) when given."""
    kind = target_kind(target)
    if kind.within:  # a part of the sample: its active rows (claims, contexts, steps)
        row = kind.row
        query = (select(col(row.sample_id)).join(Sample, col(Sample.id) == col(row.sample_id))
                 .where(Sample.dataset_id == dataset_id, col(row.active).is_(True)))
    else:
        query = select(col(Sample.id)).where(Sample.dataset_id == dataset_id)
    if sample_ids is None:
        return int(session.exec(select(func.count()).select_from(query.subquery())).one())
    # A split: filtered here, not with an IN list (thousands of ids would hit SQLite's parameter limit).
    return sum(1 for sample_id in session.exec(query) if sample_id in sample_ids)


def cap_to_dataset(section: dict, available: int) -> None:
    """Keep the section's `labels_to_decide`, `labels_needed` and `budget` within the targets the dataset has.

    The 1/√n extrapolation knows nothing of the dataset's size, so it may ask for more targets
    than exist (≈ 789 more for a dataset of 358 claims). When it does, the block gains
    `capped: true`, `available` (the dataset's targets of this kind), `targets_left` (those not
    yet counted in n) and `extrapolated` (what the extrapolation asked for), and its note says so.
    For the decision (`labels_to_decide`, `labels_needed`) `more_targets` becomes None, which
    every renderer reads as "more labels are not expected to settle it" — labelling every target
    left would not, by the same extrapolation; the `budget` (a CI width goal) keeps
    `more_targets` = `targets_left`, the most that can be labelled.
    """
    n = int(section.get("n") or 0)
    left = max(available - n, 0)
    for key in ("labels_to_decide", "labels_needed", "budget"):
        block = section.get(key)
        if not isinstance(block, dict) or block.get("more_targets") is None or block["more_targets"] <= left:
            continue
        wanted = block["more_targets"]
        block.update(more_targets=left if key == "budget" else None, capped=True, available=available,
                     targets_left=left, extrapolated=wanted)
        if "candidates" in block:
            block["candidates"] = block["candidates"][:left]
        block.update(noted(Reason("capped_to_dataset", wanted=wanted, available=available, left=left, n=n)))
