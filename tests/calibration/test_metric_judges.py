"""Metric judges are calibrated like any judge: gold per sample derived from claim_support or
context_relevance labels (or direct labels), Spearman's rho against scipy, clear messages when
gold is missing, and the dashboard, compare and gate over the same gold."""

from __future__ import annotations

import json

import pytest
from bs4 import BeautifulSoup
from scipy import stats as sps

from calibrate.calibration import build_report, task_gold
from calibrate.reports import render


def faithfulness_store(store):
    """Five samples of three claims each, two annotators; gold faithfulness 1, 2/3, 1/3, 0, 1/2."""
    patterns = {"a": ["supported"] * 3, "b": ["supported", "supported", "unsupported"],
                "c": ["supported", "unsupported", "unsupported"], "d": ["unsupported"] * 3,
                "e": ["supported", "not_applicable", "unsupported"]}
    for sid, gold in patterns.items():
        store.sample(sid, n_claims=3, n_contexts=2)
        for i, value in enumerate(gold):
            store.label("claim_support", "ann1", sid, value, claim=i)
            store.label("claim_support", "ann2", sid, value, claim=i)
    return {"a": 1.0, "b": 2 / 3, "c": 1 / 3, "d": 0.0, "e": 1 / 2}


def test_faithfulness_gold_is_derived_from_claim_support_and_aligned_with_spearman(store, session):
    gold = faithfulness_store(store)
    judge = {"a": 0.9, "b": 0.4, "c": 0.5, "d": 0.1, "e": 0.6}
    for sid, value in judge.items():
        store.verdict("faith@1", "faithfulness", sid, value)
    store.commit()
    report = build_report(session, "d", "faith@1", tasks=["faithfulness"], options=_options())
    section = report.data["tasks"]["faithfulness"]
    assert section["kind"] == "continuous" and section["n"] == 5
    x = [gold[s] for s in "abcde"]
    y = [judge[s] for s in "abcde"]
    assert section["spearman_rho"]["value"] == pytest.approx(sps.spearmanr(x, y).statistic)
    assert section["alignment"]["metric"] == "spearman_rho" and len(section["alignment"]["ci"]) == 2
    rows = {row.sample_id: row for row in report.rows["faithfulness"]}
    assert rows["e"].gold_source == "derived:claim_support" and float(rows["e"].gold) == pytest.approx(0.5)


def test_the_human_ceiling_of_a_derived_metric_compares_each_experts_own_values(store, session):
    """Each expert's faithfulness comes from their own claim labels; the human–human rho is between those."""
    own = {"ann1": {"a": ["supported"] * 3, "b": ["supported", "unsupported", "unsupported"],
                    "c": ["unsupported"] * 3, "d": ["supported", "supported", "not_applicable"]},
           "ann2": {"a": ["supported", "supported", "unsupported"], "b": ["supported", "unsupported", "unsupported"],
                    "c": ["supported", "unsupported", "unsupported"], "d": ["supported", "unsupported", "not_applicable"]}}
    for sid in "abcd":
        store.sample(sid, n_claims=3)
    for annotator, samples in own.items():
        for sid, values in samples.items():
            for i, value in enumerate(values):
                store.label("claim_support", annotator, sid, value, claim=i)
    store.label("faithfulness", "ann2", "d", 0.9)  # a direct value of the expert wins over their derived one
    for sid, value in {"a": 0.9, "b": 0.3, "c": 0.2, "d": 0.7}.items():
        store.verdict("faith@1", "faithfulness", sid, value)
    store.commit()
    options = _options()
    assert build_report(session, "d", "faith@1", tasks=["faithfulness"], options=options).data["tasks"]["faithfulness"][
        "human"]["n_pairs_sparse"] == 1  # the pair shares 4 targets, fewer than the default 10: counted, not listed
    options.min_shared = 4
    section = build_report(session, "d", "faith@1", tasks=["faithfulness"], options=options).data["tasks"]["faithfulness"]
    assert section["human"]["n_pairs_sparse"] == 0
    ann1, ann2 = [1, 1 / 3, 0, 1], [2 / 3, 1 / 3, 1 / 3, 0.9]
    pair = section["human"]["pairwise_spearman"][0]
    assert (pair["a"], pair["b"], pair["n"]) == ("ann1", "ann2", 4)
    assert pair["value"] == pytest.approx(sps.spearmanr(ann1, ann2).statistic)
    judge = [0.9, 0.3, 0.2, 0.7]
    per = {row["annotator"]: row["spearman_rho"]["value"] for row in section["per_annotator"]}
    assert per["ann1"] == pytest.approx(sps.spearmanr(ann1, judge).statistic)
    assert per["ann2"] == pytest.approx(sps.spearmanr(ann2, judge).statistic)
    # The gold stays that of the majority labels (and direct values): not the mean of the experts' metrics.
    rows = {row.sample_id: float(row.gold) for row in build_report(session, "d", "faith@1", tasks=["faithfulness"],
                                                                   options=_options()).rows["faithfulness"]}
    assert rows["d"] == pytest.approx(0.9)


