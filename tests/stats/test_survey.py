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
