"""join_verdicts through the target key's codes (issue 34) against the former way, `_join_by_merge` below (pandas'
outer merge on the key, then each reason written into the text column in turn): the same frame, row order, dtypes and
missing values (None or NaN), on random gold and verdicts: keys on one side only, categories out of order or in
another order on the two sides, repeated keys, empty sides, few-shot targets, unparsed and order-miss verdicts,
abstentions, with and without `stat_labels`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibrate.calibration.sections import ORDER_MISS, join_verdicts

KEYS = [f"claim:{i}" for i in range(40)]


def _join_by_merge(gold, verdicts, fewshot, *, excluded_labels=frozenset(), stat_labels=None):
    merged = gold.copy()
    if verdicts is not None:
        merged = gold.merge(verdicts[["target_key", "sample_id", "value", "status"]].rename(columns={"value": "judge", "sample_id": "v_sample"}),
                            on="target_key", how="outer")
        merged["sample_id"] = merged["sample_id"].fillna(merged["v_sample"])
        merged = merged.drop(columns=["v_sample"])
    else:
        merged["judge"] = None
        merged["status"] = None
    merged["excluded"] = ""
    merged.loc[merged["target_key"].isin(fewshot), "excluded"] = "fewshot"
    has_verdict = merged["status"].notna()
    usable = has_verdict & merged["judge"].notna() & (merged["status"] == "ok")
    has_gold = merged["gold"].notna()
    open_ = merged["excluded"] == ""
    merged.loc[open_ & has_verdict & ~usable, "excluded"] = "unparsed"
    merged.loc[open_ & (merged["status"] == ORDER_MISS), "excluded"] = ORDER_MISS
    merged.loc[open_ & usable & ~has_gold, "excluded"] = "no_gold"
    if stat_labels is not None:
        merged.loc[open_ & usable & has_gold & ~merged["gold"].isin(stat_labels), "excluded"] = "excluded_label"
    elif excluded_labels:
        na = merged["gold"].isin(excluded_labels) | merged["judge"].isin(excluded_labels)
        merged.loc[open_ & usable & has_gold & na, "excluded"] = "excluded_label"
    merged["scored"] = (merged["excluded"] == "") & usable & has_gold
    merged["abstained"] = (merged["scored"] & ~merged["judge"].isin(stat_labels)) if stat_labels is not None else False
    return merged


def _frames(seed):
    rng = np.random.default_rng(seed)
    categories = sorted(KEYS) if seed % 2 else list(rng.permutation(KEYS))
    repeated = seed % 9 == 0
    n_gold, n_verdicts = (0, 5) if seed % 17 == 3 else (int(rng.integers(1, 30)), int(rng.integers(0, 30)))
    gold_keys = rng.choice(KEYS, n_gold, replace=repeated)
    verdict_keys = rng.choice(KEYS, n_verdicts, replace=repeated)
    gold = pd.DataFrame({"target_key": pd.Categorical(gold_keys, categories=categories),
                         "sample_id": rng.integers(0, 6, n_gold),
                         "gold": pd.Series(rng.choice(np.array(["s", "u", "n", None], dtype=object), n_gold), dtype=object),
                         "gold_source": pd.Series(rng.choice(["majority", "tie"], n_gold)).astype("str")})
    verdict_categories = categories if seed % 13 else sorted(KEYS, reverse=True)  # equal dtypes, other codes
    verdicts = pd.DataFrame({"target_key": pd.Categorical(verdict_keys, categories=verdict_categories),
                             "sample_id": rng.integers(0, 6, n_verdicts), "position": np.arange(n_verdicts),
                             "value": pd.Series(rng.choice(np.array(["s", "u", "n", "odd", None], dtype=object), n_verdicts)).astype("str"),
                             "status": pd.Series(rng.choice(["ok", "ok", "ok", "unparsed", ORDER_MISS], n_verdicts)).astype("str"),
                             "active": True})
    fewshot = set(rng.choice(KEYS, int(rng.integers(0, 6))).tolist())
    return gold, verdicts, fewshot


def _assert_same(got, want):
    assert list(got.columns) == list(want.columns)
    assert [str(d) for d in got.dtypes] == [str(d) for d in want.dtypes]
    assert got.index.equals(want.index) and type(got.index) is type(want.index)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    for column in got.columns:  # None and NaN told apart (the item rows and CSV print them)
        assert [repr(v) for v in got[column].tolist()] == [repr(v) for v in want[column].tolist()], column


@pytest.mark.parametrize("seed", range(80))
@pytest.mark.parametrize("labels", [{"stat_labels": ["s", "u"]}, {"excluded_labels": {"n"}}, {}])
def test_join_verdicts_is_the_merge_and_the_reasons_in_turn(seed, labels):
    gold, verdicts, fewshot = _frames(seed)
    for v in (verdicts, None):
        _assert_same(join_verdicts(gold, v, fewshot, **labels), _join_by_merge(gold, v, fewshot, **labels))


def test_join_verdicts_through_codes_keeps_the_merge_sorted_order_and_fills():
    categories = ["c", "a", "d", "b"]
    gold = pd.DataFrame({"target_key": pd.Categorical(["a", "b"], categories=categories), "sample_id": [1, 2],
                         "gold": pd.Series(["s", None], dtype=object), "gold_source": pd.Series(["majority"] * 2).astype("str")})
    verdicts = pd.DataFrame({"target_key": pd.Categorical(["d", "c", "a"], categories=categories), "sample_id": [3, 4, 1],
                             "position": 0, "value": pd.Series(["s", "u", "s"]).astype("str"),
                             "status": pd.Series(["ok"] * 3).astype("str"), "active": True})
    merged = join_verdicts(gold, verdicts, set(), stat_labels=["s", "u"])
    assert merged["target_key"].tolist() == ["c", "a", "d", "b"]  # by code, as pandas sorts an outer join's keys
    assert merged["sample_id"].tolist() == [4.0, 1.0, 3.0, 2.0] and merged["sample_id"].dtype == np.float64
    assert merged["excluded"].tolist() == ["no_gold", "", "no_gold", ""]
    assert merged["scored"].tolist() == [False, True, False, False]
    _assert_same(merged, _join_by_merge(gold, verdicts, set(), stat_labels=["s", "u"]))
