"""Benchmark: does the audit stream's estimate cover the truth at the nominal rate, with thumbs-down-first triage beside it?

Simulation (seeded), one production window per run: ``--traces`` traces (default 1,500) of which 70 %
are good; a bad answer gets a thumbs-down with probability 0.5, a good one 0.03. The trace sampling
keeps every thumbs-down trace and one in ten of the others (π_t 1 and 0.1, stored as
``metadata.inclusion_prob``). A lenient judge passes 95 % of the good answers and 30 % of the bad ones.
The audit stream draws ``n`` of the window's samples uniformly (π_a = n / samples); the triage stream
takes ``--triage`` samples thumbs-down first. The truth is the share of good answers over the window's
traces.

Per audit size it reports the share of runs whose 95 % interval covers the truth for:
- the monitor's estimate (calibrate.stats.design.design_estimate since issue 35: PPI++ with Hájek weights, λ the
  regression coefficient of the gold on the verdict, Agresti–Min pseudo-counts; before it, stats/survey.py's
  normal interval, which bench/bench_live_number.py compares in the cells where production lives);
- the same estimator with PPI++'s λ for an independent unlabelled sample, cov/((1 + n/N)·var) (what
  the monitor used before issue 25's fix; the audit is drawn from the judged targets, so that λ makes
  the variance formula too small);
- the same point estimate with the exact two-phase variance (Poisson finite-population corrections in
  both phases, Särndal, Swensson & Wretman 1992 §9.3): what the interval would be without the
  conservative shortcut of stats/survey.py;
- ppi_mean with ppi_py-style weights (calibrate.stats.ppi_mean, weights and weights_unlabeled): what the
  monitor would give with ppi_py's weighted estimator (`calibrate estimate` used a form of it until
  2026-12-02; it now computes the monitor's Hájek PPI++);
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
import scipy.stats as sps

from calibrate.stats import ppi_mean
from calibrate.stats.design import design_estimate
from calibrate.stats.survey import hajek_ppi_mean

RESULTS = Path(__file__).resolve().parent / "results" / "production.md"


def two_phase_ci(value: float, lam: float, y: np.ndarray, yhat: np.ndarray, pi_t: np.ndarray, pi_a: np.ndarray,
                 w_all: np.ndarray, n_eff: float) -> list[float]:
    """θ̂ ± t·se with the two-phase variance: phase 1 (Poisson, π_t) of Y's Hájek mean, phase 2 (π_a) of the residual."""
    big_w = w_all.sum()
    p = 1.0 / (pi_t * pi_a)
    p = p / p.sum()
    r = y - lam * yhat
    v1 = float(((1 - pi_t) / pi_t ** 2 * ((y - value) / big_w) ** 2 / pi_a).sum())
    v2 = float(((1 - pi_a) / pi_a ** 2 * ((r - (p * r).sum()) / big_w / pi_t) ** 2).sum())
    half = float(sps.t.ppf(0.975, max(n_eff - 1.0, 1.0))) * np.sqrt(v1 + v2)
    return [value - half, value + half]


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
    ids = np.arange(y_s.size)
    found = design_estimate(y_s[drawn], yhat[drawn], w_lab, pi_s[drawn], drawn, yhat, w_all, pi_s, ids, binary=True)
    ours = {"estimate": found.value, "ci": list(found.ci) if found.ci else None, "judge_only_ci": found.extra["judge_only_ci"]}
    p, q = w_lab / w_lab.sum(), w_all / w_all.sum()
    y_l, yh_l = y_s[drawn], yhat[drawn]
    cov = float((p * (y_l - (p * y_l).sum()) * (yh_l - (p * yh_l).sum())).sum())
    var_all = float((q * (yhat - (q * yhat).sum()) ** 2).sum())
    lam_ppi = 0.0 if var_all <= 0 else float(np.clip(cov / ((1 + drawn.size / yhat.size) * var_all), 0.0, 1.0))
    now = hajek_ppi_mean(y_l, yh_l, yhat, w_lab, w_all)
    exact = two_phase_ci(now.value, now.extra["lambda"], y_l, yh_l, pi_s[drawn], np.full(drawn.size, pi_a), w_all,
                         now.extra["n_effective"])
    before = hajek_ppi_mean(y_l, yh_l, yhat, w_lab, w_all, lam=lam_ppi)
    theirs = ppi_mean(y_s[drawn], yhat[drawn], yhat, lam=None, weights=w_lab, weights_unlabeled=w_all)
    tri = y_s[np.argsort(~down_s, kind="stable")[:triage]]
    half = 1.96 * tri.std() / np.sqrt(tri.size)
    return {"truth": float(y.mean()), "value": ours["estimate"], "monitor": ours["ci"], "before": list(before.ci), "exact": exact,
            "ppi_mean": list(theirs.ci) if theirs.ci else None,
            "triage": [tri.mean() - half, tri.mean() + half], "judge": ours["judge_only_ci"]}


