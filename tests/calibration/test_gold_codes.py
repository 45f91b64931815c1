"""The majority gold of categorical frames through integer codes (issue 34) is the gold of the grouping by text.

`categorical_gold` takes the codes' way when the target keys and values are pandas categoricals (the report's
frames) and the grouping's way otherwise; both give the same frame, row for row: majorities, ties, adjudications,
stale labels, missing values, categories nobody used, a single label, no votes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibrate.gold import GOLD_COLUMNS, categorical_gold

VALUES = ["supported", "unsupported", "not_applicable"]


def _labels(seed: int, *, single: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for t in rng.permutation(40):
        for annotator in rng.choice(["ann1", "ann2", "ann3", "ann4"], int(rng.integers(1, 5)), replace=False):
            value = "supported" if single else (None if rng.random() < 0.03 else str(rng.choice(VALUES)))
            rows.append({"target_key": f"claim:{t}", "sample_id": int(t) // 4, "annotator": annotator, "value": value,
                         "adjudicated": bool(rng.random() < 0.05), "stale": bool(rng.random() < 0.1),
                         "updated_at": int(rng.integers(0, 5)), "label_id": len(rows)})
    return pd.DataFrame(rows)


def _categorical(labels: pd.DataFrame) -> pd.DataFrame:
    keys = pd.CategoricalDtype(sorted({*labels["target_key"], "claim:999"}))  # a target nobody labelled
    return labels.assign(target_key=labels["target_key"].astype(keys),
                         value=labels["value"].astype(pd.CategoricalDtype(sorted(VALUES + ["unused"]))))


def _plain(gold: pd.DataFrame) -> pd.DataFrame:
    out = gold[GOLD_COLUMNS].astype({"target_key": object, "gold": object, "gold_source": object})
    out["gold"] = [None if pd.isna(v) else v for v in out["gold"]]
    return out.reset_index(drop=True)


@pytest.mark.parametrize("seed", range(10))
def test_gold_through_codes_equals_the_grouping_by_text(seed):
    labels = _labels(seed, single=seed == 9)
    by_text = categorical_gold(labels)
    by_codes = categorical_gold(_categorical(labels))
    assert (by_text["gold_source"] == "tie").any() or seed == 9
    pd.testing.assert_frame_equal(_plain(by_codes), _plain(by_text), check_dtype=False)
    assert isinstance(by_codes["target_key"].dtype, pd.CategoricalDtype)


def test_gold_of_no_votes_and_only_adjudications():
    labels = _labels(1)
    adjudicated = labels.assign(adjudicated=True)
    pd.testing.assert_frame_equal(_plain(categorical_gold(_categorical(adjudicated))), _plain(categorical_gold(adjudicated)),
                                  check_dtype=False)
    stale = labels.assign(stale=True)
    assert categorical_gold(_categorical(stale)).empty and categorical_gold(stale).empty
