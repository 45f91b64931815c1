"""Production traces without glue (issue 36): the application's own metadata and the Collector's sampling rate.

The root span's OpenInference `metadata` (JSON) and `metadata.<key>` attributes, and Langfuse's trace `metadata`,
become sample.metadata.<key> within bounds; a span's W3C tracestate `ot=th:…` (OpenTelemetry's consistent
probability sampling, what a Collector's probabilistic_sampler in proportional mode writes) gives the upstream
probability, which multiplies calibrate's own into `inclusion_prob`.
"""

from __future__ import annotations

import hashlib
import json
import math

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from test_receiver import new_token, post, token_row
from test_traces import samples_of
from trace_helpers import BASE_NS

from calibrate.ingest.traces import import_traces
from calibrate.ingest.traces.mapping import APP_MAX_KEYS, app_metadata
from calibrate.ingest.traces.staging import settle
from calibrate.ingest.traces.upstream import (
    INCONSISTENT,
    INVALID,
    NO_THRESHOLD,
    WITH_THRESHOLD,
    ot_fields,
    threshold_of,
    upstream_of,
)


def trace_id(n: int, randomness: str = "f") -> str:
    """A trace id whose last 56 bits (the randomness the Collector compares with th) start with the hex digit given."""
    return hashlib.sha256(f"m:{n}".encode()).hexdigest()[:18] + randomness.ljust(14, "f")


def _kv(key, value) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def rag_request(traces: list[dict]) -> ExportTraceServiceRequest:
    """OpenInference RAG traces (CHAIN root, RETRIEVER, LLM); each dict: id, state (tracestate of every span, or
    root_state/child_state), root (extra root attributes), start (the root's start, Unix ns)."""
    spans = []
    for n, trace in enumerate(traces):
        tid = bytes.fromhex(trace["id"])
        ids = [hashlib.sha256(f"{trace['id']}:{k}".encode()).digest()[:8] for k in range(3)]
        root_state = trace.get("root_state", trace.get("state", ""))
        child_state = trace.get("child_state", trace.get("state", ""))
        question = trace.get("question", f"Question {n}?")
        root = {"openinference.span.kind": "CHAIN", "input.value": question, "output.value": f"Answer {n}.",
                **trace.get("root", {})}
        children = [
            {"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.content": f"Context {n}.",
             "retrieval.documents.0.document.id": f"d{n}"},
            {"openinference.span.kind": "LLM", "llm.model_name": "m1"}]
        start = trace.get("start", BASE_NS + n)
        spans.append(PbSpan(trace_id=tid, span_id=ids[0], name="rag", start_time_unix_nano=start, trace_state=root_state,
                            attributes=[_kv(k, v) for k, v in root.items()]))
        for k, attrs in enumerate(children, start=1):
            spans.append(PbSpan(trace_id=tid, span_id=ids[k], parent_span_id=ids[0], name=f"child{k}",
                                start_time_unix_nano=start + k, trace_state=child_state,
                                attributes=[_kv(key, v) for key, v in attrs.items()]))
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])


# --------------------------------------------------------------------------- the tracestate


def test_the_threshold_is_read_as_the_specification_writes_it():
    """OpenTelemetry's "TraceState: Probability Sampling": th right-padded to 14 hex digits, probability 1 − th/2^56;
    the specification's table of 1-in-N thresholds gives these probabilities."""
    tid = "0" * 18 + "f" * 14
    assert upstream_of("ot=th:c", tid) == (upstream_of("ot=th:c", tid)) and upstream_of("ot=th:c", tid).probability == 0.25
    assert threshold_of("c") == 0xc0000000000000 and threshold_of("8") == 1 << 55
    for th, probability in (("0", 1.0), ("8", 0.5), ("e", 0.125), ("f", 0.0625), ("aaab", 0.3333282470703125),
                            ("cccd", 0.1999969482421875), ("fd70a", 0.010000228881835938),
                            ("ffbe76d", 0.000999998301267624)):
        found = upstream_of(f"ot=th:{th}", tid)
        assert found.kind == WITH_THRESHOLD and math.isclose(found.probability, probability, rel_tol=1e-12), th
    # other vendors' entries and other ot sub-keys around it; upper-case hex digits
    assert upstream_of("vendor=abc, ot=rv:ffffffffffffff;th:C;x:1 ,b@t=1", tid).probability == 0.25
    assert ot_fields("") == {} and ot_fields("vendor=x") == {}


