"""The human gold of a target: one rule, used by the report, `compare`, the dashboard and few-shots.

Per target, over its current labels (stale ones — their claim or context changed after
labelling — never count):

1. **Adjudicated**: if anyone adjudicated it, the most recent adjudication wins (latest
   `updated_at`; on equal times the later row). Several adjudicators may have decided the
   same target; the last decision is the one in force.
2. Else, **categorical tasks**: the majority of the annotators' labels; a tie between the
   most frequent labels gives no gold (`gold_source` "tie": the target is listed for
   adjudication).
3. Else, **ordinal and continuous tasks**: the mean of the annotators' values.

Frames in: one row per label with columns `target_key`, `sample_id`, `value`, `adjudicated`,
`stale`, `updated_at` and `label_id` (calibration/frames.py reads them). Frame out: one row per
target with `target_key`, `sample_id`, `gold` (None on a tie) and `gold_source`
("adjudicated" | "majority" | "tie" | "mean"). docs/statistics.md states the rule for users.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import select as sa_select
from sqlmodel import Session

from calibrate.db import read_frame
from calibrate.judged import task_kind
from calibrate.models import Label, Task
from calibrate.reasons import Reason
from calibrate.task_values import format_number

GOLD_RULE = ("the most recent adjudicated label, else the majority of annotators (ties: no gold), "
             "else for scores the mean of annotators")
GOLD_COLUMNS = ["target_key", "sample_id", "gold", "gold_source"]


def gold_frame(labels: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Return the gold of every labelled target of a task of this kind (categorical, ordinal, continuous)."""
    return categorical_gold(labels) if task_kind(kind).labels else numeric_gold(labels)


def latest_adjudications(current: pd.DataFrame) -> pd.DataFrame:
    """Return the adjudicated label in force per target: the most recent one (then the later row)."""
    adjudicated = current[current["adjudicated"]]
    if len(adjudicated) > 1:
        adjudicated = adjudicated.sort_values(["updated_at", "label_id"], kind="stable")
    return adjudicated.drop_duplicates("target_key", keep="last")


def categorical_gold(labels: pd.DataFrame) -> pd.DataFrame:
    """Return per target: gold value (or None on a tie), its source, and its sample."""
    if labels.empty:
        return pd.DataFrame(columns=GOLD_COLUMNS)
    current = labels[~labels["stale"]]
    adjudicated = latest_adjudications(current)
    votes = current[~current["adjudicated"]]
    if isinstance(votes["target_key"].dtype, pd.CategoricalDtype) and isinstance(votes["value"].dtype, pd.CategoricalDtype):
        majority, ties = _vote_codes(votes["target_key"], votes["value"])
    else:
        counts = votes.groupby(["target_key", "value"], sort=False).size().rename("votes").reset_index()
        top = counts.groupby("target_key")["votes"].transform("max")
        best = counts[counts["votes"] == top]
        n_best = best.groupby("target_key")["value"].transform("size")
        majority = best[n_best == 1][["target_key", "value"]].rename(columns={"value": "gold"})
        ties = best[n_best > 1].drop_duplicates("target_key")[["target_key"]]
    majority["gold_source"] = "majority"
    ties = ties.assign(gold=None, gold_source="tie")
    adj = adjudicated[["target_key", "value"]].rename(columns={"value": "gold"}).assign(gold_source="adjudicated")
    out = pd.concat([adj, majority[~majority["target_key"].isin(adj["target_key"])],
                     ties[~ties["target_key"].isin(adj["target_key"])]], ignore_index=True)
    out["sample_id"] = _sample_of(out["target_key"], current.drop_duplicates("target_key"))
    return out[GOLD_COLUMNS]


