"""The report's RAG and retrieval sections: faithfulness over claims, ranks kept, the two retrieval sources."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from calibrate.calibration import Options, build_report
from calibrate.reports import render
from calibrate.stats import retrieval_metrics

FAST = Options(bootstrap=200)


def test_judge_faithfulness_divides_by_the_claims_not_by_the_verdicts_returned(store, session):
    store.sample("s0", n_claims=5)
    for c in range(5):
        store.label("claim_support", "ann", "s0", "unsupported" if c == 4 else "supported", claim=c)
    store.verdict("j", "claim_support", "s0", "supported", claim=0)
    store.verdict("j", "claim_support", "s0", "supported", claim=1)
    store.verdict("j", "claim_support", "s0", "unsupported", claim=2)
    store.verdict("j", "claim_support", "s0", None, claim=3)  # the call failed: no usable verdict
    # claim 4: no verdict at all
    store.commit()
    rag = build_report(session, "d", "j", options=FAST).data["rag"]["faithfulness"]
    assert rag["judge_mean"] == pytest.approx(2 / 5)  # not 2/3
    assert rag["n_claims_no_verdict"] == 2
    assert rag["human_mean"] == pytest.approx(4 / 5)


def test_not_applicable_claims_and_ties_are_left_out_of_the_human_value(store, session):
    store.sample("s0", n_claims=4)
    store.label("claim_support", "a", "s0", "supported", claim=0)
    store.label("claim_support", "a", "s0", "not_applicable", claim=1)
    store.label("claim_support", "a", "s0", "unsupported", claim=2)
    store.label("claim_support", "a", "s0", "supported", claim=3)
    store.label("claim_support", "b", "s0", "unsupported", claim=3)  # a tie: unknown
    for c, v in enumerate(["supported", "not_applicable", "supported", "supported"]):
        store.verdict("j", "claim_support", "s0", v, claim=c)
    store.commit()
    rag = build_report(session, "d", "j", options=FAST).data["rag"]["faithfulness"]
    assert rag["human_mean"] == pytest.approx(1 / 2)   # claims 0 and 2
    assert rag["n_claims_no_gold"] == 1                 # claim 3
    assert rag["judge_mean"] == pytest.approx(3 / 3)    # claim 1 is not_applicable for the judge


def test_context_precision_keeps_the_retrieval_ranks(store, session):
    store.sample("s0", n_contexts=3)
    for r, v in enumerate(["relevant", "not_relevant", "relevant"]):
        store.label("context_relevance", "ann", "s0", v, context=r)
    store.verdict("j", "context_relevance", "s0", "relevant", context=0)
    store.verdict("j", "context_relevance", "s0", "relevant", context=2)  # rank 1: no verdict
    store.commit()
    rag = build_report(session, "d", "j", options=FAST).data["rag"]["context_precision"]
    assert rag["human_mean"] == pytest.approx((1 + 2 / 3) / 2)
    assert rag["judge_mean"] == pytest.approx((1 + 2 / 3) / 2)  # not 1.0: the missing rank still counts


def _with_ids(store, session):
    rows = {
        "s0": (["d1", "d3", "d5", "d7", "d9"], ["d3", "d7", "d12"]),
        "s1": (["a", "b"], ["b"]),
        "s2": (["x", "y"], []),  # judged, nothing relevant: undefined, counted
    }
    for sid, (ret, rel) in rows.items():
        sample = store.sample(sid, n_claims=1)
        sample.retrieved_ids, sample.relevant_ids = ret, rel
        store.label("claim_support", "ann", sid, "supported", claim=0)
    store.sample("s3", n_claims=1)  # no ids: skipped
    store.label("claim_support", "ann", "s3", "supported", claim=0)
    store.commit()
    return rows


@pytest.mark.parametrize("k", [1, 3, 5, 10])
def test_retrieval_from_the_samples_ids_without_a_judge(store, session, k):
    rows = _with_ids(store, session)
    data = build_report(session, "d", None, options=Options(bootstrap=200, k=k)).data
    section = data["retrieval"]
    expected = retrieval_metrics([r for r, _ in rows.values()], [set(v) for _, v in rows.values()], k=k).means
    assert section["k"] == k and section["source"] == "ids"
    assert section["n"] == 2 and section["n_no_relevant"] == 1 and section["n_skipped"] == 1
    for key, name in (("recall_at_k", "recall"), ("precision_at_k", "precision"), ("f1_at_k", "f1"), ("mrr", "rr"),
                      ("ndcg_at_k", "ndcg")):
        assert section[key] == pytest.approx(expected[name].value), key
    assert list(data).index("retrieval") == list(data).index("rag") + 1


def test_retrieval_worked_example_through_the_report(store, session):
    sample = store.sample("s0", n_claims=1)
    sample.retrieved_ids, sample.relevant_ids = ["d1", "d3", "d5", "d7", "d9"], ["d3", "d7", "d12"]
    store.label("claim_support", "ann", "s0", "supported", claim=0)
    store.commit()
    section = build_report(session, "d", None, options=Options(bootstrap=200, k=5)).data["retrieval"]
    assert section["recall_at_k"] == pytest.approx(2 / 3)
    assert section["precision_at_k"] == pytest.approx(0.4)
    assert section["mrr"] == pytest.approx(0.5)


def test_retrieval_from_context_relevance_gold_when_samples_carry_no_ids(store, session):
    store.sample("s0", n_contexts=3)
    store.sample("s1", n_contexts=2)
    store.sample("s2", n_contexts=2)
    for r, v in enumerate(["not_relevant", "relevant", "relevant"]):
        store.label("context_relevance", "ann", "s0", v, context=r)
    for r in range(2):
        store.label("context_relevance", "ann", "s1", "not_relevant", context=r)
    store.commit()
    section = build_report(session, "d", None, options=Options(bootstrap=200, k=2)).data["retrieval"]
    assert section["source"] == "context_relevance_gold"
    assert section["reason"]["parts"][0] == {"code": "retrieval_source_context_relevance_gold"}
    assert section["n"] == 1 and section["n_no_relevant"] == 1 and section["n_skipped"] == 1
    assert section["recall_at_k"] == pytest.approx(1 / 2)      # relevant ranks 2 and 3, K = 2
    assert section["precision_at_k"] == pytest.approx(1 / 2)
    assert section["mrr"] == pytest.approx(1 / 2)
    assert section["ndcg_at_k"] == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))


def test_no_retrieval_section_without_ids_or_context_labels(store, session):
    store.sample("s0", n_claims=1)
    store.label("claim_support", "ann", "s0", "supported", claim=0)
    store.commit()
    assert "retrieval" not in build_report(session, "d", None, options=FAST).data


def test_retrieval_renders_in_every_format_without_nan(store, session):
    _with_ids(store, session)
    report = build_report(session, "d", None, options=Options(bootstrap=200, k=3))
    parsed = json.loads(render(report, "json"))
    assert parsed["retrieval"]["k"] == 3
    from bs4 import BeautifulSoup

    page = BeautifulSoup(render(report, "html"), "html.parser")
    shown = {row["data-retrieval"]: row.select_one("td").get_text(strip=True) for row in page.select("#rag tr[data-retrieval]")}
    assert shown["ndcg_at_k"] == f"{parsed['retrieval']['ndcg_at_k']:.3f}"
    assert page.select_one("#retrieval").get_text(strip=True) == "Retrieval at K = 3"
    assert "1 sample has no relevant document" in page.select_one(".retrieval-summary").get_text()
    md = render(report, "md")
    assert "## Retrieval at K = 3" in md and f"| nDCG@3 | {parsed['retrieval']['ndcg_at_k']:.3f} |" in md


def test_undefined_retrieval_means_are_null_with_a_note(store, session):
    sample = store.sample("s0", n_claims=1)
    sample.retrieved_ids, sample.relevant_ids = ["a"], []
    store.label("claim_support", "ann", "s0", "supported", claim=0)
    store.commit()
    report = build_report(session, "d", None, options=FAST)
    section = report.data["retrieval"]
    assert section["n"] == 0 and section["ndcg_at_k"] is None
    assert {"code": "retrieval_none_relevant"} in section["reason"]["parts"]
    assert np.isfinite(json.loads(render(report, "json"))["retrieval"]["k"])
    assert "undefined" in render(report, "md")
