"""Alternative Annotator Test: hand-computed examples, a naive-loop oracle, SciPy/statsmodels cross-checks."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from calibrate.reasons import word
from calibrate.stats.alttest import AltTestResult, alt_test, benjamini_yekutieli

FAST = settings(max_examples=60, deadline=None)


def _long(rows: dict) -> tuple[list, list, list, list, list]:
    """``{item: ({annotator: label}, verdict)}`` → long-form human arrays and judge arrays."""
    items, anns, vals, j_items, j_vals = [], [], [], [], []
    for item, (labels, verdict) in rows.items():
        for ann, val in labels.items():
            items.append(item)
            anns.append(ann)
            vals.append(val)
        j_items.append(item)
        j_vals.append(verdict)
    return items, anns, vals, j_items, j_vals


def _scipy_p(d, eps):
    """The reference's p-value: one-sided one-sample t-test of d against ε (H1: mean < ε)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant d: scipy warns and returns the limit 0 or 1
        return float(sps.ttest_1samp(np.asarray(d, float) - eps, 0.0, alternative="less").pvalue)


def _by_record(result: AltTestResult) -> dict:
    return {a.annotator: a for a in result.annotators}


# --------------------------------------------------------------------------- hand-computed: accuracy

# Three annotators A, B, C and a judge J on a block of five items, repeated 8 times (40 items).
#        A  B  C  J
BLOCK = {
    "i1": ("x", "x", "x", "x"),
    "i2": ("x", "x", "y", "x"),
    "i3": ("y", "x", "x", "x"),
    "i4": ("x", "y", "y", "y"),
    "i5": ("z", "x", "x", "y"),
}
# accuracy(label) = share of the two other annotators with the same label.  d = annotator win − judge win.
# Leave out A (others B, C):
#   i1 others x,x: A=x 1,   J=x 1   tie    d = 0
#   i2 others x,y: A=x 1/2, J=x 1/2 tie    d = 0
#   i3 others x,x: A=y 0,   J=x 1   judge  d = -1
#   i4 others y,y: A=x 0,   J=y 1   judge  d = -1
#   i5 others x,x: A=z 0,   J=y 0   tie    d = 0
#   judge wins 5/5, A wins 3/5
# Leave out B (others A, C):
#   i1 x,x: B=x 1, J=x 1 tie; i2 x,y: 1/2 vs 1/2 tie; i3 y,x: 1/2 vs 1/2 tie; i4 x,y: 1/2 vs 1/2 tie
#   i5 z,x: B=x 1/2, J=y 0   B wins d = +1
#   judge wins 4/5, B wins 5/5
# Leave out C (others A, B):
#   i1 x,x: 1 vs 1 tie; i2 x,x: C=y 0, J=x 1 judge d = -1; i3 y,x: 1/2 vs 1/2 tie; i4 x,y: 1/2 vs 1/2 tie
#   i5 z,x: C=x 1/2, J=y 0   C wins d = +1
#   judge wins 4/5, C wins 4/5
D_BLOCK = {"A": [0, 0, -1, -1, 0], "B": [0, 0, 0, 0, 1], "C": [0, -1, 0, 0, 1]}
# ρ = mean(5/5, 4/5, 4/5) = 2.6 / 3 = 0.8666…
# Over 40 items (8 copies), ε = 0.2, t = (mean − ε) / (s / √40), df = 39:
#   A: 16 × (−1), 24 × 0: mean −0.4, s² = (40/39)(0.4 − 0.16) = 9.6/39, s = 0.49614, t = −0.6/0.078446 = −7.6485
#   B:  8 × (+1), 32 × 0: mean 0.2 = ε, t = 0, p = 0.5 exactly
#   C:  8 × (−1), 8 × (+1): mean 0, s² = (40/39)(0.4) = 16/39, s = 0.64051, t = −0.2/0.10127 = −1.9748, p ≈ 0.0277
# BY at α = 0.05, m = 3, c(3) = 1 + 1/2 + 1/3 = 11/6: thresholds k·0.05/(3·11/6) = 0.00909, 0.01818, 0.02727.
#   sorted p: A ≈ 1.4e-9 ≤ 0.00909; C 0.0277 > 0.01818; B 0.5 > 0.02727 → largest k = 1: reject A only.
#   ω = 1/3 → not passed.  (Benjamini–Hochberg, thresholds 0.0167, 0.0333, 0.05, would also reject C.)
# At α = 0.10 the thresholds double (0.01818, 0.03636, 0.05455): C's 0.0277 ≤ 0.03636 → reject A and C, ω = 2/3.


