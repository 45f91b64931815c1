"""Benchmark label saves while a 100,000-sample import runs on the same database, one server process.

Issue 14: a CLI import was one write transaction for the whole file, and annotators' saves
failed after SQLite's 10 s busy timeout while it ran. Now an import writes in short chunks
(calibrate/ingest/batches.py). Target: every label save during the import answered, none
slower than 1 s.

The database is bench_annotate.py's (bulk SQL: `--annotated` samples with two earlier
annotators' labels, each bench annotator with pending items); the server runs as `calibrate
serve` runs it (waitress, one process, 4 threads). `--clients` annotators log in, open their
next item and save labels on its claims as fast as the server answers (a change each time,
kept in history: the workbench's write path). After a baseline phase with no import, `calibrate
import samples FILE --dataset incoming` runs in a subprocess on the same database (a file of
`--n` samples as bench_import.py generates it: 300–600 character answers, five contexts), and
the clients go on until it has finished. Reported: the saves whose request started while the
import ran (p50, p95, max, errors) against the baseline phase's, the import's wall time, and a
check that every acknowledged label is in the database.

    .venv/bin/python bench/bench_import_while_labelling.py [--n 100000] [--annotated 20000] [--clients 4]
        [--baseline-seconds 10] [--title TEXT] [--record]

`--record` adds the section to bench/results/import_while_labelling.md (newest first).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_annotate import Client, build_db, check_db, percentile, record_section, start_server
from bench_import import generate

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "import_while_labelling.md"
TARGET_MAX_MS = 1000


class Saver:
    """One annotator saving labels on the claims of their open item, each save timed with its start."""

    def __init__(self, client: Client, seed: int) -> None:
        self.client = client
        self.rng = random.Random(seed)
        self.saves: list[tuple[float, float, bool]] = []  # (monotonic start, ms, answered 200)
        self.failure = ""
        opened = client._open_next()
        if opened is None:
            raise RuntimeError(f"{client.username} has no item to label")
        self.path, cells = opened
        self.claims = [(task, target) for task, target in cells if task == "claim_support"]

    def run(self, stop: threading.Event) -> None:
        values = ("supported", "unsupported", "not_applicable")
        i = 0
        try:
            while not stop.is_set():
                task, target = self.claims[i % len(self.claims)]
                current = self.client.acked.get((task, target))
                t0 = time.monotonic()
                ok = self.client._label("", self.path, task, target, self.rng.choice([v for v in values if v != current]))
                self.saves.append((t0, (time.monotonic() - t0) * 1000, ok))
                i += 1
        except Exception as exc:  # a dropped connection is an error of the run, reported
            self.failure = f"{type(exc).__name__}: {exc}"


def stats(saves: list[tuple[float, float, bool]]) -> dict:
    ms = [m for _, m, _ in saves]
    return {"n": len(saves), "p50": percentile(ms, 50), "p95": percentile(ms, 95), "max": max(ms) if ms else float("nan"),
            "errors": sum(not ok for *_, ok in saves)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="samples in the imported file")
    parser.add_argument("--annotated", type=int, default=20_000, help="samples of the database being labelled")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--baseline-seconds", type=float, default=10)
    parser.add_argument("--port", type=int, default=8777)
    parser.add_argument("--title", default="", help="what this run measures (e.g. the code it runs)")
    parser.add_argument("--record", action="store_true", help=f"add the section to {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        source = folder / "incoming.jsonl"
        generate(source, args.n)
        size_mb = source.stat().st_size / 1e6
        db = folder / "bench.sqlite"
        built = build_db(db, args.annotated, args.clients, 200)
        print(f"generated {args.n:,} samples ({size_mb:.0f} MB) and built {built} "
              f"in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        server = start_server(db, args.port, 4, 1, "waitress")
        try:
            clients = [Client(args.port, f"b{i + 1:02d}") for i in range(args.clients)]
            for client in clients:
                client.login()
            savers = [Saver(client, seed) for seed, client in enumerate(clients)]
            stop = threading.Event()
            threads = [threading.Thread(target=saver.run, args=(stop,)) for saver in savers]
            for thread in threads:
                thread.start()
            time.sleep(args.baseline_seconds)
            env = {**os.environ, "CALIBRATE_INSTANCE": str(folder)}
            command = [sys.executable, "-m", "calibrate", "import", "samples", str(source), "--dataset", "incoming",
                       "--db", f"sqlite:///{db}"]
            started = time.monotonic()
            imported = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
            finished = time.monotonic()
            time.sleep(1)
            stop.set()
            for thread in threads:
                thread.join()
        finally:
            server.terminate()
            server.wait(timeout=10)
        check = check_db(db, clients)
    saves = [s for saver in savers for s in saver.saves]
    before = stats([s for s in saves if s[0] < started])
    during = stats([s for s in saves if started <= s[0] <= finished])
    failures = [saver.failure for saver in savers if saver.failure]
    output = (imported.stdout or imported.stderr).strip()
    last_line = output.splitlines()[-1] if output else ""
    met = during["max"] <= TARGET_MAX_MS and during["errors"] == 0 and not failures and imported.returncode == 0
    lines = [
        f"## {dt.date.today().isoformat()}: {args.n:,}-sample import while {args.clients} annotators save labels"
        + (f" — {args.title}" if args.title else ""),
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs (shared), Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}; `uptime` before the run: `{uptime}`",
        f"- command: `python bench/bench_import_while_labelling.py --n {args.n} --annotated {args.annotated} "
        f"--clients {args.clients} --baseline-seconds {args.baseline_seconds:g}`; server: waitress, 1 process × 4 threads",
        f"- the import: `calibrate import samples` ({args.n:,} samples, {size_mb:.0f} MB) took "
        f"**{finished - started:.1f} s**, exit code {imported.returncode}: `{last_line}`",
        "",
        "| label saves (client-measured) | count | p50 ms | p95 ms | max ms | errors |",
        "|---|---:|---:|---:|---:|---:|",
        f"| before the import (baseline, same run) | {before['n']:,} | {before['p50']:.1f} | {before['p95']:.1f} | "
        f"{before['max']:.1f} | {before['errors']} |",
        f"| while the import ran | {during['n']:,} | {during['p50']:.1f} | {during['p95']:.1f} | **{during['max']:.1f}** | "
        f"**{during['errors']}** |",
        "",
        f"- target (max ≤ {TARGET_MAX_MS} ms, 0 errors while the import runs): **{'met' if met else 'NOT MET'}**"
        + (f"; client failures: {failures}" if failures else ""),
        f"- database after the run: {check['expected']:,} acknowledged labels of the bench annotators, lost "
        f"**{check['lost']}**, wrong or unacknowledged **{check['wrong_or_unacknowledged']}**, duplicated "
        f"**{check['duplicates']}**",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.record:
        record_section(RESULTS, "Label saves during a large import", text)


if __name__ == "__main__":
    main()
