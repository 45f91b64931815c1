"""Benchmark: `calibrate report --format json` on 100,000 pairwise targets judged in both presentation orders.

Data: 100,000 samples with two responses each (A, B), the pairwise task `pref` (A, B, tie); two
annotators label every target (200,000 labels, each with the order that annotator saw); one
imported judge has a verdict in each order on every target (200,000 verdicts), with a position
bias (it picks the response shown first more often) and 1 % unusable verdicts per order. The
report (consistent order rule, 2,000-resample bootstrap: the task's κ and the κ of each order)
runs as a real subprocess, the command a user types.

Baseline in the same run: the same 100,000 targets as a categorical task (labels A, B, tie) with
one verdict per target and no orders — the report path that existed before pairwise tasks — so
the cost of the orders (the order rule, the position block, two more bootstraps) shows as a
ratio. The script also checks the report's position figures against a direct numpy count.

    .venv/bin/python bench/bench_pairwise.py [--targets 100000]
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
NOW = "2026-01-01 00:00:00"


def build_db(path: Path, n: int, seed: int = 0) -> dict:
    """Create a migrated database and fill it with bulk SQL; return the judge's verdicts for the cross-check."""
    env = {**os.environ, "CALIBRATE_INSTANCE": str(path.parent)}
    subprocess.run([sys.executable, "-m", "calibrate", "init", "--db", f"sqlite:///{path}"], check=True, env=env,
                   capture_output=True, cwd=ROOT)
    rng = np.random.default_rng(seed)
    con = sqlite3.connect(path)
    con.execute("INSERT INTO dataset (id, name, description, source, is_demo, created_at) VALUES (1, 'bench', '', 'bench', 0, ?)", (NOW,))
    con.executemany("INSERT INTO user (id, username, display_name, role, active, created_at) VALUES (?, ?, '', 'annotator', 1, ?)",
                    [(1, "ann1", NOW), (2, "ann2", NOW)])
    con.executemany("INSERT INTO judge (id, name, kind, description, created_at) VALUES (?, ?, 'imported', '', ?)",
                    [(1, "pair-judge", NOW), (2, "flat-judge", NOW)])
    labels = json.dumps(["A", "B", "tie"])
    con.execute("INSERT INTO task (id, name, target, kind, labels, description, builtin, created_at) "
                "VALUES (100, 'pref', 'sample', 'pairwise', ?, '', 0, ?)", (labels, NOW))
    con.execute("INSERT INTO task (id, name, target, kind, labels, description, builtin, created_at) "
                "VALUES (101, 'flat', 'sample', 'categorical', ?, '', 0, ?)", (labels, NOW))
    con.executemany(
        "INSERT INTO sample (id, dataset_id, external_id, question, answer, metadata, content_hash, segmenter, created_at, updated_at) "
        "VALUES (?, 1, ?, 'q', '', '{}', 'h', 'given', ?, ?)", [(i + 1, f"p{i}", NOW, NOW) for i in range(n)])
    con.executemany("INSERT INTO response (sample_id, position, key, text, model) VALUES (?, ?, ?, ?, '')",
                    [(i + 1, p, key, f"{key}{i}") for i in range(n) for p, key in enumerate("AB")])
    truth = rng.random(n) < 0.5  # True: A is better
    better = np.where(truth, "A", "B")
    rows = []
    for annotator in (1, 2):
        right = rng.random(n) < 0.85
        value = np.where(right, better, np.where(truth, "B", "A"))
        value = np.where(rng.random(n) < 0.05, "tie", value)
        swapped = rng.random(n) < 0.5  # the order this annotator saw
        for i in range(n):
            order = '["B", "A"]' if swapped[i] else '["A", "B"]'
            rows.append((100, i + 1, f"sample:{i + 1}", annotator, value[i], order))
            rows.append((101, i + 1, f"sample:{i + 1}", annotator, value[i], None))
    con.executemany(
        "INSERT INTO label (task_id, sample_id, target_key, annotator_id, value, rationale, adjudicated, stale, stale_reason, "
        "source, \"order\", created_at, updated_at) VALUES (?, ?, ?, ?, ?, '', 0, 0, '', 'import', ?, ?, ?)",
        [(*row, NOW, NOW) for row in rows])
    # The judge: right 80 % of the time, else it takes the response shown first; 1 % unusable per order.
    verdicts = {}
    for kind, first in (("original", "A"), ("swapped", "B")):
        right = rng.random(n) < 0.8
        value = np.where(right, better, first).astype(object)
        value[rng.random(n) < 0.01] = None
        verdicts[kind] = value
    order_of = {"original": ('["A", "B"]', "0,1"), "swapped": ('["B", "A"]', "1,0")}
    vrows = [(1, 100, i + 1, f"sample:{i + 1}", verdicts[kind][i], "ok" if verdicts[kind][i] is not None else "unparsed",
              order_of[kind][0], order_of[kind][1]) for kind in verdicts for i in range(n)]
    vrows += [(2, 101, i + 1, f"sample:{i + 1}", verdicts["original"][i],
               "ok" if verdicts["original"][i] is not None else "unparsed", None, "") for i in range(n)]
    con.executemany(
        "INSERT INTO verdict (judge_id, task_id, sample_id, target_key, value, status, \"order\", order_key, reason, raw, "
        "error, cached, source, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, '', '', '', 0, 'import', ?)",
        [(*row, NOW) for row in vrows])
    con.commit()
    con.close()
    return verdicts


