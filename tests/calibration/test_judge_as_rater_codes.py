"""The judge as one more rater through integer codes (issue 34) gives the figures of the former frame-by-frame way.

The former `judge_as_rater` (merges, `astype(str)`, text maps, a sorted index of keys) is kept below as the
reference; both run on random frames: categorical and plain columns, excluded labels, few-shot targets, inactive and
unusable verdicts, duplicate labels and verdicts, targets with one expert, a value outside the declared labels,
ordinal and continuous scores.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from calibrate import stats
from calibrate.calibration.raters import KEYS, judge_as_rater, level_of
from calibrate.calibration.sections import estimate_dict
from calibrate.reasons import Reason
from calibrate.stats import Estimate


def _old_counts(units: pd.Index, keys: pd.Series, codes: np.ndarray, k: int) -> np.ndarray:
    """Return a units × k matrix counting the values (codes) given to each unit (units in the given order)."""
    counts = np.zeros((len(units), k), dtype=np.int64)
    np.add.at(counts, (units.get_indexer(keys), codes), 1)
    return counts


def _reference(task: Any, labels: pd.DataFrame, verdicts: pd.DataFrame | None, fewshot: set[str]) -> dict[str, Any]:
    """Return {krippendorff_alpha_experts, krippendorff_alpha_with_judge} for a task section's `human` block."""
    level = level_of(task)
    excluded = set(task.excluded or [])

    def result(est: Estimate) -> dict:
        return {**estimate_dict(est, keep=("value", "n", "status", "note")), "level": level}

    current = labels[~labels["stale"] & ~labels["adjudicated"] & ~labels["value"].astype(str).isin(excluded)
                     & ~labels["target_key"].isin(fewshot)] if not labels.empty else labels
    if verdicts is None or verdicts.empty:
        usable = pd.DataFrame(columns=["target_key", "value"])
    else:
        usable = verdicts[(verdicts["status"] == "ok") & verdicts["value"].notna() & verdicts["active"].astype(bool)
                          & ~verdicts["value"].astype(str).isin(excluded)].drop_duplicates("target_key")
    if not current.empty:
        current = current.drop_duplicates(["target_key", "annotator"], keep="last")
        multi = current.groupby("target_key")["annotator"].transform("nunique") >= 2
        current = current[multi & current["target_key"].isin(usable["target_key"])]
    if current.empty:
        none = Estimate.no_data(Reason("no_two_annotators"))
        return {key: result(none) for key in KEYS}
    usable = usable[usable["target_key"].isin(current["target_key"])]
    if level == "nominal":
        declared = [lab for lab in (task.labels or []) if lab not in excluded]
        present = pd.unique(pd.concat([current["value"], usable["value"]]).astype(str))
        domain: list = declared + sorted(set(present) - set(declared))
        code = {value: i for i, value in enumerate(domain)}
        expert_codes = current["value"].astype(str).map(code).to_numpy(dtype=np.int64)
        judge_codes = usable["value"].astype(str).map(code).to_numpy(dtype=np.int64)
    else:
        expert_numbers = pd.to_numeric(current["value"], errors="coerce")
        judge_numbers = pd.to_numeric(usable["value"], errors="coerce")
        current, usable = current[expert_numbers.notna()], usable[judge_numbers.notna()]
        expert_numbers, judge_numbers = expert_numbers.dropna().to_numpy(float), judge_numbers.dropna().to_numpy(float)
        domain_array = np.unique(np.concatenate([expert_numbers, judge_numbers]))
        domain = domain_array.tolist()
        expert_codes = np.searchsorted(domain_array, expert_numbers)
        judge_codes = np.searchsorted(domain_array, judge_numbers)
    units = pd.Index(sorted(pd.unique(current["target_key"])))
    experts = _old_counts(units, current["target_key"], expert_codes, len(domain))
    with_judge = experts + _old_counts(units, usable["target_key"], judge_codes, len(domain))
    return {
        "krippendorff_alpha_experts": result(stats.krippendorff_alpha_counts(experts, level=level, values=domain)),
        "krippendorff_alpha_with_judge": result(stats.krippendorff_alpha_counts(with_judge, level=level, values=domain)),
    }


def _frames(seed: int, kind: str, categorical: bool):
    rng = np.random.default_rng(seed)
    keys = [f"claim:{i}" for i in range(80)]
    values = (["supported", "unsupported", "not_applicable", "odd"] if kind == "categorical" else
              ["1", "2", "3", "4", "5"] if kind == "ordinal" else ["0.1", "0.25", "0.5", "0.9"])
    rows = []
    for annotator in ("ann1", "ann2", "ann3"):
        for key in rng.choice(keys, 50, replace=False):
            for _ in range(1 + int(rng.random() < 0.05)):  # now and then a second label of the same target
                rows.append({"target_key": key, "annotator": annotator, "value": str(rng.choice(values)),
                             "adjudicated": bool(rng.random() < 0.05), "stale": bool(rng.random() < 0.05)})
    labels = pd.DataFrame(rows)
    verdict_keys = list(rng.choice(keys, 70, replace=True))
    verdicts = pd.DataFrame({"target_key": verdict_keys,
                             "value": [None if rng.random() < 0.05 else str(rng.choice(values)) for _ in verdict_keys],
                             "status": ["ok" if rng.random() < 0.9 else "parse_error" for _ in verdict_keys],
                             "active": [bool(rng.random() < 0.95) for _ in verdict_keys]})
    if categorical:
        dtype = pd.CategoricalDtype(sorted(keys))
        labels["target_key"] = labels["target_key"].astype(dtype)
        verdicts["target_key"] = verdicts["target_key"].astype(dtype)
        labels["annotator"] = labels["annotator"].astype("category")
        labels["value"] = labels["value"].astype(pd.CategoricalDtype(sorted(values + ["unused"])))
    return labels, verdicts


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("categorical", [True, False])
@pytest.mark.parametrize("kind", ["categorical", "ordinal", "continuous"])
def test_judge_as_rater_through_codes_equals_the_former_way(seed, categorical, kind):
    labels, verdicts = _frames(seed, kind, categorical)
    task = SimpleNamespace(kind=kind, labels=["supported", "unsupported", "not_applicable"] if kind == "categorical" else None,
                           excluded=["not_applicable"] if kind == "categorical" else None)
    fewshot = {"claim:3", "claim:17"} if seed % 2 else set()
    fast = judge_as_rater(task, labels, verdicts, fewshot)
    slow = _reference(task, labels, verdicts, fewshot)
    assert list(fast) == list(slow)
    for key in KEYS:
        assert {k: v for k, v in fast[key].items() if k != "value"} == {k: v for k, v in slow[key].items() if k != "value"}
        assert (fast[key]["value"] is None) == (slow[key]["value"] is None)
        if slow[key]["value"] is not None:
            assert fast[key]["value"] == pytest.approx(slow[key]["value"], abs=1e-12)


def test_no_verdicts_and_no_labels_say_why():
    labels, verdicts = _frames(0, "categorical", True)
    task = SimpleNamespace(kind="categorical", labels=["supported", "unsupported"], excluded=None)
    for args in ((labels, None), (labels, verdicts.iloc[0:0]), (labels.iloc[0:0], verdicts)):
        assert judge_as_rater(task, *args, set()) == _reference(task, *args, set())
