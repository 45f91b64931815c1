"""Watchers sharing a dataset (`calibrate watch`): no repeated call, a kill taken over, throughput of two against one.

Every watcher is a real `calibrate watch` process; the endpoint is the fake LLM server
(tests/judges/fakellm.py) in this process, which counts the calls per item.

1. SQLite, `--n-sqlite` targets (default 600): two watchers (`--once`) on a fresh database;
   every target must get one verdict and no item one call more.
2. SQLite, the same size again: two watchers, one killed with SIGKILL once a third of the
   targets are judged; the other ends its pass, a third watcher (`--every 0.5`) takes the
   killed one's jobs over when their lease (`--lease 15`) expires and is stopped with SIGTERM.
   Repeated calls are counted against the killed watcher's bound: its calls in flight
   (--concurrency) plus one unwritten batch (25).
3. PostgreSQL (a throwaway cluster from /usr/lib/postgresql/*/bin, as tests/test_postgres.py),
   `--n-pg` targets (default 10,000): four watchers (`--once`); no repeated call.
4. Throughput with the endpoint as the bottleneck (latency `--slow`, default 0.2 s per call,
   --concurrency 4 per watcher): one watcher, then two, on SQLite databases of `--n-rate`
   targets; the server holds the first calls until every watcher has made one, and rate =
   verdicts / (last verdict − first verdict), so process start-up is left out.
   Target: two ≥ 1.7 × one.

    .venv/bin/python bench/bench_watch.py [--n-sqlite 600] [--n-pg 10000] [--n-rate 400] [--record]

`--record` prepends the figures to bench/results/watch.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import pwd
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "watch.md"
sys.path.insert(0, str(ROOT / "tests" / "judges"))
GUARD = 1800.0
LEASE = 15  # seconds, in the kill case


def build(url: str, n_targets: int, tmp: Path) -> None:
    """Migrate the database, import n_targets claims (5 a sample), save the prompt claims@1."""
    from judge_helpers import write_samples

    from calibrate.db import dispose_engine, get_engine, write_session
    from calibrate.ingest import import_file
    from calibrate.judges import save_version
    from calibrate.migrations import upgrade
    from calibrate.tasks import ensure_builtin_tasks

    engine = get_engine(url)
    upgrade(engine)
    with write_session(engine) as session:
        ensure_builtin_tasks(session)
    path = write_samples(tmp / "samples.jsonl", n_targets // 5, 5)
    with write_session(engine) as session:
        import_file(session, "samples", path, dataset="many")
        save_version(session, "claims", task="claim_support", model="fake-model")
    dispose_engine(url)


def watch(url: str, server, tmp: Path, *extra: str, concurrency: int = 4) -> subprocess.Popen:
    command = [sys.executable, "-m", "calibrate", "watch", "--db", url, "--dataset", "many", "--prompt", "claims@1",
               "--backend", "openai", "--base-url", server.openai_base, "--api-key-env", "",
               "--concurrency", str(concurrency), *extra]
    env = dict(os.environ, CALIBRATE_INSTANCE=str(tmp / "instance"))
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def started(proc: subprocess.Popen) -> None:
    """Wait for the watcher's first line on stderr ("watching …"), written once its signal handlers are in place."""
    line = proc.stderr.readline()
    if not line.startswith("watching"):
        raise SystemExit(f"the watcher did not start: {line}{proc.stderr.read()[-2000:]}")


def counts(url: str) -> tuple[int, int, float]:
    """Return (verdicts, distinct targets, seconds from the first verdict to the last)."""
    from sqlalchemy import text

    from calibrate.db import get_engine

    with get_engine(url).connect() as conn:
        n, distinct = conn.execute(text("SELECT count(*), count(DISTINCT target_key) FROM verdict")).one()
        first, last = conn.execute(text("SELECT min(created_at), max(created_at) FROM verdict")).one()
    if isinstance(first, str):
        first, last = dt.datetime.fromisoformat(first), dt.datetime.fromisoformat(last)
    return n, distinct, (last - first).total_seconds() if first and last else 0.0


def wait(condition, what: str) -> None:
    deadline = time.monotonic() + GUARD
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"hang guard: {what}")
        time.sleep(0.05)


def ended(procs: list[subprocess.Popen]) -> list[int]:
    for proc in procs:
        _, err = proc.communicate(timeout=GUARD)
        if proc.returncode not in (0, -signal.SIGKILL):
            raise SystemExit(f"a watcher failed ({proc.returncode}): {err[-2000:]}")
    return [proc.returncode for proc in procs]


def repeats(server) -> tuple[int, int]:
    calls = server.stats()["calls"]
    return len(calls), sum(n - 1 for n in calls.values())