def _accuracy_block(copies=8):
    rows = {}
    for r in range(copies):
        for name, (a, b, c, j) in BLOCK.items():
            rows[f"{name}-{r}"] = ({"A": a, "B": b, "C": c}, j)
    return _long(rows)


def test_hand_computed_accuracy_example():
    res = alt_test(*_accuracy_block())
    assert res.status == "ok" and res.note == ""
    assert (res.n_items, res.n_annotators, res.n_skipped) == (40, 3, 0)
    assert res.advantage_prob == pytest.approx(2.6 / 3, abs=1e-15)
    assert res.winning_rate == pytest.approx(1 / 3)
    assert res.passed is False
    rec = _by_record(res)
    assert [a.annotator for a in res.annotators] == ["A", "B", "C"]  # order of first appearance
    assert (rec["A"].judge_win_rate, rec["A"].annotator_win_rate) == (1.0, 0.6)
    assert (rec["B"].judge_win_rate, rec["B"].annotator_win_rate) == (0.8, 1.0)
    assert (rec["C"].judge_win_rate, rec["C"].annotator_win_rate) == (0.8, 0.8)
    assert [rec[a].rejected for a in "ABC"] == [True, False, False]
    assert all(rec[a].n == 40 for a in "ABC")
    # the t statistics worked out by hand, then the p-values from Student's t with 39 df
    assert rec["A"].p_value == pytest.approx(sps.t.cdf(-0.6 / (math.sqrt(9.6 / 39) / math.sqrt(40)), 39), rel=1e-12)
    assert rec["A"].p_value == pytest.approx(sps.t.cdf(-7.6485, 39), rel=1e-3)
    assert rec["B"].p_value == 0.5
    assert rec["C"].p_value == pytest.approx(sps.t.cdf(-0.2 / (math.sqrt(16 / 39) / math.sqrt(40)), 39), rel=1e-12)
    by_thresholds = [k * 0.05 / (3 * 11 / 6) for k in (1, 2, 3)]  # 0.00909, 0.01818, 0.02727
    assert by_thresholds[2] < rec["C"].p_value < 2 * 0.05 / 3  # above every BY threshold, below BH's k = 2 one
    for ann, d in D_BLOCK.items():  # and the reference's own call
        assert rec[ann].p_value == pytest.approx(_scipy_p(d * 8, 0.2), rel=1e-12)


def test_hand_computed_accuracy_example_at_alpha_010_passes():
    res = alt_test(*_accuracy_block(), alpha=0.10)
    assert res.winning_rate == pytest.approx(2 / 3)
    assert res.passed is True
    assert [a.rejected for a in res.annotators] == [True, False, True]
    assert res.advantage_prob == pytest.approx(2.6 / 3)  # ρ does not depend on α


def test_epsilon_moves_the_p_values_not_the_win_rates():
    # ε = 0.1: B's mean 0.2 > ε now, t = (0.2 − 0.1)/(s/√40) > 0.
    res = alt_test(*_accuracy_block(), epsilon=0.1)
    rec = _by_record(res)
    assert rec["B"].p_value == pytest.approx(_scipy_p(D_BLOCK["B"] * 8, 0.1), rel=1e-12)
    assert rec["B"].p_value > 0.5
    assert res.advantage_prob == pytest.approx(2.6 / 3)


# --------------------------------------------------------------------------- hand-computed: neg_rmse

