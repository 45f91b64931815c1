"""Position bias of pairwise judges: hand-computed cases, scikit-learn's kappa, the consistent rule."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from calibrate.stats.position import consistent_verdicts, position_bias

FAST = settings(max_examples=60, deadline=None)

# Five targets, responses A and B.  Original order shows A first, swapped order shows B first.
#            original  swapped   (first shown: A, then B)
# t0         A         A         consistent: A picked in position 1, then in position 2
# t1         A         B         flip: position 1 both times ("first both")
# t2         B         B         consistent: B in position 2, then in position 1
# t3         None      A         unusable original verdict: not a pair
# t4         tie       tie       consistent tie
ORIG = ["A", "A", "B", None, "tie"]
SWAP = ["A", "B", "B", "A", "tie"]
FIRST_O = ["A"] * 5
FIRST_S = ["B"] * 5


def test_hand_computed_example():
    res = position_bias(ORIG, SWAP, FIRST_O, FIRST_S)
    # pairs: t0, t1, t2, t4 → 4;  equal verdicts: t0, t2, t4 → agreement 3/4
    assert (res.n_targets, res.n_pairs, res.status) == (5, 4, "ok")
    assert res.agreement == 0.75
    # kappa over the 4 pairs: original A, A, B, tie / swapped A, B, B, tie.
    # p_o = 3/4; marginals original (A .5, B .25, tie .25), swapped (A .25, B .5, tie .25)
    # p_e = .5·.25 + .25·.5 + .25·.25 = .3125;  kappa = (.75 − .3125)/(1 − .3125) = .4375/.6875 = 7/11
    assert res.kappa.value == pytest.approx(7 / 11, abs=1e-15)
    assert res.kappa.n == 4
    # non-tie verdicts of the pairs: 8 − 2 ties = 6.  Picking the first-shown response:
    # t0 original (A first) yes, swapped (B first) no; t1 original yes, swapped B (B first) yes;
    # t2 original B (A first) no, swapped B (B first) yes → 4 of 6
    assert res.first_position_rate == pytest.approx(4 / 6)
    assert res.tie_rate == 2 / 8
    assert (res.n_first_both, res.n_second_both) == (1, 0)
    assert res.position_p_value == 1.0  # one flip: two-sided exact p = min(1, 2 · 1/2)
    assert (res.n_unusable, res.n_unusable_original, res.n_unusable_swapped) == (1, 1, 0)
    assert res.note == "unusable verdicts: 1 in the original order, 0 in the swapped order"
    out = res.to_dict()
    assert json.loads(json.dumps(out, allow_nan=False)) == out
    assert out["kappa"]["value"] == pytest.approx(7 / 11)


def test_a_judge_that_always_picks_the_same_response_is_position_neutral():
    # Response ids vary per target and so does which one is shown first: B is better on every target.
    orig = ["B"] * 6
    swap = ["B"] * 6
    first_o = ["A", "B", "A", "B", "A", "B"]
    first_s = ["B", "A", "B", "A", "B", "A"]
    res = position_bias(orig, swap, first_o, first_s)
    assert res.agreement == 1.0
    assert res.first_position_rate == 0.5  # each target puts B once in each position
    assert (res.n_first_both, res.n_second_both, res.position_p_value) == (0, 0, None)
    assert res.kappa.status == "undefined"  # a single verdict used by both runs: expected agreement 1
    assert res.kappa.note == "all labels are 'B': expected agreement is 1"


def test_a_judge_that_always_picks_the_first_position():
    n = 10
    orig = ["A"] * n  # A shown first in the original order
    swap = ["B"] * n  # B shown first in the swapped order
    res = position_bias(orig, swap, ["A"] * n, ["B"] * n)
    assert (res.agreement, res.first_position_rate, res.tie_rate) == (0.0, 1.0, 0.0)
    assert (res.n_first_both, res.n_second_both) == (n, 0)
    assert res.position_p_value == pytest.approx(2 * 0.5**n)  # exact sign test, 10 of 10
    # kappa: original always A, swapped always B: p_o = 0, p_e = 1·0 + 0·1 = 0 → kappa = 0
    assert res.kappa.value == 0.0


def test_second_position_flips_and_ties_mixed_with_picks():
    # t0: A then A (consistent); t1: B (2nd) then A (2nd, as A is shown second in the swap) → second both;
    # t2: tie then A → disagreement, but not a flip (a tie picks no position)
    orig, swap = ["A", "B", "tie"], ["A", "A", "A"]
    res = position_bias(orig, swap, ["A"] * 3, ["B"] * 3)
    assert res.agreement == pytest.approx(1 / 3)
    assert (res.n_first_both, res.n_second_both) == (0, 1)
    # non-tie verdicts: 5; first-position picks: t0 original only → 1/5
    assert res.first_position_rate == pytest.approx(1 / 5)
    assert res.tie_rate == pytest.approx(1 / 6)


def test_all_ties_leave_the_first_position_rate_undefined():
    res = position_bias(["tie", "tie"], ["tie", "tie"], ["A", "A"], ["B", "B"])
    assert res.status == "ok" and res.agreement == 1.0 and res.tie_rate == 1.0
    assert res.first_position_rate is None
    assert "every verdict of the pairs is a tie" in res.note
    assert res.to_dict()["first_position_rate"] is None


@pytest.mark.parametrize("missing", [None, float("nan"), pd.NA, np.nan])
def test_unusable_verdicts_are_counted_never_agreeing(missing):
    # Both missing at t1: counted twice (once per order), and it is not an agreement.
    orig = ["A", missing, missing, "B"]
    swap = ["A", missing, "B", missing]
    res = position_bias(orig, swap, ["A"] * 4, ["B"] * 4)
    assert (res.n_pairs, res.n_unusable, res.n_unusable_original, res.n_unusable_swapped) == (1, 4, 2, 2)
    assert res.agreement == 1.0  # over the single pair, t0
    assert res.kappa.n == 1 and res.kappa.status == "undefined"


@pytest.mark.parametrize(("args", "note"), [
    (([], [], [], []), "no targets"),
    (([None, "A"], ["B", None], ["A", "A"], ["B", "B"]),
     ("no target has a usable verdict in both orders; "
      "unusable verdicts: 1 in the original order, 1 in the swapped order")),
])
def test_no_pair_is_undefined(args, note):
    res = position_bias(*args)
    assert res.status == "undefined" and not res.ok
    assert res.note == note
    assert (res.agreement, res.first_position_rate, res.tie_rate, res.position_p_value) == (None, None, None, None)
    assert res.kappa.status == "no_data"
    assert json.dumps(res.to_dict(), allow_nan=False)


def test_first_ids_are_only_needed_where_both_orders_have_a_verdict():
    res = position_bias(["A", None], ["A", "B"], ["A", None], ["B", None])
    assert res.n_pairs == 1


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="same length"):
        position_bias(["A"], ["A", "B"], ["A"], ["B"])
    with pytest.raises(ValueError, match="same length"):
        position_bias(["A"], ["A"], ["A", "B"], ["B"])
    with pytest.raises(ValueError, match="target 0: 'A' is shown first in both orders"):
        position_bias(["A"], ["A"], ["A"], ["A"])
    with pytest.raises(ValueError, match=r"swapped\[1\] = 'C' is neither of the pair's responses \('A', 'B'\)"):
        position_bias(["A", "A"], ["A", "C"], ["A", "A"], ["B", "B"])
    with pytest.raises(ValueError, match="first_swapped is missing at target 0"):
        position_bias(["A"], ["A"], ["A"], [None])
    with pytest.raises(ValueError, match="a response id equals the tie value 'tie'"):
        position_bias(["A"], ["A"], ["tie"], ["A"])
    with pytest.raises(ValueError, match="on_conflict must be one of"):
        consistent_verdicts(["A"], ["A"], on_conflict="first")


def test_custom_tie_value_and_integer_ids():
    res = position_bias([1, 2, 0], [1, 1, 0], [1, 1, 1], [2, 2, 2], tie=0)
    assert (res.n_pairs, res.agreement, res.tie_rate) == (3, pytest.approx(2 / 3), pytest.approx(2 / 6))
    assert (res.n_first_both, res.n_second_both) == (0, 1)


# --------------------------------------------------------------------------- the consistent rule


def test_consistent_verdicts():
    orig = ["A", "A", "tie", None, "B", "A"]
    swap = ["A", "B", "A", "A", None, "tie"]
    assert consistent_verdicts(orig, swap) == ["A", "tie", "tie", None, None, "tie"]
    assert consistent_verdicts(orig, swap, on_conflict="miss") == ["A", None, None, None, None, None]
    assert consistent_verdicts(["x", "y"], ["y", "y"], tie="draw") == ["draw", "y"]
    assert consistent_verdicts([], []) == []
    assert consistent_verdicts(["A", float("nan")], ["A", float("nan")]) == ["A", None]


# --------------------------------------------------------------------------- properties


@st.composite
def runs(draw):
    n = draw(st.integers(0, 40))
    verdict = st.sampled_from(["A", "B", "tie", None])
    orig = draw(st.lists(verdict, min_size=n, max_size=n))
    swap = draw(st.lists(verdict, min_size=n, max_size=n))
    a_first = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return orig, swap, ["A" if f else "B" for f in a_first], ["B" if f else "A" for f in a_first]


@FAST
@given(runs())
def test_kappa_matches_sklearn_over_the_pairs(data):
    orig, swap, fo, fs = data
    res = position_bias(orig, swap, fo, fs)
    pairs = [(o, s) for o, s in zip(orig, swap, strict=True) if o is not None and s is not None]
    assert res.n_pairs == len(pairs)
    assert res.n_unusable == orig.count(None) + swap.count(None)
    if not pairs:
        assert res.status == "undefined"
        return
    a, b = zip(*pairs, strict=True)
    assert res.agreement == pytest.approx(np.mean([x == y for x, y in pairs]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = cohen_kappa_score(a, b)
    if res.kappa.ok:
        assert res.kappa.value == pytest.approx(ref, abs=1e-12)
    else:
        assert math.isnan(ref) or len(pairs) < 2


@FAST
@given(runs())
def test_exchanging_the_two_runs_changes_nothing_but_kappa_orientation(data):
    orig, swap, fo, fs = data
    ab = position_bias(orig, swap, fo, fs)
    ba = position_bias(swap, orig, fs, fo)
    for key in ("n_pairs", "agreement", "first_position_rate", "tie_rate", "n_first_both", "n_second_both",
                "position_p_value", "n_unusable", "status"):
        assert getattr(ab, key) == pytest.approx(getattr(ba, key))
    assert (ab.kappa.value is None) == (ba.kappa.value is None)
    if ab.kappa.ok:
        assert ab.kappa.value == pytest.approx(ba.kappa.value, abs=1e-12)


@FAST
@given(runs())
def test_first_position_rate_by_counting(data):
    orig, swap, fo, fs = data
    res = position_bias(orig, swap, fo, fs)
    picks = []
    for o, s, f1, f2 in zip(orig, swap, fo, fs, strict=True):
        if o is None or s is None:
            continue
        picks += [v == f for v, f in ((o, f1), (s, f2)) if v != "tie"]
    assert res.first_position_rate == (pytest.approx(np.mean(picks)) if picks else None)
    consistent = consistent_verdicts(orig, swap)
    assert sum(v is not None for v in consistent) == res.n_pairs
    assert sum(v is not None and v != "tie" for v in consistent_verdicts(orig, swap, on_conflict="miss")) \
        == sum(o == s and o not in (None, "tie") for o, s in zip(orig, swap, strict=True))
