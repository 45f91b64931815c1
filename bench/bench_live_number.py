"""Benchmark: does the live number's 95 % interval cover where production lives (rare failures, small audits, clusters, uneven weights)?

Issue 35's "Must show": coverage ≥ 0.93 over ≥ 1,000 simulated windows per cell for share estimates at
3 % and 30 % prevalence × 10, 20, 40, 80, 200 audit labels × three trace sampling schemes, for targets
and for claim-level shares of clustered answers; the cells where the method says `too_few` counted and
listed, the interval given in ≥ 80 % of the windows with 20+ labels; and the mean width in the easy
cells (30 %, 80+ labels) no more than 15 % wider than today's. Six interval methods run on the same
windows.

**The windows** (one production window per run, seeded) are bench/live_worlds.py's: targets, clustered claims
(ρ = 0.3) and answers at 3 % or 30 % prevalence, three trace samplings, two judges, an audit of n samples
drawn uniformly; the truth is the window's traffic share (its docstring).

**The methods** (all on the same windows and judges; an interval is 95 %):

- ``calibrate``: calibrate.stats.design.design_estimate, the estimator every production figure goes
  through (Hájek ratio PPI++, clustered linearised variance, Agresti–Min pseudo-cells at the audit's
  effective size, Student t on the design's df, ``too_few`` when a sampling class carrying the traffic
  has too few audit labels: its module docstring). A window it refuses has no interval.
- ``today``: calibrate.stats.survey.hajek_ppi_mean, what calibrate printed before issue 35: the same
  point estimate, an unclustered variance (every claim an independent draw) and a normal-t interval at
  Kish's effective number of labels, not clipped to [0, 1].
- ``wald_cluster``: today's interval with the clustered (ultimate-cluster) variance of both terms and
  t on Kish's effective number of labelled clusters − 1; not clipped.
- ``kg_ppi``: Korn & Graubard (1998): Clopper–Pearson at the effective size of the PPI estimate,
  n* = θ̂(1 − θ̂)/V̂ (not capped at n: the judge's verdicts are the point of PPI) times Korn–Graubard's
  degrees-of-freedom factor (t_{n−1}/t_{k−1})², Kish's effective clusters when θ̂ is 0 or 1.
- ``wilson_mover``: the PPI estimate as a linear combination of the labelled set's multinomial cells
  (gold × verdict) and the judged set's verdict share, θ̂ = λ·m + (1 − λ)·p̂₁₁ + p̂₁₀ − λ·p̂₀₁; Wilson
  limits for every share at its effective size (Korn–Graubard's n*, capped at the count), combined by
  MOVER (Zou & Donner 2008; Newcombe 1998) with the multinomial cells' correlations, then widened
  about the estimate when the clustered linearised variance of the whole is larger than the one the
  combination implies.
- ``classical_wilson``: the audit labels alone (Hájek mean), Wilson at the Korn–Graubard effective size.

Per cell (kind × prevalence × scheme × labels × judge) it reports the windows, the share with an
interval, coverage among those (± 2·√(c(1 − c)/windows given), the Monte-Carlo error), mean width,
intervals reaching outside [0, 1] and of zero width, and for calibrate the windows it called too few and
the median `labels_needed` it reported. The summary checks the issue's figures.

Run from the project root::

    .venv/bin/python bench/bench_live_number.py --quick            # smoke run (50 windows a cell)
    .venv/bin/python bench/bench_live_number.py --write            # 1,000 windows a cell; writes bench/results/live_number.md

References: Korn, E. L. and Graubard, B. I. (1998), Survey Methodology 24(2), 193–201; Zou, G. Y. and
Donner, A. (2008), Statistics in Medicine 27(10), 1693–1702; Newcombe, R. G. (1998), Statistics in
Medicine 17(22), 2635–2650; Wilson, E. B. (1927), JASA 22(158), 209–212; Agresti, A. and Min, Y. (2005),
Statistics in Medicine 24(5), 729–740; Kish, L. (1965), Survey Sampling; Särndal, C.-E., Swensson, B. and
Wretman, J. (1992), Model Assisted Survey Sampling.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import multiprocessing
import platform
import subprocess
import sys
import time
from pathlib import Path

import live_worlds
import numpy as np
import scipy.stats as sps
from live_worlds import ANSWERS, DOWN, JUDGES, KINDS, PREVALENCES, SCHEMES, TRACES, Window, answer_claim_rate, world

from calibrate.stats.design import design_estimate
from calibrate.stats.survey import hajek_ppi_mean

RESULTS = Path(__file__).resolve().parent / "results" / "live_number.md"

AUDITS = (10, 20, 40, 80, 200)
METHODS = ("calibrate", "today", "wald_cluster", "kg_ppi", "wilson_mover", "classical_wilson")
# The methods a run computes (--methods); the others' tallies come from --reuse. calibrate, today and wald_cluster
# are always run together: the easy cells' width ratios compare them on the windows where calibrate gives an interval.
RUN = METHODS
ALPHA = 0.05
Z = float(sps.norm.ppf(1 - ALPHA / 2))


# ---------------------------------------------------------------------------------------------- comparison methods

def wilson(p: float, n: float) -> tuple[float, float]:
    """Wilson's (1927) score interval for a share `p` observed on `n` (possibly effective, non-integer) draws."""
    d = 1 + Z * Z / n
    centre = (p + Z * Z / (2 * n)) / d
    half = Z * math.sqrt(max(p * (1 - p) / n + Z * Z / (4 * n * n), 0.0)) / d
    return max(0.0, centre - half), min(1.0, centre + half)


