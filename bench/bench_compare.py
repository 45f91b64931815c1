"""Benchmark: `calibrate compare` on 100,000 claims with a 2,000-resample paired bootstrap.

Same data as bench_report.py (10,000 samples × 10 claims, two annotators) plus a second
judge that agrees with the truth a little more often. Runs the real command as a subprocess;
baseline in the same run: the same command with a 100-resample bootstrap. Each is run
`--repeat` times, interleaved, and the spread is reported (the machine is shared).

    .venv/bin/python bench/bench_compare.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_report import ROOT, build_db


def add_second_judge(path: Path, seed: int = 1) -> None:
    """Add judge 'bench-judge-2': a copy of the first with 5 % of its verdicts flipped."""
    con = sqlite3.connect(path)
    now = "2026-01-01 00:00:00"
    con.execute("INSERT INTO judge (id, name, kind, description, created_at) VALUES (2, 'bench-judge-2', 'imported', '', ?)", (now,))
    rows = con.execute("SELECT task_id, sample_id, claim_id, target_key, value FROM verdict WHERE judge_id = 1").fetchall()
    flip = np.random.default_rng(seed).random(len(rows)) < 0.05
    other = {"supported": "unsupported", "unsupported": "supported"}
    con.executemany(
        "INSERT INTO verdict (judge_id, task_id, sample_id, claim_id, target_key, value, status, reason, raw, error, cached, source, created_at) "
        "VALUES (2, ?, ?, ?, ?, ?, 'ok', '', '', '', 0, 'import', ?)",
        [(t, s, c, k, other[v] if f else v, now) for (t, s, c, k, v), f in zip(rows, flip, strict=True)])
    con.commit()
    con.close()


def run(path: Path, bootstrap: int) -> tuple[float, float]:
    """Run the command once; return (wall time, the child's CPU time) in seconds.

    The CPU time (user + system) is the less noisy of the two on a shared machine: waiting for
    a core does not count in it.
    """
    env = {**os.environ, "CALIBRATE_INSTANCE": str(path.parent)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "calibrate", "compare", "--db", f"sqlite:///{path}", "--dataset", "bench",
                    "--judge", "bench-judge", "--judge", "bench-judge-2", "--bootstrap", str(bootstrap)],
                   check=True, capture_output=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="Runs of each command, interleaved (default 5).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        build_db(path, 10_000, 10)
        add_second_judge(path)
        run(path, 100)  # warm the page cache: every measured run reads a warm file
        load_before = os.getloadavg()
        base, full = [], []
        for _ in range(args.repeat):  # interleaved, so a burst of load hits both
            base.append(run(path, 100))
            full.append(run(path, 2000))
        load_after = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load (1/5/15 min) {' '.join(f'{x:.2f}' for x in load_before)} before, {' '.join(f'{x:.2f}' for x in load_after)} after")
    for name, runs in (("compare, 100-resample bootstrap (baseline)", base), ("compare, 2,000-resample paired bootstrap", full)):
        print(f"{name}: wall {_spread([w for w, _ in runs])}; CPU {_spread([c for _, c in runs])}")
    ratios = [f[0] / b[0] for b, f in zip(base, full, strict=True)]
    print(f"ratio 2,000 / 100 (wall, per pair): {_spread(ratios).replace(' s', '')}; target: 2,000 resamples ≤ 5 s wall")


if __name__ == "__main__":
    main()
