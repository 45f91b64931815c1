"""The OTLP/HTTP receiver (issue 23): POST /v1/traces stages spans; settled traces become the samples a file gives."""

from __future__ import annotations

import gzip
import json
import time

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from sqlmodel import Session, func, select
from test_traces import samples_of
from trace_helpers import collector_json, synthetic_request, trace_id_of

from calibrate import create_app
from calibrate.ingest.traces import import_traces
from calibrate.ingest.traces.staging import ROOTLESS_MAX_AGE, drop_rootless, hash_token, settle
from calibrate.models import Dataset, IngestToken, Sample, StagedSpan

PROTO, JSON = "application/x-protobuf", "application/json"


def new_token(runner, dataset="prod", *args) -> str:
    result = runner.invoke(["traces", "token", "--dataset", dataset, *args])
    assert result.exit_code == 0, result.output
    token = result.stdout.strip().splitlines()[0]
    assert token.startswith("calt_") and len(token) > 40
    return token


def post(client, token, body, kind=PROTO, path="/v1/traces", **headers):
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return client.post(path, data=body, headers={"Content-Type": kind, **headers})


def split(request: ExportTraceServiceRequest, parts: int) -> list[ExportTraceServiceRequest]:
    """Return the request's spans spread over `parts` requests, in order (a trace's spans land in different requests)."""
    spans = [(rs.resource, span) for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]
    size = -(-len(spans) // parts)
    out = []
    for start in range(0, len(spans), size):
        part = ExportTraceServiceRequest()
        for resource, span in spans[start:start + size]:
            part.resource_spans.append(ResourceSpans(resource=resource, scope_spans=[ScopeSpans(spans=[span])]))
        out.append(part)
    return out


def staged(engine) -> int:
    with Session(engine) as session:
        return session.exec(select(func.count(StagedSpan.id))).one()


def token_row(engine, dataset="prod") -> IngestToken:
    with Session(engine) as session:
        return session.exec(select(IngestToken).join(Dataset, Dataset.id == IngestToken.dataset_id)
                            .where(Dataset.name == dataset)).first()


def test_tokens_are_shown_once_stored_hashed_listed_and_revoked(runner, engine, client):
    token = new_token(runner, "prod", "--rate", "0.25", "--salt", "pepper")
    row = token_row(engine)
    assert row.token_hash == hash_token(token) and token not in json.dumps(row.model_dump(mode="json"))
    assert (row.rate, row.salt) == (0.25, "pepper")
    with Session(engine) as session:  # the dataset was created, empty
        assert session.exec(select(Dataset).where(Dataset.name == "prod")).one().source == "otlp-http"
    listed = json.loads(runner.invoke(["traces", "tokens", "--json"]).stdout)
    assert listed == [{"id": row.id, "dataset": "prod", "rate": 0.25, "salt": "pepper", "sessions": False,
                       "created": listed[0]["created"],
                       "last_used": None, "revoked": None}]
    body = synthetic_request(2, repeat_every=0).SerializeToString()
    assert post(client, token, body).status_code == 200
    assert json.loads(runner.invoke(["traces", "tokens", "--json"]).stdout)[0]["last_used"] is not None
    assert runner.invoke(["traces", "revoke", str(row.id)]).exit_code == 0
    response = post(client, token, body)
    assert response.status_code == 401 and response.mimetype == PROTO
    assert json.loads(runner.invoke(["traces", "tokens", "--json"]).stdout)[0]["revoked"] is not None
    unknown = runner.invoke(["traces", "revoke", "999"])
    assert unknown.exit_code == 2 and "unknown token id 999" in unknown.output
    # The default salt is random (32 hex digits), stored with the token: never the dataset's public name.
    new_token(runner, "other")
    new_token(runner, "other")
    with Session(engine) as session:
        salts = list(session.exec(select(IngestToken.salt).join(Dataset, Dataset.id == IngestToken.dataset_id)
                                  .where(Dataset.name == "other")))
    assert len(salts) == 2 and salts[0] != salts[1] and all(len(salt) == 32 and salt != "other" for salt in salts)
    # A rate under the floor of metadata.inclusion_prob (1e-6) is refused, naming the option; nothing is made.
    for rate in ("0", "1e-7"):
        refused = runner.invoke(["traces", "token", "--dataset", "zero", "--rate", rate])
        assert refused.exit_code == 2 and "--rate" in refused.output and "1e-06<=x<=1.0" in refused.output
    with Session(engine) as session:
        assert session.exec(select(Dataset).where(Dataset.name == "zero")).first() is None


def test_spans_posted_in_20_requests_become_the_samples_the_file_gives(runner, engine, client, tmp_path):
    n = 300
    request = synthetic_request(n, repeat_every=20)  # 5 % of spans sent twice
    token = new_token(runner, "recv", "--rate", "0.3", "--salt", "s")
    parts = split(request, 20)
    assert len(parts) == 20
    for i, part in enumerate(parts):
        if i % 3 == 0:  # OTLP/JSON, as an exporter configured for http/json sends it
            response = post(client, token, json.dumps(collector_json(part)).encode(), JSON)
            assert response.mimetype == JSON and json.loads(response.data) == {}
        elif i % 3 == 1:  # gzip, as the SDK's exporter with compression=gzip
            response = post(client, token, gzip.compress(part.SerializeToString()), PROTO, **{"Content-Encoding": "gzip"})
        else:
            response = post(client, token, part.SerializeToString())
        assert response.status_code == 200, response.data
        if response.mimetype == PROTO:
            assert ExportTraceServiceResponse.FromString(response.data) == ExportTraceServiceResponse()
    assert staged(engine) == 3 * n
    row = token_row(engine, "recv")
    assert (row.spans_received, row.spans_repeated) == (3 * n, len(range(0, 3 * n, 20)))
    # Nothing settles before the traces are quiet for TRACES_SETTLE_S.
    assert settle(engine, settle_s=30).traces == 0 and staged(engine) == 3 * n
    flushed = runner.invoke(["traces", "flush", "--dataset", "recv", "--json"])
    assert flushed.exit_code == 0, flushed.output
    result = json.loads(flushed.stdout)
    path = tmp_path / "traces.pb"
    path.write_bytes(request.SerializeToString())
    summary = import_traces(engine, [path], dataset="file", rate=0.3, salt="s")
    assert (result["traces"], result["sampled"], result["created"]) == (n, summary.sampled, summary.created)
    assert summary.created > 50 and staged(engine) == 0
    assert samples_of(engine, "recv") == samples_of(engine, "file")
    # Posting everything again: staged again, settled again, and nothing changes.
    for part in parts:
        assert post(client, token, part.SerializeToString()).status_code == 200
    again = json.loads(runner.invoke(["traces", "flush", "--dataset", "recv", "--json"]).stdout)
    assert (again["created"], again["unchanged"]) == (0, summary.created)
    assert samples_of(engine, "recv") == samples_of(engine, "file")
    row = token_row(engine, "recv")
    assert (row.traces_settled, row.traces_sampled) == (2 * n, 2 * summary.sampled)


def test_refusals_write_nothing_and_answer_in_the_requests_content_type(runner, engine, tmp_path, db_url):
    app = create_app({"TESTING": True, "DATABASE_URL": db_url, "INSTANCE_PATH": str(tmp_path / "i"), "SECRET_KEY": "t",
                      "TRACES_MAX_BODY": 20_000})
    client = app.test_client()
    token = new_token(runner, "prod")
    good = synthetic_request(3, repeat_every=0)
    body = good.SerializeToString()
    cases = [
        (post(client, None, body), 401, PROTO),
        (post(client, "calt_wrong", body, JSON), 401, JSON),
        (client.post("/v1/traces", data=body, headers={"Content-Type": PROTO, "Authorization": f"Basic {token}"}), 401, PROTO),
        (post(client, token, body, "text/plain"), 415, JSON),
        (post(client, token, body, PROTO, **{"Content-Encoding": "br"}), 415, PROTO),
        (post(client, token, b"x" * 20_001), 413, PROTO),
        # A gzip bomb: 20 KB on the wire, 100 MB unpacked, stopped at the cap.
        (post(client, token, gzip.compress(b"\0" * 100_000_000), PROTO, **{"Content-Encoding": "gzip"}), 413, PROTO),
        (post(client, token, b"\xff\x01garbage"), 400, PROTO),
        (post(client, token, b"not gzip", PROTO, **{"Content-Encoding": "gzip"}), 400, PROTO),
        (post(client, token, b'{"resourceSpans": [', JSON), 400, JSON),
        (post(client, token, b'{"resourceSpans": {"no": "list"}}', JSON), 400, JSON),
    ]
    for i, (response, status, kind) in enumerate(cases):
        assert (response.status_code, response.mimetype) == (status, kind), (i, response.data)
        if kind == JSON:
            answer = json.loads(response.data)
            assert set(answer) == {"code", "message"} and answer["message"], i
        assert "Set-Cookie" not in response.headers
    assert cases[0][0].headers["WWW-Authenticate"].startswith("Bearer")
    assert "TRACES_MAX_BODY" in json.loads(post(client, token, b"x" * 20_001, JSON).data)["message"]
    assert "not valid JSON" in json.loads(cases[9][0].data)["message"]
    assert staged(engine) == 0
    row = token_row(engine)
    assert (row.spans_received, row.spans_repeated, row.spans_rejected, row.last_received_at) == (0, 0, 0, None)
    # Every slot busy (TRACES_MAX_CONCURRENT requests being stored): 503 with Retry-After, nothing read or written.
    import threading

    slots = app.extensions["calibrate.otlp.slots"] = threading.BoundedSemaphore(1)
    slots.acquire()
    busy = post(client, token, body)
    assert (busy.status_code, busy.headers["Retry-After"], busy.mimetype) == (503, "1", PROTO) and staged(engine) == 0
    slots.release()
    # No session and no CSRF token needed (any other POST without one is refused with 400).
    assert client.post("/login", data={"username": "x", "password": "y"}).status_code == 400
    assert post(client, token, body).status_code == 200 and staged(engine) == 9


def test_unusable_spans_are_refused_one_by_one_with_partial_success(runner, engine, client):
    token = new_token(runner, "prod")
    data = collector_json(synthetic_request(2, repeat_every=0))
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[1]["spanId"] = "00" * 8  # an all-zero id
    spans[4]["traceId"] = 42
    response = post(client, token, json.dumps(data).encode(), JSON)
    assert response.status_code == 200
    partial = json.loads(response.data)["partialSuccess"]
    assert int(partial["rejectedSpans"]) == 2 and "all zeros" in partial["errorMessage"]
    assert staged(engine) == 4 and token_row(engine).spans_rejected == 2
    proto = synthetic_request(1, repeat_every=0, seed="p")
    proto.resource_spans[0].scope_spans[0].spans[0].trace_id = b"short"
    proto.resource_spans[0].scope_spans[0].spans[1].attributes[0].value.array_value.values.add().kvlist_value.values.add(
        key="k").value.string_value = "fine"
    answer = ExportTraceServiceResponse.FromString(post(client, token, proto.SerializeToString()).data)
    assert answer.partial_success.rejected_spans == 1 and answer.partial_success.error_message


def test_a_trace_settles_when_quiet_with_its_root_and_rootless_ones_are_dropped_after_a_day(runner, engine, client):
    token = new_token(runner, "prod")
    request = synthetic_request(2, repeat_every=0)
    spans = request.resource_spans[0].scope_spans[0].spans
    rootless = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[spans[4], spans[5]])])])
    rooted = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans[:3])])])
    assert post(client, token, rooted.SerializeToString()).status_code == 200
    assert post(client, token, rootless.SerializeToString()).status_code == 200
    now = time.time()
    assert settle(engine, settle_s=30, now=now).traces == 0  # not quiet yet
    done = settle(engine, settle_s=30, now=now + 31)
    assert (done.traces, done.created) == (1, 1) and staged(engine) == 2  # the rootless trace waits
    with Session(engine) as session:
        assert session.exec(select(Sample.external_id)).all() == [trace_id_of(0)]
    assert drop_rootless(engine, now=now + ROOTLESS_MAX_AGE - 60).dropped_traces == 0
    dropped = drop_rootless(engine, now=now + ROOTLESS_MAX_AGE + 60)
    assert (dropped.dropped_traces, dropped.dropped_spans) == (1, 2) and staged(engine) == 0
    row = token_row(engine)
    assert (row.traces_settled, row.traces_dropped, row.spans_dropped, row.skipped) == (1, 1, 2, {"no_root_span": 1})


