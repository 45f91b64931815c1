"""One write path (docs/architecture.md, "Database"): every write of the web, the commands and the workers goes through
`db.write_session` (the writer lock of a SQLite file, BEGIN IMMEDIATE or PostgreSQL's advisory lock, one retry on a
busy database, the read connection given back before it waits). A static check refuses any other way to open a writing
session, and shows it fails on planted ones; a burst of every kind of writer on one SQLite file loses nothing and never
meets "database is locked"."""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, func, select

from calibrate import PROJECT_ROOT, create_app, db
from calibrate.accounts import add_user
from calibrate.db import dispose_engine, get_engine, write_session, writer_lock
from calibrate.ingest import import_file
from calibrate.ingest.traces.staging import Settler, new_token
from calibrate.judges import save_version
from calibrate.models import Assignment, Claim, Dataset, Guideline, Label, LabelRevision, Sample, StagedSpan, Task, Verdict

sys.path.insert(0, str(Path(__file__).resolve().parent / "ingest"))  # trace_helpers

PACKAGE = PROJECT_ROOT / "calibrate"
HOME = "calibrate.db"  # the one module that opens write transactions
GUARD = 180  # seconds: a hang guard, never a measurement


# --------------------------------------------------------------------------- the static rule


def writing_outside(sources: dict[str, str]) -> list[str]:
    """Return each place outside db.py that opens or ends a write transaction by itself.

    A write is persisted only by a COMMIT: a `.commit()`, a `.begin()` block (it commits at its end),
    SQL text that says BEGIN or COMMIT, a session on `write_engine` (the write lock without the writer
    lock and the retry), or a raw DB-API connection. Savepoints (`begin_nested`) are parts of the
    caller's transaction and stay allowed. Alembic's migrations own their schema transaction.
    """
    found = []
    for name, text in sources.items():
        if name == HOME or name.startswith("calibrate.migrations"):
            continue
        for node in ast.walk(ast.parse(text)):
            where = f"{name}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("commit", "begin", "raw_connection"):
                found.append(f"{where} .{node.func.attr}()")
            elif isinstance(node, (ast.Name, ast.Attribute)) and (getattr(node, "id", None) or getattr(node, "attr", None)) \
                    in ("write_engine", "get_write_session", "lease_session"):
                found.append(f"{where} {getattr(node, 'id', None) or node.attr}")
            elif isinstance(node, ast.alias) and node.name in ("write_engine", "get_write_session", "lease_session"):
                found.append(f"{where} imports {node.name}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and re.match(r"\s*(BEGIN|COMMIT)\b", node.value):
                found.append(f"{where} SQL {node.value.strip()!r}")
    return sorted(found)


def _sources() -> dict[str, str]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path.read_text()
    return out


def test_no_module_opens_a_writing_session_but_through_write_session():
    assert writing_outside(_sources()) == []


PLANTED = {
    "a view that commits its read session": ("calibrate.views.admin", "def _planted(db):\n    db.commit()\n"),
    "a worker's raw session that commits": ("calibrate.judges.watch",
                                            "def _planted(engine):\n    with Session(engine) as s:\n        s.commit()\n"),
    "a session.begin() block": ("calibrate.ingest.samples", "def _planted(s):\n    with s.begin():\n        pass\n"),
    "a session on write_engine": ("calibrate.views.session",
                                  "from calibrate.db import write_engine\n\ndef _planted(e):\n    return Session(write_engine(e))\n"),
    "SQL that commits": ("calibrate.ingest.bulk", "def _planted(c):\n    c.exec_driver_sql('COMMIT')\n"),
    "a raw connection": ("calibrate.datasets", "def _planted(e):\n    return e.raw_connection()\n"),
}


@pytest.mark.parametrize("which", sorted(PLANTED))
def test_the_rule_fails_on_each_other_way_to_write(which):
    module, code = PLANTED[which]
    sources = _sources()
    sources[module] += "\n\n" + code
    found = writing_outside(sources)
    assert found and all(place.startswith(f"{module}:") for place in found)


# --------------------------------------------------------------------------- what write_session does


def test_a_write_session_holds_the_writer_lock_and_commits_at_the_end(engine, db_url):
    lock = writer_lock(db_url)
    with write_session(engine) as session:
        assert lock.held_here()
        session.add(Dataset(name="kept", source="t"))
    assert not lock.held_here()
    with pytest.raises(RuntimeError), write_session(engine) as session:
        session.add(Dataset(name="dropped", source="t"))
        raise RuntimeError
    with Session(engine) as session:
        assert session.exec(select(Dataset.name).where(Dataset.name.in_(["kept", "dropped"]))).all() == ["kept"]


def test_a_write_session_gives_the_read_connection_back_before_it_waits(engine):
    reading = Session(engine, expire_on_commit=False)
    dataset = Dataset(name="read", source="t")
    with write_session(engine) as session:
        session.add(dataset)
    row = reading.exec(select(Dataset).where(Dataset.name == "read")).one()
    assert reading.in_transaction()
    with write_session(engine, give_back=reading) as session:
        assert not reading.in_transaction()  # its connection is back in the pool
        session.get(Dataset, row.id).description = "changed"
    assert row.name == "read"  # what it had read stays readable


def test_a_busy_database_is_tried_once_more_then_refused(db_url, monkeypatch):
    """A writer outside the lock (the sqlite3 shell) holds the file: the first BEGIN finds it busy, the second gets it;
    held through both, the second busy answer goes up."""
    dispose_engine(db_url)
    quick = get_engine(db_url, busy_timeout=0.05)
    with Session(quick) as session:  # the pooled connection, opened (and set up) before the file is held
        session.exec(select(Dataset.id)).all()
    holder = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    refused = []
    real = db._is_busy

    def busy(exc):
        refused.append(str(exc.orig))
        if len(refused) == 1:
            holder.execute("ROLLBACK")  # the other writer lets go before this one tries again
        return real(exc)

    monkeypatch.setattr(db, "_is_busy", busy)
    with write_session(quick) as session:
        session.add(Dataset(name="second try", source="t"))
    assert refused == ["database is locked"]
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(OperationalError, match="database is locked"), write_session(quick):
            pass
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert refused == ["database is locked"] * 3  # this session's two tries, then it gave up
    with Session(quick) as session:
        assert session.exec(select(Dataset.name).where(Dataset.name == "second try")).one()


# --------------------------------------------------------------------------- the burst

IMPORTED, WATCHED = 12, 4  # samples the CLI import writes in chunks of two; samples (of three claims) the watcher judges
PAUSE = 0.05  # seconds between one thread's saves: writers keep overlapping without starving the two processes
BUSY = 0.2  # seconds of SQLite's busy handler: short, so that a writer outside the lock would meet "database is locked"


def _logged_in(app, username: str) -> tuple:
    client = app.test_client()
    page = client.get("/login")
    token = BeautifulSoup(page.data, "html.parser").select_one("input[name=csrf_token]")["value"]
    assert client.post("/login", data={"username": username, "password": "password-123", "csrf_token": token}).status_code == 303
    page = client.get("/datasets")
    return client, BeautifulSoup(page.data, "html.parser").select_one(".whoami input[name=csrf_token]")["value"]


def _samples(path: Path, n: int, prefix: str) -> Path:
    with path.open("w") as out:
        for i in range(n):
            claims = [f"Claim {j} of {prefix} {i} says {i * 10 + j} mg." for j in range(3)]
            out.write(json.dumps({"id": f"{prefix}{i:03d}", "question": f"Question {i}?", "answer": " ".join(claims),
                                  "claims": claims, "contexts": [f"Passage {i}: take {i * 10} mg a day."]}) + "\n")
    return path


def test_a_burst_of_every_writer_on_one_sqlite_file_loses_nothing_and_never_finds_it_locked(db_url, tmp_path, caplog):
    """Web label saves and guideline saves, traces POSTed to the receiver, a CLI import in chunks of two, the traces
    settler and a watcher, all at once on one SQLite file with a short busy timeout: every write lands."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
    from trace_helpers import synthetic_request

    dispose_engine(db_url)
    engine = get_engine(db_url, busy_timeout=BUSY)
    with write_session(engine) as session:
        import_file(session, "samples", _samples(tmp_path / "work.jsonl", 4, "w"), dataset="work")
        import_file(session, "samples", _samples(tmp_path / "watched.jsonl", WATCHED, "j"), dataset="watched")
        ana = add_user(session, "ana", role="annotator", password="password-123")
        add_user(session, "eng", role="engineer", password="password-123")
        sample = session.exec(select(Sample).join(Dataset).where(Dataset.name == "work")).first()
        assignment = Assignment(sample_id=sample.id, user_id=ana.id)
        session.add(assignment)
        session.flush()
        claim = session.exec(select(Claim).where(Claim.sample_id == sample.id)).first()
        _, bearer = new_token(session, "live")
        prompt = f"claims@{save_version(session, 'claims', task='claim_support', model='m').version.number}"
        label_url, target = f"/annotate/{assignment.id}/label", f"claim:{claim.id}"
    app = create_app({"TESTING": True, "DATABASE_URL": db_url, "INSTANCE_PATH": str(tmp_path / "instance"),
                      "SECRET_KEY": "test", "SQLITE_BUSY_TIMEOUT": BUSY})
    env = {**os.environ, "CALIBRATE_INSTANCE": str(tmp_path / "instance"), "CALIBRATE_SQLITE_BUSY_TIMEOUT": str(BUSY),
           "CALIBRATE_IMPORT_CHUNK_SIZE": "2"}
    importing = _samples(tmp_path / "burst.jsonl", IMPORTED, "b")
    traces = synthetic_request(12, repeat_every=0)
    spans = [span for rs in traces.resource_spans for ss in rs.scope_spans for span in ss.spans]

    settler = Settler(engine, settle_s=0, every=0.05, max_field_chars=1_000_000, batch=2)
    processes = []
    done = threading.Event()
    saved: list[tuple[str, int]] = []
    guidelines: list[int] = []
    posted: list[int] = []
    failures: list[str] = []

    def label_saves():
        client, csrf = _logged_in(app, "ana")
        values = ("supported", "unsupported")
        while not done.is_set() or len(saved) < 20:
            value = values[len(saved) % 2]
            answer = client.post(label_url, data={"task": "claim_support", "target": target, "value": value},
                                 headers={"HX-Request": "true", "X-CSRFToken": csrf})
            saved.append((value, answer.status_code))
            time.sleep(PAUSE)

    def guideline_saves():
        client, csrf = _logged_in(app, "eng")
        while not done.is_set() or len(guidelines) < 10:
            answer = client.post("/guidelines/claim_support", data={"text": f"Version {len(guidelines)}", "csrf_token": csrf})
            guidelines.append(answer.status_code)
            time.sleep(PAUSE)

    def receiver():
        client = app.test_client()
        for start in range(0, len(spans), 3):
            body = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans[start:start + 3])])])
            answer = client.post("/v1/traces", data=body.SerializeToString(),
                                 headers={"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {bearer}"})
            posted.append(answer.status_code)

    def guarded(work):
        def run():
            try:
                work()
            except Exception as exc:  # the assertion below names it
                failures.append(f"{work.__name__}: {exc!r}")
        return threading.Thread(target=run)

    threads = [guarded(label_saves), guarded(guideline_saves), guarded(receiver)]
    caplog.set_level(logging.INFO)
    try:
        settler.start()
        processes = [subprocess.Popen([sys.executable, "-m", "calibrate", *args, "--db", db_url], cwd=PROJECT_ROOT, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for args in (["import", "samples", str(importing), "--dataset", "burst"],
                                  ["watch", "--dataset", "watched", "--prompt", prompt, "--backend", "baseline", "--once",
                                   "--concurrency", "1"])]
        for thread in threads:
            thread.start()
        outputs = [process.communicate(timeout=GUARD) for process in processes]
        done.set()
        for thread in threads:
            thread.join(GUARD)
        deadline = time.monotonic() + GUARD
        while _staged(engine) and time.monotonic() < deadline:  # the settler's last turns
            time.sleep(0.05)
    finally:
        done.set()
        settler.stop()
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()
    settler.join(GUARD)

    assert failures == []
    said = "\n".join([*(out + err for out, err in outputs), caplog.text])
    assert "database is locked" not in said and "settling staged traces failed" not in said
    assert [process.returncode for process in processes] == [0, 0], said
    assert {status for _, status in saved} == {200} and {status for status in guidelines} == {303} and set(posted) == {200}
    with Session(engine) as session:
        # every label save and guideline landed, in order
        label = session.exec(select(Label).where(Label.target_key == target)).one()
        assert label.value == saved[-1][0]
        # each save changed the value (they alternate), so each wrote one revision: none lost
        assert session.exec(select(func.count()).select_from(LabelRevision).where(LabelRevision.label_id == label.id)).one() \
            == len(saved)
        task = session.exec(select(Task).where(Task.name == "claim_support")).one()
        versions = session.exec(select(Guideline.version, Guideline.text).where(Guideline.task_id == task.id)
                                .order_by(Guideline.version)).all()
        shipped = versions[0][0]  # the built-in task's guideline, then one version per save
        assert versions[1:] == [(shipped + 1 + i, f"Version {i}") for i in range(len(guidelines))]
        # the import, the settled traces and the watcher's verdicts: all there
        samples = dict(session.exec(select(Dataset.name, func.count(Sample.id)).join(Sample).group_by(Dataset.name)).all())
        assert (samples["burst"], samples["live"], _staged(engine)) == (IMPORTED, 12, 0)
        judged = session.exec(select(func.count()).select_from(Verdict).join(Sample).join(Dataset)
                              .where(Dataset.name == "watched", Verdict.status == "ok")).one()
        assert judged == WATCHED * 3  # every claim of the watched dataset


def _staged(engine) -> int:
    with Session(engine) as session:
        return session.exec(select(func.count()).select_from(StagedSpan)).one()
