"""Cluster bootstrap confidence intervals, vectorised over resamples.

Over 800 lines because its engines are one private protocol: each statistic's engine
(``_KappaEngine``, ``_PearsonEngine``, ``_TieTableEngine``, ``_SpearmanEngine``,
``_KendallEngine``, ``_GenericEngine``) answers ``point``, ``resample`` and ``jackknife``, and
one private driver (``_run``, ``_estimate``) runs them on the same blocks of draws, the
paired difference running two engines on one set of draws. Split across modules, those
classes and the driver would have to become public API (no private helper is imported across
modules), or be copied. The draws, the percentile and BCa intervals and the factorising of
clusters are already public and reused (``stats.paired`` imports them): they are not why the
file is long.

Why clusters
    The claims extracted from one answer (a *sample*) share the question, the context and
    the answer's author: their labels are correlated.  Resampling individual claims as if
    they were independent understates the variance and gives intervals that are too narrow.
    The cluster (or "case") bootstrap resamples whole clusters with replacement and keeps
    every claim of a drawn cluster, so within-cluster dependence is carried into every
    resample (Field & Welsh 2007; Davison & Hinkley 1997, section 3.8).

How
    One ``numpy.random.Generator`` (``default_rng(seed)``) draws the ``B x G`` index matrix
    of resampled cluster ids, **one row per call** (``rng.integers(0, G, size=G,
    dtype=np.int32)`` for each resample in turn), so the matrix does not depend on how it
    is chunked.  Each row becomes multiplicity counts (``np.bincount``), blocks of rows form
    a ``rows x G`` count matrix, and the statistic is computed for all resamples of the
    block at once:

    - kappa: per-cluster ``K x K`` contingency tables are precomputed once; the resampled
      tables are ``counts @ tables`` (``B x K*K``) and kappa is evaluated on all of them;
    - Pearson: the same with per-cluster sufficient statistics (counts, sums, squares and
      cross-products of the centred scores);
    - Spearman and Kendall on discrete scores (at most 4,096 distinct (x, y) tie-group
      cells, e.g. Likert scales): per-cluster contingency tables of tie groups, resampled as
      ``counts @ tables`` exactly like kappa; mid-ranks, rho and tau-b (concordant and
      discordant pairs from 2-D cumulative sums) follow from each table in ``O(kx ky)``;
    - Spearman on many distinct values: the average ranks of a resample equal *weighted*
      ranks of the original rows (weights = cluster multiplicities), computed by cumulative
      sums along one fixed sort order (no per-resample sort), then a weighted Pearson
      correlation of the ranks; ``O(B n)`` time in blocks of bounded memory;
    - Kendall on many distinct values: slower path, one ``scipy.stats.kendalltau`` call per
      resample on the materialised rows (``O(B n log n)``), and one per cluster for BCa.

    Every path reproduces, to rounding (~1e-15), the statistic a naive loop computes on
    the materialised resample; the tests check this against scikit-learn and scipy.

One item per cluster (kappa)
    When every cluster holds a single item (a pairwise preference per sample), resampling G
    clusters with replacement makes the resampled K x K table exactly Multinomial(G, table /
    G): :func:`multinomial_bootstrap_kappa` draws those tables directly, ``O(B K^2)`` instead
    of ``O(B G)`` (100,000 items: about a millisecond instead of about two seconds). Same
    distribution, different random stream: it does not use the index matrix.

Intervals
    ``"percentile"``: the ``(1-c)/2`` and ``(1+c)/2`` quantiles of the resampled statistics
    (``numpy.quantile``, linear interpolation).  ``"bca"``: bias-corrected and accelerated
    (Efron 1987), with bias correction ``z0`` from the share of resamples below the point
    estimate (ties count one half) and acceleration from the leave-one-cluster-out
    jackknife (vectorised the same way).  Resamples on which the statistic is undefined
    (e.g. every drawn claim has the same label, so expected agreement is 1) are dropped and
    counted in ``extra["n_undefined_resamples"]``; the interval is then conditional on the
    statistic being defined.

References
----------
.. [1] Efron, B. (1987). Better bootstrap confidence intervals. *JASA* 82(397), 171-185.
.. [2] Field, C. A. and Welsh, A. H. (2007). Bootstrapping clustered data. *JRSS B* 69(3),
   369-390.
.. [3] Davison, A. C. and Hinkley, D. V. (1997). *Bootstrap Methods and their Application*.
   Cambridge University Press (sections 3.8 and 5.3).
.. [4] Efron, B. and Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*, chapter
   14. Chapman & Hall.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from calibrate.reasons import Reason, join
from calibrate.stats._common import as_float_array, to_list
from calibrate.stats.agreement import disagreement_weights, kappa_from_tables
from calibrate.stats.correlation import CORRELATION_METHODS, undefined_reason
from calibrate.stats.reliability import difference_matrix, krippendorff_alpha_counts
from calibrate.stats.result import Estimate

__all__ = [
    "CI_METHODS",
    "bootstrap_index_matrix",
    "factorize_clusters",
    "kappa_resamples",
    "corr_resamples",
    "cluster_bootstrap_kappa",
    "multinomial_bootstrap_kappa",
    "cluster_bootstrap_corr",
    "cluster_bootstrap",
    "paired_cluster_bootstrap_diff",
    "cluster_bootstrap_alpha_counts",
]

CI_METHODS = ("percentile", "bca")

#: Upper bound on the number of array elements in one (rows x clusters) or (rows x items)
#: block; bounds peak memory at a few tens of MB whatever the number of resamples.
_CHUNK_ELEMENTS = 2**21
#: Target size of the per-row (rows x n) temporaries of the Spearman row path.
_CACHE_ELEMENTS = 2**17


# --------------------------------------------------------------------------- index machinery


def factorize_clusters(clusters: Any) -> tuple[np.ndarray, list]:
    """Return integer cluster codes ``0..G-1`` (order of first appearance) and the ids.

    Parameters
    ----------
    clusters : array-like
        Cluster id of each row (any hashable).  Missing ids raise ``ValueError``.

    Returns
    -------
    codes : numpy.ndarray of int64
        ``codes[i]`` is the position of row ``i``'s cluster in ``uniques``.
    uniques : list
        Distinct cluster ids in order of first appearance.  Column ``g`` of a bootstrap
        index matrix refers to ``uniques[g]``.

    References
    ----------
    .. [1] McKinney, W. (2010). Data structures for statistical computing in Python.
       *Proceedings of the 9th Python in Science Conference*, 56-61 (``pandas.factorize``).
    """
    if isinstance(clusters, np.ndarray) and clusters.dtype.kind in "iub":
        arr = clusters
    else:
        items = to_list(clusters)
        arr = np.empty(len(items), dtype=object)
        for i, v in enumerate(items):
            arr[i] = v
    codes, uniques = pd.factorize(arr, sort=False, use_na_sentinel=True)
    if (codes < 0).any():
        raise ValueError("clusters must not contain missing ids")
    return codes.astype(np.int64), list(np.asarray(uniques, dtype=object).tolist())


def _rows_per_draw(n_clusters: int) -> int:
    """Rows of the index matrix drawn per generator call (depends on ``G`` only)."""
    return max(1, min(64, 2**20 // n_clusters))


def bootstrap_draws(n_clusters: int, n_resamples: int, seed: int | None) -> Iterator[np.ndarray]:
    """Yield the bootstrap index matrix as the canonical sequence of generator calls.

    Call ``k`` draws rows ``[kR, min((k+1)R, B))`` with ``rng.integers(0, G, size=(rows, G),
    dtype=int32)`` where ``R = _rows_per_draw(G)``; the matrix therefore depends only on
    ``(G, B, seed)``, never on how the consumer blocks it.
    """
    rng = np.random.default_rng(seed)
    step = _rows_per_draw(n_clusters)
    dtype = np.int32 if n_clusters < 2**31 else np.int64
    for start in range(0, n_resamples, step):
        yield rng.integers(0, n_clusters, size=(min(step, n_resamples - start), n_clusters), dtype=dtype)


def _block_rows(n_clusters: int, n_resamples: int, wanted: int) -> int:
    """Round a block size to whole generator calls (at least one call)."""
    step = _rows_per_draw(n_clusters)
    return min(max(step, wanted - wanted % step), max(n_resamples, 1))


def _count_blocks(n_clusters: int, n_resamples: int, seed: int | None, rows_per_block: int) -> Iterator[np.ndarray]:
    """Yield (rows x G) multiplicity counts of consecutive blocks of the index matrix.

    One float buffer is reused for every block (fresh large allocations would pay page
    faults each time): consumers must use a block before asking for the next one.
    """
    rows = _block_rows(n_clusters, n_resamples, rows_per_block)
    buf = np.empty((rows, n_clusters))
    filled = 0
    for draw in bootstrap_draws(n_clusters, n_resamples, seed):
        if filled + draw.shape[0] > rows:
            yield buf[:filled]
            filled = 0
        for r in range(draw.shape[0]):
            buf[filled + r] = np.bincount(draw[r], minlength=n_clusters)
        filled += draw.shape[0]
    if filled:
        yield buf[:filled]


def _type_count_blocks(types: np.ndarray, n_types: int, n_resamples: int, seed: int | None) -> Iterator[np.ndarray]:
    """Yield (rows x T) counts of how often a cluster of each type was drawn, one block per generator call.

    ``types[g]`` is cluster ``g``'s type (clusters of one type contribute the same statistics, e.g. the
    same contingency table), so ``counts @ per_type`` equals the cluster counts times the per-cluster
    statistics, from the same draws (:func:`bootstrap_draws`), in one gather and one ``bincount`` per
    call instead of a ``G``-wide count row per resample.
    """
    small = n_types * _rows_per_draw(len(types)) < 2**31
    codes = types.astype(np.int32 if small else np.int64)
    for draw in bootstrap_draws(len(types), n_resamples, seed):
        rows = draw.shape[0]
        drawn = np.take(codes, draw)
        drawn += (np.arange(rows, dtype=drawn.dtype) * n_types)[:, None]
        yield np.bincount(drawn.ravel(), minlength=rows * n_types).reshape(rows, n_types)


def bootstrap_index_matrix(n_clusters: int, *, n_resamples: int = 2000, seed: int | None = 0) -> np.ndarray:
    """Return the ``n_resamples x n_clusters`` matrix of resampled cluster indices.

    This is exactly the matrix the ``cluster_bootstrap_*`` functions draw for the same
    ``seed`` (they generate it block by block), so it can be used to reproduce or check a
    bootstrap with a naive loop.  Its first ``m`` rows do not depend on ``n_resamples``.

    Parameters
    ----------
    n_clusters : int
        Number of clusters ``G``.
    n_resamples : int
        Number of bootstrap resamples ``B``.
    seed : int or None
        Seed of ``numpy.random.default_rng``; ``None`` is not reproducible.

    Returns
    -------
    numpy.ndarray of int64, shape (B, G)
        Row ``b`` lists the clusters drawn (with replacement) for resample ``b``.

    References
    ----------
    .. [1] Davison, A. C. and Hinkley, D. V. (1997). *Bootstrap Methods and their
       Application*, section 3.8. Cambridge University Press.
    """
    _check_resamples(n_resamples)
    if n_clusters < 1:
        raise ValueError("n_clusters must be positive")
    return np.vstack(list(bootstrap_draws(n_clusters, n_resamples, seed))).astype(np.int64)


def _counts(indices: np.ndarray, n_clusters: int) -> np.ndarray:
    """Return the (rows x G) float matrix of how often each cluster was drawn."""
    if indices.ndim != 2 or (indices.size and (indices.min() < 0 or indices.max() >= n_clusters)):
        raise ValueError(f"indices must be a 2-D array of cluster indices in [0, {n_clusters})")
    c = indices.shape[0]
    flat = (indices + (np.arange(c, dtype=np.int64) * n_clusters)[:, None]).ravel()
    return np.bincount(flat, minlength=c * n_clusters).reshape(c, n_clusters).astype(float)


def _check_resamples(n_resamples: int) -> None:
    if int(n_resamples) != n_resamples or n_resamples < 1:
        raise ValueError("n_resamples must be a positive integer")


# --------------------------------------------------------------------------- engines
#
# An engine holds one statistic on one data set, precomputed per cluster.  It answers:
#   point()              -> the statistic on the full data (NaN if undefined)
#   resample(counts)     -> statistic for each row of a (rows x G) multiplicity matrix
#   jackknife()          -> statistic leaving each cluster out in turn, shape (G,)
#   rows_per_block(G)    -> how many resamples to process at once


class _ConstantCheck:
    """Detect resamples in which a variable is constant, from per-cluster min and max."""

    def __init__(self, values: np.ndarray, cl: np.ndarray, g: int):
        self.lo = np.full(g, np.inf)
        self.hi = np.full(g, -np.inf)
        np.minimum.at(self.lo, cl, values)
        np.maximum.at(self.hi, cl, values)

    def resample(self, counts: np.ndarray) -> np.ndarray:
        drawn = counts > 0
        hi = np.where(drawn, self.hi, -np.inf).max(axis=1)
        lo = np.where(drawn, self.lo, np.inf).min(axis=1)
        return hi <= lo

    def jackknife(self) -> np.ndarray:
        g = self.lo.size
        if g == 1:
            return np.ones(1, dtype=bool)
        inf = np.array([np.inf])
        pre_lo = np.concatenate([inf, np.minimum.accumulate(self.lo)[:-1]])
        suf_lo = np.concatenate([np.minimum.accumulate(self.lo[::-1])[::-1][1:], inf])
        pre_hi = np.concatenate([-inf, np.maximum.accumulate(self.hi)[:-1]])
        suf_hi = np.concatenate([np.maximum.accumulate(self.hi[::-1])[::-1][1:], -inf])
        return np.maximum(pre_hi, suf_hi) <= np.minimum(pre_lo, suf_lo)


def _row_types(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return each row's type (equal rows of non-negative integers, one type) and one row position per type."""
    cells = rows.shape[1]
    radix = int(rows.max(initial=0)) + 1
    if radix ** cells < 2**62:  # each row as one integer (its cells the digits): a 1-D factorization
        types = pd.factorize(rows.astype(np.int64) @ (radix ** np.arange(cells, dtype=np.int64)))[0].astype(np.int64)
    else:
        types = np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
    one = np.zeros(int(types.max(initial=-1)) + 1, dtype=np.int64)
    one[types] = np.arange(len(types))  # any row of each type: they are equal
    return types, one


