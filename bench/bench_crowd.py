"""Benchmark: `calibrate report` on a crowd of 246 annotators against the same labels under 3 names.

953 items (one claim each) × 3 labels: in the crowd run each item's 3 labels come from 3 of 246
annotators drawn at random (most of the 30,135 annotator pairs share no item); in the baseline,
measured in the same run on the same values, the labels are under 3 annotator names (a, b, c by
position). An imported judge has a verdict on every claim. Both reports run as real subprocesses
(the CLI a user types) with `--format json`; wall time and the JSON's size are measured.

    .venv/bin/python bench/bench_crowd.py [--items 953] [--annotators 246] [--code DIR]

`--code DIR` runs the reports with the calibrate package found in DIR (e.g. an exported older
commit: `git archive COMMIT | tar -x -C DIR`), to measure a before/after. Without it, the gate's
report is also built in process on each database, as before (the full report) and as `gate` now
builds it (`Options.decision_only`), alternated three times: their ratio is the gate's
before/after measured in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from sqlmodel import Session

from calibrate.calibration import Options, build_report
from calibrate.db import get_engine

ROOT = Path(__file__).resolve().parent.parent
NOW = "2026-01-01 00:00:00"


def build_db(path: Path, n_items: int, n_annotators: int, crowd: bool, seed: int = 0) -> None:
    """Create a migrated database and fill it with bulk SQL (the same values for both shapes)."""
    env = {**os.environ, "CALIBRATE_INSTANCE": str(path.parent)}
    subprocess.run([sys.executable, "-m", "calibrate", "init", "--db", f"sqlite:///{path}"], check=True, env=env,
                   capture_output=True, cwd=ROOT)
    rng = np.random.default_rng(seed)
    truth = rng.random(n_items) < 0.6
    values = [np.where(rng.random(n_items) < 0.85, truth, ~truth) for _ in range(3)]
    who = np.stack([rng.choice(n_annotators, 3, replace=False) for _ in range(n_items)]) + 1
    judge = np.where(rng.random(n_items) < 0.8, truth, ~truth)
    con = sqlite3.connect(path)
    con.execute("INSERT INTO dataset (id, name, description, source, is_demo, created_at) VALUES (1, 'bench', '', 'bench', 0, ?)", (NOW,))
    names = [f"worker{i:03d}" for i in range(1, n_annotators + 1)] if crowd else ["a", "b", "c"]
    con.executemany("INSERT INTO user (id, username, display_name, role, active, created_at) VALUES (?, ?, '', 'annotator', 1, ?)",
                    [(i + 1, name, NOW) for i, name in enumerate(names)])
    con.execute("INSERT INTO judge (id, name, kind, description, created_at) VALUES (1, 'bench-judge', 'imported', '', ?)", (NOW,))
    task = con.execute("SELECT id FROM task WHERE name = 'claim_support'").fetchone()[0]
    con.executemany(
        "INSERT INTO sample (id, dataset_id, external_id, question, answer, metadata, content_hash, segmenter, created_at, updated_at) "
        "VALUES (?, 1, ?, 'q', 'a', '{}', 'h', 'given', ?, ?)", [(i + 1, f"s{i}", NOW, NOW) for i in range(n_items)])
    con.executemany("INSERT INTO claim (id, sample_id, \"index\", text, start, \"end\", active) VALUES (?, ?, 0, 'c', -1, -1, 1)",
                    [(i + 1, i + 1) for i in range(n_items)])
    word = {True: "supported", False: "unsupported"}
    rows = [(task, i + 1, i + 1, f"claim:{i + 1}", int(who[i, j]) if crowd else j + 1, word[bool(values[j][i])], NOW, NOW)
            for i in range(n_items) for j in range(3)]
    con.executemany(
        "INSERT INTO label (task_id, sample_id, claim_id, target_key, annotator_id, value, rationale, adjudicated, stale, "
        "stale_reason, source, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, '', 0, 0, '', 'import', ?, ?)", rows)
    con.executemany(
        "INSERT INTO verdict (judge_id, task_id, sample_id, claim_id, target_key, value, status, reason, raw, error, cached, source, created_at) "
        "VALUES (1, ?, ?, ?, ?, ?, 'ok', '', '', '', 0, 'import', ?)",
        [(task, i + 1, i + 1, f"claim:{i + 1}", word[bool(judge[i])], NOW) for i in range(n_items)])
    con.commit()
    con.close()


def run(path: Path, command: str, code: Path | None) -> tuple[float, bytes]:
    """Run `calibrate COMMAND` as a subprocess; return wall seconds and its standard output."""
    env = {**os.environ, "CALIBRATE_INSTANCE": str(path.parent)}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    extra = ["--format", "json"] if command == "report" else []
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "calibrate", command, "--db", f"sqlite:///{path}", "--dataset", "bench",
                          "--judge", "bench-judge", "--bootstrap", "200", *extra],
                         capture_output=True, env=env, cwd=code or ROOT)
    seconds = time.perf_counter() - start
    if out.returncode not in (0, 1):
        raise SystemExit(out.stderr.decode())
    return seconds, out.stdout


def gate_builds(path: Path, repeats: int = 3) -> tuple[float, float]:
    """Return the median seconds of the gate's report built in process, as before (the full report) and now
    (`Options.decision_only`), alternated in one run on the same database so the load hits both alike."""
    engine = get_engine(f"sqlite:///{path}")
    times: dict[bool, list[float]] = {False: [], True: []}
    with Session(engine) as session:
        build_report(session, "bench", "bench-judge", options=Options(bootstrap=200, decision_only=True))  # warm up
        for _ in range(repeats):
            for only in (False, True):
                start = time.perf_counter()
                build_report(session, "bench", "bench-judge", options=Options(bootstrap=200, decision_only=only))
                times[only].append(time.perf_counter() - start)
    return float(np.median(times[False])), float(np.median(times[True]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=953)
    parser.add_argument("--annotators", type=int, default=246)
    parser.add_argument("--code", type=Path, help="run the reports with the calibrate package in this directory")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}; "
          f"load {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for shape in ("names3", "crowd"):
            path = Path(tmp) / shape / "bench.sqlite"
            path.parent.mkdir()
            build_db(path, args.items, args.annotators, crowd=shape == "crowd")
            report_s, body = run(path, "report", args.code)
            gate_s, _ = run(path, "gate", args.code)
            human = json.loads(body)["tasks"]["claim_support"]["human"]
            results[shape] = (report_s, gate_s, len(body), human)
            if args.code is None:
                full_s, only_s = gate_builds(path)
                print(f"{shape:7s} gate's report in process: full {full_s:.3f} s, decision_only {only_s:.3f} s, "
                      f"ratio {only_s / full_s:.2f}")
            print(f"{shape:7s} report {report_s:6.2f} s, JSON {len(body) / 1e6:.3f} MB, gate {gate_s:6.2f} s; "
                  f"annotators {len(human['annotators'])}, pairs listed {len(human['pairwise_kappa'])}, "
                  f"n_pairs_sparse {human.get('n_pairs_sparse')}, fleiss {human['fleiss_kappa']['value']:.3f}")
    (crowd_r, crowd_g, crowd_b, _), (base_r, base_g, _, _) = results["crowd"], results["names3"]
    print(f"ratio crowd / 3 names: report {crowd_r / base_r:.2f}x, gate {crowd_g / base_g:.2f}x; crowd JSON {crowd_b / 1e6:.3f} MB")


if __name__ == "__main__":
    main()
