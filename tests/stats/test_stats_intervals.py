"""Cluster bootstrap: equals a naive loop on the same index matrix, CI behaviour, undefined cases."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from scipy import stats as sps
from scipy.special import ndtr, ndtri
from sklearn.metrics import cohen_kappa_score

import calibrate.stats.intervals as intervals
from calibrate.stats import (
    bootstrap_index_matrix,
    cluster_bootstrap,
    cluster_bootstrap_corr,
    cluster_bootstrap_kappa,
    cohen_kappa,
    corr_resamples,
    factorize_clusters,
    kappa_resamples,
    paired_cluster_bootstrap_diff,
    spearman_rho,
)


def _clustered_labels(seed=1, n_clusters=120, k=3, agree=0.7):
    """Claims in clusters of 1..7, judge agrees with the human with probability ``agree``."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 8, n_clusters)
    clusters = np.repeat([f"sample-{i}" for i in range(n_clusters)], sizes)
    a = rng.integers(0, k, clusters.size)
    b = np.where(rng.random(clusters.size) < agree, a, rng.integers(0, k, clusters.size))
    return a, b, clusters


def _resample_rows(indices_row, codes, n_clusters):
    """Rows of one resample: every row of every drawn cluster, with multiplicity."""
    mult = np.bincount(indices_row, minlength=n_clusters)
    return np.repeat(np.arange(codes.size), mult[codes])


def _loop(indices, clusters, fn):
    codes, uniques = factorize_clusters(clusters)
    return np.array([fn(_resample_rows(row, codes, len(uniques))) for row in indices])


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


# --------------------------------------------------------------------------- equals the loop


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_vectorised_kappas_equal_sklearn_loop_on_the_same_index_matrix(weights):
    a, b, clusters = _clustered_labels()
    g = len(factorize_clusters(clusters)[1])
    idx = bootstrap_index_matrix(g, n_resamples=300, seed=11)
    fast = kappa_resamples(a, b, clusters, idx, n_labels=3, weights=weights)
    slow = _loop(idx, clusters, lambda rows: _quiet(cohen_kappa_score, a[rows], b[rows], labels=[0, 1, 2], weights=weights))
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)


def test_percentile_interval_equals_the_loop_interval():
    a, b, clusters = _clustered_labels(seed=2)
    g = len(factorize_clusters(clusters)[1])
    est = cluster_bootstrap_kappa(a, b, clusters, n_labels=3, n_resamples=400, seed=5)
    idx = bootstrap_index_matrix(g, n_resamples=400, seed=5)  # the same matrix the function drew
    slow = _loop(idx, clusters, lambda rows: cohen_kappa_score(a[rows], b[rows]))
    lo, hi = np.quantile(slow, [0.025, 0.975])
    assert est.ci[0] == pytest.approx(lo, abs=1e-12) and est.ci[1] == pytest.approx(hi, abs=1e-12)
    assert est.value == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert est.extra["bootstrap_se"] == pytest.approx(slow.std(ddof=1), abs=1e-12)


