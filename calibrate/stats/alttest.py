"""The Alternative Annotator Test (alt-test): may an LLM judge replace the human annotators?

Calderon, Reichart & Dror (2025) compare a judge with a *group* of human annotators by leaving
one annotator out at a time and asking who represents the remaining annotators better on each
item: the judge, or the annotator who was left out.

Procedure (as in the authors' reference implementation, ``nitaytech/AltTest``)

1. Keep an item when it has at least two human labels and a judge verdict.  Test an annotator
   only when they labelled at least ``min_items`` kept items; the others are *skipped*: they
   leave the denominator of the winning rate (``n_skipped``) but their labels still count
   among the "other annotators" of the items they labelled.
2. For annotator ``j`` and each kept item ``i`` that ``j`` labelled, score ``j``'s label and
   the judge's label against the labels of ``i`` by the other annotators:
   ``accuracy`` = share of the others who gave the same label (categorical labels);
   ``neg_rmse`` = minus the root-mean-square difference from the others' values (ordinal or
   continuous labels).
3. The judge wins item ``i`` when its score is ≥ ``j``'s; ``j`` wins when its score is ≥ the
   judge's (a tie is a win for both).  With ``d_i`` = ``j``'s indicator − the judge's
   indicator (−1, 0 or 1), a one-sided one-sample t-test of H0: E[d] ≥ ε against H1: E[d] < ε
   (the judge is at least as good as ``j`` up to the cost-benefit margin ε) gives ``p_j``.
4. The Benjamini–Yekutieli step-up procedure at level ``alpha`` over the tested annotators
   decides which null hypotheses are rejected (the p-values are dependent: every test uses the
   same judge and overlapping annotators).
5. The winning rate ω is the share of tested annotators whose null was rejected; the judge
   *passes* when ω ≥ 0.5.  The advantage probability ρ is the mean, over tested annotators, of
   the judge's win rate: an estimate of the probability that the judge is as good as or better
   than a randomly chosen annotator on a random item; use it to rank judges.

References
----------
.. [1] Calderon, N., Reichart, R. and Dror, R. (2025). The Alternative Annotator Test for
   LLM-as-a-Judge: how to statistically justify replacing human annotators with LLMs.
   *Proceedings of ACL 2025 (Long Papers)*, 16051-16081. arXiv:2501.10970.
.. [2] Benjamini, Y. and Yekutieli, D. (2001). The control of the false discovery rate in
   multiple testing under dependency. *Annals of Statistics* 29(4), 1165-1188.
.. [3] Student (1908). The probable error of a mean. *Biometrika* 6(1), 1-25.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from calibrate.reasons import Reason, join
from calibrate.stats._common import check_same_length, to_list
from calibrate.stats.result import Result, finite_or_none, json_safe

__all__ = ["SCORINGS", "AltTestResult", "AnnotatorTest", "alt_test", "benjamini_yekutieli"]

#: Alignment scoring functions of :func:`alt_test`.
SCORINGS = ("accuracy", "neg_rmse")

#: Fewest annotators (with at least one label) the test is run on.
MIN_ANNOTATORS = 3

# neg_rmse: an annotator-minus-judge difference of squared distances within this many units of
# floating-point rounding (relative to the size of its terms) is a tie.
_TIE_ULPS = 64 * np.finfo(float).eps

# pandas.api.types.infer_dtype kinds accepted as numbers by neg_rmse (not strings, not booleans).
_NUMERIC_KINDS = ("integer", "floating", "mixed-integer-float", "decimal", "empty")


@dataclass(frozen=True)
class AnnotatorTest:
    """The leave-one-out comparison of the judge with one tested annotator.

    Attributes
    ----------
    annotator : hashable
        The annotator's id, as given.
    n : int
        Kept items the annotator labelled (the sample size of the t-test).
    p_value : float or None
        One-sided p-value of H0: E[d] ≥ ε; ``None`` when it is undefined (``n`` = 1).
    rejected : bool
        Whether the Benjamini–Yekutieli procedure rejected H0 (the judge "wins" this annotator).
    judge_win_rate : float
        Share of the ``n`` items on which the judge scored ≥ the annotator.
    annotator_win_rate : float
        Share of the ``n`` items on which the annotator scored ≥ the judge.
    """

    annotator: Any
    n: int
    p_value: float | None
    rejected: bool
    judge_win_rate: float
    annotator_win_rate: float

    def to_dict(self) -> dict:
        """Return a JSON-safe dictionary of the six fields (``None`` for an undefined p-value)."""
        return json_safe({
            "annotator": self.annotator,
            "n": self.n,
            "p_value": self.p_value,
            "rejected": self.rejected,
            "judge_win_rate": self.judge_win_rate,
            "annotator_win_rate": self.annotator_win_rate,
        })


@dataclass(frozen=True, kw_only=True)
class AltTestResult(Result):
    """Outcome of :func:`alt_test`: a :class:`~calibrate.stats.result.Result` whose value is the winning rate ω.

    Attributes
    ----------
    value : float or None
        ω = rejected / tested annotators (also ``winning_rate``); ``None`` when the test is undefined.
    n : int
        Kept items, ≥ 2 human labels and a judge verdict (also ``n_items``).
    ci : None
        The test has no interval.
    status : {"ok", "undefined"}
        ``"undefined"``: fewer than three annotators, no kept item, or no annotator with enough
        kept items; ``reason`` says which.
    reason : Reason, optional
        Why the test is undefined, or caveats of an ``"ok"`` result (dropped items, skipped
        annotators, degenerate t-tests).
    advantage_prob : float or None
        ρ = mean over tested annotators of the judge's win rate; ``None`` when undefined.
    passed : bool or None
        ω ≥ 0.5; ``None`` (not ``False``) when the test is undefined: an undefined test has not
        been failed.
    epsilon, alpha : float
        The cost-benefit margin and the FDR level used.
    scoring : str
        ``"accuracy"`` or ``"neg_rmse"``.
    n_annotators : int
        Tested annotators (≥ ``min_items`` kept items).
    annotators : tuple of AnnotatorTest
        One record per tested annotator, in order of first appearance in the input.
    n_skipped : int
        Annotators with at least one label who were not tested (fewer than ``min_items`` kept
        items).
    """

    advantage_prob: float | None
    passed: bool | None
    epsilon: float
    alpha: float
    scoring: str
    n_annotators: int
    annotators: tuple[AnnotatorTest, ...]
    n_skipped: int

    @property
    def winning_rate(self) -> float | None:
        """ω, the paper's name of the value."""
        return self.value

    @property
    def n_items(self) -> int:
        """The kept items, the paper's name of n."""
        return self.n

    @classmethod
    def undefined(cls, reason: Reason, *, epsilon: float, alpha: float, scoring: str, n_items: int = 0,
                  n_skipped: int = 0) -> AltTestResult:
        """Return the result of a test that cannot be run (no annotator tested)."""
        return cls(value=None, n=n_items, status="undefined", reason=reason, advantage_prob=None, passed=None,
                   epsilon=epsilon, alpha=alpha, scoring=scoring, n_annotators=0, annotators=(), n_skipped=n_skipped)

    def to_dict(self) -> dict:
        """Return a JSON-safe dictionary (``None`` for undefined numbers, never NaN).

        Returns
        -------
        dict
            ``winning_rate``, ``advantage_prob``, ``passed``, ``epsilon``, ``alpha``, ``scoring``,
            ``n_items``, ``n_annotators``, ``annotators``, ``n_skipped``, ``status``, ``note`` and
            ``reason`` when there is one; ``annotators`` is a list of dictionaries with keys
            ``annotator``, ``n``, ``p_value``, ``rejected``, ``judge_win_rate``, ``annotator_win_rate``.
        """
        return {
            "winning_rate": self.value,
            "advantage_prob": finite_or_none(self.advantage_prob),
            "passed": self.passed,
            "epsilon": float(self.epsilon),
            "alpha": float(self.alpha),
            "scoring": self.scoring,
            "n_items": self.n,
            "n_annotators": int(self.n_annotators),
            "annotators": [a.to_dict() for a in self.annotators],
            "n_skipped": int(self.n_skipped),
            **self.status_fields(),
        }


