"""Paired comparisons of two systems measured on the same questions (A/B tests).

``a[i]`` and ``b[i]`` are the same metric (faithfulness, nDCG@10, an answer-quality score, …)
for system A and system B on question ``i``. Every function works on the paired differences
``d = b - a``: positive means B is better when the metric is "higher is better".

- :func:`paired_t_test`: Student's paired t-test, t = mean(d) / (sd(d) / √n), n − 1 degrees
  of freedom (scipy.stats.ttest_rel).
- :func:`wilcoxon_signed_rank`: Wilcoxon's signed-rank test on d, zero differences dropped
  (scipy.stats.wilcoxon): no normality assumption, suits bounded and skewed per-question
  metrics.
- :func:`paired_bootstrap_diff`: the mean difference with a percentile or BCa interval from
  resampling questions (pairs) with replacement, vectorised over resamples.
- :func:`relative_improvement`: (mean(b) − mean(a)) / |mean(a)|.

Pairs where either value is missing (None/NaN) are dropped and counted in
``extra["n_missing"]``. Undefined cases are results, not exceptions: fewer than two pairs,
all differences zero, constant differences (sd = 0), a baseline mean of zero.

References
----------
.. [1] Student (1908). The probable error of a mean. *Biometrika* 6(1), 1-25.
.. [2] Wilcoxon, F. (1945). Individual comparisons by ranking methods. *Biometrics
   Bulletin* 1(6), 80-83.
.. [3] Efron, B. and Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*, chapters
   13-16. Chapman & Hall.
.. [4] Smucker, M. D., Allan, J. and Carterette, B. (2007). A comparison of statistical
   significance tests for information retrieval evaluation. *Proceedings of CIKM 2007*,
   623-632.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from calibrate.reasons import Reason, join
from calibrate.stats._common import as_float_array
from calibrate.stats.intervals import CI_METHODS, bca_interval, bootstrap_draws, percentile_interval
from calibrate.stats.result import Estimate

__all__ = ["paired_bootstrap_diff", "paired_t_test", "relative_improvement", "resampled_means", "wilcoxon_signed_rank"]


def _pairs(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray, dict]:
    """Return the complete pairs (as floats) and ``{"n_missing": …}`` when pairs were dropped."""
    x = _floats(a, "a")
    y = _floats(b, "b")
    if x.size != y.size:
        raise ValueError(f"a and b must have the same length (a={x.size}, b={y.size})")
    keep = np.isfinite(x) & np.isfinite(y)
    dropped = int(x.size - keep.sum())
    return x[keep], y[keep], ({"n_missing": dropped} if dropped else {})


def _floats(values: Any, what: str) -> np.ndarray:
    """Return values as a 1-D float array: a numeric numpy array converted as it is (the report's 10^5 per-answer
    values: no Python object per value), anything else through `as_float_array` (None/NA become NaN)."""
    if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype.kind in "fiub":
        return values.astype(float)
    return as_float_array(values, what)


def _constant_note(d: np.ndarray) -> Reason | None:
    """Return why a test on the differences is undefined because they are all equal, or None."""
    if d.size and np.all(d == d[0]):
        if d[0] == 0:
            return Reason("differences_zero")
        return Reason("differences_constant", difference=float(d[0]))
    return None


def paired_t_test(a: Any, b: Any) -> Estimate:
    """Return the paired t statistic of ``b - a`` with its two-sided p-value.

    Parameters
    ----------
    a, b : array-like of float
        The metric of system A and of system B on the same questions, pair by pair.

    Returns
    -------
    Estimate
        ``value`` = t = mean(d) / (sd(d)/√n) with d = b − a and sd the sample standard
        deviation (ddof = 1); ``p_value`` two-sided from Student's t with n − 1 degrees of
        freedom; ``n`` = pairs; ``extra``: ``df``, ``mean_difference``, ``sd_difference``.
        Undefined for n < 2 and for constant differences (sd = 0).

    References
    ----------
    .. [1] Student (1908). The probable error of a mean. *Biometrika* 6(1), 1-25.
    """
    x, y, extra = _pairs(a, b)
    n = x.size
    if n == 0:
        return Estimate.no_data(Reason("no_pairs_both_values"), **extra)
    d = y - x
    extra = {**extra, "mean_difference": float(d.mean())}
    if n < 2:
        return Estimate.undefined(n, Reason("ttest_too_few"), **extra)
    note = _constant_note(d)
    if note:
        return Estimate.undefined(n, note, df=n - 1, sd_difference=0.0, **extra)
    with warnings.catch_warnings():
        # scipy warns of precision loss for nearly identical values; the result is still used.
        warnings.simplefilter("ignore", RuntimeWarning)
        from scipy import stats as sps  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)
        res = sps.ttest_rel(y, x)
    return Estimate(value=float(res.statistic), n=n, p_value=float(res.pvalue),
                    extra={**extra, "df": n - 1, "sd_difference": float(d.std(ddof=1))})


def wilcoxon_signed_rank(a: Any, b: Any, *, method: str = "auto") -> Estimate:
    """Return Wilcoxon's signed-rank statistic of ``b - a`` with its two-sided p-value.

    Zero differences are dropped before ranking (Wilcoxon's original treatment, scipy's
    ``zero_method="wilcox"``); ties share their mean rank.

    Parameters
    ----------
    a, b : array-like of float
        The metric of system A and of system B, pair by pair.
    method : {"auto", "exact", "approx"}
        Passed to ``scipy.stats.wilcoxon``: ``"auto"`` uses the exact null distribution for
        up to 50 non-zero differences without zeros, else the normal approximation.

    Returns
    -------
    Estimate
        ``value`` = the statistic scipy reports for the two-sided test, min(W+, W−), the
        smaller of the rank sums of positive and negative differences; ``p_value``;
        ``n`` = pairs; ``extra``: ``n_nonzero``, ``w_plus``, ``w_minus``, ``method``.
        Undefined when every difference is zero.

    References
    ----------
    .. [1] Wilcoxon, F. (1945). Individual comparisons by ranking methods. *Biometrics
       Bulletin* 1(6), 80-83.
    """
    if method not in ("auto", "exact", "approx"):
        raise ValueError(f"method must be 'auto', 'exact' or 'approx', got {method!r}")
    x, y, extra = _pairs(a, b)
    n = x.size
    if n == 0:
        return Estimate.no_data(Reason("no_pairs_both_values"), **extra)
    d = y - x
    nonzero = d[d != 0]
    extra = {**extra, "n_nonzero": int(nonzero.size), "method": method}
    if nonzero.size == 0:
        return Estimate.undefined(n, Reason("differences_zero"), **extra)
    from scipy import stats as sps  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)
    ranks = sps.rankdata(np.abs(nonzero))
    extra["w_plus"] = float(ranks[nonzero > 0].sum())
    extra["w_minus"] = float(ranks[nonzero < 0].sum())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # exact p-value with ties: scipy warns and falls back
        warnings.simplefilter("ignore", UserWarning)
        res = sps.wilcoxon(y, x, zero_method="wilcox", method=method)
    note = None
    if nonzero.size < 6:
        note = Reason("wilcoxon_few_nonzero", count=int(nonzero.size))
    return Estimate(value=float(res.statistic), n=n, p_value=float(res.pvalue), reason=note, extra=extra)


def paired_bootstrap_diff(a: Any, b: Any, *, n_resamples: int = 2000, confidence: float = 0.95,
                          method: str = "percentile", seed: int | None = 0) -> Estimate:
    """Return the mean paired difference ``mean(b - a)`` with a bootstrap confidence interval.

    Pairs are resampled with replacement (a question keeps both of its values), so the
    interval carries the correlation between the systems on the same questions. The index
    matrix is :func:`calibrate.stats.bootstrap_index_matrix` with the same ``seed``, drawn in
    blocks; each block's means are one gather and one row mean.

    Parameters
    ----------
    a, b : array-like of float
        The metric of system A and of system B, pair by pair.
    n_resamples : int
        Bootstrap resamples B.
    confidence : float
        Interval level.
    method : {"percentile", "bca"}
        Percentile interval, or bias-corrected and accelerated (acceleration from the
        leave-one-pair-out jackknife).
    seed : int or None
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    Estimate
        ``value`` = mean difference; ``ci``; ``p_value`` = two-sided bootstrap p-value for
        "no difference", min(1, 2 min((#{d* ≤ 0} + 1)/(B + 1), (#{d* ≥ 0} + 1)/(B + 1)));
        ``extra``: ``method``, ``n_resamples``, ``confidence``, ``seed``, ``bootstrap_se``.
        Undefined for fewer than two pairs.

    References
    ----------
    .. [1] Efron, B. and Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*,
       chapters 13-14 and 16. Chapman & Hall.
    .. [2] Davison, A. C. and Hinkley, D. V. (1997). *Bootstrap Methods and their
       Application*, section 4.4. Cambridge University Press.
    """
    if int(n_resamples) != n_resamples or n_resamples < 1:
        raise ValueError("n_resamples must be a positive integer")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    if method not in CI_METHODS:
        raise ValueError(f"method must be one of {CI_METHODS}, got {method!r}")
    x, y, extra = _pairs(a, b)
    n = x.size
    extra = {**extra, "method": method, "n_resamples": n_resamples, "confidence": confidence, "seed": seed,
             "statistic": "mean difference (b - a)"}
    if n == 0:
        return Estimate.no_data(Reason("no_pairs_both_values"), **extra)
    d = y - x
    theta = float(d.mean())
    if n < 2:
        return Estimate(value=theta, n=n, status="ok", reason=Reason("one_pair_no_interval"), extra=extra)
    values = resampled_means(d, n_resamples, seed)
    extra["bootstrap_se"] = float(values.std(ddof=1)) if n_resamples > 1 else 0.0
    notes = []
    if method == "percentile":
        ci = percentile_interval(values, confidence)
    else:
        jack = (d.sum() - d) / (n - 1)
        ci, info, bca_note = bca_interval(values, theta, jack, confidence)
        extra.update(info)
        if bca_note:
            notes.append(bca_note)
    if np.all(d == d[0]):
        notes.append(Reason("differences_same"))
    le = (np.count_nonzero(values <= 0) + 1) / (n_resamples + 1)
    ge = (np.count_nonzero(values >= 0) + 1) / (n_resamples + 1)
    return Estimate(value=theta, n=n, ci=ci, p_value=min(1.0, 2.0 * min(le, ge)), reason=join(notes),
                    extra={**extra, "p_value_method": "bootstrap, two-sided"})


def resampled_means(values: Any, n_resamples: int, seed: int | None) -> np.ndarray:
    """Return the mean of each bootstrap resample of `values`: row b of the index matrix
    (:func:`calibrate.stats.bootstrap_index_matrix`, the same ``seed``) gives resample b.

    Each generator call's rows are gathered into two buffers reused for every call (the indices widened to the
    platform's index type, then one bounds-free take), not a fresh gather per call: at 10^5 values and 2,000
    resamples the gather was as costly as the draws. The means are those of ``values[draw].mean(axis=1)``, bit for
    bit (the same values in the same order, reduced the same way).
    """
    x = np.asarray(values, dtype=float)
    n = x.size
    if x.ndim != 1 or n == 0:
        raise ValueError("values must be a non-empty 1-D array")
    out = np.empty(n_resamples)
    index, gathered = None, None
    pos = 0
    for draw in bootstrap_draws(n, n_resamples, seed):
        rows = draw.shape[0]
        if index is None:
            index, gathered = np.empty(draw.shape, dtype=np.intp), np.empty(draw.shape)
        np.copyto(index[:rows], draw, casting="safe")
        np.take(x, index[:rows], out=gathered[:rows], mode="clip")  # every index is in [0, n): clip changes none
        out[pos: pos + rows] = gathered[:rows].mean(axis=1)
        pos += rows
    return out


def relative_improvement(a: Any, b: Any) -> Estimate:
    """Return the relative improvement of B over A, (mean(b) − mean(a)) / |mean(a)|, over complete pairs.

    Returns
    -------
    Estimate
        ``extra``: ``mean_a``, ``mean_b``. Undefined when the mean of A is 0 (no baseline
        to be relative to).
    """
    x, y, extra = _pairs(a, b)
    if x.size == 0:
        return Estimate.no_data(Reason("no_pairs_both_values"), **extra)
    mean_a, mean_b = float(x.mean()), float(y.mean())
    extra = {**extra, "mean_a": mean_a, "mean_b": mean_b}
    if mean_a == 0:
        return Estimate.undefined(x.size, Reason("baseline_zero"), **extra)
    return Estimate(value=(mean_b - mean_a) / abs(mean_a), n=x.size, extra=extra)
