"""The multinomial bootstrap of kappa (one item per cluster): a naive loop, sklearn, and the cluster bootstrap agree."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtr, ndtri
from sklearn.metrics import cohen_kappa_score

from calibrate.stats import cluster_bootstrap_kappa, multinomial_bootstrap_kappa


def _labels(n=400, seed=3, k=3, agree=0.7):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, k, n)
    b = np.where(rng.random(n) < agree, a, rng.integers(0, k, n))
    return a, b


def _expand(table: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the items of a k*k contingency table of counts as two label arrays."""
    cells = np.repeat(np.arange(k * k), table.astype(np.int64))
    return cells // k, cells % k


def test_the_interval_is_the_quantiles_of_kappa_on_multinomial_tables_drawn_with_the_seed():
    a, b = _labels(n=150)
    k, b_resamples = 3, 300
    est = multinomial_bootstrap_kappa(a, b, n_labels=k, n_resamples=b_resamples, seed=7)
    assert est.value == pytest.approx(cohen_kappa_score(a, b))
    assert (est.n, est.extra["n_clusters"], est.extra["bootstrap"]) == (150, 150, "multinomial")
    table = np.bincount(a * k + b, minlength=k * k)
    draws = np.random.default_rng(7).multinomial(a.size, table / table.sum(), size=b_resamples)
    naive = np.array([cohen_kappa_score(*_expand(t, k), labels=range(k)) for t in draws])
    assert est.ci == pytest.approx(tuple(np.quantile(naive, [0.025, 0.975])), abs=1e-12)
    assert est.extra["bootstrap_se"] == pytest.approx(naive.std(ddof=1), abs=1e-12)


def test_it_has_the_distribution_of_the_cluster_bootstrap_with_one_item_per_cluster():
    a, b = _labels(n=600, seed=11)
    fast = multinomial_bootstrap_kappa(a, b, n_labels=3, n_resamples=8000, seed=1)
    slow = cluster_bootstrap_kappa(a, b, np.arange(a.size), n_labels=3, n_resamples=8000, seed=2)
    assert fast.value == slow.value
    # two independent 8,000-resample runs of the same distribution: endpoints within Monte Carlo error
    assert fast.ci[0] == pytest.approx(slow.ci[0], abs=0.006) and fast.ci[1] == pytest.approx(slow.ci[1], abs=0.006)
    assert fast.extra["bootstrap_se"] == pytest.approx(slow.extra["bootstrap_se"], rel=0.05)


def test_bca_uses_the_leave_one_item_out_jackknife():
    a, b = _labels(n=80, seed=5)
    est = multinomial_bootstrap_kappa(a, b, n_labels=3, n_resamples=500, seed=3, method="bca")
    jack = np.array([cohen_kappa_score(np.delete(a, i), np.delete(b, i), labels=range(3)) for i in range(a.size)])
    table = np.bincount(a * 3 + b, minlength=9)
    draws = np.random.default_rng(3).multinomial(a.size, table / table.sum(), size=500)
    values = np.array([cohen_kappa_score(*_expand(t, 3), labels=range(3)) for t in draws])
    theta = cohen_kappa_score(a, b)
    z0 = ndtri((np.count_nonzero(values < theta) + 0.5 * np.count_nonzero(values == theta)) / values.size)
    d = jack.mean() - jack
    accel = (d**3).sum() / (6 * (d**2).sum() ** 1.5)
    z = ndtri(np.array([0.025, 0.975]))
    expected = np.quantile(values, ndtr(z0 + (z0 + z) / (1 - accel * (z0 + z))))
    assert est.extra["ci_method_used"] == "bca"
    assert est.ci == pytest.approx(tuple(expected), abs=1e-10)


def test_undefined_and_empty_cases_say_why():
    assert multinomial_bootstrap_kappa([], [], n_labels=2).status == "no_data"
    one = multinomial_bootstrap_kappa([1], [1], n_labels=2)
    assert one.status == "undefined" and one.note == "n < 2: kappa needs at least two items"
    constant = multinomial_bootstrap_kappa([0, 0, 0], [0, 0, 0], n_labels=2)
    assert constant.status == "undefined" and constant.ci is None
    # a table that some resamples make constant: those are dropped and counted
    rare = multinomial_bootstrap_kappa([0] * 19 + [1], [0] * 19 + [1], n_labels=2, n_resamples=400, seed=0)
    assert rare.extra["n_undefined_resamples"] > 0 and "resamples undefined and dropped" in rare.note
    with pytest.raises(ValueError, match="a_codes codes must be in"):
        multinomial_bootstrap_kappa([0, 3], [0, 1], n_labels=2)
    with pytest.raises(ValueError, match="same length"):
        multinomial_bootstrap_kappa([0, 1], [0], n_labels=2)
