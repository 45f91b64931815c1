"""Self-consistency of K verdicts per target: flip rate, Fleiss' kappa among runs, majority vote."""

from __future__ import annotations

import json

import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa
from statsmodels.stats.proportion import proportion_confint

from calibrate.stats import ESTIMATE_REASONS, flip_rate, majority_vote, self_consistency

RUNS = [
    ["pass", "pass", "pass"],
    ["pass", "fail", "pass"],
    ["fail", "fail", "fail"],
    ["fail", "pass", "pass"],
    ["pass", "pass", "pass"],
    ["fail", "fail", "pass"],
]
GOLD = ["pass", "fail", "fail", "pass", "pass", "pass"]


def test_flip_rate_counts_targets_whose_runs_differ_with_a_wilson_interval():
    est = flip_rate(RUNS)
    assert est.value == pytest.approx(3 / 6) and est.extra["n_flipped"] == 3
    assert est.ci == pytest.approx(proportion_confint(3, 6, alpha=0.05, method="wilson"))


def test_fleiss_kappa_among_runs_matches_statsmodels():
    table, _ = aggregate_raters(RUNS)
    result = self_consistency(RUNS)
    assert result.fleiss_kappa.value == pytest.approx(sm_fleiss_kappa(table, method="fleiss"))
    assert result.k == 3 and result.n_targets == 6


def test_majority_vote_breaks_ties_by_the_earliest_run():
    majority, ties = majority_vote([["a", "b"], ["b", "a", "a"], ["b", "a"], [None, "c"], []])
    assert majority == ["a", "a", "b", "c", None]
    assert ties == 2


def test_kappa_single_and_majority_against_gold_match_sklearn():
    result = self_consistency(RUNS, gold=GOLD)
    first = [r[0] for r in RUNS]
    majority = ["pass", "pass", "fail", "pass", "pass", "fail"]
    assert result.majority == majority and result.first == first
    assert result.kappa_single.value == pytest.approx(cohen_kappa_score(GOLD, first))
    assert result.kappa_majority.value == pytest.approx(cohen_kappa_score(GOLD, majority))
    block = result.to_dict()
    json.dumps(block, allow_nan=False)
    assert set(block) == {"k", "n_targets", "flip_rate", "fleiss_kappa", "n_ties", "kappa_single", "kappa_majority"}


def test_gold_of_unlabelled_targets_is_skipped():
    result = self_consistency(RUNS, gold=[None, "fail", "fail", "pass", None, "pass"])
    assert result.kappa_single.n == 4


def test_single_runs_are_undefined_with_a_reason():
    est = flip_rate([["pass"], ["fail"], []])
    assert est.value is None and est.reason.code == "too_few_runs" and est.to_dict()["reason"] == {"code": "too_few_runs"}
    assert est.note == ESTIMATE_REASONS["too_few_runs"] and est.extra["n_targets_skipped"] == 3


def test_gold_must_align():
    with pytest.raises(ValueError, match="one value per target"):
        self_consistency(RUNS, gold=GOLD[:3])
