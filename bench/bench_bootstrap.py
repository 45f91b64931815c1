"""Benchmark: vectorised cluster bootstrap of Cohen's kappa vs a naive scikit-learn loop.

Workload (defaults): 100,000 claims in 10,000 clusters (10 claims per sample), binary
labels with within-cluster correlated agreement, 2,000 resamples, 95 % interval.

- Vectorised: ``calibrate.stats.cluster_bootstrap_kappa`` (percentile and BCa), median of
  ``--repeat`` runs.
- Loop: for each row of the same bootstrap index matrix, materialise the resample
  (``np.repeat`` of the drawn clusters' rows) and call ``sklearn.metrics.cohen_kappa_score``.
  Only ``--loop-resamples`` (default 100) resamples are timed and the time is extrapolated
  linearly to the full number of resamples.
- Agreement: on those shared resamples the vectorised and loop kappas are compared
  element-wise, and so are the percentile intervals computed from them.
- Memory: peak traced allocation (``tracemalloc``) of one vectorised call, and the
  process's peak RSS (``resource.getrusage``).

Run from the project root::

    .venv/bin/python bench/bench_bootstrap.py            # print the report
    .venv/bin/python bench/bench_bootstrap.py --write    # also write bench/results/bootstrap.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import scipy
import sklearn
from sklearn.metrics import cohen_kappa_score

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calibrate.stats import bootstrap_index_matrix, cluster_bootstrap_kappa, factorize_clusters, kappa_resamples


def make_data(n_claims: int, n_clusters: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Binary human/judge labels; agreement rate and prevalence vary by cluster."""
    rng = np.random.default_rng(seed)
    clusters = np.repeat(np.arange(n_clusters), n_claims // n_clusters)
    clusters = np.concatenate([clusters, rng.integers(0, n_clusters, n_claims - clusters.size)])
    prevalence = rng.beta(4, 2, n_clusters)[clusters]
    agree_rate = rng.beta(8, 2, n_clusters)[clusters]
    human = (rng.random(n_claims) < prevalence).astype(np.int64)
    judge = np.where(rng.random(n_claims) < agree_rate, human, 1 - human)
    return human, judge, clusters


def time_vectorised(human, judge, clusters, *, n_resamples, method, repeat):
    times, est = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        est = cluster_bootstrap_kappa(human, judge, clusters, n_labels=2, n_resamples=n_resamples, method=method, seed=0)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), est


def time_loop(human, judge, clusters, indices):
    codes, uniques = factorize_clusters(clusters)
    g = len(uniques)
    rows = np.arange(codes.size)
    out = np.empty(indices.shape[0])
    t0 = time.perf_counter()
    for i, drawn in enumerate(indices):
        resample = np.repeat(rows, np.bincount(drawn, minlength=g)[codes])
        out[i] = cohen_kappa_score(human[resample], judge[resample])
    return time.perf_counter() - t0, out


