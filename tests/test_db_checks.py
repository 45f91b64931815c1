"""The database is checked at start (issue 20, finding 11): a damaged file is refused with one line naming it,
a read-only one is said clearly, `serve` does not start on a damaged file, and /health shows the state.

Issue 34: a command no longer scans the whole file at start (1.86 s on a 486 MB database): it checks the
header and the schema, and a damaged page it reads is said in the same one line; every page is scanned at
`serve` and `init` start (once per change of the file: the state it passed on is recorded beside it), by
/health, and by `calibrate check`.

Read-only without chmod: the tests run as root in CI, where a file's mode does not stop writes,
so the read-only database is opened through SQLite's own read-only mode, a
`sqlite:///file:PATH?mode=ro&uri=true` URL — what SQLite answers for a read-only mount or file.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from calibrate import create_app
from calibrate.db import CHECKED_SUFFIX, check_database, dispose_engine, fingerprint, full_check, get_engine

GOOD = Path(__file__).resolve().parent / "data" / "good"


def overwrite(path: Path, offset: int, size: int, *, keep_time: bool = False) -> None:
    """Overwrite `size` bytes of a file at `offset` with 0xff (`keep_time`: its modification time put back as it was)."""
    before = path.stat()
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(b"\xff" * size)
    if keep_time:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def copy_of(db_url: str, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    shutil.copyfile(db_url.removeprefix("sqlite:///"), path)
    return path


def root_pages(path: Path, table: str) -> list[tuple[int, int]]:
    """Return (offset, page size) of the root pages of a table and of its indexes."""
    with sqlite3.connect(path) as con:
        pages = [row[0] for row in con.execute("SELECT rootpage FROM sqlite_master WHERE tbl_name = ? AND rootpage > 0", (table,))]
        size = con.execute("PRAGMA page_size").fetchone()[0]
    return [((page - 1) * size, size) for page in pages]


def damage_table(path: Path, table: str, *, keep_time: bool = False) -> None:
    for offset, size in root_pages(path, table):
        overwrite(path, offset, size, keep_time=keep_time)


@pytest.fixture
def damaged(db_url, tmp_path):
    """A copy of a migrated database with 8 KiB overwritten in the middle."""
    path = copy_of(db_url, tmp_path, "damaged.sqlite")
    overwrite(path, path.stat().st_size // 2 // 4096 * 4096, 8192)
    yield path
    dispose_engine(f"sqlite:///{path}")


@pytest.fixture
def damaged_schema(db_url, tmp_path):
    """A copy of a migrated database whose first page (the schema's) is overwritten after its 100-byte header."""
    path = copy_of(db_url, tmp_path, "schema.sqlite")
    overwrite(path, 100, 4000)
    yield path
    dispose_engine(f"sqlite:///{path}")


@pytest.fixture
def damaged_tables(db_url, tmp_path):
    """A copy of a migrated database with the root pages of `task`, `dataset` and their indexes overwritten (every command
    reads one)."""
    path = copy_of(db_url, tmp_path, "tables.sqlite")
    for table in ("task", "dataset"):
        damage_table(path, table)
    yield path
    dispose_engine(f"sqlite:///{path}")


@pytest.fixture
def read_only(db_url):
    url = f"sqlite:///file:{db_url.removeprefix('sqlite:///')}?mode=ro&uri=true"
    yield url
    dispose_engine(url)


COMMANDS = [["init"], ["task", "list"], ["report", "--dataset", "d"],
            ["import", "samples", str(GOOD / "samples.jsonl"), "--dataset", "d"]]


def refused_as_damaged(out, path: Path) -> bool:
    return (out.exit_code == 2 and out.output.count("\n") == 1 and out.output.startswith(f"error: the database {path} is damaged (")
            and "restore it from a backup" in out.output)


@pytest.mark.parametrize("args", COMMANDS)
def test_every_command_refuses_a_file_whose_schema_page_is_damaged_in_one_line(runner, damaged_schema, args):
    out = runner.invoke([*args, "--db", f"sqlite:///{damaged_schema}"])  # the runner raises on any uncaught exception
    assert refused_as_damaged(out, damaged_schema), out.output


@pytest.mark.parametrize("args", COMMANDS)
def test_every_command_that_reads_a_damaged_page_says_so_in_the_same_one_line(runner, damaged_tables, args):
    """The start-up check reads the header and the schema only; the damaged page a statement reads is said as it says it."""
    out = runner.invoke([*args, "--db", f"sqlite:///{damaged_tables}"])
    assert refused_as_damaged(out, damaged_tables), out.output


def test_a_command_does_not_scan_the_file_init_and_check_do(runner, db_url, tmp_path):
    """A page no command reads (the root of `responsecache`) damaged: `task list` works, as it would on a large file it
    does not read whole; `init` (every page, at start) refuses it in one line, `calibrate check` exits 1 naming it."""
    path = copy_of(db_url, tmp_path, "cache.sqlite")
    damage_table(path, "responsecache")
    url = f"sqlite:///{path}"
    try:
        listed = runner.invoke(["task", "list", "--db", url])
        assert listed.exit_code == 0 and "claim_support" in listed.stdout
        dispose_engine(url)  # a new process: what this one checked is forgotten
        assert refused_as_damaged(runner.invoke(["init", "--db", url]), path)
        dispose_engine(url)
        checked = runner.invoke(["check", "--db", url])
        assert checked.exit_code == 1 and checked.stdout == ""
        assert checked.stderr.splitlines() == [f"error: the database {path} is damaged (" + checked.stderr.split(" is damaged (", 1)[1].strip()]
        assert not Path(f"{path}{CHECKED_SUFFIX}").exists()  # nothing recorded for a file that failed
    finally:
        dispose_engine(url)


def test_check_says_ok_and_records_the_file_which_the_next_start_does_not_scan_again_until_it_changes(runner, db_url, tmp_path):
    """`calibrate check` records the file's state beside it; a start with the file in that state skips the scan (a page
    damaged behind the check's back, its time put back, goes unseen there) and `check` always scans; a changed file is
    scanned at the next start."""
    path = copy_of(db_url, tmp_path, "record.sqlite")
    url = f"sqlite:///{path}"
    try:
        checked = runner.invoke(["check", "--db", url])
        assert checked.exit_code == 0, checked.output
        assert checked.stdout.startswith(f"the database {path} is ok: quick_check read ") and "schema " in checked.stdout
        assert checked.stdout.rstrip().endswith(", current")
        record = json.loads(Path(f"{path}{CHECKED_SUFFIX}").read_text())
        assert record["file"] == fingerprint(path) and oct(Path(f"{path}{CHECKED_SUFFIX}").stat().st_mode & 0o777) == "0o600"
        dispose_engine(url)
        damage_table(path, "responsecache", keep_time=True)
        assert fingerprint(path) == record["file"]
        assert check_database(get_engine(url), full=True).status == "ok"  # as recorded: not scanned again
        assert full_check(get_engine(url)).status == "damaged"  # `calibrate check` scans whatever was recorded
        dispose_engine(url)
        os.utime(path)  # the file changed (as any write changes it): the next start scans it
        assert check_database(get_engine(url), full=True).status == "damaged"
        dispose_engine(url)
        thorough = runner.invoke(["check", "--thorough", "--db", url])
        assert thorough.exit_code == 1 and "is damaged" in thorough.stderr
    finally:
        dispose_engine(url)


def test_check_of_a_database_that_is_not_there_or_not_a_file(runner, tmp_path):
    missing = runner.invoke(["check", "--db", f"sqlite:///{tmp_path / 'none.sqlite'}"])
    assert missing.exit_code == 2 and missing.output.startswith("error: no database at ")
    memory = runner.invoke(["check", "--db", "sqlite://"])
    assert memory.exit_code == 2 and "has no file to check" in memory.output


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
