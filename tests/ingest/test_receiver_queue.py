"""The receiver under several exporters (issue 34): concurrent requests wait in a bounded queue, their chunks are
written together in one transaction (views/otlp.py, GroupCommit), a request is answered only once its spans are
committed, and 503 is kept for a full queue. No wall-clock asserts: the tests hold the writer lock to make
requests wait, and watch the queue's state to know where each one is."""

from __future__ import annotations

import threading
import time

import pytest
from sqlmodel import Session, select
from test_receiver import new_token, post, staged, token_row
from trace_helpers import synthetic_request

from calibrate import create_app
from calibrate.db import writer_lock
from calibrate.models import StagedSpan
from calibrate.views import otlp
from calibrate.views.otlp import GroupCommit


def wait_for(condition, what: str) -> None:
    """Poll `condition` until it holds (a hang guard of 60 s, never a measured time)."""
    deadline = time.monotonic() + 60
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        time.sleep(0.005)


# --------------------------------------------------------------------------- GroupCommit alone


class Transactions:
    """A `write` that records each transaction's results, and can be held at its start until released."""

    def __init__(self) -> None:
        self.groups: list[list] = []
        self.hold = threading.Event()
        self.hold.set()
        self.entered = threading.Event()

    def __call__(self, group_action):
        self.entered.set()
        self.hold.wait()
        results = group_action("session")
        self.groups.append(results)
        return results


def test_chunks_queued_while_a_transaction_runs_are_written_together_in_order():
    commit, write = GroupCommit(max_chunks=4), Transactions()
    write.hold.clear()
    results: dict[int, object] = {}

    def send(n: int) -> None:
        results[n] = commit.run(write, lambda session, n=n: (n, session))

    first = threading.Thread(target=send, args=(0,))
    first.start()
    write.entered.wait()  # the first chunk's transaction has begun (and waits)
    others = [threading.Thread(target=send, args=(n,)) for n in (1, 2, 3, 4, 5)]
    for n, thread in enumerate(others, 1):
        thread.start()
        wait_for(lambda n=n: commit.state() == (True, n), f"{n} chunks queued")
    write.hold.set()
    for thread in (first, *others):
        thread.join()
    # One transaction for the first; then the five queued, four at most a transaction, in arrival order.
    assert [[n for n, _ in group] for group in write.groups] == [[0], [1, 2, 3, 4], [5]]
    assert results == {n: (n, "session") for n in range(6)} and commit.state() == (False, 0)


def test_a_chunk_that_fails_fails_its_own_request_only():
    commit, write = GroupCommit(max_chunks=4), Transactions()
    write.hold.clear()
    outcome: dict[int, object] = {}

    def action(n: int):
        def run(session):
            if n == 2:
                raise ValueError("bad chunk")
            return n
        return run

    def send(n: int) -> None:
        try:
            outcome[n] = commit.run(write, action(n))
        except ValueError as exc:
            outcome[n] = exc

    threads = [threading.Thread(target=send, args=(n,)) for n in range(4)]
    threads[0].start()
    write.entered.wait()
    for n, thread in enumerate(threads[1:], 1):
        thread.start()
        wait_for(lambda n=n: commit.state()[1] == n, f"{n} chunks queued")
    write.hold.set()
    for thread in threads:
        thread.join()
    assert outcome[0] == 0 and outcome[1] == 1 and outcome[3] == 3 and str(outcome[2]) == "bad chunk"
    # The group [1, 2, 3] failed as a whole and was written again one chunk a transaction: 2's failure is 2's own.
    assert write.groups == [[0], [1], [3]] and commit.state() == (False, 0)


# --------------------------------------------------------------------------- through the receiver


@pytest.fixture
def receiver(db_url, tmp_path):
    def make(**config):
        return create_app({"TESTING": True, "DATABASE_URL": db_url, "INSTANCE_PATH": str(tmp_path / "i"), "SECRET_KEY": "t",
                           **config})
    return make


def test_requests_wait_in_the_queue_and_a_full_queue_is_503(runner, engine, receiver, db_url):
    """TRACES_MAX_CONCURRENT 2: one request being written (the writer lock held by the test), one waiting in the queue;
    a third is 503 with Retry-After: 1 and writes nothing; once the lock is free both waiting requests are 200, stored."""
    app = receiver(TRACES_MAX_CONCURRENT=2)
    token = new_token(runner, "prod")
    bodies = [synthetic_request(3, repeat_every=0, seed=f"q{n}").SerializeToString() for n in range(3)]
    answers: dict[int, int] = {}

    def send(n: int) -> None:
        answers[n] = post(app.test_client(), token, bodies[n]).status_code

    lock = writer_lock(db_url)
    with lock:
        first = threading.Thread(target=send, args=(0,))
        first.start()
        wait_for(lambda: "calibrate.otlp.commit" in app.extensions
                 and app.extensions["calibrate.otlp.commit"].state() == (True, 0), "the first request leads, waiting for the lock")
        commit = app.extensions["calibrate.otlp.commit"]
        second = threading.Thread(target=send, args=(1,))
        second.start()
        wait_for(lambda: commit.state() == (True, 1), "the second request queued")
        refused = post(app.test_client(), token, bodies[2])
        assert (refused.status_code, refused.headers["Retry-After"]) == (503, "1")
        assert b"export requests are being stored or waiting to be already; retry" in refused.data  # a protobuf Status
        assert staged(engine) == 0 and answers == {}  # nothing acknowledged before it is stored
    first.join()
    second.join()
    assert answers == {0: 200, 1: 200} and staged(engine) == 18
    assert post(app.test_client(), token, bodies[2]).status_code == 200 and staged(engine) == 27


def test_concurrent_exporters_lose_and_duplicate_no_span(runner, engine, receiver, monkeypatch):
    """Six exporters at once, their requests overlapping (every span also sent by another exporter, some twice in one
    request): every span is stored once, the token counts each span sent as new or repeated, and the requests queued
    behind the lock were written together (fewer transactions than chunks)."""
    app = receiver(TRACES_MAX_CONCURRENT=8)
    token = new_token(runner, "prod")
    requests = [synthetic_request(40, repeat_every=7, seed=f"e{n // 2}") for n in range(6)]  # pairs send the same traces
    sent = sum(sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans) for request in requests)
    transactions: list[int] = []
    real_write = otlp.write

    def counted(action, **kwargs):
        transactions.append(1)
        return real_write(action, **kwargs)

    monkeypatch.setattr(otlp, "write", counted)
    answers: list[int] = []
    lock = threading.Lock()

    def send(n: int) -> None:
        status = post(app.test_client(), token, requests[n].SerializeToString()).status_code
        with lock:
            answers.append(status)

    threads = [threading.Thread(target=send, args=(n,)) for n in range(6)]
    with writer_lock(engine.url.render_as_string(hide_password=False)):
        for thread in threads:
            thread.start()
        wait_for(lambda: "calibrate.otlp.commit" in app.extensions
                 and app.extensions["calibrate.otlp.commit"].state() == (True, 5), "one leading, five queued")
    for thread in threads:
        thread.join()
    assert answers == [200] * 6
    unique = 3 * 40 * 3  # three distinct sets of 40 traces of 3 spans
    with Session(engine) as session:
        keys = session.exec(select(StagedSpan.trace_id, StagedSpan.span_id)).all()
    assert len(keys) == len(set(keys)) == unique == staged(engine)
    row = token_row(engine)
    assert (row.spans_received, row.spans_received + row.spans_repeated) == (unique, sent)
    assert len(transactions) == 3  # the leader's own chunk; then the five queued ones, four and one
