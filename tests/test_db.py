"""SQLite connection settings, write transactions and migrations."""

from __future__ import annotations

import os
import sqlite3
import sys
import threading

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from calibrate.db import dispose_engine, get_engine, write_session
from calibrate.migrations import current_revision, head_revision, upgrade


def test_sqlite_pragmas(engine):
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000


def test_foreign_keys_enforced(engine):
    from sqlalchemy.exc import IntegrityError

    with pytest.raises(IntegrityError):
        with write_session(engine) as session:
            session.execute(text("INSERT INTO context (sample_id, rank, text, active) VALUES (999, 0, 'x', 1)"))


def test_write_session_begins_immediate(engine):
    """A write session holds the write lock from its first statement, so a second waits instead of failing."""
    statements = []
    from sqlalchemy import event

    def record(conn, cursor, statement, *args):
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        with write_session(engine) as session:
            session.execute(text("SELECT 1"))
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert statements[0] == "BEGIN IMMEDIATE"


def test_concurrent_read_then_write_transactions_do_not_fail(engine):
    """Two writers that read first: with BEGIN IMMEDIATE both succeed (one waits for the other)."""
    with write_session(engine) as session:
        session.execute(text("INSERT INTO dataset (name, description, source, is_demo, created_at) VALUES ('d', '', '', 0, '2026-01-01')"))
    errors = []
    barrier = threading.Barrier(4)

    def worker(i: int) -> None:
        try:
            barrier.wait()
            for j in range(10):
                with write_session(engine) as session:
                    n = session.execute(text("SELECT count(*) FROM dataset")).scalar()
                    session.execute(text("INSERT INTO dataset (name, description, source, is_demo, created_at) "
                                         "VALUES (:n, '', '', 0, '2026-01-01')"), {"n": f"w{i}-{j}-{n}"})
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Session(engine) as session:
        assert session.execute(text("SELECT count(*) FROM dataset")).scalar() == 41


def test_migration_upgrade_keeps_labels(tmp_path):
    """Create the database at the first revision, add labels, upgrade to head: every label is there."""
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    engine = get_engine(url)
    try:
        upgrade(engine, "0001")
        assert current_revision(engine) == "0001"
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO dataset (id, name, description, source, is_demo, created_at) VALUES (1, 'd', '', '', 0, '2026-01-01')"))
            conn.execute(text("INSERT INTO sample (id, dataset_id, external_id, question, answer, metadata, content_hash, segmenter, "
                              "created_at, updated_at) VALUES (1, 1, 's1', 'q', 'a. b.', '{}', 'h', 'given', '2026-01-01', '2026-01-01')"))
            conn.execute(text("INSERT INTO claim (id, sample_id, \"index\", text, start, \"end\", active) VALUES (1, 1, 0, 'a.', 0, 2, 1)"))
            conn.execute(text("INSERT INTO user (id, username, display_name, role, active, created_at) VALUES (1, 'ann', '', 'annotator', 1, '2026-01-01')"))
            conn.execute(text("INSERT INTO task (id, name, target, kind, labels, description, builtin, created_at) VALUES "
                              "(1, 'claim_support', 'claim', 'categorical', '[\"supported\",\"unsupported\"]', '', 1, '2026-01-01')"))
            for i in range(50):
                conn.execute(
                    text("INSERT INTO label (task_id, sample_id, claim_id, target_key, annotator_id, value, rationale, adjudicated, "
                         "stale, stale_reason, source, created_at, updated_at) "
                         "VALUES (1, 1, 1, :k, 1, 'supported', :r, 0, 0, '', 'import', '2026-01-01', '2026-01-01')"),
                    {"k": f"claim:{i}", "r": f"r{i}"},
                )
        before = sorted(map(tuple, sqlite3.connect(tmp_path / "old.sqlite").execute("SELECT target_key, value, rationale FROM label")))
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        after = sorted(map(tuple, sqlite3.connect(tmp_path / "old.sqlite").execute("SELECT target_key, value, rationale FROM label")))
        assert after == before and len(after) == 50
    finally:
        dispose_engine(url)


