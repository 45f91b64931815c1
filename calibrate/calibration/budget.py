"""How many more labels would settle a decision or narrow a confidence interval."""

from __future__ import annotations

import math

import pandas as pd


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
        return {"more_targets": None, "note": "the estimate sits on the threshold: no number of labels is expected to settle it"}
    total = math.ceil(n * (half / gap) ** 2)
    if total > 100 * n:
        return {"more_targets": None,
                "note": (f"the estimate {value:.3f} is too close to the threshold {threshold} for more labels to settle it "
                         f"in practice (it would take over {100 * n} labelled targets)")}
    return {
        "more_targets": max(total - n, 0),
        "note": (f"the CI [{low:.3f}, {high:.3f}] straddles {threshold}; about {max(total - n, 0)} more labelled "
                 f"targets (n ≈ {total}) would be expected to settle it, assuming the estimate stays at "
                 f"{value:.3f} and the CI half-width shrinks as 1/√n"),
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
        note = f"the CI half-width {half:.3f} is already within {target_half_width:g}"
    else:
        note = (f"the CI half-width is {half:.3f} with n = {n}; about {more} more labelled targets (n ≈ {total}) would be "
                f"expected to bring it under {target_half_width:g}, assuming it shrinks as 1/√n")
        if len(candidates) < more:
            note += (f"; only {len(candidates)} judged targets lack gold, so the judge must also judge "
                     f"{more - len(candidates)} more targets")
    return {"target_half_width": target_half_width, "half_width": half, "more_targets": more,
            "candidates": chosen, "n_candidates": len(candidates), "note": note}


def budget_candidates(merged: pd.DataFrame) -> list[str]:
    """Return the targets with a usable verdict but no gold (labelling them adds to n), by sample then target."""
    mask = (merged["excluded"] == "no_gold").to_numpy()
    if not mask.any():
        return []
    pairs = zip(merged["sample_id"].to_numpy()[mask].tolist(), merged["target_key"].to_numpy()[mask].tolist(), strict=True)
    return [key for _, key in sorted(pairs, key=lambda p: (p[0], int(p[1].partition(":")[2])))]
