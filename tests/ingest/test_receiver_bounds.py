"""The receiver's bounds (issue 30): requests staged in chunks, bounded in spans and feedback records, every gzip member
read, spans refused one by one, database errors answered in OTLP's shape, feedback that is not a number refused."""

from __future__ import annotations

import gzip
import json
import threading
import time

import pytest
from bs4 import BeautifulSoup
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from sqlalchemy import event, func
from sqlmodel import Session, select
from test_receiver import JSON, PROTO, new_token, post, staged, token_row
from trace_helpers import collector_json, synthetic_request, trace_id_of

from calibrate import create_app
from calibrate.db import writer_lock
from calibrate.ingest.traces import staging
from calibrate.ingest.traces.staging import ROOTLESS_MAX_AGE, drop_rootless
from calibrate.models import Assignment, Claim, Label, StagedFeedback


def app_with(tmp_path, db_url, **config):
    return create_app({"TESTING": True, "DATABASE_URL": db_url, "INSTANCE_PATH": str(tmp_path / "i"), "SECRET_KEY": "t",
                       **config})


def test_every_gzip_member_is_read_and_bytes_after_the_last_refuse_the_body(runner, engine, client):
    """Two members (a gzip file may be several, RFC 1952): both read, every span staged; anything after a member that is
    not another member refuses the whole body, nothing staged."""
    token = new_token(runner, "prod")
    first, second = synthetic_request(3, repeat_every=0, seed="m1"), synthetic_request(3, repeat_every=0, seed="m2")
    # Two protobuf messages one after the other are one message (their repeated fields joined): both members count.
    body = gzip.compress(first.SerializeToString()) + gzip.compress(second.SerializeToString())
    response = post(client, token, body, PROTO, **{"Content-Encoding": "gzip"})
    assert response.status_code == 200 and ExportTraceServiceResponse.FromString(response.data) == ExportTraceServiceResponse()
    assert staged(engine) == 18
    for tail, says in ((b"trailing garbage", "16 bytes after the end of the compressed data"),
                       (b"\x1f\x8b\x08\x00broken", "not valid gzip")):
        response = post(client, token, gzip.compress(synthetic_request(1, seed="t").SerializeToString()) + tail, PROTO,
                        **{"Content-Encoding": "gzip"})
        assert response.status_code == 400 and says in Status.FromString(response.data).message
    assert staged(engine) == 18


def test_spans_and_feedback_past_the_per_request_bounds_are_refused_before_anything_is_stored(runner, engine, tmp_path,
                                                                                            db_url):
    client = app_with(tmp_path, db_url, TRACES_MAX_SPANS=5, TRACES_MAX_FEEDBACK=3, TRACES_MAX_BODY=2_000_000,
                      TRACES_MAX_JSON_BODY=50_000).test_client()
    token = new_token(runner, "prod")
    # A JSON body is parsed whole (the interpreter held all along): past TRACES_MAX_JSON_BODY it is not parsed at all.
    big = json.dumps(collector_json(synthetic_request(100, repeat_every=0))).encode()
    response = post(client, token, gzip.compress(big), JSON, **{"Content-Encoding": "gzip"})
    assert response.status_code == 413 and json.loads(response.data)["message"].startswith(
        "a JSON body is over TRACES_MAX_JSON_BODY (50,000 bytes unpacked): send protobuf")
    request = synthetic_request(2, repeat_every=0)  # 6 spans
    for response in (post(client, token, request.SerializeToString()),
                     post(client, token, json.dumps(collector_json(request)).encode(), JSON),
                     post(client, token, gzip.compress(request.SerializeToString()), **{"Content-Encoding": "gzip"})):
        assert response.status_code == 413
        message = (Status.FromString(response.data).message if response.mimetype == PROTO
                   else json.loads(response.data)["message"])
        assert message.startswith("6 spans, the limit is 5 per request (TRACES_MAX_SPANS)")
    assert post(client, token, synthetic_request(1, repeat_every=0).SerializeToString()).status_code == 200
    records = [{"trace_id": trace_id_of(n), "value": "down"} for n in range(4)]
    for body, kind in ((json.dumps(records), JSON), ("\n".join(json.dumps(r) for r in records), "application/x-ndjson")):
        response = post(client, token, body.encode(), kind, path="/v1/feedback")
        assert response.status_code == 413 and "4 feedback records, the limit is 3" in json.loads(response.data)["message"]
    assert post(client, token, json.dumps(records[:3]).encode(), JSON, path="/v1/feedback").status_code == 200
    row = token_row(engine, "prod")
    assert (row.spans_received, row.feedback_received, staged(engine)) == (3, 3, 3)