# --------------------------------------------------------------------------- multiple testing


def benjamini_yekutieli(p_values: Any, *, alpha: float) -> np.ndarray:
    """Return which hypotheses the Benjamini–Yekutieli step-up procedure rejects.

    With the ``m`` p-values sorted, ``p_(1) ≤ … ≤ p_(m)``, find the largest ``k`` with

    .. math::

        p_{(k)} \\le \\frac{k}{m \\, c(m)} \\alpha, \\qquad c(m) = \\sum_{i=1}^{m} \\frac{1}{i},

    and reject the hypotheses of ``p_(1), …, p_(k)`` (none if there is no such ``k``).  It is
    a *step-up* procedure: a p-value above its own threshold is still rejected when a larger
    p-value meets its threshold.  The constant ``c(m)`` (the harmonic number; 1, 1.5, 1.83,
    2.08 for m = 1..4) makes the false discovery rate at most ``alpha`` under any dependence
    between the tests; without it this is the Benjamini–Hochberg procedure.

    Parameters
    ----------
    p_values : array-like of float
        One p-value per hypothesis, in [0, 1].  NaN (an undefined p-value) is never rejected
        but counts in ``m``.
    alpha : float
        FDR level, in (0, 1).

    Returns
    -------
    numpy.ndarray of bool
        ``True`` where the hypothesis is rejected, aligned with ``p_values``.  The same as
        ``statsmodels.stats.multitest.multipletests(p, alpha, method="fdr_by")[0]``.

    References
    ----------
    .. [1] Benjamini, Y. and Yekutieli, D. (2001). The control of the false discovery rate in
       multiple testing under dependency. *Annals of Statistics* 29(4), 1165-1188
       (Theorem 1.3).
    """
    _check_unit_interval(alpha, "alpha")
    p = np.asarray(p_values, dtype=float).reshape(-1)
    finite = p[~np.isnan(p)]
    if np.any((finite < 0) | (finite > 1)):
        raise ValueError("p_values must lie in [0, 1] (NaN for an undefined p-value)")
    m = p.size
    rejected = np.zeros(m, dtype=bool)
    if m == 0:
        return rejected
    c_m = float(np.sum(1.0 / np.arange(1, m + 1)))
    order = np.argsort(p, kind="stable")  # NaN last
    thresholds = np.arange(1, m + 1) * (alpha / (m * c_m))
    below = p[order] <= thresholds  # NaN compares False
    if below.any():
        k = int(np.flatnonzero(below)[-1])
        rejected[order[: k + 1]] = True
    return rejected


