"""No span that stops settling (issue 30, finding 2): a trace that cannot be mapped is set aside, never holds others back.

The red team staged a span whose startTimeUnixNano was 1e22 (year 318857): every settling batch
then failed (`ValueError: year 318857 is out of range`, 58 times in 58 s), 0 of another tenant's
5 traces settled until the row was deleted by hand, and `traces flush` / `traces import` of such a
file ended in a traceback. Now the receiver refuses such a span (partialSuccess), settling
quarantines a trace it cannot map (with its reason, on the dataset page, dropped after a day),
and the file import names it and goes on.
"""

from __future__ import annotations

import http.client
import json
import time

import pytest
from bs4 import BeautifulSoup
from sqlmodel import Session, select
from test_receiver import JSON, new_token, post, token_row
from test_traces import samples_of
from trace_helpers import collector_json, synthetic_request, trace_id_of

from calibrate.ingest.traces import staging
from calibrate.ingest.traces.staging import ROOTLESS_MAX_AGE, drop_rootless, settle, span_json
from calibrate.models import Dataset, IngestToken, StagedSpan, StagedTrace

POISON = 10**22  # startTimeUnixNano of the red team's span: year 318857


def stage_directly(engine, dataset: str, spans, *, received_at: float | None = None) -> None:
    """Stage spans as a receiver before this fix did (no check of their start time), for `dataset`'s first token."""
    received_at = time.time() - 60 if received_at is None else received_at
    with Session(engine) as session:
        token = session.exec(select(IngestToken).join(Dataset, Dataset.id == IngestToken.dataset_id)
                             .where(Dataset.name == dataset)).first()
        traces: dict[str, list] = {}
        for span in spans:
            session.add(StagedSpan(dataset_id=token.dataset_id, token_id=token.id, trace_id=span.trace_id,
                                   span_id=span.span_id, is_root=not span.parent_id, received_at=received_at,
                                   span=span_json(span)))
            traces.setdefault(span.trace_id, []).append(span)
        for trace_id, members in traces.items():
            session.add(StagedTrace(dataset_id=token.dataset_id, trace_id=trace_id, token_id=token.id,
                                    has_root=any(not s.parent_id for s in members), last_received_at=received_at,
                                    n_spans=len(members)))
        session.commit()


def poisoned_spans(n: int = 1, seed: str = "poison"):
    """Synthetic traces whose root span starts at 1e22 ns."""
    from dataclasses import replace

    from calibrate.ingest.traces.decode import spans_of_protobuf

    spans = spans_of_protobuf(synthetic_request(n, repeat_every=0, seed=seed).SerializeToString())
    return [replace(span, start_ns=POISON) if not span.parent_id else span for span in spans]


def quarantined(engine) -> dict[str, str]:
    with Session(engine) as session:
        return {row.trace_id: row.quarantine_reason for row in session.exec(select(StagedTrace).where(StagedTrace.quarantined))}


