"""Benchmark `calibrate traces import` on 10,000 generated OpenInference traces (issue 23's "must show" at full size).

The traces are built as OTLP protobuf (root CHAIN, RETRIEVER, LLM spans; tests/ingest/trace_helpers.py),
5 % of spans sent twice, 3 % of traces thumbs-down in a feedback file, and written as protobuf,
OTLP/JSON (hex ids, as the collector writes) and OTLP/JSONL. Each run imports into a fresh
migrated SQLite database in this process and checks the issue's properties exactly: created =
thumbs-down + |{u < 0.05}|, no duplicate sample, a second import creates nothing, the 1 %
sample inside the 5 % one, the three encodings giving identical samples. Throughput is spans
per second read through to stored samples; the baseline, from the same run, is
`calibrate import samples` of the same samples as a JSONL file (what the traces import hands
over), so the ratio is the cost of decoding, grouping, sampling and mapping.

    .venv/bin/python bench/bench_traces.py [--n 10000] [--record]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "ingest"))

from trace_helpers import synthetic_request, trace_id_of, write_encodings

from calibrate.db import dispose_engine, get_engine, write_session
from calibrate.ingest import import_in_chunks
from calibrate.ingest.traces import import_traces, inclusion_u
from calibrate.migrations import upgrade
from calibrate.tasks import ensure_builtin_tasks

RESULTS = ROOT / "bench" / "results" / "traces.md"


def fresh_engine(folder: Path, name: str):
    url = f"sqlite:///{folder / (name + '.sqlite')}"
    engine = get_engine(url)
    upgrade(engine)
    with write_session(engine) as session:
        ensure_builtin_tasks(session)
    return engine, url


def stored(url: str, dataset: str) -> list[tuple]:
    con = sqlite3.connect(url.removeprefix("sqlite:///"))
    try:
        return con.execute(
            "SELECT s.external_id, s.question, s.answer, s.feedback, s.metadata, group_concat(c.text || '|' || c.doc_id, '\n') "
            "FROM sample s JOIN dataset d ON d.id = s.dataset_id LEFT JOIN context c ON c.sample_id = s.id "
            "WHERE d.name = ? GROUP BY s.id ORDER BY s.external_id", (dataset,)).fetchall()
    finally:
        con.close()


def timed(call, *args, **kwargs):
    wall, cpu = time.perf_counter(), time.process_time()
    result = call(*args, **kwargs)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    n = args.n
    uptime_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    rows, checks = [], []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = write_encodings(folder / "files", synthetic_request(n, repeat_every=20), lines=max(1, n // 500))
        down = {trace_id_of(i) for i in range(0, n, 33)}
        feedback = folder / "feedback.jsonl"
        feedback.write_text("".join(json.dumps({"trace_id": t, "value": "down"}) + "\n" for t in sorted(down)))
        ids = {trace_id_of(i) for i in range(n)}
        expected = down | {t for t in ids if inclusion_u("prod", t) < 0.05}

        samples = {}
        for fmt, path in files.items():
            engine, url = fresh_engine(folder, fmt)
            summary, wall, cpu = timed(import_traces, engine, [path], dataset="prod", feedback=feedback, rate=0.05)
            rows.append((f"{fmt}, rate 0.05 + thumbs-down ({path.stat().st_size / 1e6:.1f} MB)", summary.spans
                         + summary.duplicate_spans, summary.created, wall, cpu))
            samples[fmt] = stored(url, "prod")
            checks.append(f"{fmt}: created {summary.created:,} = thumbs-down {len(down):,} + |u < 0.05| "
                          f"{len(expected - down):,} → {'✓' if summary.created == len(expected) else '✗'}; "
                          f"samples = expected ids: {'✓' if {r[0] for r in samples[fmt]} == expected else '✗'}; "
                          f"duplicate_spans {summary.duplicate_spans:,}")
            again, wall, cpu = timed(import_traces, engine, [path], dataset="prod", feedback=feedback, rate=0.05)
            rows.append((f"{fmt}, the same again", again.spans + again.duplicate_spans, again.created, wall, cpu))
            checks.append(f"{fmt} again: created {again.created}, unchanged {again.unchanged:,} "
                          f"{'✓' if again.created == 0 and again.unchanged == len(expected) else '✗'}")
            dispose_engine(url)
        same = samples["otlp-proto"] == samples["otlp-json"] == samples["otlp-jsonl"]
        checks.append(f"protobuf, JSON and JSONL give identical samples (ids, texts, feedback, metadata, contexts): "
                      f"{'✓' if same else '✗'}")

        engine, url = fresh_engine(folder, "all")
        summary, wall, cpu = timed(import_traces, engine, [files["otlp-proto"]], dataset="all", rate=1.0)
        rows.append(("otlp-proto, rate 1.0 (every trace)", summary.spans + summary.duplicate_spans, summary.created, wall, cpu))
        traces_cpu = cpu
        one = import_traces(engine, [files["otlp-proto"]], dataset="one", salt="prod", rate=0.01)
        five = import_traces(engine, [files["otlp-proto"]], dataset="five", salt="prod", rate=0.05)
        small, large = {r[0] for r in stored(url, "one")}, {r[0] for r in stored(url, "five")}
        checks.append(f"1 % sample ({one.created:,}) ⊂ 5 % sample ({five.created:,}): {'✓' if small < large else '✗'}")

        # Baseline: the same samples as a plain samples file through `calibrate import samples`' code.
        plain = folder / "samples.jsonl"
        con = sqlite3.connect(url.removeprefix("sqlite:///"))
        with plain.open("w") as handle:
            for sample_id, question, answer, metadata in con.execute(
                    "SELECT s.id, s.question, s.answer, s.metadata FROM sample s JOIN dataset d ON d.id = s.dataset_id "
                    "WHERE d.name = 'all'"):
                contexts = [{"text": t, "doc_id": d} for t, d in con.execute(
                    "SELECT text, doc_id FROM context WHERE sample_id = ? ORDER BY rank", (sample_id,))]
                handle.write(json.dumps({"id": json.loads(metadata)["trace_id"], "question": question, "answer": answer,
                                         "contexts": contexts, "metadata": json.loads(metadata)}) + "\n")
        con.close()
        dispose_engine(url)
        engine, url = fresh_engine(folder, "baseline")
        result, wall, cpu = timed(import_in_chunks, engine, "samples", plain, dataset="all")
        rows.append(("baseline: the same samples as JSONL, `import samples`", 0, result.added, wall, cpu))
        baseline_cpu = cpu
        dispose_engine(url)
    uptime_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()

    lines = [f"## {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC: {n:,} traces ({3 * n:,} spans + 5 % repeated), 3 % thumbs-down",
             "",
             f"- machine: {platform.machine()}, Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}",
             f"- `uptime` before: `{uptime_before}`",
             f"- `uptime` after: `{uptime_after}` (shared machine: other engineers' jobs run meanwhile)",
             f"- command: `.venv/bin/python bench/bench_traces.py --n {n}` (in one process; each run a fresh migrated SQLite file)",
             "",
             "| run | spans read | samples created | wall s | CPU s | spans per CPU s |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, spans, created, wall, cpu in rows:
        rate = f"{spans / cpu:,.0f}" if spans else "—"
        lines.append(f"| {name} | {spans:,} | {created:,} | {wall:.2f} | {cpu:.2f} | {rate} |")
    lines += ["", f"- every trace stored (rate 1.0) costs **{traces_cpu / baseline_cpu:.2f}×** the CPU of importing the same "
              f"{n:,} samples from a samples file (same run): the difference is decoding, grouping, sampling and mapping.",
              "", "Checks (the issue's must-show, at full size):", ""] + [f"- {c}" for c in checks]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.record:
        head = ("# Traces import benchmark\n\nGenerated by `bench/bench_traces.py --record`; newest run first. "
                "Each section is one invocation.\n\n")
        old = RESULTS.read_text().split("\n## ", 1)[1] if RESULTS.exists() and "\n## " in RESULTS.read_text() else ""
        RESULTS.write_text(head + text + ("\n## " + old if old else ""))


if __name__ == "__main__":
    main()