def clopper_pearson(p: float, n: float) -> tuple[float, float]:
    """Clopper–Pearson's exact interval at x = p·n successes of n (the beta form, for a non-integer effective n)."""
    x = p * n
    lo = 0.0 if x <= 1e-9 else float(sps.beta.ppf(ALPHA / 2, x, n - x + 1))
    hi = 1.0 if x >= n - 1e-9 else float(sps.beta.ppf(1 - ALPHA / 2, x + 1, n - x))
    return lo, hi


def hajek(x: np.ndarray, w: np.ndarray, inv: np.ndarray, k: int) -> tuple[float, float, float]:
    """Return the Hájek mean of x, its ultimate-cluster variance k/(k−1)·Σ_c(Σ p(x − x̄))², and Kish's effective clusters."""
    p = w / w.sum()
    mean = float((p * x).sum())
    totals = np.bincount(inv, weights=p * (x - mean), minlength=k)
    var = k / (k - 1) * float(((totals - totals.mean()) ** 2).sum()) if k > 1 else 0.0
    cw = np.bincount(inv, weights=w, minlength=k)
    return mean, var, float(cw.sum() ** 2 / (cw ** 2).sum())


def effective_n(p: float, var: float, n: int, k: int, kish: float, *, cap: bool) -> float:
    """Korn & Graubard's effective size p(1 − p)/V (times (t_{n−1}/t_{k−1})²); Kish's clusters when p is 0 or 1 or V is 0.

    p within 1e-12 of a bound and V below 1e-20 are floating-point noise (a constant gold's mean may be 1 − 1e-16 with
    V = 1e-33: an effective size of 1e17 and an interval of zero width).
    """
    if not (1e-12 < p < 1 - 1e-12 and var > 1e-20):
        return kish
    size = p * (1 - p) / var
    if cap:
        size = min(size, n)
    if k > 1 and n > 1:
        size *= (sps.t.ppf(1 - ALPHA / 2, n - 1) / sps.t.ppf(1 - ALPHA / 2, k - 1)) ** 2
    return size


def _lam(y: np.ndarray, v: np.ndarray, p: np.ndarray) -> float:
    """The regression coefficient of the gold on the verdict over the labelled set, clipped to [0, 1] (today's λ)."""
    vb = float((p * v).sum())
    var = float((p * (v - vb) ** 2).sum())
    lam = 0.0 if var <= 1e-12 else float(np.clip((p * (y - (p * y).sum()) * (v - vb)).sum() / var, 0.0, 1.0))
    return 0.0 if lam < 1e-12 else lam  # a constant gold's covariance is floating-point noise


def _ppi_clustered(d: Window, v: np.ndarray, v_all: np.ndarray, cache: dict) -> dict:
    """Today's point estimate with the clustered variance of both terms (computed once per window and judge)."""
    if "ppi" in cache:
        return cache["ppi"]
    inv, k, inv_all, k_all = d.cluster_codes()
    lam = _lam(d.y, v, d.w / d.w.sum())
    m, var_m, kish_m = hajek(v_all, d.w_all, inv_all, k_all)
    r, var_r, kish = hajek(d.y - lam * v, d.w, inv, k)
    cache["ppi"] = {"value": lam * m + r, "var": lam ** 2 * var_m + var_r, "lam": lam, "m": m, "var_m": var_m,
                    "kish_m": kish_m, "k": k, "kish": kish, "inv": inv, "k_all": k_all}
    return cache["ppi"]


def method_calibrate(d: Window, v: np.ndarray, v_all: np.ndarray, cache: dict) -> dict:
    try:
        est = design_estimate(d.y, v, d.w, d.pi, d.g, v_all, d.w_all, d.pi_all, d.g_all, binary=True, alpha=ALPHA)
    except Exception as exc:  # a defect to report with its window (run_cell keeps the first few), not to hide
        return {"ci": None, "reason": f"crash: {type(exc).__name__}: {exc}"}
    if est.ci is None or est.value is None:
        return {"ci": None, "reason": est.reason.code if est.reason else est.status, "needed": est.extra.get("labels_needed")}
    if None in est.ci:
        return {"ci": None, "reason": "crash: an interval end that is not a finite number"}
    return {"ci": est.ci}


def method_today(d: Window, v: np.ndarray, v_all: np.ndarray, cache: dict) -> dict:
    est = hajek_ppi_mean(d.y, v, v_all, d.w, d.w_all, alpha=ALPHA)
    return {"ci": est.ci}


def method_wald_cluster(d: Window, v: np.ndarray, v_all: np.ndarray, cache: dict) -> dict:
    f = _ppi_clustered(d, v, v_all, cache)
    half = float(sps.t.ppf(1 - ALPHA / 2, max(f["kish"] - 1, 1))) * math.sqrt(f["var"])
    return {"ci": (f["value"] - half, f["value"] + half)}


def method_kg_ppi(d: Window, v: np.ndarray, v_all: np.ndarray, cache: dict) -> dict:
    f = _ppi_clustered(d, v, v_all, cache)
    value = min(max(f["value"], 0.0), 1.0)
    return {"ci": clopper_pearson(value, effective_n(value, f["var"], d.y.size, f["k"], f["kish"], cap=False))}


