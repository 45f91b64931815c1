"""Benchmark: `calibrate report --format json` on 100,000 claims in 10,000 samples.

Two annotators and one judge label every claim (200,000 labels, 100,000 verdicts). The report
runs as a real subprocess (the CLI a user runs) with a 2,000-resample cluster bootstrap;
wall time and peak RSS are measured. As the baseline in the same run, the same command on
the same data with `--bootstrap 100`, so the cost of the bootstrap itself shows as a ratio.

    .venv/bin/python bench/bench_report.py [--samples 10000] [--claims 10]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def build_db(path: Path, n_samples: int, n_claims: int, seed: int = 0) -> None:
    """Create a migrated database and fill it with bulk SQL (fast, independent of the import code)."""
    env = {**os.environ, "CALIBRATE_INSTANCE": str(path.parent)}
    subprocess.run([sys.executable, "-m", "calibrate", "init", "--db", f"sqlite:///{path}"], check=True, env=env,
                   capture_output=True, cwd=ROOT)
    rng = np.random.default_rng(seed)
    con = sqlite3.connect(path)
    now = "2026-01-01 00:00:00"
    con.execute("INSERT INTO dataset (id, name, description, source, is_demo, created_at) VALUES (1, 'bench', '', 'bench', 0, ?)", (now,))
    con.executemany("INSERT INTO user (id, username, display_name, role, active, created_at) VALUES (?, ?, '', 'annotator', 1, ?)",
                    [(1, "ann1", now), (2, "ann2", now)])
    con.execute("INSERT INTO judge (id, name, kind, description, created_at) VALUES (1, 'bench-judge', 'imported', '', ?)", (now,))
    task = con.execute("SELECT id FROM task WHERE name = 'claim_support'").fetchone()[0]
    con.executemany(
        "INSERT INTO sample (id, dataset_id, external_id, question, answer, metadata, content_hash, segmenter, created_at, updated_at) "
        "VALUES (?, 1, ?, 'q', 'a', ?, 'h', 'given', ?, ?)",
        [(i + 1, f"s{i}", json.dumps({"topic": f"t{i % 7}"}), now, now) for i in range(n_samples)],
    )
    n = n_samples * n_claims
    sample_of = np.repeat(np.arange(1, n_samples + 1), n_claims)
    con.executemany("INSERT INTO claim (id, sample_id, \"index\", text, start, \"end\", active) VALUES (?, ?, ?, 'c', -1, -1, 1)",
                    [(i + 1, int(sample_of[i]), i % n_claims) for i in range(n)])
    truth = rng.random(n) < 0.65
    a1 = np.where(rng.random(n) < 0.9, truth, ~truth)
    a2 = np.where(rng.random(n) < 0.9, truth, ~truth)
    judge = np.where(rng.random(n) < 0.85, truth, ~truth)
    label = np.where
    rows = []
    for annotator, values in ((1, a1), (2, a2)):
        rows += [(task, int(sample_of[i]), i + 1, f"claim:{i + 1}", annotator, "supported" if values[i] else "unsupported", now, now)
                 for i in range(n)]
    con.executemany(
        "INSERT INTO label (task_id, sample_id, claim_id, target_key, annotator_id, value, rationale, adjudicated, stale, "
        "stale_reason, source, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, '', 0, 0, '', 'import', ?, ?)", rows)
    con.executemany(
        "INSERT INTO verdict (judge_id, task_id, sample_id, claim_id, target_key, value, status, reason, raw, error, cached, source, created_at) "
        "VALUES (1, ?, ?, ?, ?, ?, 'ok', '', '', '', 0, 'import', ?)",
        [(task, int(sample_of[i]), i + 1, f"claim:{i + 1}", "supported" if judge[i] else "unsupported", now) for i in range(n)])
    del label
    con.commit()
    con.close()


def run_report(path: Path, bootstrap: int) -> tuple[float, float, dict]:
    """Run the report as a subprocess; return wall seconds, peak RSS in MB, and the parsed JSON."""
    env = {**os.environ, "CALIBRATE_INSTANCE": str(path.parent)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "calibrate", "report", "--db", f"sqlite:///{path}", "--dataset", "bench",
         "--judge", "bench-judge", "--bootstrap", str(bootstrap), "--format", "json"],
        check=True, capture_output=True, text=True, env=env, cwd=ROOT,
    )
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, max(peak, before) / 1024, json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--claims", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        t0 = time.perf_counter()
        build_db(path, args.samples, args.claims)
        print(f"built {args.samples * args.claims:,} claims in {args.samples:,} samples in {time.perf_counter() - t0:.1f} s")
        base_s, base_mb, _ = run_report(path, 100)
        full_s, full_mb, data = run_report(path, 2000)
    section = data["tasks"]["claim_support"]
    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}")
    print(f"report, 100-resample bootstrap (baseline): {base_s:.2f} s, peak RSS {base_mb:.0f} MB")
    print(f"report, 2,000-resample bootstrap:          {full_s:.2f} s, peak RSS {full_mb:.0f} MB")
    print(f"ratio 2,000 / 100 resamples: {full_s / base_s:.2f}x")
    print(f"kappa {section['cohen_kappa']['value']:.4f} CI {section['cohen_kappa']['ci']} n={section['n']} samples={section['n_samples']}")


if __name__ == "__main__":
    main()