def test_models_match_migrations(engine):
    """The head revision creates exactly the tables and columns the models declare."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext
    from sqlmodel import SQLModel

    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": False}), SQLModel.metadata)
    assert diff == []


def test_the_pairwise_revision_keeps_every_verdict_and_allows_one_per_order(tmp_path):
    """0003 → head: existing verdicts keep their rows (order_key ""), and a judge may then add one per presentation order."""
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    engine = get_engine(url)
    try:
        upgrade(engine, "0003")
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO dataset (id, name, description, source, is_demo, created_at) VALUES (1, 'd', '', '', 0, '2026-01-01')"))
            conn.execute(text("INSERT INTO sample (id, dataset_id, external_id, question, answer, metadata, content_hash, segmenter, "
                              "created_at, updated_at) VALUES (1, 1, 's1', 'q', 'a.', '{}', 'h', 'given', '2026-01-01', '2026-01-01')"))
            conn.execute(text("INSERT INTO task (id, name, target, kind, labels, description, builtin, created_at) VALUES "
                              "(1, 'pref', 'sample', 'categorical', '[\"A\",\"B\"]', '', 0, '2026-01-01')"))
            conn.execute(text("INSERT INTO judge (id, name, kind, description, created_at) VALUES (1, 'j', 'imported', '', '2026-01-01')"))
            conn.execute(text("INSERT INTO verdict (judge_id, task_id, sample_id, target_key, value, status, reason, raw, error, "
                              "cached, source, created_at) VALUES (1, 1, 1, 'sample:1', 'A', 'ok', '', '', '', 0, 'import', '2026-01-01')"))
        upgrade(engine)
        with engine.begin() as conn:
            assert conn.execute(text("SELECT value, order_key FROM verdict")).all() == [("A", "")]
            conn.execute(text("INSERT INTO verdict (judge_id, task_id, sample_id, target_key, value, status, reason, raw, error, "
                              "cached, source, created_at, order_key) VALUES (1, 1, 1, 'sample:1', 'B', 'ok', '', '', '', 0, "
                              "'import', '2026-01-01', '1,0')"))
        with pytest.raises(IntegrityError), engine.begin() as conn:  # the same order twice is still one too many
            conn.execute(text("INSERT INTO verdict (judge_id, task_id, sample_id, target_key, value, status, reason, raw, error, "
                              "cached, source, created_at, order_key) VALUES (1, 1, 1, 'sample:1', 'A', 'ok', '', '', '', 0, "
                              "'import', '2026-01-01', '1,0')"))
    finally:
        dispose_engine(url)


@pytest.mark.skipif(sys.platform == "win32", reason="flock is Unix's")
def test_the_writer_lock_excludes_other_processes_on_the_same_sqlite_file(tmp_path):
    """Server processes on one SQLite file (`serve --role web` beside `--role traces`) take turns at one flock."""
    import subprocess

    from calibrate.db import writer_lock

    url = f"sqlite:///{tmp_path / 'one.sqlite'}"
    lock = writer_lock(url)
    assert writer_lock(f"sqlite:///{tmp_path / '.' / 'one.sqlite'}") is lock  # one per file, however it is named
    probe = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept BlockingIOError:\n    sys.exit(3)")
    with lock:
        path = tmp_path / "one.sqlite-writer"
        assert path.exists() and (path.stat().st_mode & 0o777) == 0o600
        assert subprocess.run([sys.executable, "-c", probe, str(path)]).returncode == 3  # held: another process waits
        assert not lock.threads.acquire(blocking=False)  # and so do this process's other threads
    assert subprocess.run([sys.executable, "-c", probe, str(path)]).returncode == 0
    assert writer_lock(f"sqlite:///{tmp_path / 'other.sqlite'}") is not lock


@pytest.mark.skipif(sys.platform == "win32", reason="flock is Unix's")
def test_a_background_writer_lets_a_waiting_foreground_writer_of_another_process_go_first(tmp_path):
    """While another process's label save waits (a shared flock of `-writer-wait`), trace staging/settling holds back."""
    import subprocess

    from calibrate.db import writer_lock

    lock = writer_lock(f"sqlite:///{tmp_path / 'turns.sqlite'}")
    with lock:  # creates both files
        pass
    waiter = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
                               "fcntl.flock(fd, fcntl.LOCK_SH); print('waiting', flush=True); sys.stdin.read()",
                               f"{tmp_path / 'turns.sqlite'}-writer-wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert waiter.stdout.readline().strip() == "waiting"
    acquired = threading.Event()

    def background_write():
        with lock.background:
            acquired.set()

    thread = threading.Thread(target=background_write)
    thread.start()
    try:
        assert not acquired.wait(0.5)  # held back while the other process's writer waits
    finally:
        waiter.stdin.close()  # that writer got its turn
        waiter.wait()
        waiter.stdout.close()
    thread.join()
    assert acquired.is_set()


def test_letting_a_database_go_closes_its_writer_lock_files(tmp_path):
    # Every write takes the file's writer lock, which opens two lock files once per process; dispose_engine closes
    # them, so a process (a test worker, a long server) that opens many databases does not run out of descriptors.
    before = len(os.listdir("/proc/self/fd"))
    for i in range(5):
        url = f"sqlite:///{tmp_path}/d{i}.sqlite"
        engine = get_engine(url)
        for _ in range(3):
            with write_session(engine) as session:
                session.execute(text("select 1"))
        dispose_engine(url)
    assert len(os.listdir("/proc/self/fd")) == before
