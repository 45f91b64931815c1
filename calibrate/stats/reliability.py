"""Chance-corrected agreement among many raters at once: Fleiss' kappa and Krippendorff's alpha.

:func:`fleiss_kappa` (generalised to unequal numbers of raters per item) and
:func:`krippendorff_alpha` (nominal, ordinal, interval, ratio; missing values allowed), each also
from a table of counts (:func:`fleiss_kappa_counts`, :func:`krippendorff_alpha_counts`). Two
raters, and every pair of many, are :mod:`calibrate.stats.agreement`.

Every function returns an :class:`~calibrate.stats.result.Estimate`; undefined statistics (one
label only, no item with two ratings) come back as ``value=None`` with a ``status`` and a
``reason``. Missing ratings (``None``, NaN, ``pandas.NA``) are dropped per item; the number
dropped is reported in ``extra["n_missing"]``.

References
----------
.. [1] Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters.
   *Psychological Bulletin* 76(5), 378-382.
.. [2] Krippendorff, K. (2011). Computing Krippendorff's alpha-reliability. Annenberg
   School for Communication, University of Pennsylvania.
.. [3] Artstein, R. and Poesio, M. (2008). Inter-coder agreement for computational
   linguistics. *Computational Linguistics* 34(4), 555-596.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from calibrate.reasons import Reason
from calibrate.stats._common import encode, is_missing, is_numeric_label, ordered_labels, to_list, validate_labels
from calibrate.stats.result import Estimate

__all__ = ["fleiss_kappa", "fleiss_kappa_counts", "krippendorff_alpha", "krippendorff_alpha_counts"]

_LEVELS = ("nominal", "ordinal", "interval", "ratio")


def fleiss_kappa(ratings: Sequence[Sequence], *, labels: Sequence | None = None) -> Estimate:
    """Return Fleiss' kappa for many raters, allowing unequal numbers of raters per item.

    For item ``i`` with ``n_i`` ratings, ``n_ij`` of them in category ``j``:

    .. math::

        P_i = \\frac{\\sum_j n_{ij}(n_{ij}-1)}{n_i(n_i-1)} \\quad (n_i \\ge 2), \\qquad
        \\bar P = \\frac{1}{N'}\\sum_{i: n_i \\ge 2} P_i, \\qquad
        p_j = \\frac{\\sum_i n_{ij}}{\\sum_i n_i}, \\qquad
        \\bar P_e = \\sum_j p_j^2, \\qquad
        \\kappa = \\frac{\\bar P - \\bar P_e}{1 - \\bar P_e}.

    ``P_i`` is the proportion of agreeing ordered rater pairs on item ``i``; items with
    fewer than two ratings carry no agreement information and are skipped in ``P̄``.  The
    category proportions ``p_j`` are pooled over *all* ratings (including single-rated
    items).  With the same number of raters on every item this is exactly Fleiss (1971).

    Parameters
    ----------
    ratings : sequence of sequences
        One list of category labels per item (any length; missing labels are dropped).
        A 2-D array ``items x raters`` with NaN/None for missing also works.
    labels : sequence, optional
        The category set; labels outside it raise ``ValueError``.  Unused categories do not
        change the value.  Default: the sorted distinct labels.

    Returns
    -------
    Estimate
        ``n`` = items with at least two ratings; ``extra``: ``n_items_skipped`` (fewer than
        two ratings), ``n_ratings``, ``observed_agreement`` (``P̄``), ``expected_agreement``
        (``P̄_e``).  Undefined when no item has two ratings or all ratings share one label.

    References
    ----------
    .. [1] Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters.
       *Psychological Bulletin* 76(5), 378-382.
    .. [2] Fleiss, J. L., Levin, B. and Paik, M. C. (2003). *Statistical Methods for Rates
       and Proportions*, 3rd ed., section 18.1. Wiley.
    .. [3] Gwet, K. L. (2014). *Handbook of Inter-Rater Reliability*, 4th ed., chapter 5
       (Fleiss' generalised kappa with missing ratings; Gwet averages ``n_ij / n_i`` over
       items for ``p_j``, which coincides with the pooled ``p_j`` above for equal ``n_i``).
    """
    items = [[v for v in to_list(row) if not is_missing(v)] for row in to_list(ratings)]
    all_values = [v for row in items for v in row]
    if not all_values:
        return Estimate.no_data(Reason("no_ratings"))
    labs = validate_labels(labels) if labels is not None else ordered_labels(all_values)
    index = {lab: i for i, lab in enumerate(labs)}
    k = len(labs)
    counts = np.zeros((len(items), k), dtype=np.int64)
    for i, row in enumerate(items):
        if row:
            counts[i] = np.bincount(encode(row, index, "ratings"), minlength=k)
    return fleiss_kappa_counts(counts, labels=labs)


def fleiss_kappa_counts(counts: np.ndarray, *, labels: Sequence) -> Estimate:
    """Return Fleiss' kappa from an items × categories matrix of rating counts.

    The vectorised core of :func:`fleiss_kappa` (same formula, same undefined cases), for
    callers that already hold the counts, such as a report over 100,000 targets.

    Parameters
    ----------
    counts : numpy.ndarray, shape (items, categories)
        ``counts[i, j]`` = number of raters who put item ``i`` in category ``j``.
    labels : sequence
        The category of each column (used in notes).

    Returns
    -------
    Estimate
        As :func:`fleiss_kappa`.

    References
    ----------
    .. [1] Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters.
       *Psychological Bulletin* 76(5), 378-382.
    """
    labs = list(labels)
    counts = np.asarray(counts, dtype=np.int64)
    if counts.size == 0 or counts.sum() == 0:
        return Estimate.no_data(Reason("no_ratings"))
    n_i = counts.sum(axis=1)
    used = n_i >= 2
    extra: dict[str, Any] = {"n_items_skipped": int((~used).sum()), "n_ratings": int(n_i.sum())}
    n_used = int(used.sum())
    if n_used == 0:
        return Estimate.undefined(0, Reason("no_item_two_ratings"), **extra)
    cu, nu = counts[used].astype(float), n_i[used].astype(float)
    p_i = (cu * (cu - 1)).sum(axis=1) / (nu * (nu - 1))
    p_bar = float(p_i.mean())
    p_j = counts.sum(axis=0) / n_i.sum()
    p_e = float(p_j @ p_j)
    extra.update(observed_agreement=p_bar, expected_agreement=p_e)
    if np.count_nonzero(counts.sum(axis=0)) == 1:
        label = labs[int(np.flatnonzero(counts.sum(axis=0))[0])]
        return Estimate.undefined(n_used, Reason("single_label", label=label), **extra)
    return Estimate(value=(p_bar - p_e) / (1.0 - p_e), n=n_used, extra=extra)


def _reliability_rows(reliability_data: Any) -> list[list]:
    if hasattr(reliability_data, "to_numpy") and not isinstance(reliability_data, np.ndarray):
        reliability_data = reliability_data.to_numpy(dtype=object)
    rows = [to_list(r) for r in to_list(reliability_data)]
    if rows and len({len(r) for r in rows}) != 1:
        raise ValueError("reliability_data must be rectangular (raters x units)")
    return rows


def krippendorff_alpha(reliability_data: Any, *, level: str = "nominal", values: Sequence | None = None) -> Estimate:
    """Return Krippendorff's alpha by the coincidence-matrix method.

    .. math::

        \\alpha = 1 - (n_{\\cdot\\cdot} - 1)
            \\frac{\\sum_{c,k} o_{ck}\\, \\delta^2_{ck}}{\\sum_{c,k} n_c n_k\\, \\delta^2_{ck}},
        \\qquad
        o_{ck} = \\sum_u \\frac{\\#\\{(i,j), i \\ne j: v_{iu}=c, v_{ju}=k\\}}{m_u - 1}

    over units ``u`` with ``m_u >= 2`` values (pairable values); ``n_c`` are the coincidence
    marginals and ``n..`` their total.  Difference functions:

    - nominal: ``δ² = [c ≠ k]``
    - ordinal: ``δ²_ck = (Σ_{g=c..k} n_g - (n_c + n_k)/2)²`` — ranks of the ordered value
      domain weighted by the marginal frequencies ``n_g``
    - interval: ``δ² = (c - k)²``
    - ratio: ``δ² = ((c - k) / (c + k))²`` (0 when ``c = k = 0``)

    Parameters
    ----------
    reliability_data : array-like, shape (raters, units)
        One row per rater (observer/coder), one column per unit; ``None``/NaN = missing.
    level : {"nominal", "ordinal", "interval", "ratio"}
        Level of measurement (difference function).
    values : sequence, optional
        The value domain, in order (needed for ordinal data whose order is not the natural
        sort order).  Values outside it raise ``ValueError``.  Default: sorted distinct
        values.  Interval and ratio need numeric values.

    Returns
    -------
    Estimate
        ``n`` = pairable units (units with at least two values); ``extra``:
        ``n_pairable_values``, ``level``.  Undefined when no unit has two values or when
        all pairable values are identical (expected disagreement 0).

    References
    ----------
    .. [1] Krippendorff, K. (2011). Computing Krippendorff's alpha-reliability. Annenberg
       School for Communication Departmental Papers 43, University of Pennsylvania.
    .. [2] Krippendorff, K. (2004). *Content Analysis: An Introduction to Its Methodology*,
       2nd ed., chapter 11. Sage.
    .. [3] Hayes, A. F. and Krippendorff, K. (2007). Answering the call for a standard
       reliability measure for coding data. *Communication Methods and Measures* 1(1),
       77-89.
    """
    if level not in _LEVELS:
        raise ValueError(f"level must be one of {_LEVELS}, got {level!r}")
    rows = _reliability_rows(reliability_data)
    extra: dict[str, Any] = {"level": level}
    n_units = len(rows[0]) if rows else 0
    units = [[r[u] for r in rows if not is_missing(r[u])] for u in range(n_units)]
    present = [v for unit in units for v in unit]
    if not present:
        return Estimate.no_data(Reason("no_values"), **extra)
    domain = validate_labels(values) if values is not None else ordered_labels(present)
    if level in ("interval", "ratio") and not all(is_numeric_label(v) for v in domain):
        raise ValueError(f"{level} alpha needs numeric values")
    index = {v: i for i, v in enumerate(domain)}
    k = len(domain)
    counts = np.zeros((n_units, k))
    for u, unit in enumerate(units):
        if unit:
            counts[u] = np.bincount(encode(unit, index, "reliability_data"), minlength=k)
    return krippendorff_alpha_counts(counts, level=level, values=domain)


def krippendorff_alpha_counts(counts: np.ndarray, *, level: str = "nominal", values: Sequence) -> Estimate:
    """Return Krippendorff's alpha from a units × values matrix of counts.

    The vectorised core of :func:`krippendorff_alpha` (same coincidence-matrix method,
    same undefined cases), for callers that already hold the counts.

    Parameters
    ----------
    counts : numpy.ndarray, shape (units, values)
        ``counts[u, c]`` = number of coders who gave unit ``u`` the value ``values[c]``.
    level : {"nominal", "ordinal", "interval", "ratio"}
    values : sequence
        The value of each column, in order (numeric for interval and ratio).

    Returns
    -------
    Estimate
        As :func:`krippendorff_alpha`.

    References
    ----------
    .. [1] Krippendorff, K. (2011). Computing Krippendorff's alpha-reliability. Annenberg
       School for Communication Departmental Papers 43, University of Pennsylvania.
    """
    if level not in _LEVELS:
        raise ValueError(f"level must be one of {_LEVELS}, got {level!r}")
    domain = list(values)
    if level in ("interval", "ratio") and not all(is_numeric_label(v) for v in domain):
        raise ValueError(f"{level} alpha needs numeric values")
    extra: dict[str, Any] = {"level": level}
    counts = np.asarray(counts, dtype=float)
    if counts.size == 0 or counts.sum() == 0:
        return Estimate.no_data(Reason("no_values"), **extra)
    m_u = counts.sum(axis=1)
    pairable = m_u >= 2
    if not pairable.any():
        return Estimate.undefined(0, Reason("no_unit_two_values"), **extra)
    c = counts[pairable]
    m = m_u[pairable]
    o = np.einsum("uc,uk->ck", c / (m - 1)[:, None], c) - np.diag((c / (m - 1)[:, None]).sum(axis=0))
    n_c = o.sum(axis=1)
    n_total = float(n_c.sum())
    extra["n_pairable_values"] = int(round(n_total))
    delta2 = difference_matrix(level, domain, n_c)
    expected = float(n_c @ delta2 @ n_c)
    n_pu = int(pairable.sum())
    if expected <= 0:
        used = np.flatnonzero(n_c > 0)
        label = domain[int(used[0])]
        return Estimate.undefined(n_pu, Reason("single_value_no_disagreement", label=label), **extra)
    observed = float((o * delta2).sum())
    return Estimate(value=1.0 - (n_total - 1.0) * observed / expected, n=n_pu, extra=extra)


def difference_matrix(level: str, domain: list, n_c: np.ndarray) -> np.ndarray:
    """Return the squared difference matrix ``δ²`` for ``level`` on ``domain`` (``n_c``: the value totals, which only
    the ordinal metric reads)."""
    k = len(domain)
    if level == "nominal":
        return 1.0 - np.eye(k)
    if level == "ordinal":
        cum = np.concatenate([[0.0], np.cumsum(n_c)])
        i, j = np.minimum.outer(np.arange(k), np.arange(k)), np.maximum.outer(np.arange(k), np.arange(k))
        between = cum[j + 1] - cum[i]
        return (between - (n_c[i] + n_c[j]) / 2.0) ** 2
    v = np.asarray(domain, dtype=float)
    if level == "interval":
        return (v[:, None] - v[None, :]) ** 2
    total = v[:, None] + v[None, :]
    diff = v[:, None] - v[None, :]
    ratio = np.divide(diff, total, out=np.zeros((k, k)), where=total != 0)
    return ratio**2
