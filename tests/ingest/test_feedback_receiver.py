"""POST /v1/feedback (issue 23): thumbs up/down through the receiver, used when the trace settles as --feedback is."""

from __future__ import annotations

import gzip
import http.client
import json

import pytest
from sqlmodel import Session, select
from test_receiver import new_token, post, split, staged, token_row
from test_traces import samples_of
from trace_helpers import synthetic_request, trace_id_of

from calibrate import create_app
from calibrate.ingest.traces import import_traces
from calibrate.ingest.traces.importer import inclusion_u
from calibrate.ingest.traces.staging import ROOTLESS_MAX_AGE, drop_rootless
from calibrate.models import Dataset, Sample, StagedFeedback

PROTO, JSON = "application/x-protobuf", "application/json"


def send(port: int, path: str, token: str, body: bytes, kind: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", path, body=body, headers={"Content-Type": kind, "Authorization": f"Bearer {token}"})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, data


def staged_feedback(engine) -> dict[str, int]:
    with Session(engine) as session:
        return {row.trace_id: row.value for row in session.exec(select(StagedFeedback))}


@pytest.mark.slow
def test_feedback_before_or_after_the_spans_gives_the_samples_the_file_import_gives(runner, engine, db_url, tmp_path):
    """A real `calibrate serve --role traces`: feedback for some traces before their spans, for others after (not yet
    settled), as one object, a JSON array and JSON lines; the flush gives what `traces import --feedback` gives."""
    from server_helpers import launch_serve, wait_serving

    n, rate = 60, 0.2
    request = synthetic_request(n, repeat_every=0)
    down = [trace_id_of(i) for i in range(0, n, 7)]
    up = [trace_id_of(i) for i in range(3, n, 11) if i % 7]
    records = [{"trace_id": t, "value": "down"} for t in down] + [{"trace_id": t.upper(), "value": 1} for t in up]
    assert any(inclusion_u("s", t) >= rate for t in down)  # some thumbs-down traces are taken for their feedback alone
    token = new_token(runner, "recv", "--rate", str(rate), "--salt", "s")
    server, port = launch_serve(db_url, tmp_path, "--role", "traces", env={"CALIBRATE_TRACES_SETTLE_S": "3600"})
    try:
        wait_serving(server, port)
        first, rest = records[:5], records[5:]
        status, data = send(port, "/v1/feedback", token, json.dumps(first[0]).encode(), JSON)  # one object
        assert (status, json.loads(data)) == (200, {"feedback": 1, "staged": 1, "late": 0})
        assert send(port, "/v1/feedback", token, json.dumps(first[1:]).encode(), JSON)[0] == 200  # an array
        for part in split(request, 4):
            assert send(port, "/v1/traces", token, part.SerializeToString(), PROTO)[0] == 200
        lines = "\n".join(json.dumps(record) for record in rest).encode()
        status, data = send(port, "/v1/feedback", token, lines, "application/x-ndjson")  # JSON lines, after the spans
        assert (status, json.loads(data)["staged"]) == (200, len(rest))
    finally:
        server.terminate()
        server.communicate(timeout=30)
    assert len(staged_feedback(engine)) == len(down) + len(up) and staged(engine) == 3 * n
    flushed = runner.invoke(["traces", "flush", "--dataset", "recv", "--json"])
    assert flushed.exit_code == 0, flushed.output
    result = json.loads(flushed.stdout)
    path, feedback = tmp_path / "traces.pb", tmp_path / "feedback.jsonl"
    path.write_bytes(request.SerializeToString())
    feedback.write_text("".join(json.dumps(record) + "\n" for record in records))
    summary = import_traces(engine, [path], dataset="file", feedback=feedback, rate=rate, salt="s")
    assert (result["sampled"], result["sampled_down"], result["created"]) == (
        summary.sampled, summary.sampled_down, summary.created)
    assert summary.sampled_down == len(down) and staged_feedback(engine) == {}  # used, and deleted with the spans
    assert samples_of(engine, "recv") == samples_of(engine, "file")
    assert {t: s["metadata"]["inclusion_prob"] for t, s in samples_of(engine, "recv").items() if t in down} == dict.fromkeys(down, 1.0)
    assert token_row(engine, "recv").feedback_received == len(records)


def test_late_feedback_changes_the_samples_feedback_never_its_inclusion_probability(runner, engine, client):
    token = new_token(runner, "prod", "--rate", "0.5", "--salt", "s")
    request = synthetic_request(20, repeat_every=0)
    assert post(client, token, request.SerializeToString()).status_code == 200
    assert json.loads(runner.invoke(["traces", "flush", "--dataset", "prod", "--json"]).stdout)["traces"] == 20
    taken = sorted(samples_of(engine, "prod"))
    passed = sorted({trace_id_of(i) for i in range(20)} - set(taken))
    assert taken and passed
    never = "ab" * 16
    body = json.dumps([{"trace_id": taken[0], "value": "down"}, {"trace_id": passed[0], "value": "down"},
                       {"trace_id": never, "value": "up"}]).encode()
    response = post(client, token, body, JSON, path="/v1/feedback")
    assert (response.status_code, response.get_json()) == (200, {"feedback": 3, "staged": 2, "late": 1})
    sample = samples_of(engine, "prod")[taken[0]]
    assert (sample["feedback"], sample["metadata"]["inclusion_prob"]) == (-1, 0.5)  # drawn by u: the weight stays 1/0.5
    assert set(staged_feedback(engine)) == {passed[0], never}  # not a sample: kept a while, in case its trace comes
    row = token_row(engine, "prod")
    assert (row.feedback_received, row.feedback_late, row.feedback_dropped) == (3, 1, 0)
    with Session(engine) as session:
        stamp = session.exec(select(StagedFeedback.received_at)).first()
    assert drop_rootless(engine, now=stamp + ROOTLESS_MAX_AGE - 60).dropped_feedback == 0
    dropped = drop_rootless(engine, now=stamp + ROOTLESS_MAX_AGE + 60)
    assert dropped.dropped_feedback == 2 and staged_feedback(engine) == {}
    assert token_row(engine, "prod").feedback_dropped == 2
    with Session(engine) as session:  # the passed trace did not become a sample through its late thumbs-down
        assert sorted(session.exec(select(Sample.external_id).join(Dataset, Dataset.id == Sample.dataset_id)
                                   .where(Dataset.name == "prod")).all()) == taken


def test_bad_feedback_is_refused_naming_the_line_and_field_and_nothing_is_stored(runner, engine, tmp_path, db_url):
    app = create_app({"TESTING": True, "DATABASE_URL": db_url, "INSTANCE_PATH": str(tmp_path / "i"), "SECRET_KEY": "t",
                      "TRACES_MAX_BODY": 2_000})
    client = app.test_client()
    token = new_token(runner, "prod")
    good = {"trace_id": trace_id_of(1), "value": "down"}

    def feedback(body, kind=JSON, token=token, **headers):
        return post(client, token, body, kind, path="/v1/feedback", **headers)

    lines = (json.dumps(good) + "\n" + json.dumps({"trace_id": trace_id_of(2), "value": "meh"}) + "\n").encode()
    response = feedback(lines, "application/jsonl")
    assert response.status_code == 400 and response.get_json()["message"].startswith("line 2, field 'value': must be")
    response = feedback(json.dumps([good, {"value": "down"}]).encode())
    assert response.status_code == 400 and response.get_json()["message"] == "field 'trace_id': item 2: must be a trace id string"
    assert feedback(b"{\"trace_id\": ").status_code == 400
    # a trace id no OTLP span can have is refused at once (it could only wait a day and be dropped), naming trace_id
    for bad in ("my-trace-1", "ab" * 15, "0" * 32, "g" * 32, "00000000-0000-0000-0000-000000000000", trace_id_of(1) + "0"):
        response = feedback(json.dumps([good, {"trace_id": bad, "value": "down"}]).encode())
        assert response.status_code == 400, bad
        assert response.get_json()["message"].startswith("field 'trace_id': item 2: must be an OTLP trace id, 32 hex digits")
    lines = (json.dumps(good) + "\n" + json.dumps({"trace_id": "req-42", "value": "up"}) + "\n").encode()
    assert feedback(lines, "application/x-ndjson").get_json()["message"].startswith("line 2, field 'trace_id': must be an")
    assert feedback(b"[]").status_code == 400 and feedback(b"7").status_code == 400
    assert feedback(json.dumps(good).encode(), token="calt_nope").status_code == 401
    assert feedback(json.dumps(good).encode(), PROTO).status_code == 415
    assert feedback(json.dumps([good] * 100).encode()).status_code == 413
    assert feedback(gzip.compress(json.dumps([good] * 100).encode()), **{"Content-Encoding": "gzip"}).status_code == 413
    assert staged_feedback(engine) == {} and token_row(engine).feedback_received == 0
    ok = feedback(gzip.compress(json.dumps(good).encode()), **{"Content-Encoding": "gzip"})
    assert ok.status_code == 200 and staged_feedback(engine) == {trace_id_of(1): -1}
    uuid = trace_id_of(3)
    dashed = f"{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:]}".upper()
    assert feedback(json.dumps({"trace_id": dashed, "value": "up"}).encode()).status_code == 200  # a UUID's form: taken
    assert staged_feedback(engine)[uuid] == 1
