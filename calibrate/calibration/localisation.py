"""A step task's `localisation` block: does the judge find where a trajectory first goes wrong? (docs/report.md)

The block compares, per trajectory (sample), the first step the gold marks with the task's
negative label and the first step the judge's usable verdicts mark with it
(stats/localisation.py). The gold is the section's (calibration/sections.py: adjudicated, else
majority); a few-shot example's step is left out, as from every other figure. The negative label
is `incorrect` (step_correctness's; task_values.negative_label); a step task without it gets no block.
"""

from __future__ import annotations

import pandas as pd

from calibrate.calibration.options import Options
from calibrate.models import Task
from calibrate.stats.localisation import first_marked, localisation
from calibrate.task_values import negative_label


def localisation_block(task: Task, merged: pd.DataFrame, positions: dict[str, int], options: Options) -> dict | None:
    """Return the section's `localisation` block from its merged per-target frame (gold, judge, status, excluded) and
    the steps' indices (target key → index); None when the task has no negative label."""
    negative = negative_label(task)
    if negative is None:
        return None
    rows = merged[(merged["excluded"] != "fewshot") & merged["target_key"].isin(positions)]
    gold = rows[rows["gold"].notna()]
    judged = rows[rows["judge"].notna() & (rows["status"] == "ok")]
    gold_first = first_marked(zip(gold["sample_id"].astype(int), gold["target_key"].map(positions), gold["gold"],
                                  strict=True), negative)
    judge_first = first_marked(zip(judged["sample_id"].astype(int), judged["target_key"].map(positions), judged["judge"],
                                   strict=True), negative)
    return {"negative": negative, **localisation(gold_first, judge_first, confidence=options.confidence)}
