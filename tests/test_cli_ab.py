"""`calibrate ab`: pairing by question, the tests against scipy, the three formats, and bad input."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from bs4 import BeautifulSoup
from hostile import XSS_QUESTION
from labelstore import Store
from scipy import stats as sps

from calibrate.calibration.ab import ABError, compare_systems, parse_metric
from calibrate.reasons import word

HOSTILE = "<script>alert(1)</script>"

# Per question: supported claims out of 4 for A and for B (None: the system has no sample there).
SUPPORTED = {"q0": (2, 3), "q1": (1, 4), "q2": (3, 3), "q3": (0, 2), "q4": (4, 4), "q5": (2, 1),
             "q6": (1, 3), "q7": (2, 4), "q8": (3, None)}


@pytest.fixture
def systems(systems_store):
    """Two systems answering the same questions: (question, system) → the human faithfulness."""
    return systems_store[1]


@pytest.fixture
def systems_store(session):
    """Two systems answering the same questions; q6 and q7 have no query_id (paired by question text).

    Returns the store (to add labels and verdicts) and (question, system) → the human faithfulness.
    """
    store = Store(session)
    expected = {}
    for q, (sa, sb) in SUPPORTED.items():
        for system, supported in (("rag-a", sa), (HOSTILE, sb)):
            if supported is None:
                continue
            sid = f"{q}-{'a' if system == 'rag-a' else 'b'}"
            meta = {"system": system} if q in ("q6", "q7") else {"system": system, "query_id": q}
            sample = store.sample(sid, n_claims=4, meta=meta)
            sample.question = f"{XSS_QUESTION} {q}" if q in ("q6", "q7") else f"question {q} asked by {system}"
            sample.retrieved_ids = [f"{q}-d{i}" for i in range(5)]
            sample.relevant_ids = [f"{q}-d{supported % 5}"]
            for c in range(4):
                value = "supported" if c < supported else "unsupported"
                store.label("claim_support", "ann", sid, value, claim=c)
                store.verdict("j", "claim_support", sid, "supported" if c <= supported else "unsupported", claim=c)
            expected[(q, system)] = supported / 4
    extra = store.sample("q9-b", n_claims=2, meta={"system": HOSTILE, "query_id": "q9"})  # no labels: undefined
    extra.question = "unlabelled"
    store.commit()
    return store, expected


def _ab(runner, *args):
    return runner.invoke(["ab", "--dataset", "d", "--by", "metadata.system", "--a", "rag-a", "--b", HOSTILE,
                          "--bootstrap", "200", *args])


def test_json_has_the_contract_keys_and_agrees_with_scipy(runner, systems):
    result = _ab(runner, "--metric", "faithfulness", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    for key in ("n_pairs", "n_unpaired", "mean_a", "mean_b", "relative_improvement", "difference", "ttest", "wilcoxon"):
        assert key in data, key
    assert set(data["difference"]) >= {"value", "ci"} and set(data["ttest"]) >= {"t", "p_value"}
    assert set(data["wilcoxon"]) >= {"statistic", "p_value"}
    questions = [q for q, (_, b) in SUPPORTED.items() if b is not None]
    a = np.array([systems[(q, "rag-a")] for q in questions])
    b = np.array([systems[(q, HOSTILE)] for q in questions])
    assert data["n_pairs"] == 8 and data["n_unpaired"] == 1 and data["unpaired"] == {"a": 1, "b": 0}
    assert data["n_undefined"] == {"a": 0, "b": 1}
    assert data["mean_a"] == pytest.approx(a.mean()) and data["mean_b"] == pytest.approx(b.mean())
    assert data["relative_improvement"] == pytest.approx((b.mean() - a.mean()) / a.mean())
    assert data["difference"]["value"] == pytest.approx((b - a).mean())
    low, high = data["difference"]["ci"]
    assert low <= data["difference"]["value"] <= high
    ref_t = sps.ttest_rel(b, a)
    assert data["ttest"]["t"] == pytest.approx(ref_t.statistic) and data["ttest"]["p_value"] == pytest.approx(ref_t.pvalue)
    ref_w = sps.wilcoxon(b, a)
    assert data["wilcoxon"]["statistic"] == pytest.approx(ref_w.statistic)
    assert data["wilcoxon"]["p_value"] == pytest.approx(ref_w.pvalue)
    assert "metadata.query_id where the sample has one, else the question text" == data["paired_by"]
    keys = {p["key"] for p in data["pairs"]}
    assert {"q0", f"{XSS_QUESTION} q6"} <= keys


def test_judge_source_and_retrieval_metrics(runner, systems):
    judged = json.loads(_ab(runner, "--metric", "faithfulness", "--source", "j").output)
    assert judged["source"] == "j" and judged["values_from"].startswith("claim_support: judge j")
    assert judged["mean_a"] > json.loads(_ab(runner, "--metric", "faithfulness").output)["mean_a"]
    ndcg = json.loads(_ab(runner, "--metric", "ndcg@3").output)
    assert ndcg["k"] == 3 and ndcg["values_from"] == "ids" and ndcg["n_pairs"] == 8
    # the relevant document of each sample is d(supported % 5): rank supported % 5 + 1
    rank_a = [SUPPORTED[q][0] % 5 + 1 for q in SUPPORTED if SUPPORTED[q][1] is not None]
    expected_a = np.mean([1 / np.log2(r + 1) if r <= 3 else 0.0 for r in rank_a])
    assert ndcg["mean_a"] == pytest.approx(expected_a)
    mrr = json.loads(_ab(runner, "--metric", "mrr").output)
    assert mrr["mean_a"] == pytest.approx(np.mean([1 / r for r in rank_a]))


def _agrees_with_scipy(data, a, b):
    """Assert the A/B JSON's means and tests on the pairs a (system A) and b (system B) equal scipy's."""
    assert data["n_pairs"] == len(a)
    assert data["mean_a"] == pytest.approx(a.mean()) and data["mean_b"] == pytest.approx(b.mean())
    assert data["difference"]["value"] == pytest.approx((b - a).mean())
    ref_t = sps.ttest_rel(b, a)
    assert data["ttest"]["t"] == pytest.approx(ref_t.statistic) and data["ttest"]["p_value"] == pytest.approx(ref_t.pvalue)
    ref_w = sps.wilcoxon(b, a)
    assert data["wilcoxon"]["statistic"] == pytest.approx(ref_w.statistic)
    assert data["wilcoxon"]["p_value"] == pytest.approx(ref_w.pvalue)


def test_direct_expert_faithfulness_takes_precedence_as_in_the_report(runner, systems_store):
    store, expected = systems_store
    # q0-a: two experts' direct values, mean 0.8 (derived from claim_support: 0.5); q1-b: an adjudicated
    # 0.1 over an expert's 0.6 (derived: 1.0); q9-b has no claim_support labels, so only its direct value
    # makes it defined (and unpaired: q9 has no sample of system A).
    store.label("faithfulness", "ann", "q0-a", 0.9)
    store.label("faithfulness", "ann2", "q0-a", 0.7)
    store.label("faithfulness", "ann", "q1-b", 0.6)
    store.label("faithfulness", "lead", "q1-b", 0.1, adjudicated=True)
    store.label("faithfulness", "ann", "q9-b", 0.5)
    for sid in store.samples:  # a metric judge, so that the report has a faithfulness section to compare with
        store.verdict("fj", "faithfulness", sid, 0.5)
    store.commit()
    gold = {**expected, ("q0", "rag-a"): 0.8, ("q1", HOSTILE): 0.1}
    result = _ab(runner, "--metric", "faithfulness")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    questions = [q for q, (_, b) in SUPPORTED.items() if b is not None]
    _agrees_with_scipy(data, np.array([gold[(q, "rag-a")] for q in questions]), np.array([gold[(q, HOSTILE)] for q in questions]))
    assert data["values_from"] == "claim_support: the human gold (direct faithfulness values for 3 samples)"
    assert data["unpaired"] == {"a": 1, "b": 1} and data["n_undefined"] == {"a": 0, "b": 0}
    # The report calibrates the metric judge against the same per-sample gold: the two never disagree.
    report = runner.invoke(["report", "--dataset", "d", "--judge", "fj", "--task", "faithfulness", "--format", "csv"])
    assert report.exit_code == 0, report.output
    rows = [row for row in csv.DictReader(io.StringIO(report.output)) if row["task"] == "faithfulness" and row["gold"]]
    report_gold = {row["sample_id"]: float(row["gold"]) for row in rows}
    ab_gold = {sid: pair[side] for pair in data["pairs"] for side in ("a", "b") for sid in pair[f"samples_{side}"]}
    assert len(ab_gold) == 16 and ab_gold == pytest.approx({sid: report_gold[sid] for sid in ab_gold})
    assert report_gold["q0-a"] == pytest.approx(0.8) and report_gold["q9-b"] == pytest.approx(0.5)


@pytest.mark.parametrize("metric", ["answer_relevancy", "context_recall"])
def test_metric_tasks_from_direct_labels_and_from_a_metric_judge(runner, systems_store, metric):
    store, _ = systems_store
    rng = np.random.default_rng(7)
    human, judged = {}, {}
    for sid in sorted(store.samples):
        if sid == "q2-b":  # no label, and an unparsed verdict: no value on either side, so q2 is unpaired
            store.verdict("mj", metric, sid, None)
            continue
        human[sid] = round(float(rng.uniform()), 3)
        judged[sid] = round(float(rng.uniform()), 3)
        store.label(metric, "ann", sid, human[sid])
        store.verdict("mj", metric, sid, judged[sid])
    store.commit()
    questions = ["q0", "q1", "q3", "q4", "q5", "q6", "q7"]
    for source, values, values_from in (
            ("human", human, f"{metric}: the human gold (adjudicated value, else the mean of the annotators)"),
            ("mj", judged, f"{metric}: judge mj")):
        result = _ab(runner, "--metric", metric, "--source", source)
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        assert data["values_from"] == values_from
        _agrees_with_scipy(data, np.array([values[f"{q}-a"] for q in questions]), np.array([values[f"{q}-b"] for q in questions]))
        assert data["unpaired"] == {"a": 2, "b": 1} and data["n_undefined"] == {"a": 0, "b": 1}
    # A judge without verdicts for the metric is named, not compared as empty.
    refused = _ab(runner, "--metric", metric, "--source", "j")
    assert refused.exit_code == 2 and f"judge j has no {metric} verdicts in d" in refused.output


def test_html_is_self_contained_and_escaped(runner, systems, tmp_path):
    out = tmp_path / "ab.html"
    result = _ab(runner, "--metric", "faithfulness", "--format", "html", "-o", str(out))
    assert result.exit_code == 0, result.output
    page = BeautifulSoup(out.read_text(encoding="utf-8"), "html.parser")
    assert page.find("script") is None and page.find("img") is None
    assert not [t for t in page.find_all(["link", "iframe"])]
    assert not [a for a in page.find_all(href=True) if a["href"].startswith(("http", "//"))]
    assert page.select_one(".system-b").get_text() == HOSTILE
    assert any(XSS_QUESTION in th.get_text() for th in page.select(".ab-pairs th.question"))
    assert page.select_one("svg.chart-difference") is not None and page.select_one("svg.chart-scatter") is not None
    data = json.loads(_ab(runner, "--metric", "faithfulness").output)
    assert f"{data['difference']['value']:+.3f}" in page.select_one(".headline").get_text()


def test_markdown_is_escaped_and_names_the_tests(runner, systems):
    md = _ab(runner, "--metric", "faithfulness", "--format", "md").output
    assert "<script>" not in md and "&lt;script&gt;" in md
    assert "Paired t-test" in md and "Wilcoxon" in md and "Relative improvement" in md


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dataset", "nope", "--by", "metadata.system", "--a", "x", "--b", "y", "--metric", "mrr"], "unknown dataset 'nope' (datasets: d)"),
        (["--dataset", "d", "--by", "metadata.sys", "--a", "x", "--b", "y", "--metric", "mrr"], "metadata.system"),
        (["--dataset", "d", "--by", "metadata.system", "--a", "rag-z", "--b", HOSTILE, "--metric", "mrr"], "values: <script>alert(1)</script>, rag-a"),
        (["--dataset", "d", "--by", "metadata.system", "--a", "rag-a", "--b", "rag-a", "--metric", "mrr"], "the same value"),
        (["--dataset", "d", "--by", "metadata.system", "--a", "rag-a", "--b", HOSTILE, "--metric", "bleu"], "metrics: faithfulness"),
        (["--dataset", "d", "--by", "metadata.system", "--a", "rag-a", "--b", HOSTILE, "--metric", "ndcg"], "needs a cut-off"),
        (["--dataset", "d", "--by", "metadata.system", "--a", "rag-a", "--b", HOSTILE, "--metric", "mrr", "--source", "nobody"],
         "unknown judge 'nobody' (judges: j)"),
        (["--dataset", "d", "--by", "metadata.system", "--a", "rag-a", "--b", HOSTILE, "--metric", "context_precision"],
         "no sample of d has a context_precision value (from context_relevance: the human gold): nothing to compare"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(runner, systems, args, message):
    result = runner.invoke(["ab", *args])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], result.output


def test_no_pairs_is_a_clear_message(session, runner):
    store = Store(session)
    for sid, system in (("a1", "x"), ("b1", "y")):
        sample = store.sample(sid, n_claims=1, meta={"system": system, "query_id": sid})
        store.label("claim_support", "ann", sid, "supported", claim=0)
        assert sample
    store.commit()
    result = runner.invoke(["ab", "--dataset", "d", "--by", "metadata.system", "--a", "x", "--b", "y", "--metric", "faithfulness"])
    assert result.exit_code == 2
    assert "no question has a faithfulness value for both metadata.system=x and metadata.system=y" in result.output
    assert "1 samples, 1 with a value" in result.output


def test_one_pair_gives_undefined_tests_with_notes(session):
    store = Store(session)
    for sid, system in (("a1", "x"), ("b1", "y")):
        store.sample(sid, n_claims=2, meta={"system": system, "query_id": "q"})
        store.label("claim_support", "ann", sid, "supported", claim=0)
        store.label("claim_support", "ann", sid, "unsupported" if system == "x" else "supported", claim=1)
    store.commit()
    data = compare_systems(session, "d", by="metadata.system", a="x", b="y", metric="faithfulness").data
    assert data["n_pairs"] == 1 and data["ttest"]["t"] is None and data["ttest"]["reason"] == {"code": "ttest_too_few"}
    assert data["difference"]["reason"] == {"code": "one_pair_no_interval"}
    assert len(data["reasons"]) == len(data["notes"]) and [word(r) for r in data["reasons"]] == data["notes"]
    assert data["difference"]["value"] == pytest.approx(0.5) and data["difference"]["ci"] is None
    assert json.dumps(data, allow_nan=False)


@pytest.mark.parametrize(("text", "parsed"), [("ndcg@10", ("ndcg", 10)), ("Recall@5", ("recall", 5)), ("mrr", ("mrr", None)),
                                              ("answer_quality", ("answer_quality", None)),
                                              ("Answer_Relevancy", ("answer_relevancy", None))])
def test_parse_metric(text, parsed):
    assert parse_metric(text) == parsed


def test_parse_metric_refuses_a_missing_cut_off():
    with pytest.raises(ABError):
        parse_metric("precision")
