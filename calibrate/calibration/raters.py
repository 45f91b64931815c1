"""The judge as one more rater: Krippendorff's α of the experts, and of the experts with the judge.

The cheap complement to the Alternative Annotator Test (alttest.py): if adding the judge's
verdicts as one more coder leaves α where the experts alone put it, the judge disagrees with
them no more than they disagree with each other; if α drops, it disagrees more. Both figures
are computed on the same units, so they are like for like:

- units: the targets labelled by two or more experts (current labels: not stale, not the
  adjudications, not an excluded label such as `not_applicable`) on which the judge has a
  usable verdict (status ok, a value, its claim or context active, not an excluded label), few-shot
  examples of the judged version left out;
- the level of measurement is the task's: nominal for labels (categorical, pairwise), ordinal for
  an ordinal scale, interval for a continuous score;
- `krippendorff_alpha_experts`: the experts' labels on those units;
  `krippendorff_alpha_with_judge`: the same, with the judge's verdict as one more value per unit
  (a pairwise task's verdict is the one its order rule makes, as in the section).

Each is {value, n (pairable units), status, note, reason, level}; the formula is
`stats.krippendorff_alpha_counts` (docs/statistics.md §3).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from calibrate import stats
from calibrate.calibration.sections import estimate_dict
from calibrate.models import Task
from calibrate.reasons import Reason
from calibrate.stats import Estimate
from calibrate.task_values import has_labels

__all__ = ["judge_as_rater", "level_of"]

KEYS = ("krippendorff_alpha_experts", "krippendorff_alpha_with_judge")


def level_of(task: Task) -> str:
    """Return the task's level of measurement for Krippendorff's α."""
    if has_labels(task):
        return "nominal"
    return "ordinal" if task.kind == "ordinal" else "interval"


def _counts(units: pd.Index, keys: pd.Series, codes: np.ndarray, k: int) -> np.ndarray:
    """Return a units × k matrix counting the values (codes) given to each unit (units in the given order)."""
    counts = np.zeros((len(units), k), dtype=np.int64)
    np.add.at(counts, (units.get_indexer(keys), codes), 1)
    return counts


def judge_as_rater(task: Task, labels: pd.DataFrame, verdicts: pd.DataFrame | None, fewshot: set[str]) -> dict[str, Any]:
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
    experts = _counts(units, current["target_key"], expert_codes, len(domain))
    with_judge = experts + _counts(units, usable["target_key"], judge_codes, len(domain))
    return {
        "krippendorff_alpha_experts": result(stats.krippendorff_alpha_counts(experts, level=level, values=domain)),
        "krippendorff_alpha_with_judge": result(stats.krippendorff_alpha_counts(with_judge, level=level, values=domain)),
    }
