"""Pinned values from the literature: the statistics must reproduce published worked examples."""

from __future__ import annotations

import numpy as np
import pytest

from calibrate.stats import cohen_kappa, fleiss_kappa, krippendorff_alpha


def _from_table(table, labels):
    """Expand a two-coder contingency table (rows: coder A, columns: coder B) into label lists."""
    a, b = [], []
    for i, row in enumerate(table):
        for j, count in enumerate(row):
            a += [labels[i]] * count
            b += [labels[j]] * count
    return a, b


def test_artstein_poesio_2008_binary_example():
    """Artstein & Poesio (2008), section 2: 100 utterances, two coders, STAT vs IReq.

    Coder A: 30 STAT / 70 IReq, coder B: 40 STAT / 60 IReq, agreeing on 20 STAT and 50
    IReq: A_o = 0.7, A_e(kappa) = 0.3*0.4 + 0.7*0.6 = 0.54, kappa = 0.16/0.46 = 0.348
    (Scott's pi on the same table is 0.341 because it pools the two coders' marginals).
    """
    a, b = _from_table([[20, 10], [20, 50]], ["STAT", "IReq"])
    est = cohen_kappa(a, b)
    assert est.status == "ok" and est.n == 100
    assert round(est.value, 3) == 0.348
    assert est.extra["observed_agreement"] == pytest.approx(0.7)
    assert est.extra["expected_agreement"] == pytest.approx(0.54)


def test_three_category_dialogue_act_table():
    """A three-category table (STAT, IReq, Chck) derived by hand, not pinned from the paper.

    A: 52/32/16, B: 46/44/10, diagonal 46+32+10 = 88: A_o = 0.88,
    A_e = 0.52*0.46 + 0.32*0.44 + 0.16*0.10 = 0.396, kappa = 0.484/0.604.
    """
    a, b = _from_table([[46, 6, 0], [0, 32, 0], [0, 6, 10]], ["STAT", "IReq", "Chck"])
    assert cohen_kappa(a, b).value == pytest.approx(0.484 / 0.604, abs=1e-12)


# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", section C: 4 observers x
# 12 units with missing values ("." in the paper).
_N = None
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, _N, _N, _N],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, _N, 3],
    [_N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, _N],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, _N],
]


@pytest.mark.parametrize(("level", "expected"), [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)])
def test_krippendorff_2011_worked_example(level, expected):
    est = krippendorff_alpha(KRIPPENDORFF_2011, level=level)
    assert est.status == "ok"
    assert round(est.value, 3) == expected
    # unit 12 has a single value: not pairable; 40 pairable values in 11 units
    assert est.n == 11
    assert est.extra["n_pairable_values"] == 40


def test_krippendorff_2011_accepts_nan_array_and_string_values():
    arr = np.array([[np.nan if v is None else v for v in row] for row in KRIPPENDORFF_2011])
    assert round(krippendorff_alpha(arr, level="interval").value, 3) == 0.849
    words = {1: "a", 2: "b", 3: "c", 4: "d", 5: "e"}
    as_str = [[None if v is None else words[v] for v in row] for row in KRIPPENDORFF_2011]
    assert round(krippendorff_alpha(as_str, level="nominal").value, 3) == 0.743
    assert round(krippendorff_alpha(as_str, level="ordinal").value, 3) == 0.815


# Fleiss (1971) as reproduced on Wikipedia ("Fleiss' kappa", worked example): 10 subjects,
# 14 raters each, 5 categories; rows give how many raters chose each category.
FLEISS_TABLE = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def test_fleiss_worked_example():
    ratings = [[j + 1 for j, c in enumerate(row) for _ in range(c)] for row in FLEISS_TABLE]
    est = fleiss_kappa(ratings)
    assert est.status == "ok" and est.n == 10
    assert round(est.value, 3) == 0.210
    assert est.extra["observed_agreement"] == pytest.approx(0.378, abs=5e-4)
    assert est.extra["expected_agreement"] == pytest.approx(0.213, abs=5e-4)