@pytest.mark.parametrize("method", ["spearman", "kendall", "pearson"])
@pytest.mark.parametrize("discrete", [True, False])
def test_vectorised_correlations_equal_scipy_loop(method, discrete):
    rng = np.random.default_rng(3)
    _, _, clusters = _clustered_labels(seed=3, n_clusters=60)
    n = clusters.size
    x = rng.integers(1, 6, n).astype(float) if discrete else rng.normal(size=n)
    y = np.round(x + rng.normal(size=n), 0 if discrete else 3)
    ref = {"spearman": sps.spearmanr, "kendall": sps.kendalltau, "pearson": sps.pearsonr}[method]
    idx = bootstrap_index_matrix(60, n_resamples=60, seed=4)
    fast = corr_resamples(x, y, clusters, idx, method=method)
    slow = _loop(idx, clusters, lambda rows: ref(x[rows], y[rows]).statistic)
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", ["spearman", "kendall"])
def test_rank_correlation_paths_agree(method):
    """The tie-table path (few distinct scores) and the per-row path give the same numbers."""
    rng = np.random.default_rng(8)
    _, _, clusters = _clustered_labels(seed=8, n_clusters=40)
    codes, uniques = factorize_clusters(clusters)
    x = rng.integers(1, 6, codes.size).astype(float)
    y = np.clip(x + rng.integers(-2, 3, codes.size), 1, 5)
    table = intervals._corr_engine(method, x, y, codes, len(uniques), path="table")
    rows = intervals._corr_engine(method, x, y, codes, len(uniques), path="rows")
    counts = intervals._counts(bootstrap_index_matrix(40, n_resamples=50, seed=1), 40)
    np.testing.assert_allclose(table.resample(counts), rows.resample(counts), rtol=0, atol=1e-12)
    np.testing.assert_allclose(table.jackknife(), rows.jackknife(), rtol=0, atol=1e-12)
    assert table.point() == pytest.approx(rows.point(), abs=1e-12)


def test_jackknife_leaves_one_cluster_out():
    a, b, clusters = _clustered_labels(seed=4, n_clusters=30)
    codes, uniques = factorize_clusters(clusters)
    engine = intervals._KappaEngine(a, b, codes, len(uniques), 3, intervals.disagreement_weights(3))
    expected = [cohen_kappa_score(a[codes != g], b[codes != g]) for g in range(len(uniques))]
    np.testing.assert_allclose(engine.jackknife(), expected, rtol=0, atol=1e-12)


def test_bca_matches_a_reference_implementation():
    """BCa (Efron 1987) computed by hand from the loop's resamples and jackknife."""
    a, b, clusters = _clustered_labels(seed=6, n_clusters=50, agree=0.5)
    codes, uniques = factorize_clusters(clusters)
    g = len(uniques)
    est = cluster_bootstrap_kappa(a, b, clusters, n_labels=3, n_resamples=500, method="bca", seed=9)
    boot = _loop(bootstrap_index_matrix(g, n_resamples=500, seed=9), clusters, lambda rows: cohen_kappa_score(a[rows], b[rows]))
    theta = cohen_kappa_score(a, b)
    z0 = ndtri((np.sum(boot < theta) + 0.5 * np.sum(boot == theta)) / boot.size)
    jack = np.array([cohen_kappa_score(a[codes != k], b[codes != k]) for k in range(g)])
    d = jack.mean() - jack
    acc = (d**3).sum() / (6 * ((d**2).sum()) ** 1.5)
    z = ndtri(np.array([0.025, 0.975]))
    levels = ndtr(z0 + (z0 + z) / (1 - acc * (z0 + z)))
    lo, hi = np.quantile(boot, levels)
    assert est.ci == pytest.approx((lo, hi), abs=1e-12)
    assert est.extra["acceleration"] == pytest.approx(acc, abs=1e-12)
    assert est.extra["bias_correction_z0"] == pytest.approx(z0, abs=1e-12)
    assert est.extra["method"] == "bca" and est.extra["ci_method_used"] == "bca"


def test_chunking_does_not_change_the_result(monkeypatch):
    a, b, clusters = _clustered_labels(seed=7)
    whole = cluster_bootstrap_kappa(a, b, clusters, n_labels=3, n_resamples=300, method="bca")
    monkeypatch.setattr(intervals, "_CHUNK_ELEMENTS", 500)  # tiny blocks
    chunked = cluster_bootstrap_kappa(a, b, clusters, n_labels=3, n_resamples=300, method="bca")
    assert chunked == whole


def test_generic_bootstrap_agrees_with_vectorised_kappa():
    a, b, clusters = _clustered_labels(seed=12, n_clusters=40)
    fast = cluster_bootstrap_kappa(a, b, clusters, n_labels=3, n_resamples=200, method="bca")
    slow = cluster_bootstrap(lambda p, q: cohen_kappa(p, q, labels=[0, 1, 2]), [a, b], clusters, n_resamples=200, method="bca")
    assert slow.value == pytest.approx(fast.value, abs=1e-12)
    assert slow.ci == pytest.approx(fast.ci, abs=1e-12)


