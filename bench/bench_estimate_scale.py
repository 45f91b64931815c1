"""Benchmark: `calibrate estimate` on many unlabelled + few labelled targets, against `calibrate report`.

The data is bench_report.py's (claims in samples, one judge verdict per claim), with the labels of
all but the first ``--labelled`` claims removed and only one annotator kept: ``--labelled``
labelled targets and the rest unlabelled (verdict only). Both commands run as real subprocesses
on the same file: ``calibrate report --format json`` (the baseline, with its default 2,000-resample
bootstrap) and ``calibrate estimate --format json`` (PPI++). Issue 24 asks the estimate to take
under 2× the report's time.

    .venv/bin/python bench/bench_estimate_scale.py [--samples 100000] [--claims 10] [--labelled 1000] [--write]
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
from pathlib import Path

import numpy as np
from bench_report import build_db

ROOT = Path(__file__).resolve().parent.parent


def keep_labels(path: Path, labelled: int) -> None:
    """Leave one annotator's labels on the first `labelled` claims: the rest become verdict-only targets."""
    con = sqlite3.connect(path)
    con.execute("DELETE FROM label WHERE annotator_id <> 1 OR claim_id > ?", (labelled,))
    con.commit()
    con.close()


def as_claim_task(path: Path) -> None:
    """Move the labels and verdicts to a claim-level task of their own, `claim_ok` (supported / unsupported).

    claim_support's estimand is the share of faithful answers (every claim supported), so its targets are
    answers; a plain claim-level task keeps this benchmark at one target per claim (10^6 targets).
    """
    env = {**os.environ, "CALIBRATE_INSTANCE": str(path.parent)}
    subprocess.run([sys.executable, "-m", "calibrate", "task", "add", "claim_ok", "--target", "claim", "--kind", "categorical",
                    "--labels", "supported,unsupported", "--db", f"sqlite:///{path}"], check=True, env=env,
                   capture_output=True, cwd=ROOT)
    con = sqlite3.connect(path)
    new, old = (con.execute("SELECT id FROM task WHERE name = ?", (name,)).fetchone()[0] for name in ("claim_ok", "claim_support"))
    con.execute("UPDATE label SET task_id = ? WHERE task_id = ?", (new, old))
    con.execute("UPDATE verdict SET task_id = ? WHERE task_id = ?", (new, old))
    con.commit()
    con.close()


def timed(args: list[str], path: Path) -> tuple[float, dict]:
    env = {**os.environ, "CALIBRATE_INSTANCE": str(path.parent)}
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "calibrate", *args, "--db", f"sqlite:///{path}", "--format", "json"],
                         check=True, capture_output=True, text=True, env=env, cwd=ROOT)
    return time.perf_counter() - start, json.loads(out.stdout)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--claims", type=int, default=10)
    parser.add_argument("--labelled", type=int, default=1000)
    parser.add_argument("--write", action="store_true", help="append the result to bench/results/estimate.md")
    args = parser.parse_args()
    before = uptime()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        t0 = time.perf_counter()
        build_db(path, args.samples, args.claims)
        keep_labels(path, args.labelled)
        as_claim_task(path)
        built = time.perf_counter() - t0
        common = ["--dataset", "bench", "--judge", "bench-judge"]
        report_s, _ = timed(["report", *common, "--task", "claim_ok"], path)
        estimate_s, data = timed(["estimate", *common, "--task", "claim_ok"], path)
    after = uptime()
    n = args.samples * args.claims
    lines = [
        "",
        "## Scale: `calibrate estimate` against `calibrate report` on the same targets",
        "",
        f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; `nproc` = {os.cpu_count()}; Python {platform.python_version()}, "
        f"numpy {np.__version__}",
        f"- `uptime` before: `{before}`; after: `{after}` (shared machine)",
        f"- Data: {n:,} claim targets in {args.samples:,} samples (bench_report.py's builder, {built:.0f} s), "
        f"{data['n_labelled']:,} labelled by one annotator, {data['n_unlabelled']:,} verdict only",
        f"- Command: `.venv/bin/python bench/bench_estimate_scale.py --samples {args.samples} --claims {args.claims} "
        f"--labelled {args.labelled} --write`",
        "",
        "| command | wall time | ratio to report |",
        "|---|---:|---:|",
        f"| `calibrate report --task claim_ok` (baseline, 2,000-resample bootstrap; its estimate block included) | {report_s:.1f} s | 1.00 |",
        f"| `calibrate estimate --task claim_ok` (PPI++) | {estimate_s:.1f} s | {estimate_s / report_s:.2f} |",
        "",
        f"Estimate {data['estimate']:.4f} [{data['ci'][0]:.4f}, {data['ci'][1]:.4f}], λ = {data['lambda']:.3f}; "
        f"under 2× the report: **{'yes' if estimate_s < 2 * report_s else 'NO'}**.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        with (ROOT / "bench" / "results" / "estimate.md").open("a", encoding="utf-8") as out:
            out.write(text)
    return 0 if estimate_s < 2 * report_s else 1


if __name__ == "__main__":
    raise SystemExit(main())
