"""Benchmark: retrieval metrics for 100,000 queries × 100 ranked ids at K ∈ {1, 5, 10, 100}.

Vectorised (`calibrate.stats.retrieval`): the padded relevance matrix is built once from the
id lists (one pass of set lookups), then Recall@K, Precision@K, F1@K, reciprocal rank and
nDCG@K for every K are array operations over the whole batch. Baseline in the same run: a
per-query Python loop computing the same five metrics from the same lists and sets. The loop
runs on a subset (`--loop-queries`, default 10,000) and is extrapolated linearly to all
queries (it is linear in the number of queries); on that subset both results are compared.

    .venv/bin/python bench/bench_retrieval.py [--queries 100000] [--depth 100] [--loop-queries 10000]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time

import numpy as np

from calibrate.stats import per_query_metrics, relevance_matrix

KS = (1, 5, 10, 100)


def make_queries(n: int, depth: int, seed: int = 0) -> tuple[list[list[str]], list[set[str]]]:
    """Return rankings of `depth` string ids and relevant sets of 0–10 ids (some never retrieved)."""
    rng = np.random.default_rng(seed)
    docs = rng.integers(0, 10_000_000, size=(n, depth))
    retrieved = [[f"d{x}" for x in row] for row in docs.tolist()]
    n_rel = rng.integers(0, 11, size=n)
    n_rel[rng.random(n) < 0.05] = 0  # about 5% more queries with no relevant document
    relevant = []
    for i in range(n):
        k = int(n_rel[i])
        found = rng.choice(depth, size=min(k, int(rng.integers(0, k + 1))), replace=False) if k else []
        ids = {retrieved[i][j] for j in found}
        ids.update(f"missing-{i}-{t}" for t in range(k - len(ids)))
        relevant.append(ids)
    return retrieved, relevant


def loop_metrics(retrieved: list[list[str]], relevant: list[set[str]], ks: tuple[int, ...]) -> dict[int, dict[str, list[float]]]:
    """Compute the metrics query by query in plain Python (the baseline)."""
    out = {k: {"recall": [], "precision": [], "f1": [], "rr": [], "ndcg": []} for k in ks}
    log2 = math.log2
    for ranking, rel in zip(retrieved, relevant, strict=True):
        r = len(rel)
        seen: set[str] = set()
        gains = []
        for doc in ranking:
            gains.append(1 if doc in rel and doc not in seen else 0)
            seen.add(doc)
        rr = next((1.0 / (j + 1) for j, g in enumerate(gains) if g), 0.0)
        for k in ks:
            row = out[k]
            if r == 0:
                for name in row:
                    row[name].append(math.nan)
                continue
            hits = sum(gains[:k])
            recall, precision = hits / r, hits / k
            row["recall"].append(recall)
            row["precision"].append(precision)
            row["f1"].append(2 * precision * recall / (precision + recall) if hits else 0.0)
            row["rr"].append(rr)
            dcg = sum(g / log2(j + 2) for j, g in enumerate(gains[:k]))
            idcg = sum(1 / log2(j + 2) for j in range(min(r, k)))
            row["ndcg"].append(dcg / idcg)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--loop-queries", type=int, default=10_000)
    args = parser.parse_args()
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    retrieved, relevant = make_queries(args.queries, args.depth)
    print(f"generated {args.queries:,} queries × {args.depth} ids in {time.perf_counter() - t0:.1f} s")

    t0 = time.perf_counter()
    rel, n_relevant = relevance_matrix(retrieved, relevant)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    vectorised = {k: per_query_metrics(rel, n_relevant, k=k) for k in KS}
    metrics = time.perf_counter() - t0

    m = min(args.loop_queries, args.queries)
    t0 = time.perf_counter()
    looped = loop_metrics(retrieved[:m], relevant[:m], KS)
    loop = time.perf_counter() - t0
    loop_all = loop * args.queries / m
    worst = max(float(np.nanmax(np.abs(np.asarray(looped[k][name]) - vectorised[k][name][:m])))
                for k in KS for name in looped[k])
    same_nan = all(np.array_equal(np.isnan(np.asarray(looped[k][name])), np.isnan(vectorised[k][name][:m]))
                   for k in KS for name in looped[k])
    load_after = os.getloadavg()

    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}; "
          f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    print(f"queries without a relevant document: {int((n_relevant == 0).sum()):,}")
    print(f"vectorised, relevance matrix from the id lists (once): {build:.3f} s")
    print(f"vectorised, 5 metrics × K in {KS} from the matrix:    {metrics:.3f} s")
    print(f"vectorised, total:                                      {build + metrics:.3f} s")
    print(f"loop, {m:,} queries measured: {loop:.3f} s; extrapolated to {args.queries:,}: {loop_all:.1f} s")
    print(f"ratio loop / vectorised total: {loop_all / (build + metrics):.0f}x; loop / metrics only: {loop_all / metrics:.0f}x")
    print(f"largest difference loop vs vectorised on the measured queries: {worst:.2e}; same undefined queries: {same_nan}")
    for k in KS:
        means = {name: float(np.nanmean(v)) for name, v in vectorised[k].items()}
        print(f"K={k:>3}: " + ", ".join(f"{name} {value:.4f}" for name, value in means.items()))


if __name__ == "__main__":
    main()
