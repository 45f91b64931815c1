"""Chance-corrected agreement between raters on categorical (or ordinal) labels.

Two raters
    :func:`cohen_kappa` (unweighted, linear or quadratic weights), :func:`percent_agreement`,
    :func:`confusion_matrix`, :func:`per_label_prf`.
Many raters
    :func:`fleiss_kappa` (generalised to unequal numbers of raters per item),
    :func:`krippendorff_alpha` (nominal, ordinal, interval, ratio; missing values allowed),
    :func:`pairwise_cohen_kappa` (every pair of raters over their shared units),
    :func:`crowd_pairwise_kappa` and :func:`co_rated_pairs` (only the pairs that co-occur,
    in time linear in the ratings rather than quadratic in the raters).

Every function returns an :class:`~calibrate.stats.result.Estimate` (or plain containers);
undefined statistics (one label only, fewer than two items, nothing shared) come back as
``value=None`` with a ``status`` and a ``note`` instead of NaN or an exception.

Missing ratings (``None``, NaN, ``pandas.NA``) are dropped: pairwise for the two-rater
functions (an item counts only if both raters labelled it), per item for the many-rater
functions.  The number dropped is reported in ``extra["n_missing"]``.

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
    "fleiss_kappa",
    "fleiss_kappa_counts",
    "krippendorff_alpha",
    "krippendorff_alpha_counts",
    "pairwise_cohen_kappa",
    "crowd_pairwise_kappa",
    "co_rated_pairs",
    "kappa_from_tables",
    "disagreement_weights",
]

_WEIGHTS = (None, "linear", "quadratic")
_LEVELS = ("nominal", "ordinal", "interval", "ratio")


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
    ca, cb = encode(la, index, "a"), encode(lb, index, "b")
    return np.bincount(ca * k + cb, minlength=k * k).reshape(k, k).astype(np.int64)


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
    table = np.bincount(ca * k + cb, minlength=k * k).reshape(k, k)
    w = disagreement_weights(k, weights=weights, values=labs if weights is not None else None)
    kappa = float(kappa_from_tables(table[None], w)[0])
    if not np.isfinite(kappa):
        used = sorted(set(ca.tolist()) | set(cb.tolist()))
        label = labs[used[0]]
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
    table = confusion_matrix(gold, pred, labels=labs)
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
    if isinstance(min_shared, bool) or not isinstance(min_shared, (int, np.integer)) or min_shared < 1:
        raise ValueError("min_shared must be a positive integer")
    u = np.asarray(to_list(units), dtype=object)
    r = np.asarray(to_list(raters), dtype=object)
    check_same_length(units=u, raters=r)
    unit_ids, _ = pd.factorize(pd.Series(u, dtype=object))
    rater_ids, rater_names = pd.factorize(pd.Series(r, dtype=object), sort=True)
    n_raters = len(rater_names)
    if len(pd.unique(unit_ids.astype(np.int64) * max(n_raters, 1) + rater_ids)) != len(u):
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
    swap = ra > rb
    rows_a, rows_b = np.where(swap, rows_b, rows_a), np.where(swap, rows_a, rows_b)
    key = np.minimum(ra, rb).astype(np.int64) * n_raters + np.maximum(ra, rb)
    pair_keys, pair_of, shared = np.unique(key, return_inverse=True, return_counts=True)
    kept = shared >= min_shared
    position = np.cumsum(kept) - 1
    on_kept = kept[pair_of]
    n_pairs = n_raters * (n_raters - 1) // 2
    return {
        "raters": list(rater_names), "a": (pair_keys[kept] // max(n_raters, 1)).astype(np.int64),
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
    lu, lr, lv = to_list(units), to_list(raters), to_list(values)
    check_same_length(units=lu, raters=lr, values=lv)
    present = ~pd.isna(np.array(lv, dtype=object)) if lv else np.zeros(0, bool)
    keep = np.flatnonzero(present)
    lu, lr, lv = [lu[i] for i in keep], [lr[i] for i in keep], [lv[i] for i in keep]
    codes = encode(lv, {lab: i for i, lab in enumerate(labs)}, "values")
    if weights is not None and not all(is_numeric_label(v) for v in labs):
        raise ValueError("weighted kappa needs numeric labels (ordered scale values)")
    co = co_rated_pairs(lu, lr, min_shared=min_shared)
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


# --------------------------------------------------------------------------- many raters


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
        return Estimate.undefined(n_used, _single_label_note(label), **extra)
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
    delta2 = _difference(level, domain, n_c)
    expected = float(n_c @ delta2 @ n_c)
    n_pu = int(pairable.sum())
    if expected <= 0:
        used = np.flatnonzero(n_c > 0)
        label = domain[int(used[0])]
        return Estimate.undefined(n_pu, Reason("single_value_no_disagreement", label=label), **extra)
    observed = float((o * delta2).sum())
    return Estimate(value=1.0 - (n_total - 1.0) * observed / expected, n=n_pu, extra=extra)


def _difference(level: str, domain: list, n_c: np.ndarray) -> np.ndarray:
    """Return the squared difference matrix ``δ²`` for ``level`` on ``domain``."""
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
