"""stats.design.design_estimate: the one live estimator, checked against statsmodels, ppi_py, Agresti & Min's formula
and by simulation in the cells where the earlier normal interval failed (rare failures, small audits)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats as sps
import statsmodels.api as sm
from ppi_py import ppi_mean_pointestimate

from calibrate.stats.design import BIG_CLASS, PSEUDO_MASS, design_estimate, sampling_classes, snap


def _plain(y, yhat, yhat_all=None, **kwargs):
    """Equal weights, every target its own cluster; the labelled targets are the first len(y) of the judged ones."""
    y, yhat = np.asarray(y, dtype=float), np.asarray(yhat, dtype=float)
    yhat_all = yhat if yhat_all is None else np.asarray(yhat_all, dtype=float)
    n, big_n = len(y), len(yhat_all)
    return design_estimate(y, yhat, np.full(n, big_n / n), np.ones(n), np.arange(n), yhat_all, np.ones(big_n), np.ones(big_n),
                           np.arange(big_n), **kwargs)


def test_the_clustered_variance_of_a_mean_is_statsmodels_cluster_robust_wls():
    """λ = 0, scores: the interval is θ ± t(k − 1)·se with se the cluster-robust standard error of a weighted mean (the
    intercept of WLS, statsmodels' cluster covariance with its G/(G − 1) correction)."""
    rng = np.random.default_rng(0)
    clusters = np.repeat(np.arange(30), rng.integers(1, 6, size=30))
    y = rng.integers(1, 6, size=clusters.size).astype(float) + 0.5 * (clusters % 3)
    w = rng.choice([1.0, 4.0, 20.0], size=clusters.size)
    pi = np.ones(clusters.size)
    est = design_estimate(y, y, w, pi, clusters, y, np.ones(len(y)), pi, clusters, binary=False, lam=0.0, alpha=0.1)
    fit = sm.WLS(y, np.ones((len(y), 1)), weights=w).fit(cov_type="cluster", cov_kwds={"groups": clusters})
    half = sps.t.ppf(0.95, 29) * fit.bse[0]
    assert est.value == pytest.approx(fit.params[0], abs=1e-12)
    assert est.ci == pytest.approx((fit.params[0] - half, fit.params[0] + half), abs=1e-12)
    assert est.extra["method"] == "classical" and est.extra["df"] == 29 and est.extra["interval"] == "t"


def test_the_point_estimate_is_ppi_plus_plus_at_the_same_lambda_with_both_sets_weighted():
    rng = np.random.default_rng(1)
    n_all = 400
    y_all = (rng.random(n_all) < 0.7).astype(float)
    yhat_all = np.where(rng.random(n_all) < 0.85, y_all, 1 - y_all)
    pi = np.where(yhat_all == 0, 1.0, 0.2)
    lab = rng.choice(n_all, 60, replace=False)
    est = design_estimate(y_all[lab], yhat_all[lab], 1 / pi[lab], pi[lab], lab, yhat_all, 1 / pi, pi, np.arange(n_all), binary=True)
    lam = est.extra["lambda"]
    assert 0 < lam <= 1 and est.extra["method"] == "ppi++"
    theirs = ppi_mean_pointestimate(y_all[lab], yhat_all[lab], yhat_all, lam=lam, w=1 / pi[lab], w_unlabeled=1 / pi)
    assert est.value == pytest.approx(float(np.ravel(theirs)[0]), abs=1e-12)
    fixed = design_estimate(y_all[lab], yhat_all[lab], 1 / pi[lab], pi[lab], lab, yhat_all, 1 / pi, pi, np.arange(n_all), binary=True,
                            lam=1.0)
    assert fixed.extra["method"] == "ppi" and fixed.extra["lambda"] == 1.0


def test_agresti_min_pseudo_counts_by_hand():
    """Ten matched pairs (gold, verdict): 6 × (1, 1), 1 × (1, 0), 3 × (0, 0), all of them the judged targets, λ = 1.

    The rectifier Y − Ŷ is the paired difference of Agresti & Min (2005): its adjusted variance (half a count in each of
    the four cells, n* = n + 2) is theirs, [(p*₁₀ + p*₀₁) − (p*₁₀ − p*₀₁)²] / n*, and the interval is
    centre ± t(9)·√(V + extra) with the module docstring's V and extra."""
    y = np.array([1] * 6 + [1] + [0] * 3, dtype=float)
    yhat = np.array([1] * 6 + [0] + [0] * 3, dtype=float)
    est = _plain(y, yhat, binary=True, lam=1.0)
    n = 10
    m = yhat.mean()
    theta = m + (y - yhat).mean()
    assert est.value == pytest.approx(theta)
    # V: the judged mean's and the rectifier's linearised variances, each with k/(k − 1)
    v_m = n / (n - 1) * ((yhat - m) ** 2).sum() / n ** 2
    e = (y - theta) - (yhat - theta)
    v_e = n / (n - 1) * ((e - e.mean()) ** 2).sum() / n ** 2
    # Agresti–Min on the cells: p*₁₀ = (1 + 0.5) / 12, p*₀₁ = (0 + 0.5) / 12
    p10, p01 = 1.5 / 12, 0.5 / 12
    am_var = ((p10 + p01) - (p10 - p01) ** 2) / 12
    observed = ((1 / 10) - (1 / 10) ** 2) / 10  # the unadjusted cells: p₁₀ = 0.1, p₀₁ = 0
    extra = am_var - observed
    centre = m + (p10 - p01)
    half = sps.t.ppf(0.975, 9) * math.sqrt(v_m + v_e + extra)
    assert PSEUDO_MASS == 2.0
    assert est.ci == pytest.approx((max(0.0, centre - half), min(1.0, centre + half)), abs=1e-12)


@pytest.mark.parametrize(("gold", "verdict", "lam"), [(1.0, 1.0, None), (0.0, 0.0, None), (1.0, 1.0, 0.0), (1.0, 0.0, 1.0)])
def test_a_share_is_never_a_point_and_never_leaves_zero_and_one(gold, verdict, lam):
    """Fifteen labels with the same gold: the share is estimated from a sample, so its interval has a width; a bound that
    floating point pushes across 0 or 1 prints as the bound (no -0.0, no 0.9999999999999998)."""
    est = _plain(np.full(15, gold), np.full(15, verdict), np.r_[np.full(15, verdict), np.full(385, verdict)], binary=True, lam=lam)
    low, high = est.ci
    assert 0.0 <= low < high <= 1.0 and high - low > 0.05
    assert (high == 1.0 if gold == 1.0 else low == 0.0) and math.copysign(1.0, low) == 1.0
    assert est.value in (0.0, 1.0) or 0.0 <= est.value <= 1.0


def test_snap_removes_floating_point_noise_at_a_bound():
    assert snap(1 - 1e-16, 0.0, 1.0) == 1.0 and snap(-1e-17, 0.0, 1.0) == 0.0 and math.copysign(1.0, snap(-0.0)) == 1.0
    assert snap(1.2, 0.0, 1.0) == 1.0 and snap(0.5, 0.0, 1.0) == 0.5 and snap(float("nan")) is None


def _two_classes(n_heavy_lab, *, heavy_pi=0.01, heavy_judged=10, light=100, light_lab=30):
    """Judged targets in two trace-sampling classes (π 1 and `heavy_pi`); some of each labelled."""
    pi_all = np.r_[np.ones(light), np.full(heavy_judged, heavy_pi)]
    yhat_all = np.r_[np.ones(light - 5), np.zeros(5), np.ones(heavy_judged)]
    lab = np.r_[np.arange(light_lab), light + np.arange(n_heavy_lab)]
    ids = np.arange(len(pi_all))
    y = yhat_all[lab]
    return design_estimate(y, yhat_all[lab], 1 / (pi_all[lab] * 0.5), pi_all[lab], ids[lab], yhat_all, 1 / pi_all, pi_all, ids,
                           binary=True)


def test_too_few_audit_labels_where_the_traffic_is_name_the_class_and_the_labels_that_would_settle_it():
    est = _two_classes(2)
    assert not est.ok and est.value is None and est.ci is None and est.reason.code == "too_few_audit"
    figures = est.reason.figures
    assert figures["inclusion_prob"] == 0.01 and figures["have"] == 2 and figures["need"] == BIG_CLASS[1]
    # the heavy class is 10 of the 110 judged samples: (5 − 2) / (10/110) → 33 more audit labels
    assert figures["more"] == 33 and est.extra["labels_needed"] == 33
    assert est.extra["judge_only"] is not None  # the judge-only number stays, never trusted
    assert _two_classes(5).ok


def test_a_class_under_five_percent_of_the_traffic_needs_no_labels():
    est = _two_classes(0, heavy_pi=1.0 / 3, heavy_judged=1, light=100)  # 3 of 103 traces' worth
    rare = next(c for c in est.extra["classes"] if c["inclusion_prob"] < 1)
    assert est.ok and rare["audit_samples"] == 0 and rare["needed"] == 0 and rare["traffic_share"] < 0.05


def test_a_score_whose_audit_does_not_vary_is_refused_and_a_share_is_not():
    scores = _plain(np.full(12, 4.0), np.full(12, 4.0), binary=False)
    assert not scores.ok and scores.reason.code == "zero_variance"
    assert _plain(np.ones(12), np.ones(12), binary=True).ok


def test_a_ratio_leaves_excluded_golds_and_verdicts_out_of_its_denominator():
    """NaN marks a gold or verdict that is not counted (not_applicable): the labels alone are Σw·Y·C / Σw·C, and PPI's
    estimate is N̂ / D̂ of the module docstring."""
    y = np.array([1, 0, np.nan, 1, 1, np.nan, 0, 1])
    yhat = np.array([1, 0, np.nan, 1, 0, 1, np.nan, 1])
    yhat_all = np.r_[yhat, [1, 1, np.nan, 0]]
    alone = _plain(y, yhat, yhat_all, binary=True, lam=0.0)
    assert alone.value == pytest.approx(4 / 6)
    one = _plain(y, yhat, yhat_all, binary=True, lam=1.0)
    c, ch = ~np.isnan(y), ~np.isnan(yhat)
    yc, yhc = np.nan_to_num(y) * c, np.nan_to_num(yhat) * ch
    ca = ~np.isnan(yhat_all)
    big_n = np.nan_to_num(yhat_all).mean() + (yc - yhc).mean()
    big_d = ca.mean() + (c.astype(float) - ch).mean()
    assert one.value == pytest.approx(big_n / big_d, abs=1e-12)


def test_the_interval_of_clustered_claims_is_wider_than_if_they_were_independent():
    rng = np.random.default_rng(4)
    answers = np.repeat(np.arange(60), 6)
    rate = rng.beta(2.0, 1.0, size=60)[answers]  # claims of one answer share its rate
    y = (rng.random(answers.size) < rate).astype(float)
    yhat = np.where(rng.random(answers.size) < 0.9, y, 1 - y)
    w, pi = np.ones(len(y)), np.ones(len(y))
    clustered = design_estimate(y[:120], yhat[:120], w[:120], pi[:120], answers[:120], yhat, w, pi, answers, binary=True)
    ids = np.arange(len(y))
    independent = design_estimate(y[:120], yhat[:120], w[:120], pi[:120], ids[:120], yhat, w, pi, ids, binary=True)
    width = lambda est: est.ci[1] - est.ci[0]  # noqa: E731
    assert clustered.value == pytest.approx(independent.value) and width(clustered) > 1.3 * width(independent)
    assert clustered.extra["n_clusters"] == 20 and clustered.extra["df"] == 19


@pytest.mark.parametrize(("prevalence", "labels"), [(0.03, 20), (0.03, 40), (0.30, 20)])
def test_coverage_where_the_normal_interval_failed(prevalence, labels):
    """Rare failures and small audits (the issue's cells, no trace sampling): the normal interval covered 0.15–0.65 at 3 %;
    this one covers at least the nominal rate's neighbourhood over 400 windows (bench/results/live_number.md runs the
    whole grid)."""
    rng = np.random.default_rng([7, labels, int(prevalence * 100)])
    hits = 0
    reps = 400
    for _ in range(reps):
        y_all = (rng.random(600) >= prevalence).astype(float)
        yhat_all = np.where(y_all == 1, rng.random(600) < 0.95, rng.random(600) < 0.25).astype(float)
        lab = rng.choice(600, labels, replace=False)
        ids = np.arange(600)
        ones = np.ones(600)
        est = design_estimate(y_all[lab], yhat_all[lab], np.full(labels, 600 / labels), ones[lab], lab, yhat_all, ones, ones, ids,
                              binary=True)
        hits += est.ci[0] <= y_all.mean() <= est.ci[1]
    assert hits / reps >= 0.93


def test_sampling_classes_group_equal_probabilities_and_bin_many():
    assert sampling_classes(np.array([1.0, 0.05, 0.05, 1.0, 0.0500001])).tolist() == [1, 0, 0, 1, 0]
    many = sampling_classes(np.geomspace(1e-4, 1, 50))
    assert len(set(many.tolist())) == 10


@pytest.mark.parametrize("bad", [{"w": [0.0, 1.0]}, {"pi_all": [1.0, -1.0, 1.0]}, {"y": [1.0, np.inf]}, {"cluster": [0]}])
def test_bad_arrays_are_programming_errors(bad):
    args = {"y": [1.0, 0.0], "yhat": [1.0, 0.0], "w": [1.0, 1.0], "pi": [1.0, 1.0], "cluster": [0, 1], "yhat_all": [1.0, 0.0, 1.0],
            "w_all": [1.0, 1.0, 1.0], "pi_all": [1.0, 1.0, 1.0], "cluster_all": [0, 1, 2]}
    args.update(bad)
    with pytest.raises(ValueError):
        design_estimate(**args, binary=True)
