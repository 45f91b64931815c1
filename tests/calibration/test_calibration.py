"""Calibration: gold, exclusions, the statistics per task, decisions, and bad requests."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats as sps
from sklearn.metrics import cohen_kappa_score
from sqlmodel import select

from calibrate.calibration import CalibrationError, Options, build_report, labels_needed
from calibrate.errors import NotFound
from calibrate.models import Sample
from calibrate.reports import render

FAST = Options(bootstrap=200)


def _claims(store, n_samples=12, n_claims=3, judge_flip=(), human_flip=()):
    """Two annotators and judge 'j' on claim_support; flips make chosen (sample, claim) pairs disagree."""
    truth = {}
    for i in range(n_samples):
        sid = f"s{i}"
        store.sample(sid, n_claims=n_claims, meta={"topic": "ab"[i % 2]})
        for c in range(n_claims):
            value = "supported" if (i + c) % 3 else "unsupported"
            truth[(sid, c)] = value
            other = "unsupported" if value == "supported" else "supported"
            store.label("claim_support", "ann1", sid, value, claim=c)
            store.label("claim_support", "ann2", sid, other if (sid, c) in human_flip else value, claim=c)
            store.verdict("j", "claim_support", sid, other if (sid, c) in judge_flip else value, claim=c)
    store.commit()
    return truth


def test_kappa_matches_sklearn_on_the_scored_targets(store, session):
    flips = {("s0", 0), ("s3", 1), ("s5", 2), ("s7", 0)}
    truth = _claims(store, judge_flip=flips)
    report = build_report(session, "d", "j", options=FAST)
    section = report.data["tasks"]["claim_support"]
    gold = [truth[k] for k in sorted(truth)]
    judge = [("unsupported" if v == "supported" else "supported") if k in flips else v for k, v in sorted(truth.items())]
    assert section["n"] == 36 and section["n_samples"] == 12
    assert section["cohen_kappa"]["value"] == pytest.approx(cohen_kappa_score(gold, judge))
    low, high = section["cohen_kappa"]["ci"]
    assert low <= section["cohen_kappa"]["value"] <= high
    assert section["percent_agreement"] == pytest.approx(32 / 36)
    assert section["alignment"]["metric"] == "cohen_kappa"
    assert section["confusion"]["labels"] == ["supported", "unsupported"]
    assert np.sum(section["confusion"]["matrix"]) == 36
    assert set(section["per_label"]) == {"supported", "unsupported"}


def test_gold_adjudicated_over_majority_and_ties_have_no_gold(store, session):
    store.sample("s0", n_claims=3)
    # claim 0: a tie between two annotators -> no gold, listed for adjudication
    store.label("claim_support", "a", "s0", "supported", claim=0)
    store.label("claim_support", "b", "s0", "unsupported", claim=0)
    # claim 1: a tie, but adjudicated -> the adjudicated label is gold
    store.label("claim_support", "a", "s0", "supported", claim=1)
    store.label("claim_support", "b", "s0", "unsupported", claim=1)
    store.label("claim_support", "lead", "s0", "unsupported", claim=1, adjudicated=True)
    # claim 2: majority of three
    for who, v in (("a", "supported"), ("b", "supported"), ("c", "unsupported")):
        store.label("claim_support", who, "s0", v, claim=2)
    for c in range(3):
        store.verdict("j", "claim_support", "s0", "unsupported", claim=c)
    store.commit()
    report = build_report(session, "d", "j", options=FAST)
    rows = {r.claim: r for r in report.rows["claim_support"]}
    assert (rows[0].gold, rows[0].gold_source, rows[0].excluded) == (None, "tie", "no_gold")
    assert (rows[1].gold, rows[1].gold_source) == ("unsupported", "adjudicated")
    assert (rows[2].gold, rows[2].gold_source) == ("supported", "majority")
    section = report.data["tasks"]["claim_support"]
    assert section["n"] == 2 and section["n_no_gold"] == 1 and section["n_ties"] == 1
    assert report.adjudication["claim_support"] == [rows[0].target]


def test_unparsed_and_gold_not_applicable_are_excluded_and_an_abstention_is_scored(store, session):
    store.sample("s0", n_claims=4)
    for c, (human, judge) in enumerate([("supported", None), ("not_applicable", "supported"),
                                        ("supported", "not_applicable"), ("unsupported", "unsupported")]):
        store.label("claim_support", "a", "s0", human, claim=c)
        store.verdict("j", "claim_support", "s0", judge, claim=c)
    store.commit()
    section = build_report(session, "d", "j", options=FAST).data["tasks"]["claim_support"]
    assert section["n_unparsed"] == 1
    assert section["n_excluded_label"] == 1  # the gold is not_applicable: nothing to check
    assert section["n_abstained"] == 1  # the judge said not_applicable on a checkable claim: a miss
    assert section["n"] == 2
    assert section["percent_agreement"] == 0.5
    assert section["labels"] == ["supported", "unsupported"]


def test_undefined_kappa_says_why(store, session):
    store.sample("s0", n_claims=3)
    for c in range(3):
        store.label("claim_support", "a", "s0", "supported", claim=c)
        store.verdict("j", "claim_support", "s0", "supported", claim=c)
    store.commit()
    report = build_report(session, "d", "j", options=FAST)
    kappa = report.data["tasks"]["claim_support"]["cohen_kappa"]
    assert kappa["value"] is None and kappa["status"] == "undefined"
    assert kappa["reason"] == {"code": "single_label", "label": "supported"}
    assert report.data["tasks"]["claim_support"]["passed"] is None
    assert report.data["passed"] is False
    json.dumps(report.data, allow_nan=False)


def test_scores_match_scipy_and_gold_is_the_mean(store, session):
    rng = np.random.default_rng(1)
    a = rng.integers(1, 6, 30)
    b = np.clip(a + rng.integers(-1, 2, 30), 1, 5)
    judge = np.clip(a + rng.integers(-1, 2, 30), 1, 5)
    for i in range(30):
        store.sample(f"s{i}")
        store.label("answer_quality", "ann1", f"s{i}", int(a[i]))
        store.label("answer_quality", "ann2", f"s{i}", int(b[i]))
        store.verdict("j", "answer_quality", f"s{i}", int(judge[i]))
    store.commit()
    section = build_report(session, "d", "j", options=FAST).data["tasks"]["answer_quality"]
    gold = (a + b) / 2
    assert section["n"] == 30
    assert section["spearman_rho"]["value"] == pytest.approx(sps.spearmanr(gold, judge).statistic)
    assert section["spearman_rho"]["p_value"] == pytest.approx(sps.spearmanr(gold, judge).pvalue)
    assert section["kendall_tau"]["value"] == pytest.approx(sps.kendalltau(gold, judge).statistic)
    assert section["pearson_r"]["value"] == pytest.approx(sps.pearsonr(gold, judge).statistic)
    assert section["alignment"]["metric"] == "spearman_rho"
    # The gold is a fractional mean, so weighted kappa is the mean over annotators against the judge.
    per_annotator = [cohen_kappa_score(h, judge, weights="quadratic", labels=[1, 2, 3, 4, 5]) for h in (a, b)]
    assert section["weighted_kappa"]["against"] == "each annotator"
    assert section["weighted_kappa"]["value"] == pytest.approx(np.mean(per_annotator))
    alpha = section["human"]["krippendorff_alpha"]
    assert alpha["ordinal"]["value"] is not None and alpha["interval"]["value"] is not None
    import krippendorff  # a test dependency: missing means a broken install, not a skip
    assert alpha["interval"]["value"] == pytest.approx(krippendorff.alpha(np.vstack([a, b]).astype(float), level_of_measurement="interval"))


def test_weighted_kappa_when_both_sides_are_integers(store, session):
    a = [1, 2, 3, 4, 5, 3, 2, 4]
    j = [1, 2, 4, 4, 5, 2, 2, 5]
    for i, (x, y) in enumerate(zip(a, j, strict=True)):
        store.sample(f"s{i}")
        store.label("answer_quality", "ann1", f"s{i}", x)
        store.verdict("j", "answer_quality", f"s{i}", y)
    store.commit()
    section = build_report(session, "d", "j", options=FAST).data["tasks"]["answer_quality"]
    assert section["weighted_kappa"]["value"] == pytest.approx(cohen_kappa_score(a, j, weights="quadratic", labels=[1, 2, 3, 4, 5]))


def test_human_ceiling_and_per_annotator(store, session):
    flips = {("s1", 1), ("s4", 0)}
    _claims(store, human_flip=flips)
    section = build_report(session, "d", "j", options=FAST).data["tasks"]["claim_support"]
    human = section["human"]
    assert human["annotators"] == ["ann1", "ann2"] and human["n"] == 36
    pair = human["pairwise_kappa"][0]
    assert {pair["a"], pair["b"]} == {"ann1", "ann2"} and pair["n"] == 36 and human["n_pairs_sparse"] == 0
    assert pair["value"] < 1
    assert human["fleiss_kappa"]["value"] is not None
    assert human["krippendorff_alpha"]["nominal"]["value"] is not None
    per = {p["annotator"]: p for p in section["per_annotator"]}
    assert per["ann1"]["cohen_kappa"]["value"] == pytest.approx(1.0)
    assert per["ann2"]["cohen_kappa"]["value"] < 1


def test_grouped_kappa_averages_over_groups(store, session):
    _claims(store, judge_flip={("s0", 0), ("s1", 1)})
    report = build_report(session, "d", "j", options=Options(bootstrap=200, group_by="metadata.topic"))
    grouped = report.data["tasks"]["claim_support"]["grouped"]
    assert grouped["by"] == "metadata.topic" and grouped["groups"] == 2
    rows = report.rows["claim_support"]
    per_group = []
    for g in ("a", "b"):
        part = [r for r in rows if r.group == g]
        per_group.append(cohen_kappa_score([r.gold for r in part], [r.judge for r in part]))
    assert grouped["cohen_kappa"]["value"] == pytest.approx(np.mean(per_group))


def test_faithfulness_per_sample_from_humans_and_judge(store, session):
    _claims(store, judge_flip={("s0", 1)})
    rag = build_report(session, "d", "j", options=FAST).data["rag"]["faithfulness"]
    assert rag["n_human"] == 12 and rag["n_judge"] == 12
    assert 0 <= rag["human_mean"] <= 1 and rag["judge_mean"] != rag["human_mean"]
    assert rag["spearman_rho"]["n"] == 12


def test_judge_without_verdicts_on_a_task_is_not_checked_there(store, session):
    _claims(store)
    store.sample("q0")
    store.label("answer_quality", "ann1", "q0", 3)
    store.commit()
    report = build_report(session, "d", "j", options=FAST)
    assert "alignment" not in report.data["tasks"]["answer_quality"]
    assert "no verdicts" in report.data["tasks"]["answer_quality"]["judge_note"]
    assert report.data["passed"] is True


def test_report_without_judge_has_the_human_parts(store, session):
    _claims(store)
    report = build_report(session, "d", None, options=FAST)
    assert report.data["judge"] is None and report.data["passed"] is None
    assert report.data["tasks"]["claim_support"]["human"]["n"] == 36
    assert "cohen_kappa" not in report.data["tasks"]["claim_support"]


@pytest.mark.parametrize(
    ("dataset", "judge", "options", "error", "message"),
    [
        ("nope", None, FAST, NotFound, "unknown dataset 'nope' (datasets: d)"),
        ("d", "nope", FAST, NotFound, "unknown judge 'nope' (judges: j)"),
        ("d", "j", Options(bootstrap=200, group_by="metadata.colour"), CalibrationError, "metadata.topic"),
        ("d", "j", Options(bootstrap=200, group_by="colour"), CalibrationError, "cannot group by"),
    ],
)
def test_bad_requests_name_what_exists(store, session, dataset, judge, options, error, message):
    _claims(store, n_samples=2)
    with pytest.raises(error) as info:
        build_report(session, dataset, judge, options=options)
    assert message in str(info.value)


def test_labels_needed_formula():
    needed = labels_needed(100, (0.6, 0.9), 0.8, 0.75)
    assert needed["more_targets"] == 800
    assert needed["reason"] == {"code": "straddles_half_width", "low": 0.6, "high": 0.9, "threshold": 0.75, "more": 800,
                                "total": 900, "value": 0.8}
    assert labels_needed(100, (0.8, 0.9), 0.85, 0.75) is None  # already settled
    on_it = labels_needed(100, (0.7, 0.8), 0.75, 0.75)
    assert on_it["more_targets"] is None and on_it["reason"] == {"code": "on_threshold"}


def test_ci_lower_rule(store, session):
    _claims(store, judge_flip={("s0", 0)})
    loose = build_report(session, "d", "j", options=Options(bootstrap=200, threshold=0.7))
    strict = build_report(session, "d", "j", options=Options(bootstrap=200, threshold=0.7, ci_lower=True))
    section = strict.data["tasks"]["claim_support"]
    assert loose.data["tasks"]["claim_support"]["passed"] is True
    assert section["passed"] is (section["alignment"]["ci"][0] >= 0.7)


def test_labels_needed_never_exceed_the_targets_the_dataset_has(store, session):
    """A 30-claim dataset with 20 labelled: the 1/√n extrapolation asks for hundreds more; only 10 exist."""
    from calibrate.calibration.budget import targets_in_dataset
    from calibrate.models import Dataset

    for i in range(30):
        store.sample(f"s{i}", n_claims=1)
    for i in range(20):
        gold = "supported" if i % 2 else "unsupported"
        store.label("claim_support", "ann1", f"s{i}", gold, claim=0)
        wrong = i in (0, 5, 10)  # 17 of 20 agree: κ 0.7, its CI straddles 0.75
        judged = gold if not wrong else ("unsupported" if gold == "supported" else "supported")
        store.verdict("j", "claim_support", f"s{i}", judged, claim=0)
    store.commit()
    section = build_report(session, "d", "j", options=FAST).data["tasks"]["claim_support"]
    assert section["n"] == 20 and section["decision"] == "undecided"
    md = render(build_report(session, "d", "j", options=FAST), "md")
    assert "more labels are not expected to settle it" in md and "more targets to settle" not in md
    for key in ("labels_to_decide", "labels_needed"):
        block = section[key]
        assert (block["more_targets"], block["capped"], block["available"], block["targets_left"]) == (None, True, 30, 10), key
        assert block["extrapolated"] > 10
        assert "the dataset has 30 targets of this kind, 10 of them not yet counted in n = 20" in block["note"]
    dataset = session.exec(select(Dataset).where(Dataset.name == "d")).one()
    ids = {s.id for s in session.exec(select(Sample).where(Sample.dataset_id == dataset.id)) if s.external_id < "s2"}
    assert targets_in_dataset(session, dataset.id, "claim") == 30
    assert targets_in_dataset(session, dataset.id, "sample", ids) == len(ids) == 12  # s0, s1, s10–s19
    assert targets_in_dataset(session, dataset.id, "context") == 0


def test_cap_to_dataset_leaves_what_fits_alone():
    from calibrate.calibration.budget import cap_to_dataset

    section = {"n": 50, "labels_to_decide": {"more_targets": 40, "note": "x"},
               "budget": {"more_targets": 80, "candidates": ["claim:1"] * 80, "note": "y"}, "labels_needed": None}
    cap_to_dataset(section, 100)
    assert section["labels_to_decide"] == {"more_targets": 40, "note": "x"}
    assert section["budget"]["more_targets"] == 50 and len(section["budget"]["candidates"]) == 50
    assert section["budget"]["capped"] is True and section["labels_needed"] is None
