"""Lower bounds adjusted for the looks (stats/selection.py): Bonferroni and the max-statistic (min-p) bootstrap,
checked against the percentile interval they extend, a naive loop, and their coverage under a null of equal candidates."""

from __future__ import annotations

import numpy as np
import pytest

from calibrate import stats


def candidates(seed: int, n: int = 120, k: int = 6, accuracy: float = 0.85, shared: float = 0.8):
    """Return gold codes, k judges' codes (each agrees with a shared judge on `shared` of the items) and clusters."""
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 2, n)
    base = np.where(rng.random(n) < accuracy, gold, 1 - gold)
    judges = [np.where(rng.random(n) < shared, base, np.where(rng.random(n) < accuracy, gold, 1 - gold)) for _ in range(k)]
    return gold, judges, np.arange(n) // 2


def resamples(gold, judges, clusters, b=4000, seed=0):
    idx = stats.bootstrap_index_matrix(len(set(clusters.tolist())), n_resamples=b, seed=seed)
    return np.column_stack([stats.kappa_resamples(gold, j, clusters, idx, n_labels=2) for j in judges])


def test_one_look_is_the_lower_end_of_the_percentile_interval():
    gold, judges, clusters = candidates(1, k=1)
    est = stats.cluster_bootstrap_kappa(gold, judges[0], clusters, n_labels=2, n_resamples=4000, seed=0)
    for method in stats.ADJUSTMENTS:
        bounds = stats.selection_lower_bounds(resamples(gold, judges, clusters), looks=1, method=method)
        assert bounds.lower[0] == pytest.approx(est.ci[0], abs=1e-12) and bounds.level == pytest.approx(0.025)


def test_bonferroni_reads_each_candidate_at_alpha_over_the_looks():
    gold, judges, clusters = candidates(2)
    values = resamples(gold, judges, clusters)
    bounds = stats.selection_lower_bounds(values, looks=10, method="bonferroni")
    assert bounds.level == pytest.approx(0.0025) and bounds.looks == 10
    assert bounds.lower == pytest.approx([float(np.quantile(values[:, j], 0.0025)) for j in range(values.shape[1])])


def test_the_max_statistic_lies_between_the_unadjusted_and_the_bonferroni_bounds_and_matches_a_naive_loop():
    gold, judges, clusters = candidates(3)
    values = resamples(gold, judges, clusters, b=800)
    k = values.shape[1]
    bonferroni = stats.selection_lower_bounds(values, looks=k, method="bonferroni")
    maxstat = stats.selection_lower_bounds(values, looks=k, method="max_statistic")
    assert bonferroni.level < maxstat.level < 0.025  # correlated candidates: tighter than Bonferroni
    for j in range(k):
        assert bonferroni.lower[j] <= maxstat.lower[j] <= float(np.quantile(values[:, j], 0.025))
    # Naive: each resample's smallest mid-rank over the candidates, its α-quantile.
    ranks = np.column_stack([[(np.sum(col < v) + np.sum(col <= v)) / (2 * len(col)) for v in col] for col in values.T])
    assert maxstat.level == pytest.approx(float(np.quantile(ranks.min(axis=1), 0.025)))


def test_identical_candidates_need_no_adjustment_and_other_looks_keep_their_bonferroni_share():
    gold, judges, clusters = candidates(4, k=1)
    values = resamples(gold, judges * 5, clusters)
    assert stats.selection_lower_bounds(values, looks=5).level == pytest.approx(0.025)
    assert stats.selection_lower_bounds(values, looks=20).level == pytest.approx(0.025 * 5 / 20)


def test_the_number_of_resamples_leaves_room_in_the_tail():
    assert stats.resamples_needed(1) == 2000
    assert stats.resamples_needed(12) == 9600 and stats.resamples_needed(10_000) == 100_000


def test_refusals():
    with pytest.raises(ValueError):
        stats.selection_lower_bounds(np.zeros((10, 2)), looks=2, method="holm")
    with pytest.raises(ValueError):
        stats.selection_lower_bounds(np.zeros(10), looks=2)
    assert stats.selection_lower_bounds(np.full((10, 1), np.nan), looks=1).lower == [None]


def test_under_a_null_of_equal_candidates_the_best_bound_covers_the_truth_in_at_least_95_percent():
    """Six versions of one judge that differ only by noise: the best one's adjusted bound stays at or below the true κ
    in 95 % of simulated dev sets (bench/bench_optimise.py measures it over ≥ 200 whole optimisations)."""
    rng = np.random.default_rng(7)
    n, k, accuracy = 120, 6, 0.85
    truth = 2 * accuracy - 1  # κ of a judge right with probability 0.85 on balanced binary gold
    over = {"max_statistic": 0, "bonferroni": 0, "naive": 0}
    for rep in range(160):
        gold = rng.integers(0, 2, n)
        judges = [np.where(rng.random(n) < accuracy, gold, 1 - gold) for _ in range(k)]
        clusters = np.arange(n)
        values = resamples(gold, judges, clusters, b=1000, seed=rep)
        points = [stats.cohen_kappa(gold, j, labels=[0, 1]).value for j in judges]
        best = int(np.argmax(points))
        over["naive"] += float(np.quantile(values[:, best], 0.025)) > truth  # the best one's own interval
        for method in ("max_statistic", "bonferroni"):
            over[method] += stats.selection_lower_bounds(values, looks=k, method=method).lower[best] > truth
    assert over["max_statistic"] <= 8 and over["bonferroni"] <= 8  # ≤ 5 % of 160
    assert over["naive"] > over["max_statistic"]