def mover(parts: list[tuple[float, float, float, float]], corr: dict[tuple[int, int], float]) -> tuple[float, float]:
    """Zou & Donner's MOVER for Σ c_i θ_i from each θ_i's (estimate, low, high) and their correlations."""
    theta = sum(c * e for c, e, _, _ in parts)
    sides = []
    for lower in (True, False):
        # the signed distance of c·θ̂ to the limit of c·θ on this side
        dist = [c * e - min(c * lo, c * hi) if lower else max(c * lo, c * hi) - c * e for c, e, lo, hi in parts]
        s = sum(x * x for x in dist)
        for (i, j), r in corr.items():
            s += 2 * r * math.copysign(1.0, parts[i][0] * parts[j][0]) * dist[i] * dist[j]
        sides.append(math.sqrt(max(s, 0.0)))
    return theta - sides[0], theta + sides[1]


def method_wilson_mover(d: Window, v: np.ndarray, v_all: np.ndarray, cache: dict) -> dict:
    f = _ppi_clustered(d, v, v_all, cache)
    lam, n = f["lam"], d.y.size
    # the rectifier's multinomial cells (gold, verdict) by their coefficient in θ̂; cells sharing one are one share
    # (λ = 0: (1, 1) and (1, 0) are the gold's share, else MOVER would see two shares correlated −1 and cancel them)
    groups: dict[float, np.ndarray] = {}
    for c, x in ((1 - lam, d.y * v), (1.0, d.y * (1 - v)), (-lam, (1 - d.y) * v)):
        if abs(c) > 1e-9:
            key = round(c, 9)
            groups[key] = groups[key] + x if key in groups else x
    parts, variances = [], []
    for c, x in groups.items():
        share, var, kish = hajek(x, d.w, f["inv"], f["k"])
        lo, hi = wilson(share, effective_n(share, var, n, f["k"], kish, cap=True))
        parts.append((c, share, lo, hi))
        variances.append(var)
    cells = len(parts)
    if lam > 1e-9:
        m_lo, m_hi = wilson(f["m"], effective_n(f["m"], f["var_m"], v_all.size, f["k_all"], f["kish_m"], cap=True))
        parts.append((lam, f["m"], m_lo, m_hi))
        variances.append(f["var_m"])
    corr = {}
    for i in range(cells):
        for j in range(i + 1, cells):
            pi_, pj = parts[i][1], parts[j][1]
            if 0 < pi_ < 1 and 0 < pj < 1:
                corr[(i, j)] = -math.sqrt(pi_ * pj / ((1 - pi_) * (1 - pj)))
    lo, hi = mover(parts, corr)
    theta = f["value"]
    implied = sum(c * c * var for (c, *_), var in zip(parts, variances, strict=True))
    implied += sum(2 * r * parts[i][0] * parts[j][0] * math.sqrt(variances[i] * variances[j]) for (i, j), r in corr.items())
    if implied > 0 and f["var"] > implied:  # clustering: widen about the estimate to the whole's clustered variance
        factor = math.sqrt(f["var"] / implied)
        lo, hi = theta - factor * (theta - lo), theta + factor * (hi - theta)
    return {"ci": (max(0.0, lo), min(1.0, hi))}


def method_classical_wilson(d: Window, v: np.ndarray, v_all: np.ndarray, cache: dict) -> dict:
    inv, k, _, _ = d.cluster_codes()
    share, var, kish = hajek(d.y, d.w, inv, k)
    return {"ci": wilson(share, effective_n(share, var, d.y.size, k, kish, cap=True))}


METHOD_FUNCTIONS = {"calibrate": method_calibrate, "today": method_today, "wald_cluster": method_wald_cluster,
                    "kg_ppi": method_kg_ppi, "wilson_mover": method_wilson_mover, "classical_wilson": method_classical_wilson}


# ---------------------------------------------------------------------------------------------- the grid

def cell_seed(seed: int, kind: str, prev: float, scheme: str, n: int) -> list[int]:
    """A cell's seed sequence: stable across runs and processes (never Python's salted str hash)."""
    return [seed, KINDS.index(kind), round(prev * 1000), list(SCHEMES).index(scheme), n]


def run_cell(task: tuple[str, float, str, int, int, int]) -> dict:
    """Return one cell's tallies for each judge and method (`reps` windows, shared by every judge and method)."""
    kind, prev, scheme, n, reps, seed = task
    rng = np.random.default_rng(cell_seed(seed, kind, prev, scheme, n))
    started = time.perf_counter()
    tallies = {judge: {m: {"given": 0, "hits": 0, "width": 0.0, "outside": 0, "zero": 0, "width_common": 0.0, "common": 0,
                           "reasons": {}, "needed": [], "seconds": 0.0} for m in RUN} for judge in JUDGES}
    iccs, truths, crashes, samples = [], [], [], []
    for rep in range(reps):
        d = world(rng, kind, prev, n, scheme)
        truths.append(d.truth)
        samples.append(d.cluster_codes()[3])
        if d.icc is not None:
            iccs.append(d.icc)
        for judge, (v, v_all) in d.verdicts.items():
            cache: dict = {}
            out = {}
            for m in RUN:
                tick = time.perf_counter()
                out[m] = METHOD_FUNCTIONS[m](d, v, v_all, cache)
                tallies[judge][m]["seconds"] += time.perf_counter() - tick
            common = out["calibrate"]["ci"] is not None
            for m, res in out.items():
                t = tallies[judge][m]
                ci = res["ci"]
                if ci is None:
                    t["reasons"][res["reason"]] = t["reasons"].get(res["reason"], 0) + 1
                    if res["reason"].startswith("crash") and len(crashes) < 5:
                        crashes.append({"judge": judge, "window": rep, "error": res["reason"]})
                    if res.get("needed") is not None:
                        t["needed"].append(res["needed"])
                    continue
                lo, hi = ci
                t["given"] += 1
                t["hits"] += bool(lo <= d.truth <= hi)
                t["width"] += hi - lo
                t["outside"] += bool(lo < 0 or hi > 1)
                t["zero"] += bool(hi - lo <= 1e-12)
                if common:
                    t["width_common"] += hi - lo
                    t["common"] += 1
    return {"kind": kind, "prev": prev, "scheme": scheme, "n": n, "reps": reps, "tallies": tallies,
            "icc": float(np.nanmean(iccs)) if iccs else None, "truth": float(np.mean(truths)), "crashes": crashes,
            "samples": float(np.mean(samples)),
            "seconds": time.perf_counter() - started}


