"""Benchmark claim extraction (`calibrate claims extract`) against the local fake LLM server.

What an extraction adds to a judge run is its apply step: in the transaction that stores a
batch of verdicts, each answer's claims are replaced (old claims retired, new ones inserted
with their verbatim spans, the labels on them flagged stale, the sample's claim source set).
So the baseline is a judge run with the same number of calls that applies nothing: an
answer_quality prompt over the same answers (one call per answer). Both runs: the real runner,
the fake server in its own process (`--latency` per call, no faults), concurrency 64.

1. answer_quality over N answers (baseline: N calls, no apply step)
2. claims extract over the same N answers (N calls, each answer's claims replaced)
3. the extraction again: nothing to do (zero requests), the time to find that out
4. a second extraction version with --force over answers whose claims each carry a label (N
   new calls, every answer's claims replaced again, N labels flagged stale)

    .venv/bin/python bench/bench_extract.py [--n 2000] [--latency 0.05] [--record]

`--record` prepends the figures to bench/results/extract.md.
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
RESULTS = ROOT / "bench" / "results" / "extract.md"


def server_requests(url: str) -> int:
    with urllib.request.urlopen(url + "/_stats") as response:
        return json.loads(response.read())["requests"]


def write_answers(path: Path, n: int) -> Path:
    """Write n samples whose answers the fake server splits into four claims (the segmenter into two)."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            answer = f"Tome {i} mg al día y descanse {i % 9 + 1} horas. Consulte a su médico y evite el alcohol."
            fh.write(json.dumps({"id": f"s{i:05d}", "question": f"¿Pregunta {i}?", "answer": answer,
                                 "contexts": [f"Pasaje {i}: {i} mg al día."]}, ensure_ascii=False) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()

    from sqlmodel import select

    from calibrate.accounts import add_user
    from calibrate.db import get_engine, write_session
    from calibrate.ingest import import_file
    from calibrate.judges import NothingToDo, RunOptions, RunSpec, prepare_run, run_judge, save_version
    from calibrate.migrations import upgrade
    from calibrate.models import Claim, Label, Task
    from calibrate.tasks import ensure_builtin_tasks

    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "judges" / "fakellm.py"), "--port", "0",
                               "--latency", str(args.latency), "--claims"], stdout=subprocess.PIPE, text=True)
    rows = []
    try:
        url = f"http://127.0.0.1:{int(server.stdout.readline())}"
        tmp = Path(tempfile.mkdtemp(prefix="bench-extract-"))
        engine = get_engine(f"sqlite:///{tmp / 'bench.sqlite'}")
        upgrade(engine)
        with write_session(engine) as session:
            ensure_builtin_tasks(session)
            import_file(session, "samples", write_answers(tmp / "samples.jsonl", args.n), dataset="bench")
            save_version(session, "quality", task="answer_quality", model="fake-quality")
            save_version(session, "ex", task="claim_extraction", model="fake-extract")
            save_version(session, "ex2", task="claim_extraction", model="fake-extract-2")
        load = os.getloadavg()[0]

        def spec(prompt: str, **more) -> RunSpec:
            return RunSpec(dataset="bench", prompt=prompt, backend="openai", base_url=url + "/v1", api_key_env="",
                           options=RunOptions(concurrency=64, batch_size=100), **more)

        def timed(label: str, make_spec: RunSpec) -> None:
            load_before, before = os.getloadavg()[0], server_requests(url)
            started, cpu = time.perf_counter(), time.process_time()
            try:
                summary = run_judge(engine, make_spec)
                done, call_s = summary.n_done, summary.call_seconds
            except NothingToDo:
                done, call_s = 0, 0.0
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            calls = server_requests(url) - before
            rows.append((label, load_before, wall, call_s, cpu, calls, done))
            print(f"{label}: {wall:.2f} s wall ({call_s:.2f} s of calls), {cpu:.2f} s CPU, {calls} requests, {done} done",
                  flush=True)

        timed(f"answer_quality over {args.n} answers (baseline: no apply step)", spec("quality@1"))
        timed(f"claims extract over {args.n} answers", spec("ex@1", extraction=True))
        timed("claims extract again: nothing to do", spec("ex@1", extraction=True))
        # One expert label per answer, on its first claim; then a second version with --force.
        with write_session(engine) as session:
            user = add_user(session, "bench", role="annotator", password="password-123")
            task = session.exec(select(Task).where(Task.name == "claim_support")).one()
            claims = session.exec(select(Claim).where(Claim.active, Claim.index == 0)).all()
            session.add_all(Label(task_id=task.id, sample_id=c.sample_id, claim_id=c.id, target_key=f"claim:{c.id}",
                                  annotator_id=user.id, value="supported") for c in claims)
        try:
            prepare_run(engine, spec("ex2@1", extraction=True))
            raise AssertionError("every answer carries a label: nothing should be eligible without --force")
        except NothingToDo:
            pass
        timed(f"claims extract --force over {args.n} labelled answers (second version: {args.n} labels flagged stale)",
              spec("ex2@1", extraction=True, force=True))
    finally:
        server.terminate()
        server.wait()
    if args.record:
        record(args, rows, load)


def record(args: argparse.Namespace, rows: list[tuple], load: float) -> None:
    base = rows[0][2]
    ideal = args.n * args.latency / 64
    lines = [
        f"## {dt.date.today().isoformat()}: {args.n} answers, {int(args.latency * 1000)} ms server latency, concurrency 64",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs (nproc), Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.release()}",
        f"- command: `python bench/bench_extract.py --n {args.n} --latency {args.latency} --record`",
        f"- load average before the first run: {load:.2f}; ideal time of {args.n} calls at concurrency 64: {ideal:.2f} s",
        "",
        "| run | load before | whole run s | calls s | CPU s (client) | requests | done | whole run / baseline |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, load_before, wall, call_s, cpu, calls, done in rows:
        lines.append(f"| {label} | {load_before:.2f} | {wall:.2f} | {call_s:.2f} | {cpu:.2f} | {calls} | {done} "
                     f"| {wall / base:.2f}× |")
    lines += ["", "- *baseline*: the same number of calls through the same runner without an apply step; the ratio is "
              "the cost of replacing the claims (and, with --force, flagging the labels) in the writer's transactions.", ""]
    header = "# Claim-extraction benchmark\n\nGenerated by `bench/bench_extract.py --record`; newest run first.\n\n"
    old = RESULTS.read_text(encoding="utf-8").removeprefix(header) if RESULTS.exists() else ""
    RESULTS.write_text(header + "\n".join(lines) + "\n" + old, encoding="utf-8")


if __name__ == "__main__":
    main()
