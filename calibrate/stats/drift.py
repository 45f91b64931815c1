"""Drift of a golden set against production, and the rule that refreshes it.

Pure functions behind ``calibrate golden drift`` and ``calibrate golden refresh``: two
samples in (the golden set's values and production's), :class:`~calibrate.stats.Estimate`
out.  An undefined result has ``value=None``, a ``status``, a ``note`` and a ``Reason`` (``reason``) whose
code :data:`REASONS` lists (the one table is ``calibrate.reasons.TEMPLATES``; the same code always means the same case,
so callers and translations can key on it).

What ``golden drift --json`` reads: :func:`categorical_drift` (``test``, ``p_value``, ``psi``,
``mde``; ``value`` = total variation), :func:`numeric_drift` (KS ``value`` and ``p_value``,
``wasserstein_normalised``), :func:`text_drift` (domain-classifier AUC and its permutation
``p_value``), :func:`holm_adjust` (``p_holm`` across fields), :func:`judge_drift` (kappa,
sensitivity, specificity: audit minus golden, with CIs).  ``golden refresh``'s
allocation rule is in :mod:`calibrate.stats.refresh`.
Formulas, decisions and the simulations that check the error rates are in
``docs/statistics.md`` ("Drift") and ``bench/results/drift.md``.

References
----------
.. [1] Holm, S. (1979). A simple sequentially rejective multiple test procedure.
   *Scandinavian Journal of Statistics* 6(2), 65-70.
.. [2] Cochran, W. G. (1954). Some methods for strengthening the common chi-squared tests.
   *Biometrics* 10(4), 417-451.
.. [3] Phipson, B. and Smyth, G. K. (2010). Permutation p-values should never be zero.
   *Statistical Applications in Genetics and Molecular Biology* 9(1), article 39.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from calibrate.reasons import TEMPLATES, Reason
from calibrate.stats._common import as_float_array, is_missing, ordered_labels, to_list
from calibrate.stats.intervals import bootstrap_index_matrix, kappa_resamples, percentile_interval
from calibrate.stats.result import Estimate

__all__ = [
    "PSI_EPSILON",
    "REASONS",
    "categorical_drift",
    "chi2_mde",
    "holm_adjust",
    "judge_drift",
    "min_permutations",
    "numeric_drift",
    "psi",
    "text_drift",
]

#: Share given to a category that is empty in one sample when computing PSI (``ln 0`` otherwise).
PSI_EPSILON = 1e-4

#: Stable codes of the undefined cases (``Estimate.reason.code``) and their English templates: the one table
#: is ``calibrate.reasons.TEMPLATES``; this is the view of the codes used here.
REASONS: dict[str, str] = {code: str(TEMPLATES[code]) for code in (
    "empty_sample", "one_category", "mde_one_category", "mde_unreachable", "constant_values", "zero_spread",
    "too_few_texts", "no_text_features", "kappa_undefined", "no_positives", "no_negatives")}

_MAX_CELLS = 4_000_000  # permutation rows x items held in memory at once


def _undefined(n: int, reason: str | Reason, **extra: Any) -> Estimate:
    return Estimate.undefined(n, reason if isinstance(reason, Reason) else Reason(reason), **extra)


def _no_data(**extra: Any) -> Estimate:
    return Estimate.no_data(Reason("empty_sample"), **extra)


def _present(values: Any) -> tuple[list, int]:
    items = to_list(values)
    kept = [v for v in items if not is_missing(v)]
    return kept, len(items) - len(kept)


def _check_options(*, alpha: float | None = None, power: float | None = None, n_permutations: int | None = None) -> None:
    if alpha is not None and not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if power is not None and not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    if n_permutations is not None and not 0 <= int(n_permutations) <= 100_000:
        raise ValueError(f"n_permutations must be in [0, 100000], got {n_permutations!r}")


def _permutation_rows(codes: np.ndarray, n_permutations: int, seed: int | None, *, width: int = 0):
    """Yield blocks of permuted copies of ``codes`` (rows), each row costing ``max(codes.size, width)`` cells."""
    rng = np.random.default_rng(seed)
    step = max(1, _MAX_CELLS // max(1, codes.size, width))
    for start in range(0, n_permutations, step):
        rows = min(step, n_permutations - start)
        yield rng.permuted(np.broadcast_to(codes, (rows, codes.size)).copy(), axis=1)


def _permutation_p(observed: float, null: np.ndarray) -> float:
    # Phipson & Smyth (2010): the observed labelling is one of the B + 1, so p >= 1/(B + 1).
    return float((1 + np.count_nonzero(null >= observed - 1e-12)) / (null.size + 1))


# --------------------------------------------------------------------------- categorical


def psi(reference_counts: Any, current_counts: Any, *, epsilon: float = PSI_EPSILON) -> float:
    """Return the population stability index of two count vectors over the same categories.

    .. math::

        \\mathrm{PSI} = \\sum_j (c_j - r_j) \\ln(c_j / r_j),\\qquad
        r_j = \\max(R_j / R, \\varepsilon),\\; c_j = \\max(C_j / C, \\varepsilon)

    A share of zero is replaced by ``epsilon`` (not renormalised), so an empty category
    contributes a large but finite term.  Rules of thumb: < 0.1 stable, 0.1-0.25 moderate,
    > 0.25 large shift.

    Parameters
    ----------
    reference_counts, current_counts : array-like of int
        Counts per category, aligned, both with a positive total.
    epsilon : float
        Floor of a share (default :data:`PSI_EPSILON` = 1e-4).

    References
    ----------
    .. [1] Yurdakul, B. (2018). *Statistical properties of population stability index*.
       PhD thesis, Western Michigan University.
    """
    r = np.asarray(reference_counts, dtype=float)
    c = np.asarray(current_counts, dtype=float)
    if r.shape != c.shape or r.ndim != 1:
        raise ValueError("reference_counts and current_counts must be 1-D and aligned")
    if r.sum() <= 0 or c.sum() <= 0:
        raise ValueError("both count vectors need a positive total")
    if not 0.0 < epsilon < 1.0:
        raise ValueError("epsilon must be in (0, 1)")
    rs = np.maximum(r / r.sum(), epsilon)
    cs = np.maximum(c / c.sum(), epsilon)
    return float(np.sum((cs - rs) * np.log(cs / rs)))


def _pool(table: np.ndarray, min_expected: float) -> tuple[np.ndarray, list[list[int]]]:
    """Merge the rarest columns of a 2 x K table until every expected count reaches ``min_expected``.

    The smallest expected count is in the smallest column, ``min(n_row) * n_j / N``, so a heap
    of column totals (ties: the smaller first label) does it in ``O(K log K)``.
    """
    total = float(table.sum())
    threshold = min_expected * total / float(table.sum(axis=1).min())
    heap = [(float(table[:, j].sum()), j, [j]) for j in range(table.shape[1])]
    heapq.heapify(heap)
    while len(heap) > 2 and heap[0][0] < threshold:
        t1, _, g1 = heapq.heappop(heap)
        t2, _, g2 = heapq.heappop(heap)
        group = sorted(g1 + g2)
        heapq.heappush(heap, (t1 + t2, group[0], group))
    groups = sorted((g for _, _, g in heap), key=lambda g: g[0])
    return np.column_stack([table[:, g].sum(axis=1) for g in groups]), groups


def _noncentrality(shares_ref: np.ndarray, shares_cur: np.ndarray, n1: int, n2: int) -> float:
    pooled = (n1 * shares_ref + n2 * shares_cur) / (n1 + n2)
    keep = pooled > 0
    dev = n1 * (shares_ref - pooled) ** 2 + n2 * (shares_cur - pooled) ** 2
    return float(np.sum(dev[keep] / pooled[keep]))


def chi2_mde(reference_shares: Any, n_reference: int, n_current: int, *, alpha: float = 0.05, power: float = 0.8) -> Estimate:
    """Return the smallest share shift the chi-squared test detects with ``power`` at these sizes.

    The alternative: production moves a share ``delta`` out of the golden set's largest
    category into the others in proportion to their shares,

    .. math::

        c(\\delta) = r + \\delta v,\\qquad v_{\\max} = -1,\\; v_j = r_j / (1 - r_{\\max})

    so the total variation distance between ``r`` and ``c`` is exactly ``delta``.  The power
    of Pearson's test of homogeneity (``K - 1`` degrees of freedom) is
    ``P(chi2'(K-1, lambda) > chi2_{1-alpha}(K-1))`` with noncentrality
    ``lambda = sum_j [n_1 (r_j - m_j)^2 + n_2 (c_j - m_j)^2] / m_j`` and
    ``m = (n_1 r + n_2 c)/(n_1 + n_2)``.  The MDE is the root of power(delta) = ``power``
    on ``(0, r_max]``.

    Parameters
    ----------
    reference_shares : array-like of float
        The golden set's shares per category (after any pooling; they are renormalised).
    n_reference, n_current : int
        Sample sizes.
    alpha, power : float
        Test level (default 0.05) and power (default 0.8).

    Returns
    -------
    Estimate
        ``value`` = MDE as a total-variation shift in [0, 1]; ``extra``: ``alpha``, ``power``,
        ``df``, ``largest_share``.  Undefined (``mde_one_category``, ``mde_unreachable``) when no
        such shift exists.

    References
    ----------
    .. [1] Cohen, J. (1988). *Statistical Power Analysis for the Behavioral Sciences*, 2nd ed.,
       chapter 7. Erlbaum.
    """
    _check_options(alpha=alpha, power=power)
    r = np.asarray(reference_shares, dtype=float)
    n1, n2 = int(n_reference), int(n_current)
    extra = {"alpha": alpha, "power": power}
    if r.size == 0 or r.sum() <= 0 or n1 < 1 or n2 < 1:
        return _no_data(**extra)
    r = r / r.sum()
    df = r.size - 1
    top = int(np.argmax(r))
    extra.update(df=df, largest_share=float(r[top]))
    if df < 1 or r[top] >= 1.0:
        return _undefined(n1 + n2, "mde_one_category", **extra)
    v = r / (1.0 - r[top])
    v[top] = -1.0
    from scipy import stats as sps  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)
    from scipy.optimize import brentq  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)

    crit = sps.chi2.isf(alpha, df)

    def gap(delta: float) -> float:
        return float(sps.ncx2.sf(crit, df, _noncentrality(r, r + delta * v, n1, n2))) - power

    high = float(r[top])
    if gap(high) < 0:
        return _undefined(n1 + n2, "mde_unreachable", **extra)
    return Estimate(value=brentq(gap, 1e-12, high, xtol=1e-6), n=n1 + n2, extra=extra)


def categorical_drift(reference: Any, current: Any, *, alpha: float = 0.05, power: float = 0.8, min_expected: float = 5.0,
                      n_permutations: int = 2000, seed: int | None = 0, epsilon: float = PSI_EPSILON) -> Estimate:
    """Return the drift of a categorical field: test, p-value, PSI and MDE.

    The 2 x K table (golden, production) x category is tested with Pearson's chi-squared test
    of homogeneity (no continuity correction).  **Pooling**: while some expected count
    ``E_j = n_row * n_j / N`` is below ``min_expected`` and more than two columns remain, the
    rarest column (smallest total; ties: first in label order) is merged into the second
    rarest.  When even two columns leave an expected count below ``min_expected`` the
    chi-squared approximation is not trusted and the test is a **permutation test on the
    total variation distance** ``TV = 1/2 sum_j |r_j - c_j|`` of the unpooled shares:
    ``n_permutations`` seeded reassignments of the pooled values to the two samples,
    ``p = (1 + #{TV* >= TV}) / (B + 1)``.

    Parameters
    ----------
    reference, current : array-like
        One category per item (golden set, production).  Missing values are dropped.
    alpha, power : float
        For the MDE (:func:`chi2_mde`, on the pooled categories).  A field that is one of
        ``m`` under Holm is decided at ``alpha / m`` at Holm's first step: pass that, so the
        MDE is the one of the decision (``golden drift`` does).
    min_expected : float
        Smallest expected count per cell (default 5, Cochran's rule).
    n_permutations : int
        Permutations of the fallback test (default 2000).
    seed : int or None
        Seed of the permutations.
    epsilon : float
        Share floor of :func:`psi`.

    Returns
    -------
    Estimate
        ``value`` = TV distance of the unpooled shares; ``p_value``; ``n`` = both samples;
        ``extra``: ``test`` ("chi2" or "permutation_tv"), ``statistic``, ``df`` (chi2),
        ``psi``, ``mde`` (None when undefined, ``mde_note`` then says why), ``mde_alpha`` (the
        level it is computed at), ``categories``,
        ``reference_shares``, ``current_shares``, ``pooled`` (groups of categories merged),
        ``n_reference``, ``n_current``, ``n_missing``.

    References
    ----------
    .. [1] Cochran, W. G. (1954). Some methods for strengthening the common chi-squared
       tests. *Biometrics* 10(4), 417-451.
    .. [2] Good, P. (2005). *Permutation, Parametric and Bootstrap Tests of Hypotheses*, 3rd
       ed. Springer.
    """
    _check_options(alpha=alpha, power=power, n_permutations=n_permutations)
    ref, miss_r = _present(reference)
    cur, miss_c = _present(current)
    extra: dict[str, Any] = {"n_reference": len(ref), "n_current": len(cur), "n_missing": miss_r + miss_c}
    if not ref or not cur:
        return _no_data(**extra)
    labels = ordered_labels(ref + cur)
    index = {lab: i for i, lab in enumerate(labels)}
    k = len(labels)
    rc = np.bincount([index[v] for v in ref], minlength=k)
    cc = np.bincount([index[v] for v in cur], minlength=k)
    n = len(ref) + len(cur)
    rs, cs = rc / rc.sum(), cc / cc.sum()
    tv = 0.5 * float(np.abs(rs - cs).sum())
    extra.update(categories=labels, reference_shares=rs, current_shares=cs, psi=psi(rc, cc, epsilon=epsilon))
    if k < 2:
        return _undefined(n, Reason("one_category", label=labels[0]), test=None, mde=None, **extra)
    pooled, groups = _pool(np.vstack([rc, cc]), min_expected)
    expected = np.outer(pooled.sum(axis=1), pooled.sum(axis=0)) / n
    extra["pooled"] = [[labels[j] for j in g] for g in groups if len(g) > 1]
    mde = chi2_mde(pooled[0] / pooled[0].sum(), len(ref), len(cur), alpha=alpha, power=power)
    extra["mde"] = mde.value
    extra["mde_alpha"] = alpha
    if not mde.ok:
        extra["mde_note"] = mde.note
        extra["mde_reason"] = mde.reason.to_dict() if mde.reason else None
    if expected.min() >= min_expected:
        from scipy import stats as sps  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)
        stat, p, df, _ = sps.chi2_contingency(pooled, correction=False)
        return Estimate(value=tv, n=n, p_value=float(p), extra={"test": "chi2", "statistic": float(stat), "df": int(df), **extra})
    codes = np.concatenate([np.fromiter((index[v] for v in ref), np.int64), np.fromiter((index[v] for v in cur), np.int64)])
    null = []
    n1 = len(ref)
    for block in _permutation_rows(codes, n_permutations, seed, width=k):
        offs = np.arange(block.shape[0])[:, None] * k
        r_perm = np.bincount((block[:, :n1] + offs).ravel(), minlength=block.shape[0] * k).reshape(-1, k)
        c_perm = np.bincount((block[:, n1:] + offs).ravel(), minlength=block.shape[0] * k).reshape(-1, k)
        null.append(0.5 * np.abs(r_perm / n1 - c_perm / (n - n1)).sum(axis=1))
    p = _permutation_p(tv, np.concatenate(null)) if null else None
    note = Reason("permutation_tv", min_expected=min_expected)
    return Estimate(value=tv, n=n, p_value=p, reason=note,
                    extra={"test": "permutation_tv", "statistic": tv, "n_permutations": n_permutations, "seed": seed, **extra})


def min_permutations(n_fields: int, *, alpha: float = 0.05, requested: int = 0, margin: float = 5.0) -> int:
    """Return the permutations a test needs so that Holm across ``n_fields`` can still flag it.

    A permutation p-value is at least ``1 / (B + 1)``; under Holm across ``m`` fields the
    strictest level is ``alpha / m``, so with ``B + 1 <= m / alpha`` the field can never be
    flagged and just above it only by a null that never reaches the observed statistic.  The
    rule: ``B + 1 >= margin * m / alpha`` (default ``margin`` 5: the floor of p is a fifth of
    Holm's strictest level), and never fewer than ``requested``.  Six fields at 0.05: 599.

    Parameters
    ----------
    n_fields : int
        ``m``, the fields Holm adjusts across (at least 1).
    alpha : float
        The family-wise level (default 0.05).
    requested : int
        The permutations asked for; returned when larger.
    margin : float
        How many times ``m / alpha`` the count ``B + 1`` must reach (at least 1).
    """
    _check_options(alpha=alpha, n_permutations=requested)
    if int(n_fields) < 1 or margin < 1:
        raise ValueError("n_fields must be at least 1 and margin at least 1")
    return min(100_000, max(int(requested), math.ceil(margin * int(n_fields) / alpha) - 1))


def holm_adjust(p_values: Sequence[float | None]) -> list[float | None]:
    """Return Holm's step-down adjusted p-values, in the input order.

    With the ``m`` defined p-values sorted ascending ``p_(1) <= ... <= p_(m)``,

    .. math::

        \\tilde p_{(i)} = \\min\\Bigl(1, \\max_{j \\le i} (m - j + 1)\\, p_{(j)}\\Bigr)

    Rejecting ``tilde p <= alpha`` controls the family-wise error rate at ``alpha`` under any
    dependence.  ``None`` (an undefined field) stays ``None`` and does not count in ``m``.
    Equals ``statsmodels.stats.multitest.multipletests(p, method="holm")[1]``.

    References
    ----------
    .. [1] Holm, S. (1979). A simple sequentially rejective multiple test procedure.
       *Scandinavian Journal of Statistics* 6(2), 65-70.
    """
    vals = [None if p is None or is_missing(p) else float(p) for p in p_values]
    if any(v is not None and not 0.0 <= v <= 1.0 for v in vals):
        raise ValueError("p-values must be in [0, 1]")
    idx = [i for i, v in enumerate(vals) if v is not None]
    out: list[float | None] = [None] * len(vals)
    m = len(idx)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: vals[i])):
        running = max(running, min(1.0, (m - rank) * vals[i]))
        out[i] = running
    return out


# --------------------------------------------------------------------------- numeric


def _wasserstein_null(pooled: np.ndarray, n1: int, n_permutations: int, seed: int | None) -> np.ndarray:
    """Return W1 between the two parts of ``n_permutations`` random splits of ``pooled``."""
    order = np.argsort(pooled, kind="stable")
    gaps = np.diff(pooled[order])
    n2 = pooled.size - n1
    member = (np.arange(pooled.size) < n1).astype(np.int8)
    out = []
    for block in _permutation_rows(member, n_permutations, seed):
        f = np.cumsum(block[:, order], axis=1)[:, :-1]
        g = np.arange(1, pooled.size) - f
        out.append(np.abs(f / n1 - g / n2) @ gaps)
    return np.concatenate(out) if out else np.empty(0)


def numeric_drift(reference: Any, current: Any, *, normalise: str = "iqr", n_permutations: int = 999, seed: int | None = 0) -> Estimate:
    """Return the drift of a numeric field: two-sample KS and normalised Wasserstein distance.

    ``value`` is the KS statistic ``D = sup_x |F_r(x) - F_c(x)|`` with SciPy's p-value
    (``scipy.stats.ks_2samp``, exact for small samples).  The Wasserstein-1 distance
    ``W = integral |F_r - F_c| dx`` is in the field's units; it is divided by the golden
    sample's interquartile range (``normalise="iqr"``, robust to the long tails of lengths),
    falling back to its standard deviation when the IQR is 0, so ``W / IQR = 0.5`` reads "half
    the golden set's middle spread".  Its p-value is a permutation test (``n_permutations``
    seeded splits of the pooled values; ``(1 + #{W* >= W}) / (B + 1)``; ``None`` when
    ``n_permutations`` is 0).

    Parameters
    ----------
    reference, current : array-like of float
        Values of the golden set and of production; ``None``/NaN are dropped.
    normalise : {"iqr", "std"}
        Scale that divides W.
    n_permutations : int
        Permutations of the Wasserstein test (default 999).
    seed : int or None
        Seed of the permutations.

    Returns
    -------
    Estimate
        ``value`` = D, ``p_value`` = KS p; ``extra``: ``test`` ("ks"), ``wasserstein``,
        ``wasserstein_normalised``, ``normalised_by`` ("iqr" or "std"), ``scale``,
        ``wasserstein_p_value``, ``n_reference``, ``n_current``, ``n_missing``.  Undefined when
        every value is the same (``constant_values``); ``wasserstein_normalised`` is None
        with ``normalise_note`` when the golden sample has no spread (``zero_spread``).

    References
    ----------
    .. [1] Hodges, J. L. (1958). The significance probability of the Smirnov two-sample
       test. *Arkiv för Matematik* 3, 469-486.
    .. [2] Ramdas, A., García Trillos, N. and Cuturi, M. (2017). On Wasserstein two-sample
       testing and related families of nonparametric tests. *Entropy* 19(2), 47.
    """
    if normalise not in ("iqr", "std"):
        raise ValueError(f"normalise must be 'iqr' or 'std', got {normalise!r}")
    _check_options(n_permutations=n_permutations)
    r_all, c_all = as_float_array(reference, "reference"), as_float_array(current, "current")
    if np.isinf(r_all).any() or np.isinf(c_all).any():
        raise ValueError("numeric drift needs finite values")
    r, c = r_all[~np.isnan(r_all)], c_all[~np.isnan(c_all)]
    extra: dict[str, Any] = {"test": "ks", "n_reference": int(r.size), "n_current": int(c.size),
                             "n_missing": int(r_all.size - r.size + c_all.size - c.size)}
    if r.size == 0 or c.size == 0:
        return _no_data(**extra)
    n = int(r.size + c.size)
    pooled = np.concatenate([r, c])
    if np.ptp(pooled) == 0:
        return _undefined(n, Reason("constant_values", value=float(pooled[0])), **extra)
    from scipy import stats as sps  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)
    ks = sps.ks_2samp(r, c)
    w = float(sps.wasserstein_distance(r, c))
    q1, q3 = np.percentile(r, [25, 75])
    scales = {"iqr": float(q3 - q1), "std": float(np.std(r, ddof=1)) if r.size > 1 else 0.0}
    used = normalise if scales[normalise] > 0 else "std"
    extra.update(wasserstein=w, normalised_by=None, scale=None, wasserstein_normalised=None)
    if scales[used] > 0:
        extra.update(normalised_by=used, scale=scales[used], wasserstein_normalised=w / scales[used])
    else:
        extra.update(normalise_note=REASONS["zero_spread"], normalise_reason=Reason("zero_spread").to_dict())
    extra["wasserstein_p_value"] = _permutation_p(w, _wasserstein_null(pooled, r.size, n_permutations, seed)) if n_permutations else None
    return Estimate(value=float(ks.statistic), n=n, p_value=float(ks.pvalue), extra=extra)


# --------------------------------------------------------------------------- text


def _auc_columns(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Return the AUC of each column of ``scores`` for the 0/1 ``labels`` of that column."""
    from scipy import stats as sps  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)
    ranks = sps.rankdata(scores, axis=0)
    n1 = labels[:, 0].sum()
    n0 = labels.shape[0] - n1
    return ((ranks * labels).sum(axis=0) - n1 * (n1 + 1) / 2.0) / (n1 * n0)


def text_drift(reference: Any, current: Any, *, n_permutations: int = 199, n_folds: int = 5, ridge: float = 1.0,
               ngram_range: tuple[int, int] = (2, 4), max_texts: int = 1000, seed: int | None = 0) -> Estimate:
    """Return how well a character n-gram classifier tells production texts from golden ones.

    Texts become TF-IDF vectors of character n-grams inside word boundaries
    (``TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), lowercase=True)``, accents and
    ``ñ`` kept as they are, so Spanish works as English does; the vocabulary is fitted on both
    samples without labels, so permuting labels leaves it unchanged).  The classifier is a
    linear ridge classifier (targets +-1, penalty ``ridge``, an unpenalised-in-spirit constant
    feature) solved in kernel form, ``scores_test = K_{test,train} (K_{train,train} + lambda I)^{-1} y``,
    in ``n_folds`` fixed seeded folds; the out-of-fold scores give the AUC.  Ridge rather than
    logistic regression because its fit is linear in ``y``: the observed labels and all ``B``
    permuted labellings are solved in one matrix solve per fold, so the permutation null is the
    very same procedure, not an approximation.  ``p = (1 + #{AUC* >= AUC}) / (B + 1)``.

    Parameters
    ----------
    reference, current : array-like of str
        Texts of the golden set and of production; ``None`` is dropped.
    n_permutations : int
        Label permutations of the null (default 199).  ``p >= 1/(B+1)``, so under Holm across
        ``m`` fields the text can only be flagged when ``m/(B+1) < alpha``: 199 suffices for
        up to 9 fields at 0.05.
    n_folds : int
        Cross-validation folds (default 5).
    ridge : float
        Ridge penalty lambda (default 1; TF-IDF rows have unit norm).
    ngram_range : tuple of int
        Character n-gram lengths (default 2 to 4).
    max_texts : int
        At most this many texts per sample, a seeded subsample beyond it (bounds the ``n x n``
        kernel: 2000 texts = 32 MB).
    seed : int or None
        Seed of the subsample, the folds and the permutations.

    Returns
    -------
    Estimate
        ``value`` = cross-validated AUC (0.5 = indistinguishable); ``p_value``; ``extra``:
        ``test`` ("domain_classifier"), ``null_mean``, ``null_q95``, ``n_permutations``,
        ``n_folds``, ``n_reference``, ``n_current``, ``n_features``, ``subsampled``.

    References
    ----------
    .. [1] Lopez-Paz, D. and Oquab, M. (2017). Revisiting classifier two-sample tests.
       *ICLR*.
    .. [2] Rabanser, S., Günnemann, S. and Lipton, Z. (2019). Failing loudly: an empirical
       study of methods for detecting dataset shift. *NeurIPS*.
    """
    _check_options(n_permutations=n_permutations)
    if not 2 <= n_folds <= 20:
        raise ValueError("n_folds must be in [2, 20]")
    if ridge <= 0 or max_texts < 2:
        raise ValueError("ridge must be positive and max_texts at least 2")
    ref, miss_r = _present(reference)
    cur, miss_c = _present(current)
    if any(not isinstance(t, str) for t in ref + cur):
        raise ValueError("text drift needs strings")
    rng = np.random.default_rng(seed)
    subsampled = len(ref) > max_texts or len(cur) > max_texts
    ref = [ref[i] for i in sorted(rng.choice(len(ref), max_texts, replace=False))] if len(ref) > max_texts else ref
    cur = [cur[i] for i in sorted(rng.choice(len(cur), max_texts, replace=False))] if len(cur) > max_texts else cur
    extra: dict[str, Any] = {"test": "domain_classifier", "n_reference": len(ref), "n_current": len(cur), "n_missing": miss_r + miss_c,
                             "n_folds": n_folds, "n_permutations": n_permutations, "subsampled": subsampled}
    if not ref or not cur:
        return _no_data(**extra)
    n = len(ref) + len(cur)
    if min(len(ref), len(cur)) < n_folds:
        return _undefined(n, Reason("too_few_texts", fewest=min(len(ref), len(cur)), folds=n_folds), **extra)
    from scipy import linalg  # noqa: PLC0415 - as SciPy's statistics, on first use
    from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: PLC0415 - keeps `import calibrate.stats` free of sklearn

    try:
        x = TfidfVectorizer(analyzer="char_wb", ngram_range=tuple(ngram_range), lowercase=True, dtype=np.float64).fit_transform(ref + cur)
    except ValueError:
        return _undefined(n, "no_text_features", **extra)
    extra["n_features"] = int(x.shape[1])
    kernel = (x @ x.T).toarray() + 1.0
    y = np.concatenate([np.zeros(len(ref), np.int8), np.ones(len(cur), np.int8)])
    labels = np.column_stack([y, *[rng.permutation(y) for _ in range(n_permutations)]]) if n_permutations else y[:, None]
    targets = 2.0 * labels - 1.0
    folds = np.array_split(rng.permutation(n), n_folds)
    scores = np.empty(labels.shape, dtype=float)
    for test in folds:
        train = np.setdiff1d(np.arange(n), test, assume_unique=True)
        k_tt = kernel[np.ix_(train, train)]
        k_tt[np.diag_indices_from(k_tt)] += ridge
        coef = linalg.solve(k_tt, targets[train], assume_a="pos", overwrite_a=True, check_finite=False)
        scores[test] = kernel[np.ix_(test, train)] @ coef
    aucs = _auc_columns(scores, labels)
    auc, null = float(aucs[0]), aucs[1:]
    if null.size:
        extra.update(null_mean=float(null.mean()), null_q95=float(np.quantile(null, 0.95)))
    return Estimate(value=auc, n=n, p_value=_permutation_p(auc, null) if null.size else None, extra=extra)


# --------------------------------------------------------------------------- judge


def _tallies(indices: np.ndarray, per_unit: np.ndarray) -> np.ndarray:
    """Return, for each resample row of ``indices``, the sum of ``per_unit`` over the drawn units."""
    b, g = indices.shape
    counts = np.bincount((indices + np.arange(b)[:, None] * g).ravel(), minlength=b * g).reshape(b, g)
    return counts @ per_unit


def _rate_side(human: np.ndarray, judge: np.ndarray, idx: np.ndarray, want: bool) -> tuple[float, np.ndarray]:
    """Return sensitivity (want=True) or specificity on the data and on each resample."""
    base = (human == want).astype(float)
    hit = (base * (judge == want)).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        point = hit.sum() / base.sum() if base.sum() else math.nan
        return point, _tallies(idx, hit) / _tallies(idx, base)


def _difference(name: str, first: float, second: float, boots: np.ndarray, n: int, confidence: float, extra: dict) -> Estimate:
    defined = boots[np.isfinite(boots)]
    diff = first - second
    p = min(1.0, 2.0 * min((np.count_nonzero(defined <= 0) + 1) / (defined.size + 1),
                           (np.count_nonzero(defined >= 0) + 1) / (defined.size + 1)))
    ci = percentile_interval(defined, confidence) if defined.size else None
    note = Reason("interval_spans_zero") if ci is not None and ci[0] <= 0 <= ci[1] else None
    return Estimate(value=diff, n=n, ci=ci, p_value=p, reason=note,
                    extra={"statistic": f"{name} difference", "audit": first, "golden": second,
                           "n_undefined_resamples": int(boots.size - defined.size), **extra})


def judge_drift(golden_human: Any, golden_judge: Any, audit_human: Any, audit_judge: Any, *, labels: Sequence | None = None,
                positive: Any = None, weights: str | None = None, n_resamples: int = 2000, confidence: float = 0.95,
                seed: int | None = 0) -> dict[str, Estimate]:
    """Return the judge's agreement with humans on the newest audit minus on the golden set.

    Each sample is one verdict pair per target.  The two samples are independent (different
    targets), so each is resampled on its own (``n_resamples`` bootstrap draws of its
    targets, seeds ``seed`` and ``seed + 1``) and the difference of the resampled statistics
    gives a percentile interval and a two-sided bootstrap p-value
    ``min(1, 2 min((#{d* <= 0}+1)/(B+1), (#{d* >= 0}+1)/(B+1)))``.  Negative = the judge
    agrees less with the experts on today's traffic.  Kappa uses
    :func:`calibrate.stats.intervals.kappa_resamples`; sensitivity = P(judge positive |
    human positive), specificity = P(judge negative | human negative).

    Parameters
    ----------
    golden_human, golden_judge : array-like
        Expert gold and judge verdict per golden target (pairs with a missing side dropped).
    audit_human, audit_judge : array-like
        The same on the newest audit labels.
    labels : sequence, optional
        The label set (default: the sorted labels that occur in either sample).
    positive : label, optional
        The positive label; when given, ``sensitivity`` and ``specificity`` are returned too.
    weights : {None, "linear", "quadratic"}
        Weighted kappa (numeric labels).
    n_resamples, confidence, seed
        Bootstrap draws (default 2000), interval level (0.95), seed (0).

    Returns
    -------
    dict of str to Estimate
        ``"kappa"`` (and ``"sensitivity"``, ``"specificity"``): ``value`` = audit - golden,
        ``ci``, ``p_value``; ``extra``: ``audit``, ``golden`` (the two point values),
        ``n_golden``, ``n_audit``.  Undefined with reason ``kappa_undefined``,
        ``no_positives`` or ``no_negatives``.

    References
    ----------
    .. [1] Efron, B. and Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*,
       chapter 16 (two-sample problems). Chapman & Hall.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    sides = []
    for h, j, what in ((golden_human, golden_judge, "golden"), (audit_human, audit_judge, "audit")):
        hl, jl = to_list(h), to_list(j)
        if len(hl) != len(jl):
            raise ValueError(f"{what}_human and {what}_judge must have the same length")
        sides.append([(a, b) for a, b in zip(hl, jl, strict=True) if not is_missing(a) and not is_missing(b)])
    (gold, audit) = sides
    base = {"n_golden": len(gold), "n_audit": len(audit)}
    keys = ["kappa"] + (["sensitivity", "specificity"] if positive is not None else [])
    if not gold or not audit:
        return {k: _no_data(**base) for k in keys}
    labs = list(labels) if labels is not None else ordered_labels([v for pair in gold + audit for v in pair])
    index = {lab: i for i, lab in enumerate(labs)}
    try:
        codes = [np.array([[index[a], index[b]] for a, b in side], dtype=np.int64) for side in (gold, audit)]
    except KeyError as exc:
        raise ValueError(f"label {exc.args[0]!r} is not in labels") from None
    n = len(gold) + len(audit)
    if n_resamples * max(len(gold), len(audit)) > _MAX_CELLS * 5:
        raise ValueError(f"judge drift: {n_resamples} resamples x {max(len(gold), len(audit))} targets exceed "
                         f"{_MAX_CELLS * 5:,} bootstrap cells; pass fewer resamples")
    idx = [bootstrap_index_matrix(len(side), n_resamples=n_resamples, seed=None if seed is None else seed + s)
           for s, side in enumerate((gold, audit))]
    kap = []
    for c, ix in zip(codes, idx, strict=True):
        units = np.arange(len(c))
        kap.append((kappa_resamples(c[:, 0], c[:, 1], units, units[None, :], n_labels=len(labs), weights=weights,
                                    label_values=labs if weights else None)[0],
                    kappa_resamples(c[:, 0], c[:, 1], units, ix, n_labels=len(labs), weights=weights,
                                    label_values=labs if weights else None)))
    out: dict[str, Estimate] = {}
    if not (np.isfinite(kap[0][0]) and np.isfinite(kap[1][0])):
        out["kappa"] = _undefined(n, "kappa_undefined", **base)
    else:
        out["kappa"] = _difference("kappa", kap[1][0], kap[0][0], kap[1][1] - kap[0][1], n, confidence, {**base, "weights": weights})
    if positive is not None:
        if positive not in index:
            raise ValueError(f"positive label {positive!r} is not in labels")
        pos = index[positive]
        for key, want, reason in (("sensitivity", True, "no_positives"), ("specificity", False, "no_negatives")):
            (g_pt, g_bt), (a_pt, a_bt) = (_rate_side(c[:, 0] == pos, c[:, 1] == pos, ix, want) for c, ix in zip(codes, idx, strict=True))
            if not (np.isfinite(g_pt) and np.isfinite(a_pt)):
                out[key] = _undefined(n, reason, **base)
            else:
                out[key] = _difference(key, a_pt, g_pt, a_bt - g_bt, n, confidence, base)
    return out