# --------------------------------------------------------------------------- interval behaviour


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_ci_contains_the_point_estimate(method):
    a, b, clusters = _clustered_labels(seed=13, n_clusters=150)
    est = cluster_bootstrap_kappa(a, b, clusters, n_labels=3, method=method, n_resamples=1000)
    assert est.ci[0] < est.value < est.ci[1]
    rng = np.random.default_rng(13)
    x = rng.normal(size=a.size)
    y = x + rng.normal(size=a.size)
    for corr in ("spearman", "pearson"):
        est = cluster_bootstrap_corr(x, y, clusters, method=corr, ci_method=method, n_resamples=500)
        assert est.ci[0] < est.value < est.ci[1]
        assert est.extra["statistic"] == corr and est.extra["method"] == method


def test_point_estimate_equals_the_plain_statistic():
    rng = np.random.default_rng(14)
    _, _, clusters = _clustered_labels(seed=14, n_clusters=30)
    x = rng.integers(1, 6, clusters.size)
    y = np.clip(x + rng.integers(-1, 2, clusters.size), 1, 5)
    est = cluster_bootstrap_corr(x, y, clusters, n_resamples=50)
    assert est.value == pytest.approx(spearman_rho(x, y).value, abs=1e-12)
    assert est.n == x.size and est.extra["n_clusters"] == 30


def test_same_seed_same_interval_different_seed_different_interval():
    a, b, clusters = _clustered_labels(seed=15)
    one = cluster_bootstrap_kappa(a, b, clusters, n_labels=3, n_resamples=300, seed=42)
    two = cluster_bootstrap_kappa(a, b, clusters, n_labels=3, n_resamples=300, seed=42)
    other = cluster_bootstrap_kappa(a, b, clusters, n_labels=3, n_resamples=300, seed=43)
    assert one.ci == two.ci and one.to_dict() == two.to_dict()
    assert other.ci != one.ci


def test_clusters_matter_duplicated_claims_widen_the_interval():
    """Five identical copies of each claim: the row bootstrap pretends n is 5x larger."""
    rng = np.random.default_rng(16)
    n_samples = 150
    a0 = rng.integers(0, 2, n_samples)
    b0 = np.where(rng.random(n_samples) < 0.75, a0, 1 - a0)
    a, b = np.repeat(a0, 5), np.repeat(b0, 5)
    clusters = np.repeat(np.arange(n_samples), 5)
    cluster_ci = cluster_bootstrap_kappa(a, b, clusters, n_labels=2, n_resamples=1000).ci
    row_ci = cluster_bootstrap_kappa(a, b, np.arange(a.size), n_labels=2, n_resamples=1000).ci
    cluster_width, row_width = cluster_ci[1] - cluster_ci[0], row_ci[1] - row_ci[0]
    assert cluster_width > 1.8 * row_width  # ~sqrt(5) = 2.2 in expectation
    # and the cluster bootstrap of the duplicated data matches the row bootstrap of the originals
    original_ci = cluster_bootstrap_kappa(a0, b0, np.arange(n_samples), n_labels=2, n_resamples=1000).ci
    assert cluster_ci == pytest.approx(original_ci, abs=1e-12)


# --------------------------------------------------------------------------- undefined cases


def test_undefined_resamples_are_dropped_and_counted():
    # three clusters; two of them contain only label 0 for both raters
    a = np.array([0, 0, 0, 0, 1, 0, 1])
    b = np.array([0, 0, 0, 0, 1, 1, 1])
    clusters = np.array([1, 1, 2, 2, 3, 3, 3])
    est = cluster_bootstrap_kappa(a, b, clusters, n_labels=2, n_resamples=400, seed=3)
    resampled = kappa_resamples(a, b, clusters, bootstrap_index_matrix(3, n_resamples=400, seed=3), n_labels=2)
    n_nan = int(np.isnan(resampled).sum())
    assert n_nan > 0
    assert est.extra["n_undefined_resamples"] == n_nan
    assert f"{n_nan} of 400 resamples undefined and dropped" in est.note
    assert est.ci == pytest.approx(tuple(np.quantile(resampled[~np.isnan(resampled)], [0.025, 0.975])))
    assert json.dumps(est.to_dict(), allow_nan=False)


