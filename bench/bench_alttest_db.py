"""Benchmark: the whole `calibrate alt-test` path from the database on 2,500 items × 4 annotators (target ≤ 1 s).

Data (seed 0): 2,500 samples of one claim each in a fresh SQLite database; four annotators
label every claim for claim_support (supported / unsupported, the true label with probability
0.8) and every answer for answer_quality (a true 1–5 rating plus Gaussian noise, sd 0.8,
rounded and clipped); one imported judge gives a verdict on each (0.85 / sd 0.7). So each task
has 2,500 items × 4 annotators = 10,000 labels and 2,500 verdicts.

Timed, `--repeat` times each, interleaved (median and min of the wall time, median CPU time:
`time.process_time`, which waiting for a core on this shared machine does not inflate):

- `calibration.alttest.run_alt_test` in one process: reading the labels and the verdicts from
  the database (with the split and few-shot filters), then the test — the domain call
  `calibrate alt-test` makes;
- baseline in the same run: `stats.alttest.alt_test` alone, on the same arrays already in memory;
- the command itself, `calibrate alt-test … --format json`, as a subprocess (wall and the child's
  CPU time): what a user waits for, including starting Python and importing pandas and SciPy.

    .venv/bin/python bench/bench_alttest_db.py            # print the section
    .venv/bin/python bench/bench_alttest_db.py --write    # also put it in bench/results/alttest.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlmodel import Session, select

from calibrate.accounts import ensure_annotator
from calibrate.calibration.alttest import alt_test_labels, run_alt_test
from calibrate.calibration.frames import verdicts_frame
from calibrate.db import dispose_engine, get_engine, write_session
from calibrate.migrations import upgrade
from calibrate.models import Claim, Dataset, Judge, Label, Sample, Task, Verdict
from calibrate.stats.alttest import alt_test
from calibrate.tasks import ensure_builtin_tasks

RESULTS = ROOT / "bench" / "results" / "alttest.md"
BEGIN, END = "<!-- bench_alttest_db: begin -->", "<!-- bench_alttest_db: end -->"


def build(url: str, n_items: int, n_annotators: int, seed: int = 0) -> None:
    """Create the database: samples with one claim, the annotators' labels of both tasks and the judge's verdicts."""
    rng = np.random.default_rng(seed)
    engine = get_engine(url)
    upgrade(engine)
    with write_session(engine) as session:
        ensure_builtin_tasks(session)
        tasks = {t.name: t for t in session.exec(select(Task)).all()}
        dataset = Dataset(name="bench", source="bench_alttest_db")
        session.add(dataset)
        session.flush()
        samples = [Sample(dataset_id=dataset.id, external_id=f"s{i:05d}", question="q", answer="a", content_hash="h")
                   for i in range(n_items)]
        session.add_all(samples)
        session.flush()
        claims = [Claim(sample_id=s.id, index=0, text="c", start=-1, end=-1) for s in samples]
        session.add_all(claims)
        session.flush()
        users = [ensure_annotator(session, f"annotator-{a}") for a in range(n_annotators)]
        judge = Judge(name="judge", kind="imported")
        session.add(judge)
        session.flush()
        truth_claim = rng.random(n_items) < 0.6
        truth_score = rng.integers(1, 6, n_items)
        flip = {True: "supported", False: "unsupported"}
        rows = []
        for who in [*users, None]:
            right = rng.random(n_items) < (0.85 if who is None else 0.8)
            scores = np.clip(np.rint(truth_score + rng.normal(0, 0.7 if who is None else 0.8, n_items)), 1, 5).astype(int)
            for i, (sample, claim) in enumerate(zip(samples, claims, strict=True)):
                value = flip[bool(truth_claim[i]) == bool(right[i])]
                if who is None:
                    rows.append(Verdict(judge_id=judge.id, task_id=tasks["claim_support"].id, sample_id=sample.id,
                                        claim_id=claim.id, target_key=f"claim:{claim.id}", value=value, status="ok", source="import"))
                    rows.append(Verdict(judge_id=judge.id, task_id=tasks["answer_quality"].id, sample_id=sample.id,
                                        target_key=f"sample:{sample.id}", value=str(scores[i]), status="ok", source="import"))
                else:
                    rows.append(Label(task_id=tasks["claim_support"].id, annotator_id=who.id, sample_id=sample.id, claim_id=claim.id,
                                      target_key=f"claim:{claim.id}", value=value, source="import"))
                    rows.append(Label(task_id=tasks["answer_quality"].id, annotator_id=who.id, sample_id=sample.id,
                                      target_key=f"sample:{sample.id}", value=str(scores[i]), source="import"))
        session.add_all(rows)


def timed(fn, repeat: int) -> tuple[float, float, float, object]:
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), min(walls), statistics.median(cpus), out


def command(url: str, task: str) -> tuple[float, float]:
    """Run `calibrate alt-test` as a subprocess; return its wall time and its CPU time (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([str(ROOT / ".venv" / "bin" / "calibrate"), "alt-test", "--dataset", "bench", "--task", task, "--judge", "judge",
                    "--format", "json", "--db", url], check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=2500)
    parser.add_argument("--annotators", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    up_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.sqlite"
        start = time.perf_counter()
        build(url, args.items, args.annotators)
        built = time.perf_counter() - start
        engine = get_engine(url)
        rows = []
        for task, scoring in (("claim_support", "accuracy"), ("answer_quality", "neg_rmse")):
            with Session(engine) as session:
                dataset = session.exec(select(Dataset)).one()
                task_row = session.exec(select(Task).where(Task.name == task)).one()
                judge = session.exec(select(Judge)).one()
                labels = alt_test_labels(session, dataset, task_row, None)
                verdicts = verdicts_frame(session, dataset, task_row, judge)
                human = labels["value"].to_numpy() if scoring == "accuracy" else labels["value"].astype(float).to_numpy()
                verdict = verdicts["value"].to_numpy() if scoring == "accuracy" else verdicts["value"].astype(float).to_numpy()
                arrays = (labels["target_key"].to_numpy(), labels["annotator"].to_numpy(), human,
                          verdicts["target_key"].to_numpy(), verdict)
                whole = timed(lambda: run_alt_test(session, "bench", task, "judge"), args.repeat)  # noqa: B023 - timed now
                pure = timed(lambda: alt_test(*arrays, scoring=scoring), args.repeat)  # noqa: B023 - timed now
            walls = [command(url, task) for _ in range(3)]
            result = whole[3]
            assert result["status"] == "ok" and result["n_items"] == args.items and result["n_annotators"] == args.annotators
            assert result["winning_rate"] == pure[3].winning_rate and result["advantage_prob"] == pure[3].advantage_prob
            rows.append(f"| {task} ({scoring}) | {whole[0] * 1000:.0f} ms | {whole[1] * 1000:.0f} ms | {whole[2] * 1000:.0f} ms | "
                        f"{pure[0] * 1000:.1f} ms | {(whole[0] - pure[0]) * 1000:.0f} ms | "
                        f"{statistics.median(w for w, _ in walls):.2f} s | {statistics.median(c for _, c in walls):.2f} s | "
                        f"ω {result['winning_rate']:.2f}, ρ {result['advantage_prob']:.3f} |")
        dispose_engine(url)
    up_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    lines += [BEGIN, "## The whole path from the database: `calibrate alt-test`", "",
              f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; `nproc` = {os.cpu_count()}; Python {platform.python_version()}, "
              f"numpy {np.__version__}; SQLite (a fresh file)",
              f"- `uptime` before: `{up_before}`", f"- `uptime` after: `{up_after}` (shared machine)",
              f"- Workload: {args.items:,} items × {args.annotators} annotators (every annotator labels every item: "
              f"{args.items * args.annotators:,} labels) and {args.items:,} verdicts per task, in the database "
              f"(built in {built:.1f} s, not timed)",
              "- Command: `.venv/bin/python bench/bench_alttest_db.py --write`", "",
              "| task (scoring) | `run_alt_test`: read + test, wall median | wall min | CPU median "
              "| baseline: `alt_test` alone, same arrays | reading (difference) "
              "| `calibrate alt-test` subprocess, wall median of 3 | its CPU | result |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---|",
              *rows, "",
              "Target: ≤ 1 s of compute for the test on 2,500 items × 4 annotators. The domain call (reading the labels "
              "and verdicts from SQLite, then the test) stays far under it; most of its time is reading the rows. The "
              "subprocess adds starting Python and importing pandas, SciPy and SQLAlchemy, which every command pays "
              "([startup.md](startup.md)).", END]
    text = "\n".join(lines)
    print(text)
    if args.write:
        current = RESULTS.read_text(encoding="utf-8")
        if BEGIN in current:
            head, rest = current.split(BEGIN, 1)
            current = head + text + rest.split(END, 1)[1]
        else:
            current = current.rstrip("\n") + "\n\n" + text + "\n"
        RESULTS.write_text(current, encoding="utf-8")


if __name__ == "__main__":
    main()