#        A  B  C  J
RATINGS = {
    "i1": (1, 2, 3, 2),
    "i2": (4, 4, 5, 5),
    "i3": (3, 1, 5, 3),
    "i4": (2, 2, 2, 4),
}
# Compare sums of squared differences to the other annotators (same count on both sides, so the
# same order as RMSE; smaller is better).
# Leave out A (others B, C):
#   i1 others 2,3: A=1 → 1+4 = 5;  J=2 → 0+1 = 1   judge  d = -1
#   i2 others 4,5: A=4 → 0+1 = 1;  J=5 → 1+0 = 1   tie    d = 0
#   i3 others 1,5: A=3 → 4+4 = 8;  J=3 → 8         tie    d = 0
#   i4 others 2,2: A=2 → 0;        J=4 → 8         A      d = +1
#   judge wins 3/4, A wins 3/4
# Leave out B (others A, C):
#   i1 1,3: B=2 → 2, J=2 → 2 tie; i2 4,5: B=4 → 1, J=5 → 1 tie; i3 3,5: B=1 → 4+16 = 20, J=3 → 0+4 = 4 judge;
#   i4 2,2: B=2 → 0, J=4 → 8 B.   d = [0, 0, -1, +1]; judge wins 3/4, B wins 3/4
# Leave out C (others A, B):
#   i1 1,2: C=3 → 4+1 = 5, J=2 → 1 judge; i2 4,4: C=5 → 2, J=5 → 2 tie; i3 3,1: C=5 → 4+16 = 20, J=3 → 4 judge;
#   i4 2,2: C=2 → 0, J=4 → 8 C.   d = [-1, 0, -1, +1]; judge wins 3/4, C wins 2/4
# ρ = (3/4 + 3/4 + 3/4) / 3 = 0.75.  With four items no p-value is small: ω = 0.
D_RATINGS = {"A": [-1, 0, 0, 1], "B": [0, 0, -1, 1], "C": [-1, 0, -1, 1]}


def _ratings(extra=None):
    rows = {k: ({"A": a, "B": b, "C": c}, j) for k, (a, b, c, j) in RATINGS.items()}
    for item, (ann, value) in (extra or {}).items():
        rows[item][0][ann] = value
    return _long(rows)


def test_hand_computed_neg_rmse_example():
    res = alt_test(*_ratings(), scoring="neg_rmse", min_items=4)
    assert res.status == "ok"
    assert res.advantage_prob == 0.75
    assert res.winning_rate == 0.0 and res.passed is False
    rec = _by_record(res)
    rates = [(rec[a].judge_win_rate, rec[a].annotator_win_rate) for a in "ABC"]
    assert rates == [(0.75, 0.75), (0.75, 0.75), (0.75, 0.5)]
    # A: mean 0, s² = 2/3, t = (0 − 0.2)/(√(2/3)/2) = −0.4899, df 3
    assert rec["A"].p_value == pytest.approx(sps.t.cdf(-0.2 / (math.sqrt(2 / 3) / 2), 3), rel=1e-12)
    for ann, d in D_RATINGS.items():
        assert rec[ann].p_value == pytest.approx(_scipy_p(d, 0.2), rel=1e-12)


@pytest.mark.parametrize("big", [1e307, 1e160, -3e154])
def test_neg_rmse_on_values_whose_squares_overflow_is_undefined_with_a_note(big):
    """Issue 20, finding 10: 1e308 printed overflow warnings and `passed: true`, p = 0 for everyone."""
    items, anns, values, j_items, j_values = _ratings()
    values = [v * big for v in values]  # pytest's filterwarnings=error: any numpy overflow warning fails here
    res = alt_test(items, anns, values, j_items, j_values, scoring="neg_rmse", min_items=4)
    assert res.status == "undefined" and res.passed is None and res.winning_rate is None
    assert "overflow double precision" in res.note and "rescale the values" in res.note
    assert res.to_dict()["reason"]["code"] == "neg_rmse_overflow" and res.note == res.reason.text()
    # Just inside the bound the same data is a result again.
    inside = alt_test(items, anns, [v * 1e100 for v in _ratings()[2]], j_items, j_values, scoring="neg_rmse", min_items=4)
    assert inside.status == "ok"