@pytest.mark.parametrize("locale", ["en", "es"])
def test_the_dataset_page_shows_the_production_source(runner, engine, client, login, locale):
    token = new_token(runner, "prod")
    request = synthetic_request(4, repeat_every=2)
    assert post(client, token, request.SerializeToString()).status_code == 200
    settle(engine, settle_s=0)
    assert post(client, token, synthetic_request(1, repeat_every=0, seed="late").SerializeToString()).status_code == 200
    feedback = [{"trace_id": trace_id_of(0), "value": "down"}, {"trace_id": "ab" * 16, "value": "up"}]
    assert post(client, token, json.dumps(feedback).encode(), JSON, path="/v1/feedback").status_code == 200
    login("eng", "engineer")
    from bs4 import BeautifulSoup

    page = client.get("/datasets/prod", headers={"Accept-Language": locale})
    assert page.status_code == 200
    soup = BeautifulSoup(page.data, "html.parser")
    section = soup.select_one("#production-source")
    figures = {td["data-key"]: td.get_text(" ", strip=True) for td in section.select("td[data-key]")}
    assert figures["traces_received"] == "4" and figures["sampled"] == "4"
    assert figures["staged"].startswith("1 ") and "3 " in figures["staged"]
    assert figures["down_share"].replace("\xa0", " ") in ("0.0%", "0,0 %")
    assert figures["last_received"]
    assert figures["feedback"].split(" · ") == (["2", "1 waiting", "1 late", "0 dropped"] if locale == "en" else
                                                ["2", "1 en espera", "1 tardías", "0 descartadas"])
    heading = section.select_one("h2").get_text(strip=True)
    assert heading == ("Production source" if locale == "en" else "Fuente de producción")


