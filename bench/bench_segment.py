"""Benchmark: claim segmentation of a megabyte, ordinary and pathological (the timings the tests do not assert).

tests/ingest/test_claims.py checks that a megabyte of ordinary text and eight megabytes built
to make a backtracking pattern quadratic are segmented with the exact result; this script
times them (median and min of `--repeat` runs each) so a slowdown shows here, not as a red
test on a busy machine.

    .venv/bin/python bench/bench_segment.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "ingest"))
from test_claims import PARAGRAPH, PATHOLOGICAL

from calibrate.text.sentences import segment


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cases = {"ordinary paragraphs": PARAGRAPH * (1_000_000 // len(PARAGRAPH) + 1)}
    cases.update({name: answer for name, (answer, _) in PATHOLOGICAL.items()})
    load = os.getloadavg()
    print(f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {args.repeat} runs each")
    print()
    print("| input (≈ 1 MB) | median | min |")
    print("|---|---|---|")
    for name, answer in cases.items():
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            segment(answer)
            times.append(time.perf_counter() - started)
        print(f"| {name} | {statistics.median(times) * 1000:.0f} ms | {min(times) * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