# --------------------------------------------------------------------------- input handling


def _check_unit_interval(value: Any, name: str) -> float:
    """Return ``value`` as a float, or raise ``ValueError`` unless it lies strictly in (0, 1)."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}") from None
    if not 0.0 < f < 1.0:  # also rejects NaN
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}")
    return f


def _object_array(values: list) -> np.ndarray:
    """Return a 1-D object array holding the list's elements as they are (tuples stay tuples)."""
    return np.fromiter(values, dtype=object, count=len(values))


def _label_note(value: Any) -> str:
    return repr(value.item() if isinstance(value, np.generic) else value)


def _one_key_coding(items: Any, judge_items: Any) -> bool:
    """Whether both item columns are pandas categoricals over the same categories (the report's frames)."""
    a, b = getattr(items, "dtype", None), getattr(judge_items, "dtype", None)
    return (isinstance(items, pd.Series) and isinstance(judge_items, pd.Series) and isinstance(a, pd.CategoricalDtype)
            and isinstance(b, pd.CategoricalDtype) and (a.categories is b.categories or a.categories.equals(b.categories)))


def _value_codes(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Return each value's code (-1 when missing) and the distinct values (objects), a categorical through its codes."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        return values.cat.codes.to_numpy().astype(np.int64), values.cat.categories.to_numpy(dtype=object)
    codes, uniques = pd.factorize(values.to_numpy(dtype=object))
    return codes.astype(np.int64), np.asarray(uniques, dtype=object)


def _prepare_coded(items: pd.Series, annotators: pd.Series, values: pd.Series, judge_items: pd.Series,
                   judge_values: pd.Series):
    """`_prepare` for accuracy on categorical item columns over one set of categories: the items by their codes,
    the values by one coding of the distinct values (their equality, as the objects'), no 10^6 objects listed."""
    check_same_length(items=items, annotators=annotators, values=values)
    check_same_length(judge_items=judge_items, judge_values=judge_values)
    h_item, j_item = items.cat.codes.to_numpy().astype(np.int64), judge_items.cat.codes.to_numpy().astype(np.int64)
    if (h_item < 0).any() or (j_item < 0).any():
        raise ValueError("item ids must not be missing")
    if annotators.isna().any():
        raise ValueError("annotator ids must not be missing")
    h_val, h_distinct = _value_codes(values)
    j_val, j_distinct = _value_codes(judge_values)
    joint, _ = pd.factorize(np.concatenate([h_distinct, j_distinct]))  # one code per distinct value
    joint = np.append(joint.astype(np.int64), -1)  # code -1 (missing) reads the last
    h_num, j_num = joint[h_val], joint[len(h_distinct) + j_val if len(j_distinct) else j_val]
    j_num[j_val < 0] = -1
    keep_h, keep_j = h_num >= 0, j_num >= 0  # a missing label or verdict is dropped
    rows = np.flatnonzero(keep_h)
    h_item, h_num, j_item, j_num = h_item[keep_h], h_num[keep_h], j_item[keep_j], j_num[keep_j]
    ann, ann_ids = pd.factorize(annotators.iloc[rows])
    ann = ann.astype(np.int64)
    ann_ids = ann_ids.tolist()
    n_items_all, n_ann = len(items.cat.categories), len(ann_ids)
    key = h_item * max(n_ann, 1) + ann
    uniq, first, counts = np.unique(key, return_index=True, return_counts=True)
    if uniq.size < key.size:
        dup = first[np.flatnonzero(counts > 1)[0]]
        raise ValueError(f"annotator {_label_note(ann_ids[ann[dup]])} labelled item "
                         f"{_label_note(items.cat.categories[h_item[dup]])} more than once")
    uniq_j, first_j, counts_j = np.unique(j_item, return_index=True, return_counts=True)
    if uniq_j.size < j_item.size:
        dup = first_j[np.flatnonzero(counts_j > 1)[0]]
        raise ValueError(f"the judge has more than one verdict for item {_label_note(items.cat.categories[j_item[dup]])}")
    has_judge = np.zeros(n_items_all, dtype=bool)
    has_judge[j_item] = True
    judge_by_item = np.zeros(n_items_all, dtype=h_num.dtype)
    judge_by_item[j_item] = j_num
    return h_item, ann, h_num, has_judge, judge_by_item, ann_ids, n_items_all


def _prepare(items, annotators, values, judge_items, judge_values, scoring):
    """Return integer-coded, missing-free human and judge arrays plus counts of what was dropped."""
    if scoring == "accuracy" and _one_key_coding(items, judge_items) and all(
            isinstance(v, pd.Series) for v in (annotators, values, judge_values)):
        return _prepare_coded(items, annotators, values, judge_items, judge_values)
    h_items, h_ann, h_val = to_list(items), to_list(annotators), to_list(values)
    check_same_length(items=h_items, annotators=h_ann, values=h_val)
    j_items, j_val = to_list(judge_items), to_list(judge_values)
    check_same_length(judge_items=j_items, judge_values=j_val)

    h_items_a, h_ann_a, h_val_a = _object_array(h_items), _object_array(h_ann), _object_array(h_val)
    j_items_a, j_val_a = _object_array(j_items), _object_array(j_val)
    if pd.isna(h_items_a).any() or pd.isna(j_items_a).any():
        raise ValueError("item ids must not be missing")
    if pd.isna(h_ann_a).any():
        raise ValueError("annotator ids must not be missing")

    # Missing labels and verdicts are dropped: a missing verdict leaves its item without a judge.
    keep_h = ~pd.isna(h_val_a)
    keep_j = ~pd.isna(j_val_a)
    h_items_a, h_ann_a, h_val_a = h_items_a[keep_h], h_ann_a[keep_h], h_val_a[keep_h]
    j_items_a, j_val_a = j_items_a[keep_j], j_val_a[keep_j]

    item_codes, item_ids = pd.factorize(np.concatenate([h_items_a, j_items_a]), sort=False)
    h_item, j_item = item_codes[: h_items_a.size].astype(np.int64), item_codes[h_items_a.size:].astype(np.int64)
    ann, ann_ids = pd.factorize(h_ann_a, sort=False)
    ann = ann.astype(np.int64)
    n_items_all, n_ann = len(item_ids), len(ann_ids)

    key = h_item * max(n_ann, 1) + ann
    uniq, first, counts = np.unique(key, return_index=True, return_counts=True)
    if uniq.size < key.size:
        dup = first[np.flatnonzero(counts > 1)[0]]
        raise ValueError(f"annotator {_label_note(h_ann_a[dup])} labelled item {_label_note(h_items_a[dup])} "
                         "more than once")
    uniq_j, first_j, counts_j = np.unique(j_item, return_index=True, return_counts=True)
    if uniq_j.size < j_item.size:
        dup = first_j[np.flatnonzero(counts_j > 1)[0]]
        raise ValueError(f"the judge has more than one verdict for item {_label_note(j_items_a[dup])}")

    if scoring == "accuracy":
        codes, _ = pd.factorize(np.concatenate([h_val_a, j_val_a]), sort=False)
        h_num, j_num = codes[: h_val_a.size].astype(np.int64), codes[h_val_a.size:].astype(np.int64)
    else:
        for arr, name in ((h_val_a, "values"), (j_val_a, "judge_values")):
            if pd.api.types.infer_dtype(arr, skipna=False) not in _NUMERIC_KINDS:
                raise ValueError(f"neg_rmse scoring needs numeric {name} (got {pd.api.types.infer_dtype(arr)} labels)")
        h_num, j_num = h_val_a.astype(float), j_val_a.astype(float)
        if not (np.isfinite(h_num).all() and np.isfinite(j_num).all()):
            raise ValueError("neg_rmse scoring needs finite values and judge_values")
    has_judge = np.zeros(n_items_all, dtype=bool)
    has_judge[j_item] = True
    judge_by_item = np.zeros(n_items_all, dtype=h_num.dtype)
    judge_by_item[j_item] = j_num
    return h_item, ann, h_num, has_judge, judge_by_item, list(ann_ids), n_items_all


def _advantage(item: np.ndarray, x: np.ndarray, y: np.ndarray, n_items: int, scoring: str) -> np.ndarray:
    """Return, per label, the sign of (annotator's score − judge's score) against the other annotators.

    ``item``: kept item code of each human label; ``x``: the label (value code or number);
    ``y``: the judge's verdict on that label's item.  Every label is scored against the other
    labels of its item (at least one), so both scores share the same denominator and only
    the numerators are compared (exact integer arithmetic for categorical labels).
    """
    if scoring == "accuracy":
        # accuracy(label) = (#others with the same label) / (n_i − 1).  Counts of each
        # (item, value) cell give both numerators without forming pairs of labels.
        k = int(max(x.max(initial=0), y.max(initial=0))) + 1
        cell = item * k + x
        cells, inverse, counts = np.unique(cell, return_inverse=True, return_counts=True)
        same_as_annotator = counts[inverse] - 1
        judge_cell = item * k + y
        pos = np.minimum(np.searchsorted(cells, judge_cell), cells.size - 1)
        judge_count = np.where(cells[pos] == judge_cell, counts[pos], 0)
        same_as_judge = judge_count - (x == y)
        return np.sign(same_as_annotator - same_as_judge)
    # neg_rmse: the annotator scores ≥ the judge iff Σ_{s≠r}(x_r − x_s)² ≤ Σ_{s≠r}(y − x_s)².
    # The difference of the two sums is (x_r − y)·[(n_i − 1)(x_r + y) − 2·Σ_{s≠r} x_s], which is
    # exactly zero when x_r = y and exact in integers for rating scales (O(n), no pairs).
    n_i = np.bincount(item, minlength=n_items).astype(float)[item]
    sum_others = np.bincount(item, weights=x, minlength=n_items)[item] - x
    gap = x - y
    bracket = (n_i - 1.0) * (x + y) - 2.0 * sum_others
    diff = gap * bracket  # annotator's squared distance − judge's
    scale = (np.abs(x) + np.abs(y)) * ((n_i - 1.0) * (np.abs(x) + np.abs(y)) + 2.0 * np.abs(sum_others))
    diff = np.where(np.abs(diff) <= _TIE_ULPS * scale, 0.0, diff)
    return -np.sign(diff).astype(np.int64)


def _one_sided_p(n: np.ndarray, sum_d: np.ndarray, sum_d2: np.ndarray, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """Return the p-values of H0: E[d] ≥ ε (NaN where n < 2) and a mask of zero-variance samples.

    ``d`` is integer-valued, so ``n·Σd² − (Σd)²`` is computed exactly and a zero variance is
    detected without rounding.  For zero variance (n ≥ 2) the t statistic is ±∞ and the
    p-value its limit: 0 when mean(d) < ε, 1 when mean(d) > ε (mean(d) ∈ {−1, 0, 1} for
    constant d, never equal to ε ∈ (0, 1)); SciPy returns the same values with a warning.
    """
    p = np.full(n.size, np.nan)
    constant = np.zeros(n.size, dtype=bool)
    ok = n >= 2
    if not ok.any():
        return p, constant
    nn, s1, s2 = n[ok], sum_d[ok], sum_d2[ok]
    spread = nn * s2 - s1 * s1  # n² · (biased variance), an exact integer
    mean = s1 / nn
    zero = spread == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        sd = np.sqrt(spread / (nn * (nn - 1)))
        t = (mean - epsilon) / (sd / np.sqrt(nn))
    pv = np.where(zero, np.where(mean < epsilon, 0.0, 1.0), 0.0)
    live = ~zero
    if live.any():
        from scipy.special import stdtr  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)
        pv[live] = stdtr(nn[live] - 1, t[live])  # Student's t CDF: what scipy.stats.t.cdf calls
    p[ok] = pv
    constant[np.flatnonzero(ok)[zero]] = True
    return p, constant


# --------------------------------------------------------------------------- the test


def _skipped_notes(skipped: list[tuple[str, int]], min_items: int) -> list[Reason]:
    """Return the note on the annotators left untested (name, kept items), the first ten named."""
    if not skipped:
        return []
    listed = ", ".join(f"{name} ({count})" for name, count in skipped[:10])
    if len(skipped) > 10:
        return [Reason("alt_test_annotators_skipped_more", count=len(skipped), min_items=min_items, listed=listed,
                       more=len(skipped) - 10)]
    return [Reason("alt_test_annotators_skipped", count=len(skipped), min_items=min_items, listed=listed)]


def alt_test(items: Any, annotators: Any, values: Any, judge_items: Any, judge_values: Any, *,
             epsilon: float = 0.2, alpha: float = 0.05, scoring: str = "accuracy",
             min_items: int = 30) -> AltTestResult:
    """Run the Alternative Annotator Test of a judge against a group of human annotators.

    Parameters
    ----------
    items, annotators, values : array-like
        Human labels in long form, one row per (item, annotator) label: the item id, the
        annotator id and the label.  Ids may be any hashable values; labels are strings or
        numbers compared exactly as given (``"Yes"`` ≠ ``"yes"``, ``1`` ≠ ``"1"``).  Missing
        labels (``None``/NaN) are dropped; an annotator labelling an item twice raises.
    judge_items, judge_values : array-like
        The judge's verdicts: item id and label.  Items the judge did not label, or whose
        verdict is missing, are dropped (they are not counted as losses); verdicts on items
        without human labels are ignored.
    epsilon : float, default 0.2
        Cost-benefit margin ε in (0, 1): the advantage the annotator must keep for the judge
        to lose.  The paper's rule of thumb: 0.2 for expert annotators, 0.15 for skilled
        annotators (trained workers, students), 0.1 for crowd workers; use a smaller ε when
        the annotators agree little among themselves.
    alpha : float, default 0.05
        False discovery rate level of the Benjamini–Yekutieli procedure, in (0, 1).
    scoring : {"accuracy", "neg_rmse"}, default "accuracy"
        ``"accuracy"``: share of the other annotators giving the same label (for categorical
        labels).  ``"neg_rmse"``: minus the root-mean-square difference from the other
        annotators' values (for ordinal or continuous labels; values must be numeric).
    min_items : int, default 30
        Fewest kept items an annotator must have labelled to be tested (the paper's minimum
        for the t-test's normal approximation).

    Returns
    -------
    AltTestResult
        ``winning_rate`` ω, ``advantage_prob`` ρ, ``passed`` (ω ≥ 0.5), per-annotator records,
        counts, and ``status``/``note``.  Undefined (``status="undefined"``, numbers ``None``)
        when fewer than three annotators have a label, when no item has two human labels and
        a verdict, or when no annotator has ``min_items`` kept items.

    Raises
    ------
    ValueError
        ``epsilon`` or ``alpha`` outside (0, 1), an unknown ``scoring``, ``min_items`` < 1,
        inputs of different lengths, missing ids, duplicate labels or verdicts, non-numeric
        values with ``"neg_rmse"``.

    Notes
    -----
    Follows the authors' reference implementation (``alt_test`` in ``nitaytech/AltTest``)
    with these explicit choices:

    - Ties count as a win for both sides (reference: ``llm_score >= human_score`` and
      ``human_score >= llm_score``).
    - The t-test is ``scipy.stats.ttest_1samp(d, ε, alternative="less")``; when the
      differences are constant (e.g. the judge copies the annotator: d = 0 on every item) the
      t statistic is infinite and the p-value is its limit, 0 or 1, as SciPy returns (with a
      warning) in the reference; ``note`` names such annotators.  With ``n`` = 1 the p-value
      is undefined (``None``): never rejected, still counted among the tested annotators.
    - ρ averages the judge's win rate over the *tested* annotators only, as the reference does.
    - A missing (``None``/NaN) label or verdict is no label: the reference keeps a dictionary
      entry whose value is ``None`` and compares it like a label.
    - Fewer than three annotators is undefined: the reference accepts two, but then "the
      others" is a single person and the paper's FAQ advises at least three.
    - ``neg_rmse`` compares sums of squared differences (the same denominator on both sides,
      so the same order as RMSE); differences within floating-point rounding are ties.

    References
    ----------
    .. [1] Calderon, N., Reichart, R. and Dror, R. (2025). The Alternative Annotator Test for
       LLM-as-a-Judge: how to statistically justify replacing human annotators with LLMs.
       *Proceedings of ACL 2025 (Long Papers)*, 16051-16081. arXiv:2501.10970.
    .. [2] Benjamini, Y. and Yekutieli, D. (2001). The control of the false discovery rate in
       multiple testing under dependency. *Annals of Statistics* 29(4), 1165-1188.
    """
    epsilon = _check_unit_interval(epsilon, "epsilon")
    alpha = _check_unit_interval(alpha, "alpha")
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {SCORINGS}, got {scoring!r}")
    if isinstance(min_items, bool) or not isinstance(min_items, (int, np.integer)) or min_items < 1:
        raise ValueError(f"min_items must be a positive integer, got {min_items!r}")

    h_item, ann, x, has_judge, judge_by_item, ann_ids, n_items_all = _prepare(
        items, annotators, values, judge_items, judge_values, scoring)
    common = {"epsilon": epsilon, "alpha": alpha, "scoring": scoring}

    def undefined(reason: Reason, *, n_items: int = 0, n_skipped: int = 0) -> AltTestResult:
        return AltTestResult.undefined(reason, n_items=n_items, n_skipped=n_skipped, **common)

    n_ann = len(ann_ids)
    if n_ann < MIN_ANNOTATORS:
        return undefined(Reason("alt_test_too_few_annotators", count=n_ann, min=MIN_ANNOTATORS))

    labels_per_item = np.bincount(h_item, minlength=n_items_all)
    kept_item = (labels_per_item >= 2) & has_judge
    n_items = int(kept_item.sum())
    n_human_items = int((labels_per_item > 0).sum())
    if n_items == 0:
        return undefined(Reason("alt_test_no_item"))

    keep = kept_item[h_item]
    item_k, ann_k, x_k = h_item[keep], ann[keep], x[keep]
    n_per_ann = np.bincount(ann_k, minlength=n_ann)
    tested = n_per_ann >= min_items
    n_tested = int(tested.sum())
    skipped = np.flatnonzero(~tested)
    if n_tested == 0:
        return undefined(Reason("alt_test_min_items", min_items=min_items, most=int(n_per_ann.max())), n_items=n_items, n_skipped=n_ann)

    if scoring == "neg_rmse":
        # The advantage's products are bounded by 8·n·M² (n labels on an item, M the largest
        # magnitude): beyond the largest double they overflow to inf/NaN and every sign is
        # garbage, so the statistic is undefined rather than a "pass" built on overflow.
        magnitude = float(max(np.abs(x_k).max(initial=0.0), np.abs(judge_by_item[item_k]).max(initial=0.0)))
        bound = math.sqrt(np.finfo(float).max / (8.0 * float(labels_per_item.max())))
        if magnitude > bound:
            return undefined(Reason("neg_rmse_overflow", magnitude=magnitude, bound=bound),
                             n_items=n_items, n_skipped=n_ann)
    adv = _advantage(item_k, x_k, judge_by_item[item_k], n_items_all, scoring)
    judge_wins = np.bincount(ann_k, weights=adv <= 0, minlength=n_ann)
    annotator_wins = np.bincount(ann_k, weights=adv >= 0, minlength=n_ann)
    sum_d = np.bincount(ann_k, weights=adv, minlength=n_ann)  # d = annotator win − judge win = sign
    sum_d2 = np.bincount(ann_k, weights=adv != 0, minlength=n_ann)

    idx = np.flatnonzero(tested)
    n = n_per_ann[idx].astype(np.int64)
    p, constant = _one_sided_p(n, np.rint(sum_d[idx]).astype(np.int64), np.rint(sum_d2[idx]).astype(np.int64), epsilon)
    rejected = benjamini_yekutieli(p, alpha=alpha)
    judge_rate = judge_wins[idx] / n
    annotator_rate = annotator_wins[idx] / n
    records = tuple(
        AnnotatorTest(annotator=ann_ids[a], n=int(n[k]), p_value=None if np.isnan(p[k]) else float(p[k]),
                      rejected=bool(rejected[k]), judge_win_rate=float(judge_rate[k]),
                      annotator_win_rate=float(annotator_rate[k]))
        for k, a in enumerate(idx)
    )
    winning_rate = float(rejected.sum()) / n_tested
    advantage_prob = float(judge_rate.mean())
    notes = [Reason("alt_test_items_dropped", count=n_human_items - n_items)] if n_items < n_human_items else []
    notes += _skipped_notes([(_label_note(ann_ids[a]), int(n_per_ann[a])) for a in skipped], min_items)
    for k in np.flatnonzero(constant):
        d_value = int(sum_d[idx[k]] // n[k])
        notes.append(Reason("alt_test_constant", annotator=_label_note(ann_ids[idx[k]]), difference=d_value,
                            sign="-" if p[k] == 0 else "+", p_value=float(p[k])))
    notes += [Reason("alt_test_one_item", annotator=_label_note(ann_ids[idx[k]])) for k in np.flatnonzero(np.isnan(p))]
    if n_tested < MIN_ANNOTATORS:
        notes.append(Reason("alt_test_few_tested", count=n_tested, step=1 / n_tested))
    return AltTestResult(value=winning_rate, n=n_items, reason=join(notes), advantage_prob=advantage_prob,
                         passed=bool(winning_rate >= 0.5), n_annotators=n_tested, annotators=records,
                         n_skipped=int(skipped.size), **common)