@pytest.mark.slow
def test_an_sdk_program_exporting_to_calibrate_serve_gives_the_samples_of_its_file(tmp_path, monkeypatch):
    """The real client: the OpenTelemetry SDK's OTLP/HTTP exporter (protobuf, gzip, batches) against `calibrate serve`
    with two worker processes, each with its settler thread; what settles equals the file import of the same spans."""
    import os
    import subprocess
    import sys

    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from server_helpers import start_workers
    from trace_helpers import rag_program

    from calibrate.db import get_engine

    url = f"sqlite:///{tmp_path / 'serve.sqlite'}"
    env = {**os.environ, "CALIBRATE_INSTANCE": str(tmp_path)}
    run = [sys.executable, "-m", "calibrate"]
    subprocess.run([*run, "init", "--db", url], check=True, env=env, capture_output=True)
    made = subprocess.run([*run, "traces", "token", "--dataset", "live", "--rate", "0.5", "--salt", "s", "--db", url],
                          check=True, env=env, capture_output=True, text=True)
    token = made.stdout.strip()
    monkeypatch.setenv("CALIBRATE_TRACES_SETTLE_S", "0")
    monkeypatch.setenv("CALIBRATE_TRACES_SETTLE_EVERY", "0.2")
    server, port, _, _ = start_workers(url, tmp_path, workers=2, threads=2)
    engine = get_engine(url)
    questions = [f"What does passage {i} say?" for i in range(40)]
    try:
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", headers={"Authorization": f"Bearer {token}"},
                                    compression=Compression.Gzip, timeout=10)
        request = rag_program(questions, processors=[BatchSpanProcessor(exporter, max_export_batch_size=7)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            row = token_row(engine, "live")
            if row.traces_settled >= len(questions) and staged(engine) == 0:
                break
            time.sleep(0.2)
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    row = token_row(engine, "live")
    assert (row.spans_received, row.spans_rejected) == (3 * len(questions), 0), output
    assert row.traces_settled == len(questions) and staged(engine) == 0  # each trace settled once, by one of the two
    path = tmp_path / "same-spans.pb"
    path.write_bytes(request.SerializeToString())
    summary = import_traces(engine, [path], dataset="file", rate=0.5, salt="s")
    assert row.traces_sampled == summary.sampled and summary.created > 5
    assert samples_of(engine, "live") == samples_of(engine, "file")


def test_a_token_for_an_invalid_dataset_name_or_rate_is_refused(runner, engine):
    bad = runner.invoke(["traces", "token", "--dataset", "../etc"])
    assert bad.exit_code == 2 and "invalid dataset name" in bad.output
    assert runner.invoke(["traces", "token", "--dataset", "d", "--rate", "2"]).exit_code == 2
    with Session(engine) as session:
        assert session.exec(select(func.count(IngestToken.id))).one() == 0


def test_protobuf_read_directly_gives_what_its_json_mapping_gives():
    """The receiver reads protobuf fields directly (spans_of_message); the file import read MessageToDict's dict before."""
    from google.protobuf import json_format
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList

    from calibrate.ingest.problems import ImportRejected
    from calibrate.ingest.traces.decode import Where, spans_of_message, spans_of_traces_data

    request = synthetic_request(3, repeat_every=2)
    span = request.resource_spans[0].scope_spans[0].spans[1]
    odd = {"bytes": AnyValue(bytes_value=b"\x00\xffraw"), "nan": AnyValue(double_value=float("nan")),
           "inf": AnyValue(double_value=float("-inf")), "zero": AnyValue(int_value=0), "big": AnyValue(int_value=2**62),
           "no": AnyValue(bool_value=False), "empty": AnyValue(string_value=""), "unset": AnyValue(),
           "list": AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=1), AnyValue(), AnyValue(string_value="x")])),
           "map": AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="a", value=AnyValue(double_value=0.5)),
                                                             KeyValue(key="b")]))}
    span.attributes.extend(KeyValue(key=key, value=value) for key, value in odd.items())
    span.attributes.append(KeyValue(key="no-value"))
    direct = spans_of_message(request, Where())
    assert direct == spans_of_traces_data(json_format.MessageToDict(request), Where())
    values = next(s for s in direct if s.span_id == span.span_id.hex()).attributes
    assert (values["bytes"], values["nan"], values["big"], values["list"], values["map"]) == (
        "AP9yYXc=", None, 2**62, [1, None, "x"], {"a": 0.5, "b": None})
    # Nested too deeply: refused alike, naming the same field.
    deep = AnyValue(string_value="bottom")
    for _ in range(10):
        deep = AnyValue(array_value=ArrayValue(values=[deep]))
    span.attributes.append(KeyValue(key="deep", value=deep))
    with pytest.raises(ImportRejected) as by_message:
        spans_of_message(request, Where())
    with pytest.raises(ImportRejected) as by_dict:
        spans_of_traces_data(json_format.MessageToDict(request), Where())
    assert str(by_message.value) == str(by_dict.value)