def _vote_codes(keys: pd.Series, values: pd.Series) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return the majority rows (target_key, gold) and the tie rows (target_key) of categorical votes, through their
    codes: the frames the grouping by (target, value) gives, in its order (each (target, value) pair where it first
    appears), from one factorization of the pairs' integer codes and a few bincounts."""
    target, value = keys.cat.codes.to_numpy().astype(np.int64), values.cat.codes.to_numpy().astype(np.int64)
    present = (target >= 0) & (value >= 0)  # a missing key or value is no vote (the grouping drops it)
    k = max(len(values.cat.categories), 1)
    pairs, distinct = pd.factorize((target * k + value)[present])  # distinct pairs in order of first appearance
    n_votes = np.bincount(pairs, minlength=len(distinct))
    pair_target, pair_value = distinct // k, distinct % k
    top = np.zeros(len(keys.cat.categories), dtype=np.int64)
    np.maximum.at(top, pair_target, n_votes)
    best = n_votes == top[pair_target]
    n_best = np.bincount(pair_target[best], minlength=len(top))
    won = best & (n_best[pair_target] == 1)
    tied = np.flatnonzero(best & (n_best[pair_target] > 1))
    tied = tied[~pd.Series(pair_target[tied]).duplicated().to_numpy()]  # a tied target once, at its first best pair
    majority = pd.DataFrame({"target_key": pd.Categorical.from_codes(pair_target[won], dtype=keys.dtype),
                             "gold": pd.Categorical.from_codes(pair_value[won], dtype=values.dtype)})
    ties = pd.DataFrame({"target_key": pd.Categorical.from_codes(pair_target[tied], dtype=keys.dtype)})
    return majority, ties


def _sample_of(keys: pd.Series, first: pd.DataFrame) -> pd.Series:
    """Return the sample of each target key, from one row per target (`first`); through the integer codes when both are
    one categorical (the report's 10^6 targets: mapping their text through an index costs seconds)."""
    key = first["target_key"]
    if (isinstance(keys.dtype, pd.CategoricalDtype) and isinstance(key.dtype, pd.CategoricalDtype) and len(first)
            and (keys.cat.categories is key.cat.categories or keys.cat.categories.equals(key.cat.categories))):
        # (not `keys.dtype == key.dtype`: that hashes 10^6 categories twice)
        samples = np.zeros(len(key.cat.categories), dtype=np.int64)
        samples[key.cat.codes.to_numpy()] = first["sample_id"].to_numpy(dtype=np.int64)
        return pd.Series(samples[keys.cat.codes.to_numpy()], index=keys.index)
    return keys.map(first.set_index("target_key")["sample_id"])


def numeric_gold(labels: pd.DataFrame) -> pd.DataFrame:
    """Return per target: the adjudicated value, else the mean of the annotators' values."""
    if labels.empty:
        return pd.DataFrame(columns=GOLD_COLUMNS)
    current = labels[~labels["stale"]].copy()
    current["number"] = current["value"].astype(float)
    adjudicated = latest_adjudications(current)
    votes = current[~current["adjudicated"]]
    mean = votes.groupby("target_key", sort=False).agg(gold=("number", "mean"), sample_id=("sample_id", "first")).reset_index()
    mean["gold_source"] = "mean"
    adj = adjudicated[["target_key", "number", "sample_id"]].rename(columns={"number": "gold"}).assign(gold_source="adjudicated")
    return pd.concat([adj, mean[~mean["target_key"].isin(adj["target_key"])]], ignore_index=True)[GOLD_COLUMNS]


def human_gold(session: Session, task: Task, key: str) -> tuple[str | None, str | Reason]:
    """Return (gold value, rationale) of one target by the rule above, or (None, why not: a Reason).

    The value of a few-shot example and of a disagreement's gold. The rationale is the
    adjudicator's when adjudicated, else the most recently updated one of a label with the gold
    value.
    """
    query = (sa_select(Label.target_key, Label.sample_id, Label.value, Label.adjudicated, Label.stale, Label.updated_at,
                       Label.id, Label.rationale)
             .where(Label.task_id == task.id, Label.target_key == key, Label.stale.is_(False)))
    labels = read_frame(session, query, ["target_key", "sample_id", "value", "adjudicated", "stale", "updated_at", "label_id",
                                         "rationale"]).astype({"adjudicated": bool, "stale": bool})
    labels["rationale"] = labels["rationale"].fillna("")
    if labels.empty:
        return None, Reason("gold_nobody_labelled")
    found = gold_frame(labels, task.kind).iloc[0]
    if found["gold_source"] == "tie":
        winners = sorted(labels.loc[~labels["adjudicated"], "value"].value_counts().loc[lambda c: c == c.max()].index)
        return None, Reason("gold_disagree", values=", ".join(winners))
    if found["gold_source"] == "adjudicated":
        decision = latest_adjudications(labels).iloc[0]
        return decision["value"], decision["rationale"] or ""
    value = found["gold"] if task_kind(task.kind).labels else format_number(float(found["gold"]))
    votes = labels[~labels["adjudicated"] & (labels["value"] == value) & (labels["rationale"] != "")]
    votes = votes.sort_values(["updated_at", "label_id"], ascending=[False, True], kind="stable")
    return value, (votes["rationale"].iloc[0] if len(votes) else "")