def test_skipped_annotator_leaves_the_denominator_but_still_counts_among_the_others():
    # D labels i1 (2) and i4 (5) only: 2 kept items < min_items = 3, so D is not tested, but the
    # reference keeps D's labels among "the others" of A, B and C on those items.
    # i1, leave out A: others B, C, D = 2, 3, 2: A=1 → 1+4+1 = 6, J=2 → 0+1+0 = 1   judge (as before)
    # i1, leave out B: others 1, 3, 2: B=2 → 1+1+0 = 2, J=2 → 2                     tie (as before)
    # i1, leave out C: others 1, 2, 2: C=3 → 4+1+1 = 6, J=2 → 1                     judge (as before)
    # i4, leave out A: others B, C, D = 2, 2, 5: A=2 → 0+0+9 = 9, J=4 → 4+4+1 = 9   tie (was an A win)
    # i4 for B and for C likewise: 9 vs 9, tie.
    # A: d = [-1, 0, 0, 0], judge 4/4, A 3/4;  B: d = [0, 0, -1, 0], judge 4/4;  C: d = [-1, 0, -1, 0], judge 4/4
    # ρ = (1 + 1 + 1) / 3 = 1.0;  ω's denominator is the 3 tested annotators.
    res = alt_test(*_ratings({"i1": ("D", 2), "i4": ("D", 5)}), scoring="neg_rmse", min_items=3)
    assert (res.n_annotators, res.n_skipped, res.n_items) == (3, 1, 4)
    assert res.advantage_prob == 1.0
    assert "D" not in _by_record(res)
    assert "1 annotator(s) with fewer than 3 kept items not tested: 'D' (2)" in res.note
    rec = _by_record(res)
    assert [rec[a].annotator_win_rate for a in "ABC"] == [0.75, 0.75, 0.5]
    for ann, d in {"A": [-1, 0, 0, 0], "B": [0, 0, -1, 0], "C": [-1, 0, -1, 0]}.items():
        assert rec[ann].p_value == pytest.approx(_scipy_p(d, 0.2), rel=1e-12)
    # with min_items = 2, D is tested too: D's label 2 at i1 (others 1, 2, 3) → 1+0+1 = 2 vs J=2 → 2, tie;
    # D's 5 at i4 (others 2, 2, 2) → 27 vs J=4 → 12, judge.  D: judge wins 2/2.
    res2 = alt_test(*_ratings({"i1": ("D", 2), "i4": ("D", 5)}), scoring="neg_rmse", min_items=2)
    assert (res2.n_annotators, res2.n_skipped) == (4, 0)
    assert _by_record(res2)["D"].judge_win_rate == 1.0 and _by_record(res2)["D"].annotator_win_rate == 0.5


def test_neg_rmse_ties_survive_floating_point():
    # Non-integer ratings: the judge equal to the annotator is an exact tie, and so is a judge at the
    # mirror image of the annotator around the others' mean (0.1 and 0.3 around 0.2), which a direct
    # float computation gets wrong by rounding ((0.1−0.2)² = 0.010000000000000002 ≠ (0.3−0.2)²).
    rows = {f"t{k}": ({"A": 0.1, "B": 0.2, "C": 0.2}, 0.3) for k in range(3)}
    res = alt_test(*_long(rows), scoring="neg_rmse", min_items=3)
    a = _by_record(res)["A"]
    # leave out A: others 0.2, 0.2 → A at distance 0.1, J at 0.1: tie.  Leave out B (others 0.1, 0.2):
    # B=0.2 → 0.01, J=0.3 → 0.04 + 0.01 = 0.05: B wins; C likewise.
    assert (a.judge_win_rate, a.annotator_win_rate) == (1.0, 1.0)
    assert _by_record(res)["B"].judge_win_rate == 0.0
    rows = {f"t{k}": ({"A": 0.7, "B": 0.1, "C": 0.9}, 0.7) for k in range(3)}
    a = _by_record(alt_test(*_long(rows), scoring="neg_rmse", min_items=3))["A"]
    assert (a.judge_win_rate, a.annotator_win_rate) == (1.0, 1.0)


# --------------------------------------------------------------------------- degenerate t-tests


def test_judge_copying_an_annotator_gives_zero_differences_and_the_limit_p_value():
    # The judge repeats B's labels: every comparison with B is a tie, d = 0 on all 40 items, s = 0.
    # t = (0 − 0.2)/0 = −inf, so p = 0 (SciPy returns the same limit, with a warning): B is rejected.
    items, anns, vals, j_items, _ = _accuracy_block()
    copy = [v for v, a in zip(vals, anns, strict=True) if a == "B"]
    res = alt_test(items, anns, vals, j_items, copy)
    b = _by_record(res)["B"]
    assert (b.judge_win_rate, b.annotator_win_rate, b.p_value, b.rejected) == (1.0, 1.0, 0.0, True)
    assert b.p_value == _scipy_p([0] * 40, 0.2)
    assert "annotator 'B': every difference is 0, so the t statistic is -inf and the p-value its limit 0" in res.note


