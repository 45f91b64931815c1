"""The database is checked at start (issue 20, finding 11): a damaged file is refused with one line naming it,
a read-only one is said clearly, `serve` does not start on a damaged file, and /health shows the state.

Read-only without chmod: the tests run as root in CI, where a file's mode does not stop writes,
so the read-only database is opened through SQLite's own read-only mode, a
`sqlite:///file:PATH?mode=ro&uri=true` URL — what SQLite answers for a read-only mount or file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from calibrate import create_app
from calibrate.db import dispose_engine

GOOD = Path(__file__).resolve().parent / "data" / "good"


@pytest.fixture
def damaged(db_url, tmp_path):
    """A copy of a migrated database with 8 KiB overwritten in the middle."""
    source = Path(db_url.removeprefix("sqlite:///"))
    path = tmp_path / "damaged.sqlite"
    shutil.copyfile(source, path)
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(size // 2 // 4096 * 4096)
        fh.write(b"\xff" * 8192)
    yield path
    dispose_engine(f"sqlite:///{path}")


@pytest.fixture
def read_only(db_url):
    url = f"sqlite:///file:{db_url.removeprefix('sqlite:///')}?mode=ro&uri=true"
    yield url
    dispose_engine(url)


@pytest.mark.parametrize("args", [["init"], ["task", "list"], ["report", "--dataset", "d"],
                                  ["import", "samples", str(GOOD / "samples.jsonl"), "--dataset", "d"]])
def test_every_command_refuses_a_damaged_file_in_one_line(runner, damaged, args):
    out = runner.invoke([*args, "--db", f"sqlite:///{damaged}"])  # the runner raises on any uncaught exception
    assert out.exit_code == 2, out.output
    assert out.output.count("\n") == 1 and out.output.startswith(f"error: the database {damaged} is damaged (")
    assert "restore it from a backup" in out.output


@pytest.mark.parametrize("header", [b"", b"SQLite format 3\x00"])
def test_a_file_that_is_not_a_database_at_all_ends_task_list_in_one_line(header, tmp_path):
    """Issue 30: random bytes (with or without SQLite's header) failed in the connection's `PRAGMA journal_mode=WAL`,
    before the start-up check could look: a traceback. Now the one line of a damaged file, exit 2."""
    path = tmp_path / "garbage.sqlite"
    path.write_bytes(header + bytes(range(256)) * 32)
    result = subprocess.run([sys.executable, "-m", "calibrate", "task", "list", "--db", f"sqlite:///{path}"],
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "CALIBRATE_INSTANCE": str(tmp_path / "instance")})
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [f"error: the database {path} is damaged (file is not a database): stop using "
                                          f"it, and restore it from a backup (`sqlite3 {path} .recover` may save what is left)"]


def test_serve_does_not_start_on_a_damaged_file(damaged, tmp_path):
    result = subprocess.run([sys.executable, "-m", "calibrate", "serve", "--port", "1", "--db", f"sqlite:///{damaged}"],
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "CALIBRATE_INSTANCE": str(tmp_path / "instance")})
    assert result.returncode == 2 and "Traceback" not in result.stderr + result.stdout
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and "is damaged" in result.stderr


def test_a_read_only_database_reads_warns_and_refuses_writes_in_one_line(runner, read_only):
    listed = runner.invoke(["task", "list", "--db", read_only])
    assert listed.exit_code == 0 and "claim_support" in listed.stdout
    assert "warning: the database" in listed.stderr and "is read-only" in listed.stderr
    out = runner.invoke(["import", "samples", str(GOOD / "samples.jsonl"), "--dataset", "d", "--db", read_only])
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert out.stderr.strip().splitlines()[-1].endswith("refused: attempt to write a readonly database")


def test_health_says_ok_read_only_or_damaged(db_url, read_only, damaged, tmp_path):
    answers = {}
    for name, url in (("ok", db_url), ("read-only", read_only), ("damaged", f"sqlite:///{damaged}")):
        app = create_app({"TESTING": True, "DATABASE_URL": url, "INSTANCE_PATH": str(tmp_path / name), "SECRET_KEY": "k"})
        response = app.test_client().get("/health")
        answers[name] = (response.status_code, response.get_json()["database"])
    assert answers == {"ok": (200, "ok"), "read-only": (503, "read-only"), "damaged": (503, "damaged")}


def test_a_bad_database_url_is_one_line(runner):
    out = runner.invoke(["task", "list", "--db", "not a url"])
    assert out.exit_code == 2 and out.output.startswith("error: --db: ") and out.output.count("\n") == 1
