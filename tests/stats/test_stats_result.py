"""The Estimate result type."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calibrate.stats import Estimate


def test_to_dict_is_json_safe_and_flattens_extra():
    est = Estimate(value=np.float64(0.5), n=np.int64(10), ci=(np.float64(0.1), np.float64(0.9)), p_value=0.01,
                   extra={"method": "bca", "n_resamples": np.int64(2000), "vals": np.array([1.0, np.nan]), "n": 99})
    d = est.to_dict()
    assert d == {"value": 0.5, "n": 10, "ci": [0.1, 0.9], "status": "ok", "note": "", "p_value": 0.01,
                 "method": "bca", "n_resamples": 2000, "vals": [1.0, None]}
    assert json.dumps(d, allow_nan=False)


def test_non_finite_values_become_none():
    est = Estimate(value=float("nan"), n=3, ci=(0.0, float("inf")), p_value=float("nan"))
    assert est.value is None and est.status == "undefined" and est.note
    assert est.ci is None and est.p_value is None
    assert "p_value" not in est.to_dict()
    json.dumps(est.to_dict(), allow_nan=False)


def test_constructors():
    u = Estimate.undefined(4, "x is constant", statistic="spearman")
    assert (u.value, u.n, u.status, u.note, u.extra) == (None, 4, "undefined", "x is constant", {"statistic": "spearman"})
    e = Estimate.no_data("nothing")
    assert (e.value, e.n, e.status, e.note) == (None, 0, "no_data", "nothing")
    assert e.to_dict()["ci"] is None


def test_is_frozen_and_validates_status():
    est = Estimate(value=1.0, n=1)
    with pytest.raises(AttributeError):
        est.value = 2.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        Estimate(value=1.0, n=1, status="fine")
