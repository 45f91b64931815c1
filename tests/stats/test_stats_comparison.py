"""McNemar's exact test, cross-checked with statsmodels."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.contingency_tables import mcnemar

from calibrate.stats import discordant_counts, mcnemar_exact


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40), st.integers(0, 40), st.integers(0, 40), st.integers(0, 40))
def test_matches_statsmodels_exact(n11, b10, b01, n00):
    if b01 + b10 == 0:
        return
    table = np.array([[n11, b10], [b01, n00]])
    expected = mcnemar(table, exact=True)
    est = mcnemar_exact(b01, b10, n=int(table.sum()))
    assert est.p_value == pytest.approx(expected.pvalue)
    assert est.value == expected.statistic


def test_worked_example():
    # 10 targets fixed, 2 broken: P(X <= 2 | n=12, p=1/2) * 2 = 2 * 79/4096
    est = mcnemar_exact(10, 2)
    assert est.p_value == pytest.approx(2 * 79 / 4096)
    assert est.extra == {"b01": 10, "b10": 2, "n_discordant": 12}


def test_symmetric_in_the_two_counts():
    assert mcnemar_exact(3, 9).p_value == mcnemar_exact(9, 3).p_value


def test_no_discordant_pair_is_undefined():
    est = mcnemar_exact(0, 0, n=50)
    assert est.value is None and est.status == "undefined" and "same targets" in est.note
    assert mcnemar_exact(0, 0).status == "no_data"


def test_discordant_counts():
    first = [True, True, False, False, True]
    second = [True, False, True, True, True]
    assert discordant_counts(first, second) == (2, 1, 5)
    with pytest.raises(ValueError):
        discordant_counts([True], [True, False])