def test_spans_out_of_range_or_not_unicode_are_refused_one_by_one(runner, engine, client):
    """A start time of 1e22 ns (the red team's), a negative one, the largest uint64 (year 2554), a lone surrogate in a
    name or an attribute: each span refused in partialSuccess, naming it; the request's other spans are staged."""
    token = new_token(runner, "prod")
    data = collector_json(synthetic_request(2, repeat_every=0))
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[1]["startTimeUnixNano"] = 10**22
    spans[2]["startTimeUnixNano"] = "-5"
    spans[3]["name"] = "\ud800"
    spans[4]["attributes"].append({"key": "note", "value": {"stringValue": "x\udfffy"}})
    body = json.dumps(data).encode()  # ensure_ascii: the lone surrogates travel as \\ud800 escapes, as JSON allows
    response = post(client, token, body, JSON)
    assert response.status_code == 200
    partial = json.loads(response.data)["partialSuccess"]
    assert partial["rejectedSpans"] == "4"
    assert partial["errorMessage"].startswith(f"4 spans refused: span {spans[1]['spanId']} of trace {trace_id_of(0)}: "
                                              "startTimeUnixNano 10000000000000000000000 is out of range")
    largest = synthetic_request(1, repeat_every=0, seed="max")
    largest.resource_spans[0].scope_spans[0].spans[0].start_time_unix_nano = 2**64 - 1
    answer = ExportTraceServiceResponse.FromString(post(client, token, largest.SerializeToString()).data)
    assert answer.partial_success.rejected_spans == 1 and "18446744073709551615 is out of range" in \
        answer.partial_success.error_message
    assert staged(engine) == 2 + 2 and token_row(engine, "prod").spans_rejected == 5


def test_a_request_is_staged_in_chunks_and_a_label_save_waits_for_one_chunk_at_most(
        runner, engine, db_url, app, client, session, make_sample, make_user, monkeypatch):
    """The documented promise: a label save waits for one bounded transaction at most. A request of 30 spans staged
    6 at a time: a label save that starts waiting while the first chunk holds the writer lock is saved before the
    second chunk starts (its label is there when the second chunk begins), never after the whole request."""
    sample = make_sample(external_id="s1", answer="One claim.", claims=["One claim."])
    ana = make_user("ana")
    assignment = Assignment(sample_id=sample.id, user_id=ana.id)
    session.add(assignment)
    session.commit()
    claim_id = session.exec(select(Claim.id).where(Claim.sample_id == sample.id)).one()
    assignment_id = assignment.id
    person = app.test_client()
    page = person.get("/login")
    csrf = BeautifulSoup(page.data, "html.parser").select_one("input[name=csrf_token]")["value"]
    assert person.post("/login", data={"username": "ana", "password": "password-123", "csrf_token": csrf}).status_code == 303
    csrf = BeautifulSoup(person.get("/datasets").data, "html.parser").select_one(".whoami input[name=csrf_token]")["value"]
    token = new_token(runner, "prod")

    lock = writer_lock(db_url)
    labels_at_chunk: list[int] = []
    saved: list[int] = []
    real = staging.stage_spans

    def save_label():
        response = person.post(f"/annotate/{assignment_id}/label", headers={"HX-Request": "true", "X-CSRFToken": csrf},
                               data={"task": "claim_support", "target": f"claim:{claim_id}", "value": "supported"})
        saved.append(response.status_code)

    def watched(session_, token_, encoded, **kwargs):
        with Session(engine) as reader:  # what is committed when this chunk's transaction starts
            labels_at_chunk.append(reader.exec(select(func.count(Label.id))).one())
        if len(labels_at_chunk) == 1:  # the first chunk holds the writer lock: a person's label save comes now
            thread = threading.Thread(target=save_label, daemon=True)
            thread.start()
            deadline = time.monotonic() + 60  # a bound on reaching the lock, not a measurement
            while lock.waiting() < 1:
                assert thread.is_alive() and time.monotonic() < deadline, saved
                time.sleep(0.005)
            watched.thread = thread
        return real(session_, token_, encoded, **kwargs)

    monkeypatch.setattr(staging, "STAGE_CHUNK", 6)
    monkeypatch.setattr(staging, "stage_spans", watched)
    response = post(client, token, synthetic_request(10, repeat_every=0).SerializeToString())
    watched.thread.join(timeout=60)
    assert response.status_code == 200 and saved == [200]
    assert labels_at_chunk == [0, 1, 1, 1, 1]  # five chunks of six spans; the label went in right after the first
    assert staged(engine) == 30


