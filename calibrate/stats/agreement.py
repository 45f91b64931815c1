"""Chance-corrected agreement between two raters on categorical (or ordinal) labels, and between every pair of many.

Two raters
    :func:`cohen_kappa` (unweighted, linear or quadratic weights), :func:`percent_agreement`,
    :func:`confusion_matrix`, :func:`per_label_prf`.
Pairs of many raters
    :func:`pairwise_cohen_kappa` (every pair of raters over their shared units),
    :func:`crowd_pairwise_kappa` and :func:`co_rated_pairs` (only the pairs that co-occur,
    in time linear in the ratings rather than quadratic in the raters).

Every function returns an :class:`~calibrate.stats.result.Estimate` (or plain containers);
undefined statistics (one label only, fewer than two items, nothing shared) come back as
``value=None`` with a ``status`` and a ``reason`` instead of NaN or an exception. Agreement
among many raters at once (Fleiss' kappa, Krippendorff's alpha) is :mod:`calibrate.stats.reliability`.

Missing ratings (``None``, NaN, ``pandas.NA``) are dropped pairwise: an item counts only if both
raters labelled it.  The number dropped is reported in ``extra["n_missing"]``.

References
----------
.. [1] Cohen, J. (1960). A coefficient of agreement for nominal scales. *Educational and
   Psychological Measurement* 20(1), 37-46.
.. [2] Cohen, J. (1968). Weighted kappa. *Psychological Bulletin* 70(4), 213-220.
.. [3] Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters.
   *Psychological Bulletin* 76(5), 378-382.
.. [4] Krippendorff, K. (2011). Computing Krippendorff's alpha-reliability. Annenberg
   School for Communication, University of Pennsylvania.
.. [5] Artstein, R. and Poesio, M. (2008). Inter-coder agreement for computational
   linguistics. *Computational Linguistics* 34(4), 555-596.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from calibrate.reasons import Reason, join, noted
from calibrate.stats._common import (
    check_same_length,
    encode,
    factor_codes,
    factor_ids,
    is_missing,
    is_numeric_label,
    ordered_labels,
    to_list,
    validate_labels,
)
from calibrate.stats.result import Estimate

__all__ = [
    "cohen_kappa",
    "percent_agreement",
    "confusion_matrix",
    "per_label_prf",
    "pairwise_cohen_kappa",
    "crowd_pairwise_kappa",
    "cohen_kappa_table",
    "code_table",
    "per_label_prf_table",
    "label_codes",
    "shared_codes",
    "co_rated_pairs",
    "kappa_from_tables",
    "disagreement_weights",
]

_WEIGHTS = (None, "linear", "quadratic")


# --------------------------------------------------------------------------- helpers


def _paired(a: Any, b: Any) -> tuple[list, list, int]:
    """Return the pairs where neither side is missing, and how many pairs were dropped."""
    la, lb = to_list(a), to_list(b)
    check_same_length(a=la, b=lb)
    # Vectorised missing check (None, NaN, pandas.NA, NaT): a Python loop costs seconds at 10⁵ items.
    missing = pd.isna(np.array(la, dtype=object)) | pd.isna(np.array(lb, dtype=object)) if la else np.zeros(0, bool)
    if not missing.any():
        return la, lb, 0
    keep = np.flatnonzero(~missing).tolist()
    return [la[i] for i in keep], [lb[i] for i in keep], int(missing.sum())


def disagreement_weights(n_labels: int, *, weights: str | None = None, values: Sequence[float] | None = None) -> np.ndarray:
    """Return the ``K x K`` disagreement-weight matrix used by (weighted) kappa.

    Parameters
    ----------
    n_labels : int
        Number of categories ``K``.
    weights : {None, "linear", "quadratic"}
        ``None``: ``w_ij = 1 - [i == j]`` (unweighted kappa).  ``"linear"``:
        ``w_ij = |v_i - v_j|``.  ``"quadratic"``: ``w_ij = (v_i - v_j)**2``.
    values : sequence of float, optional
        Scale value of each category; defaults to ``0, 1, ..., K-1`` (equally spaced).

    Returns
    -------
    numpy.ndarray
        Non-negative matrix with a zero diagonal.  Kappa is invariant to rescaling it.

    References
    ----------
    .. [1] Cohen, J. (1968). Weighted kappa. *Psychological Bulletin* 70(4), 213-220.
    """
    if weights not in _WEIGHTS:
        raise ValueError(f"weights must be one of {_WEIGHTS}, got {weights!r}")
    if weights is None:
        return 1.0 - np.eye(n_labels)
    v = np.arange(n_labels, dtype=float) if values is None else np.asarray(values, dtype=float)
    if v.shape != (n_labels,):
        raise ValueError("values must have one entry per label")
    diff = np.abs(v[:, None] - v[None, :])
    return diff if weights == "linear" else diff**2


def kappa_from_tables(tables: np.ndarray, disagreement: np.ndarray) -> np.ndarray:
    """Return (weighted) Cohen's kappa for a stack of contingency tables, vectorised.

    Parameters
    ----------
    tables : numpy.ndarray, shape (B, K, K) or (B, K*K)
        Counts; rows are rater A's categories, columns rater B's.
    disagreement : numpy.ndarray, shape (K, K)
        Disagreement weights (see :func:`disagreement_weights`).

    Returns
    -------
    numpy.ndarray, shape (B,)
        ``kappa = 1 - n * sum(w * O) / sum(w * outer(rows, cols))``; NaN where the expected
        disagreement is zero (both raters used one and the same category) or the table is
        empty.  This is the formula of scikit-learn's ``cohen_kappa_score``.

    References
    ----------
    .. [1] Cohen, J. (1960). A coefficient of agreement for nominal scales. *Educational and
       Psychological Measurement* 20(1), 37-46.
    """
    k = disagreement.shape[0]
    t = np.asarray(tables, dtype=float).reshape(-1, k, k)
    n = t.sum(axis=(1, 2))
    rows = t.sum(axis=2)
    cols = t.sum(axis=1)
    observed = np.einsum("bij,ij->b", t, disagreement)
    expected = np.einsum("bi,ij,bj->b", rows, disagreement, cols)
    out = np.full(t.shape[0], np.nan)
    ok = (expected > 0) & (n > 0)
    out[ok] = 1.0 - n[ok] * observed[ok] / expected[ok]
    return out


def label_codes(values: Any, labels: Sequence) -> np.ndarray:
    """Return the position of each value in ``labels`` (int64), -1 for a value outside them or a missing one.

    A pandas categorical is coded through its categories (each looked up once, its 10^6 strings never listed);
    anything else through one hash table (``pandas.Index.get_indexer``: the equality of ``value in labels``).
    """
    index = pd.Index(to_list(labels), dtype=object)
    dtype = getattr(values, "dtype", None)
    if isinstance(dtype, pd.CategoricalDtype):
        codes = values.cat.codes.to_numpy() if hasattr(values, "cat") else np.asarray(values.codes)
        lookup = np.append(index.get_indexer(dtype.categories.astype(object)), -1)  # code -1 (missing) reads the last
        return lookup[codes].astype(np.int64)
    if not len(values):
        return np.zeros(0, dtype=np.int64)
    arr = values.to_numpy(dtype=object) if hasattr(values, "to_numpy") else np.asarray(to_list(values), dtype=object)
    return index.get_indexer(arr).astype(np.int64)


def shared_codes(a: Any, b: Any, *, sort: bool = False) -> tuple[np.ndarray, np.ndarray, int]:
    """Return integer codes of two key columns in one coding (equal keys, equal codes; -1 for a missing key), and how
    many codes there are; `sort`: codes in the keys' sorted order.

    Two pandas categoricals over the same categories (the report's labels and verdicts, keyed by one categorical of
    target keys, sorted) are coded by their own codes; anything else is factorized together.
    """
    da, db = getattr(a, "dtype", None), getattr(b, "dtype", None)
    if (isinstance(da, pd.CategoricalDtype) and isinstance(db, pd.CategoricalDtype)
            and (da.categories is db.categories or da.categories.equals(db.categories))
            and (not sort or da.categories.is_monotonic_increasing)):
        return (a.cat.codes.to_numpy().astype(np.int64), b.cat.codes.to_numpy().astype(np.int64), len(da.categories))

    def plain(values: Any) -> np.ndarray:
        return values.to_numpy(dtype=object) if hasattr(values, "to_numpy") else np.asarray(to_list(values), dtype=object)

    both = np.concatenate([plain(a), plain(b)]) if len(a) + len(b) else np.zeros(0, dtype=object)
    codes, uniques = pd.factorize(both, sort=sort)
    codes = codes.astype(np.int64)
    return codes[: len(a)], codes[len(a):], len(uniques)


def _single_label_note(label: Any) -> Reason:
    return Reason("single_label", label=label)


# --------------------------------------------------------------------------- two raters


def confusion_matrix(a: Sequence, b: Sequence, *, labels: Sequence) -> np.ndarray:
    """Return the ``K x K`` contingency table of two raters.

    Parameters
    ----------
    a, b : array-like
        Labels from rater A (rows) and rater B (columns), aligned by item.  Pairs where
        either label is missing are ignored.
    labels : sequence
        The full label set, in row/column order.  Values outside it raise ``ValueError``.

    Returns
    -------
    numpy.ndarray of int64, shape (K, K)
        ``table[i, j]`` = number of items A labelled ``labels[i]`` and B ``labels[j]``.

    References
    ----------
    .. [1] Artstein, R. and Poesio, M. (2008). Inter-coder agreement for computational
       linguistics. *Computational Linguistics* 34(4), 555-596 (section 2).
    """
    la, lb, _ = _paired(a, b)
    labs = validate_labels(labels)
    index = {lab: i for i, lab in enumerate(labs)}
    k = len(labs)
    return code_table(encode(la, index, "a"), encode(lb, index, "b"), k)


def code_table(a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """Return the ``K x K`` contingency table (int64) of two raters' label codes in ``0..K-1`` (rows ``a``, columns
    ``b``): what :func:`confusion_matrix` counts from the labels, :func:`cohen_kappa_table` takes."""
    return np.bincount(np.asarray(a) * k + np.asarray(b), minlength=k * k).reshape(k, k).astype(np.int64)


def percent_agreement(a: Sequence, b: Sequence) -> Estimate:
    """Return the raw proportion of items on which two raters give the same label.

    Parameters
    ----------
    a, b : array-like
        Labels from two raters, aligned by item; pairs with a missing side are dropped.

    Returns
    -------
    Estimate
        ``value`` in [0, 1]; ``n`` = items rated by both; ``no_data`` when there are none.
        Not chance-corrected: prefer :func:`cohen_kappa` for reporting.

    References
    ----------
    .. [1] Artstein, R. and Poesio, M. (2008). Inter-coder agreement for computational
       linguistics. *Computational Linguistics* 34(4), 555-596 (section 2.1, observed
       agreement).
    """
    la, lb, dropped = _paired(a, b)
    extra = {"n_missing": dropped} if dropped else {}
    if not la:
        return Estimate.no_data(Reason("no_items_both_raters"), **extra)
    agree = sum(1 for x, y in zip(la, lb, strict=True) if x == y)
    return Estimate(value=agree / len(la), n=len(la), extra={"n_agree": agree, **extra})


def cohen_kappa(a: Sequence, b: Sequence, *, labels: Sequence | None = None, weights: str | None = None) -> Estimate:
    """Return Cohen's kappa (optionally weighted) between two raters.

    .. math::

        \\kappa_w = 1 - \\frac{\\sum_{ij} w_{ij} p_{ij}}{\\sum_{ij} w_{ij} p_{i\\cdot} p_{\\cdot j}}

    with disagreement weights ``w`` (unweighted: ``w_ij = 1 - [i == j]``, which gives
    ``(p_o - p_e) / (1 - p_e)``).

    Parameters
    ----------
    a, b : array-like
        Labels from two raters aligned by item.  Pairs with a missing side are dropped.
    labels : sequence, optional
        The full label set.  Unused labels are allowed (they do not change unweighted kappa
        but do matter for the weight scale); labels outside it raise ``ValueError``.
        Default: the sorted distinct labels that occur.
    weights : {None, "linear", "quadratic"}
        Weighted kappa treats labels as ordered numeric scale values and weights a
        disagreement by ``|v_i - v_j|`` or ``(v_i - v_j)**2`` of those *values*.  For
        equally spaced labels (e.g. 1..5 with ``labels=[1, 2, 3, 4, 5]``) this equals
        scikit-learn's index-based weights; for unequal spacing it respects the spacing.

    Returns
    -------
    Estimate
        ``n`` = items rated by both.  ``extra`` holds ``observed_agreement`` and
        ``expected_agreement`` (unweighted) or ``observed_disagreement`` and
        ``expected_disagreement`` (weighted; weights scaled to max 1).
        Undefined when fewer than two items are shared or when expected (dis)agreement
        leaves no room for chance correction (both raters used a single, identical label:
        note ``"all labels are 'supported': expected agreement is 1"``).

    References
    ----------
    .. [1] Cohen, J. (1960). A coefficient of agreement for nominal scales. *Educational and
       Psychological Measurement* 20(1), 37-46.
    .. [2] Cohen, J. (1968). Weighted kappa. *Psychological Bulletin* 70(4), 213-220.
    .. [3] Artstein, R. and Poesio, M. (2008). Inter-coder agreement for computational
       linguistics. *Computational Linguistics* 34(4), 555-596.
    """
    if weights not in _WEIGHTS:
        raise ValueError(f"weights must be one of {_WEIGHTS}, got {weights!r}")
    la, lb, dropped = _paired(a, b)
    extra: dict[str, Any] = {"weights": weights}
    if dropped:
        extra["n_missing"] = dropped
    n = len(la)
    if n == 0:
        return Estimate.no_data(Reason("no_items_both_raters"), **extra)
    labs = validate_labels(labels) if labels is not None else ordered_labels(la + lb)
    index = {lab: i for i, lab in enumerate(labs)}
    ca, cb = encode(la, index, "a"), encode(lb, index, "b")
    if weights is not None and not all(is_numeric_label(v) for v in labs):
        raise ValueError("weighted kappa needs numeric labels (ordered scale values)")
    if n < 2:
        return Estimate.undefined(n, Reason("kappa_too_few"), **extra)
    k = len(labs)
    return cohen_kappa_table(code_table(ca, cb, k), labels=labs, weights=weights,
                             n_missing=dropped)


def cohen_kappa_table(table: Any, *, labels: Sequence, weights: str | None = None, n_missing: int = 0) -> Estimate:
    """Return :func:`cohen_kappa` from the two raters' ``K x K`` contingency table (rows rater A, columns rater B,
    in the order of ``labels``), as :func:`confusion_matrix` counts it: the same estimate, its notes and extras,
    without listing the items (a report's 10^6 claims counted once with ``numpy.bincount`` over label codes).

    ``n_missing``: the pairs with a missing side left out before counting (``extra["n_missing"]`` when not 0).
    """
    if weights not in _WEIGHTS:
        raise ValueError(f"weights must be one of {_WEIGHTS}, got {weights!r}")
    labs = validate_labels(labels)
    k = len(labs)
    table = np.asarray(table)
    if table.shape != (k, k) or table.dtype.kind not in "iu":
        raise ValueError(f"table must be a {k} x {k} array of integer counts")
    extra: dict[str, Any] = {"weights": weights}
    if n_missing:
        extra["n_missing"] = n_missing
    n = int(table.sum())
    if n == 0:
        return Estimate.no_data(Reason("no_items_both_raters"), **extra)
    if weights is not None and not all(is_numeric_label(v) for v in labs):
        raise ValueError("weighted kappa needs numeric labels (ordered scale values)")
    if n < 2:
        return Estimate.undefined(n, Reason("kappa_too_few"), **extra)
    w = disagreement_weights(k, weights=weights, values=labs if weights is not None else None)
    kappa = float(kappa_from_tables(table[None], w)[0])
    if not np.isfinite(kappa):
        label = labs[int(np.flatnonzero(table.sum(axis=0) + table.sum(axis=1))[0])]
        if weights is None:
            return Estimate.undefined(n, _single_label_note(label), **extra)
        return Estimate.undefined(n, Reason("single_label_no_disagreement", label=label), **extra)
    p = table / n
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    if weights is None:
        extra["observed_agreement"] = float(np.trace(p))
        extra["expected_agreement"] = float(rows @ cols)
    else:
        scale = w.max()
        extra["observed_disagreement"] = float((w * p).sum() / scale)
        extra["expected_disagreement"] = float(rows @ w @ cols / scale)
    return Estimate(value=kappa, n=n, extra=extra)


def per_label_prf(gold: Sequence, pred: Sequence, *, labels: Sequence) -> dict:
    """Return precision, recall, F1 and support of ``pred`` against ``gold`` for each label.

    Parameters
    ----------
    gold, pred : array-like
        Reference labels (e.g. the human verdict) and predicted labels (e.g. the judge),
        aligned by item; pairs with a missing side are dropped.
    labels : sequence
        Labels to report, in order.  Values outside it raise ``ValueError``.

    Returns
    -------
    dict
        ``{label: {"precision", "recall", "f1", "support", "note"}}``.  ``support`` is the
        number of gold items with the label.  Undefined quantities are ``None``, never a
        silent 0: precision is ``None`` when the label was never predicted, recall is
        ``None`` when the label never occurs in ``gold``, and F1 is ``None`` when either is
        ``None`` (F1 is 0.0 when both are defined and 0).  ``note`` says which, or is "".
        (scikit-learn instead reports 0 with an ``UndefinedMetricWarning`` by default.)

    References
    ----------
    .. [1] van Rijsbergen, C. J. (1979). *Information Retrieval*, 2nd ed., chapter 7.
       Butterworths.
    """
    labs = validate_labels(labels)
    return per_label_prf_table(confusion_matrix(gold, pred, labels=labs), labels=labs)


def per_label_prf_table(table: Any, *, labels: Sequence) -> dict:
    """Return :func:`per_label_prf` from the ``K x K`` contingency table of gold (rows) and predictions (columns)
    in the order of ``labels``: the same dict, without listing the items."""
    labs = validate_labels(labels)
    table = np.asarray(table)
    if table.shape != (len(labs), len(labs)):
        raise ValueError(f"table must be a {len(labs)} x {len(labs)} array of counts")
    out: dict = {}
    for i, lab in enumerate(labs):
        tp = int(table[i, i])
        support = int(table[i].sum())
        predicted = int(table[:, i].sum())
        notes = []
        precision = tp / predicted if predicted else None
        recall = tp / support if support else None
        if precision is None:
            notes.append(Reason("precision_undefined"))
        if recall is None:
            notes.append(Reason("recall_undefined"))
        if precision is None or recall is None:
            f1 = None
        elif precision + recall == 0:
            f1 = 0.0
        else:
            f1 = 2 * precision * recall / (precision + recall)
        out[lab] = {"precision": precision, "recall": recall, "f1": f1, "support": support, **noted(join(notes))}
    return out


def pairwise_cohen_kappa(ratings: Mapping[Any, Mapping[Any, Any]], *, labels: Sequence | None = None) -> list[dict]:
    """Return Cohen's kappa for every pair of raters over the units both rated.

    Parameters
    ----------
    ratings : mapping
        ``{rater: {unit: label}}``; missing labels (``None``/NaN) are ignored.
    labels : sequence, optional
        The full label set passed to :func:`cohen_kappa`.  Default: the sorted labels used
        by any rater (so every pair shares one label set).

    Returns
    -------
    list of dict
        One ``{"a", "b", "n", "value", "status", "note"}`` per unordered rater pair, in the
        order of ``itertools.combinations`` over the raters' insertion order.  ``n`` is the
        number of shared units; pairs without shared units have status ``"no_data"``.

    References
    ----------
    .. [1] Cohen, J. (1960). A coefficient of agreement for nominal scales. *Educational and
       Psychological Measurement* 20(1), 37-46.
    .. [2] Artstein, R. and Poesio, M. (2008). Inter-coder agreement for computational
       linguistics. *Computational Linguistics* 34(4), 555-596 (section 3.3, averaging
       pairwise agreement).
    """
    if labels is None:
        labs = ordered_labels(v for per in ratings.values() for v in per.values() if not is_missing(v))
    else:
        labs = validate_labels(labels)
    out = []
    for ra, rb in itertools.combinations(list(ratings), 2):
        da, db = ratings[ra], ratings[rb]
        shared = [u for u in da if u in db and not is_missing(da[u]) and not is_missing(db[u])]
        if not shared:
            est = Estimate.no_data(Reason("no_units_both_raters", a=ra, b=rb))
        else:
            est = cohen_kappa([da[u] for u in shared], [db[u] for u in shared], labels=labs)
        out.append({"a": ra, "b": rb, "n": est.n, "value": est.value, "status": est.status, **est.note_fields()})
    return out


def co_rated_pairs(units: Sequence, raters: Sequence, *, min_shared: int = 1) -> dict:
    """Return the rater pairs that rated at least ``min_shared`` units in common, and the rows.

    The pairs are enumerated per unit (a unit rated by ``m`` raters yields ``m(m-1)/2``
    pairs), so the work is ``sum_i C(m_i, 2)`` — linear in the ratings for a crowd where each
    unit has a few raters — instead of one comparison per pair of the ``R`` raters
    (``R(R-1)/2``, most of which share nothing).

    Parameters
    ----------
    units, raters : array-like
        One entry per rating (long format, the non-missing cells of a unit × rater matrix).
        A rater rates a unit at most once (``ValueError`` otherwise).
    min_shared : int
        Pairs sharing fewer units are counted in ``n_pairs_sparse``, not returned.

    Returns
    -------
    dict
        ``raters``: the sorted distinct raters; ``a``, ``b``: rater indices of the kept pairs
        (``a < b``, sorted); ``n``: units each kept pair shares; ``pair``: for each
        co-rated (unit, pair) the kept pair's position; ``rows_a``, ``rows_b``: the input
        rows of the two ratings; ``n_pairs``: ``R(R-1)/2``; ``n_pairs_sparse``: pairs sharing
        fewer than ``min_shared`` units (none included).
    """
    _check_min_shared(min_shared)
    unit_ids = factor_ids(units)  # numbered by first appearance: the rows' order below (a categorical through its codes)
    rater_ids, rater_names = factor_codes(raters, sort=True)
    check_same_length(units=unit_ids, raters=rater_ids)
    return {"raters": list(rater_names), **_co_rated(unit_ids, rater_ids, len(rater_names), min_shared)}


def _check_min_shared(min_shared: int) -> None:
    if isinstance(min_shared, bool) or not isinstance(min_shared, (int, np.integer)) or min_shared < 1:
        raise ValueError("min_shared must be a positive integer")


def _co_rated(unit_ids: np.ndarray, rater_ids: np.ndarray, n_raters: int, min_shared: int) -> dict:
    """co_rated_pairs from integer codes: ``unit_ids`` equal for the same unit (the rows come out in their order),
    ``rater_ids`` the raters' positions in the sorted ``n_raters`` (-1 for a missing one)."""
    u = unit_ids
    missing_rater = len(rater_ids) and rater_ids.min() < 0
    if missing_rater and len(pd.unique(unit_ids.astype(np.int64) * max(n_raters, 1) + rater_ids)) != len(u):
        raise ValueError("a rater rated the same unit more than once")
    order = np.argsort(unit_ids, kind="stable")
    sorted_units = unit_ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_units[1:] != sorted_units[:-1]]) if len(u) else np.zeros(0, int)
    sizes = np.diff(np.r_[starts, len(u)])
    rows_a_parts, rows_b_parts = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for size in np.unique(sizes):
        if size < 2:
            continue
        block = starts[sizes == size][:, None] + np.arange(size)[None, :]  # (units of this size, size)
        ia, ib = np.triu_indices(size, 1)
        rows_a_parts.append(order[block[:, ia]].ravel())
        rows_b_parts.append(order[block[:, ib]].ravel())
    rows_a, rows_b = np.concatenate(rows_a_parts), np.concatenate(rows_b_parts)
    ra, rb = rater_ids[rows_a], rater_ids[rows_b]
    if (ra == rb).any():  # every two ratings of a unit are a pair here: a rater twice on a unit is a pair with itself
        raise ValueError("a rater rated the same unit more than once")
    swap = ra > rb
    rows_a, rows_b = np.where(swap, rows_b, rows_a), np.where(swap, rows_a, rows_b)
    key = np.minimum(ra, rb).astype(np.int64) * n_raters + np.maximum(ra, rb)
    if not missing_rater and n_raters * n_raters <= 4 * len(key) + 4096:
        # np.unique's (sorted keys, inverse, counts) by counting: the keys are below n_raters², a few per pair
        every = np.bincount(key, minlength=n_raters * n_raters)
        pair_keys = np.flatnonzero(every)
        shared = every[pair_keys]
        rank = np.zeros(len(every), dtype=np.intp)
        rank[pair_keys] = np.arange(len(pair_keys))
        pair_of = rank[key]
    else:
        pair_keys, pair_of, shared = np.unique(key, return_inverse=True, return_counts=True)
    kept = shared >= min_shared
    position = np.cumsum(kept) - 1
    on_kept = kept[pair_of]
    n_pairs = n_raters * (n_raters - 1) // 2
    return {
        "a": (pair_keys[kept] // max(n_raters, 1)).astype(np.int64),
        "b": (pair_keys[kept] % max(n_raters, 1)).astype(np.int64), "n": shared[kept].astype(np.int64),
        "pair": position[pair_of][on_kept], "rows_a": rows_a[on_kept], "rows_b": rows_b[on_kept],
        "n_pairs": n_pairs, "n_pairs_sparse": n_pairs - int(kept.sum()),
    }


def crowd_pairwise_kappa(units: Sequence, raters: Sequence, values: Sequence, *, labels: Sequence,
                         min_shared: int = 10, weights: str | None = None) -> dict:
    """Return Cohen's kappa for every rater pair sharing at least ``min_shared`` units.

    Each pair's ``K x K`` table counts the units both raters rated; all tables are built with
    one ``bincount`` over the co-rated (unit, pair) cells found by :func:`co_rated_pairs`, and
    kappa is

    .. math::

        \\kappa_w = 1 - \\frac{n \\sum_{ij} w_{ij} O_{ij}}{\\sum_{ij} w_{ij} r_i c_j}

    per table (:func:`kappa_from_tables`), the value of :func:`cohen_kappa` and of
    scikit-learn's ``cohen_kappa_score`` on the pair's shared units.

    Parameters
    ----------
    units, raters, values : array-like
        One entry per rating (long format).  Missing values are dropped first.
    labels : sequence
        The full label set (values outside it raise ``ValueError``).
    min_shared : int
        Pairs sharing fewer units are counted (``n_pairs_sparse``), not listed: their kappa
        over one to a few units is mostly noise.
    weights : {None, "linear", "quadratic"}
        As in :func:`cohen_kappa`.

    Returns
    -------
    dict
        ``pairs``: one ``{"a", "b", "n", "value", "status", "note"}`` per kept pair, ordered
        by ``(a, b)`` over the sorted raters; ``n_pairs``: every unordered rater pair;
        ``n_pairs_sparse``: pairs sharing fewer than ``min_shared`` units (zero included).

    References
    ----------
    .. [1] Cohen, J. (1960). A coefficient of agreement for nominal scales. *Educational and
       Psychological Measurement* 20(1), 37-46.
    .. [2] Artstein, R. and Poesio, M. (2008). Inter-coder agreement for computational
       linguistics. *Computational Linguistics* 34(4), 555-596 (section 3.3).
    """
    if weights not in _WEIGHTS:
        raise ValueError(f"weights must be one of {_WEIGHTS}, got {weights!r}")
    labs = validate_labels(labels)
    unit_ids = factor_ids(units, first_seen=False)  # the tables do not depend on the units' numbering
    rater_ids, rater_names = factor_codes(raters, sort=True)
    value_ids, value_names = factor_codes(values)
    check_same_length(units=unit_ids, raters=rater_ids, values=value_ids)
    keep = np.flatnonzero(value_ids >= 0)  # a missing value is no rating
    codes = encode(value_names, {lab: i for i, lab in enumerate(labs)}, "values")[value_ids[keep]]
    if weights is not None and not all(is_numeric_label(v) for v in labs):
        raise ValueError("weighted kappa needs numeric labels (ordered scale values)")
    _check_min_shared(min_shared)
    lr = rater_ids[keep]
    if (lr < 0).any():  # a missing rater: as before (co_rated_pairs' duplicate check then depends on the numbering)
        raters_kept = pd.Categorical.from_codes(lr, categories=pd.Index(rater_names, dtype=object))
        co = co_rated_pairs(factor_codes(units)[0][keep], raters_kept, min_shared=min_shared)
    else:  # the raters that kept a rating, renumbered in their sorted order
        used = np.flatnonzero(np.bincount(lr, minlength=len(rater_names)))
        rank = np.zeros(len(rater_names), dtype=np.int64)
        rank[used] = np.arange(len(used))
        co = {"raters": [rater_names[i] for i in used], **_co_rated(unit_ids[keep], rank[lr], len(used), min_shared)}
    k = len(labs)
    n_kept = len(co["a"])
    cells = co["pair"] * (k * k) + codes[co["rows_a"]] * k + codes[co["rows_b"]]
    tables = np.bincount(cells, minlength=n_kept * k * k).reshape(n_kept, k, k)
    w = disagreement_weights(k, weights=weights, values=labs if weights is not None else None)
    kappas = kappa_from_tables(tables, w) if n_kept else np.zeros(0)
    names = co["raters"]
    pairs = []
    for i in range(n_kept):
        n = int(co["n"][i])
        if n < 2:
            est = Estimate.undefined(n, Reason("kappa_too_few"))
        elif not np.isfinite(kappas[i]):
            used = np.flatnonzero(tables[i].sum(axis=0) + tables[i].sum(axis=1))
            label = labs[int(used[0])]
            note = _single_label_note(label) if weights is None else Reason("single_label_no_disagreement", label=label)
            est = Estimate.undefined(n, note)
        else:
            est = Estimate(value=float(kappas[i]), n=n)
        pairs.append({"a": names[co["a"][i]], "b": names[co["b"][i]], "n": n, "value": est.value,
                      "status": est.status, **est.note_fields()})
    return {"pairs": pairs, "n_pairs": co["n_pairs"], "n_pairs_sparse": co["n_pairs_sparse"]}