def test_direct_labels_on_a_metric_take_precedence_over_the_derived_gold(store, session):
    faithfulness_store(store)
    store.label("faithfulness", "expert", "a", 0.25)
    store.commit()
    task = store.task("faithfulness")
    from calibrate.calibration.frames import labels_frame

    gold = task_gold(session, store.dataset, task, labels_frame(session, store.dataset, task)).set_index("target_key")
    a, b = f"sample:{store.samples['a'].id}", f"sample:{store.samples['b'].id}"
    assert gold.loc[a, "gold"] == 0.25 and gold.loc[a, "gold_source"] == "mean"
    assert gold.loc[b, "gold"] == pytest.approx(2 / 3) and gold.loc[b, "gold_source"] == "derived:claim_support"


def test_context_precision_gold_is_derived_from_context_relevance(store, session):
    relevance = {"a": ["relevant", "not_relevant", "relevant"], "b": ["not_relevant", "relevant", "relevant"],
                 "c": ["not_relevant"] * 3, "d": ["relevant", "relevant", "not_relevant"]}
    for sid, values in relevance.items():
        store.sample(sid, n_contexts=3)
        for rank, value in enumerate(values):
            store.label("context_relevance", "ann1", sid, value, context=rank)
    judge = {"a": 0.7, "b": 0.6, "c": 0.2, "d": 0.95}
    for sid, value in judge.items():
        store.verdict("cp@1", "context_precision", sid, value)
    store.commit()
    report = build_report(session, "d", "cp@1", options=_options())
    section = report.data["tasks"]["context_precision"]
    gold = {"a": (1 + 2 / 3) / 2, "b": (1 / 2 + 2 / 3) / 2, "c": 0.0, "d": 1.0}
    rows = {row.sample_id: float(row.gold) for row in report.rows["context_precision"]}
    assert rows == pytest.approx(gold, abs=1e-3)
    assert section["spearman_rho"]["value"] == pytest.approx(sps.spearmanr([gold[s] for s in "abcd"], [judge[s] for s in "abcd"]).statistic)
    # The rag section carries the metric judge's per-sample values beside the human ones (same keys).
    rag = report.data["rag"]["context_precision"]
    assert rag["judge_mean"] == pytest.approx(sum(judge.values()) / 4) and rag["n_judge"] == 4
    assert rag["human_mean"] == pytest.approx(sum(gold.values()) / 4)


@pytest.mark.parametrize("metric", ["answer_relevancy", "context_recall"])
def test_a_metric_without_any_human_gold_says_so_without_a_chart(store, session, metric):
    store.sample("a")
    store.sample("b")
    store.verdict("m@1", metric, "a", 0.5)
    store.verdict("m@1", metric, "b", 0.8)
    store.commit()
    report = build_report(session, "d", "m@1", tasks=[metric], options=_options())
    section = report.data["tasks"][metric]
    assert section["n"] == 0 and section["spearman_rho"]["value"] is None
    assert section["gold_note"].startswith(f"no human gold for {metric}: annotators do not label it on the item page")
    assert section["spearman_rho"]["note"] == section["gold_note"]
    assert section["spearman_rho"]["reason"] == section["gold_reason"] and section["gold_reason"]["code"].startswith("no_gold_")
    html = BeautifulSoup(render(report, "html"), "html.parser")
    assert html.select("svg.chart-scatter") == [] and html.select("figure.scatter") == []
    assert section["gold_note"].split(":")[0] in html.get_text()
    assert json.loads(render(report, "json"))["tasks"][metric]["n"] == 0
    # With direct expert values the metric is calibrated like any continuous task.
    store.label(metric, "expert", "a", 0.4)
    store.label(metric, "expert", "b", 0.9)
    store.commit()
    report = build_report(session, "d", "m@1", tasks=[metric], options=_options())
    section = report.data["tasks"][metric]
    assert section["n"] == 2 and "gold_note" not in section
    assert len(BeautifulSoup(render(report, "html"), "html.parser").select("svg.chart-scatter")) == 1


