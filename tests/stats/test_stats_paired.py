"""Paired A/B tests: cross-checked with scipy, the bootstrap with a naive loop, undefined cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from calibrate.stats import (
    bootstrap_index_matrix,
    paired_bootstrap_diff,
    paired_t_test,
    relative_improvement,
    wilcoxon_signed_rank,
)
from calibrate.stats.paired import resampled_means

FAST = settings(max_examples=50, deadline=None)

pairs = st.integers(2, 40).flatmap(lambda n: st.tuples(
    st.lists(st.floats(0, 1, allow_nan=False), min_size=n, max_size=n),
    st.lists(st.floats(0, 1, allow_nan=False), min_size=n, max_size=n),
))


@FAST
@given(pairs)
def test_t_test_equals_scipy_ttest_rel(ab):
    a, b = np.array(ab[0]), np.array(ab[1])
    d = b - a
    assume(np.ptp(d) > 1e-6 * (1 + np.abs(d).max()))
    ours = paired_t_test(a, b)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = sps.ttest_rel(b, a)
    assert ours.value == pytest.approx(ref.statistic, rel=1e-9)
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)
    assert ours.extra["df"] == a.size - 1


@FAST
@given(pairs)
def test_wilcoxon_equals_scipy(ab):
    a, b = np.array(ab[0]), np.array(ab[1])
    assume(np.any(b != a))
    ours = wilcoxon_signed_rank(a, b)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = sps.wilcoxon(b, a)
    assert ours.value == pytest.approx(ref.statistic)
    assert ours.p_value == pytest.approx(ref.pvalue)
    assert ours.extra["w_plus"] + ours.extra["w_minus"] == pytest.approx(ours.extra["n_nonzero"] * (ours.extra["n_nonzero"] + 1) / 2)
    assert ours.value == pytest.approx(min(ours.extra["w_plus"], ours.extra["w_minus"]))


def test_a_worked_example():
    a = [0.50, 0.60, 0.70, 0.40, 0.90, 0.30]
    b = [0.55, 0.70, 0.72, 0.50, 0.88, 0.45]
    t = paired_t_test(a, b)
    assert t.value == pytest.approx(sps.ttest_rel(b, a).statistic)
    assert t.extra["mean_difference"] == pytest.approx(np.mean(np.subtract(b, a)))
    w = wilcoxon_signed_rank(a, b)
    # |d| = .05 .10 .02 .10 .02 .15 → ranks 3, 4.5, 1.5, 4.5, 1.5, 6; only 0.90 → 0.88 is negative
    assert w.extra["w_minus"] == pytest.approx(1.5) and w.extra["w_plus"] == pytest.approx(19.5)
    assert w.value == pytest.approx(1.5)
    ri = relative_improvement(a, b)
    assert ri.value == pytest.approx((np.mean(b) - np.mean(a)) / np.mean(a))


def test_bootstrap_equals_a_naive_loop_on_the_same_index_matrix():
    rng = np.random.default_rng(3)
    a, b = rng.random(37), rng.random(37)
    est = paired_bootstrap_diff(a, b, n_resamples=300, seed=5)
    idx = bootstrap_index_matrix(37, n_resamples=300, seed=5)
    loop = np.array([np.mean(b[row] - a[row]) for row in idx])
    assert est.value == pytest.approx(np.mean(b - a))
    assert est.ci == pytest.approx(tuple(np.quantile(loop, [0.025, 0.975])), abs=1e-12)
    assert est.extra["bootstrap_se"] == pytest.approx(loop.std(ddof=1))
    again = paired_bootstrap_diff(a, b, n_resamples=300, seed=5)
    assert again.ci == est.ci  # seeded: reproducible


def test_bootstrap_bca_and_p_value():
    rng = np.random.default_rng(0)
    a = rng.random(200)
    b = a + 0.1 + rng.normal(0, 0.05, 200)
    est = paired_bootstrap_diff(a, b, n_resamples=500, method="bca")
    low, high = est.ci
    assert low < est.value < high and low > 0
    assert est.p_value == pytest.approx(2 / 501)  # every resample above 0: the +1 floor
    assert est.extra["ci_method_used"] == "bca"
    null = paired_bootstrap_diff(a, a + rng.normal(0, 0.05, 200), n_resamples=500)
    assert null.p_value > 0.05


@pytest.mark.parametrize(
    ("a", "b", "fn", "status", "note"),
    [
        ([0.5], [0.7], paired_t_test, "undefined", "n < 2"),
        ([0.5, 0.6], [0.5, 0.6], paired_t_test, "undefined", "all differences are zero"),
        ([0.5, 0.6], [0.6, 0.7], paired_t_test, "undefined", "standard deviation is 0"),
        ([0.5, 0.6], [0.5, 0.6], wilcoxon_signed_rank, "undefined", "all differences are zero"),
        ([], [], paired_t_test, "no_data", "no pairs"),
        ([], [], wilcoxon_signed_rank, "no_data", "no pairs"),
        ([], [], paired_bootstrap_diff, "no_data", "no pairs"),
        ([0.0, 0.0], [0.5, 0.6], relative_improvement, "undefined", "mean of A is 0"),
    ],
)
def test_undefined_cases_are_results_with_notes(a, b, fn, status, note):
    est = fn(a, b)
    assert est.status == status and est.value is None and note in est.note


def test_few_nonzero_differences_are_flagged_and_missing_pairs_dropped():
    w = wilcoxon_signed_rank([0.1, 0.2, None, 0.4], [0.2, 0.3, 0.5, 0.6])
    assert w.n == 3 and w.extra["n_missing"] == 1 and "cannot reach p < 0.05" in w.note
    one = paired_bootstrap_diff([0.1], [0.3])
    assert one.value == pytest.approx(0.2) and one.ci is None and "n < 2" in one.note


@pytest.mark.parametrize("kwargs", [{"n_resamples": 0}, {"confidence": 1.0}, {"method": "bootstrap-t"}])
def test_bad_options_raise(kwargs):
    with pytest.raises(ValueError):
        paired_bootstrap_diff([1, 2], [2, 3], **kwargs)


def test_lengths_must_match():
    with pytest.raises(ValueError, match="same length"):
        paired_t_test([1, 2], [1])


@pytest.mark.parametrize("fn", [paired_bootstrap_diff, paired_t_test, relative_improvement])
def test_numeric_arrays_are_taken_as_they_are_with_the_figures_of_lists(fn):
    """A numeric numpy array (the report's per-answer values) is converted in one step, not value by value: the same
    pairs, the same missing pairs dropped, the same figures as the same values given as a list."""
    rng = np.random.default_rng(4)
    a, b = rng.random(300), rng.integers(0, 8, 300) / 7
    a[[3, 50]] = np.nan
    for x, y in ((a, b), (a.astype(np.float32), (b * 7).astype(np.int64)), (a, b > 0.5)):
        found = fn(x, y)
        listed = fn([None if np.isnan(v) else float(v) for v in x.tolist()], y.tolist())
        assert found.to_dict() == listed.to_dict()
        assert found.extra.get("n_missing") == 2


@pytest.mark.parametrize(("n", "resamples"), [(2, 5), (7, 130), (1000, 64), (40_000, 70), (100_000, 21)])
def test_resampled_means_are_the_gathered_means_bit_for_bit(n, resamples):
    """The buffered take gives each resample's mean exactly as the plain gather of the same index matrix did (blocks of
    one generator call: 64 rows for small n, 10 at 10^5, a last short one)."""
    values = np.random.default_rng(n).random(n) - 0.4
    matrix = bootstrap_index_matrix(n, n_resamples=resamples, seed=9)
    expected = np.array([values[row].mean() for row in matrix]) if n < 1000 else values[matrix].mean(axis=1)
    found = resampled_means(values, resamples, 9)
    np.testing.assert_array_equal(found, values[matrix].mean(axis=1))
    np.testing.assert_allclose(found, expected, rtol=0, atol=1e-15)
    with pytest.raises(ValueError):
        resampled_means(np.zeros(0), 3, 0)