def test_the_rootless_and_feedback_drops_go_in_chunks(runner, engine, client, monkeypatch):
    token = new_token(runner, "prod")
    spans = synthetic_request(10, repeat_every=0).resource_spans[0].scope_spans[0].spans
    children = synthetic_request(0)
    children.resource_spans.add().scope_spans.add().spans.extend(s for s in spans if s.parent_span_id)
    assert post(client, token, children.SerializeToString()).status_code == 200  # 10 traces without their root
    records = [{"trace_id": trace_id_of(n, "fb"), "value": "up"} for n in range(7)]
    assert post(client, token, json.dumps(records).encode(), JSON, path="/v1/feedback").status_code == 200
    calls = {"traces": 0, "feedback": 0}
    for name, key in (("_drop_some", "traces"), ("_drop_feedback", "feedback")):
        real = getattr(staging, name)

        def counted(*args, real=real, key=key):
            calls[key] += 1
            return real(*args)

        monkeypatch.setattr(staging, name, counted)
    dropped = drop_rootless(engine, now=time.time() + ROOTLESS_MAX_AGE + 1, chunk=3)
    assert (dropped.dropped_traces, dropped.dropped_spans, dropped.dropped_feedback) == (10, 20, 7)
    assert calls == {"traces": 4, "feedback": 3}  # 3 + 3 + 3 + 1 traces; 3 + 3 + 1 records: one transaction each
    row = token_row(engine, "prod")
    assert (row.traces_dropped, row.feedback_dropped, row.skipped) == (10, 7, {"no_root_span": 10})
    with Session(engine) as session:
        assert session.exec(select(func.count(StagedFeedback.id))).one() == 0 and staged(engine) == 0


def test_a_full_disk_is_an_otlp_503_with_retry_after_and_health_says_the_write_failed(runner, engine, client):
    """SQLite's `max_page_count` makes the file full: the receiver answers a retryable 503 with a google.rpc.Status in
    the request's content type (never an HTML page), /health reports the failed write, and both recover with the disk."""
    token = new_token(runner, "prod")
    assert client.get("/health").status_code == 200
    pages = engine.connect().exec_driver_sql("PRAGMA page_count").scalar()

    def full(dbapi_connection, _record):
        dbapi_connection.execute(f"PRAGMA max_page_count = {pages}")

    engine.dispose()
    event.listen(engine, "connect", full)
    try:
        body = synthetic_request(200, repeat_every=0).SerializeToString()
        response = post(client, token, body)
        assert (response.status_code, response.mimetype, response.headers["Retry-After"]) == (503, PROTO, "30")
        status = Status.FromString(response.data)
        assert status.code == 14 and "database or disk is full" in status.message
        response = post(client, token, json.dumps(collector_json(synthetic_request(200))).encode(), JSON)
        assert response.status_code == 503 and json.loads(response.data)["code"] == 14
        health = client.get("/health")
        assert health.status_code == 503 and health.json["status"] == "write-failed"
        assert "database or disk is full" in health.json["message"] and health.json["database"] == "ok"
    finally:
        event.remove(engine, "connect", full)
        engine.dispose()
    assert post(client, token, body).status_code == 200 and staged(engine) == 600
    assert client.get("/health").json["status"] == "ok"


