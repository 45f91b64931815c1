"""Benchmark: does the audit stream's estimate cover the truth at the nominal rate, with thumbs-down-first triage beside it?

Simulation (seeded), one production window per run: ``--traces`` traces (default 1,500) of which 70 %
are good; a bad answer gets a thumbs-down with probability 0.5, a good one 0.03. The trace sampling
keeps every thumbs-down trace and one in ten of the others (π_t 1 and 0.1, stored as
``metadata.inclusion_prob``). A lenient judge passes 95 % of the good answers and 30 % of the bad ones.
The audit stream draws ``n`` of the window's samples uniformly (π_a = n / samples); the triage stream
takes ``--triage`` samples thumbs-down first. The truth is the share of good answers over the window's
traces.

Per audit size it reports the share of runs whose 95 % interval covers the truth for:
- the monitor's estimate (calibrate.calibration.production_estimate: PPI++ with Hájek weights,
  stats/survey.py);
- ppi_mean with ppi_py-style weights (calibrate.stats.ppi_mean, weights and weights_unlabeled): what the
  monitor would give with the estimator of `calibrate estimate`;
- the mean of the triage labels (what an estimate from triage labels would say);
- the judge alone;
and the mean interval widths.

Run from the project root::

    .venv/bin/python bench/bench_production.py            # print the report
    .venv/bin/python bench/bench_production.py --write    # also write bench/results/production.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import subprocess
import time
from pathlib import Path

import numpy as np

from calibrate.calibration import production_estimate
from calibrate.stats import ppi_mean

RESULTS = Path(__file__).resolve().parent / "results" / "production.md"


def window(rng: np.random.Generator, traces: int, audit: int, triage: int) -> dict:
    y = (rng.random(traces) < 0.7).astype(float)
    down = rng.random(traces) < np.where(y == 1, 0.03, 0.5)
    pi_t = np.where(down, 1.0, 0.1)
    kept = rng.random(traces) < pi_t
    y_s, down_s, pi_s = y[kept], down[kept], pi_t[kept]
    yhat = np.where(y_s == 1, rng.random(y_s.size) < 0.95, rng.random(y_s.size) < 0.3).astype(float)
    drawn = rng.choice(y_s.size, size=min(audit, y_s.size), replace=False)
    pi_a = drawn.size / y_s.size
    w_lab, w_all = 1.0 / (pi_s[drawn] * pi_a), 1.0 / pi_s
    ours = production_estimate(y_s[drawn], yhat[drawn], yhat, w_lab, w_all)
    theirs = ppi_mean(y_s[drawn], yhat[drawn], yhat, lam=None, weights=w_lab, weights_unlabeled=w_all)
    tri = y_s[np.argsort(~down_s, kind="stable")[:triage]]
    half = 1.96 * tri.std() / np.sqrt(tri.size)
    return {"truth": float(y.mean()), "monitor": ours["ci"], "ppi_mean": list(theirs.ci) if theirs.ci else None,
            "triage": [tri.mean() - half, tri.mean() + half], "judge": ours["judge_only_ci"]}


def run(reps: int, traces: int, sizes: list[int], triage: int, seed: int) -> list[dict]:
    rows = []
    for size in sizes:
        rng = np.random.default_rng([seed, size])
        hits = {k: 0 for k in ("monitor", "ppi_mean", "triage", "judge")}
        widths = {k: [] for k in hits}
        for _ in range(reps):
            w = window(rng, traces, size, triage)
            for k in hits:
                ci = w[k]
                if ci:
                    hits[k] += ci[0] <= w["truth"] <= ci[1]
                    widths[k].append(ci[1] - ci[0])
        rows.append({"audit": size, **{f"cover_{k}": hits[k] / reps for k in hits},
                     **{f"width_{k}": float(np.mean(widths[k])) if widths[k] else None for k in widths}})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--traces", type=int, default=1500)
    parser.add_argument("--sizes", default="40,80,120,200")
    parser.add_argument("--triage", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    started = time.perf_counter()
    rows = run(args.reps, args.traces, [int(s) for s in args.sizes.split(",")], args.triage, args.seed)
    seconds = time.perf_counter() - started
    after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    lines = ["# Production: the audit stream's estimate beside thumbs-down-first triage (simulation)", "",
             f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
             f"- Machine: {platform.machine()}, Python {platform.python_version()}",
             f"- `uptime` before: `{before}`", f"- `uptime` after: `{after}` (shared machine; other jobs may run)",
             f"- Workload: {args.reps:,} seeded windows (seed {args.seed}) per audit size, {args.traces:,} traces each, "
             f"triage {args.triage} thumbs-down first; {seconds:.1f} s in all",
             "- Command: `.venv/bin/python bench/bench_production.py --write`", "",
             "Share of windows whose 95 % interval covers the truth (the window's share of good answers), and the mean width.", "",
             "| audit labels | monitor (Hájek PPI++) | width | ppi_mean, ppi_py weights | width | triage labels | judge alone |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['audit']} | {r['cover_monitor']:.3f} | {r['width_monitor']:.3f} | {r['cover_ppi_mean']:.3f} | "
                     f"{r['width_ppi_mean']:.3f} | {r['cover_triage']:.3f} | {r['cover_judge']:.3f} |")
    lines += ["", "The triage labels' mean never covers: thumbs-down-first triage sees mostly bad answers. The judge alone",
              "covers only when its bias (the lenient judge: about +0.05) happens to fall inside its own interval.",
              "ppi_mean's weighted variance (uncentred w·Y, as ppi_py) counts the spread of the weights as variance: it",
              "covers nearly always with intervals about 1.5 times as wide. The monitor's Hájek form covers 0.92–0.94,",
              "a little below the nominal 0.95 (a normal approximation on binary labels whose weights spread tenfold;",
              "few effective labels for small audits)."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        RESULTS.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