def test_bootstrap_undefined_and_empty_inputs():
    est = cluster_bootstrap_kappa([1, 1, 1], [1, 1, 1], ["s1", "s1", "s2"], n_labels=2)
    assert est.status == "undefined" and est.ci is None and "expected agreement is 1" in est.note
    assert cluster_bootstrap_kappa([], [], [], n_labels=2).status == "no_data"
    est = cluster_bootstrap_corr([3, 3, 3], [1, 2, 3], [0, 0, 1])
    assert est.status == "undefined" and est.note == "x is constant" and est.ci is None
    assert cluster_bootstrap_corr([None], [1.0], ["a"]).status == "no_data"
    est = cluster_bootstrap(lambda x: None, [[1, 2, 3]], [0, 1, 2])
    assert est.status == "undefined"


def test_single_cluster_gives_degenerate_interval_with_a_note():
    est = cluster_bootstrap_kappa([0, 1, 0, 1], [0, 1, 1, 1], ["only"] * 4, n_labels=2, n_resamples=50)
    assert est.ci == (est.value, est.value)
    assert "only one cluster" in est.note


def test_bad_options_raise():
    with pytest.raises(ValueError, match="method"):
        cluster_bootstrap_kappa([0, 1], [0, 1], [0, 1], n_labels=2, method="basic")
    with pytest.raises(ValueError, match="confidence"):
        cluster_bootstrap_kappa([0, 1], [0, 1], [0, 1], n_labels=2, confidence=95)
    with pytest.raises(ValueError, match="codes"):
        cluster_bootstrap_kappa([0, 2], [0, 1], [0, 1], n_labels=2)
    with pytest.raises(ValueError, match="same length"):
        cluster_bootstrap_kappa([0, 1], [0, 1], [0], n_labels=2)
    with pytest.raises(ValueError, match="missing"):
        cluster_bootstrap_kappa([0, 1], [0, 1], [0, None], n_labels=2)
    with pytest.raises(ValueError, match="n_labels"):
        paired_cluster_bootstrap_diff(([0], [0]), ([0], [0]), [0])


# --------------------------------------------------------------------------- paired difference


def test_paired_difference_uses_the_same_resamples():
    a, b, clusters = _clustered_labels(seed=17, agree=0.8)
    rng = np.random.default_rng(17)
    c = np.where(rng.random(a.size) < 0.6, a, rng.integers(0, 3, a.size))
    g = len(factorize_clusters(clusters)[1])
    est = paired_cluster_bootstrap_diff((a, b), (a, c), clusters, n_labels=3, n_resamples=400, seed=2)
    idx = bootstrap_index_matrix(g, n_resamples=400, seed=2)
    diffs = kappa_resamples(a, b, clusters, idx, n_labels=3) - kappa_resamples(a, c, clusters, idx, n_labels=3)
    assert est.value == pytest.approx(cohen_kappa(a, b).value - cohen_kappa(a, c).value, abs=1e-12)
    assert est.ci == pytest.approx(tuple(np.quantile(diffs, [0.025, 0.975])), abs=1e-12)
    assert est.extra["first"] == pytest.approx(cohen_kappa(a, b).value)
    assert est.ci[0] > 0 and est.p_value < 0.01


def test_paired_difference_of_identical_judges_is_zero():
    a, b, clusters = _clustered_labels(seed=18)
    est = paired_cluster_bootstrap_diff((a, b), (a, b), clusters, n_labels=3, n_resamples=200, method="bca")
    assert est.value == 0.0 and est.ci == (0.0, 0.0) and est.p_value == 1.0


