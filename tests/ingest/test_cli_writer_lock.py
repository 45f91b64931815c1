"""CLI writers take the writer lock of a SQLite file (db.write_session), as a server's label saves do."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from sqlmodel import Session, select
from trace_helpers import synthetic_request

from calibrate.models import Dataset

HOLD = """
import sys
from calibrate.db import writer_lock
with writer_lock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.readline()
"""


def blocked_on_flock(pid: int, path: Path) -> bool:
    """Return whether process `pid` waits for a flock of `path` (a `->` line of /proc/locks: a blocked request)."""
    inode = os.stat(path).st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and "FLOCK" in fields:
            rest = fields[fields.index("->") + 1:]
            if rest[3] == str(pid) and rest[4].rsplit(":", 1)[-1] == str(inode):
                return True
    return False


def test_a_cli_import_waits_for_the_servers_writer_lock_then_succeeds(engine, db_url, tmp_path):
    """Another process (a server) holds the writer lock: `calibrate traces import` waits on its flock, writes nothing
    meanwhile, and imports once the lock is let go."""
    trace_file = tmp_path / "traces.pb"
    trace_file.write_bytes(synthetic_request(5, repeat_every=0).SerializeToString())
    env = {**os.environ, "CALIBRATE_INSTANCE": str(tmp_path)}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, db_url], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=env)
    importer = None
    try:
        assert holder.stdout.readline().strip() == "held"
        importer = subprocess.Popen([sys.executable, "-m", "calibrate", "traces", "import", str(trace_file), "--dataset",
                                     "locked", "--json", "--db", db_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, env=env)
        lock_file = Path(db_url.removeprefix("sqlite:///") + "-writer")
        deadline = time.monotonic() + 60  # a bound on the wait for the import to reach the lock, not a measurement
        while not (lock_file.exists() and blocked_on_flock(importer.pid, lock_file)):
            assert importer.poll() is None, importer.communicate()
            assert time.monotonic() < deadline, "the import never waited for the writer lock"
            time.sleep(0.05)
        with Session(engine) as session:
            assert session.exec(select(Dataset).where(Dataset.name == "locked")).first() is None
        holder.communicate("\n", timeout=60)
        assert holder.returncode == 0
        out, err = importer.communicate(timeout=120)
        assert importer.returncode == 0, err
    finally:
        for process in (holder, importer):
            if process is not None and process.poll() is None:
                process.kill()
                process.communicate()
    assert '"created": 5' in out
    with Session(engine) as session:
        assert session.exec(select(Dataset).where(Dataset.name == "locked")).first() is not None


def test_a_write_session_inside_the_lock_does_not_take_it_again(engine, db_url):
    """A thread that holds the writer lock already (a server's write) and opens a write session does not deadlock."""
    from calibrate.db import write_session, writer_lock

    with writer_lock(db_url), write_session(engine) as session:
        session.add(Dataset(name="inside", source="t"))
    with write_session(engine) as session:  # and alone it takes the lock and lets go
        session.add(Dataset(name="alone", source="t"))
    assert not writer_lock(db_url).held_here()
