"""Benchmark: coverage and width of the estimators of calibrate.stats.estimation on real data.

Data: the PandaLM test set (999 pairwise items, three human annotators each, plus the verdicts
of GPT-3.5-turbo and PandaLM-7B on the same items; ``/work/shared/datasets/pandalm-testset``,
read in place, nothing copied). The estimand is the share of items where at least two of the
three annotators judged response 1 better (``Y = 1``); a judge's verdict is ``Ŷ = 1`` when it
chose response 1 (a tie, "garbage" or response 2 is 0). The full-data truth is the mean of
``Y`` over all 999 items.

Each of ``--splits`` seeded random splits (default 2,000) draws ``--labelled`` items (default
100) as the labelled set (gold and verdict) and keeps the rest as unlabelled (verdict only).
For every method the report gives the share of splits whose 95 % interval covers the truth
and the mean interval width, with the width of the classical interval (labels alone) as the
baseline. PPI++ must cover in at least 94 % of the splits and be on average no wider than the
classical interval.

When ppi_py is installed, the PPI++ point estimate and interval of the first 200 splits are also
compared with ``ppi_py.ppi_mean_ci`` (largest absolute difference reported).

Run from the project root::

    .venv/bin/python bench/bench_estimate.py            # print the report
    .venv/bin/python bench/bench_estimate.py --write    # also write bench/results/estimate.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import time
from pathlib import Path

import numpy as np
import scipy

from calibrate.stats.estimation import classical_mean, judge_mean, ppi_mean, rogan_gladen

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_DATA = Path("/work/shared/datasets/pandalm-testset")
JUDGES = {
    "GPT-3.5-turbo": ("gpt-3.5-turbo-testset-v1.json", "gpt_result", "1"),
    "PandaLM-7B": ("pandalm-7b-testset-v1.json", "pandalm_result", 1),
}
METHODS = ("ppi++", "ppi", "classical", "rogan-gladen", "naive judge")


def load(data: Path) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Return the gold ``Y`` and each judge's ``Ŷ`` (aligned by ``idx``)."""
    items = json.loads((data / "testset-v1.json").read_text())
    idx = [it["idx"] for it in items]
    gold = np.array([sum(it[f"annotator{k}"] == 1 for k in (1, 2, 3)) >= 2 for it in items], dtype=float)
    verdicts = {}
    for name, (file, field, positive) in JUDGES.items():
        rows = {r["idx"]: r[field] for r in json.loads((data / file).read_text())}
        verdicts[name] = np.array([rows[i] == positive for i in idx], dtype=float)
    return gold, verdicts


def estimate(method: str, y, yhat, yhat_unl):
    if method == "ppi++":
        return ppi_mean(y, yhat, yhat_unl)
    if method == "ppi":
        return ppi_mean(y, yhat, yhat_unl, lam=1.0)
    if method == "classical":
        return classical_mean(y)
    if method == "rogan-gladen":
        return rogan_gladen(y, yhat, yhat_unl)
    return judge_mean(np.r_[yhat, yhat_unl])


def run(gold, yhat_all, *, splits: int, labelled: int, seed: int) -> dict:
    truth = float(gold.mean())
    size = gold.size
    covered = {m: 0 for m in METHODS}
    widths = {m: [] for m in METHODS}
    undefined = {m: 0 for m in METHODS}
    lambdas = []
    rng = np.random.default_rng(seed)
    for _ in range(splits):
        perm = rng.permutation(size)
        lab, unl = perm[:labelled], perm[labelled:]
        for m in METHODS:
            est = estimate(m, gold[lab], yhat_all[lab], yhat_all[unl])
            if not est.ok:
                undefined[m] += 1
                continue
            covered[m] += est.ci[0] <= truth <= est.ci[1]
            widths[m].append(est.ci[1] - est.ci[0])
            if m == "ppi++":
                lambdas.append(est.extra["lambda"])
    return {
        "truth": truth,
        "coverage": {m: covered[m] / splits for m in METHODS},
        "width": {m: float(np.mean(widths[m])) if widths[m] else None for m in METHODS},
        "undefined": undefined,
        "lambda": float(np.mean(lambdas)),
    }