def test_paired_difference_of_correlations():
    rng = np.random.default_rng(19)
    _, _, clusters = _clustered_labels(seed=19, n_clusters=80)
    human = rng.normal(size=clusters.size)
    good = human + 0.3 * rng.normal(size=clusters.size)
    bad = human + 2.0 * rng.normal(size=clusters.size)
    est = paired_cluster_bootstrap_diff((human, good), (human, bad), clusters, statistic="spearman", n_resamples=300)
    assert est.value == pytest.approx(spearman_rho(human, good).value - spearman_rho(human, bad).value, abs=1e-12)
    assert est.ci[0] > 0
    const = paired_cluster_bootstrap_diff((human, good), (human, np.ones_like(human)), clusters, statistic="pearson")
    assert const.status == "undefined" and const.note == "second: y is constant"


def test_to_dict_is_json_safe():
    a, b, clusters = _clustered_labels(seed=20, n_clusters=20)
    d = cluster_bootstrap_kappa(a, b, clusters, n_labels=3, n_resamples=100, method="bca").to_dict()
    assert set(d) >= {"value", "n", "ci", "status", "note", "method", "n_resamples", "n_clusters", "n_undefined_resamples"}
    assert isinstance(d["ci"], list) and d["n_resamples"] == 100
    json.dumps(d, allow_nan=False)


def test_index_matrix_prefix_and_shape():
    full = bootstrap_index_matrix(37, n_resamples=150, seed=4)
    assert full.shape == (150, 37) and full.min() >= 0 and full.max() < 37
    np.testing.assert_array_equal(bootstrap_index_matrix(37, n_resamples=70, seed=4), full[:70])
    assert not np.array_equal(bootstrap_index_matrix(37, n_resamples=70, seed=5), full[:70])


@pytest.mark.parametrize("method", ["spearman", "kendall", "pearson"])
@pytest.mark.parametrize("path", ["auto", "table", "rows"])
def test_constant_resamples_are_undefined_on_every_path(method, path):
    """Resamples drawing only the constant-x clusters are NaN (dropped), exactly like the loop."""
    x = np.array([1.0, 1.0, 1.0, 1.0, 2.5, 3.7])
    y = np.array([0.3, 0.1, 0.2, 0.9, 0.5, 0.4])
    clusters = np.array(["a", "a", "b", "b", "c", "c"])
    codes, uniques = factorize_clusters(clusters)
    idx = bootstrap_index_matrix(3, n_resamples=200, seed=1)
    engine = intervals._corr_engine(method, x, y, codes, 3, path=path)
    fast = engine.resample(intervals._counts(idx, 3))
    ref = {"spearman": sps.spearmanr, "kendall": sps.kendalltau, "pearson": sps.pearsonr}[method]

    def expected(rows):
        if np.ptp(x[rows]) == 0:
            return np.nan
        return ref(x[rows], y[rows]).statistic

    slow = _loop(idx, clusters, expected)
    assert np.isnan(slow).sum() > 0
    np.testing.assert_array_equal(np.isnan(fast), np.isnan(slow))
    np.testing.assert_allclose(fast[~np.isnan(fast)], slow[~np.isnan(slow)], rtol=0, atol=1e-12)
    jack = engine.jackknife()  # leaving out "c" makes x constant
    assert np.isnan(jack[uniques.index("c")]) and np.isfinite(jack[uniques.index("a")])


def test_resample_helpers_validate_indices_and_accept_bool_codes():
    with pytest.raises(ValueError, match="indices"):
        kappa_resamples([0, 1], [0, 1], ["a", "b"], np.array([[0, 2]]), n_labels=2)
    a = np.array([True, False, True, True, False, False])
    b = np.array([True, False, False, True, False, True])
    est = cluster_bootstrap_kappa(a, b, [0, 0, 1, 1, 2, 2], n_labels=2, n_resamples=50)
    assert est.value == pytest.approx(cohen_kappa_score(a, b))