def run(reps: int, traces: int, sizes: list[int], triage: int, seed: int) -> list[dict]:
    rows = []
    for size in sizes:
        rng = np.random.default_rng([seed, size])
        hits = {k: 0 for k in ("monitor", "before", "exact", "ppi_mean", "triage", "judge")}
        errors = []
        widths = {k: [] for k in hits}
        for _ in range(reps):
            w = window(rng, traces, size, triage)
            errors.append(w["value"] - w["truth"])
            for k in hits:
                ci = w[k]
                if ci:
                    hits[k] += ci[0] <= w["truth"] <= ci[1]
                    widths[k].append(ci[1] - ci[0])
        rows.append({"audit": size, "ideal": 2 * 1.96 * float(np.std(errors)), **{f"cover_{k}": hits[k] / reps for k in hits},
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
             "| audit labels | monitor (Hájek PPI++, regression λ) | width | 3.92 × sd | before: PPI++'s λ | width "
             "| exact two-phase variance | width | ppi_mean, ppi_py weights | width | triage labels | judge alone |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['audit']} | {r['cover_monitor']:.3f} | {r['width_monitor']:.3f} | {r['ideal']:.3f} | "
                     f"{r['cover_before']:.3f} | {r['width_before']:.3f} | {r['cover_exact']:.3f} | {r['width_exact']:.3f} | "
                     f"{r['cover_ppi_mean']:.3f} | "
                     f"{r['width_ppi_mean']:.3f} | {r['cover_triage']:.3f} | {r['cover_judge']:.3f} |")
    lines += ["", "The triage labels' mean never covers: thumbs-down-first triage sees mostly bad answers. The judge alone",
              "covers only when its bias (the lenient judge: about +0.05) happens to fall inside its own interval.",
              "ppi_mean's weighted variance (uncentred w·Y, as ppi_py) counts the spread of the weights as variance: it",
              "covers nearly always with intervals about 1.5 times as wide.", "",
              "The monitor's λ is the regression coefficient of the gold on the verdict (stats/survey.py, docs/statistics.md",
              "§18): the audit is drawn from the judged targets, and for that nested design the variance formula is",
              "right at that λ only. PPI++'s λ, cov/((1 + n/N)·var), is meant for an independent unlabelled sample;",
              "it shrinks λ by the audit's share of the judged targets and leaves the variance too small by",
              "(2λ/N)·(C − λ·var), so the interval covered below the nominal rate (the \"before\" column).",
              "\"3.92 × sd\" is the width of an interval with the estimate's true spread (sd over the windows): the",
              "monitor's interval is 3–4 % wider from 80 labels on, because its variance leaves out the finite-population",
              "corrections (thumbs-down traces kept with π_t = 1 carry no sampling variance; a large audit takes",
              "much of the judged set). The exact two-phase variance drops that margin and covers about 0.94: binary",
              "labels whose weights spread tenfold (a few heavy bad answers) make the estimate skewed, so the",
              "conservative form is kept. At 40 labels the interval is 5 % narrower than that, and the regression λ,",
              "tuned on the same labels, has a small bias (about −0.008): it covers 0.944, within Monte-Carlo error",
              "of 0.95 (±0.010 at two standard errors over 2,000 windows)."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        RESULTS.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
