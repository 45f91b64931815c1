"""Tenants kept apart (issue 30, finding 1): a trace is a dataset's own, so one token's spans never touch another's samples.

The red team, with tenant B's token: a root span with a trace id of tenant A and an earlier
start replaced A's sample (`B-INJECTED question?`, `=HYPERLINK(...)`); B's root first, then A's
trace, moved A's contexts into tenantB; a lone RETRIEVER span from B added a poisoned document
to A's sample. Staging is keyed by (dataset, trace id) now: the same trace id in two datasets is
two traces.
"""

from __future__ import annotations

import hashlib
import http.client
import json

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from sqlmodel import Session, select
from test_receiver import new_token, post
from test_traces import samples_of
from trace_helpers import BASE_NS, synthetic_request, trace_id_of

from calibrate.ingest.traces import import_traces
from calibrate.models import Dataset, StagedSpan, StagedTrace

PROTO = "application/x-protobuf"


def _value(value) -> AnyValue:
    return AnyValue(string_value=value) if isinstance(value, str) else AnyValue(double_value=value)


def span_id(name: str) -> bytes:
    return hashlib.sha256(name.encode()).digest()[:8]


def request_of(*spans: PbSpan) -> ExportTraceServiceRequest:
    resource = ResourceSpans(scope_spans=[ScopeSpans(spans=list(spans))])
    resource.resource.attributes.append(KeyValue(key="service.name", value=AnyValue(string_value="rag-api")))
    return ExportTraceServiceRequest(resource_spans=[resource])


def span(trace: str, name: str, attributes: dict, *, parent: bytes = b"", start: int = BASE_NS) -> PbSpan:
    return PbSpan(trace_id=bytes.fromhex(trace), span_id=span_id(f"{trace}:{name}"), parent_span_id=parent, name=name,
                  start_time_unix_nano=start, end_time_unix_nano=start + 500,
                  attributes=[KeyValue(key=k, value=_value(v)) for k, v in attributes.items()])


def injected_root(trace: str) -> PbSpan:
    """Tenant B's root span for a trace id of tenant A, starting earlier than A's root."""
    return span(trace, "b-root", {"openinference.span.kind": "CHAIN", "input.value": "B-INJECTED question?",
                                  "output.value": '=HYPERLINK("http://evil")'}, start=BASE_NS - 10**9)


def injected_retriever(trace: str, parent: bytes) -> PbSpan:
    """Tenant B's RETRIEVER span, child of tenant A's root span."""
    return span(trace, "b-retriever", {"openinference.span.kind": "RETRIEVER",
                                       "retrieval.documents.0.document.content": "POISONED document from tenant B",
                                       "retrieval.documents.0.document.id": "evil"}, parent=parent, start=BASE_NS + 5)


def a_root_span_id(n: int) -> bytes:
    """The root span id of synthetic trace n of tenant A (trace_helpers.synthetic_request, seed "a")."""
    return hashlib.sha256(f"a:{n}:0".encode()).digest()[:8]


def a_trace(n: int) -> ExportTraceServiceRequest:
    """Tenant A's synthetic trace n alone (root, retriever, llm), as A's exporter sends it."""
    whole = synthetic_request(n + 1, repeat_every=0, seed="a")
    spans = whole.resource_spans[0].scope_spans[0].spans[3 * n:3 * n + 3]
    return request_of(*spans)


def test_the_same_trace_id_in_two_datasets_is_two_traces(runner, engine, client):
    """Staged spans, staged traces and repeats are per dataset: B's copy of A's spans is B's, counted new for B."""
    a, b = new_token(runner, "tenantA"), new_token(runner, "tenantB")
    body = a_trace(0).SerializeToString()
    assert post(client, a, body).status_code == 200
    assert post(client, b, body).status_code == 200  # the same spans again, through the other tenant's token
    with Session(engine) as session:
        ids = {name: session.exec(select(Dataset.id).where(Dataset.name == name)).one() for name in ("tenantA", "tenantB")}
        rows = {(row.dataset_id, row.trace_id): (row.n_spans, row.has_root) for row in session.exec(select(StagedTrace))}
        spans = sorted(session.exec(select(StagedSpan.dataset_id, StagedSpan.token_id)).all())
    trace = trace_id_of(0, "a")
    assert rows == {(ids["tenantA"], trace): (3, True), (ids["tenantB"], trace): (3, True)}
    assert [dataset for dataset, _ in spans] == [ids["tenantA"]] * 3 + [ids["tenantB"]] * 3
    for name in ("tenantA", "tenantB"):  # each its own sample, neither a repeat of the other
        assert runner.invoke(["traces", "flush", "--dataset", name]).exit_code == 0
    assert list(samples_of(engine, "tenantA")) == list(samples_of(engine, "tenantB")) == [trace]