class _KappaEngine:
    def __init__(self, a: np.ndarray, b: np.ndarray, cl: np.ndarray, g: int, k: int, w: np.ndarray):
        flat = cl * (k * k) + a * k + b
        self.tables = np.bincount(flat, minlength=g * k * k).reshape(g, k * k).astype(float)
        self.total = self.tables.sum(axis=0)
        self.w = w

    def types(self) -> tuple[np.ndarray, int] | None:
        """Return (each cluster's type, the number of types) when few distinct tables make the clusters (a sample's
        claims give one of a few hundred tables), else None; `resample_types` then takes counts per type. Tables of
        counts sum exactly in floats, so the resampled tables, and kappa, are those of `resample`."""
        g = self.tables.shape[0]
        if g < 64:
            return None
        types, one = _row_types(self.tables)
        if len(one) > g // 8:
            return None
        self.type_tables = self.tables[one]
        return types, len(one)

    def resample_types(self, counts: np.ndarray) -> np.ndarray:
        return kappa_from_tables(counts @ self.type_tables, self.w)

    def point(self) -> float:
        return float(kappa_from_tables(self.total[None], self.w)[0])

    def resample(self, counts: np.ndarray) -> np.ndarray:
        return kappa_from_tables(counts @ self.tables, self.w)

    def jackknife(self) -> np.ndarray:
        return kappa_from_tables(self.total[None] - self.tables, self.w)

    def rows_per_block(self, g: int) -> int:
        return max(1, _CHUNK_ELEMENTS // g)


class _AlphaEngine:
    """Krippendorff's alpha of a units × values table of counts, each unit a cluster: a unit's coincidences
    ``(c cᵀ − diag c) / (m − 1)`` (m ≥ 2 values) are its share of the coincidence matrix, so a resample's matrix
    is the units' shares summed by their multiplicities, counted per type of unit (units with equal counts)."""

    def __init__(self, counts: np.ndarray, level: str, values: Sequence, theta: float):
        self.unit_types, one = _row_types(counts)
        c = counts[one].astype(float)
        m = c.sum(axis=1)
        scale = np.divide(1.0, m - 1.0, out=np.zeros_like(m), where=m >= 2)
        k = c.shape[1]
        self.shares = ((c[:, :, None] * c[:, None, :] - c[:, :, None] * np.eye(k)) * scale[:, None, None]).reshape(len(one), k * k)
        self.total = np.bincount(self.unit_types, minlength=len(one)) @ self.shares
        self.k, self.level, self.theta = k, level, theta
        # reliability's δ² for a level that does not depend on the value totals; ordinal: from each resample's totals
        self.delta2 = None if level == "ordinal" else difference_matrix(level, list(values), np.zeros(k))

    def _ordinal_delta2(self, n_c: np.ndarray) -> np.ndarray:
        """Return δ² per row of value totals (reliability's ordinal metric: the totals between two values)."""
        k = self.k
        cum = np.concatenate([np.zeros((n_c.shape[0], 1)), np.cumsum(n_c, axis=1)], axis=1)
        i, j = np.minimum.outer(np.arange(k), np.arange(k)), np.maximum.outer(np.arange(k), np.arange(k))
        between = cum[:, j + 1] - cum[:, i]
        return (between - (n_c[:, i] + n_c[:, j]) / 2.0) ** 2

    def _alpha(self, o: np.ndarray) -> np.ndarray:
        o = o.reshape(-1, self.k, self.k)
        n_c = o.sum(axis=2)
        n_total = n_c.sum(axis=1)
        if self.delta2 is None:
            d2 = self._ordinal_delta2(n_c)
            expected = np.einsum("ri,rij,rj->r", n_c, d2, n_c)
            observed = np.einsum("rij,rij->r", o, d2)
        else:
            expected = np.einsum("ri,ij,rj->r", n_c, self.delta2, n_c)
            observed = np.einsum("rij,ij->r", o, self.delta2)
        out = np.full(o.shape[0], np.nan)
        ok = expected > 0
        out[ok] = 1.0 - (n_total[ok] - 1.0) * observed[ok] / expected[ok]
        return out

    def point(self) -> float:
        return self.theta  # krippendorff_alpha_counts's own value on the whole table

    def types(self) -> tuple[np.ndarray, int]:
        return self.unit_types, self.shares.shape[0]

    def resample_types(self, counts: np.ndarray) -> np.ndarray:
        return self._alpha(counts @ self.shares)

    def resample(self, counts: np.ndarray) -> np.ndarray:
        per_type = np.stack([np.bincount(self.unit_types, weights=row, minlength=self.shares.shape[0]) for row in counts])
        return self._alpha(per_type @ self.shares)

    def jackknife(self) -> np.ndarray:
        return self._alpha(self.total[None] - self.shares)[self.unit_types]

    def rows_per_block(self, g: int) -> int:
        return max(1, _CHUNK_ELEMENTS // g)


def _finish(r: np.ndarray, vx: np.ndarray, vy: np.ndarray, ref_x: np.ndarray, ref_y: np.ndarray,
            exact_constant: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Clip correlations and set NaN where a side is constant.

    Rounding can leave a tiny non-zero variance on a constant resample, so rows whose
    variance is below ``1e-9`` of its scale are re-checked exactly (per-cluster min/max);
    usually there are none, which keeps the exact check off the hot path.
    """
    with np.errstate(all="ignore"):
        r = np.clip(r, -1.0, 1.0)
        suspect = ~(vx > 1e-9 * ref_x) | ~(vy > 1e-9 * ref_y)
    if suspect.any():
        rows = np.flatnonzero(suspect)
        r[rows[exact_constant(rows)]] = np.nan
    r[~np.isfinite(r)] = np.nan
    return r


class _PearsonEngine:
    def __init__(self, x: np.ndarray, y: np.ndarray, cl: np.ndarray, g: int):
        xc, yc = x - x.mean(), y - y.mean()
        cols = [np.ones_like(xc), xc, yc, xc * xc, yc * yc, xc * yc]
        self.stats = np.stack([np.bincount(cl, weights=c, minlength=g) for c in cols], axis=1)
        self.total = self.stats.sum(axis=0)
        self.cx, self.cy = _ConstantCheck(x, cl, g), _ConstantCheck(y, cl, g)

    @staticmethod
    def _r(s: np.ndarray, exact_constant: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        n, sx, sy, sxx, syy, sxy = s.T
        with np.errstate(all="ignore"):
            vx = sxx - sx * sx / n
            vy = syy - sy * sy / n
            r = (sxy - sx * sy / n) / np.sqrt(vx * vy)
        return _finish(r, vx, vy, sxx, syy, exact_constant)

    def point(self) -> float:
        return float(self._r(self.total[None], lambda rows: np.zeros(rows.size, dtype=bool))[0])

    def resample(self, counts: np.ndarray) -> np.ndarray:
        return self._r(counts @ self.stats, lambda rows: self.cx.resample(counts[rows]) | self.cy.resample(counts[rows]))

    def jackknife(self) -> np.ndarray:
        constant = self.cx.jackknife() | self.cy.jackknife()
        return self._r(self.total[None] - self.stats, lambda rows: constant[rows])

    def rows_per_block(self, g: int) -> int:
        return max(1, _CHUNK_ELEMENTS // g)


class _RankIndex:
    """One fixed sort order of a variable and its tie groups, for weighted average ranks."""

    def __init__(self, values: np.ndarray):
        self.order = np.argsort(values, kind="stable")
        s = values[self.order]
        new = np.concatenate([[True], s[1:] != s[:-1]])
        self.starts = np.flatnonzero(new)
        self.n_groups = self.starts.size
        group_sorted = np.cumsum(new) - 1
        self.group = np.empty_like(group_sorted)
        self.group[self.order] = group_sorted

    def ranks(self, w: np.ndarray) -> np.ndarray:
        """Average ranks of every row in the resample where row ``i`` appears ``w[:, i]`` times."""
        tot = np.add.reduceat(w[:, self.order], self.starts, axis=1)
        avg = np.cumsum(tot, axis=1) - tot + (tot + 1.0) / 2.0
        return avg[:, self.group]


def _mid_ranks(tot: np.ndarray) -> np.ndarray:
    """Average rank of each tie group given the (rows x groups) group sizes."""
    return np.cumsum(tot, axis=-1) - tot + (tot + 1.0) / 2.0


class _TieTableEngine:
    """Rank correlations from per-cluster contingency tables of (x tie group, y tie group).

    Scores on a small scale (Likert 1-5, 1-10) have few distinct values: a resample is then
    fully described by the ``kx x ky`` table of weighted counts, obtained for all resamples
    at once as ``counts @ tables`` exactly like kappa, and Spearman's rho and Kendall's
    tau-b follow from the table in ``O(kx ky)`` per resample.
    """

    def __init__(self, method: str, rx: _RankIndex, ry: _RankIndex, cl: np.ndarray, g: int):
        self.method, self.kx, self.ky, self.g = method, rx.n_groups, ry.n_groups, g
        flat = cl * (self.kx * self.ky) + rx.group * self.ky + ry.group
        self.tables = np.bincount(flat, minlength=g * self.kx * self.ky).reshape(g, -1).astype(float)
        self.total = self.tables.sum(axis=0)

    def _stat(self, t: np.ndarray) -> np.ndarray:
        n = t.reshape(-1, self.kx, self.ky)
        tx, ty = n.sum(axis=2), n.sum(axis=1)
        constant = (np.count_nonzero(tx, axis=1) <= 1) | (np.count_nonzero(ty, axis=1) <= 1)
        with np.errstate(all="ignore"):
            if self.method == "spearman":
                ax, ay = _mid_ranks(tx), _mid_ranks(ty)
                w = tx.sum(axis=1, keepdims=True)
                dx = ax - (tx * ax).sum(axis=1, keepdims=True) / w
                dy = ay - (ty * ay).sum(axis=1, keepdims=True) / w
                cov = np.einsum("cij,ci,cj->c", n, dx, dy)
                r = cov / np.sqrt((tx * dx * dx).sum(axis=1) * (ty * dy * dy).sum(axis=1))
            else:
                c = n.shape[0]
                # ge[i, j] = sum_{i' >= i, j' >= j} n ; le_ge[i, j] = sum_{i' >= i, j' <= j} n
                ge = np.zeros((c, self.kx + 1, self.ky + 1))
                ge[:, :-1, :-1] = n[:, ::-1, ::-1].cumsum(axis=1).cumsum(axis=2)[:, ::-1, ::-1]
                gl = np.zeros((c, self.kx + 1, self.ky + 1))
                gl[:, :-1, 1:] = n[:, ::-1, :].cumsum(axis=1)[:, ::-1, :].cumsum(axis=2)
                concordant = (n * ge[:, 1:, 1:]).sum(axis=(1, 2))
                discordant = (n * gl[:, 1:, :-1]).sum(axis=(1, 2))
                w = tx.sum(axis=1)
                n0 = w * (w - 1.0) / 2.0
                n1 = (tx * (tx - 1.0) / 2.0).sum(axis=1)
                n2 = (ty * (ty - 1.0) / 2.0).sum(axis=1)
                r = (concordant - discordant) / np.sqrt((n0 - n1) * (n0 - n2))
            r = np.clip(r, -1.0, 1.0)
        r[constant | ~np.isfinite(r)] = np.nan
        return r

    def point(self) -> float:
        return float(self._stat(self.total[None])[0])

    def resample(self, counts: np.ndarray) -> np.ndarray:
        return self._stat(counts @ self.tables)

    def jackknife(self) -> np.ndarray:
        out = np.empty(self.g)
        step = self.rows_per_block(self.g)
        for s in range(0, self.g, step):
            out[s : s + step] = self._stat(self.total[None] - self.tables[s : s + step])
        return out

    def rows_per_block(self, g: int) -> int:
        return max(1, _CHUNK_ELEMENTS // max(g, 4 * self.kx * self.ky))


class _SpearmanEngine:
    """Spearman on rows, for many distinct values (``O(B n)`` time, bounded memory).

    Work in the order that sorts ``x``: the weights of a resample are ``W = counts[:, cl]``
    (row multiplicities); mid-ranks are cumulative sums of ``W`` (per tie group when ``x``
    has ties); the same weights permuted into ``y`` order give the ``y`` mid-ranks.  Only
    the cross term ``sum W rx ry`` needs the per-row ranks: ``sum W r = m (m + 1) / 2`` and
    ``sum W r^2 = m (m + 1)(2m + 1) / 6 - sum_t (T^3 - T) / 12`` over resample tie blocks
    ``T`` follow in closed form.
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, cl: np.ndarray, g: int, rx: _RankIndex, ry: _RankIndex):
        self.g, self.n = g, x.size
        ox = rx.order
        self.cl_x = cl[ox]
        self.starts_x, self.sizes_x, self.ties_x = self._groups(x[ox])
        y_x = y[ox]
        self.oy = np.argsort(y_x, kind="stable")
        self.inv_oy = np.empty_like(self.oy)
        self.inv_oy[self.oy] = np.arange(self.n)
        self.starts_y, self.sizes_y, self.ties_y = self._groups(y_x[self.oy])
        self.cluster_sizes = np.bincount(cl, minlength=g).astype(float)
        self.cx, self.cy = _ConstantCheck(x, cl, g), _ConstantCheck(y, cl, g)

    @staticmethod
    def _groups(sorted_values: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        new = np.concatenate([[True], sorted_values[1:] != sorted_values[:-1]])
        starts = np.flatnonzero(new)
        sizes = np.diff(np.append(starts, sorted_values.size))
        return starts, sizes, starts.size < sorted_values.size

    @staticmethod
    def _mid_ranks(w: np.ndarray, starts: np.ndarray, sizes: np.ndarray, ties: bool, cube: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mid-ranks of sorted rows with weights ``w`` and the tie term ``sum (T^3 - T)``."""
        if not ties:
            r = np.cumsum(w, axis=1)
            r -= 0.5 * w
            r += 0.5
            return r, cube
        t = np.add.reduceat(w, starts, axis=1)
        avg = np.cumsum(t, axis=1) - 0.5 * t + 0.5
        return np.repeat(avg, sizes, axis=1), (t * t * t - t).sum(axis=1)

    def _weighted(self, counts: np.ndarray, exact_constant: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        m = counts @ self.cluster_sizes
        cube = (counts * counts * counts - counts) @ self.cluster_sizes
        w = counts[:, self.cl_x]
        rx, tx = self._mid_ranks(w, self.starts_x, self.sizes_x, self.ties_x, cube)
        wrx = w * rx
        del rx
        ry_sorted, ty = self._mid_ranks(w[:, self.oy], self.starts_y, self.sizes_y, self.ties_y, cube)
        del w
        sxy = np.einsum("ij,ij->i", wrx, ry_sorted[:, self.inv_oy])
        base = m * ((m + 1.0) / 2.0) ** 2
        sum_k2 = m * (m + 1.0) * (2.0 * m + 1.0) / 6.0
        vx = sum_k2 - tx / 12.0 - base
        vy = sum_k2 - ty / 12.0 - base
        with np.errstate(all="ignore"):
            r = (sxy - base) / np.sqrt(vx * vy)
        return _finish(r, vx, vy, base, base, exact_constant)

    def point(self) -> float:
        return float(self._weighted(np.ones((1, self.g)), lambda rows: np.zeros(rows.size, dtype=bool))[0])

    def resample(self, counts: np.ndarray) -> np.ndarray:
        return self._weighted(counts, lambda rows: self.cx.resample(counts[rows]) | self.cy.resample(counts[rows]))

    def jackknife(self) -> np.ndarray:
        out = np.empty(self.g)
        constant = self.cx.jackknife() | self.cy.jackknife()
        step = self.rows_per_block(self.g)
        for start in range(0, self.g, step):
            stop = min(self.g, start + step)
            counts = np.ones((stop - start, self.g))
            counts[np.arange(stop - start), np.arange(start, stop)] = 0.0
            out[start:stop] = self._weighted(counts, lambda rows, start=start: constant[start + rows])
        return out

    def rows_per_block(self, g: int) -> int:
        # keep the (rows x n) temporaries cache-sized (~1 MB): large ones are several
        # times slower per element (page faults and cache misses on every pass)
        return max(1, min(_CHUNK_ELEMENTS // g, _CACHE_ELEMENTS // max(self.n, 1)))


class _KendallEngine:
    """Slow path for many distinct values: one scipy call per resample on the materialised rows."""

    def __init__(self, x: np.ndarray, y: np.ndarray, cl: np.ndarray, g: int):
        self.x, self.y, self.cl, self.g = x, y, cl, g
        self.rows = np.arange(x.size)

    @staticmethod
    def _tau(x: np.ndarray, y: np.ndarray) -> float:
        if undefined_reason(x, y) is not None:
            return np.nan
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            from scipy import stats as sps  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)
            return float(sps.kendalltau(x, y, variant="b").statistic)

    def point(self) -> float:
        return self._tau(self.x, self.y)

    def resample(self, counts: np.ndarray) -> np.ndarray:
        out = np.empty(counts.shape[0])
        for r in range(counts.shape[0]):
            rows = np.repeat(self.rows, counts[r, self.cl].astype(np.int64))
            out[r] = self._tau(self.x[rows], self.y[rows])
        return out

    def jackknife(self) -> np.ndarray:
        return np.array([self._tau(self.x[self.cl != g], self.y[self.cl != g]) for g in range(self.g)])

    def rows_per_block(self, g: int) -> int:
        return max(1, _CHUNK_ELEMENTS // g)


#: Use the tie-table path when the (x groups x y groups) table is at most this big ...
_MAX_TABLE_CELLS = 4096


def _corr_engine(method: str, x: np.ndarray, y: np.ndarray, cl: np.ndarray, g: int, *, path: str = "auto"):
    """Pick the engine for ``method``: Pearson sufficient statistics; tie tables for rank
    correlations of discrete scores; per-row ranks (Spearman) or a scipy loop (Kendall)."""
    if method == "pearson":
        return _PearsonEngine(x, y, cl, g)
    rx, ry = _RankIndex(x), _RankIndex(y)
    cells = rx.n_groups * ry.n_groups
    use_table = cells <= _MAX_TABLE_CELLS and g * cells <= 4 * _CHUNK_ELEMENTS
    if path == "table" or (path == "auto" and use_table):
        return _TieTableEngine(method, rx, ry, cl, g)
    if method == "spearman":
        return _SpearmanEngine(x, y, cl, g, rx, ry)
    return _KendallEngine(x, y, cl, g)


# --------------------------------------------------------------------------- intervals


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """Return the percentile interval of bootstrap values at `confidence`."""
    lo, hi = np.quantile(values, [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0])
    return float(lo), float(hi)


def bca_interval(values: np.ndarray, theta: float, jack: np.ndarray, confidence: float) -> tuple[tuple[float, float], dict, Reason | None]:
    """Return the BCa interval, its constants and a reason to note, or None (falls back to percentile)."""
    b = values.size
    from scipy.special import ndtr, ndtri  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)
    share = (np.count_nonzero(values < theta) + 0.5 * np.count_nonzero(values == theta)) / b
    if share <= 0.0 or share >= 1.0:
        note = Reason("bca_infinite")
        return percentile_interval(values, confidence), {"ci_method_used": "percentile"}, note
    z0 = float(ndtri(share))
    jv = jack[np.isfinite(jack)]
    notes = []
    if jack.size - jv.size:
        notes.append(Reason("jackknife_undefined", count=int(jack.size - jv.size)))
    d = jv.mean() - jv if jv.size else jv
    ss = float((d * d).sum())
    accel = float((d**3).sum() / (6.0 * ss**1.5)) if jv.size >= 2 and ss > 0 else 0.0
    z = ndtri(np.array([(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0]))
    denom = 1.0 - accel * (z0 + z)
    info = {"bias_correction_z0": z0, "acceleration": accel}
    if np.any(denom <= 0):
        notes.append(Reason("bca_out_of_range"))
        return percentile_interval(values, confidence), {**info, "ci_method_used": "percentile"}, join(notes)
    levels = ndtr(z0 + (z0 + z) / denom)
    lo, hi = np.quantile(values, levels)
    return (float(lo), float(hi)), {**info, "ci_method_used": "bca"}, join(notes)


def _run(
    engines: Sequence[Any],
    combine: Callable[..., Any],
    *,
    n_rows: int,
    n_clusters: int,
    n_resamples: int,
    confidence: float,
    method: str,
    seed: int | None,
    extra: dict,
) -> tuple[Estimate, np.ndarray]:
    """Bootstrap ``combine(*engine statistics)``; return the estimate and the resampled values."""
    theta = float(combine(*[e.point() for e in engines]))
    rows = min(n_resamples, min(e.rows_per_block(n_clusters) for e in engines))
    values = np.empty(n_resamples)
    pos = 0
    typed = engines[0].types() if len(engines) == 1 and hasattr(engines[0], "types") else None
    if typed is not None:  # the same draws, counted by type (_type_count_blocks): same values, in order
        for counts in _type_count_blocks(*typed, n_resamples, seed):
            values[pos : pos + counts.shape[0]] = combine(engines[0].resample_types(counts))
            pos += counts.shape[0]
        blocks: Iterator[np.ndarray] = iter(())
    else:
        blocks = _count_blocks(n_clusters, n_resamples, seed, rows)
    for counts in blocks:
        # a drawn block holds whole generator calls; engines may want smaller slices
        for s in range(0, counts.shape[0], rows):
            part = counts[s : s + rows]
            values[pos : pos + part.shape[0]] = combine(*[e.resample(part) for e in engines])
            pos += part.shape[0]
    return _estimate(values, theta, lambda: combine(*[e.jackknife() for e in engines]), n_rows=n_rows,
                     n_clusters=n_clusters, n_resamples=n_resamples, confidence=confidence, method=method, seed=seed,
                     extra=extra), values


def _estimate(values: np.ndarray, theta: float, jackknife: Callable[[], Any], *, n_rows: int, n_clusters: int,
              n_resamples: int, confidence: float, method: str, seed: int | None, extra: dict) -> Estimate:
    """Return the estimate of resampled `values` around `theta`: the interval, its notes and facts."""
    valid = values[np.isfinite(values)]
    n_undefined = n_resamples - valid.size
    info = {
        **extra,
        "method": method,
        "n_resamples": n_resamples,
        "n_clusters": n_clusters,
        "confidence": confidence,
        "seed": seed,
        "n_undefined_resamples": n_undefined,
    }
    notes = []
    if n_undefined:
        notes.append(Reason("resamples_undefined", undefined=int(n_undefined), resamples=int(n_resamples)))
    if n_clusters < 2:
        notes.append(Reason("one_cluster"))
    if valid.size < 2:
        notes.append(Reason("too_few_resamples"))
        return Estimate(value=theta, n=n_rows, reason=join(notes), extra=info)
    info["bootstrap_se"] = float(valid.std(ddof=1))
    if method == "percentile":
        ci = percentile_interval(valid, confidence)
    else:
        ci, bca_info, bca_note = bca_interval(valid, theta, np.asarray(jackknife(), dtype=float), confidence)
        info.update(bca_info)
        if bca_note:
            notes.append(bca_note)
    return Estimate(value=theta, n=n_rows, ci=ci, reason=join(notes), extra=info)


def _run_one(engine: Any, **kwargs: Any) -> Estimate:
    """Bootstrap one engine's own statistic (kappa or a correlation) and return its estimate."""
    est, _ = _run([engine], lambda value: value, **kwargs)
    return est


def _check_options(n_resamples: int, confidence: float, method: str) -> None:
    _check_resamples(n_resamples)
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    if method not in CI_METHODS:
        raise ValueError(f"method must be one of {CI_METHODS}, got {method!r}")


def _codes(values: Any, n_labels: int, what: str) -> np.ndarray:
    arr = np.asarray(to_list(values) if not isinstance(values, np.ndarray) else values)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind == "b" or (arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu" or arr.ndim != 1:
        raise ValueError(f"{what} must be a 1-D array of integer label codes")
    if arr.min() < 0 or arr.max() >= n_labels:
        raise ValueError(f"{what} codes must be in [0, n_labels)")
    return arr.astype(np.int64)


def _kappa_codes(a_codes: Any, b_codes: Any, n_labels: int, weights: str | None, label_values: Any):
    """Return both raters' codes and the disagreement weights, checked."""
    if n_labels < 1:
        raise ValueError("n_labels must be positive")
    a = _codes(a_codes, n_labels, "a_codes")
    b = _codes(b_codes, n_labels, "b_codes")
    if a.size != b.size:
        raise ValueError(f"inputs must have the same length (a={a.size}, b={b.size})")
    return a, b, disagreement_weights(n_labels, weights=weights, values=label_values)


def _kappa_setup(a_codes: Any, b_codes: Any, clusters: Any, n_labels: int, weights: str | None, label_values: Any):
    a, b, w = _kappa_codes(a_codes, b_codes, n_labels, weights, label_values)
    cl, uniques = factorize_clusters(clusters)
    if cl.size != a.size:
        raise ValueError(f"inputs must have the same length (a={a.size}, b={b.size}, clusters={cl.size})")
    return a, b, cl, len(uniques), w


def _kappa_undefined_note(a: np.ndarray, b: np.ndarray) -> Reason:
    if a.size < 2:
        return Reason("kappa_too_few")
    return Reason("single_label_code", label_code=int(a[0]))


def _corr_setup(x: Any, y: Any, clusters: Any, method: str):
    if method not in CORRELATION_METHODS:
        raise ValueError(f"method must be one of {CORRELATION_METHODS}, got {method!r}")
    xa, ya = as_float_array(x, "x"), as_float_array(y, "y")
    cl_items = to_list(clusters)
    if not (xa.size == ya.size == len(cl_items)):
        raise ValueError(f"inputs must have the same length (x={xa.size}, y={ya.size}, clusters={len(cl_items)})")
    keep = np.isfinite(xa) & np.isfinite(ya)
    cl, uniques = factorize_clusters([c for c, k in zip(cl_items, keep.tolist(), strict=True) if k])
    return xa[keep], ya[keep], cl, len(uniques), int((~keep).sum())


# --------------------------------------------------------------------------- public API


def kappa_resamples(
    a_codes: Any,
    b_codes: Any,
    clusters: Any,
    indices: np.ndarray,
    *,
    n_labels: int,
    weights: str | None = None,
    label_values: Sequence[float] | None = None,
) -> np.ndarray:
    """Return (weighted) Cohen's kappa on each cluster resample given by ``indices``.

    Parameters
    ----------
    a_codes, b_codes : array-like of int
        Label codes ``0..n_labels-1`` of the two raters, one per row.
    clusters : array-like
        Cluster id of each row (coded by :func:`factorize_clusters`).
    indices : numpy.ndarray, shape (B, G)
        Resampled cluster indices, e.g. from :func:`bootstrap_index_matrix`.
    n_labels : int
        Number of categories ``K``.
    weights : {None, "linear", "quadratic"}
        As in :func:`calibrate.stats.agreement.cohen_kappa`.
    label_values : sequence of float, optional
        Scale value of each code for weighted kappa (default ``0..K-1``).

    Returns
    -------
    numpy.ndarray, shape (B,)
        Kappa of each resample; NaN where undefined.  Resample ``b`` contains every row of
        every cluster in ``indices[b]`` (with multiplicity).

    References
    ----------
    .. [1] Field, C. A. and Welsh, A. H. (2007). Bootstrapping clustered data. *JRSS B*
       69(3), 369-390.
    """
    a, b, cl, g, w = _kappa_setup(a_codes, b_codes, clusters, n_labels, weights, label_values)
    engine = _KappaEngine(a, b, cl, g, n_labels, w)
    idx = np.asarray(indices, dtype=np.int64)
    step = engine.rows_per_block(g)
    return np.concatenate([engine.resample(_counts(idx[s : s + step], g)) for s in range(0, idx.shape[0], step)])


def corr_resamples(x: Any, y: Any, clusters: Any, indices: np.ndarray, *, method: str = "spearman") -> np.ndarray:
    """Return the correlation on each cluster resample given by ``indices``.

    Parameters
    ----------
    x, y : array-like of float
        Paired scores; rows with a missing side are dropped *before* clusters are coded.
    clusters : array-like
        Cluster id of each row.
    indices : numpy.ndarray, shape (B, G)
        Resampled cluster indices over the clusters that remain after dropping.
    method : {"spearman", "kendall", "pearson"}

    Returns
    -------
    numpy.ndarray, shape (B,)
        Correlation of each resample; NaN where undefined (constant side).

    References
    ----------
    .. [1] Field, C. A. and Welsh, A. H. (2007). Bootstrapping clustered data. *JRSS B*
       69(3), 369-390.
    """
    xa, ya, cl, g, _ = _corr_setup(x, y, clusters, method)
    engine = _corr_engine(method, xa, ya, cl, g)
    idx = np.asarray(indices, dtype=np.int64)
    step = engine.rows_per_block(g)
    return np.concatenate([engine.resample(_counts(idx[s : s + step], g)) for s in range(0, idx.shape[0], step)])


def cluster_bootstrap_kappa(
    a_codes: Any,
    b_codes: Any,
    clusters: Any,
    *,
    n_labels: int,
    weights: str | None = None,
    label_values: Sequence[float] | None = None,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    method: str = "percentile",
    seed: int | None = 0,
) -> Estimate:
    """Return Cohen's kappa with a cluster-bootstrap confidence interval.

    Parameters
    ----------
    a_codes, b_codes : array-like of int
        Label codes ``0..n_labels-1`` (e.g. human and judge verdicts), one per row (claim).
    clusters : array-like
        Cluster id (sample/answer) of each row; clusters are resampled, not rows.
    n_labels : int
        Number of categories ``K`` (the full label set, used or not).
    weights : {None, "linear", "quadratic"}
        Weighted kappa (see :func:`calibrate.stats.agreement.cohen_kappa`).
    label_values : sequence of float, optional
        Scale value of each code for weighted kappa (default equally spaced ``0..K-1``).
    n_resamples : int
        Number of bootstrap resamples ``B`` (default 2000).
    confidence : float
        Confidence level (default 0.95).
    method : {"percentile", "bca"}
        Interval method.
    seed : int or None
        Seed of the single ``numpy.random.Generator`` (default 0: reproducible).

    Returns
    -------
    Estimate
        ``value`` = kappa on the full data; ``n`` = rows; ``ci`` per ``method``; ``extra``:
        ``method``, ``n_resamples``, ``n_clusters``, ``confidence``, ``seed``,
        ``n_undefined_resamples``, ``bootstrap_se`` and, for BCa, ``bias_correction_z0``,
        ``acceleration``, ``ci_method_used``.  Undefined when kappa is undefined on the full
        data (no CI is computed then).

    References
    ----------
    .. [1] Cohen, J. (1960). A coefficient of agreement for nominal scales. *Educational and
       Psychological Measurement* 20(1), 37-46.
    .. [2] Efron, B. (1987). Better bootstrap confidence intervals. *JASA* 82(397), 171-185.
    .. [3] Field, C. A. and Welsh, A. H. (2007). Bootstrapping clustered data. *JRSS B*
       69(3), 369-390.
    """
    _check_options(n_resamples, confidence, method)
    a, b, cl, g, w = _kappa_setup(a_codes, b_codes, clusters, n_labels, weights, label_values)
    extra = {"statistic": "kappa", "weights": weights}
    if a.size == 0:
        return Estimate.no_data(Reason("no_rows"), **extra)
    engine = _KappaEngine(a, b, cl, g, n_labels, w)
    if a.size < 2 or not np.isfinite(engine.point()):
        return Estimate.undefined(a.size, _kappa_undefined_note(a, b), n_clusters=g, **extra)
    return _run_one(engine, n_rows=a.size, n_clusters=g, n_resamples=n_resamples, confidence=confidence,
                    method=method, seed=seed, extra=extra)


def cluster_bootstrap_alpha_counts(
    counts: Any,
    *,
    level: str = "nominal",
    values: Sequence,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    method: str = "percentile",
    seed: int | None = 0,
) -> Estimate:
    """Return Krippendorff's alpha of a units × values table of counts with a bootstrap over its units.

    The estimate of ``cluster_bootstrap(lambda u: krippendorff_alpha_counts(counts[u], level=level, values=values),
    [units], units)`` with ``units = arange(U)`` (each unit its own cluster), from the same draws, vectorised: a
    unit's coincidences are summed by its multiplicity (per type of unit, units with equal counts), so a resample
    costs a ``bincount`` instead of a Python call on a materialised table.  Resampled values agree with the loop's
    to floating-point rounding (the coincidences are summed in another order); ``value`` is
    :func:`~calibrate.stats.reliability.krippendorff_alpha_counts`'s own.

    Parameters
    ----------
    counts : array-like of int, shape (units, values)
        ``counts[u, c]`` = coders who gave unit ``u`` the value ``values[c]``.
    level, values
        As in :func:`~calibrate.stats.reliability.krippendorff_alpha_counts`.
    n_resamples, confidence, method, seed
        As in :func:`cluster_bootstrap`.

    Returns
    -------
    Estimate
        As :func:`cluster_bootstrap` (``extra["statistic"]`` "custom"); undefined (no CI) when alpha is.

    References
    ----------
    .. [1] Krippendorff, K. (2011). Computing Krippendorff's alpha-reliability. Annenberg School for
       Communication Departmental Papers 43, University of Pennsylvania.
    .. [2] Davison, A. C. and Hinkley, D. V. (1997). *Bootstrap Methods and their Application*, section 3.8.
    """
    _check_options(n_resamples, confidence, method)
    table = np.asarray(counts)
    if table.ndim != 2 or (table.size and (table.dtype.kind not in "iu" or table.min() < 0)):
        raise ValueError("counts must be a 2-D array of non-negative integer counts")
    units = table.shape[0]
    if units == 0:
        return Estimate.no_data(Reason("no_rows"), statistic="custom")
    point = krippendorff_alpha_counts(table, level=level, values=values)
    if point.value is None or not np.isfinite(point.value):
        return Estimate.undefined(units, point.reason or Reason("custom_undefined"), n_clusters=units, statistic="custom")
    engine = _AlphaEngine(table, level, values, float(point.value))
    est, _ = _run([engine], lambda v: v, n_rows=units, n_clusters=units, n_resamples=n_resamples, confidence=confidence,
                  method=method, seed=seed, extra={"statistic": "custom"})
    return est


def multinomial_bootstrap_kappa(
    a_codes: Any,
    b_codes: Any,
    *,
    n_labels: int,
    weights: str | None = None,
    label_values: Sequence[float] | None = None,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    method: str = "percentile",
    seed: int | None = 0,
) -> Estimate:
    """Return Cohen's kappa with a bootstrap interval, for items that are each their own cluster.

    Resampling ``n`` one-item clusters with replacement gives a contingency table distributed
    exactly as ``Multinomial(n, table / n)``; the resampled tables are drawn directly
    (``numpy.random.Generator.multinomial``), ``B`` draws of ``K*K`` cells, whatever ``n``.
    The interval has the distribution of :func:`cluster_bootstrap_kappa`'s with one item per
    cluster, from another random stream (the index matrix is not used).

    Parameters
    ----------
    a_codes, b_codes : array-like of int
        Label codes ``0..n_labels-1``, one per item (each item is its own cluster).
    n_labels, weights, label_values, n_resamples, confidence, method, seed
        As in :func:`cluster_bootstrap_kappa`.

    Returns
    -------
    Estimate
        As :func:`cluster_bootstrap_kappa` (``n_clusters`` = ``n``), with
        ``extra["bootstrap"] = "multinomial"``. The BCa jackknife leaves out one item: the
        ``n`` values take at most ``K*K`` distinct values, one per occupied cell.

    References
    ----------
    .. [1] Efron, B. and Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*,
       chapter 6 (the bootstrap distribution of a multinomial sample). Chapman & Hall.
    .. [2] Cohen, J. (1960). A coefficient of agreement for nominal scales. *Educational and
       Psychological Measurement* 20(1), 37-46.
    """
    _check_options(n_resamples, confidence, method)
    a, b, w = _kappa_codes(a_codes, b_codes, n_labels, weights, label_values)
    extra = {"statistic": "kappa", "weights": weights, "bootstrap": "multinomial"}
    if a.size == 0:
        return Estimate.no_data(Reason("no_rows"), **extra)
    table = np.bincount(a * n_labels + b, minlength=n_labels * n_labels).astype(float)
    theta = float(kappa_from_tables(table[None], w)[0])
    if a.size < 2 or not np.isfinite(theta):
        return Estimate.undefined(a.size, _kappa_undefined_note(a, b), n_clusters=a.size, **extra)
    rng = np.random.default_rng(seed)
    values = kappa_from_tables(rng.multinomial(a.size, table / table.sum(), size=n_resamples).astype(float), w)

    def jackknife() -> np.ndarray:
        cells = np.flatnonzero(table)
        left_out = table[None] - np.eye(table.size)[cells]
        return np.repeat(kappa_from_tables(left_out, w), table[cells].astype(np.int64))

    return _estimate(values, theta, jackknife, n_rows=a.size, n_clusters=a.size, n_resamples=n_resamples,
                     confidence=confidence, method=method, seed=seed, extra=extra)


def cluster_bootstrap_corr(
    x: Any,
    y: Any,
    clusters: Any,
    *,
    method: str = "spearman",
    ci_method: str = "percentile",
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> Estimate:
    """Return a correlation with a cluster-bootstrap confidence interval.

    Parameters
    ----------
    x, y : array-like of float
        Paired scores, one per row; rows with a missing side are dropped first (and
        clusters left empty disappear).
    clusters : array-like
        Cluster id of each row.
    method : {"spearman", "kendall", "pearson"}
        The correlation.  Spearman and Pearson are vectorised; Kendall loops over
        resamples (one ``scipy.stats.kendalltau`` call each) and, for BCa, over clusters.
    ci_method : {"percentile", "bca"}
        Interval method (``method`` names the correlation here; the chosen interval method
        is reported in ``extra["method"]`` like for kappa).
    n_resamples, confidence, seed
        As in :func:`cluster_bootstrap_kappa`.

    Returns
    -------
    Estimate
        ``value`` = correlation on the full data (equal to :func:`spearman_rho` etc.);
        ``extra["statistic"]`` = ``method``; other fields as in
        :func:`cluster_bootstrap_kappa`.  BCa for Spearman costs ``G`` weighted re-rankings
        (``O(G n)``).

    References
    ----------
    .. [1] Efron, B. (1987). Better bootstrap confidence intervals. *JASA* 82(397), 171-185.
    .. [2] Field, C. A. and Welsh, A. H. (2007). Bootstrapping clustered data. *JRSS B*
       69(3), 369-390.
    """
    _check_options(n_resamples, confidence, ci_method)
    xa, ya, cl, g, dropped = _corr_setup(x, y, clusters, method)
    extra: dict[str, Any] = {"statistic": method}
    if dropped:
        extra["n_missing"] = dropped
    reason = undefined_reason(xa, ya)
    if reason is not None:
        status, note = reason
        if status == "no_data":
            return Estimate.no_data(note, **extra)
        return Estimate.undefined(xa.size, note, n_clusters=g, **extra)
    engine = _corr_engine(method, xa, ya, cl, g)
    return _run_one(engine, n_rows=xa.size, n_clusters=g, n_resamples=n_resamples, confidence=confidence,
                    method=ci_method, seed=seed, extra=extra)


def paired_cluster_bootstrap_diff(
    first: tuple[Any, Any],
    second: tuple[Any, Any],
    clusters: Any,
    *,
    statistic: str = "kappa",
    n_labels: int | None = None,
    weights: str | None = None,
    label_values: Sequence[float] | None = None,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    method: str = "percentile",
    seed: int | None = 0,
) -> Estimate:
    """Return ``stat(first) - stat(second)`` with a paired cluster-bootstrap interval.

    Both statistics are computed on the *same* resampled clusters, so the interval of the
    difference accounts for their correlation (e.g. two judges scored against the same
    human labels on the same claims).

    Parameters
    ----------
    first, second : tuple of two array-likes
        ``(a_codes, b_codes)`` for ``statistic="kappa"`` or ``(x, y)`` for a correlation;
        all four arrays are aligned with ``clusters`` row by row.  For correlations, rows
        where any of the four scores is missing are dropped, so both statistics use the
        same rows.
    clusters : array-like
        Cluster id of each row.
    statistic : {"kappa", "spearman", "kendall", "pearson"}
    n_labels, weights, label_values
        Kappa only; as in :func:`cluster_bootstrap_kappa`.
    n_resamples, confidence, method, seed
        As in :func:`cluster_bootstrap_kappa` (``method`` is the interval method).

    Returns
    -------
    Estimate
        ``value`` = difference on the full data; ``ci``; ``p_value`` = two-sided bootstrap
        p-value for "no difference", ``min(1, 2 min((#{d* <= 0} + 1)/(B + 1),
        (#{d* >= 0} + 1)/(B + 1)))`` over defined resamples; ``extra`` adds ``first`` and
        ``second`` (the two point estimates).  Undefined if either statistic is.

    References
    ----------
    .. [1] Davison, A. C. and Hinkley, D. V. (1997). *Bootstrap Methods and their
       Application*, sections 4.4 and 5.3. Cambridge University Press.
    .. [2] Field, C. A. and Welsh, A. H. (2007). Bootstrapping clustered data. *JRSS B*
       69(3), 369-390.
    """
    _check_options(n_resamples, confidence, method)
    if statistic == "kappa":
        if n_labels is None:
            raise ValueError("n_labels is required for statistic='kappa'")
        a1, b1, cl, g, w = _kappa_setup(first[0], first[1], clusters, n_labels, weights, label_values)
        a2, b2, cl2, _, _ = _kappa_setup(second[0], second[1], clusters, n_labels, weights, label_values)
        extra: dict[str, Any] = {"statistic": "kappa difference", "weights": weights}
        if a1.size == 0:
            return Estimate.no_data(Reason("no_rows"), **extra)
        engines = [_KappaEngine(a1, b1, cl, g, n_labels, w), _KappaEngine(a2, b2, cl, g, n_labels, w)]
        n_rows = a1.size
        reasons = [None if np.isfinite(e.point()) and n_rows >= 2 else _kappa_undefined_note(a, b) for e, a, b in ((engines[0], a1, b1), (engines[1], a2, b2))]
    elif statistic in CORRELATION_METHODS:
        cols = [as_float_array(v, name) for v, name in ((first[0], "x1"), (first[1], "y1"), (second[0], "x2"), (second[1], "y2"))]
        cl_items = to_list(clusters)
        if len({c.size for c in cols} | {len(cl_items)}) != 1:
            raise ValueError("first, second and clusters must have the same length")
        keep = np.logical_and.reduce([np.isfinite(c) for c in cols])
        cols = [c[keep] for c in cols]
        cl, uniques = factorize_clusters([c for c, k in zip(cl_items, keep.tolist(), strict=True) if k])
        g = len(uniques)
        extra = {"statistic": f"{statistic} difference"}
        if int((~keep).sum()):
            extra["n_missing"] = int((~keep).sum())
        n_rows = cols[0].size
        if n_rows == 0:
            return Estimate.no_data(Reason("no_rows_four_scores"), **extra)
        reasons = [None if (r := undefined_reason(cols[i], cols[i + 1])) is None else r[1] for i in (0, 2)]
        engines = [_corr_engine(statistic, cols[0], cols[1], cl, g), _corr_engine(statistic, cols[2], cols[3], cl, g)] if not any(reasons) else []
    else:
        raise ValueError(f"statistic must be 'kappa' or one of {CORRELATION_METHODS}, got {statistic!r}")
    if any(reasons):
        which = join(Reason("difference_undefined", which=name, reason=r) for name, r in zip(("first", "second"), reasons, strict=True) if r)
        return Estimate.undefined(n_rows, which, n_clusters=g, **extra)
    extra["first"], extra["second"] = engines[0].point(), engines[1].point()
    est, values = _run(
        engines,
        lambda u, v: u - v,
        n_rows=n_rows,
        n_clusters=g,
        n_resamples=n_resamples,
        confidence=confidence,
        method=method,
        seed=seed,
        extra=extra,
    )
    valid = values[np.isfinite(values)]
    if valid.size:
        le = (np.count_nonzero(valid <= 0) + 1) / (valid.size + 1)
        ge = (np.count_nonzero(valid >= 0) + 1) / (valid.size + 1)
        p = min(1.0, 2.0 * min(le, ge))
        return Estimate(value=est.value, n=est.n, ci=est.ci, reason=est.reason, p_value=p,
                        extra={**est.extra, "p_value_method": "bootstrap, two-sided"})
    return est


class _GenericEngine:
    """Slow path for any statistic: materialise each resample's rows and call ``stat``."""

    def __init__(self, stat: Callable[..., Any], columns: list[np.ndarray], cl: np.ndarray, g: int):
        self.stat, self.columns, self.cl, self.g = stat, columns, cl, g
        self.rows = np.arange(cl.size)

    def _call(self, rows: np.ndarray) -> float:
        res = self.stat(*[c[rows] for c in self.columns])
        if isinstance(res, Estimate):
            res = res.value
        if res is None:
            return np.nan
        return float(res)

    def point(self) -> float:
        return self._call(self.rows)

    def resample(self, counts: np.ndarray) -> np.ndarray:
        return np.array([self._call(np.repeat(self.rows, counts[r, self.cl].astype(np.int64))) for r in range(counts.shape[0])])

    def jackknife(self) -> np.ndarray:
        return np.array([self._call(self.rows[self.cl != g]) for g in range(self.g)])

    def rows_per_block(self, g: int) -> int:
        return max(1, _CHUNK_ELEMENTS // g)


def cluster_bootstrap(
    stat: Callable[..., Any],
    data_columns: Sequence[Any],
    clusters: Any,
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    method: str = "percentile",
    seed: int | None = 0,
) -> Estimate:
    """Return ``stat`` on the data with a cluster-bootstrap interval (generic, loop-based).

    Parameters
    ----------
    stat : callable
        ``stat(*columns) -> float | None | Estimate``, called on the full data and on each
        resample (``None``, NaN or an undefined :class:`Estimate` mean undefined).
        Resample rows keep their original order, each repeated by its cluster's
        multiplicity, so ``stat`` should not depend on row order.
    data_columns : sequence of array-like
        Columns aligned with ``clusters`` (converted with ``numpy.asarray``).
    clusters : array-like
        Cluster id of each row.
    n_resamples, confidence, method, seed
        As in :func:`cluster_bootstrap_kappa`; the same seed draws the same index matrix.

    Returns
    -------
    Estimate
        As in :func:`cluster_bootstrap_kappa`.  Cost: ``B`` (plus ``G`` for BCa) Python calls
        of ``stat``; prefer the vectorised functions for kappa and correlations.

    References
    ----------
    .. [1] Davison, A. C. and Hinkley, D. V. (1997). *Bootstrap Methods and their
       Application*, section 3.8. Cambridge University Press.
    .. [2] Efron, B. (1987). Better bootstrap confidence intervals. *JASA* 82(397), 171-185.
    """
    _check_options(n_resamples, confidence, method)
    cl, uniques = factorize_clusters(clusters)
    columns = [np.asarray(to_list(c) if not isinstance(c, np.ndarray) else c) for c in data_columns]
    if any(c.shape[0] != cl.size for c in columns):
        raise ValueError("every data column must have one entry per cluster label")
    if cl.size == 0:
        return Estimate.no_data(Reason("no_rows"), statistic="custom")
    engine = _GenericEngine(stat, columns, cl, len(uniques))
    theta = engine.point()
    if not np.isfinite(theta):
        res = stat(*columns)
        note = res.reason if isinstance(res, Estimate) and res.reason is not None else Reason("custom_undefined")
        return Estimate.undefined(cl.size, note, n_clusters=len(uniques), statistic="custom")
    est, _ = _run(
        [engine],
        lambda v: v,
        n_rows=cl.size,
        n_clusters=len(uniques),
        n_resamples=n_resamples,
        confidence=confidence,
        method=method,
        seed=seed,
        extra={"statistic": "custom"},
    )
    return est
