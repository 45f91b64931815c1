"""Benchmark: what rendering user templates in worker processes costs against rendering them in-process.

Renders the built-in claim_support prompt (system once, then the template per item, as a run
does: `calibrate.judges.render.Renderer`) for `--items` items (2,000 by default) with realistic
fields (a 300-character question, a 1,200-character answer, three 800-character contexts, one
claim), first in this process (`Limits(isolated=False)`, the baseline) and then through the
render pool (`Limits()`, the default: one request per item over a pipe to a worker), alternating
`--repeat` times so both see the same machine load. Worker start-up is measured apart (the pool
starts its workers once per process). Prints a Markdown table; results in
bench/results/render_pool.md.

    .venv/bin/python bench/bench_render_pool.py [--items 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from calibrate.judges import render_pool
from calibrate.judges.render import Metadata, Renderer, default_templates
from calibrate.judges.sandbox import Limits


def items(n: int) -> list[dict]:
    out = []
    for i in range(n):
        contexts = [{"rank": r, "text": f"Passage {r} of item {i}: " + "take 40 mg a day with food. " * 28, "doc_id": f"d{r}"}
                    for r in range(3)]
        claim = {"index": 0, "text": f"Claim of item {i}: take 40 mg a day."}
        out.append({"question": f"Question {i}: " + "how much should I take? " * 13, "answer": "Take 40 mg. " * 100,
                    "ground_truth": "", "sample_id": f"s{i}", "metadata": Metadata({"source": "bench"}),
                    "contexts": contexts, "claims": [claim], "responses": [], "claim": claim})
    return out


def timed(limits: Limits, batch: list[dict]) -> float:
    system, template = default_templates("claim_support", "claim")
    version = {"task": {"name": "claim_support", "description": "…", "kind": "categorical", "target": "claim",
                        "labels": ["supported", "unsupported"], "scale_min": None, "scale_max": None, "guidelines": "…"},
               "examples": []}
    started = time.perf_counter()
    renderer = Renderer(system, template, version, limits)
    for item in batch:
        renderer.render(item)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    batch = items(args.items)
    started = time.perf_counter()
    Renderer("", "x", {}, Limits()).render({})  # start one worker
    startup = time.perf_counter() - started
    inproc, pooled = [], []
    for _ in range(args.repeat):
        inproc.append(timed(Limits(isolated=False), batch))
        pooled.append(timed(Limits(), batch))
    a, b = statistics.median(inproc), statistics.median(pooled)
    print(f"load before: {os.getloadavg()}")
    print(f"| {args.items} items, median of {args.repeat} | seconds | per item | ratio |")
    print("|---|---|---|---|")
    print(f"| in-process (baseline) | {a:.2f} | {a / args.items * 1e6:.0f} µs | 1.00 |")
    print(f"| render pool | {b:.2f} | {b / args.items * 1e6:.0f} µs | {b / a:.2f} |")
    print(f"| worker start-up (once per process) | {startup:.2f} | | |")
    print(f"load after: {os.getloadavg()}")
    render_pool.shutdown()


if __name__ == "__main__":
    main()
