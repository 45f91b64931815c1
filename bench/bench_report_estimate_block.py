"""Benchmark: what the report's `estimate` block (issue 24) costs `build_report`.

bench_estimate_scale.py's data (bench_report.py's builder: claims in samples, one verdict per claim,
the labels of all but the first ``--labelled`` claims removed): the report of claim_support then has
verdict-only targets, so it computes the estimate block (the faithful share of answers, PPI++). The
same process builds the report with the block and with `estimate_block` replaced by a function
returning None (the report before issue 24), alternating, ``--repeats`` times each; the ratio of the
medians is the block's cost.

    .venv/bin/python bench/bench_report_estimate_block.py [--samples 60000] [--claims 3] [--labelled 1000] [--write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_estimate_scale import keep_labels
from bench_report import build_db
from sqlmodel import Session

from calibrate.calibration import Options
from calibrate.calibration import report as report_module
from calibrate.db import dispose_engine, get_engine

ROOT = Path(__file__).resolve().parent.parent


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=60_000)
    # 3 claims: with 10 at 65 % supported almost no answer is faithful and the labelled answers' gold is constant.
    parser.add_argument("--claims", type=int, default=3)
    parser.add_argument("--labelled", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="append the result to bench/results/estimate.md")
    args = parser.parse_args()
    before = uptime()
    real_block = report_module.estimate_block
    times: dict[str, list[float]] = {"with": [], "without": []}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        build_db(path, args.samples, args.claims)
        keep_labels(path, args.labelled)
        url = f"sqlite:///{path}"
        engine = get_engine(url)
        block = None
        for _ in range(args.repeats):
            for case in ("without", "with"):
                report_module.estimate_block = real_block if case == "with" else (lambda *a, **k: None)
                with Session(engine) as session:
                    start = time.perf_counter()
                    data = report_module.build_report(session, "bench", "bench-judge", tasks=["claim_support"],
                                                      options=Options()).data
                    times[case].append(time.perf_counter() - start)
                if case == "with":
                    block = data["tasks"]["claim_support"].get("estimate")
        report_module.estimate_block = real_block
        dispose_engine(url)
    after = uptime()
    with_s, without_s = statistics.median(times["with"]), statistics.median(times["without"])
    lines = [
        "",
        "## The report's `estimate` block: its cost in `build_report`",
        "",
        f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; `nproc` = {os.cpu_count()}; Python {platform.python_version()}, "
        f"numpy {np.__version__}",
        f"- `uptime` before: `{before}`; after: `{after}` (shared machine: other jobs run)",
        f"- Data: {args.samples * args.claims:,} claim targets in {args.samples:,} samples; the block: "
        f"{block['n_labelled']:,} labelled and {block['n_unlabelled']:,} verdict-only answers, estimate "
        f"{block['estimate'] if block['estimate'] is None else round(block['estimate'], 4)} (PPI++; {block['status']})",
        f"- Command: `.venv/bin/python bench/bench_report_estimate_block.py --samples {args.samples} --claims {args.claims} "
        f"--labelled {args.labelled} --repeats {args.repeats} --write` (medians of {args.repeats}, alternating, one process)",
        "",
        "| build_report (claim_support, 2,000-resample bootstrap) | median | ratio |",
        "|---|---:|---:|",
        f"| without the estimate block (before issue 24) | {without_s:.2f} s | 1.00 |",
        f"| with the estimate block | {with_s:.2f} s | {with_s / without_s:.2f} |",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        with (ROOT / "bench" / "results" / "estimate.md").open("a", encoding="utf-8") as out:
            out.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
