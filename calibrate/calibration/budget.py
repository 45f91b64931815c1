"""How many more labels would settle a decision or narrow a confidence interval."""

from __future__ import annotations

import math

import pandas as pd

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
    pairs = zip(merged["sample_id"].to_numpy()[mask].tolist(), merged["target_key"].to_numpy()[mask].tolist(), strict=True)
    return [key for _, key in sorted(pairs, key=lambda p: (p[0], int(p[1].partition(":")[2])))]
