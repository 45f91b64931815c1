"""Benchmark judge runs against the local fake LLM server (tests/judges/fakellm.py).

The server runs in its own process (a ThreadingHTTPServer, one thread per connection), with
50 ms latency and no faults, and counts the requests it receives. The client is the real
runner (`calibrate.judges.run_judge`: rendering, the cache lookup, httpx with bounded
concurrency, parsing, batched commits to SQLite), timed from start to the last commit.

1. 2,000 claims at concurrency 64: target ≤ 1.3 × the ideal 2,000 × 0.05 s / 64 = 1.56 s.
2. The same 2,000 at concurrency 16 (RAGAS's default), with another model so nothing is cached:
   ideal 6.25 s.
3. The first version again with --rerun: every answer from the response cache, target ≤ 2 s
   and zero requests at the server.

With `--repeat K` the concurrency-64 run is made K times (each with its own model name, so
nothing is cached), each row with the load average just before it: the machine is shared.
One more concurrency-64 run goes through httpx's default transport (`ShardedTransport`, what
https endpoints use) instead of `H11Transport`: the same load, for comparison.

    .venv/bin/python bench/bench_judge.py [--n 2000] [--latency 0.05] [--repeat K] [--record]

`--record` prepends the figures to bench/results/judge.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "judge.md"
sys.path.insert(0, str(ROOT / "tests" / "judges"))


def server_requests(url: str) -> int:
    with urllib.request.urlopen(url + "/_stats") as response:
        return json.loads(response.read())["requests"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--repeat", type=int, default=1, help="make the concurrency-64 run this many times")
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()

    from judge_helpers import write_samples

    from calibrate.db import get_engine, write_session
    from calibrate.ingest import import_file
    from calibrate.judges import RunOptions, RunSpec, run_judge, save_version
    from calibrate.judges.backends import ShardedTransport
    from calibrate.migrations import upgrade
    from calibrate.tasks import ensure_builtin_tasks

    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "judges" / "fakellm.py"), "--port", "0",
                               "--latency", str(args.latency)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        url = f"http://127.0.0.1:{port}"
        tmp = Path(tempfile.mkdtemp(prefix="bench-judge-"))
        engine = get_engine(f"sqlite:///{tmp / 'bench.sqlite'}")
        upgrade(engine)
        with write_session(engine) as session:
            ensure_builtin_tasks(session)
        samples = write_samples(tmp / "samples.jsonl", args.n // 5, 5)
        with write_session(engine) as session:
            import_file(session, "samples", samples, dataset="bench")
            for i in range(args.repeat):
                save_version(session, f"bench64-{i + 1}", task="claim_support", model=f"fake-64-{i + 1}")
            save_version(session, "bench16", task="claim_support", model="fake-16")
            save_version(session, "bench64-default", task="claim_support", model="fake-64-default")
        load = os.getloadavg()[0]
        rows = []
        plan = [(f"{args.n} claims, concurrency 64" + (f" (#{i + 1})" if args.repeat > 1 else ""), f"bench64-{i + 1}@1", 64, False)
                for i in range(args.repeat)]
        plan += [(f"{args.n} claims, concurrency 16 (RAGAS default)", "bench16@1", 16, False),
                 (f"{args.n} claims, concurrency 64, httpx's default transport (comparison)", "bench64-default@1", 64, False),
                 ("concurrency 64 again, --rerun (cache)", "bench64-1@1", 64, True)]
        for label, prompt, concurrency, rerun in plan:
            load_before = os.getloadavg()[0]
            transport = ShardedTransport(concurrency) if "default transport" in label else None
            before = server_requests(url)
            spec = RunSpec(dataset="bench", prompt=prompt, backend="openai", base_url=url + "/v1", api_key_env="",
                           rerun=rerun, options=RunOptions(concurrency=concurrency, batch_size=100))
            started, cpu = time.perf_counter(), time.process_time()
            summary = run_judge(engine, spec, transport=transport)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            calls = server_requests(url) - before
            ideal = 0.0 if rerun else args.n * args.latency / concurrency
            rows.append((label, wall, summary.call_seconds, cpu, calls, summary.n_done, summary.n_cached, ideal, load_before))
            print(f"{label}: {wall:.2f} s wall ({summary.call_seconds:.2f} s of calls), {cpu:.2f} s CPU, {calls} requests, "
                  f"{summary.n_done} judged, {summary.n_cached} cached"
                  + (f", calls {summary.call_seconds / ideal:.2f}× / whole run {wall / ideal:.2f}× the ideal {ideal:.2f} s" if ideal else ""),
                  flush=True)
    finally:
        server.terminate()
        server.wait()
    if args.record:
        record(args, rows, load)


def record(args: argparse.Namespace, rows: list[tuple], load: float) -> None:
    lines = [
        f"## {dt.date.today().isoformat()}: {args.n} claims, {int(args.latency * 1000)} ms server latency, no faults",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs (nproc), Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.release()}",
        f"- command: `python bench/bench_judge.py --n {args.n} --latency {args.latency}"
        + (f" --repeat {args.repeat}" if args.repeat > 1 else "") + " --record` "
        "(the fake server in its own process on loopback; the runner in this one; plain http, so the client "
        "transport is `calibrate.judges.transport.H11Transport`)",
        f"- load average before the first run: {load:.2f}",
        "",
        "| run | load before | whole run s | calls s | CPU s (client) | requests at the server | judged | from the cache "
        "| ideal s | calls / ideal | whole run / ideal |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, wall, call_s, cpu, calls, done, cached, ideal, load_before in rows:
        ratio = f"**{call_s / ideal:.2f}×**" if ideal else "–"
        whole = f"{wall / ideal:.2f}×" if ideal else "–"
        lines.append(f"| {label} | {load_before:.2f} | {wall:.2f} | {call_s:.2f} | {cpu:.2f} | {calls} | {done} | {cached} "
                     f"| {ideal:.2f} | {ratio} | {whole} |")
    runs64, cache = rows[:args.repeat], rows[-1]
    met = sum(row[2] <= 1.3 * row[7] for row in runs64)
    met_whole = sum(row[1] <= 1.3 * row[7] for row in runs64)
    lines += [
        "",
        "- *whole run*: `run_judge` from start to the last commit (targets, rendering, cache lookup, calls, writes);"
        " *calls*: from the first HTTP call to the last answer written.",
        f"- concurrency 64, calls within 1.3× the ideal: met in {met} of {len(runs64)} runs"
        f" (whole run: {met_whole} of {len(runs64)}); "
        f"cached rerun ≤ 2 s with zero requests: {'met' if cache[1] <= 2 and cache[4] == 0 else 'NOT met'}",
        "",
    ]
    header = "# Judge-run benchmark\n\nGenerated by `bench/bench_judge.py --record`; newest run first.\n\n"
    old = RESULTS.read_text(encoding="utf-8").removeprefix(header) if RESULTS.exists() else ""
    RESULTS.write_text(header + "\n".join(lines) + "\n" + old, encoding="utf-8")


if __name__ == "__main__":
    main()