@pytest.mark.slow
def test_a_web_server_and_a_traces_server_share_one_database_each_in_its_role(runner, engine, db_url, tmp_path):
    """`calibrate serve --role web` has no receiver (404) and `--role traces` no pages (404, before any CSRF check);
    spans POSTed to the traces server settle there (its settler) into the shared database."""
    import http.client

    from server_helpers import launch_serve, request, session_cookie, wait_serving

    token = new_token(runner, "live")
    body = synthetic_request(6, repeat_every=1000).SerializeToString()

    def post_spans(port):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": PROTO, "Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        response.read()
        conn.close()
        return response.status

    quick = {"CALIBRATE_TRACES_SETTLE_S": "0", "CALIBRATE_TRACES_SETTLE_EVERY": "0.2"}
    (web, web_port), (traces, traces_port) = (launch_serve(db_url, tmp_path, "--role", role, env=quick)
                                              for role in ("web", "traces"))
    try:
        wait_serving(web, web_port)
        wait_serving(traces, traces_port)
        assert post_spans(web_port) == 404 and staged(engine) == 0
        response, page = request(web_port, "GET", "/login")
        assert response.status == 200 and 'name="csrf_token"' in page
        for method, path in (("GET", "/login"), ("GET", "/datasets"), ("POST", "/login"), ("GET", "/static/calibrate.css")):
            response, text = request(traces_port, method, path, body={} if method == "POST" else None)
            assert (response.status, json.loads(text)["code"]) == (404, 5), (method, path)
            assert session_cookie(response) == ""  # no session is started for a refused path
        assert post_spans(traces_port) == 200
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and token_row(engine, "live").traces_settled < 6:
            time.sleep(0.1)
    finally:
        for server in (web, traces):
            server.terminate()
        outputs = [server.communicate(timeout=30)[0] for server in (web, traces)]
    assert "no trace receiver" in outputs[0] and "trace receiver only" in outputs[1]
    row = token_row(engine, "live")
    assert (row.spans_received, row.traces_settled, staged(engine)) == (18, 6, 0), outputs[1]


def test_only_a_web_server_runs_no_settler(monkeypatch, tmp_path):
    """`serve_app` starts the settler for the roles `all` and `traces`, never for `web` (waitress itself stubbed out)."""
    import waitress

    from calibrate.cli import serve
    from calibrate.ingest.traces import staging

    started = []
    monkeypatch.setattr(waitress, "serve", lambda *args, **kwargs: None)
    monkeypatch.setattr(staging, "start_settler", lambda engine, settings: started.append(settings["SERVE_ROLE"]))
    for role in ("all", "web", "traces"):
        app = create_app({"DATABASE_URL": f"sqlite:///{tmp_path / 'roles.sqlite'}", "TESTING": True}, role=role)
        serve.serve_app(app, "127.0.0.1", 0)
    assert started == ["all", "traces"]
    with pytest.raises(ValueError, match="unknown server role"):
        create_app({"DATABASE_URL": f"sqlite:///{tmp_path / 'roles.sqlite'}", "TESTING": True}, role="both")
