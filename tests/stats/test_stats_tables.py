"""Statistics from contingency tables and integer codes (issue 34): the same numbers as the list functions.

`cohen_kappa_table` and `per_label_prf_table` against `cohen_kappa`/`per_label_prf` and scikit-learn on random
data (labels never used, a single label, empty); `label_codes` and `shared_codes` against dict look-ups; the
kappa bootstrap counted by cluster type against the loop over the same index matrix.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score, precision_recall_fscore_support

from calibrate.stats import (
    bootstrap_index_matrix,
    cluster_bootstrap_kappa,
    cohen_kappa,
    confusion_matrix,
    intervals,
    per_label_prf,
)
from calibrate.stats.agreement import cohen_kappa_table, label_codes, per_label_prf_table, shared_codes


def _table(a, b, labels):
    return confusion_matrix(a, b, labels=labels)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_kappa_table_is_cohen_kappa(seed, weights):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 5))
    labels = list(range(k + 1))  # the last label never used: a missing category
    n = int(rng.integers(0, 40))
    a = rng.integers(0, k, n).tolist()
    b = list(a) if seed % 4 == 0 else rng.integers(0, k, n).tolist()
    est = cohen_kappa_table(_table(a, b, labels), labels=labels, weights=weights)
    ref = cohen_kappa(a, b, labels=labels, weights=weights)
    assert est.to_dict() == ref.to_dict()
    if est.value is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert est.value == pytest.approx(cohen_kappa_score(a, b, labels=labels, weights=weights), abs=1e-12)


def test_cohen_kappa_table_single_label_empty_and_bad_shape():
    one = cohen_kappa_table(np.array([[5, 0], [0, 0]]), labels=["yes", "no"])
    assert one.status == "undefined" and one.to_dict() == cohen_kappa(["yes"] * 5, ["yes"] * 5, labels=["yes", "no"]).to_dict()
    assert cohen_kappa_table(np.zeros((2, 2), int), labels=["a", "b"]).status == "no_data"
    assert cohen_kappa_table(np.array([[1]]), labels=["a"]).to_dict() == cohen_kappa(["a"], ["a"], labels=["a"]).to_dict()
    with pytest.raises(ValueError):
        cohen_kappa_table(np.zeros((2, 3), int), labels=["a", "b"])
    with pytest.raises(ValueError):
        cohen_kappa_table(np.zeros((2, 2)), labels=["a", "b"])  # counts, not proportions


@pytest.mark.parametrize("seed", range(8))
def test_per_label_prf_table_is_per_label_prf_and_sklearn(seed):
    rng = np.random.default_rng(seed)
    labels = ["a", "b", "c", "d"]  # "d" never occurs
    n = int(rng.integers(1, 50))
    gold = rng.choice(labels[:3], n).tolist()
    pred = rng.choice(labels[: 1 + seed % 3], n).tolist()
    table = _table(gold, pred, labels)
    out = per_label_prf_table(table, labels=labels)
    assert out == per_label_prf(gold, pred, labels=labels)
    p, r, _, s = precision_recall_fscore_support(gold, pred, labels=labels, zero_division=np.nan)
    for i, lab in enumerate(labels):
        assert out[lab]["support"] == s[i]
        for key, ref in (("precision", p[i]), ("recall", r[i])):
            assert (out[lab][key] is None) == bool(np.isnan(ref))
            if out[lab][key] is not None:
                assert out[lab][key] == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize("categorical", [True, False])
def test_label_codes_match_a_dict(categorical):
    labels = ["supported", "unsupported"]
    values = ["unsupported", "not_applicable", None, "supported", "supported", "other"]
    series = pd.Series(values, dtype="category" if categorical else object)
    index = {lab: i for i, lab in enumerate(labels)}
    expected = [index.get(v, -1) for v in values]
    assert label_codes(series, labels).tolist() == expected
    assert label_codes(values, labels).tolist() == expected
    assert label_codes(pd.Series([], dtype=object), labels).tolist() == []
    assert label_codes(series, []).tolist() == [-1] * len(values)


def test_shared_codes_code_equal_keys_alike():
    keys = pd.Index(sorted(f"claim:{i}" for i in range(20)))
    dtype = pd.CategoricalDtype(keys)
    a = pd.Series(["claim:3", "claim:1", "claim:3", None], dtype=dtype)
    b = pd.Series(["claim:1", "claim:7"], dtype=dtype)
    for x, y in ((a, b), (a.astype(object), b.astype(object)), (a, b.astype(object))):
        ca, cb, n = shared_codes(x, y)
        assert ca[3] == -1 and ca[0] == ca[2] and ca[1] == cb[0] and cb[1] not in ca and n >= 3
        assert len({*ca[:3].tolist(), *cb.tolist()}) == 3
    assert [len(c) for c in shared_codes([], [])[:2]] == [0, 0]


def _typed_data(seed, n_clusters=300, per=4):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, n_clusters * per)
    b = np.where(rng.random(a.size) < 0.7, a, 1 - a)
    clusters = np.repeat(rng.permutation(n_clusters) + 1000, per)
    return a, b, clusters


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_kappa_bootstrap_by_cluster_type_equals_the_loop_and_the_cluster_counts(method, monkeypatch):
    a, b, clusters = _typed_data(3)
    g = len(np.unique(clusters))
    engine = intervals._KappaEngine(a, b, intervals.factorize_clusters(clusters)[0], g, 2, 1.0 - np.eye(2))
    assert engine.types() is not None  # 4 claims, 2 labels: at most 35 tables
    est = cluster_bootstrap_kappa(a, b, clusters, n_labels=2, n_resamples=300, seed=7, method=method)
    idx = bootstrap_index_matrix(g, n_resamples=300, seed=7)
    codes = intervals.factorize_clusters(clusters)[0]
    rows_of = [np.flatnonzero(codes == c) for c in range(g)]
    slow = np.array([cohen_kappa_score(a[np.concatenate([rows_of[c] for c in row])],
                                       b[np.concatenate([rows_of[c] for c in row])]) for row in idx])
    assert est.extra["bootstrap_se"] == pytest.approx(slow.std(ddof=1), abs=1e-12)
    if method == "percentile":
        lo, hi = np.quantile(slow, [0.025, 0.975])
        assert est.ci == pytest.approx((lo, hi), abs=1e-12)
    monkeypatch.setattr(intervals._KappaEngine, "types", lambda self: None)  # the cluster-count path
    plain = cluster_bootstrap_kappa(a, b, clusters, n_labels=2, n_resamples=300, seed=7, method=method)
    assert plain.to_dict() == est.to_dict()


def test_kappa_bootstrap_with_many_distinct_tables_counts_clusters():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 4, 2000)
    b = rng.integers(0, 4, 2000)
    cl = rng.integers(0, 100, 2000)
    engine = intervals._KappaEngine(a, b, cl, 100, 4, 1.0 - np.eye(4))
    assert engine.types() is None  # every cluster its own table: the types would not pay


@pytest.mark.parametrize("sort", [False, True])
def test_factor_codes_of_integer_codes_equal_those_of_their_values(sort):
    from calibrate.stats._common import factor_codes

    values = np.random.default_rng(4).integers(0, 50, 300)
    codes, uniques = factor_codes(values, sort=sort)
    ref_codes, ref_uniques = factor_codes(values.tolist(), sort=sort)
    assert codes.tolist() == ref_codes.tolist() and uniques == ref_uniques
    assert all(type(u) is int for u in uniques)


def test_kappa_bootstrap_types_of_large_tables_equal_the_cluster_counts(monkeypatch):
    """Tables too large to be one integer each (16 cells counting up to 20) are typed by rows: the same values."""
    rng = np.random.default_rng(6)
    patterns = [rng.integers(0, 4, (20, 2)) for _ in range(5)]
    chosen = rng.integers(0, 5, 200)
    rows = np.concatenate([patterns[c] for c in chosen])
    a, b, clusters = rows[:, 0], rows[:, 1], np.repeat(np.arange(200), 20)
    engine = intervals._KappaEngine(a, b, clusters, 200, 4, 1.0 - np.eye(4))
    assert engine.types() is not None and engine.type_tables.shape[0] <= 5
    est = cluster_bootstrap_kappa(a, b, clusters, n_labels=4, n_resamples=200, seed=2)
    monkeypatch.setattr(intervals._KappaEngine, "types", lambda self: None)
    assert cluster_bootstrap_kappa(a, b, clusters, n_labels=4, n_resamples=200, seed=2).to_dict() == est.to_dict()


def _crowd_counts(seed: int, units: int = 150, k: int = 3, single: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    raters = rng.integers(1, 5, units)  # some units with one value only: not pairable
    counts = np.zeros((units, k), dtype=np.int64)
    for u, m in enumerate(raters):
        np.add.at(counts[u], rng.choice(1 if single else k, m, p=None if single else [0.6, 0.3, 0.1][:k]), 1)
    return counts


@pytest.mark.parametrize("level,values", [("nominal", ["a", "b", "c"]), ("ordinal", [1, 2, 3]), ("interval", [0.0, 0.5, 2.0]),
                                          ("ratio", [1.0, 2.0, 4.0])])
@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_alpha_bootstrap_over_units_equals_the_loop(level, values, method):
    from calibrate.stats import cluster_bootstrap, krippendorff_alpha_counts
    from calibrate.stats.intervals import cluster_bootstrap_alpha_counts

    counts = _crowd_counts(3)
    units = np.arange(len(counts))
    loop = cluster_bootstrap(lambda u: krippendorff_alpha_counts(counts[u], level=level, values=values), [units], units,
                             n_resamples=300, method=method, seed=5)
    fast = cluster_bootstrap_alpha_counts(counts, level=level, values=values, n_resamples=300, method=method, seed=5)
    assert fast.value == loop.value == krippendorff_alpha_counts(counts, level=level, values=values).value
    assert fast.ci == pytest.approx(loop.ci, abs=1e-12)
    for key in ("n_undefined_resamples", "n_clusters", "n_resamples", "seed"):
        assert fast.extra[key] == loop.extra[key]
    assert fast.extra["bootstrap_se"] == pytest.approx(loop.extra["bootstrap_se"], abs=1e-12)
    if method == "bca":
        assert fast.extra["acceleration"] == pytest.approx(loop.extra["acceleration"], abs=1e-12)


def test_alpha_bootstrap_undefined_and_sparse_tables():
    from calibrate.stats import cluster_bootstrap, krippendorff_alpha_counts
    from calibrate.stats.intervals import cluster_bootstrap_alpha_counts

    single = _crowd_counts(1, single=True)  # every coder gave one value: alpha undefined, no CI
    est = cluster_bootstrap_alpha_counts(single, values=["a", "b", "c"])
    assert est.value is None and est.ci is None and est.status == "undefined"
    assert cluster_bootstrap_alpha_counts(np.zeros((0, 2), dtype=np.int64), values=["a", "b"]).status == "no_data"
    sparse = np.array([[1, 1], [2, 0], [0, 1], [1, 0]])  # few pairable units: many resamples undefined
    units = np.arange(4)
    loop = cluster_bootstrap(lambda u: krippendorff_alpha_counts(sparse[u], values=["a", "b"]), [units], units,
                             n_resamples=200, seed=1)
    fast = cluster_bootstrap_alpha_counts(sparse, values=["a", "b"], n_resamples=200, seed=1)
    assert fast.extra["n_undefined_resamples"] == loop.extra["n_undefined_resamples"] > 0
    assert fast.ci == pytest.approx(loop.ci, abs=1e-12) and fast.value == loop.value
    with pytest.raises(ValueError):
        cluster_bootstrap_alpha_counts(np.array([[0.5, 1.0]]), values=["a", "b"])