def test_annotator_who_always_wins_gets_p_value_one():
    # C's label always matches A and B, the judge's never: d = +1 everywhere, t = +inf, p = 1.
    rows = {f"t{k}": ({"A": "x", "B": "x", "C": "x"}, "y") for k in range(5)}
    res = alt_test(*_long(rows), min_items=5)
    assert [a.p_value for a in res.annotators] == [1.0, 1.0, 1.0]
    assert res.winning_rate == 0.0 and res.advantage_prob == 0.0
    assert _scipy_p([1] * 5, 0.2) == 1.0


def test_single_item_annotator_has_an_undefined_p_value_that_still_counts():
    rows = {f"t{k}": ({"A": "x", "B": "x", "C": "y"}, "x") for k in range(4)}
    rows["t0"][0]["D"] = "x"  # D labels one item only
    res = alt_test(*_long(rows), min_items=1)
    d = _by_record(res)["D"]
    assert (d.n, d.p_value, d.rejected) == (1, None, False)
    assert res.n_annotators == 4  # D is in ω's denominator, as in the reference (NaN p-value, never rejected)
    assert "annotator 'D': one item only" in res.note
    assert json.dumps(res.to_dict(), allow_nan=False)


# --------------------------------------------------------------------------- kept and dropped items


def test_items_without_two_labels_or_a_verdict_are_dropped():
    items, anns, vals, j_items, j_vals = _accuracy_block(copies=1)
    items += ["solo", "nojudge", "nojudge", "nojudge"]
    anns += ["A", "A", "B", "C"]
    vals += ["x", "x", "x", "x"]
    j_items += ["solo", "nojudge", "ghost"]  # a verdict without human labels is ignored
    j_vals += ["x", None, "x"]  # a missing verdict drops its item
    res = alt_test(items, anns, vals, j_items, j_vals, min_items=5)
    ref = alt_test(*_accuracy_block(copies=1), min_items=5)
    assert res.n_items == 5
    assert res.to_dict()["annotators"] == ref.to_dict()["annotators"]
    assert "2 item(s) dropped: fewer than 2 human labels or no judge verdict" in res.note


def test_missing_human_labels_are_not_labels():
    items, anns, vals, j_items, j_vals = _accuracy_block(copies=1)
    res = alt_test(items + ["i1-0"], anns + ["D"], vals + [None], j_items, j_vals, min_items=5)
    assert res.n_skipped == 0 and res.n_annotators == 3  # D has no label at all


# --------------------------------------------------------------------------- undefined results


@pytest.mark.parametrize(("data", "kwargs", "reason"), [
    (([], [], [], [], []), {}, {"code": "alt_test_too_few_annotators", "count": 0, "min": 3}),
    ((["a", "a", "b", "b"], ["A", "B", "A", "B"], ["x", "y", "x", "x"], ["a", "b"], ["x", "x"]), {},
     {"code": "alt_test_too_few_annotators", "count": 2, "min": 3}),
    ((["a", "b", "c"], ["A", "B", "C"], ["x", "x", "x"], ["a", "b", "c"], ["x", "x", "x"]), {},
     {"code": "alt_test_no_item"}),
    ((["a", "a", "a"], ["A", "B", "C"], ["x", "x", "x"], ["a"], [None]), {}, {"code": "alt_test_no_item"}),
    (_accuracy_block(copies=1), {}, {"code": "alt_test_min_items", "min_items": 30, "most": 5}),
])
def test_undefined_cases_are_results(data, kwargs, reason):
    res = alt_test(*data, **kwargs)
    assert res.status == "undefined" and not res.ok
    assert res.to_dict()["reason"] == reason and res.note == word(reason)
    assert (res.winning_rate, res.advantage_prob, res.passed) == (None, None, None)
    assert (res.n_annotators, res.annotators) == (0, ())
    out = res.to_dict()
    assert json.loads(json.dumps(out, allow_nan=False)) == out
    assert set(out) == {"winning_rate", "advantage_prob", "passed", "epsilon", "alpha", "scoring", "n_items",
                        "n_annotators", "annotators", "n_skipped", "status", "note", "reason"}


def test_undefined_when_no_annotator_has_enough_items_counts_them_all_as_skipped():
    res = alt_test(*_accuracy_block(copies=1))
    assert (res.n_items, res.n_skipped) == (5, 3)


