"""Settling reads one row per staged trace (`stagedtrace`), kept by staging: owner, root, newest span, span count."""

from __future__ import annotations

import sqlite3

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from sqlalchemy import text
from sqlmodel import Session, select
from test_receiver import new_token, post, staged
from trace_helpers import synthetic_request, trace_id_of

from calibrate.db import dispose_engine, get_engine
from calibrate.ingest.traces.staging import ROOTLESS_MAX_AGE, drop_rootless, production_source, settle
from calibrate.migrations import current_revision, head_revision, upgrade
from calibrate.models import Dataset, IngestToken, Sample, StagedTrace


def request_of(spans) -> bytes:
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=list(spans))])]).SerializeToString()


def token_ids(engine) -> list[int]:
    with Session(engine) as session:
        return list(session.exec(select(IngestToken.id).order_by(IngestToken.id)))


def traces(engine) -> dict[str, tuple]:
    with Session(engine) as session:
        return {row.trace_id: (row.token_id, row.has_root, row.n_spans, row.last_received_at)
                for row in session.exec(select(StagedTrace))}


def test_the_trace_row_follows_its_spans_and_the_root_spans_token_owns_it(runner, engine, client):
    early, rooted = new_token(runner, "prod"), new_token(runner, "prod")  # two tokens of one dataset
    spans = synthetic_request(2, repeat_every=0).resource_spans[0].scope_spans[0].spans  # root, retriever, llm per trace
    first, second = trace_id_of(0), trace_id_of(1)
    assert post(client, early, request_of(spans[1:3])).status_code == 200  # trace 0's children, through the other token
    tokens = token_ids(engine)
    row = traces(engine)[first]
    assert (row[0], row[1], row[2]) == (tokens[0], False, 2)
    assert settle(engine, settle_s=0).traces == 0  # no root: not ready
    assert post(client, rooted, request_of([spans[0], spans[2], spans[4]])).status_code == 200  # root; a repeat; trace 1
    rows = traces(engine)
    owner = tokens[1]
    assert (rows[first][0], rows[first][1], rows[first][2]) == (owner, True, 3)  # the repeated span is not counted
    assert rows[first][3] >= row[3] and (rows[second][1], rows[second][2]) == (False, 1)
    another_root = type(spans[0])()
    another_root.CopyFrom(spans[0])
    another_root.span_id = b"\x01" * 8
    assert post(client, early, request_of([another_root])).status_code == 200  # a second root changes no owner
    assert traces(engine)[first][:3] == (owner, True, 4)
    with Session(engine) as session:
        assert production_source(session, session.exec(select(Dataset).where(Dataset.name == "prod")).one())[
            "staged_spans"] == 5
    done = settle(engine, settle_s=0)
    assert (done.traces, done.created) == (1, 1) and list(traces(engine)) == [second] and staged(engine) == 1
    with Session(engine) as session:  # it became a sample of the tokens' dataset
        assert session.exec(select(Dataset.name).join(Sample, Sample.dataset_id == Dataset.id)).all() == ["prod"]
    dropped = drop_rootless(engine, now=rows[second][3] + ROOTLESS_MAX_AGE + 1)
    assert (dropped.dropped_traces, dropped.dropped_spans) == (1, 1) and traces(engine) == {} and staged(engine) == 0
    with Session(engine) as session:
        assert session.get(IngestToken, owner).traces_dropped == 1


def test_the_oldest_ready_traces_settle_first_a_batch_at_a_time(runner, engine, client):
    token = new_token(runner, "prod")
    request = synthetic_request(7, repeat_every=0)
    spans = request.resource_spans[0].scope_spans[0].spans
    for n in reversed(range(7)):  # trace 6 arrives first
        assert post(client, token, request_of(spans[3 * n:3 * n + 3])).status_code == 200
    arrival = sorted(traces(engine).items(), key=lambda item: (item[1][3], item[0]))
    done = settle(engine, settle_s=0, batch=3, now=arrival[2][1][3])  # only the three oldest are quiet by then
    assert done.traces == 3 and set(traces(engine)) == {trace_id for trace_id, _ in arrival[3:]}
    assert settle(engine, settle_s=0, batch=3).traces == 4 and traces(engine) == {}


def test_the_revision_makes_a_row_for_each_trace_staged_before_it(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    engine = get_engine(url)
    try:
        upgrade(engine, "0016")
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO dataset (id, name, description, source, is_demo, created_at) VALUES "
                              "(1, 'd', '', '', 0, '2026-01-01'), (2, 'e', '', '', 0, '2026-01-01')"))
            conn.execute(text("INSERT INTO ingesttoken (id, token_hash, dataset_id, rate, salt, created_at, spans_received, "
                              "spans_repeated, spans_rejected, traces_settled, traces_sampled, traces_sampled_down, "
                              "traces_dropped, spans_dropped, skipped) VALUES (1, 'a', 1, 1, 's', '2026-01-01', 0, 0, 0, 0, 0, "
                              "0, 0, 0, '{}'), (2, 'b', 2, 1, 's', '2026-01-01', 0, 0, 0, 0, 0, 0, 0, 0, '{}')"))
            for span_id, (token, trace, root, at) in enumerate([(1, "t1", 0, 5.0), (2, "t1", 1, 7.0), (1, "t1", 1, 6.0),
                                                                (1, "t2", 0, 3.0)]):
                conn.execute(text("INSERT INTO stagedspan (token_id, trace_id, span_id, is_root, received_at, span) "
                                  "VALUES (:t, :trace, :s, :root, :at, '{}')"),
                             {"t": token, "trace": trace, "s": str(span_id), "root": root, "at": at})
        upgrade(engine, "0018")
        rows = sqlite3.connect(tmp_path / "old.sqlite").execute(
            "SELECT trace_id, token_id, has_root, last_received_at, n_spans FROM stagedtrace ORDER BY trace_id").fetchall()
        assert rows == [("t1", 2, 1, 7.0, 3), ("t2", 1, 0, 3.0, 1)]  # the first root's token owns t1
        counters = sqlite3.connect(tmp_path / "old.sqlite").execute(
            "SELECT feedback_received, feedback_late, feedback_dropped FROM ingesttoken").fetchall()
        assert counters == [(0, 0, 0), (0, 0, 0)]
        # 0019: a trace is a dataset's own. t1's spans came with the tokens of two datasets: two traces now.
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        db = sqlite3.connect(tmp_path / "old.sqlite")
        rows = db.execute("SELECT dataset_id, trace_id, token_id, has_root, last_received_at, n_spans, quarantined "
                          "FROM stagedtrace ORDER BY dataset_id, trace_id").fetchall()
        assert rows == [(1, "t1", 1, 1, 6.0, 2, 0), (1, "t2", 1, 0, 3.0, 1, 0), (2, "t1", 2, 1, 7.0, 1, 0)]
        assert db.execute("SELECT dataset_id, count(*) FROM stagedspan GROUP BY dataset_id").fetchall() == [(1, 3), (2, 1)]
    finally:
        dispose_engine(url)
