"""calibrate/stats/localisation.py: the first error step of gold and judge, against a count by hand."""

from __future__ import annotations

import pytest
from statsmodels.stats.proportion import proportion_confint

from calibrate.stats.localisation import first_marked, localisation

NEG = "incorrect"


def test_first_marked_is_the_lowest_negative_index_whatever_the_row_order():
    rows = [("t1", 3, NEG), ("t1", 1, NEG), ("t1", 0, "correct"), ("t2", 0, "correct"), ("t3", 2, "not_applicable")]
    assert first_marked(rows, NEG) == {"t1": 1, "t2": None, "t3": None}


def test_localisation_equals_a_hand_count():
    # Six trajectories both sides looked at, one only the gold did (left out).
    gold = {"a": 2, "b": 0, "c": 4, "d": None, "e": 1, "f": None, "g": 3}
    judge = {"a": 2, "b": 1, "c": 1, "d": 0, "e": None, "f": None}
    # Both found an error: a (2, 2) exact; b (0, 1) within one; c (4, 1) neither. Only gold: e. Only judge: d. Neither: f.
    out = localisation(gold, judge)
    assert (out["n_trajectories"], out["n_both"], out["n_only_gold"], out["n_only_judge"], out["n_neither"]) == (6, 3, 1, 1, 1)
    assert out["exact"]["value"] == pytest.approx(1 / 3) and out["exact"]["n"] == 3
    assert out["within_1"]["value"] == pytest.approx(2 / 3) and out["within_1"]["n"] == 3
    for key, hits in (("exact", 1), ("within_1", 2)):  # Wilson's interval, as statsmodels computes it
        low, high = proportion_confint(hits, 3, alpha=0.05, method="wilson")
        assert out[key]["ci"] == pytest.approx([low, high]) and out[key]["status"] == "ok"


def test_no_trajectory_with_an_error_on_both_sides_has_no_share():
    out = localisation({"a": None, "b": 1}, {"a": 0, "b": None})
    assert out["exact"] == {"value": None, "ci": None, "n": 0, "status": "no_data"}
    assert (out["n_only_gold"], out["n_only_judge"], out["n_both"]) == (1, 1, 0)


def test_a_confidence_outside_zero_and_one_is_refused():
    with pytest.raises(ValueError, match="confidence"):
        localisation({}, {}, confidence=1.5)
