"""co_rated_pairs and crowd_pairwise_kappa through integer codes (issue 34) against the former way.

`factor_ids` against `factor_codes`' codes; `co_rated_pairs` against `_co_rated_by_unique`, the former function
(units factorized with their values listed, duplicates found by hashing unit × rater keys, the pairs by np.unique);
`crowd_pairwise_kappa` on categoricals (unused categories, categories out of order) against the same ratings as plain
lists; on random crowds with missing values, missing raters and units, repeated ratings.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from calibrate.stats import co_rated_pairs, crowd_pairwise_kappa
from calibrate.stats._common import factor_codes, factor_ids


def _co_rated_by_unique(units, raters, *, min_shared=1):
    unit_ids, _ = factor_codes(units)
    rater_ids, rater_names = factor_codes(raters, sort=True)
    n_raters = len(rater_names)
    if len(pd.unique(unit_ids.astype(np.int64) * max(n_raters, 1) + rater_ids)) != len(unit_ids):
        raise ValueError("a rater rated the same unit more than once")
    order = np.argsort(unit_ids, kind="stable")
    sorted_units = unit_ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_units[1:] != sorted_units[:-1]]) if len(unit_ids) else np.zeros(0, int)
    sizes = np.diff(np.r_[starts, len(unit_ids)])
    rows_a_parts, rows_b_parts = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for size in np.unique(sizes):
        if size < 2:
            continue
        block = starts[sizes == size][:, None] + np.arange(size)[None, :]
        ia, ib = np.triu_indices(size, 1)
        rows_a_parts.append(order[block[:, ia]].ravel())
        rows_b_parts.append(order[block[:, ib]].ravel())
    rows_a, rows_b = np.concatenate(rows_a_parts), np.concatenate(rows_b_parts)
    ra, rb = rater_ids[rows_a], rater_ids[rows_b]
    swap = ra > rb
    rows_a, rows_b = np.where(swap, rows_b, rows_a), np.where(swap, rows_a, rows_b)
    key = np.minimum(ra, rb).astype(np.int64) * n_raters + np.maximum(ra, rb)
    pair_keys, pair_of, shared = np.unique(key, return_inverse=True, return_counts=True)
    kept = shared >= min_shared
    position = np.cumsum(kept) - 1
    on_kept = kept[pair_of]
    n_pairs = n_raters * (n_raters - 1) // 2
    return {"raters": list(rater_names), "a": (pair_keys[kept] // max(n_raters, 1)).astype(np.int64),
            "b": (pair_keys[kept] % max(n_raters, 1)).astype(np.int64), "n": shared[kept].astype(np.int64),
            "pair": position[pair_of][on_kept], "rows_a": rows_a[on_kept], "rows_b": rows_b[on_kept],
            "n_pairs": n_pairs, "n_pairs_sparse": n_pairs - int(kept.sum())}


def _outcome(f, *args, **kwargs):
    try:
        return f(*args, **kwargs)
    except ValueError as e:
        return ("ValueError", str(e))


def _same(x, y):
    if isinstance(x, tuple) or isinstance(y, tuple):
        assert x == y
        return
    assert x.keys() == y.keys()
    for key in x:
        if isinstance(x[key], np.ndarray):
            assert x[key].dtype == y[key].dtype and np.array_equal(x[key], y[key]), key
        else:
            assert x[key] == y[key], key


def _crowd(seed):
    rng = np.random.default_rng(seed)
    n, n_units, n_raters = int(rng.integers(0, 120)), int(rng.integers(1, 40)), int(rng.integers(1, 15))
    ratings = pd.DataFrame({"u": rng.integers(0, n_units, n), "r": rng.integers(0, n_raters, n)})
    if seed % 5:  # else some rater rates a unit twice (refused)
        ratings = ratings.drop_duplicates()
    units = ratings["u"].map("u{}".format).to_numpy(dtype=object)
    raters = ratings["r"].map("r{:02d}".format).to_numpy(dtype=object)
    values = rng.choice(np.array(["s", "u", "n"], dtype=object), len(units))
    if seed % 3 == 0:
        values[rng.random(len(units)) < 0.2] = None
    if seed % 7 == 0:
        raters[rng.random(len(units)) < 0.1] = None
    if seed % 11 == 0:
        units[rng.random(len(units)) < 0.1] = None
    return units, raters, values


def _forms(values):
    present = sorted({v for v in values if v is not None})
    return [list(values), pd.Series(values, dtype="category"),
            pd.Series(pd.Categorical(values, categories=[*reversed(present), "unused"]))]


@pytest.mark.parametrize("seed", range(8))
def test_factor_ids_are_factor_codes_codes_or_the_same_partition(seed):
    units = _crowd(seed)[0]
    for form in _forms(units):
        codes, _ = factor_codes(form)
        assert np.array_equal(factor_ids(form), codes)
        ids = factor_ids(form, first_seen=False)
        assert np.array_equal(ids < 0, codes < 0)
        present = codes >= 0
        pairs = pd.DataFrame({"a": ids[present], "b": codes[present]}).drop_duplicates()
        assert pairs["a"].is_unique and pairs["b"].is_unique  # one id per value and one value per id


@pytest.mark.parametrize("seed", range(60))
def test_co_rated_pairs_is_the_former_function(seed):
    units, raters, _ = _crowd(seed)
    for unit_form in _forms(units):
        for rater_form in _forms(raters):
            for min_shared in (1, 2, 4):
                _same(_outcome(co_rated_pairs, unit_form, rater_form, min_shared=min_shared),
                      _outcome(_co_rated_by_unique, unit_form, rater_form, min_shared=min_shared))


@pytest.mark.parametrize("seed", range(60))
def test_crowd_pairwise_kappa_on_categoricals_is_the_one_on_lists(seed):
    units, raters, values = _crowd(seed)
    plain = _outcome(crowd_pairwise_kappa, list(units), list(raters), list(values), labels=["s", "u", "n"], min_shared=2)
    for unit_form, rater_form, value_form in zip(_forms(units), _forms(raters), _forms(values), strict=True):
        out = _outcome(crowd_pairwise_kappa, unit_form, rater_form, value_form, labels=["s", "u", "n"], min_shared=2)
        assert repr(out) == repr(plain)


def test_a_rater_twice_on_a_unit_is_refused():
    with pytest.raises(ValueError, match="more than once"):
        co_rated_pairs(["x", "x", "y"], ["A", "A", "B"])
    with pytest.raises(ValueError, match="more than once"):
        crowd_pairwise_kappa(pd.Series(["x", "x"], dtype="category"), ["A", "A"], ["s", "u"], labels=["s", "u"], min_shared=1)


@pytest.mark.parametrize(("n_raters", "n_ratings"), [(90, 2000), (600, 300)])  # pairs counted, and found by np.unique
def test_the_pair_counts_match_a_brute_count(n_raters, n_ratings):
    rng = np.random.default_rng(n_raters)
    ratings = pd.DataFrame({"u": rng.integers(0, 100, n_ratings), "r": rng.integers(0, n_raters, n_ratings)}).drop_duplicates()
    co = co_rated_pairs(ratings["u"].astype("category"), ratings["r"], min_shared=1)
    brute: dict = {}
    for raters in ratings.groupby("u")["r"].apply(sorted):
        for pair in itertools.combinations(raters, 2):
            brute[pair] = brute.get(pair, 0) + 1
    got = {(co["raters"][a], co["raters"][b]): int(n) for a, b, n in zip(co["a"], co["b"], co["n"], strict=True)}
    assert got == brute
    _same(co, _co_rated_by_unique(ratings["u"].astype("category"), ratings["r"], min_shared=1))