def run_report(path: Path, judge: str, task: str) -> tuple[float, float, float, dict]:
    """Run the report as a subprocess; return wall seconds, CPU seconds (user + system), peak RSS in MB, the parsed JSON.

    The CPU time is what the report costs whatever else the machine runs; the wall time grows with the load.
    """
    env = {**os.environ, "CALIBRATE_INSTANCE": str(path.parent)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "calibrate", "report", "--db", f"sqlite:///{path}", "--dataset", "bench", "--judge", judge,
         "--task", task, "--bootstrap", "2000", "--format", "json"],
        check=True, capture_output=True, text=True, env=env, cwd=ROOT)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu, after.ru_maxrss / 1024, json.loads(out.stdout)


def expected_position(verdicts: dict) -> dict:
    """Count the position figures straight from the arrays (the report must agree)."""
    o, s = verdicts["original"], verdicts["swapped"]
    pair = np.array([a is not None and b is not None for a, b in zip(o, s, strict=True)])
    po, ps = o[pair], s[pair]
    ties = int((po == "tie").sum() + (ps == "tie").sum())
    first = int((po == "A").sum() + (ps == "B").sum())
    return {"n_pairs": int(pair.sum()), "agreement": float((po == ps).mean()), "first_position_rate": first / (2 * pair.sum() - ties),
            "n_unusable": int(sum(v is None for v in o) + sum(v is None for v in s))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--targets", type=int, default=100_000)
    args = parser.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        t0 = time.perf_counter()
        verdicts = build_db(path, args.targets)
        print(f"built {args.targets:,} pairwise targets ({2 * args.targets:,} labels with orders, {2 * args.targets:,} verdicts) "
              f"in {time.perf_counter() - t0:.1f} s")
        base_s, base_cpu, base_mb, _ = run_report(path, "flat-judge", "flat")
        full_s, full_cpu, full_mb, data = run_report(path, "pair-judge", "pref")
    position = data["tasks"]["pref"]["position"]
    expected = expected_position(verdicts)
    for key, value in expected.items():
        assert abs(position[key] - value) < 1e-12, (key, position[key], value)
    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}; "
          f"load average before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"baseline: categorical task, one verdict per target: {base_s:.2f} s wall, {base_cpu:.2f} s CPU, peak RSS {base_mb:.0f} MB")
    print(f"pairwise task, two orders, position block:          {full_s:.2f} s wall, {full_cpu:.2f} s CPU, peak RSS {full_mb:.0f} MB")
    print(f"ratio pairwise / categorical: {full_s / base_s:.2f}x wall, {full_cpu / base_cpu:.2f}x CPU; "
          f"load average after {os.getloadavg()[0]:.2f}")
    print(f"position: n_pairs {position['n_pairs']}, agreement {position['agreement']:.4f}, first_position_rate "
          f"{position['first_position_rate']:.4f}, p {position['position_p_value']}, unusable {position['n_unusable']} "
          "(equal to the direct count)")
    section = data["tasks"]["pref"]
    print(f"kappa (consistent) {section['cohen_kappa']['value']:.4f} CI {section['cohen_kappa']['ci']} n={section['n']}; "
          f"original {position['alignment_original']['value']:.4f}, swapped {position['alignment_swapped']['value']:.4f}")


if __name__ == "__main__":
    main()