def cross_check(gold, yhat_all, *, labelled: int, seed: int, splits: int = 200) -> float | None:
    try:
        from ppi_py import ppi_mean_ci
    except ImportError:
        return None
    rng = np.random.default_rng(seed)
    worst = 0.0
    for _ in range(splits):
        perm = rng.permutation(gold.size)
        lab, unl = perm[:labelled], perm[labelled:]
        est = ppi_mean(gold[lab], yhat_all[lab], yhat_all[unl])
        lo, hi = ppi_mean_ci(gold[lab], yhat_all[lab], yhat_all[unl], alpha=0.05)
        worst = max(worst, abs(est.ci[0] - float(np.ravel(lo)[0])), abs(est.ci[1] - float(np.ravel(hi)[0])))
    return worst


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "n/a"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--splits", type=int, default=2000)
    parser.add_argument("--labelled", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help="write bench/results/estimate.md")
    args = parser.parse_args(argv)

    up_before = uptime()
    gold, verdicts = load(args.data)
    started = time.perf_counter()
    results = {name: run(gold, yhat, splits=args.splits, labelled=args.labelled, seed=args.seed) for name, yhat in verdicts.items()}
    elapsed = time.perf_counter() - started
    checks = {name: cross_check(gold, yhat, labelled=args.labelled, seed=args.seed) for name, yhat in verdicts.items()}
    up_after = uptime()

    lines = [
        "# Estimates from verdicts and labels: coverage on real data",
        "",
        f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        f"- Machine: `nproc` = {os.cpu_count()}, {platform.machine()}, Linux {platform.release()}",
        f"- `uptime` before: `{up_before}`",
        f"- `uptime` after: `{up_after}` (shared machine; other jobs may run)",
        f"- Python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}",
        f"- Data: PandaLM test set ({gold.size} items; Y = at least two of three annotators prefer response 1; "
        f"truth = {gold.mean():.4f}), read from `{args.data}`",
        f"- Workload: {args.splits:,} seeded splits (seed {args.seed}) into {args.labelled} labelled + "
        f"{gold.size - args.labelled} unlabelled, α = 0.05; {elapsed:.1f} s for all splits, methods and judges",
        "- Command: `.venv/bin/python bench/bench_estimate.py --write`",
        "",
    ]
    lines += [
        "The naive judge's interval is the verdicts' own: it covers the truth only when the judge's",
        "bias happens to be smaller than that (too narrow) interval, as for PandaLM-7B here; its",
        "coverage says nothing about the next judge. Rogan-Gladen is wide because it measures the",
        "judge's sensitivity and specificity on 100 labels and propagates their uncertainty.",
        "",
    ]
    ok = True
    for name, res in results.items():
        base = res["width"]["classical"]
        lines += [
            f"## Judge: {name}",
            "",
            f"Mean verdict over all items {verdicts[name].mean():.4f} (truth {res['truth']:.4f}); "
            f"mean tuned λ of PPI++ {res['lambda']:.3f}.",
            "",
            "| method | coverage of the truth | mean width | width / classical | undefined splits |",
            "|---|---:|---:|---:|---:|",
        ]
        for m in METHODS:
            width = res["width"][m]
            ratio = f"{width / base:.3f}" if width is not None else "—"
            shown = f"{width:.4f}" if width is not None else "—"
            lines.append(f"| {m} | {res['coverage'][m]:.1%} | {shown} | {ratio} | {res['undefined'][m]} |")
        passed = res["coverage"]["ppi++"] >= 0.94 and res["width"]["ppi++"] <= base
        ok &= passed
        check = checks[name]
        lines += [
            "",
            f"PPI++: coverage ≥ 94 % and mean width ≤ classical: **{'yes' if passed else 'NO'}**."
            + (f" Largest |Δ| from `ppi_py.ppi_mean_ci` over 200 splits: {check:.1e}." if check is not None else ""),
            "",
        ]
    report = "\n".join(lines)
    print(report)
    if args.write:
        (ROOT / "bench" / "results" / "estimate.md").write_text(report)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
