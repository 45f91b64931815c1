"""kill -9 the server (`--workers 2`) while 16 annotators save labels: is every acknowledged save stored?

Issue 20's red team killed the server with SIGKILL under load and counted acknowledged saves
against the database. This script repeats it: bench_annotate.py's database (bulk SQL), the
server as `calibrate serve --workers 2` runs it (gunicorn, threaded workers), `--clients`
annotators logged in and saving labels on their open item's claims as fast as the server
answers (a different value each time). After a baseline phase (`--seconds`), every server
process (master and workers) gets SIGKILL at once, mid-request. Then the database is opened
again: `PRAGMA quick_check`, `calibrate task list` (the start check), and every acknowledged
save is looked up. A label whose stored value is neither the last acknowledged one nor the one
in flight at the kill is lost. The baseline of the run is the same clients' save rate before
the kill (saves a second), so a reader can tell how much was in flight.

    .venv/bin/python bench/bench_kill9.py [--annotated 5000] [--clients 16] [--workers 2] [--seconds 8] [--record]

`--record` adds the section to bench/results/kill9.md (newest first).
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import os
import platform
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_annotate import Client, build_db, record_section, start_server

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "kill9.md"
VALUES = ("supported", "unsupported", "not_applicable")


class Saver:
    """One annotator saving labels on the claims of their open item; remembers the save in flight."""

    def __init__(self, client: Client, seed: int) -> None:
        self.client = client
        self.rng = random.Random(seed)
        self.in_flight: tuple[tuple[str, str], str] | None = None
        self.saves = 0
        self.refused = 0  # answers other than 200 before the kill
        opened = client._open_next()
        if opened is None:
            raise RuntimeError(f"{client.username} has no item to label")
        self.path, cells = opened
        self.claims = [(task, target) for task, target in cells if task == "claim_support"]

    def run(self, stop: threading.Event) -> None:
        i = 0
        while not stop.is_set():
            key = self.claims[i % len(self.claims)]
            value = self.rng.choice([v for v in VALUES if v != self.client.acked.get(key)])
            self.in_flight = (key, value)
            try:
                ok = self.client._label("", self.path, key[0], key[1], value)
            except (OSError, http.client.HTTPException):  # the server died under this request: no answer came
                return
            self.in_flight = None
            self.saves += ok
            self.refused += not ok
            i += 1


def processes_of(pid: int) -> list[int]:
    """Return a process and all its descendants (from /proc)."""
    found, frontier = [pid], [pid]
    while frontier:
        parent = frontier.pop()
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == str(parent):
                child = int(stat.parent.name)
                found.append(child)
                frontier.append(child)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotated", type=int, default=5000, help="samples of the database")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=8, help="saving before the kill")
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument("--record", action="store_true", help=f"add the section to {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.sqlite"
        build_db(db, args.annotated, args.clients, 20)
        server = start_server(db, args.port, 4, args.workers, "gunicorn")
        killed = []
        try:
            clients = [Client(args.port, f"b{i + 1:02d}") for i in range(args.clients)]
            for client in clients:
                client.login()
            savers = [Saver(client, seed) for seed, client in enumerate(clients)]
            stop = threading.Event()
            threads = [threading.Thread(target=saver.run, args=(stop,)) for saver in savers]
            started = time.monotonic()
            for thread in threads:
                thread.start()
            time.sleep(args.seconds)
            before_kill = sum(saver.saves for saver in savers)
            elapsed = time.monotonic() - started
            killed = processes_of(server.pid)
            for pid in killed:  # all at once, mid-request: no shutdown, no checkpoint
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            stop.set()
            for thread in threads:
                thread.join(timeout=60)
        finally:
            server.kill()
            server.wait(timeout=10)
        con = sqlite3.connect(db)
        integrity = con.execute("PRAGMA quick_check").fetchone()[0]
        users = dict(con.execute("SELECT username, id FROM user"))
        acknowledged = lost = in_flight_stored = 0
        for saver in savers:
            rows = {(task, key): value for task, key, value in con.execute(
                "SELECT t.name, l.target_key, l.value FROM label l JOIN task t ON t.id = l.task_id "
                "WHERE l.annotator_id = ? AND NOT l.adjudicated", (users[saver.client.username],))}
            for key, value in saver.client.acked.items():
                acknowledged += 1
                stored = rows.get(key)
                if stored == value:
                    continue
                if saver.in_flight is not None and saver.in_flight == (key, stored):
                    in_flight_stored += 1  # committed, the answer lost with the server: not a loss
                else:
                    lost += 1
        con.close()
        env = {**os.environ, "CALIBRATE_INSTANCE": tmp}
        restart = subprocess.run([sys.executable, "-m", "calibrate", "task", "list", "--db", f"sqlite:///{db}"],
                                 cwd=ROOT, env=env, capture_output=True, text=True)
    refused = sum(saver.refused for saver in savers)
    in_flight = sum(saver.in_flight is not None for saver in savers)
    lines = [
        f"## {dt.date.today().isoformat()}: kill -9 of `--workers {args.workers}` under {args.clients} saving annotators",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs (shared), Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}; `uptime` before the run: `{uptime}`",
        f"- command: `python bench/bench_kill9.py --annotated {args.annotated} --clients {args.clients} "
        f"--workers {args.workers} --seconds {args.seconds:g}`; server: gunicorn, {args.workers} processes × 4 threads",
        f"- baseline (same run): {before_kill:,} saves acknowledged in {elapsed:.1f} s before the kill "
        f"({before_kill / elapsed:.0f} a second), {refused} refused",
        f"- SIGKILL to {len(killed)} processes (master and workers) at once; {in_flight} saves were in flight",
        f"- after: `PRAGMA quick_check` **{integrity}**; `calibrate task list` (the start check) exit code "
        f"**{restart.returncode}**",
        f"- acknowledged labels (last value per target): {acknowledged:,}; **lost: {lost}**; stored from a save in "
        f"flight (committed, answer never sent): {in_flight_stored}",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.record:
        record_section(RESULTS, "kill -9 under load", text)


if __name__ == "__main__":
    main()