def two_watchers(n: int, latency: float) -> dict:
    from fakellm import FakeLLM

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/watch.sqlite"
        build(url, n, Path(tmp))
        server = FakeLLM(latency=latency).start()
        server.keep_requests = False
        try:
            started = time.perf_counter()
            ended([watch(url, server, Path(tmp), "--once") for _ in range(2)])
            seconds = time.perf_counter() - started
            verdicts, distinct, _ = counts(url)
            items, repeated = repeats(server)
        finally:
            server.stop()
    return {"n": n, "verdicts": verdicts, "distinct": distinct, "items": items, "repeated": repeated,
            "requests": server.stats()["requests"], "seconds": seconds}


def kill_and_take_over(n: int, latency: float) -> dict:
    from fakellm import FakeLLM

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/watch.sqlite"
        build(url, n, Path(tmp))
        server = FakeLLM(latency=latency).start()
        server.keep_requests = False
        try:
            # A lease longer than the other watcher's remaining work: the third watcher takes the killed one's over.
            killed = watch(url, server, Path(tmp), "--once", "--lease", str(LEASE))
            other = watch(url, server, Path(tmp), "--once", "--lease", str(LEASE))
            wait(lambda: counts(url)[0] >= n // 3, "a third judged")
            killed.send_signal(signal.SIGKILL)
            at_kill = counts(url)[0]
            ended([killed, other])
            before_third = counts(url)[0]
            third = watch(url, server, Path(tmp), "--every", "0.5", "--lease", str(LEASE))
            started(third)  # its SIGTERM handler is in place (the other may have taken every expired lease over)
            wait(lambda: counts(url)[0] >= n, "the third watcher finishes")
            third.send_signal(signal.SIGTERM)
            code = ended([third])[0]
            verdicts, distinct, _ = counts(url)
            items, repeated = repeats(server)
        finally:
            server.stop()
    return {"n": n, "at_kill": at_kill, "by_third": verdicts - before_third, "verdicts": verdicts, "distinct": distinct, "items": items,
            "repeated": repeated, "bound": 4 + 25, "sigterm_exit": code}


def pg_cluster(root: Path) -> tuple[str, list[str], Path, Path]:
    """Start a throwaway PostgreSQL cluster on a unix socket; return (url, run-as prefix, pg_ctl, data dir)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0)
    if not found:
        raise SystemExit("PostgreSQL server binaries not found: apt-get install postgresql")
    bin_dir = found[-1].parent
    as_user: list[str] = []
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(root, owner.pw_uid, owner.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = root / "data", 54000 + os.getpid() % 1000
    subprocess.run([*as_user, str(bin_dir / "initdb"), "-D", str(data), "-U", "calibrate", "-A", "trust", "-E", "UTF8",
                    "--no-sync", "--no-instructions"], check=True, capture_output=True)
    options = f"-p {port} -k {root} -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c max_connections=200"
    subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-o", options, "-w", "start"],
                   check=True, capture_output=True)
    import psycopg

    with psycopg.connect(host=str(root), port=port, user="calibrate", dbname="postgres", autocommit=True) as conn:
        conn.execute("CREATE DATABASE bench")
    return f"postgresql+psycopg://calibrate@/bench?host={root}&port={port}", as_user, bin_dir / "pg_ctl", data


def four_on_postgres(n: int, latency: float) -> dict:
    from fakellm import FakeLLM

    root = Path(tempfile.mkdtemp(prefix="cal-pg-"))
    url, as_user, pg_ctl, data = pg_cluster(root)
    try:
        build(url, n, root)
        server = FakeLLM(latency=latency).start()
        server.keep_requests = False
        try:
            started = time.perf_counter()
            ended([watch(url, server, root, "--once", concurrency=8) for _ in range(4)])
            seconds = time.perf_counter() - started
            verdicts, distinct, span = counts(url)
            items, repeated = repeats(server)
        finally:
            server.stop()
        from calibrate.db import dispose_engine

        dispose_engine(url)
    finally:
        subprocess.run([*as_user, str(pg_ctl), "-D", str(data), "-m", "immediate", "-w", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
    return {"n": n, "verdicts": verdicts, "distinct": distinct, "items": items, "repeated": repeated,
            "requests": server.stats()["requests"], "seconds": seconds, "rate": verdicts / span if span else 0.0}


def rate(watchers: int, n: int, slow: float) -> dict:
    from fakellm import FakeLLM

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/watch.sqlite"
        build(url, n, Path(tmp))
        server = FakeLLM(latency=slow).start()
        server.keep_requests = False
        server.gate = threading.Event()  # closed until every watcher has its first call in: start-up is left out
        try:
            procs = [watch(url, server, Path(tmp), "--once") for _ in range(watchers)]
            wait(lambda: server.stats()["requests"] >= watchers, "every watcher calls")
            server.gate.set()
            ended(procs)
            verdicts, distinct, span = counts(url)
            _, repeated = repeats(server)
        finally:
            server.stop()
    return {"watchers": watchers, "verdicts": verdicts, "repeated": repeated, "span": span, "rate": verdicts / span}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-sqlite", type=int, default=600)
    parser.add_argument("--n-pg", type=int, default=10_000)
    parser.add_argument("--n-rate", type=int, default=400)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds per call in parts 1-3")
    parser.add_argument("--slow", type=float, default=0.2, help="seconds per call in part 4 (the endpoint is the bottleneck)")
    parser.add_argument("--skip-pg", action="store_true")
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print("uptime:", load, flush=True)
    shared = two_watchers(args.n_sqlite, args.latency)
    print("two watchers, SQLite:", shared, flush=True)
    kill = kill_and_take_over(args.n_sqlite, args.latency)
    print("kill -9 and take-over, SQLite:", kill, flush=True)
    pg = None if args.skip_pg else four_on_postgres(args.n_pg, args.latency)
    print("four watchers, PostgreSQL:", pg, flush=True)
    one = rate(1, args.n_rate, args.slow)
    two = rate(2, args.n_rate, args.slow)
    ratio = two["rate"] / one["rate"]
    print("one watcher:", one, "two watchers:", two, f"ratio {ratio:.2f}", flush=True)
    after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    if args.record:
        record(args, load, after, shared, kill, pg, one, two, ratio)


def record(args, load, after, shared, kill, pg, one, two, ratio) -> None:
    lines = [f"## {dt.date.today().isoformat()}: watchers sharing a dataset", "",
             f"- machine: {platform.machine()}, {os.cpu_count()} CPUs (shared with other work), Python {platform.python_version()}, "
             f"SQLite {sqlite3.sqlite_version}; `uptime` before: `{load}`; after: `{after}`",
             f"- command: `python bench/bench_watch.py --n-sqlite {args.n_sqlite} --n-pg {args.n_pg} --n-rate {args.n_rate} "
             f"--latency {args.latency} --slow {args.slow} --record`; every watcher a `calibrate watch` process",
             "",
             "| case | targets | verdicts | distinct targets | items called | repeated calls | note |",
             "|---|---|---|---|---|---|---|",
             f"| two watchers, SQLite, --concurrency 4 | {shared['n']} | {shared['verdicts']} | {shared['distinct']} | "
             f"{shared['items']} | **{shared['repeated']}** | {shared['seconds']:.1f} s with start-up |",
             f"| two watchers, one killed -9 at {kill['at_kill']} verdicts; the other ends its pass; a third watcher "
             f"takes its expired leases ({LEASE} s) over and judges {kill['by_third']}, SIGTERM ends the third (exit {kill['sigterm_exit']}) "
             f"| {kill['n']} | {kill['verdicts']} | {kill['distinct']} | {kill['items']} | "
             f"**{kill['repeated']}** | bound: calls in flight + one unwritten batch = {kill['bound']} |"]
    if pg:
        lines.append(f"| four watchers, PostgreSQL, --concurrency 8 | {pg['n']} | {pg['verdicts']} | {pg['distinct']} | "
                     f"{pg['items']} | **{pg['repeated']}** | {pg['seconds']:.1f} s with start-up; {pg['rate']:.0f} verdicts/s |")
    lines += ["",
              f"Throughput with the endpoint as the bottleneck ({args.slow:g} s a call, --concurrency 4 a watcher, "
              f"{args.n_rate} targets, SQLite; first verdict to last):",
              "",
              "| watchers | verdicts | seconds | verdicts/s | repeated calls |", "|---|---|---|---|---|",
              f"| 1 | {one['verdicts']} | {one['span']:.2f} | {one['rate']:.1f} | {one['repeated']} |",
              f"| 2 | {two['verdicts']} | {two['span']:.2f} | {two['rate']:.1f} | {two['repeated']} |",
              "", f"**Two watchers / one: {ratio:.2f}×** (target ≥ 1.7×).", "", ""]
    header = "# Watchers sharing a dataset\n\nGenerated by `bench/bench_watch.py --record`; newest run first.\n\n"
    old = RESULTS.read_text(encoding="utf-8").removeprefix(header) if RESULTS.exists() else ""
    RESULTS.write_text(header + "\n".join(lines) + old, encoding="utf-8")


if __name__ == "__main__":
    main()