# --------------------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"epsilon": 0}, "epsilon must lie strictly between 0 and 1"),
    ({"epsilon": 1}, "epsilon must lie strictly between 0 and 1"),
    ({"epsilon": -0.1}, "epsilon"),
    ({"epsilon": float("nan")}, "epsilon"),
    ({"epsilon": "big"}, "epsilon must be a number"),
    ({"alpha": 0.0}, "alpha must lie strictly between 0 and 1"),
    ({"alpha": 1.0}, "alpha"),
    ({"scoring": "f1"}, "scoring must be one of"),
    ({"min_items": 0}, "min_items must be a positive integer"),
    ({"min_items": 2.5}, "min_items"),
    ({"min_items": True}, "min_items"),
])
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        alt_test(*_accuracy_block(copies=1), **kwargs)


def test_bad_inputs_raise():
    items, anns, vals, j_items, j_vals = _accuracy_block(copies=1)
    with pytest.raises(ValueError, match="same length"):
        alt_test(items[:-1], anns, vals, j_items, j_vals)
    with pytest.raises(ValueError, match="same length"):
        alt_test(items, anns, vals, j_items, j_vals[:-1])
    with pytest.raises(ValueError, match="annotator 'A' labelled item 'i1-0' more than once"):
        alt_test(items + ["i1-0"], anns + ["A"], vals + ["y"], j_items, j_vals)
    with pytest.raises(ValueError, match="more than one verdict for item 'i2-0'"):
        alt_test(items, anns, vals, j_items + ["i2-0"], j_vals + ["y"])
    with pytest.raises(ValueError, match="neg_rmse scoring needs numeric values"):
        alt_test(items, anns, vals, j_items, j_vals, scoring="neg_rmse")
    with pytest.raises(ValueError, match="neg_rmse scoring needs numeric judge_values"):
        alt_test(*_ratings()[:3], list(RATINGS), ["4"] * 4, scoring="neg_rmse")
    with pytest.raises(ValueError, match="item ids must not be missing"):
        alt_test([None] + items[1:], anns, vals, j_items, j_vals)
    with pytest.raises(ValueError, match="annotator ids must not be missing"):
        alt_test(items, [None] + anns[1:], vals, j_items, j_vals)


# --------------------------------------------------------------------------- Benjamini–Yekutieli


def test_by_step_up_rejects_what_step_down_would_not():
    # m = 3, α = 0.05, c(3) = 11/6: thresholds k·α/(m·c) = 0.0090909, 0.0181818, 0.0272727.
    # sorted p = 0.005, 0.02, 0.025.  Step-down stops at k = 2 (0.02 > 0.01818) and rejects only 0.005;
    # step-up takes the largest k with p_(k) ≤ threshold, k = 3 (0.025 ≤ 0.02727), and rejects all three.
    p = [0.025, 0.005, 0.02]
    thresholds = np.arange(1, 4) * 0.05 / (3 * (1 + 1 / 2 + 1 / 3))
    sorted_p = np.sort(p)
    step_down = np.cumprod(sorted_p <= thresholds).astype(bool)
    assert step_down.tolist() == [True, False, False]
    assert benjamini_yekutieli(p, alpha=0.05).tolist() == [True, True, True]
    assert multipletests(p, alpha=0.05, method="fdr_by")[0].tolist() == [True, True, True]


def test_by_harmonic_constant_makes_it_stricter_than_bh():
    # m = 2: c(2) = 1.5.  p = 0.02, 0.04: BH thresholds 0.025, 0.05 reject both; BY 0.01667, 0.03333 reject none.
    assert benjamini_yekutieli([0.02, 0.04], alpha=0.05).tolist() == [False, False]
    assert multipletests([0.02, 0.04], alpha=0.05, method="fdr_bh")[0].tolist() == [True, True]
    assert benjamini_yekutieli([0.016, 0.04], alpha=0.05).tolist() == [True, False]