def _post(port: int, token: str, request: ExportTraceServiceRequest) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/v1/traces", body=request.SerializeToString(),
                 headers={"Content-Type": PROTO, "Authorization": f"Bearer {token}"})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response.status


@pytest.mark.slow
def test_three_cross_tenant_sequences_through_a_real_server_leave_the_other_tenants_samples_byte_identical(
        runner, engine, db_url, tmp_path):
    """Through `calibrate serve`: after each sequence, each sample's line of `export samples` of tenantA is byte for byte
    the line a control dataset gives, made by `traces import` of A's own spans alone."""
    from server_helpers import launch_serve, wait_serving

    a, b = new_token(runner, "tenantA"), new_token(runner, "tenantB")
    sent: list[ExportTraceServiceRequest] = []  # everything tenant A sent, for the control

    def export(dataset: str) -> dict[str, bytes]:
        """Return each sample's line of `export samples` (its bytes), by sample id (the file lists them as stored)."""
        path = tmp_path / f"{dataset}.jsonl"
        result = runner.invoke(["export", "samples", "--dataset", dataset, "-o", str(path)])
        assert result.exit_code == 0, result.output
        return {json.loads(line)["id"]: line for line in path.read_bytes().splitlines()}

    def flush(*datasets: str) -> None:
        for dataset in datasets:
            result = runner.invoke(["traces", "flush", "--dataset", dataset])
            assert result.exit_code == 0, result.output

    def control() -> dict[str, bytes]:
        """What A's spans alone make: the same traces imported from a file into a dataset of their own."""
        whole = ExportTraceServiceRequest()
        for request in sent:
            whole.resource_spans.extend(request.resource_spans)
        path = tmp_path / "a.pb"
        path.write_bytes(whole.SerializeToString())
        with Session(engine) as session:
            ds = session.exec(select(Dataset).where(Dataset.name == "control")).first()
            if ds is not None:
                session.delete(ds)
                session.commit()
        import_traces(engine, [path], dataset="control")
        return export("control")

    def a_sends(n: int) -> None:
        sent.append(a_trace(n))
        assert _post(port, a, sent[-1]) == 200

    # The server settles nothing by itself here (TRACES_SETTLE_S an hour): each step flushes, so the order is exact.
    server, port = launch_serve(db_url, tmp_path, env={"CALIBRATE_TRACES_SETTLE_S": "3600"})
    try:
        wait_serving(server, port)
        for n in range(3):
            a_sends(n)
        flush("tenantA")
        assert export("tenantA") == control() and len(samples_of(engine, "tenantA")) == 3

        # 1. B's root span with A's trace ids and an earlier start: for a settled trace (0) and a staged one (3).
        a_sends(3)
        assert _post(port, b, request_of(injected_root(trace_id_of(0, "a")), injected_root(trace_id_of(3, "a")))) == 200
        flush("tenantB", "tenantA")
        assert export("tenantA") == control()
        assert {s["question"] for s in samples_of(engine, "tenantA").values()}.isdisjoint({"B-INJECTED question?"})

        # 2. B's root first, then A's whole trace (4): A's contexts stay A's; nothing of A reaches tenantB.
        assert _post(port, b, request_of(injected_root(trace_id_of(4, "a")))) == 200
        a_sends(4)
        flush("tenantA", "tenantB")
        assert export("tenantA") == control()
        b_texts = [text for sample in samples_of(engine, "tenantB").values() for _, text, _ in sample["contexts"]]
        assert not any("Context of" in text for text in b_texts)  # A's documents ("Context of n.") never moved to B

        # 3. A lone RETRIEVER span from B in A's traces: a settled one (1) and a staged one (5).
        a_sends(5)
        assert _post(port, b, request_of(injected_retriever(trace_id_of(1, "a"), a_root_span_id(1)),
                                         injected_retriever(trace_id_of(5, "a"), a_root_span_id(5)))) == 200
        flush("tenantB", "tenantA")
        assert export("tenantA") == control()
        assert not any("POISONED" in text for sample in samples_of(engine, "tenantA").values()
                       for _, text, _ in sample["contexts"])
        assert len(samples_of(engine, "tenantA")) == 6
    finally:
        server.terminate()
        server.communicate(timeout=30)