@pytest.mark.slow
def test_a_poisoned_trace_and_five_good_ones_of_another_token_the_five_settle_by_the_servers_own_settler(
        runner, engine, db_url, tmp_path):
    """The must-show: one poisoned trace staged for tenant A, five good ones POSTed with tenant B's token: the server's
    settler (no flush) makes the five samples and quarantines the poisoned one; the receiver refuses a new 1e22 span."""
    from server_helpers import launch_serve, wait_serving

    a, b = new_token(runner, "tenantA"), new_token(runner, "tenantB")
    stage_directly(engine, "tenantA", poisoned_spans())
    server, port = launch_serve(db_url, tmp_path, env={"CALIBRATE_TRACES_SETTLE_S": "0",
                                                      "CALIBRATE_TRACES_SETTLE_EVERY": "0.2"})
    try:
        wait_serving(server, port)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        good = synthetic_request(5, repeat_every=0, seed="good").SerializeToString()
        conn.request("POST", "/v1/traces", body=good, headers={"Content-Type": "application/x-protobuf",
                                                               "Authorization": f"Bearer {b}"})
        assert conn.getresponse().read() == b""  # an empty ExportTraceServiceResponse: every span taken
        # The same red-team span through the receiver now: refused alone, in partialSuccess.
        data = collector_json(synthetic_request(1, repeat_every=0, seed="again"))
        data["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["startTimeUnixNano"] = POISON
        conn.request("POST", "/v1/traces", body=json.dumps(data), headers={"Content-Type": JSON,
                                                                          "Authorization": f"Bearer {a}"})
        answer = json.loads(conn.getresponse().read())
        conn.close()
        assert answer["partialSuccess"]["rejectedSpans"] == "1"
        assert "startTimeUnixNano 10000000000000000000000 is out of range" in answer["partialSuccess"]["errorMessage"]
        deadline = time.monotonic() + 60  # a bound on the wait for the server's settler, not a measurement
        while len(samples_of(engine, "tenantB")) < 5 and time.monotonic() < deadline and server.poll() is None:
            time.sleep(0.1)
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    assert len(samples_of(engine, "tenantB")) == 5, output
    reasons = quarantined(engine)
    assert list(reasons) == [trace_id_of(0, "poison")] and "out of range" in reasons[trace_id_of(0, "poison")]
    assert "quarantined" in output  # logged once, with its reason; never the year-out-of-range traceback
    assert "year 318857 is out of range" not in output


def test_settling_quarantines_what_it_cannot_map_counts_it_and_drops_it_a_day_later(runner, engine, client, login):
    """Three poisoned traces and three good ones of one dataset: the good ones settle, the others are set aside
    with their reason, shown on the dataset page, never ready again, and dropped with the rootless ones after a day."""
    new_token(runner, "prod")
    spans = poisoned_spans(3)
    stage_directly(engine, "prod", spans)
    assert post(client, new_token(runner, "prod"), synthetic_request(3, repeat_every=0).SerializeToString()).status_code == 200
    done = settle(engine, settle_s=0)
    assert (done.traces, done.created, done.quarantined) == (3, 3, 3) and len(done.unmappable) == 3
    assert set(quarantined(engine)) == {trace_id_of(n, "poison") for n in range(3)}
    assert settle(engine, settle_s=0).traces == 0  # never ready again: nothing is tried twice
    login("eng", "engineer")
    page = BeautifulSoup(client.get("/datasets/prod").data, "html.parser")
    table = page.select_one("#production-quarantine")
    assert "3 traces quarantined" in table.caption.text
    assert len(table.select("tbody tr")) == 3 and "out of range" in table.select_one("tbody tr").text
    with Session(engine) as session:
        source = staging.production_source(session, session.exec(select(Dataset).where(Dataset.name == "prod")).one())
    assert (source["quarantined"], source["staged_traces"]) == (3, 0)
    last = time.time()
    assert drop_rootless(engine, now=last).dropped_traces == 0  # kept a day for a look
    dropped = drop_rootless(engine, now=last + ROOTLESS_MAX_AGE + 1)
    assert (dropped.dropped_traces, dropped.dropped_spans, dropped.skipped) == (3, 9, {"quarantined": 3})
    assert quarantined(engine) == {} and token_row(engine, "prod").skipped.get("quarantined") == 3


def test_traces_flush_names_a_trace_it_quarantines_and_settles_the_others(runner, engine):
    from calibrate.ingest.traces.decode import spans_of_protobuf

    new_token(runner, "prod")
    stage_directly(engine, "prod", poisoned_spans(2))
    stage_directly(engine, "prod", spans_of_protobuf(synthetic_request(2, repeat_every=0, seed="ok").SerializeToString()))
    result = runner.invoke(["traces", "flush", "--dataset", "prod"])
    assert result.exit_code == 0, result.output
    assert "2 created" in result.output
    named = [line for line in result.output.splitlines() if line.startswith("quarantined trace ")]
    assert sorted(line.split()[2].rstrip(":") for line in named) == sorted(trace_id_of(n, "poison") for n in range(2))
    assert all("out of range" in line for line in named)
    flushed = json.loads(runner.invoke(["traces", "flush", "--dataset", "prod", "--json"]).stdout)
    assert (flushed["traces"], flushed["quarantined"], flushed["unmappable"]) == (0, 0, {})


def test_traces_import_names_a_trace_it_cannot_map_and_imports_the_others(runner, engine, tmp_path):
    data = collector_json(synthetic_request(3, repeat_every=0))
    data["resourceSpans"][0]["scopeSpans"][0]["spans"][3]["startTimeUnixNano"] = str(POISON)[:20]  # trace 1's root
    data["resourceSpans"][0]["scopeSpans"][0]["spans"][6]["startTimeUnixNano"] = POISON  # trace 2's root, a JSON number
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    result = runner.invoke(["traces", "import", str(path), "--dataset", "file"])
    assert result.exit_code == 0, result.output
    assert "1 created" in result.output and "skipped 2: unmappable" in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("trace ")]
    assert [line.split()[1] for line in lines] == sorted([trace_id_of(1), trace_id_of(2)])
    assert "the root span's startTimeUnixNano 10000000000000000000000 is out of range" in result.output
    assert list(samples_of(engine, "file")) == [trace_id_of(0)]
    again = json.loads(runner.invoke(["traces", "import", str(path), "--dataset", "file", "--json"]).stdout)
    assert (again["unchanged"], sorted(again["unmappable"])) == (1, sorted([trace_id_of(1), trace_id_of(2)]))


def test_a_batch_that_fails_on_one_traces_data_settles_the_others_one_by_one(runner, engine, client, monkeypatch):
    """Whatever fails in the import of a batch (not the database): the traces are taken one by one, the one that fails
    is quarantined with what failed, the others settle in the same transaction."""
    from calibrate.ingest.traces import importer

    token = new_token(runner, "prod")
    assert post(client, token, synthetic_request(4, repeat_every=0).SerializeToString()).status_code == 200
    real = importer.acceptable

    def breaks_on_question_2(record, max_field_chars):
        if record["question"] == "Question 2?":
            raise RuntimeError("a record this import cannot take")
        return real(record, max_field_chars)

    monkeypatch.setattr(importer, "acceptable", breaks_on_question_2)
    done = settle(engine, settle_s=0)
    assert (done.traces, done.created, done.quarantined) == (3, 3, 1)
    assert quarantined(engine) == {trace_id_of(2): "RuntimeError: a record this import cannot take"}
    assert sorted(samples_of(engine, "prod")) == sorted(trace_id_of(n) for n in (0, 1, 3))


def test_a_staged_row_that_cannot_be_read_is_quarantined(runner, engine, client):
    token = new_token(runner, "prod")
    assert post(client, token, synthetic_request(2, repeat_every=0).SerializeToString()).status_code == 200
    with Session(engine) as session:
        row = session.exec(select(StagedSpan).where(StagedSpan.trace_id == trace_id_of(1))).first()
        row.span = '{"parent": "", "name": "x"'
        session.add(row)
        session.commit()
    done = settle(engine, settle_s=0)
    assert (done.created, done.quarantined) == (1, 1)
    assert "cannot be read (JSONDecodeError" in quarantined(engine)[trace_id_of(1)]