def test_feedback_that_is_not_a_number_is_refused(runner, engine, client, tmp_path):
    """NaN and 1e999 (infinity once parsed) are no feedback: refused naming the field, nothing staged; the same in a
    `traces import --feedback` file."""
    token = new_token(runner, "prod")
    for value in ("NaN", "1e999", "-Infinity"):
        body = f'{{"trace_id": "{trace_id_of(0)}", "value": {value}}}'.encode()
        response = post(client, token, body, JSON, path="/v1/feedback")
        assert response.status_code == 400, value
        assert "field 'value'" in json.loads(response.data)["message"], value
    assert token_row(engine, "prod").feedback_received == 0
    path = tmp_path / "traces.pb"
    path.write_bytes(synthetic_request(1, repeat_every=0).SerializeToString())
    feedback = tmp_path / "feedback.jsonl"
    feedback.write_text(f'{{"trace_id": "{trace_id_of(0)}", "value": 1e999}}\n', encoding="utf-8")
    result = runner.invoke(["traces", "import", str(path), "--dataset", "d", "--feedback", str(feedback)])
    assert result.exit_code == 2 and "line 1" in result.output and "field 'value'" in result.output


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def test_a_protobuf_request_is_walked_one_span_at_a_time_with_the_spans_a_parse_gives():
    """The receiver never parses a request whole (one C call holding the interpreter: 1 s for 137 MB, every other
    thread of the server waiting): LazyRequest walks its fields and parses each span when asked, giving the same spans
    and refusals as the whole parse; bytes that are not such a request are refused whole, a span's bad bytes alone."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource
    from trace_helpers import rag_program

    from calibrate.ingest.problems import ImportRejected
    from calibrate.ingest.traces.decode import LazyRequest, Where, request_of_protobuf, spans_of_message

    for request in (synthetic_request(30, repeat_every=7), rag_program(["How long?", "Which dose?"])):
        raw = request.SerializeToString()
        lazy = LazyRequest(raw)
        assert lazy.count() == sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        assert list(lazy.spans(Where(), rejected=[])) == spans_of_message(request_of_protobuf(raw), Where())
    # A resource given in two fields is merged, as a parser merges it; an unknown field (number 100) is skipped.
    second = Resource()
    second.attributes.add(key="deployment").value.string_value = "eu"
    extra = second.SerializeToString()
    resource_spans = (synthetic_request(1, repeat_every=0).resource_spans[0].SerializeToString()
                      + b"\x0a" + varint(len(extra)) + extra + b"\xa0\x06\x01")
    body = b"\x0a" + varint(len(resource_spans)) + resource_spans
    merged = ExportTraceServiceRequest.FromString(body)
    assert [a.key for a in merged.resource_spans[0].resource.attributes] == ["service.name", "deployment"]
    assert list(LazyRequest(body).spans(Where(), rejected=[])) == spans_of_message(merged, Where())
    # Not a request at all: refused whole; a span whose own bytes are broken: refused alone, the others kept.
    for bad in (b"\xff\x01garbage", b"\x0a\x05abc", b"\x0b\x00"):
        with pytest.raises(ImportRejected, match="not a valid OTLP protobuf ExportTraceServiceRequest"):
            LazyRequest(bad)
    good = synthetic_request(2, repeat_every=0)
    raw = good.SerializeToString()
    span = good.resource_spans[0].scope_spans[0].spans[0].SerializeToString()
    broken = raw.replace(span, b"\x0f" + span[1:], 1)  # its first tag now has wire type 7: no protobuf
    rejected: list[str] = []
    spans = list(LazyRequest(broken).spans(Where(), rejected=rejected))
    assert len(spans) == 5 and len(rejected) == 1
    assert rejected[0].startswith("field 'resourceSpans[0].scopeSpans[0].spans[0]': not a valid protobuf Span")
