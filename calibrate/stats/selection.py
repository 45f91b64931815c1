"""Lower confidence bounds that know how many versions were looked at (selection among candidates).

When the best of *m* versions scored on the same split is chosen, its own confidence interval
is too optimistic: each bound alone holds with probability 1 − α, but the chance that *some*
bound is above its true value grows with *m* (the winner's curse). Two corrections, both on the
bootstrap resamples of every candidate drawn on the **same** resampled clusters (the index
matrix of :func:`calibrate.stats.intervals.bootstrap_index_matrix`):

``bonferroni``
    Each candidate's percentile lower bound at level α/m (union bound over the *m* looks).
    With one look it is the lower end of the usual two-sided percentile interval.

``max_statistic``
    The single-step max-statistic (min-p) bootstrap (Westfall & Young 1993; Romano & Wolf
    2005): each resample's value of each candidate is turned into its rank within that
    candidate's resamples, ``u[b, j]``; the level γ is the α-quantile of ``min_j u[b, j]``, the
    most extreme candidate of each resample; every bound is its candidate's percentile at γ.
    Correlated candidates (prompt versions judged on the same targets mostly agree) make the
    minimum less extreme than for independent ones, so γ is larger than α/k and the bounds
    tighter than Bonferroni's; with one candidate γ = α, the percentile bound itself. Looks
    outside the candidates (versions scored on the split before) keep a Bonferroni share: the
    candidates' block is tested at α·k/m, each other look at α/m, which sums to α.

In both, α is one-sided: ``(1 - confidence) / 2``, the lower tail of the two-sided interval the
dashboard shows, so one look gives exactly the lower end of that interval.

References
----------
.. [1] Westfall, P. H. and Young, S. S. (1993). *Resampling-Based Multiple Testing*. Wiley
   (single-step min-p adjustment, chapter 2).
.. [2] Romano, J. P. and Wolf, M. (2005). Exact and approximate stepdown methods for multiple
   hypothesis testing. *JASA* 100(469), 94-108.
.. [3] Dunn, O. J. (1961). Multiple comparisons among means. *JASA* 56(293), 52-64 (Bonferroni).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["ADJUSTMENTS", "SelectionBounds", "resamples_needed", "selection_lower_bounds"]

ADJUSTMENTS = ("max_statistic", "bonferroni")
MIN_TAIL_RESAMPLES = 20  # resamples expected below the adjusted bound, at least


@dataclass(frozen=True)
class SelectionBounds:
    """Each candidate's lower bound adjusted for the looks, and the one-sided tail level each was read at."""

    lower: list[float | None]
    level: float  # the quantile of each candidate's resamples its bound is (α/m for Bonferroni, γ for max-statistic)
    alpha: float  # the family's one-sided α: (1 - confidence) / 2
    looks: int
    method: str


def resamples_needed(looks: int, *, confidence: float = 0.95, floor: int = 2000, cap: int = 100_000) -> int:
    """Return how many resamples read a bound at level α/looks with MIN_TAIL_RESAMPLES below it (at least `floor`)."""
    alpha = (1.0 - confidence) / 2.0
    return int(min(cap, max(floor, math.ceil(MIN_TAIL_RESAMPLES * max(1, looks) / alpha))))


def selection_lower_bounds(resamples: np.ndarray, *, looks: int, confidence: float = 0.95,
                           method: str = "max_statistic") -> SelectionBounds:
    """Return simultaneous lower bounds for k candidates among `looks` versions looked at.

    Parameters
    ----------
    resamples : numpy.ndarray, shape (B, k)
        Column ``j``: candidate ``j``'s statistic (κ, ρ) on each of the same ``B`` cluster
        resamples; NaN where it is undefined on a resample (left out of that candidate's
        quantiles and of the minimum).
    looks : int
        How many versions were ever scored on the split (at least ``k``: the candidates are looks).
    confidence : float
        Two-sided confidence of the unadjusted interval; the family's one-sided α is
        ``(1 - confidence) / 2``.
    method : {"max_statistic", "bonferroni"}

    Returns
    -------
    SelectionBounds
        ``lower[j]`` is None when candidate ``j`` has fewer than two defined resamples.

    References
    ----------
    .. [1] Westfall, P. H. and Young, S. S. (1993). *Resampling-Based Multiple Testing*. Wiley.
    .. [2] Romano, J. P. and Wolf, M. (2005). *JASA* 100(469), 94-108.
    """
    if method not in ADJUSTMENTS:
        raise ValueError(f"method must be one of {ADJUSTMENTS}, not {method!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    values = np.asarray(resamples, dtype=float)
    if values.ndim != 2:
        raise ValueError("resamples must be a (B, k) array")
    k = values.shape[1]
    looks = max(int(looks), k, 1)
    alpha = (1.0 - confidence) / 2.0
    if k == 0:
        return SelectionBounds([], alpha / looks, alpha, looks, method)
    if method == "bonferroni":
        level = alpha / looks
    else:
        level = _min_rank_level(values, alpha * k / looks)
    lower = []
    for j in range(k):
        column = values[:, j]
        column = column[np.isfinite(column)]
        lower.append(float(np.quantile(column, level)) if column.size >= 2 else None)
    return SelectionBounds(lower, float(level), alpha, looks, method)


def _min_rank_level(values: np.ndarray, alpha_block: float) -> float:
    """Return γ: the `alpha_block`-quantile, over resamples, of the smallest rank of any candidate in it.

    A candidate's rank of resample b is the share of its defined resamples at or below it
    (mid-ranks for ties, so a constant column gives 1/2, never an extreme); undefined values
    rank 1 (never the most extreme). γ is never below alpha_block / k (Bonferroni's level
    for the block) nor above alpha_block.
    """
    b, k = values.shape
    ranks = np.ones((b, k))
    for j in range(k):
        column = values[:, j]
        ok = np.isfinite(column)
        defined = column[ok]
        if defined.size == 0:
            continue
        ordered = np.sort(defined)
        below = np.searchsorted(ordered, defined, side="left")
        through = np.searchsorted(ordered, defined, side="right")
        ranks[ok, j] = (below + through) / (2.0 * defined.size)
    smallest = ranks.min(axis=1)
    gamma = float(np.quantile(smallest, alpha_block))
    return min(max(gamma, alpha_block / k), alpha_block)
