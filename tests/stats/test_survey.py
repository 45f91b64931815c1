"""stats/survey.py: PPI++ with Hájek weights (docs/statistics.md §18)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as sps

from calibrate.stats.survey import hajek_mean, hajek_ppi_mean


def test_equal_weights_and_lambda_zero_is_the_mean_with_a_t_interval():
    rng = np.random.default_rng(0)
    y = rng.random(30)
    est = hajek_ppi_mean(y, y, rng.random(200), np.ones(30), np.ones(200), lam=0.0)
    se = y.std(ddof=1) / np.sqrt(30)
    t = sps.t.ppf(0.975, 29)
    assert est.value == pytest.approx(y.mean())
    assert est.ci == pytest.approx((y.mean() - t * se, y.mean() + t * se))
    assert hajek_mean(y, np.ones(30)).ci == pytest.approx(est.ci)


def test_the_formula_by_hand_with_unequal_weights():
    y = np.array([1.0, 0.0, 1.0, 1.0])
    yhat = np.array([1.0, 0.0, 0.0, 1.0])
    yall = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    w, wall = np.array([1.0, 10.0, 1.0, 10.0]), np.array([1.0, 10.0, 1.0, 10.0, 2.0, 2.0])
    est = hajek_ppi_mean(y, yhat, yall, w, wall, lam=0.5)
    p, q = w / w.sum(), wall / wall.sum()
    m = (q * yall).sum()
    r = y - 0.5 * yhat
    value = 0.5 * m + (p * r).sum()
    se = np.sqrt(0.25 * 6 / 5 * (q ** 2 * (yall - m) ** 2).sum() + 4 / 3 * (p ** 2 * (r - (p * r).sum()) ** 2).sum())
    t = sps.t.ppf(0.975, 1 / (p ** 2).sum() - 1)
    assert est.value == pytest.approx(value)
    assert est.ci == pytest.approx((value - t * se, value + t * se))


def test_tuned_lambda_is_clipped_and_few_labels_are_undefined():
    est = hajek_ppi_mean([1, 0, 1], [1, 0, 1], [1, 0, 1, 0], [1, 1, 1], [1, 1, 1, 1])
    assert 0 <= est.extra["lambda"] <= 1
    assert hajek_ppi_mean([1], [1], [1, 0], [1], [1, 1]).reason.code == "too_few_labels"
    assert hajek_ppi_mean([], [], [1, 0], [], [1, 1]).reason.code == "no_labels"
    with pytest.raises(ValueError):
        hajek_ppi_mean([1, 0], [1, 0], [1, 0], [1, -1], [1, 1])


def test_tuned_lambda_is_the_weighted_regression_coefficient_of_the_gold_on_the_verdict():
    """The audit is drawn from the judged targets: the variance formula is right at that λ (§18), not at PPI++'s."""
    rng = np.random.default_rng(4)
    yhat_all = (rng.random(300) < 0.7).astype(float)
    w_all = np.where(rng.random(300) < 0.3, 1.0, 10.0)
    drawn = rng.choice(300, size=80, replace=False)
    yhat, w = yhat_all[drawn], w_all[drawn] / 0.25
    y = np.where(yhat == 1, rng.random(80) < 0.9, rng.random(80) < 0.2).astype(float)
    est = hajek_ppi_mean(y, yhat, yhat_all, w, w_all)
    slope = np.polyfit(yhat, y, 1, w=np.sqrt(w))[0]  # weighted least squares: weights w on the squared residuals
    assert 0 < slope < 1 and est.extra["lambda"] == pytest.approx(slope)
    p = w / w.sum()
    assert est.extra["n_effective"] == pytest.approx(1 / (p ** 2).sum())
    # verdicts that do not vary on the labelled set: no regression, the labels alone
    assert hajek_ppi_mean(y, np.ones(80), yhat_all, w, w_all).extra["lambda"] == 0.0