def test_by_edge_cases():
    assert benjamini_yekutieli([], alpha=0.05).tolist() == []
    assert benjamini_yekutieli([0.0], alpha=0.05).tolist() == [True]
    assert benjamini_yekutieli([0.05], alpha=0.05).tolist() == [True]  # m = 1: c = 1, threshold α, p ≤ α
    # NaN (undefined) counts in m but is never rejected: m = 2 → thresholds 0.01667, 0.0333
    assert benjamini_yekutieli([0.02, float("nan")], alpha=0.05).tolist() == [False, False]
    assert benjamini_yekutieli([0.01, float("nan")], alpha=0.05).tolist() == [True, False]
    with pytest.raises(ValueError, match=r"p_values must lie in \[0, 1\]"):
        benjamini_yekutieli([1.5], alpha=0.05)
    with pytest.raises(ValueError, match="alpha"):
        benjamini_yekutieli([0.5], alpha=1.5)


@FAST
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30), st.sampled_from([0.01, 0.05, 0.1, 0.25]))
def test_by_matches_statsmodels(p, alpha):
    ours = benjamini_yekutieli(p, alpha=alpha)
    ref = multipletests(p, alpha=alpha, method="fdr_by")[0]
    assert ours.tolist() == ref.tolist()


# --------------------------------------------------------------------------- naive-loop oracle


def _naive_alt_test(items, anns, vals, j_items, j_vals, *, epsilon, alpha, scoring, min_items):
    """A plain transcription of the procedure: loops, dictionaries, scipy's t-test, statsmodels' BY."""
    labels: dict = {}
    for i, a, v in zip(items, anns, vals, strict=True):
        if v is not None:
            labels.setdefault(i, {})[a] = v
    judge = {i: v for i, v in zip(j_items, j_vals, strict=True) if v is not None}
    kept = {i for i, lab in labels.items() if len(lab) >= 2 and i in judge}

    def score(pred, others):
        if scoring == "accuracy":
            return float(np.mean([pred == o for o in others]))
        return -math.sqrt(float(np.mean([(pred - o) ** 2 for o in others])))

    annotators = list(dict.fromkeys(a for i, a, v in zip(items, anns, vals, strict=True) if v is not None))
    if len(annotators) < 3:  # the documented floor: fewer than 3 annotators with a label is undefined
        return None
    out = {}
    for a in annotators:
        mine = [i for i in labels if a in labels[i] and i in kept]
        if len(mine) < min_items:
            continue
        jw, aw = [], []
        for i in mine:
            others = [v for b, v in labels[i].items() if b != a]
            s_a, s_j = score(labels[i][a], others), score(judge[i], others)
            jw.append(int(s_j >= s_a))
            aw.append(int(s_a >= s_j))
        d = np.array(aw) - np.array(jw)
        p = _scipy_p(d, epsilon) if len(d) > 1 else float("nan")
        out[a] = (len(mine), p, float(np.mean(jw)), float(np.mean(aw)))
    if not out:
        return None
    ps = [v[1] for v in out.values()]
    rej = benjamini_yekutieli(ps, alpha=alpha)
    if not np.isnan(ps).any():
        assert rej.tolist() == multipletests(ps, alpha=alpha, method="fdr_by")[0].tolist()
    rho = float(np.mean([v[2] for v in out.values()]))
    return out, float(rej.mean()), rho, dict(zip(out, rej.tolist(), strict=True))


@st.composite
def panels(draw):
    n_ann = draw(st.integers(3, 6))
    n_items = draw(st.integers(1, 40))
    scoring = draw(st.sampled_from(["accuracy", "neg_rmse"]))
    domain = ["x", "y", "z"] if scoring == "accuracy" else [1, 2, 3, 4, 5]
    k = draw(st.integers(2, len(domain)))
    items, anns, vals, j_items, j_vals = [], [], [], [], []
    for i in range(n_items):
        for a in range(n_ann):
            if draw(st.integers(0, 9)) < 8:  # 80 % coverage
                items.append(f"item{i}")
                anns.append(f"ann{a}")
                vals.append(None if draw(st.integers(0, 19)) == 0 else domain[draw(st.integers(0, k - 1))])
        if draw(st.integers(0, 9)) < 9:
            j_items.append(f"item{i}")
            j_vals.append(domain[draw(st.integers(0, k - 1))])
    return items, anns, vals, j_items, j_vals, scoring


