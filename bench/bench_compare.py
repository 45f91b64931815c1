"""Benchmark: `calibrate compare` on 100,000 claims with a 2,000-resample paired bootstrap.

Same data as bench_report.py (10,000 samples × 10 claims, two annotators) plus a second
judge that agrees with the truth a little more often. Runs the real command as a subprocess;
baseline in the same run: the same command with a 100-resample bootstrap.

    .venv/bin/python bench/bench_compare.py
"""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_report import ROOT, build_db  # noqa: E402


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
        [(t, s, c, k, other[v] if f else v, now) for (t, s, c, k, v), f in zip(rows, flip)])
    con.commit()
    con.close()


def run(path: Path, bootstrap: int) -> float:
    env = {**os.environ, "CALIBRATE_INSTANCE": str(path.parent)}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "calibrate", "compare", "--db", f"sqlite:///{path}", "--dataset", "bench",
                    "--judge", "bench-judge", "--judge", "bench-judge-2", "--bootstrap", str(bootstrap)],
                   check=True, capture_output=True, env=env, cwd=ROOT)
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        build_db(path, 10_000, 10)
        add_second_judge(path)
        base = run(path, 100)
        full = run(path, 2000)
    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, load {os.getloadavg()[0]:.2f}")
    print(f"compare, 100-resample bootstrap (baseline): {base:.2f} s")
    print(f"compare, 2,000-resample paired bootstrap:   {full:.2f} s (target ≤ 5 s); ratio {full / base:.2f}x")


if __name__ == "__main__":
    main()