@pytest.mark.parametrize(("state", "kind"), [
    ("", NO_THRESHOLD), ("vendor=1", NO_THRESHOLD), ("ot=rv:ffffffffffffff", NO_THRESHOLD),
    ("ot=th:", INVALID), ("ot=th:xyz", INVALID), ("ot=th:" + "1" * 15, INVALID), ("ot=th:c;th:8", INVALID),
    ("ot=th:c,ot=th:8", INVALID), ("ot", INVALID), ("ot=th:c;rv:12", INVALID), ("ot=th:c;" + "x:1;" * 200, INVALID),
    ("ot=th:c;rv:00000000000001", INCONSISTENT),  # an explicit randomness below the threshold: not a kept span
])
def test_absent_malformed_and_impossible_thresholds_read_as_one_with_their_kind(state, kind):
    found = upstream_of(state, "0" * 18 + "f" * 14)
    assert (found.probability, found.kind) == (1.0, kind)


def test_the_trace_ids_randomness_is_checked_when_there_is_no_rv():
    assert upstream_of("ot=th:c", "a" * 18 + "b" + "f" * 13).kind == INCONSISTENT  # 0xbf… < 0xc0…: the sampler drops it
    assert upstream_of("ot=th:c;rv:c0000000000000", "a" * 18 + "b" + "f" * 13).probability == 0.25  # rv is the randomness


def test_a_collectors_rate_multiplies_ours_thumbs_down_by_one(engine, tmp_path):
    traces = [{"id": trace_id(n), "state": "ot=th:c"} for n in range(40)]
    traces.append({"id": trace_id(40), "root_state": "ot=th:c", "child_state": "ot=th:8"})  # spans disagree: the root's
    traces.append({"id": trace_id(41, "1"), "state": "ot=th:c"})  # randomness below th: counted, probability 1
    traces.append({"id": trace_id(42), "state": "ot=th:zz"})  # malformed
    traces.append({"id": trace_id(43), "state": ""})  # no threshold
    path = tmp_path / "t.pb"
    path.write_bytes(rag_request(traces).SerializeToString())
    feedback = tmp_path / "f.jsonl"
    feedback.write_text(json.dumps({"trace_id": trace_id(0), "value": "down"}) + "\n")
    summary = import_traces(engine, [path], dataset="d", rate=0.5, salt="s", feedback=feedback)
    samples = samples_of(engine, "d")
    for trace in traces[:41]:
        if trace["id"] in samples:
            meta = samples[trace["id"]]["metadata"]
            assert meta["upstream_prob"] == 0.25
            assert meta["inclusion_prob"] == (0.25 if trace["id"] == trace_id(0) else 0.125), trace["id"]
    assert samples[trace_id(0)]["feedback"] == -1
    taken = set(samples)
    odd = {trace_id(41, "1"): INCONSISTENT, trace_id(42): INVALID, trace_id(43): NO_THRESHOLD}
    for tid in taken & set(odd):
        assert samples[tid]["metadata"]["inclusion_prob"] == 0.5 and "upstream_prob" not in samples[tid]["metadata"]
    expected = {WITH_THRESHOLD: sum(t["id"] in taken for t in traces[:41])}
    expected.update({kind: 1 for tid, kind in odd.items() if tid in taken})
    if trace_id(40) in taken:
        expected["mixed_thresholds"] = 1
    assert summary.upstream == {k: v for k, v in sorted(expected.items()) if v}
    assert summary.as_dict()["upstream"] == summary.upstream
    assert any(line.startswith("upstream sampling (tracestate ot=th): ") for line in summary.lines())


def test_a_product_below_the_floor_is_skipped_and_named(engine, tmp_path):
    """1e-6 is the smallest inclusion probability an estimate takes (calibrate.bounds): upstream 2^-8 × rate 1e-4 is
    below it, so the trace is skipped as `inclusion_prob_below_min`, never stored with a weight past 10^6."""
    traces = [{"id": trace_id(n), "state": "ot=th:ff"} for n in range(3)]
    path = tmp_path / "t.pb"
    path.write_bytes(rag_request(traces).SerializeToString())
    feedback = tmp_path / "f.jsonl"
    feedback.write_text("".join(json.dumps({"trace_id": t["id"], "value": "down"}) + "\n" for t in traces[:1]))
    summary = import_traces(engine, [path], dataset="d", rate=1e-4, salt="s", feedback=feedback)
    # the thumbs-down trace: 2^-8 × 1 is fine; the others are drawn at 1e-4 only if lucky, and then skipped
    assert samples_of(engine, "d")[trace_id(0)]["metadata"]["inclusion_prob"] == 2 ** -8
    assert summary.skipped.get("inclusion_prob_below_min", 0) == summary.sampled - 1
    rare = tmp_path / "rare.pb"
    rare.write_bytes(rag_request([{"id": trace_id(9), "state": "ot=th:ffffff"}]).SerializeToString())  # 2^-24 upstream
    again = import_traces(engine, [rare], dataset="d2", rate=1.0, salt="s")
    assert again.skipped == {"inclusion_prob_below_min": 1}
    assert any("inclusion_prob_below_min" in line and "sampling_percentage" in line for line in again.lines())


