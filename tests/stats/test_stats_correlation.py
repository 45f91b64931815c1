"""Correlations: cross-checks against scipy, undefined cases, summary-level (grouped) correlation."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from calibrate.stats import grouped_correlation, kendall_tau_b, pearson_r, spearman_rho
from calibrate.stats.correlation import average_ranks

FAST = settings(max_examples=40, deadline=None)
FUNCS = {"spearman": (spearman_rho, sps.spearmanr), "kendall": (kendall_tau_b, sps.kendalltau), "pearson": (pearson_r, sps.pearsonr)}


@st.composite
def paired_scores(draw):
    n = draw(st.integers(3, 50))
    discrete = draw(st.booleans())
    elem = st.integers(1, 5).map(float) if discrete else st.floats(-100, 100, allow_nan=False, width=32)
    x = draw(st.lists(elem, min_size=n, max_size=n))
    y = draw(st.lists(elem, min_size=n, max_size=n))
    return np.array(x), np.array(y)


@FAST
@given(paired_scores(), st.sampled_from(sorted(FUNCS)))
def test_correlations_match_scipy(data, method):
    x, y = data
    ours, ref_fn = FUNCS[method]
    est = ours(x, y)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        assert est.status == "undefined" and est.value is None
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = ref_fn(x, y)
    assert est.status == "ok" and est.n == x.size
    assert est.value == pytest.approx(ref.statistic, abs=1e-10)
    assert est.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_spearman_is_scipys_bit_for_bit(seed):
    """Spearman is computed without scipy.stats (its import costs a claim report about a second, docs/architecture.md):
    the same ranks, r and p as scipy.stats.spearmanr, exactly, with ties, perfect and near-perfect correlations."""
    rng = np.random.default_rng(seed)
    for n in (3, 4, 7, 30, 299, 2000):
        levels = int(rng.integers(2, 40))
        cases = [(rng.integers(0, levels, n).astype(float), None), (rng.normal(size=n), None)]
        cases = [(x, x + rng.integers(0, levels, n) if i == 0 else x + rng.normal(size=n)) for i, (x, _) in enumerate(cases)]
        cases += [(cases[1][0], cases[1][0] * 2), (cases[1][0], -cases[1][0]), (cases[0][0], rng.permutation(cases[0][0]))]
        for x, y in cases:
            if np.ptp(x) == 0 or np.ptp(y) == 0:
                continue
            assert np.array_equal(average_ranks(x), sps.rankdata(x)) and np.array_equal(average_ranks(y), sps.rankdata(y))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref = sps.spearmanr(x, y)
            est = spearman_rho(x, y)
            assert est.value == float(np.clip(ref.statistic, -1, 1))
            assert est.p_value == float(ref.pvalue) or (est.p_value is None and not np.isfinite(ref.pvalue))


def test_spearman_uses_average_ranks_for_ties():
    x = [1, 2, 2, 3, 4]
    y = [1, 3, 2, 2, 5]
    rx = sps.rankdata(x)
    ry = sps.rankdata(y)
    assert spearman_rho(x, y).value == pytest.approx(np.corrcoef(rx, ry)[0, 1], abs=1e-12)


@pytest.mark.parametrize("fn", [spearman_rho, kendall_tau_b, pearson_r])
@pytest.mark.parametrize(
    ("x", "y", "status", "note"),
    [
        ([3, 3, 3], [1, 2, 3], "undefined", "x is constant"),
        ([1, 2, 3], [4, 4, 4], "undefined", "y is constant"),
        ([2, 2], [5, 5], "undefined", "x and y are constant"),
        ([1.0], [2.0], "undefined", "n < 2: a correlation needs at least two pairs"),
        ([], [], "no_data", "no pairs with both scores"),
        ([None, 1.0], [2.0, float("nan")], "no_data", "no pairs with both scores"),
    ],
)
def test_undefined_correlations(fn, x, y, status, note):
    est = fn(x, y)
    assert est.value is None and est.status == status and est.note == note
    assert json.dumps(est.to_dict(), allow_nan=False)


@pytest.mark.parametrize("fn", [spearman_rho, kendall_tau_b, pearson_r])
def test_two_pairs_have_a_value_but_no_p_value(fn):
    est = fn([1.0, 2.0], [3.0, 5.0])
    assert est.value == pytest.approx(1.0) and est.p_value is None and est.n == 2


def test_missing_pairs_are_dropped():
    est = spearman_rho([1, 2, None, 4, 5, np.inf], [2, 1, 3, float("nan"), 5, 6])
    assert est.n == 3 and est.extra["n_missing"] == 3
    assert est.value == pytest.approx(spearman_rho([1, 2, 5], [2, 1, 5]).value)


def test_length_mismatch_and_bad_method_raise():
    with pytest.raises(ValueError, match="same length"):
        pearson_r([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="method"):
        grouped_correlation([1, 2], [1, 2], [0, 0], method="distance")
    with pytest.raises(ValueError, match="numeric"):
        pearson_r(["a", "b"], [1, 2])


# --------------------------------------------------------------------------- grouped correlation


@pytest.mark.parametrize("method", sorted(FUNCS))
def test_grouped_correlation_is_mean_of_within_group_correlations(method):
    rng = np.random.default_rng(7)
    groups = np.repeat(np.arange(8), 6)
    x = rng.integers(1, 6, groups.size).astype(float)
    y = x + rng.normal(size=groups.size)
    x[groups == 3] = 2.0  # constant human scores in group 3: skipped
    groups = np.append(groups, 99)  # a singleton group: skipped
    x, y = np.append(x, 1.0), np.append(y, 1.0)
    est = grouped_correlation(x, y, groups, method=method)
    ref_fn = FUNCS[method][1]
    expected = [ref_fn(x[groups == g], y[groups == g]).statistic for g in range(8) if g != 3]
    assert est.value == pytest.approx(np.mean(expected), abs=1e-12)
    assert est.n == 7
    assert est.extra["groups"] == 7 and est.extra["groups_skipped"] == 2 and est.extra["n_items"] == 42
    assert "2 group(s) skipped" in est.note


def test_grouped_correlation_with_string_groups_and_missing_scores():
    x = [1, 2, 3, None, 1, 2, 3]
    y = [1, 3, 2, 5, 3, 2, 1]
    g = ["q1", "q1", "q1", "q1", "q2", "q2", "q2"]
    est = grouped_correlation(x, y, g, method="pearson")
    assert est.value == pytest.approx((sps.pearsonr([1, 2, 3], [1, 3, 2]).statistic - 1.0) / 2)


def test_grouped_correlation_undefined_and_empty():
    est = grouped_correlation([1, 1, 2, 2], [1, 2, 3, 4], ["a", "a", "b", "b"])
    assert est.status == "undefined" and est.value is None
    assert est.extra == {"groups": 0, "groups_skipped": 2, "n_items": 0, "statistic": "spearman"}
    assert grouped_correlation([], [], []).status == "no_data"
    with pytest.raises(ValueError, match="missing"):
        grouped_correlation([1, 2], [1, 2], [None, "a"])
