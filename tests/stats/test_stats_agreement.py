"""Agreement statistics: cross-checks against reference implementations, properties, undefined cases."""

from __future__ import annotations

import itertools
import json
import warnings

import krippendorff
import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score, precision_recall_fscore_support
from sklearn.metrics import confusion_matrix as sk_confusion_matrix
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from calibrate.stats import (
    co_rated_pairs,
    cohen_kappa,
    confusion_matrix,
    crowd_pairwise_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    pairwise_cohen_kappa,
    per_label_prf,
    percent_agreement,
)

FAST = settings(max_examples=40, deadline=None)


@st.composite
def two_raters(draw, max_labels=5, max_n=60):
    k = draw(st.integers(2, max_labels))
    n = draw(st.integers(2, max_n))
    a = draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
    b = draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
    return k, a, b


def _sklearn_kappa(a, b, labels, weights=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cohen_kappa_score(a, b, labels=labels, weights=weights)


# --------------------------------------------------------------------------- Cohen's kappa


@FAST
@given(two_raters(), st.sampled_from([None, "linear", "quadratic"]))
def test_cohen_kappa_matches_sklearn(data, weights):
    k, a, b = data
    labels = list(range(k))
    est = cohen_kappa(a, b, labels=labels, weights=weights)
    ref = _sklearn_kappa(a, b, labels, weights)
    if est.status == "undefined":
        assert np.isnan(ref)
        assert est.value is None
    else:
        assert est.value == pytest.approx(ref, abs=1e-12)
        assert est.n == len(a)


@FAST
@given(two_raters(), st.sampled_from([None, "linear", "quadratic"]))
def test_cohen_kappa_is_symmetric(data, weights):
    k, a, b = data
    ab = cohen_kappa(a, b, labels=list(range(k)), weights=weights)
    ba = cohen_kappa(b, a, labels=list(range(k)), weights=weights)
    assert ab.status == ba.status
    if ab.ok:
        assert ab.value == pytest.approx(ba.value, abs=1e-12)


@FAST
@given(two_raters(), st.randoms(use_true_random=False))
def test_unweighted_kappa_is_label_permutation_invariant(data, rnd):
    k, a, b = data
    perm = list(range(k))
    rnd.shuffle(perm)
    names = [f"label-{p}" for p in perm]
    orig = cohen_kappa(a, b)
    renamed = cohen_kappa([names[v] for v in a], [names[v] for v in b])
    assert orig.status == renamed.status
    if orig.ok:
        assert renamed.value == pytest.approx(orig.value, abs=1e-12)


@FAST
@given(st.lists(st.sampled_from(["supported", "unsupported", "partial"]), min_size=2, max_size=40))
def test_perfect_agreement_is_one(labels):
    assume(len(set(labels)) >= 2)
    est = cohen_kappa(labels, labels)
    assert est.value == pytest.approx(1.0)
    for w in ("linear", "quadratic"):
        codes = [["supported", "unsupported", "partial"].index(v) for v in labels]
        assert cohen_kappa(codes, codes, weights=w).value == pytest.approx(1.0)


def test_full_label_set_counts_even_if_one_side_never_uses_a_label():
    a = [0, 1, 2, 2, 1, 0, 2]
    b = [0, 1, 1, 1, 1, 0, 0]  # never uses 2
    for w in (None, "linear", "quadratic"):
        est = cohen_kappa(a, b, labels=[0, 1, 2], weights=w)
        assert est.value == pytest.approx(_sklearn_kappa(a, b, [0, 1, 2], w), abs=1e-12)
    # a label neither side uses changes the scale for weighted kappa but not unweighted kappa
    assert cohen_kappa(a, b, labels=[0, 1, 2, 3]).value == pytest.approx(cohen_kappa(a, b).value)


def test_weighted_kappa_uses_scale_values():
    """Linear weights on values (1, 2, 4): a 2-vs-4 disagreement costs twice a 1-vs-2 one."""
    a = [1, 2, 4, 1, 2, 4, 2]
    b = [1, 4, 4, 2, 2, 1, 2]
    labels = [1, 2, 4]
    table = confusion_matrix(a, b, labels=labels).astype(float)
    v = np.array(labels, dtype=float)
    w = np.abs(v[:, None] - v[None, :])
    n = table.sum()
    expected = 1 - n * (w * table).sum() / (table.sum(1) @ w @ table.sum(0))
    assert cohen_kappa(a, b, labels=labels, weights="linear").value == pytest.approx(expected, abs=1e-12)
    # equally spaced values agree with scikit-learn's index-based weights
    a3 = [{1: 0, 2: 1, 4: 2}[x] for x in a]
    b3 = [{1: 0, 2: 1, 4: 2}[x] for x in b]
    assert cohen_kappa(a3, b3, weights="quadratic").value == pytest.approx(_sklearn_kappa(a3, b3, None, "quadratic"), abs=1e-12)


def test_cohen_kappa_drops_missing_pairs():
    est = cohen_kappa(["y", "n", None, "y", "n", float("nan")], ["y", "n", "y", None, "y", "n"])
    assert est.n == 3 and est.extra["n_missing"] == 3
    assert est.value == pytest.approx(cohen_kappa(["y", "n", "n"], ["y", "n", "y"]).value)


@pytest.mark.parametrize(
    ("a", "b", "status", "note"),
    [
        (["supported"] * 4, ["supported"] * 4, "undefined", "all labels are 'supported': expected agreement is 1"),
        (["x"], ["y"], "undefined", "n < 2: kappa needs at least two items"),
        ([], [], "no_data", "no items rated by both raters"),
        ([None, "x"], ["y", None], "no_data", "no items rated by both raters"),
    ],
)
def test_cohen_kappa_undefined_cases(a, b, status, note):
    est = cohen_kappa(a, b)
    assert est.value is None and est.status == status and est.note == note
    json.dumps(est.to_dict(), allow_nan=False)


def test_weighted_kappa_single_value_is_undefined():
    est = cohen_kappa([3, 3, 3], [3, 3, 3], labels=[1, 2, 3, 4, 5], weights="quadratic")
    assert est.status == "undefined" and est.note.startswith("all labels are 3")


def test_cohen_kappa_rejects_bad_input():
    with pytest.raises(ValueError, match="same length"):
        cohen_kappa([1, 2], [1])
    with pytest.raises(ValueError, match="not in labels"):
        cohen_kappa([1, 2], [1, 3], labels=[1, 2])
    with pytest.raises(ValueError, match="weights"):
        cohen_kappa([1, 2], [1, 2], weights="cubic")
    with pytest.raises(ValueError, match="numeric"):
        cohen_kappa(["a", "b"], ["a", "b"], weights="linear")


# --------------------------------------------------------------------------- two-rater helpers


@FAST
@given(two_raters())
def test_confusion_matrix_and_percent_agreement(data):
    k, a, b = data
    labels = list(range(k))
    table = confusion_matrix(a, b, labels=labels)
    np.testing.assert_array_equal(table, sk_confusion_matrix(a, b, labels=labels))
    assert percent_agreement(a, b).value == pytest.approx(np.trace(table) / len(a))


@FAST
@given(two_raters())
def test_per_label_prf_matches_sklearn_where_defined(data):
    k, gold, pred = data
    labels = list(range(k))
    out = per_label_prf(gold, pred, labels=labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p, r, f, s = precision_recall_fscore_support(gold, pred, labels=labels, zero_division=np.nan)
    for i, lab in enumerate(labels):
        row = out[lab]
        assert row["support"] == s[i]
        for key, ref in (("precision", p[i]), ("recall", r[i])):
            if np.isnan(ref):
                assert row[key] is None and f"{key} undefined" in row["note"]
            else:
                assert row[key] == pytest.approx(ref)
        if row["f1"] is not None:
            assert row["f1"] == pytest.approx(f[i])


def test_per_label_prf_undefined_is_none_not_zero():
    out = per_label_prf(["a", "a", "b"], ["a", "a", "a"], labels=["a", "b", "c"])
    assert out["b"] == {"precision": None, "recall": 0.0, "f1": None, "support": 1, "note": "precision undefined: label never predicted",
                        "reason": {"code": "precision_undefined"}}
    assert out["c"]["precision"] is None and out["c"]["recall"] is None and out["c"]["support"] == 0
    assert out["a"]["precision"] == pytest.approx(2 / 3) and out["a"]["recall"] == 1.0
    # both defined and zero: F1 is 0, not None
    out = per_label_prf(["a", "b"], ["b", "a"], labels=["a", "b"])
    assert out["a"]["f1"] == 0.0


def test_percent_agreement_empty():
    est = percent_agreement([], [])
    assert est.status == "no_data" and est.value is None


def test_pairwise_cohen_kappa_over_shared_units():
    ratings = {
        "ann": {"u1": "y", "u2": "n", "u3": "y", "u4": "n"},
        "bob": {"u1": "y", "u2": "n", "u3": "n", "u5": "y"},
        "cat": {"u5": "y", "u6": "n"},
        "dan": {"u1": "y", "u2": None, "u3": "y"},
    }
    rows = {(r["a"], r["b"]): r for r in pairwise_cohen_kappa(ratings)}
    assert list(rows) == [("ann", "bob"), ("ann", "cat"), ("ann", "dan"), ("bob", "cat"), ("bob", "dan"), ("cat", "dan")]
    ab = rows[("ann", "bob")]
    assert ab["n"] == 3 and ab["status"] == "ok"
    assert ab["value"] == pytest.approx(cohen_kappa(["y", "n", "y"], ["y", "n", "n"]).value)
    assert rows[("ann", "cat")]["status"] == "no_data" and rows[("ann", "cat")]["value"] is None
    assert rows[("bob", "cat")]["n"] == 1 and rows[("bob", "cat")]["status"] == "undefined"
    assert rows[("ann", "dan")]["n"] == 2  # u2 is missing for dan
    assert rows[("ann", "dan")]["note"] == "all labels are 'y': expected agreement is 1"
    assert set(rows[("ann", "bob")]) == {"a", "b", "n", "value", "status", "note"}


# --------------------------------------------------------------------------- Fleiss' kappa


@st.composite
def count_tables(draw):
    k = draw(st.integers(2, 5))
    m = draw(st.integers(2, 8))
    n_items = draw(st.integers(2, 25))
    rows = []
    for _ in range(n_items):
        cuts = sorted(draw(st.lists(st.integers(0, m), min_size=k - 1, max_size=k - 1)))
        edges = [0, *cuts, m]
        rows.append([edges[i + 1] - edges[i] for i in range(k)])
    return np.array(rows)


@FAST
@given(count_tables())
def test_fleiss_matches_statsmodels_for_equal_raters(table):
    ratings = [[j for j, c in enumerate(row) for _ in range(c)] for row in table]
    est = fleiss_kappa(ratings)
    if np.count_nonzero(table.sum(axis=0)) == 1:
        assert est.status == "undefined"
        return
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        ref = sm_fleiss_kappa(table, method="fleiss")
    assert est.value == pytest.approx(ref, abs=1e-12)


def test_fleiss_unequal_raters_formula():
    ratings = [["a", "a", "b"], ["a", "a"], ["b", "b", "b", "a"], ["a"], [None, "b", "b"]]
    est = fleiss_kappa(ratings)
    # P_i over items with >= 2 ratings; p_j pooled over all 12 ratings (a: 6, b: 6)
    p_i = [2 / 6, 1.0, 6 / 12, 1.0]
    p_bar = np.mean(p_i)
    p_e = (6 / 12) ** 2 + (6 / 12) ** 2
    assert est.value == pytest.approx((p_bar - p_e) / (1 - p_e), abs=1e-12)
    assert est.n == 4 and est.extra["n_items_skipped"] == 1 and est.extra["n_ratings"] == 12


def test_fleiss_undefined_cases():
    est = fleiss_kappa([["supported"] * 3, ["supported"] * 2])
    assert est.status == "undefined" and est.note == "all labels are 'supported': expected agreement is 1"
    est = fleiss_kappa([["a"], ["b"]])
    assert est.status == "undefined" and est.note == "no item has at least two ratings"
    assert fleiss_kappa([]).status == "no_data"
    assert fleiss_kappa([[None, None]]).status == "no_data"
    with pytest.raises(ValueError, match="not in labels"):
        fleiss_kappa([["a", "z"]], labels=["a", "b"])


def test_fleiss_accepts_2d_array_with_nan():
    arr = np.array([[1, 1, np.nan], [2, 2, 1], [1, 2, 2]])
    lists = [[1, 1], [2, 2, 1], [1, 2, 2]]
    assert fleiss_kappa(arr).value == pytest.approx(fleiss_kappa(lists).value)


# --------------------------------------------------------------------------- Krippendorff's alpha


@st.composite
def reliability_data(draw):
    raters = draw(st.integers(2, 5))
    units = draw(st.integers(2, 15))
    cell = st.one_of(st.none(), st.integers(1, 5))
    return [draw(st.lists(cell, min_size=units, max_size=units)) for _ in range(raters)]


@FAST
@given(reliability_data(), st.sampled_from(["nominal", "ordinal", "interval", "ratio"]))
def test_krippendorff_matches_package(data, level):
    est = krippendorff_alpha(data, level=level)
    arr = np.array([[np.nan if v is None else v for v in row] for row in data], dtype=float)
    pairable = sum(1 for u in range(arr.shape[1]) if np.isfinite(arr[:, u]).sum() >= 2)
    values = {v for u in range(arr.shape[1]) if np.isfinite(arr[:, u]).sum() >= 2 for v in arr[:, u][np.isfinite(arr[:, u])]}
    domain = sorted(set(arr[np.isfinite(arr)].tolist()))
    assume(pairable >= 1 and len(values) >= 2)
    assert est.status == "ok"
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        ref = krippendorff.alpha(reliability_data=arr, level_of_measurement=level, value_domain=domain)
    assert est.value == pytest.approx(ref, abs=1e-9)


def test_krippendorff_ordinal_respects_value_order():
    data = [["low", "mid", "high", "mid"], ["low", "high", "high", "low"]]
    order = ["low", "mid", "high"]
    coded = [[order.index(v) for v in row] for row in data]
    assert krippendorff_alpha(data, level="ordinal", values=order).value == pytest.approx(
        krippendorff_alpha(coded, level="ordinal").value
    )


def test_krippendorff_undefined_cases():
    est = krippendorff_alpha([[1, 1, None], [1, 1, 2]])
    assert est.status == "undefined" and est.note == "all pairable values are 1: expected disagreement is 0"
    est = krippendorff_alpha([[1, None], [None, 2]])
    assert est.status == "undefined" and est.note == "no unit has at least two values"
    assert krippendorff_alpha([[None, None], [None, None]]).status == "no_data"
    assert krippendorff_alpha([]).status == "no_data"
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha([[1, 2]], level="cardinal")
    with pytest.raises(ValueError, match="numeric"):
        krippendorff_alpha([["a", "b"], ["a", "a"]], level="interval")
    with pytest.raises(ValueError, match="rectangular"):
        krippendorff_alpha([[1, 2], [1]])


# --------------------------------------------------------------------------- crowds: only co-occurring pairs


def _crowd(seed=0, n_units=300, n_raters=20, per_unit=3, labels=("a", "b", "c")):
    rng = np.random.default_rng(seed)
    units, raters, values = [], [], []
    for u in range(n_units):
        for r in rng.choice(n_raters, per_unit, replace=False):
            units.append(f"u{u}")
            raters.append(f"r{r:02d}")
            values.append(labels[rng.integers(len(labels))])
    return units, raters, values


def test_crowd_pairwise_kappa_matches_sklearn_on_every_listed_pair_and_counts_the_rest():
    units, raters, values = _crowd()
    out = crowd_pairwise_kappa(units, raters, values, labels=["a", "b", "c"], min_shared=8)
    by_rater: dict = {}
    for u, r, v in zip(units, raters, values, strict=True):
        by_rater.setdefault(r, {})[u] = v
    shared = {(a, b): [u for u in by_rater[a] if u in by_rater[b]] for a, b in itertools.combinations(sorted(by_rater), 2)}
    expected = {pair: us for pair, us in shared.items() if len(us) >= 8}
    assert 0 < len(expected) < len(shared)
    assert [(p["a"], p["b"]) for p in out["pairs"]] == sorted(expected)
    assert out["n_pairs"] == 190 and out["n_pairs_sparse"] == 190 - len(expected)
    for p in out["pairs"]:
        us = expected[(p["a"], p["b"])]
        assert p["n"] == len(us)
        ref = cohen_kappa_score([by_rater[p["a"]][u] for u in us], [by_rater[p["b"]][u] for u in us], labels=["a", "b", "c"])
        assert p["value"] == pytest.approx(ref, abs=1e-12)


def test_crowd_pairwise_kappa_equals_the_all_pairs_function_on_dense_data_with_missing_and_weights():
    units, raters, values = _crowd(seed=3, n_units=60, n_raters=4, per_unit=4, labels=(1, 2, 3, 4))
    values[5] = None  # a missing rating is dropped, as in cohen_kappa
    ratings: dict = {}
    for u, r, v in zip(units, raters, values, strict=True):
        ratings.setdefault(r, {})[u] = v
    for weights in (None, "quadratic"):
        out = crowd_pairwise_kappa(units, raters, values, labels=[1, 2, 3, 4], min_shared=1, weights=weights)
        ref = [cohen_kappa([ratings[a][u] for u in ratings[a] if u in ratings[b] and ratings[a][u] is not None
                                  and ratings[b][u] is not None],
                                 [ratings[b][u] for u in ratings[a] if u in ratings[b] and ratings[a][u] is not None
                                  and ratings[b][u] is not None], labels=[1, 2, 3, 4], weights=weights)
               for a, b in itertools.combinations(sorted(ratings), 2)]
        assert [p["value"] for p in out["pairs"]] == pytest.approx([e.value for e in ref])
        assert [p["n"] for p in out["pairs"]] == [e.n for e in ref] and out["n_pairs_sparse"] == 0


def test_crowd_pairwise_kappa_says_why_a_pair_is_undefined_and_refuses_bad_input():
    out = crowd_pairwise_kappa(["x", "y", "x", "y", "z"], ["A", "A", "B", "B", "C"], ["s"] * 5, labels=["s", "u"], min_shared=2)
    assert out["pairs"] == [{"a": "A", "b": "B", "n": 2, "value": None, "status": "undefined",
                             "note": "all labels are 's': expected agreement is 1",
                             "reason": {"code": "single_label", "label": "s"}}]
    assert out["n_pairs"] == 3 and out["n_pairs_sparse"] == 2
    pair = crowd_pairwise_kappa(["x"] * 2, ["A", "B"], [1, 1], labels=[1, 2], min_shared=1)["pairs"][0]
    assert pair["reason"] == {"code": "kappa_too_few"} and pair["note"] == "n < 2: kappa needs at least two items"
    weighted = crowd_pairwise_kappa(["x", "y"] * 2, ["A", "A", "B", "B"], [2] * 4, labels=[1, 2], min_shared=1,
                                    weights="linear")
    assert weighted["pairs"][0]["reason"] == {"code": "single_label_no_disagreement", "label": 2}
    assert weighted["pairs"][0]["note"] == "all labels are 2: expected disagreement is 0"
    with pytest.raises(ValueError, match="more than once"):
        crowd_pairwise_kappa(["x", "x"], ["A", "A"], ["s", "u"], labels=["s", "u"])
    with pytest.raises(ValueError, match="min_shared"):
        crowd_pairwise_kappa(["x"], ["A"], ["s"], labels=["s"], min_shared=0)
    with pytest.raises(ValueError, match="not in labels"):
        crowd_pairwise_kappa(["x"], ["A"], ["?"], labels=["s"])
    assert crowd_pairwise_kappa([], [], [], labels=["s"]) == {"pairs": [], "n_pairs": 0, "n_pairs_sparse": 0}


def test_crowd_pairwise_kappa_and_co_rated_pairs_give_categoricals_the_same_result_as_lists():
    """The report passes pandas categoricals (codes, not 10^6 strings): the same pairs, rows and κ as from lists, also
    with categories out of order, unused categories and missing values."""
    units, raters, values = _crowd()
    values = [None if i % 17 == 0 else v for i, v in enumerate(values)]
    plain = crowd_pairwise_kappa(units, raters, values, labels=["a", "b", "c"], min_shared=3)
    shuffled = sorted(set(raters), reverse=True) + ["nobody"]
    as_categories = (pd.Series(units, dtype="category"), pd.Series(pd.Categorical(raters, categories=shuffled)),
                     pd.Series(pd.Categorical(values, categories=["c", "b", "a", "x"])))
    assert crowd_pairwise_kappa(*as_categories, labels=["a", "b", "c"], min_shared=3) == plain
    sorted_raters = pd.Series(raters, dtype="category")
    for got, want in ((co_rated_pairs(as_categories[0], sorted_raters, min_shared=3), co_rated_pairs(units, raters, min_shared=3)),
                      (co_rated_pairs(as_categories[0], as_categories[1], min_shared=3), co_rated_pairs(units, raters, min_shared=3))):
        assert got["raters"] == want["raters"]
        for key in ("a", "b", "n", "pair", "rows_a", "rows_b"):
            np.testing.assert_array_equal(got[key], want[key])
    with pytest.raises(ValueError, match="not in labels"):
        crowd_pairwise_kappa(*as_categories[:2], pd.Series(pd.Categorical(["z"] * len(units))), labels=["a", "b", "c"])