def grid(kinds: list[str], prevs: list[float], schemes: list[str], audits: list[int], reps: int, seed: int,
         processes: int) -> list[dict]:
    # the slow cells first, so that the two processes finish together
    tasks = sorted(((k, p, s, n, reps, seed) for k in kinds for p in prevs for s in schemes for n in audits),
                   key=lambda t: (t[0] == "targets", -TRACES[t[2]], -t[3]))
    if processes <= 1:
        rows = [run_cell(t) for t in tasks]
    else:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            rows = list(pool.imap_unordered(run_cell, tasks))
    order = {(k, p, s, n): i for i, (k, p, s, n) in enumerate((k, p, s, n) for k in kinds for p in prevs for s in schemes
                                                                for n in audits)}
    return sorted(rows, key=lambda r: order[(r["kind"], r["prev"], r["scheme"], r["n"])])


# ---------------------------------------------------------------------------------------------- figures

def coverage(t: dict) -> float | None:
    return t["hits"] / t["given"] if t["given"] else None


def mc_error(t: dict) -> float | None:
    c = coverage(t)
    return 2 * math.sqrt(c * (1 - c) / t["given"]) if c is not None else None


def fmt(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def summary(rows: list[dict]) -> dict:
    """The issue's checks over the grid: calibrate's worst coverage, its given rate at 20+ labels, the easy cells' widths."""
    out: dict = {"worst": [], "low": [], "given_20": {}, "width": {}, "too_few_cells": 0, "cells": 0}
    given_20: dict = {}
    for r in rows:
        for judge, by_method in r["tallies"].items():
            t = by_method["calibrate"]
            out["cells"] += 1
            name = (r["kind"], r["prev"], r["scheme"], r["n"], judge)
            if t["given"]:
                out["worst"].append((coverage(t), name, t["given"]))
                if coverage(t) < 0.93:
                    out["low"].append((name, coverage(t), mc_error(t), t["given"]))
            if t["given"] < r["reps"]:
                out["too_few_cells"] += 1
            if r["n"] >= 20:
                for key in (r["kind"], "all"):
                    g = given_20.setdefault(key, [0, 0])
                    g[0] += t["given"]
                    g[1] += r["reps"]
            if r["prev"] == 0.30 and r["n"] >= 80:
                today = by_method["today"]
                for key in ((r["kind"], r["scheme"]), (r["kind"], "pooled")):
                    acc = out["width"].setdefault(key, [0.0, 0.0, 0, 0.0])
                    acc[0] += t["width_common"]
                    acc[1] += today["width_common"]
                    acc[2] += t["common"]
                    acc[3] += by_method["wald_cluster"]["width_common"]
    out["worst"].sort(key=lambda x: x[0])
    out["given_20"] = {k: g / n for k, (g, n) in given_20.items()}
    return out


def calibrate_table(rows: list[dict], kind: str) -> list[str]:
    judges = list(JUDGES)
    head = "| prevalence | sampling | labels | " + " | ".join(
        f"{j}: given | coverage ± MC | width | too few | labels needed (median)" for j in judges) + " |"
    lines = [head, "|---:|:--|---:|" + "---:|" * (5 * len(judges))]
    for r in (r for r in rows if r["kind"] == kind):
        cells = []
        for j in judges:
            t = r["tallies"][j]["calibrate"]
            few = r["reps"] - t["given"]
            reasons = ", ".join(f"{code} {count}" for code, count in sorted(t["reasons"].items())) if few else ""
            cov = f"{fmt(coverage(t))} ± {fmt(mc_error(t))}" if t["given"] else "–"
            cells += [f"{t['given'] / r['reps']:.3f}", cov, fmt(t["width"] / t["given"] if t["given"] else None),
                      f"{few}" + (f" ({reasons})" if reasons and list(t["reasons"]) != ["too_few_audit"] else ""),
                      fmt(float(np.median(t["needed"])) if t["needed"] else None, 0)]
        lines.append(f"| {r['prev']:.0%} | {r['scheme']} | {r['n']} | " + " | ".join(cells) + " |")
    return lines


def comparison_table(rows: list[dict], kind: str, judge: str) -> list[str]:
    lines = ["| prevalence | sampling | labels | " + " | ".join(METHODS) + " |", "|---:|:--|---:|" + "---:|" * len(METHODS)]
    for r in (r for r in rows if r["kind"] == kind):
        cells = []
        for m in METHODS:
            t = r["tallies"][judge][m]
            cov = coverage(t)
            mark = "**" if cov is not None and cov < 0.93 else ""
            cells.append(f"{mark}{fmt(cov)}{mark} ({fmt(t['width'] / t['given'] if t['given'] else None)})")
        lines.append(f"| {r['prev']:.0%} | {r['scheme']} | {r['n']} | " + " | ".join(cells) + " |")
    return lines


def defects_table(rows: list[dict], kind: str) -> list[str]:
    """Intervals reaching outside [0, 1] and of zero width, per method with any (judges summed)."""
    with_any = [m for m in METHODS if any(r["tallies"][j][m]["outside"] or r["tallies"][j][m]["zero"]
                                          for r in rows if r["kind"] == kind for j in JUDGES)]
    if not with_any:
        return ["No method gave an interval reaching outside [0, 1] or of zero width."]
    lines = ["| prevalence | sampling | labels | " + " | ".join(f"{m}: outside [0, 1] | zero width" for m in with_any) + " |",
             "|---:|:--|---:|" + "---:|" * (2 * len(with_any))]
    for r in (r for r in rows if r["kind"] == kind):
        cells = []
        for m in with_any:
            given = sum(r["tallies"][j][m]["given"] for j in JUDGES)
            out = sum(r["tallies"][j][m]["outside"] for j in JUDGES)
            zero = sum(r["tallies"][j][m]["zero"] for j in JUDGES)
            cells += [f"{out / given:.3f}" if given else "–", f"{zero / given:.3f}" if given else "–"]
        lines.append(f"| {r['prev']:.0%} | {r['scheme']} | {r['n']} | " + " | ".join(cells) + " |")
    others = [m for m in METHODS if m not in with_any]
    lines += ["", "Shares of the intervals given, both judges' windows together; none for "
              + ", ".join(f"`{m}`" for m in others) + "."]
    return lines


def _judge_free(rows: list[dict], test) -> dict[str, list[str]]:
    """Cells (judges merged: the too-few rule reads no verdict) where test(row, calibrate's tally) holds, by kind."""
    out: dict[str, list[str]] = {}
    for r in rows:
        t = r["tallies"][next(iter(JUDGES))]["calibrate"]
        if test(r, t):
            out.setdefault(r["kind"], []).append(f"{r['prev']:.0%} {r['scheme']} n={r['n']} {t['given'] / r['reps']:.3f}")
    return out


def summary_lines(s: dict, rows: list[dict]) -> list[str]:
    worst = [w for w in s["worst"] if w[2] >= 100]
    lines = []
    if s["low"]:
        lines.append(f"- **Coverage ≥ 0.93 where calibrate gives an interval**: in {s['cells'] - len(s['low'])} of {s['cells']} "
                     "cells (kind × prevalence × sampling × labels × judge); below:")
        lines += [f"  - {_cell_name(name)}: {c:.3f} ± {mc:.3f} over {given} windows" for name, c, mc, given in sorted(s["low"])]
    else:
        lines.append(f"- **Coverage ≥ 0.93 where calibrate gives an interval**: in every one of the {s['cells']} cells.")
    if worst:
        lines.append(f"- Lowest over the cells with ≥ 100 intervals: {worst[0][0]:.3f} ({_cell_name(worst[0][1])}).")
    given = s["given_20"]
    lines.append("- **Interval given in ≥ 80 % of the windows with 20+ labels**: "
                 + ", ".join(f"{k} {given[k]:.3f}" for k in (*KINDS, "all") if k in given) + " (every window of the cells with "
                 "20, 40, 80 and 200 labels pooled). Cells below 0.8 (the share given; the same for both judges):")
    short = _judge_free(rows, lambda r, t: r["n"] >= 20 and t["given"] < 0.8 * r["reps"])
    lines += [f"  - {kind}: " + "; ".join(cells) for kind, cells in short.items()]
    refused = sum(r["reps"] - r["tallies"][j]["calibrate"]["given"] for r in rows for j in JUDGES)
    codes = sorted({c for r in rows for j in JUDGES for c in r["tallies"][j]["calibrate"]["reasons"]})
    lines.append(f"- Windows refused: {refused:,} of {sum(r['reps'] for r in rows) * len(JUDGES):,} (reasons: "
                 f"{', '.join(codes) or 'none'}), in {s['too_few_cells']} cells; every count is in the tables' \"too few\" column.")
    lines.append("- **Width in the easy cells** (30 %, 80 and 200 labels, both judges): mean width calibrate / today on the "
                 "same windows (those where calibrate gives an interval), and in brackets calibrate / wald_cluster:")
    for kind in KINDS:
        parts = [f"{scheme} {acc[0] / acc[1]:.3f} ({acc[0] / acc[3]:.3f}; {acc[2]:,} windows)"
                 for scheme in (*SCHEMES, "pooled") if (acc := s["width"].get((kind, scheme))) and acc[2]]
        if parts:
            lines.append(f"  - {kind}: " + ", ".join(parts))
    over = [f"{kind} {scheme}" for (kind, scheme), acc in sorted(s["width"].items())
            if scheme != "pooled" and acc[2] and acc[0] / acc[1] > 1.15]
    if over:
        lines.append("  - More than 15 % wider than today's: " + ", ".join(over) + ". Today's interval treats every claim as "
                     "an independent draw (its coverage in these cells is in the claims tables); against the same estimate "
                     "with the clustered variance (wald_cluster, the bracketed ratio) the widening is what the Agresti–Min "
                     "cells, the t on labelled answers − 1 and the too-few rule cost. A narrower claim-level interval than "
                     "the clustered one is a narrower wrong one.")
    return lines


def scoreboard(rows: list[dict]) -> list[str]:
    """Per method and kind: cells below 0.93, the lowest coverage, intervals outside [0, 1] or of zero width."""
    kinds = [k for k in KINDS if any(r["kind"] == k for r in rows)]
    lines = ["| method | " + " | ".join(f"{k}: cells < 0.93 | lowest" for k in kinds) + " | outside [0, 1] | zero width |",
             "|:--|" + "---:|" * (2 * len(kinds) + 2)]
    for m in METHODS:
        cells, given, outside, zero = [], 0, 0, 0
        for kind in kinds:
            tallies = [r["tallies"][j][m] for r in rows if r["kind"] == kind for j in JUDGES]
            covs = [coverage(t) for t in tallies if t["given"] >= 100]
            cells += [f"{sum(c < 0.93 for c in covs)} of {len(covs)}", fmt(min(covs)) if covs else "–"]
            given += sum(t["given"] for t in tallies)
            outside += sum(t["outside"] for t in tallies)
            zero += sum(t["zero"] for t in tallies)
        lines.append(f"| `{m}` | " + " | ".join(cells) + f" | {outside / given:.3f} | {zero / given:.3f} |")
    return lines


def _cell_name(name: tuple) -> str:
    kind, prev, scheme, n, judge = name
    return f"{kind} {prev:.0%} {scheme} n={n} {judge} judge"


def report(rows: list[dict], meta: dict) -> str:
    s = summary(rows)
    seconds = {m: sum(r["tallies"][j][m]["seconds"] for r in rows for j in JUDGES) for m in METHODS}
    out = ["# The live number: coverage where production lives (issue 35, simulation)", "",
           f"- Date: {meta['date']}",
           f"- Machine: {platform.machine()}, Python {platform.python_version()}, {meta['cpus']} CPUs, {meta['processes']} processes",
           f"- `uptime` before: `{meta['before']}`",
           f"- `uptime` after: `{meta['after']}` (shared machine; other engineers' jobs run beside it)",
           f"- Workload: {meta['reps']:,} seeded windows (seed {meta['seed']}) per cell, {len(rows)} cells × {len(JUDGES)} judges "
           f"(the judges share the windows); {meta['seconds']:,.0f} s in all. Time in the methods: "
           + ", ".join(f"{m} {100 * v / sum(seconds.values()):.0f} %" for m, v in seconds.items()),
           f"- Command: `{meta['command']}`"
           + (f"; the report rendered again from its saved tallies on {meta['rendered']} (`--render`)" if "rendered" in meta else "")
           + (f"\n- {', '.join(meta['reused']['methods'])}: tallies of the run of {meta['reused']['from']} on the same seeded windows "
              "(`--reuse`; a method reads only the window, so they are what it computes now; their time is that run's)"
              if "reused" in meta else ""),
           "",
           "## Summary", "", *summary_lines(s, rows), "",
           "Every method at a glance (cells with ≥ 100 intervals; the last two columns: shares of all its intervals):", "",
           *scoreboard(rows), "", *explanation(rows), ""]
    for kind in (k for k in KINDS if any(r["kind"] == k for r in rows)):
        out += [f"## {kind}", "", f"### {kind}: calibrate (stats/design.py `design_estimate`)", "",
                "\"given\": share of windows with an interval; coverage among those with its Monte-Carlo error "
                "(± 2·√(c(1 − c)/given): 0 when every interval covers; the one-sided 95 % bound is then 1 − 3/given); "
                "\"too few\": windows refused (`too_few_audit` unless said); labels needed: the median `labels_needed` the "
                "refusals reported.", "", *calibrate_table(rows, kind), ""]
        for judge in JUDGES:
            good, bad = JUDGES[judge]
            out += [f"### {kind}: every method, {judge} judge (P(good | good) {good}, P(good | bad) {bad})", "",
                    "Coverage (mean width); **bold** below 0.93. calibrate's over the windows it gives an interval.", "",
                    *comparison_table(rows, kind, judge), ""]
        out += [f"### {kind}: intervals outside [0, 1] and of zero width", "", *defects_table(rows, kind), ""]
    return "\n".join(out) + "\n"


def windows_table(rows: list[dict]) -> list[str]:
    """The mean number of samples (the audit's frame) per window, by kind, prevalence and sampling."""
    lines = ["| kind | prevalence | " + " | ".join(SCHEMES) + " |", "|:--|---:|" + "---:|" * len(SCHEMES)]
    for kind in KINDS:
        for prev in PREVALENCES:
            got = {r["scheme"]: r["samples"] for r in rows if r["kind"] == kind and r["prev"] == prev}
            if got:
                lines.append(f"| {kind} | {prev:.0%} | " + " | ".join(f"{got[s]:,.0f}" if s in got else "–" for s in SCHEMES) + " |")
    return lines


def _doc(first: str, stop: str | None, doc: str = __doc__) -> list[str]:
    """A docstring (this module's) from the paragraph starting with `first` to the one starting with `stop`, as Markdown."""
    text = doc[doc.index(first):doc.index(stop) if stop else None].strip()
    return text.replace("``", "`").splitlines()


def explanation(rows: list[dict]) -> list[str]:
    iccs: dict = {}
    for r in rows:
        if r["icc"] is not None:
            iccs.setdefault((r["kind"], r["prev"]), []).append(r["icc"])
    icc_text = "; ".join(f"{k} {p:.0%}: {np.mean(v):.3f}" for (k, p), v in sorted(iccs.items()))
    mus = ", ".join(f"{p:.0%} of answers → {1 - answer_claim_rate(p):.2%} of claims" for p in PREVALENCES)
    return ["## Method", "", *_doc("**One window**", None, live_worlds.__doc__), "",
            "Traffic per window: " + ", ".join(f"`{s}` {TRACES[s]:,} traces or {ANSWERS[s]:,} answers" for s in SCHEMES)
            + "; the mean number of samples (the audit's frame) per window:", "", *windows_table(rows), "",
            f"Measured intra-answer correlation of the claims' gold (mean over windows): {icc_text or 'not run'}. "
            f"Answers' μ: {mus}.", "", *_doc("**The methods**", "Per cell"), "",
            "A cell's coverage is over the windows where the method gives an interval (all of them for every method but "
            "calibrate). With 1,000 windows its Monte-Carlo error at 0.95 is ± 0.014: a cell at 0.937 is within it. The "
            "judges share each window (one uniform draw per target decides both verdicts), so their columns are paired. "
            "For targets and answers every sample is its own cluster, and `wald_cluster` is `today` to the digit.", "",
            *_doc("References", None), "", *reading(rows)]


def failures_table(rows: list[dict]) -> list[str]:
    """Per method: the cells below 0.93 by prevalence and sampling (kinds, labels and judges together)."""
    keys = [(p, sc) for p in PREVALENCES for sc in SCHEMES]
    lines = ["| method | " + " | ".join(f"{p:.0%} {sc}" for p, sc in keys) + " |", "|:--|" + "---:|" * len(keys)]
    for m in METHODS:
        cells = []
        for p, sc in keys:
            tallies = [r["tallies"][j][m] for r in rows if r["prev"] == p and r["scheme"] == sc for j in JUDGES]
            covs = [coverage(t) for t in tallies if t["given"] >= 100]
            cells.append(f"{sum(c < 0.93 for c in covs)} of {len(covs)}" if covs else "–")
        lines.append(f"| `{m}` | " + " | ".join(cells) + " |")
    return lines


def _class_shares(prev: float, scheme: str) -> tuple[float, float]:
    """The traffic share and the sample share of the traces without a thumbs-down (targets), from the world's constants."""
    share = (1 - prev) * (1 - DOWN[0]) + prev * (1 - DOWN[1])
    kept = share * SCHEMES[scheme]
    return share, kept / (kept + 1 - share)


def reading(rows: list[dict]) -> list[str]:
    """What the numbers mean: the mechanisms, with this run's figures."""
    cal = [(r, j, r["tallies"][j]["calibrate"]) for r in rows for j in JUDGES]
    rare = [(r, t) for r, j, t in cal if r["prev"] == PREVALENCES[0] and t["given"] >= 100]
    soft = [(r, j, t) for r, j, t in cal if t["given"] >= 100 and coverage(t) < 0.95]
    ratios = []
    for r, j, t in cal:
        other = r["tallies"][j]["classical_wilson"]
        if r["prev"] == PREVALENCES[0] and t["given"] >= 0.8 * r["reps"] and coverage(other) >= 0.93:
            ratios.append((t["width"] / t["given"] / (other["width"] / other["given"]), f"{r['kind']} {r['scheme']} n={r['n']} {j}"))
    today = {k: [r["tallies"][j]["today"] for r in rows if r["kind"] == k for j in JUDGES] for k in KINDS}
    lines = ["## What the numbers mean", "",
             "Cells below 0.93 by prevalence and sampling (of the cells with ≥ 100 intervals; kinds, labels and judges together):",
             "", *failures_table(rows), ""]
    if rare:
        widest = max(ratios) if ratios else None
        lines.append(f"- **calibrate** is conservative where failures are rare: at {PREVALENCES[0]:.0%} it covers "
                     f"{min(coverage(t) for _, t in rare):.3f}–{max(coverage(t) for _, t in rare):.3f}"
                     + (f", its intervals a median {np.median([x for x, _ in ratios]):.2f}× (up to {widest[0]:.2f}×, {widest[1]}) as wide as the labels-alone "
                        "Wilson interval's in the cells where that covers too: the Agresti–Min pseudo-cells at the effective size "
                        "and a t on few degrees of freedom cost width when the audit holds no failure" if ratios else "")
                     + ". Its cells below 0.95 are " + (", ".join(f"{r['kind']} {r['prev']:.0%} {r['scheme']} n={r['n']} {j}"
                                                           for r, j, _ in soft) if soft else "none")
                     + ": at the common prevalence, mostly with uneven weights and 80+ labels, where the pseudo-counts no "
                     "longer widen anything and what is left is a t interval on a ratio estimator that a few heavy labels make "
                     "skewed (bench/results/production.md saw the same 0.94).")
    for kind, tallies in today.items():
        given = [t for t in tallies if t["given"]]
        if given:
            lines.append(f"- **today** on {kind}: coverage down to {min(coverage(t) for t in given):.3f}; up to "
                         f"{max(t['zero'] / t['given'] for t in given):.0%} of a cell's intervals of zero width and "
                         f"{max(t['outside'] / t['given'] for t in given):.0%} reaching outside [0, 1]"
                         + (" — and it treats every claim as an independent draw, so it fails at 30 % too." if kind == "claims" else "."))
    lines += [
        "- **wald_cluster** mends the claims' variance at 30 % with even weights but not the rare failures: with no failure "
        "and no disagreement in the audit its variance is 0.",
        "- **kg_ppi** (Korn–Graubard on the PPI variance) fails for the same reason at 3 %: the PPI variance is then the "
        "judge term alone, the effective size becomes the judged set's and Clopper–Pearson is as narrow as the judge's interval.",
        "- **wilson_mover** is the best of the others on targets and answers at 3 %, but its cells' limits know neither the "
        "clusters (claims) nor the sampling classes (100-fold weights at 30 %).",
        "- **classical_wilson** (labels alone) covers where the weights are even and drops the judge's information (wider "
        "at 30 % than the PPI methods); with 100-fold weights its effective size overstates what a handful of heavy labels know.",
    ]
    refused = [(r, j) for r, j, t in cal if r["n"] >= 20 and t["given"] < 0.8 * r["reps"]]
    rescued = [f"{r['kind']} {r['prev']:.0%} {r['scheme']} n={r['n']} {j} ({m} {coverage(r['tallies'][j][m]):.3f})"
               for r, j in refused for m in METHODS[1:] if coverage(r["tallies"][j][m]) >= 0.93]
    share, sampled = _class_shares(PREVALENCES[-1], "w100")
    lines.append(f"- **Refusals**: in the {len(refused)} cells with 20+ labels where calibrate gives an interval in fewer than "
                 f"80 % of the windows, another method covers ≥ 0.93 on every window in {len(rescued)}"
                 + (": " + "; ".join(rescued) if rescued else "") + "; in the others none does. With 100-fold weights at "
                 f"{PREVALENCES[-1]:.0%} the traces without a thumbs-down are {share:.0%} of the traffic but {sampled:.1%} of the "
                 f"samples (targets): an audit of 80 draws {80 * sampled:.1f} of them on average, fewer than the 5 the rule asks "
                 "of a class holding ≥ 10 % of the traffic, and `labels_needed` says how many more would settle it. "
                 "Where another method covers, the rule's 5 is stricter than needed for that kind of window.")
    return lines


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "unavailable"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000, help="windows per cell (default 1,000)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 50 windows per cell, nothing written")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--prevalences", default=",".join(str(p) for p in PREVALENCES))
    parser.add_argument("--schemes", default=",".join(SCHEMES))
    parser.add_argument("--audits", default=",".join(str(n) for n in AUDITS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS.relative_to(RESULTS.parents[2])}")
    parser.add_argument("--rows", type=Path, help="also save the cells' tallies and the run's details to this JSON file")
    parser.add_argument("--render", type=Path, help="render the report from a --rows file instead of running the grid")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help="the methods to run (calibrate, today and wald_cluster always); the others' tallies from --reuse")
    parser.add_argument("--reuse", type=Path, help="a --rows file of an earlier run (same seed and windows per cell) for the "
                        "methods not run: their figures do not depend on the ones that are")
    args = parser.parse_args(argv)
    if args.render:
        saved = json.loads(args.render.read_text(encoding="utf-8"))
        saved["meta"]["rendered"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        return _emit(report(saved["rows"], saved["meta"]), args.write)
    reps = 50 if args.quick else args.reps
    global RUN
    RUN = tuple(m for m in METHODS if m in set(args.methods.split(",")) | {"calibrate", "today", "wald_cluster"})
    if RUN != METHODS and not args.reuse:
        parser.error("--methods leaves methods out: give --reuse with an earlier run's --rows file for them")
    kinds = [k for k in args.kinds.split(",") if k]
    schemes = [s for s in args.schemes.split(",") if s]
    if set(kinds) - set(KINDS) or set(schemes) - set(SCHEMES):
        parser.error(f"kinds are {', '.join(KINDS)}; schemes {', '.join(SCHEMES)}")
    before, started = uptime(), time.perf_counter()
    rows = grid(kinds, [float(p) for p in args.prevalences.split(",")], schemes, [int(n) for n in args.audits.split(",")],
                reps, args.seed, args.processes)
    if RUN != METHODS:
        rows, reused = reuse(rows, args.reuse, reps, args.seed)
    meta = {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "cpus": multiprocessing.cpu_count(),
            "processes": args.processes, "before": before, "after": uptime(), "reps": reps, "seed": args.seed,
            "seconds": time.perf_counter() - started,
            "command": ".venv/bin/python bench/bench_live_number.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    if RUN != METHODS:
        meta["reused"] = reused
    if args.rows:
        args.rows.write_text(json.dumps({"rows": rows, "meta": meta}), encoding="utf-8")
    return _emit(report(rows, meta), args.write and not args.quick)


def reuse(rows: list[dict], path: Path, reps: int, seed: int) -> tuple[list[dict], dict]:
    """Give each cell the tallies of the methods not run from an earlier run of the same cell, seed and windows.

    A cell's windows come from its own seeded generator, and a method reads only the window, so an earlier run's
    tallies of a method are what it would compute now (checked: `today` reproduces to the last digit)."""
    saved = json.loads(path.read_text(encoding="utf-8"))
    if saved["meta"]["seed"] != seed or saved["meta"]["reps"] != reps:
        raise SystemExit(f"{path}: seed {saved['meta']['seed']}, {saved['meta']['reps']} windows a cell; this run: {seed}, {reps}")
    earlier = {(r["kind"], r["prev"], r["scheme"], r["n"]): r for r in saved["rows"]}
    for row in rows:
        old = earlier.get((row["kind"], row["prev"], row["scheme"], row["n"]))
        if old is None:
            raise SystemExit(f"{path}: no cell {row['kind']} {row['prev']} {row['scheme']} n={row['n']}")
        for judge in JUDGES:
            for m in METHODS:
                if m not in RUN:
                    row["tallies"][judge][m] = old["tallies"][judge][m]
            row["tallies"][judge] = {m: row["tallies"][judge][m] for m in METHODS}
    return rows, {"from": saved["meta"]["date"], "methods": [m for m in METHODS if m not in RUN]}


def _emit(text: str, write: bool) -> int:
    print(text)
    if write:
        RESULTS.write_text(text, encoding="utf-8")
        print(f"written: {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