def test_the_receiver_keeps_the_tracestate_until_settling(runner, engine, client):
    token = new_token(runner, "prod")
    traces = [{"id": trace_id(n), "state": "ot=th:c", "root": {"metadata": json.dumps({"topic": "iron"})}}
              for n in range(3)]
    assert post(client, token, rag_request(traces).SerializeToString()).status_code == 200
    assert post(client, token, json.dumps({"trace_id": trace_id(1), "value": "down"}).encode(), "application/json",
                path="/v1/feedback").status_code == 200
    settle(engine, settle_s=0)
    samples = samples_of(engine, "prod")
    assert {tid: s["metadata"]["inclusion_prob"] for tid, s in samples.items()} == {
        trace_id(0): 0.25, trace_id(1): 0.25, trace_id(2): 0.25}  # the token's rate is 1; thumbs-down × 1
    assert {s["metadata"]["topic"] for s in samples.values()} == {"iron"}
    row = token_row(engine)
    assert (row.upstream, row.metadata_dropped) == ({WITH_THRESHOLD: 3}, 0)


# --------------------------------------------------------------------------- the application's metadata


def test_the_applications_metadata_is_kept_within_bounds():
    kept, dropped = app_metadata([{"topic": "iron", "tier": 2, "score": 0.5, "beta": True, "nested": {"a": 1},
                                   "list": [1], "none": None, "long": "x" * 201, "inclusion_prob": 0.9, "trace_id": "x",
                                   "dotted.key": "v", "nan": float("nan"), "ok_text": "y" * 200},
                                  {"topic": "zinc"}])
    assert kept == {"beta": True, "ok_text": "y" * 200, "score": 0.5, "tier": 2, "topic": "zinc"}
    assert dropped == 8
    many, over = app_metadata([{f"k{i:03d}": i for i in range(60)}])
    assert len(many) == APP_MAX_KEYS and over == 10 and "k000" in many and "k059" not in many
    assert app_metadata(["not an object", {"a": 1}]) == ({"a": 1}, 1)


def test_openinference_metadata_and_dotted_attributes_become_sample_metadata(engine, tmp_path):
    root = {"metadata": json.dumps({"topic": "iron", "tier": "free", "inclusion_prob": 0.001, "deep": {"x": 1}}),
            "metadata.tier": "pro", "metadata.region": "eu", "metadata.user.id": "u1"}
    path = tmp_path / "t.pb"
    path.write_bytes(rag_request([{"id": trace_id(0), "root": root}, {"id": trace_id(1), "root": {"metadata": "not json"}}])
                     .SerializeToString())
    summary = import_traces(engine, [path], dataset="d", salt="s")
    meta = samples_of(engine, "d")[trace_id(0)]["metadata"]
    assert {k: meta[k] for k in ("topic", "tier", "region")} == {"topic": "iron", "tier": "pro", "region": "eu"}
    assert meta["inclusion_prob"] == 1.0  # reserved: never the application's
    assert "deep" not in meta and "user.id" not in meta
    assert summary.metadata_dropped == 4  # inclusion_prob, deep, user.id, and the second trace's unreadable JSON
    assert any("4 keys of the application's metadata left out" in line for line in summary.lines())


def test_langfuses_trace_metadata_becomes_sample_metadata(engine, tmp_path):
    trace = {"id": "lf-1", "input": "What is iron for?", "output": "Blood.", "metadata": {"topic": "iron", "n": 3, "x": [1]},
             "observations": [{"type": "RETRIEVER", "output": ["Iron carries oxygen."], "startTime": "2025-01-01T00:00:00Z"}]}
    path = tmp_path / "lf.json"
    path.write_text(json.dumps([trace]))
    summary = import_traces(engine, [path], dataset="d", salt="s")
    (sample,) = samples_of(engine, "d").values()
    assert (sample["metadata"]["topic"], sample["metadata"]["n"], summary.metadata_dropped) == ("iron", 3, 1)


# --------------------------------------------------------------------------- usable by every command that names metadata


