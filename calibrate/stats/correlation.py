"""Correlation between human and judge scores: Spearman, Kendall tau-b, Pearson.

Point estimates with the usual scipy p-values, plus :func:`grouped_correlation`, the
per-group ("summary-level") correlation averaged over groups used in the meta-evaluation
of summarisation metrics (SummEval) and LLM judges (G-Eval).

Pairs where either score is missing (``None``/NaN/inf) are dropped (pairwise deletion);
the count is reported in ``extra["n_missing"]``.  A correlation with fewer than two pairs,
or with a constant variable, is undefined: ``value=None`` with a note such as
``"x is constant"``; NaN is never returned.

References
----------
.. [1] Spearman, C. (1904). The proof and measurement of association between two things.
   *American Journal of Psychology* 15(1), 72-101.
.. [2] Kendall, M. G. (1945). The treatment of ties in ranking problems. *Biometrika*
   33(3), 239-251.
.. [3] Fabbri, A. R. et al. (2021). SummEval: re-evaluating summarization evaluation.
   *Transactions of the ACL* 9, 391-409.
.. [4] Liu, Y. et al. (2023). G-Eval: NLG evaluation using GPT-4 with better human
   alignment. *Proceedings of EMNLP 2023*, 2511-2522.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from calibrate.reasons import Reason
from calibrate.stats._common import as_float_array, check_same_length, is_missing, to_list
from calibrate.stats.result import Estimate

__all__ = ["spearman_rho", "kendall_tau_b", "pearson_r", "grouped_correlation", "CORRELATION_METHODS"]

CORRELATION_METHODS = ("spearman", "kendall", "pearson")


def _prepare(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray, int]:
    """Return finite, aligned float arrays and the number of pairs dropped."""
    xa, ya = as_float_array(x, "x"), as_float_array(y, "y")
    check_same_length(x=xa, y=ya)
    keep = np.isfinite(xa) & np.isfinite(ya)
    return xa[keep], ya[keep], int((~keep).sum())


def undefined_reason(x: np.ndarray, y: np.ndarray) -> tuple[str, Reason] | None:
    """Return ``(status, reason)`` when a correlation of ``x`` and ``y`` is undefined, else ``None``.

    Parameters
    ----------
    x, y : numpy.ndarray
        Finite, aligned scores.

    Returns
    -------
    tuple of (str, Reason) or None
        ``("no_data", ...)`` for no pairs, ``("undefined", ...)`` for ``n < 2`` or a constant
        variable.

    References
    ----------
    .. [1] Kendall, M. G. and Gibbons, J. D. (1990). *Rank Correlation Methods*, 5th ed.
       Edward Arnold (a correlation is undefined when either ranking has zero variance).
    """
    n = x.size
    if n == 0:
        return "no_data", Reason("no_pairs_both_scores")
    if n < 2:
        return "undefined", Reason("correlation_too_few")
    cx, cy = bool(np.all(x == x[0])), bool(np.all(y == y[0]))
    if cx and cy:
        return "undefined", Reason("both_constant")
    if cx:
        return "undefined", Reason("x_constant")
    if cy:
        return "undefined", Reason("y_constant")
    return None


def average_ranks(v: np.ndarray) -> np.ndarray:
    """Return the 1-based ranks of ``v``, ties sharing their mean rank (``scipy.stats.rankdata``'s "average")."""
    order = np.argsort(v, kind="stable")
    ordered = v[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    sizes = np.diff(np.append(starts, v.size))
    ranks = np.empty(v.size)
    ranks[order] = np.repeat(starts + 1 + (sizes - 1) / 2.0, sizes)  # exact: integers and halves
    return ranks


def _spearman(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Return ``scipy.stats.spearmanr(x, y)``'s statistic and two-sided p-value, bit for bit, without SciPy's stats.

    The same steps as SciPy 1.17: Pearson's r of the average ranks (``np.corrcoef`` of the stacked
    ranks), then ``t = r·sqrt(dof / ((1 + r)(1 − r)))`` with ``dof = n − 2`` and ``p = 2·sf(|t|)`` of
    Student's t, ``scipy.special.stdtr``: a claim report computes its faithfulness rho on every run,
    and ``scipy.stats`` costs about a second to import where ``scipy.special`` is loaded already
    (docs/architecture.md, "The import rule for the statistics"; tests/stats/test_stats_correlation.py compares them).
    """
    from scipy.special import stdtr  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)

    rs = np.corrcoef(np.column_stack((average_ranks(x), average_ranks(y))), rowvar=False)
    dof = x.size - 2
    with np.errstate(divide="ignore"):
        t = rs * np.sqrt((dof / ((rs + 1.0) * (1.0 - rs))).clip(0))
    return float(rs[1, 0]), float(2 * stdtr(dof, -np.abs(t))[1, 0])


def correlation_value(x: np.ndarray, y: np.ndarray, method: str) -> tuple[float, float | None]:
    """Return ``(statistic, p_value)`` from scipy for already-validated data (private-ish).

    Parameters
    ----------
    x, y : numpy.ndarray
        Finite, aligned, non-constant, ``n >= 2``.
    method : {"spearman", "kendall", "pearson"}

    Returns
    -------
    tuple
        The correlation and its two-sided p-value (``None`` if scipy cannot give one,
        e.g. for ``n = 2``).

    References
    ----------
    .. [1] Virtanen, P. et al. (2020). SciPy 1.0: fundamental algorithms for scientific
       computing in Python. *Nature Methods* 17, 261-272.
    """
    if method not in CORRELATION_METHODS:
        raise ValueError(f"method must be one of {CORRELATION_METHODS}, got {method!r}")
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if method == "spearman":
            value, p = _spearman(x, y)
        else:
            from scipy import stats as sps  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)
            res = sps.kendalltau(x, y, variant="b") if method == "kendall" else sps.pearsonr(x, y)
            value, p = float(res.statistic), float(res.pvalue)
    if x.size < 3 or not np.isfinite(p):
        p = None
    return float(np.clip(value, -1.0, 1.0)), p


def _correlation(x: Any, y: Any, method: str) -> Estimate:
    xa, ya, dropped = _prepare(x, y)
    extra: dict[str, Any] = {"statistic": method}
    if dropped:
        extra["n_missing"] = dropped
    reason = undefined_reason(xa, ya)
    if reason is not None:
        status, note = reason
        if status == "no_data":
            return Estimate.no_data(note, **extra)
        return Estimate.undefined(xa.size, note, **extra)
    value, p = correlation_value(xa, ya, method)
    note = None if p is not None else Reason("no_p_value_two")
    return Estimate(value=value, n=xa.size, p_value=p, reason=note, extra=extra)


def spearman_rho(x: Sequence[float], y: Sequence[float]) -> Estimate:
    """Return Spearman's rank correlation (average ranks for ties) with its p-value.

    Parameters
    ----------
    x, y : array-like of float
        Paired scores (e.g. human and judge); pairs with a missing side are dropped.

    Returns
    -------
    Estimate
        ``value`` = Pearson correlation of the average ranks; ``p_value`` from
        ``scipy.stats.spearmanr`` (t approximation, two-sided; ``None`` for ``n = 2``);
        ``n`` = complete pairs.  Undefined for ``n < 2`` or a constant variable.

    References
    ----------
    .. [1] Spearman, C. (1904). The proof and measurement of association between two
       things. *American Journal of Psychology* 15(1), 72-101.
    .. [2] Zwillinger, D. and Kokoska, S. (2000). *CRC Standard Probability and Statistics
       Tables and Formulae*, section 14.7. Chapman & Hall.
    """
    return _correlation(x, y, "spearman")


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> Estimate:
    """Return Kendall's tau-b (tie-corrected) with its p-value.

    .. math:: \\tau_b = \\frac{n_c - n_d}{\\sqrt{(n_0 - n_1)(n_0 - n_2)}}

    Parameters
    ----------
    x, y : array-like of float
        Paired scores; pairs with a missing side are dropped.

    Returns
    -------
    Estimate
        ``p_value`` from ``scipy.stats.kendalltau`` (exact for small untied samples, normal
        approximation otherwise); undefined for ``n < 2`` or a constant variable.

    References
    ----------
    .. [1] Kendall, M. G. (1945). The treatment of ties in ranking problems. *Biometrika*
       33(3), 239-251.
    .. [2] Knight, W. R. (1966). A computer method for calculating Kendall's tau with
       ungrouped data. *JASA* 61(314), 436-439.
    """
    return _correlation(x, y, "kendall")


def pearson_r(x: Sequence[float], y: Sequence[float]) -> Estimate:
    """Return Pearson's product-moment correlation with its p-value.

    Parameters
    ----------
    x, y : array-like of float
        Paired scores; pairs with a missing side are dropped.

    Returns
    -------
    Estimate
        ``p_value`` from ``scipy.stats.pearsonr`` (exact beta distribution under
        bivariate normality; ``None`` for ``n = 2``); undefined for ``n < 2`` or a constant
        variable.

    References
    ----------
    .. [1] Pearson, K. (1896). Mathematical contributions to the theory of evolution III:
       regression, heredity and panmixia. *Phil. Trans. R. Soc. A* 187, 253-318.
    """
    return _correlation(x, y, "pearson")


def grouped_correlation(x: Sequence[float], y: Sequence[float], groups: Sequence, *, method: str = "spearman") -> Estimate:
    """Return the correlation computed within each group, averaged over groups.

    This is the "summary-level" correlation of SummEval and G-Eval: for every group (e.g.
    the candidate answers to one question/document) correlate human and judge scores
    within the group, then take the unweighted mean over groups.  Groups where fewer than
    two complete pairs remain, or where either side is constant, have no correlation; they
    are skipped and counted.

    Parameters
    ----------
    x, y : array-like of float
        Paired scores; pairs with a missing side are dropped.
    groups : array-like
        Group id of each pair (any hashable; missing ids raise ``ValueError``).
    method : {"spearman", "kendall", "pearson"}
        Within-group correlation.

    Returns
    -------
    Estimate
        ``value`` = mean of the defined within-group correlations; ``n`` = groups used;
        ``extra``: ``groups`` (used), ``groups_skipped``, ``n_items`` (pairs in used
        groups), ``statistic``.  Undefined when no group has a defined correlation.

    References
    ----------
    .. [1] Fabbri, A. R. et al. (2021). SummEval: re-evaluating summarization evaluation.
       *Transactions of the ACL* 9, 391-409.
    .. [2] Liu, Y. et al. (2023). G-Eval: NLG evaluation using GPT-4 with better human
       alignment. *Proceedings of EMNLP 2023*, 2511-2522.
    """
    if method not in CORRELATION_METHODS:
        raise ValueError(f"method must be one of {CORRELATION_METHODS}, got {method!r}")
    xa, ya = as_float_array(x, "x"), as_float_array(y, "y")
    gl = to_list(groups)
    check_same_length(x=xa, y=ya, groups=gl)
    if any(is_missing(g) for g in gl):
        raise ValueError("groups must not contain missing ids")
    members: dict[Any, list[int]] = {}
    for i, g in enumerate(gl):
        members.setdefault(g, []).append(i)
    values, n_items, skipped = [], 0, 0
    for idx in members.values():
        gx, gy = xa[idx], ya[idx]
        keep = np.isfinite(gx) & np.isfinite(gy)
        gx, gy = gx[keep], gy[keep]
        if undefined_reason(gx, gy) is not None:
            skipped += 1
            continue
        values.append(correlation_value(gx, gy, method)[0])
        n_items += gx.size
    extra = {"groups": len(values), "groups_skipped": skipped, "n_items": n_items, "statistic": method}
    if not members:
        return Estimate.no_data(Reason("no_groups"), **extra)
    if not values:
        return Estimate.undefined(0, Reason("no_group_defined"), **extra)
    note = Reason("groups_skipped", count=skipped) if skipped else None
    return Estimate(value=float(np.mean(values)), n=len(values), reason=note, extra=extra)