def test_hostile_text_in_a_metric_report_is_escaped(store, session):
    faithfulness_store(store)
    sample = store.samples["a"]
    sample.external_id = "<script>alert(1)</script>"
    session.add(sample)
    for sid in "abcde":
        store.verdict("faith@1", "faithfulness", sid, 0.5 if sid != "a" else 1)
    store.commit()
    html = render(build_report(session, "d", "faith@1", options=_options()), "html")
    assert "<script>alert(1)</script>" not in html


def test_metric_judges_on_the_dashboard_compare_and_gate(store, session):
    from calibrate.calibration.compare import compare_judges
    from calibrate.cli.gate import gate_lines
    from calibrate.loop.dashboard import dashboard

    gold = faithfulness_store(store)
    for sid, value in gold.items():
        store.verdict("faith@1", "faithfulness", sid, value)  # perfectly aligned
        store.verdict("faith@2", "faithfulness", sid, 1 - value)  # perfectly reversed
    store.commit()
    board = dashboard(session, "d", task="faithfulness", split=None, options=_options())
    assert board.message == ""
    values = {row.judge: row.value for row in board.rows}
    assert values == pytest.approx({"faith@1": 1.0, "faith@2": -1.0})
    result = compare_judges(session, "d", "faith@1", "faith@2", task="faithfulness", options=_options())
    assert result["tasks"]["faithfulness"]["common_n"] == 5
    report = build_report(session, "d", "faith@2", tasks=["faithfulness"], options=_options())
    ok, lines = gate_lines(report, min_kappa=0.6, min_rho=0.6, ci_lower=False)
    assert not ok and lines[0].startswith("FAIL faithfulness: spearman_rho -1.000")


def test_compare_of_metric_judges_takes_a_direct_value_over_the_derived_one(store, session):
    """compare reads targets by integer id; a direct expert value must still replace the derived gold, not add a row."""
    from calibrate.calibration.compare import compare_judges

    gold = faithfulness_store(store)
    store.label("faithfulness", "expert", "a", 0.1)  # the experts' own value for "a" (derived: 1.0)
    for sid, value in gold.items():
        store.verdict("faith@1", "faithfulness", sid, value)
        store.verdict("faith@2", "faithfulness", sid, 1 - value)
    store.commit()
    result = compare_judges(session, "d", "faith@1", "faith@2", task="faithfulness", options=_options())["tasks"]["faithfulness"]
    assert result["common_n"] == 5  # one row per answer
    expected = {**gold, "a": 0.1}
    sids = "abcde"
    rho_a = sps.spearmanr([expected[s] for s in sids], [gold[s] for s in sids]).statistic
    assert result["a"]["value"] == pytest.approx(rho_a)


def test_metric_tasks_get_no_labelling_widget(session, store):
    from calibrate.annotation.items import tasks_and_guidelines

    tasks, _ = tasks_and_guidelines(session)
    names = [t.name for t in tasks]
    assert names[:3] == ["claim_support", "answer_quality", "context_relevance"]
    assert not {"faithfulness", "answer_relevancy", "context_precision", "context_recall"} & set(names)


def _options():
    from calibrate.calibration import Options

    return Options(bootstrap=200)


def test_direct_metric_gold_is_imported_as_labels_in_the_0_to_1_range(runner, make_sample, tmp_path):
    make_sample(external_id="s1")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"sample_id": "s1", "annotator": "ex", "task": "context_recall", "value": 1.5}) + "\n")
    result = runner.invoke(["import", "labels", str(bad), "--dataset", "d"])
    assert result.exit_code != 0 and "outside the scale of task context_recall (0–1)" in result.output
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"sample_id": "s1", "annotator": "ex", "task": "context_recall", "value": 0.75}) + "\n")
    assert runner.invoke(["import", "labels", str(good), "--dataset", "d"]).exit_code == 0


def test_a_metric_judge_is_a_source_of_the_ab_metric(store, session):
    from calibrate.calibration import sample_metric

    faithfulness_store(store)
    store.verdict("faith@1", "faithfulness", "a", 0.25)
    store.verdict("faith@1", "faithfulness", "b", 1)
    store.commit()
    values = sample_metric(session, store.dataset, "faithfulness", judge=store.judges["faith@1"])
    assert values.values.to_dict() == {store.samples["a"].id: 0.25, store.samples["b"].id: 1.0}
    assert values.source == "faithfulness: judge faith@1 (metric judge)"
    human = sample_metric(session, store.dataset, "faithfulness")
    assert human.values[store.samples["b"].id] == pytest.approx(2 / 3)