def test_trace_metadata_serves_golden_sets_sampling_and_drift_on_data_without_splits(runner, engine, tmp_path):
    topics = ["iron", "zinc", "zinc"]
    traces = [{"id": trace_id(n), "root": {"metadata": json.dumps({"topic": topics[n % 3]})}} for n in range(30)]
    path = tmp_path / "t.pb"
    path.write_bytes(rag_request(traces).SerializeToString())
    assert import_traces(engine, [path], dataset="prod", salt="s").created == 30
    from sqlmodel import Session

    from calibrate.accounts import add_user

    with Session(engine) as session:
        for name in ("ana", "ben"):
            add_user(session, name, role="annotator", password="password-123")
        session.commit()

    iron = runner.invoke(["golden", "create", "iron", "--dataset", "prod", "--where", "metadata.topic=iron", "--json"])
    assert iron.exit_code == 0, iron.output
    assert json.loads(iron.stdout)["n_items"] == 10
    split = runner.invoke(["golden", "create", "g", "--dataset", "prod", "--split", "test"])
    assert split.exit_code == 2
    assert "dataset prod has no splits (production traces have none), so --split test matches nothing" in split.output
    every = runner.invoke(["golden", "create", "all", "--dataset", "prod", "--json"])
    assert every.exit_code == 0 and json.loads(every.stdout)["n_items"] == 30  # no splits, no selection: every sample

    refreshed = runner.invoke(["golden", "refresh", "iron", "--dataset", "prod", "--from", "metadata.topic=zinc",
                               "--renew", "0.5", "--anchor-share", "0", "--strata", "metadata.topic"])
    assert refreshed.exit_code == 0, refreshed.output
    assert "5 new item(s), 2 experts each so that their agreement is measured: 10 assignment(s) queued to ana, ben" in \
        refreshed.output
    drift = runner.invoke(["golden", "drift", "iron", "--dataset", "prod", "--against", "metadata.topic=zinc",
                           "--fields", "metadata.topic", "--json"])
    assert drift.exit_code == 0, drift.output
    assert "metadata.topic" in json.loads(drift.stdout)["fields"]
    sampled = runner.invoke(["sample", "--dataset", "prod", "--n", "6", "--stratify-by", "metadata.topic", "--assign", "ana"])
    assert sampled.exit_code == 0, sampled.output
    assert "stratified by metadata.topic: 2 strata" in sampled.output


def test_the_production_source_says_what_to_add_the_upstream_sampling_and_the_retention(runner, client, login, engine):
    from bs4 import BeautifulSoup

    token = new_token(runner, "prod")
    traces = rag_request([{"id": trace_id(n), "state": "ot=th:c", "root": {"metadata": json.dumps({"topic": "iron",
                                                                                                    "deep": {"x": 1}})}}
                          for n in range(3)])
    for span in traces.resource_spans[0].scope_spans[0].spans:  # no RETRIEVER documents: skipped no_contexts
        if any(kv.key == "openinference.span.kind" and kv.value.string_value == "RETRIEVER" for kv in span.attributes):
            del span.attributes[:]
    assert post(client, token, traces.SerializeToString()).status_code == 200
    settle(engine, settle_s=0)
    assert runner.invoke(["traces", "retention", "--dataset", "prod", "--older-than", "30d"]).exit_code == 0
    login("eng", "engineer")
    en = BeautifulSoup(client.get("/datasets/prod", headers={'Accept-Language': 'en'}).data, "html.parser")
    row = en.select_one("#production-skipped tr[data-reason='no_contexts']")
    assert row.select_one("td.hint").get_text().startswith("no retrieved document text: add a RETRIEVER span with "
                                                           "retrieval.documents.N.document.content")
    figures = {td["data-key"]: td.get_text(" ", strip=True) for td in en.select("#production-figures td[data-key]")}
    assert figures["retention"].startswith("samples older than 30 days are purged daily")
    es = BeautifulSoup(client.get("/datasets/prod", headers={'Accept-Language': 'es-ES,es;q=0.9'}).data, "html.parser")
    hint = es.select_one("#production-skipped tr[data-reason='no_contexts'] td.hint").get_text()
    assert hint.startswith("no hay texto de documentos recuperados: añada un span RETRIEVER")
    runner.invoke(["traces", "retention", "--dataset", "prod", "--off"])
    none = BeautifulSoup(client.get("/datasets/prod", headers={'Accept-Language': 'en'}).data, "html.parser")
    cell = none.select_one("#production-figures td[data-key='retention']")
    assert cell.select_one("code").get_text() == "calibrate traces retention --dataset prod --older-than 90d"
