"""A step task's report section (issue 33): every categorical figure over the step pairs, clustered by trajectory, and
the `localisation` block, checked against scikit-learn and a hand count."""

from __future__ import annotations

import pytest
from sklearn.metrics import cohen_kappa_score

from calibrate.calibration import Options, build_report
from calibrate.tasks import ensure_trajectory_tasks

OK, BAD = "correct", "incorrect"
# trajectory → (gold per step, judge per step)
TRAJECTORIES = {
    "t0": ([OK, OK, BAD, OK], [OK, OK, BAD, OK]),  # both first at step 2: exact
    "t1": ([OK, BAD, OK, OK], [OK, OK, BAD, OK]),  # 1 and 2: within one step
    "t2": ([BAD, OK, OK, OK], [OK, OK, OK, BAD]),  # 0 and 3: neither
    "t3": ([OK, OK, OK, OK], [OK, BAD, OK, OK]),  # only the judge found an error
    "t4": ([OK, OK, BAD, BAD], [OK, OK, OK, OK]),  # only the gold did
    "t5": ([OK, OK, OK, OK], [OK, OK, OK, OK]),  # neither found one
}


@pytest.fixture
def step_report(store, session):
    ensure_trajectory_tasks(session, store.dataset.id)
    for sid, (gold, judge) in TRAJECTORIES.items():
        store.sample(sid, n_steps=4)
        for index, (g, j) in enumerate(zip(gold, judge, strict=True)):
            for annotator in ("ana", "ben"):
                store.label("step_correctness", annotator, sid, g, step=index)
            store.verdict("agent-judge", "step_correctness", sid, j, step=index)
    store.commit()
    return build_report(session, "d", "agent-judge", options=Options(bootstrap=200)).data["tasks"]["step_correctness"]


def test_step_kappa_equals_scikit_learns_on_the_same_step_pairs(step_report):
    gold = [g for gold, _ in TRAJECTORIES.values() for g in gold]
    judge = [j for _, judge in TRAJECTORIES.values() for j in judge]
    assert step_report["target"] == "step" and step_report["n"] == 24 and step_report["n_samples"] == 6
    assert step_report["cohen_kappa"]["value"] == pytest.approx(cohen_kappa_score(gold, judge))
    low, high = step_report["cohen_kappa"]["ci"]  # the cluster bootstrap resamples trajectories
    assert low <= step_report["cohen_kappa"]["value"] <= high
    agree = sum(g == j for g, j in zip(gold, judge, strict=True)) / len(gold)
    assert step_report["percent_agreement"] == pytest.approx(agree)
    assert step_report["confusion"]["labels"] == [OK, BAD]
    assert {entry["annotator"] for entry in step_report["per_annotator"]} == {"ana", "ben"}
    assert step_report["human"]["ceiling"]["value"] == pytest.approx(1.0)  # the two annotators agree everywhere
    assert "alt_test" in step_report


def test_localisation_equals_a_hand_count(step_report):
    block = step_report["localisation"]
    assert block["negative"] == BAD
    assert (block["n_trajectories"], block["n_both"], block["n_only_gold"], block["n_only_judge"], block["n_neither"]) == \
        (6, 3, 1, 1, 1)
    assert (block["exact"]["value"], block["exact"]["n"]) == (pytest.approx(1 / 3), 3)
    assert (block["within_1"]["value"], block["within_1"]["n"]) == (pytest.approx(2 / 3), 3)


def test_the_agent_demo_reports_its_step_tasks_with_their_estimate_per_step(demo_engine):
    """The demo's agent dataset, as `calibrate report` gives it: its step task's section, localisation and the estimate of
    the steps no expert labelled (it failed with KeyError 'step' before the live estimator knew the level)."""
    from sqlmodel import Session

    from calibrate.demo import AGENT_DATASET, AGENT_JUDGE

    with Session(demo_engine) as session:
        tasks = build_report(session, AGENT_DATASET, AGENT_JUDGE, options=Options(bootstrap=100)).data["tasks"]
    steps = tasks["step_correctness"]
    assert steps["n"] > 0 and steps["alignment"]["metric"] == "cohen_kappa" and steps["localisation"]["n_trajectories"] == 30
    assert steps["n_no_gold"] > 0  # steps the judge saw and no expert labelled: what the estimate is for
    estimate = steps["estimate"]
    assert estimate["estimand"] == {"level": "steps", "positive": "correct", "metric": "share"} and estimate["status"] == "ok"
    assert estimate["ci"][0] <= estimate["estimate"] <= estimate["ci"][1]


def test_the_markdown_and_html_reports_show_localisation_in_both_languages(step_report, session):
    """The block is in every format a person reads, not only the JSON: the same hand count as above, worded."""
    from bs4 import BeautifulSoup

    from calibrate import i18n
    from calibrate.reports import render

    report = build_report(session, "d", "agent-judge", options=Options(bootstrap=200))
    markdown = render(report, "md")
    assert "Where the first wrong step is (localisation)" in markdown
    assert "| Same first wrong step as the experts | 33.3% |" in markdown  # t0 of t0, t1, t2 (both found one)
    assert "| Only the experts found a wrong step | 1 | of 6 trajectories |" in markdown
    rows = {row["data-stat"]: row for row in BeautifulSoup(render(report, "html"), "html.parser")
            .select("table[data-table=localisation] tr")}
    assert rows["within_1"].select_one(".value").text == "66.7%" and rows["n_only_judge"].select_one(".value").text == "1"
    csv_rows = render(report, "csv").splitlines()
    assert csv_rows[0].startswith("task,sample_id,target,claim,context,step,group,")
    assert any(line.startswith("step_correctness,t0,t0/step/2,,,2,,") for line in csv_rows)  # the row names its step
    with i18n.using("es"):
        assert "Dónde está el primer paso erróneo (localización)" in render(report, "md")
