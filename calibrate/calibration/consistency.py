"""Self-consistency of a judge run with `--samples K`: the report's `self_consistency` block of a task section.

A run with `calibrate judge run --samples K` stores K verdicts per target (`Verdict.sample_index`
0..K-1; sample 0 is the target's verdict in every other figure). This module reads all K and
computes, with `stats.self_consistency` (docs/statistics.md §17):

- `k`: the most samples any target has; `n_targets`: targets with at least one usable sample;
- `flip_rate`: the share of targets with two or more usable samples whose samples are not all equal
  (Wilson interval);
- `fleiss_kappa`: Fleiss' κ among the K runs (the runs as raters);
- `kappa_single`: Cohen's κ of sample 0 against the gold; `kappa_majority`: of the majority of the K
  samples against the gold. A tie between the most frequent verdicts goes to the one that came first
  in sample order (with K = 2 a disagreement keeps sample 0's verdict); `n_ties` counts them.

A sample is usable as everywhere else: status ok, a value, its claim or context active, not an
excluded label (`not_applicable`); an unusable sample is a missing run. Few-shot examples of the
version are left out; the gold is gold.py's (a tie has none: the target then counts for the flip
rate and Fleiss' κ, not for the two κ against gold). Tasks with labels (categorical) and ordinal
scales (each scale point a category) get the block when some target has a sample other than 0;
continuous and pairwise tasks do not.
"""

from __future__ import annotations

import pandas as pd
from sqlalchemy import select as sa_select
from sqlmodel import Session

from calibrate import stats
from calibrate.calibration.frames import active_column, join_target
from calibrate.db import read_frame
from calibrate.gold import gold_frame
from calibrate.models import Dataset, Judge, Sample, Task, Verdict

__all__ = ["self_consistency_block"]

KINDS = ("categorical", "ordinal")


def _samples_frame(session: Session, dataset: Dataset, task: Task, judge: Judge) -> pd.DataFrame:
    query = (sa_select(Verdict.target_key, Verdict.sample_id, Verdict.sample_index, Verdict.value, Verdict.status,
                       active_column(task))
             .join(Sample, Sample.id == Verdict.sample_id)
             .where(Sample.dataset_id == dataset.id, Verdict.task_id == task.id, Verdict.judge_id == judge.id))
    frame = read_frame(session, join_target(query, task, Verdict),
                       ["target_key", "sample_id", "sample_index", "value", "status", "active"])
    frame["active"] = frame["active"].fillna(True).astype(bool)
    return frame


def self_consistency_block(session: Session, dataset: Dataset, task: Task, judge: Judge, labels: pd.DataFrame,
                           fewshot: set[str], in_split: set[int] | None = None, *, alpha: float = 0.05) -> dict | None:
    """Return the task's `self_consistency` block, or None when the judge has one sample per target (or the kind has none)."""
    if task.kind not in KINDS:
        return None
    # One cheap query first: a run without --samples (every report's case) reads no verdict a second time.
    if session.execute(sa_select(Verdict.id).where(Verdict.judge_id == judge.id, Verdict.task_id == task.id,
                                                   Verdict.sample_index > 0).limit(1)).first() is None:
        return None
    frame = _samples_frame(session, dataset, task, judge)
    if frame.empty or int(frame["sample_index"].max()) == 0:  # the other samples are in another dataset
        return None
    if in_split is not None:
        frame = frame[frame["sample_id"].isin(in_split)]
    frame = frame[frame["active"] & ~frame["target_key"].isin(fewshot)]
    excluded = set(task.excluded or [])
    usable = (frame["status"] == "ok") & frame["value"].notna() & ~frame["value"].astype(str).isin(excluded)
    frame = frame.assign(value=frame["value"].where(usable, None))
    wide = frame.drop_duplicates(["target_key", "sample_index"]).pivot(index="target_key", columns="sample_index", values="value")
    wide = wide.sort_index().reindex(columns=sorted(frame["sample_index"].unique()))

    def value(v: object) -> str | None:
        if v is None or pd.isna(v):
            return None
        return str(int(float(v))) if task.kind == "ordinal" else str(v)

    runs = [[value(v) for v in row] for row in wide.itertuples(index=False)]
    gold = gold_frame(labels, task.kind) if not labels.empty else pd.DataFrame(columns=["target_key", "gold"])
    if task.kind == "ordinal" and not gold.empty:  # the mean of an even number of scores may fall between points
        gold = gold.assign(gold=gold["gold"].map(lambda g: None if pd.isna(g) or float(g) != int(float(g)) else str(int(float(g)))))
    by_key = gold.drop_duplicates("target_key").set_index("target_key")["gold"]
    gold_values = [None if pd.isna(g) or str(g) in excluded else str(g) for g in by_key.reindex(wide.index)]
    if task.kind == "ordinal":
        values = {v for row in runs for v in row if v is not None} | {g for g in gold_values if g is not None}
        domain = sorted(values, key=float)
    else:
        domain = [lab for lab in (task.labels or []) if lab not in excluded]
    result = stats.self_consistency(runs, gold=gold_values, labels=domain or None, alpha=alpha)
    return result.to_dict()
