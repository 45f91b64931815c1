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
from calibrate.stats.agreement import shared_codes
from calibrate.task_values import has_labels

__all__ = ["judge_as_rater", "level_of"]

KEYS = ("krippendorff_alpha_experts", "krippendorff_alpha_with_judge")


def level_of(task: Task) -> str:
    """Return the task's level of measurement for Krippendorff's α."""
    if has_labels(task):
        return "nominal"
    return "ordinal" if task.kind == "ordinal" else "interval"


def _text_in(values: pd.Series, texts: set[str]) -> np.ndarray:
    """Return whether each value's text is one of `texts` (`values.astype(str).isin(texts)`), a categorical through
    its categories."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        per_category = np.append(values.cat.categories.astype(str).isin(texts), "nan" in texts)
        return per_category[values.cat.codes.to_numpy()]
    return values.astype(str).isin(texts).to_numpy() if texts else np.zeros(len(values), dtype=bool)


def _text_codes(values: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Return each value's code among the distinct texts of `values.astype(str)`, and those texts (a categorical
    through its codes: its rows are never turned into text)."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        raw, uniques = values.cat.codes.to_numpy(), values.cat.categories
    else:
        raw, uniques = pd.factorize(values.to_numpy(dtype=object))
    used, codes = np.unique(raw, return_inverse=True)
    texts = pd.Index([str(uniques[u]) if u >= 0 else "nan" for u in used.tolist()], dtype=object)
    of_used, distinct = pd.factorize(texts)  # two values with one text (1 and "1") are one text
    return of_used[codes.reshape(-1)], [str(t) for t in distinct]


def judge_as_rater(task: Task, labels: pd.DataFrame, verdicts: pd.DataFrame | None, fewshot: set[str]) -> dict[str, Any]:
    """Return {krippendorff_alpha_experts, krippendorff_alpha_with_judge} for a task section's `human` block.

    Through integer codes: the targets' codes (shared by labels and verdicts: `shared_codes`), each expert and the
    judge counted per unit with one `np.bincount`; units in the targets' sorted order."""
    level = level_of(task)
    excluded = set(task.excluded or [])

    def result(est: Estimate) -> dict:
        return {**estimate_dict(est, keep=("value", "n", "status", "note")), "level": level}

    none = {key: result(Estimate.no_data(Reason("no_two_annotators"))) for key in KEYS}
    if labels.empty:
        return none
    if verdicts is None or verdicts.empty:
        verdicts = pd.DataFrame({"target_key": pd.Series([], dtype=labels["target_key"].dtype), "value": [], "status": [],
                                 "active": []})
    label_keys, verdict_keys, n_keys = shared_codes(labels["target_key"], verdicts["target_key"], sort=True)
    keep = ~labels["stale"].to_numpy(bool) & ~labels["adjudicated"].to_numpy(bool) & ~_text_in(labels["value"], excluded)
    keep &= label_keys >= 0
    if fewshot:
        keep &= ~labels["target_key"].isin(fewshot).to_numpy()
    usable = ((verdicts["status"] == "ok").to_numpy() & verdicts["value"].notna().to_numpy()
              & verdicts["active"].astype(bool).to_numpy() & ~_text_in(verdicts["value"], excluded) & (verdict_keys >= 0))
    usable_rows = np.flatnonzero(usable)
    usable_rows = usable_rows[~pd.Series(verdict_keys[usable_rows]).duplicated().to_numpy()]  # the first per target
    rows = np.flatnonzero(keep)
    annotators, _ = pd.factorize(labels["annotator"].iloc[rows])
    pair = label_keys[rows] * (int(annotators.max()) + 2 if len(rows) else 1) + annotators + 1
    rows = rows[~pd.Series(pair).duplicated(keep="last").to_numpy()]  # one label per target and annotator: the last
    raters = np.bincount(label_keys[rows], minlength=n_keys)  # annotators per target
    judged = np.zeros(n_keys, dtype=bool)
    judged[verdict_keys[usable_rows]] = True
    rows = rows[(raters[label_keys[rows]] >= 2) & judged[label_keys[rows]]]
    if not len(rows):
        return none
    in_units = np.bincount(label_keys[rows], minlength=n_keys) > 0
    usable_rows = usable_rows[in_units[verdict_keys[usable_rows]]]
    current, usable_frame = labels.iloc[rows], verdicts.iloc[usable_rows]
    if level == "nominal":
        declared = [lab for lab in (task.labels or []) if lab not in excluded]
        expert_text, expert_texts = _text_codes(current["value"])
        judge_text, judge_texts = _text_codes(usable_frame["value"])
        domain: list = declared + sorted(set(expert_texts + judge_texts) - set(declared))
        code = pd.Index(domain, dtype=object)
        expert_codes = code.get_indexer(pd.Index(expert_texts, dtype=object))[expert_text] if len(expert_text) else expert_text
        judge_codes = code.get_indexer(pd.Index(judge_texts, dtype=object))[judge_text] if len(judge_text) else judge_text
        expert_keys, judge_keys = label_keys[rows], verdict_keys[usable_rows]
    else:
        expert_numbers = pd.to_numeric(current["value"], errors="coerce")
        judge_numbers = pd.to_numeric(usable_frame["value"], errors="coerce")
        expert_keys = label_keys[rows][expert_numbers.notna().to_numpy()]
        judge_keys = verdict_keys[usable_rows][judge_numbers.notna().to_numpy()]
        expert_numbers, judge_numbers = expert_numbers.dropna().to_numpy(float), judge_numbers.dropna().to_numpy(float)
        domain_array = np.unique(np.concatenate([expert_numbers, judge_numbers]))
        domain = domain_array.tolist()
        expert_codes = np.searchsorted(domain_array, expert_numbers)
        judge_codes = np.searchsorted(domain_array, judge_numbers)
    units = np.flatnonzero(np.bincount(expert_keys, minlength=n_keys))  # the targets' sorted order
    unit_of = np.full(n_keys, -1, dtype=np.int64)
    unit_of[units] = np.arange(len(units))
    k = len(domain)
    experts = np.bincount(unit_of[expert_keys] * k + expert_codes, minlength=len(units) * k).reshape(len(units), k)
    judge_in = unit_of[judge_keys] >= 0
    judge = np.bincount(unit_of[judge_keys][judge_in] * k + judge_codes[judge_in], minlength=len(units) * k)
    with_judge = experts + judge.reshape(len(units), k)
    return {
        "krippendorff_alpha_experts": result(stats.krippendorff_alpha_counts(experts, level=level, values=domain)),
        "krippendorff_alpha_with_judge": result(stats.krippendorff_alpha_counts(with_judge, level=level, values=domain)),
    }
