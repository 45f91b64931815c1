"""The alt-test on categorical columns (issue 34: the report's frames) goes through integer codes; it gives the
result of the same data as plain values: random crowds, missing labels and verdicts, items nobody labelled, values
only the judge gives, a single label; duplicates and missing ids are refused alike."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibrate.stats import alt_test

LABELS = ["supported", "unsupported", "not_applicable"]


def _crowd(seed: int, single: bool = False):
    rng = np.random.default_rng(seed)
    items = [f"claim:{i}" for i in range(120)]
    rows = []
    for annotator in rng.permutation(["ann1", "ann2", "ann3", "ann4", "ann5"])[: 3 + seed % 3]:
        for item in rng.choice(items, 70, replace=False):
            value = "supported" if single else (None if rng.random() < 0.03 else str(rng.choice(LABELS, p=[0.5, 0.4, 0.1])))
            rows.append((item, annotator, value))
    human = pd.DataFrame(rows, columns=["item", "annotator", "value"])
    judged = list(rng.choice(items, 100, replace=False))
    judge = pd.DataFrame({"item": judged, "value": [None if rng.random() < 0.03 else
                                                    str(rng.choice(LABELS + ["odd"], p=[0.5, 0.3, 0.1, 0.1])) for _ in judged]})
    return human, judge


def _categorical(human: pd.DataFrame, judge: pd.DataFrame):
    keys = pd.CategoricalDtype(sorted({*human["item"], *judge["item"], "claim:999"}))
    human = human.assign(item=human["item"].astype(keys), annotator=human["annotator"].astype("category"),
                         value=human["value"].astype(pd.CategoricalDtype(sorted(LABELS + ["unused"]))))
    judge = judge.assign(item=judge["item"].astype(keys), value=judge["value"].astype("str"))
    judge.loc[judge["value"] == "None", "value"] = None
    return human, judge


def _run(human, judge, **kw):
    return alt_test(human["item"], human["annotator"], human["value"], judge["item"], judge["value"], **kw)


@pytest.mark.parametrize("seed", range(8))
def test_alt_test_on_categoricals_equals_the_plain_values(seed):
    human, judge = _crowd(seed, single=seed == 7)
    plain = alt_test(human["item"].to_numpy(), human["annotator"].to_numpy(), human["value"].to_numpy(),
                     judge["item"].to_numpy(), judge["value"].to_numpy(), min_items=10)
    coded = _run(*_categorical(human, judge), min_items=10)
    assert coded.to_dict() == plain.to_dict()
    assert [a.annotator for a in coded.annotators] == [a.annotator for a in plain.annotators]


def test_duplicates_and_missing_ids_are_refused_alike():
    human, judge = _crowd(1)
    twice = pd.concat([human, human.iloc[[4]]], ignore_index=True)
    for h, j in ((twice, judge), _categorical(twice, judge)):
        with pytest.raises(ValueError, match="more than once"):
            _run(h, j)
    for h, j in ((human, pd.concat([judge, judge.iloc[[0]]], ignore_index=True)),
                 _categorical(human, pd.concat([judge, judge.iloc[[0]]], ignore_index=True))):
        with pytest.raises(ValueError, match="more than one verdict"):
            _run(h, j)
    h, j = _categorical(human, judge)
    h.loc[0, "annotator"] = None
    with pytest.raises(ValueError, match="annotator ids"):
        _run(h, j)
    h, j = _categorical(human, judge)
    h.loc[0, "item"] = None
    with pytest.raises(ValueError, match="item ids"):
        _run(h, j)
