"""The result types: Result, the base of every statistical result, and Estimate."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calibrate.reasons import Reason
from calibrate.stats import Estimate
from calibrate.stats.result import Result


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
    u = Estimate.undefined(4, Reason("x_constant"), statistic="spearman")
    assert (u.value, u.n, u.status, u.note, u.extra) == (None, 4, "undefined", "x is constant", {"statistic": "spearman"})
    assert u.to_dict()["reason"] == {"code": "x_constant"}
    e = Estimate.no_data()
    assert (e.value, e.n, e.status, e.note, e.reason) == (None, 0, "no_data", "no data", Reason("no_data"))
    assert e.to_dict()["ci"] is None


def test_the_note_is_the_reason_in_english_and_nothing_else():
    """A note is never given: it is the reason's sentence, so note and reason cannot disagree."""
    with pytest.raises(TypeError, match="reason must be a Reason"):
        Estimate(value=None, n=0, status="no_data", reason="no data")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Estimate(value=1.0, n=1, note="a caveat")  # type: ignore[call-arg]
    assert Estimate(value=1.0, n=1).note == "" and "reason" not in Estimate(value=1.0, n=1).to_dict()


def test_every_statistical_result_is_a_result_and_ends_its_json_the_same_way():
    from calibrate.stats.alttest import AltTestResult, alt_test
    from calibrate.stats.position import PositionResult, position_bias

    alt = AltTestResult.undefined(Reason("alt_test_no_item"), epsilon=0.2, alpha=0.05, scoring="accuracy")
    position = position_bias(["A", "B"], ["A", "A"], ["A", "B"], ["B", "A"])
    tested = alt_test([0, 0, 1, 1, 2, 2], ["a", "b", "a", "c", "b", "c"], [1, 1, 0, 0, 1, 1], [0, 1, 2], [1, 0, 1])
    for result in (Estimate(value=0.5, n=2), alt, position, tested):
        assert isinstance(result, Result)
        tail = dict(list(result.to_dict().items())[-len(result.status_fields()):])
        assert tail == result.status_fields() == {"status": result.status, **result.note_fields()}
    assert isinstance(position, PositionResult) and (position.value, position.n) == (position.agreement, position.n_pairs)
    assert (tested.value, tested.n) == (tested.winning_rate, tested.n_items)
    assert alt.to_dict()["reason"] == {"code": "alt_test_no_item"} and not alt.ok and alt.note


def test_is_frozen_and_validates_status():
    est = Estimate(value=1.0, n=1)
    with pytest.raises(AttributeError):
        est.value = 2.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        Estimate(value=1.0, n=1, status="fine")
