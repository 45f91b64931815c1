"""Estimates of the system's mean from verdicts and labels: PPI, PPI++, classical, Rogan-Gladen, power.

Cross-checked against ppi_py (ppi-python, a test-only dependency) and against the reference
implementation of Lee et al. (arXiv 2511.21140).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate, ppi_mean_power
from scipy import stats as sps

from calibrate.stats import (
    ESTIMATE_REASONS,
    classical_mean,
    judge_mean,
    labels_needed,
    ppi_mean,
    rogan_gladen,
    rogan_gladen_from_rates,
)


def _data(seed: int, kind: str):
    rng = np.random.default_rng(seed)
    n, big_n = int(rng.integers(30, 150)), int(rng.integers(200, 1500))
    if kind == "binary":
        theta = rng.uniform(0.2, 0.8)
        y = (rng.random(n) < theta).astype(float)
        yhat = np.where(rng.random(n) < 0.8, y, 1 - y)
        truth_unl = (rng.random(big_n) < theta).astype(float)
        yhat_unl = np.where(rng.random(big_n) < 0.8, truth_unl, 1 - truth_unl)
    else:
        y = rng.normal(3.0, 1.0, n)
        yhat = 0.5 + 0.8 * y + rng.normal(0, 0.6, n)
        yhat_unl = 0.5 + 0.8 * rng.normal(3.0, 1.0, big_n) + rng.normal(0, 0.6, big_n)
    return rng, y, yhat, yhat_unl


def _weights(rng, n, big_n, which):
    if which == "none":
        return None, None
    w = 1.0 / rng.uniform(0.05, 0.9, n)
    return (w, None) if which == "labelled" else (w, 1.0 / rng.uniform(0.2, 1.0, big_n))


@pytest.mark.parametrize("which", ["none", "labelled", "both"])
@pytest.mark.parametrize("kind", ["binary", "continuous"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("lam", [None, 1.0, 0.4])
def test_equals_ppi_py(seed, kind, which, lam):
    rng, y, yhat, yhat_unl = _data(seed, kind)
    w, w_unl = _weights(rng, y.size, yhat_unl.size, which)
    est = ppi_mean(y, yhat, yhat_unl, alpha=0.1, lam=lam, weights=w, weights_unlabeled=w_unl)
    lo, hi = ppi_mean_ci(y, yhat, yhat_unl, alpha=0.1, lam=lam, w=w, w_unlabeled=w_unl)
    point = ppi_mean_pointestimate(y, yhat, yhat_unl, lam=lam, w=w, w_unlabeled=w_unl)
    assert est.ok
    assert est.value == pytest.approx(float(np.ravel(point)[0]), abs=1e-9)
    assert est.ci[0] == pytest.approx(float(np.ravel(lo)[0]), abs=1e-9)
    assert est.ci[1] == pytest.approx(float(np.ravel(hi)[0]), abs=1e-9)
    assert est.extra["method"] == ("ppi++" if lam is None else "ppi")
    assert 0.0 <= est.extra["lambda"] <= 1.0
    assert est.extra["weighted"] is (which != "none")
    assert est.extra["n_labelled"] == y.size and est.extra["n_unlabelled"] == yhat_unl.size


@pytest.mark.parametrize("seed", [0, 5])
def test_lambda_one_is_plain_ppi(seed):
    """Angelopoulos et al. (2023): θ̂ = mean(Ŷ̃) − mean(Ŷ − Y), se² = var(Ŷ̃)/N + var(Ŷ − Y)/n."""
    _, y, yhat, yhat_unl = _data(seed, "binary")
    est = ppi_mean(y, yhat, yhat_unl, lam=1.0)
    theta = yhat_unl.mean() - (yhat - y).mean()
    se = math.sqrt(yhat_unl.var() / yhat_unl.size + (yhat - y).var() / y.size)
    z = sps.norm.ppf(0.975)
    assert est.value == pytest.approx(theta, abs=1e-12)
    assert est.ci == pytest.approx((theta - z * se, theta + z * se), abs=1e-12)
    assert est.extra["lambda"] == 1.0


@pytest.mark.parametrize("weighted", [False, True])
def test_classical_equals_ppi_py(weighted):
    rng, y, _, _ = _data(7, "continuous")
    w = 1.0 / rng.uniform(0.1, 1.0, y.size) if weighted else None
    est = classical_mean(y, alpha=0.05, weights=w)
    lo, hi = classical_mean_ci(y, w=w, alpha=0.05)
    assert est.ci == pytest.approx((lo, hi), abs=1e-12)
    assert est.value == pytest.approx((lo + hi) / 2, abs=1e-12)


def test_ppi_plus_plus_beats_labels_alone_with_a_good_judge_and_falls_back_with_a_useless_one():
    rng = np.random.default_rng(11)
    y = (rng.random(200) < 0.3).astype(float)
    good = np.where(rng.random(200) < 0.95, y, 1 - y)
    unl = (rng.random(5000) < 0.3).astype(float)
    tuned = ppi_mean(y, good, unl)
    labels = classical_mean(y)
    assert tuned.ci[1] - tuned.ci[0] < 0.6 * (labels.ci[1] - labels.ci[0])
    constant = ppi_mean(y, np.ones(200), np.ones(5000))
    assert constant.extra["lambda"] == 0.0 and "do not vary" in constant.note
    assert constant.value == pytest.approx(labels.value) and constant.ci == pytest.approx(labels.ci)


def test_naive_judge_is_the_verdicts_mean():
    est = judge_mean([1, 1, 1, 0])
    assert est.value == 0.75 and est.extra["method"] == "naive_judge" and "biased" in est.note
    assert judge_mean([]).reason.code == "no_target_verdict"


# Lee et al.'s example in the README of their reference code (UW-Madison-Lee-Lab/LLM-judge-reporting
# at 082884d): p = 0.4, n = 1000, q0 = 0.7, q1 = 0.9, m0 = m1 = 200.  The values are the outputs
# of its point_estimator(0.4, 0.7, 0.9) and confidence_interval(0.4, 0.7, 0.9, 1000, 200, 200, alpha)
# run once on this machine.
@pytest.mark.parametrize(
    ("alpha", "low", "high"),
    [(0.05, 0.05635072484160894, 0.2627330257859588), (0.1, 0.07452970556982796, 0.24777990318352283)],
)
def test_lee_et_al_published_example(alpha, low, high):
    est = rogan_gladen_from_rates(0.4, 0.7, 0.9, n=1000, m0=200, m1=200, alpha=alpha)
    assert est.value == pytest.approx(1 / 6, abs=1e-6)
    assert est.ci == pytest.approx((low, high), abs=1e-6)
    assert est.extra["specificity"] == 0.7 and est.extra["sensitivity"] == 0.9


def test_rogan_gladen_from_arrays_counts_the_rates():
    # 200 gold negatives, 140 judged negative (q0 = 0.7); 200 gold positives, 180 judged positive (q1 = 0.9);
    # 1000 unlabelled, 400 judged positive (p = 0.4): the published example again.
    y = np.r_[np.zeros(200), np.ones(200)]
    yhat = np.r_[np.zeros(140), np.ones(60), np.ones(180), np.zeros(20)]
    unl = np.r_[np.ones(400), np.zeros(600)]
    est = rogan_gladen(y, yhat, unl)
    assert est.ci == pytest.approx((0.05635072484160894, 0.2627330257859588), abs=1e-6)
    assert est.extra["n_negative"] == 200 and est.extra["n_positive"] == 200 and est.extra["n_test"] == 1000
    with pytest.raises(ValueError, match="binary"):
        rogan_gladen([0, 2], [0, 1], [1])


def test_rogan_gladen_clips_to_the_unit_interval():
    est = rogan_gladen_from_rates(0.05, 0.7, 0.9, n=1000, m0=200, m1=200)
    assert est.value == 0.0 and est.ci == (0.0, 0.0)


@pytest.mark.parametrize(
    ("call", "reason"),
    [
        (lambda: ppi_mean([], [], [1, 0]), "no_labels"),
        (lambda: ppi_mean([1], [1], [1, 0]), "too_few_labels"),
        (lambda: ppi_mean([1, 1, 1], [1, 0, 1], [1, 0]), "constant_gold"),
        (lambda: ppi_mean([1, 0, 1], [1, 0, 1], []), "no_unlabelled"),
        (lambda: classical_mean([0.5, 0.5]), "constant_gold"),
        (lambda: classical_mean([]), "no_labels"),
        (lambda: rogan_gladen([1, 1], [1, 0], [1, 0]), "no_gold_negative"),
        (lambda: rogan_gladen([0, 0], [1, 0], [1, 0]), "no_gold_positive"),
        (lambda: rogan_gladen([0, 1, 0, 1], [1, 0, 0, 1], [1, 0]), "not_better_than_chance"),
        (lambda: rogan_gladen_from_rates(0.5, 0.4, 0.6, n=10, m0=10, m1=10), "not_better_than_chance"),
        (lambda: rogan_gladen([0, 1], [0, 1], []), "no_unlabelled"),
        (lambda: labels_needed([1, 1], [1, 0], n_total=10), "constant_gold"),
        (lambda: labels_needed([0, 1, 0, 1], [0, 1, 1, 1], n_total=10, target_width=0.01), "width_unreachable"),
    ],
)
def test_undefined_cases_say_why(call, reason):
    est = call()
    assert est.value is None and est.status == "undefined"
    assert est.reason.code == reason and "reason" not in est.extra and est.note == ESTIMATE_REASONS[reason]
    assert json.loads(json.dumps(est.to_dict(), allow_nan=False))["reason"] == {"code": reason}


@pytest.mark.parametrize("bad", [{"weights": [1.0, -1.0, 1.0]}, {"alpha": 1.5}, {"lam": float("nan")}])
def test_invalid_options_raise(bad):
    with pytest.raises(ValueError):
        ppi_mean([1, 0, 1], [1, 0, 1], [1, 0], **bad)
    with pytest.raises(ValueError, match="aligned"):
        ppi_mean([1, 0], [1], [1])


@pytest.mark.parametrize("total", [2000, 5000, 100000])
def test_labels_needed_matches_ppi_py_power_analysis(total):
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 300).astype(float)
    yhat = np.where(rng.random(300) < 0.85, y, 1 - y)
    est = labels_needed(y, yhat, n_total=total, target_width=0.03)
    n0, rho = est.extra["n_classical"], est.extra["ppi_corr"]
    z = sps.norm.ppf(0.975)
    assert n0 == math.ceil(z**2 * y.var() / 0.03**2)
    assert labels_needed(y, yhat, n_total=total, target_width=0.03, method="classical").value == n0
    # ppi_py solves the same equation (the pool n + N = n_max fixed) and rounds; we round up.
    ref = ppi_mean_power(y, yhat, cost_Y=1.0, cost_Yhat=1e-12, effective_n=n0, n_max=total)
    assert rho == pytest.approx(ref["ppi_corr"], abs=1e-12)
    assert est.value in (ref["n"], ref["n"] + 1)

    def half_width(n):  # the PPI++ half-width with n of the pool labelled
        return z * math.sqrt(y.var() / n * (1 - rho**2 * (total - n) / total))

    assert half_width(est.value) <= 0.03 + 1e-12 < half_width(est.value - 1)


def test_thumbs_down_first_sample_weighted_by_inverse_inclusion_recovers_the_truth():
    """Failures oversampled with known π: 1/π weights recover the population's share, raw labels do not."""
    rng = np.random.default_rng(2024)
    size = 20000
    y = (rng.random(size) < 0.7).astype(float)  # 1 = a good answer
    verdict = np.where(rng.random(size) < 0.85, y, 1 - y)
    thumbs_down = np.where(y == 0, rng.random(size) < 0.6, rng.random(size) < 0.1)
    pi = np.where(thumbs_down, 0.2, 0.01)
    sampled = rng.random(size) < pi
    truth = y.mean()
    # The imputed term uses every target's verdict (the population's mean verdict), the
    # rectifier the labelled ones weighted by 1/π.
    weighted = ppi_mean(y[sampled], verdict[sampled], verdict, weights=1.0 / pi[sampled])
    assert weighted.ci[0] <= truth <= weighted.ci[1]
    assert weighted.extra["weighted"] is True
    assert classical_mean(y[sampled], weights=1.0 / pi[sampled]).ci[0] <= truth
    raw = ppi_mean(y[sampled], verdict[sampled], verdict)
    assert raw.ci[1] < truth  # unweighted, the oversampled failures drag the estimate down