@FAST
@given(panels(), st.integers(1, 12), st.sampled_from([0.1, 0.2, 0.35]), st.sampled_from([0.05, 0.2]))
def test_matches_a_naive_loop(panel, min_items, epsilon, alpha):
    *data, scoring = panel
    res = alt_test(*data, epsilon=epsilon, alpha=alpha, scoring=scoring, min_items=min_items)
    ref = _naive_alt_test(*data, epsilon=epsilon, alpha=alpha, scoring=scoring, min_items=min_items)
    if ref is None:
        assert res.status == "undefined"
        return
    per, omega, rho, rejected = ref
    assert res.status == "ok"
    assert res.winning_rate == pytest.approx(omega, abs=1e-15)
    assert res.advantage_prob == pytest.approx(rho, abs=1e-12)
    rec = _by_record(res)
    assert list(rec) == list(per)
    for a, (n, p, jw, aw) in per.items():
        got = (rec[a].n, rec[a].judge_win_rate, rec[a].annotator_win_rate, rec[a].rejected)
        assert got == pytest.approx((n, jw, aw, rejected[a]))
        if math.isnan(p):
            assert rec[a].p_value is None
        else:
            assert rec[a].p_value == pytest.approx(p, rel=1e-9, abs=1e-15)
    assert json.dumps(res.to_dict(), allow_nan=False)


@FAST
@given(panels(), st.randoms(use_true_random=False))
def test_relabelling_annotators_and_items_and_shuffling_rows_changes_nothing(panel, rnd):
    items, anns, vals, j_items, j_vals, scoring = panel
    old_a, old_i = sorted(set(anns)), sorted(set(items) | set(j_items))
    new_a, new_i = list(range(len(old_a))), list(range(len(old_i)))
    rnd.shuffle(new_a)
    rnd.shuffle(new_i)
    rename_a = {a: f"rater-{k}" for a, k in zip(old_a, new_a, strict=True)}
    rename_i = {i: (k, "item") for i, k in zip(old_i, new_i, strict=True)}  # tuples as ids, too
    rows = list(zip(items, anns, vals, strict=True))
    rnd.shuffle(rows)
    judge = list(zip(j_items, j_vals, strict=True))
    rnd.shuffle(judge)
    res = alt_test(items, anns, vals, j_items, j_vals, scoring=scoring, min_items=3)
    res2 = alt_test([rename_i[i] for i, _, _ in rows], [rename_a[a] for _, a, _ in rows], [v for _, _, v in rows],
                    [rename_i[i] for i, _ in judge], [v for _, v in judge], scoring=scoring, min_items=3)
    assert (res.status, res.winning_rate, res.n_items, res.n_annotators, res.n_skipped) == (
        res2.status, res2.winning_rate, res2.n_items, res2.n_annotators, res2.n_skipped)
    if res.ok:
        assert res2.advantage_prob == pytest.approx(res.advantage_prob, abs=1e-12)
        rec2 = _by_record(res2)
        for a in res.annotators:
            b = rec2[rename_a[a.annotator]]
            fields = ("n", "rejected", "judge_win_rate", "annotator_win_rate")
            assert [getattr(b, f) for f in fields] == [getattr(a, f) for f in fields]
            assert (b.p_value is None) == (a.p_value is None)
            if a.p_value is not None:
                assert b.p_value == pytest.approx(a.p_value, rel=1e-12, abs=1e-300)


def test_numpy_and_pandas_inputs():
    import pandas as pd

    items, anns, vals, j_items, j_vals = _accuracy_block()
    ref = alt_test(items, anns, vals, j_items, j_vals).to_dict()
    assert alt_test(pd.Series(items), np.array(anns), pd.Series(vals, dtype=object), np.array(j_items),
                    pd.Series(j_vals)).to_dict() == ref
    r_items, r_anns, r_vals, r_j, r_jv = _ratings()
    ref = alt_test(r_items, r_anns, r_vals, r_j, r_jv, scoring="neg_rmse", min_items=4).to_dict()
    got = alt_test(r_items, r_anns, np.array(r_vals, dtype=np.int64), r_j, np.array(r_jv, dtype=float),
                   scoring="neg_rmse", min_items=4).to_dict()
    assert got == ref


def test_to_dict_is_json_safe_and_complete():
    out = alt_test(*_accuracy_block()).to_dict()
    assert json.loads(json.dumps(out, allow_nan=False)) == out
    keys = ["annotator", "n", "p_value", "rejected", "judge_win_rate", "annotator_win_rate"]
    assert list(out["annotators"][0]) == keys
    assert out["passed"] is False and out["epsilon"] == 0.2 and out["alpha"] == 0.05 and out["scoring"] == "accuracy"