def peak_memory(human, judge, clusters, *, n_resamples, method):
    tracemalloc.start()
    tracemalloc.reset_peak()
    cluster_bootstrap_kappa(human, judge, clusters, n_labels=2, n_resamples=n_resamples, method=method, seed=0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


_RSS_SCRIPT = """
import resource, sys
sys.path.insert(0, {root!r}); sys.path.insert(0, {bench!r})
from bench_bootstrap import make_data
from calibrate.stats import cluster_bootstrap_kappa
human, judge, clusters = make_data({claims}, {clusters}, {seed})
cluster_bootstrap_kappa(human[:1000], judge[:1000], clusters[:1000], n_labels=2, n_resamples=50)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cluster_bootstrap_kappa(human, judge, clusters, n_labels=2, n_resamples={resamples}, method={method!r})
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(before, after)
"""


def peak_rss(args, method: str) -> tuple[float, float]:
    """Peak RSS (MiB) of a fresh process before and after one vectorised call."""
    import subprocess

    code = _RSS_SCRIPT.format(root=str(ROOT), bench=str(ROOT / "bench"), claims=args.claims, clusters=args.clusters,
                              seed=args.seed, resamples=args.resamples, method=method)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    return int(out[0]) / 1024, int(out[1]) / 1024


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--claims", type=int, default=100_000)
    parser.add_argument("--clusters", type=int, default=10_000)
    parser.add_argument("--resamples", type=int, default=2_000)
    parser.add_argument("--loop-resamples", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help="write bench/results/bootstrap.md")
    args = parser.parse_args()

    load_before = os.getloadavg()
    human, judge, clusters = make_data(args.claims, args.clusters, args.seed)
    # warm-up (imports, page faults) on a small problem
    cluster_bootstrap_kappa(human[:1000], judge[:1000], clusters[:1000], n_labels=2, n_resamples=50)

    pct_median, pct_best, pct = time_vectorised(human, judge, clusters, n_resamples=args.resamples, method="percentile", repeat=args.repeat)
    bca_median, bca_best, bca = time_vectorised(human, judge, clusters, n_resamples=args.resamples, method="bca", repeat=args.repeat)

    # the loop runs on the first rows of the very index matrix the vectorised call drew
    # (its first rows do not depend on n_resamples, so only the rows needed are built)
    indices = bootstrap_index_matrix(args.clusters, n_resamples=args.loop_resamples, seed=0)
    loop_time, loop_kappas = time_loop(human, judge, clusters, indices)
    loop_extrapolated = loop_time * args.resamples / args.loop_resamples
    vec_kappas = kappa_resamples(human, judge, clusters, indices, n_labels=2)
    max_diff = float(np.max(np.abs(vec_kappas - loop_kappas)))
    ci_loop = np.quantile(loop_kappas, [0.025, 0.975])
    ci_vec = np.quantile(vec_kappas, [0.025, 0.975])
    ci_diff = float(np.max(np.abs(ci_loop - ci_vec)))

    peak_pct = peak_memory(human, judge, clusters, n_resamples=args.resamples, method="percentile")
    peak_bca = peak_memory(human, judge, clusters, n_resamples=args.resamples, method="bca")
    rss_before, rss_after = peak_rss(args, "bca")
    load_after = os.getloadavg()

    ratio = loop_extrapolated / pct_median
    lines = [
        "# Cluster bootstrap benchmark",
        "",
        f"- Date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: `nproc` = {os.cpu_count()}, {cpu_model()}, {platform.system()} {platform.release()}",
        f"- Load average (1 min) before / after: {load_before[0]:.2f} / {load_after[0]:.2f} (shared machine; other jobs may run)",
        f"- Python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, scikit-learn {sklearn.__version__}",
        f"- Workload: {args.claims:,} claims in {args.clusters:,} clusters, binary labels, {args.resamples:,} resamples, 95 % CI, seed 0",
        f"- Command: `.venv/bin/python bench/bench_bootstrap.py{' --write' if args.write else ''}`",
        "",
        "| | time | notes |",
        "|---|---:|---|",
        f"| vectorised, percentile | {pct_median:.3f} s | median of {args.repeat} (best {pct_best:.3f} s) |",
        f"| vectorised, BCa | {bca_median:.3f} s | median of {args.repeat} (best {bca_best:.3f} s); includes the leave-one-cluster-out jackknife |",
        f"| sklearn loop, {args.loop_resamples} resamples (measured) | {loop_time:.2f} s | {1000 * loop_time / args.loop_resamples:.1f} ms per resample |",
        f"| sklearn loop, {args.resamples:,} resamples (extrapolated ×{args.resamples / args.loop_resamples:g}) "
        f"| {loop_extrapolated:.1f} s | linear extrapolation of the measured {args.loop_resamples} |",
        "",
        f"**Speed-up (extrapolated loop / vectorised percentile): {ratio:.0f}×** (target ≥ 50×; whole bootstrap target well under 5 s).",
        "",
        "Agreement on the shared resamples (the first "
        f"{args.loop_resamples} rows of the same index matrix): max |kappa_vectorised − kappa_sklearn| = {max_diff:.1e}; "
        f"percentile intervals from those resamples differ by at most {ci_diff:.1e} "
        f"(loop [{ci_loop[0]:.4f}, {ci_loop[1]:.4f}] vs vectorised [{ci_vec[0]:.4f}, {ci_vec[1]:.4f}]).",
        "",
        f"Result: kappa = {pct.value:.4f}, percentile 95 % CI [{pct.ci[0]:.4f}, {pct.ci[1]:.4f}], "
        f"BCa 95 % CI [{bca.ci[0]:.4f}, {bca.ci[1]:.4f}] (z0 = {bca.extra['bias_correction_z0']:.3f}, a = {bca.extra['acceleration']:.4f}); "
        f"undefined resamples: {pct.extra['n_undefined_resamples']}.",
        "",
        f"Memory: peak traced allocation during one call (tracemalloc) {peak_pct / 2**20:.1f} MiB (percentile), "
        f"{peak_bca / 2**20:.1f} MiB (BCa). Peak RSS of a fresh process (`resource.getrusage`, "
        f"interpreter + numpy/scipy/pandas + data): {rss_before:.0f} MiB before the BCa call, {rss_after:.0f} MiB after "
        f"(+{rss_after - rss_before:.0f} MiB).",
        "",
    ]
    report = "\n".join(lines)
    print(report)
    if args.write:
        out = ROOT / "bench" / "results" / "bootstrap.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report)
        print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
