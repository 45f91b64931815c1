"""The categorical section through integer codes (issue 34) gives the numbers of the list functions it replaced.

`judge_label_codes` against `judge_codes`; the per-annotator rows through codes against the rows joined as lists
(`_annotator_row_lists`, the former way), on random frames: categorical and plain columns, labels never used,
abstentions, an annotator who shares no judged target, a single label, excluded labels, few-shot targets.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibrate.calibration.sections import (
    ABSTAINED,
    _annotator_row_lists,
    _multi_rated,
    _part_kappa,
    _per_annotator_categorical,
    judge_codes,
    judge_label_codes,
)

LABELS = ["supported", "unsupported", "not_applicable"]
STAT = ["supported", "unsupported"]


def _frames(seed: int, categorical: bool, single: bool = False):
    rng = np.random.default_rng(seed)
    keys = [f"claim:{i}" for i in range(60)]
    rows = []
    for annotator in ("ann1", "ann2", "ann3"):
        for key in rng.choice(keys, 40 if annotator != "ann3" else 5, replace=False):
            value = "supported" if single else str(rng.choice(LABELS, p=[0.5, 0.4, 0.1]))
            rows.append({"target_key": key, "sample_id": int(key.split(":")[1]) // 5, "annotator": annotator, "value": value,
                         "adjudicated": bool(rng.random() < 0.05), "stale": bool(rng.random() < 0.05)})
    labels = pd.DataFrame(rows)
    judged_keys = [k for k in keys[:45]]  # ann3's targets may be judged or not
    merged = pd.DataFrame({"target_key": judged_keys,
                           "judge": ["supported" if single else str(rng.choice(LABELS + ["odd"], p=[0.5, 0.35, 0.1, 0.05]))
                                     for _ in judged_keys],
                           "status": ["ok" if rng.random() < 0.9 else "parse_error" for _ in judged_keys],
                           "excluded": ["fewshot" if rng.random() < 0.05 else "" for _ in judged_keys]})
    if categorical:
        dtype = pd.CategoricalDtype(sorted(keys))
        labels["target_key"] = labels["target_key"].astype(dtype)
        merged["target_key"] = merged["target_key"].astype(dtype)
        labels["annotator"] = labels["annotator"].astype("category")
        labels["value"] = labels["value"].astype(pd.CategoricalDtype(sorted(LABELS + ["unused"])))
    return labels, merged


def _by_lists(labels, merged):
    judged = merged[(merged["status"] == "ok") & merged["judge"].notna() & (merged["excluded"] != "fewshot")]
    current = labels[~labels["stale"] & ~labels["adjudicated"] & ~labels["value"].isin({"not_applicable"})]
    return [_annotator_row_lists(a, g, judged, STAT) for a, g in current.groupby("annotator")]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("categorical", [True, False])
def test_per_annotator_rows_through_codes_equal_the_joined_lists(seed, categorical):
    labels, merged = _frames(seed, categorical, single=seed == 5)
    fast = _per_annotator_categorical(labels, merged, STAT, {"not_applicable"})
    slow = _by_lists(labels, merged)
    assert [r["annotator"] for r in fast] == ["ann1", "ann2", "ann3"]
    assert fast == slow


def test_per_annotator_without_judged_targets_and_without_labels():
    labels, merged = _frames(0, True)
    rows = _per_annotator_categorical(labels, merged.iloc[0:0], STAT, {"not_applicable"})
    assert all(r["n"] == 0 and r["percent_agreement"] is None and r["cohen_kappa"]["status"] == "no_data" for r in rows)
    assert _per_annotator_categorical(labels.iloc[0:0], merged, STAT, {"not_applicable"}) == []


def test_a_label_outside_the_labels_goes_the_lists_way():
    labels, merged = _frames(1, False)
    labels = labels.assign(stale=False, adjudicated=False)
    ok = merged.loc[(merged["status"] == "ok") & (merged["excluded"] == ""), "target_key"]
    labels.loc[labels.index[labels["target_key"].isin(ok)][:3], "value"] = "maybe"  # not a label: κ refuses it, as before
    with pytest.raises(ValueError, match="maybe"):
        _by_lists(labels, merged)
    with pytest.raises(ValueError, match="maybe"):
        _per_annotator_categorical(labels, merged, STAT, {"not_applicable"})


@pytest.mark.parametrize("categorical", [True, False])
def test_judge_label_codes_are_judge_codes(categorical):
    gold = pd.Series(["supported", "unsupported", "supported", "unsupported"])
    judge = pd.Series(["supported", "not_applicable", "unsupported", "unsupported"])
    if categorical:
        gold, judge = gold.astype("category"), judge.astype("category")
    g, j, used = judge_label_codes(gold, judge, STAT)
    mapped, used_lists = judge_codes(judge.tolist(), STAT)
    assert used == used_lists == [*STAT, ABSTAINED]
    assert [used[c] for c in j] == mapped and [used[c] for c in g] == gold.tolist()
    g, j, used = judge_label_codes(gold, gold, STAT)
    assert used == STAT and j.tolist() == g.tolist()
    empty = pd.Series([], dtype=object)
    assert [len(x) for x in judge_label_codes(empty, empty, STAT)] == [0, 0, 2]
    with pytest.raises(ValueError):
        judge_label_codes(pd.Series(["maybe"]), pd.Series(["supported"]), STAT)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("categorical", [True, False])
def test_multi_rated_targets_are_the_groupings_nunique(seed, categorical):
    labels, _ = _frames(seed, categorical)
    labels = pd.concat([labels, labels.iloc[:7]], ignore_index=True)  # an annotator's second label of a target
    multi = labels.groupby("target_key", observed=True)["annotator"].transform("nunique") >= 2
    shared, n = _multi_rated(labels)
    pd.testing.assert_frame_equal(shared, labels[multi])
    assert n == labels[multi]["target_key"].nunique()
    empty, none = _multi_rated(labels.iloc[0:0])
    assert empty.empty and none == 0


@pytest.mark.parametrize("seed", range(6))
def test_a_groups_kappa_from_codes_is_cohen_kappa(seed):
    from calibrate import stats

    rng = np.random.default_rng(seed)
    used = [*STAT, ABSTAINED]
    n = int(rng.integers(0, 30))
    part = pd.DataFrame({"gold": rng.choice(STAT[: 1 + seed % 2], n), "judge": rng.choice(used, n).astype(object)})
    assert _part_kappa(part, used).to_dict() == stats.cohen_kappa(part["gold"].tolist(), part["judge"].tolist(),
                                                                 labels=used).to_dict()
    with pytest.raises(ValueError):
        _part_kappa(pd.DataFrame({"gold": ["maybe"], "judge": ["supported"]}), used)
