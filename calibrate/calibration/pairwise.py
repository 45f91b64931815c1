"""Pairwise tasks in the report: a judge's verdicts in two orders → one per target, and the position block.

A pairwise judge may have one verdict per presentation order on a target (`Verdict.order_key`:
the order as import positions). The *original* order shows the responses in import order
(also a verdict recorded without order), the *swapped* order in reverse; other permutations
(possible with three or more responses, in imported verdicts) are kept but not used here.

**The order rule** (`Options.order_rule`, `--order-rule`) makes one verdict per target, which
the categorical statistics (`sections.categorical_section`) then score like any other:

- `consistent` (the default): the verdict when both orders give it; a conflict is `tie` when
  the task has a tie label, else a miss (Zheng et al. 2023's conservative rule,
  `stats.consistent_verdicts`); a target with one order only, or an unusable verdict in one
  order, has no verdict under this rule either;
- `original`: the original order's verdict alone.

A judge with verdicts in one order only is scored on that order under either rule. Targets the
rule leaves without a verdict are counted (`n_unparsed` when an order's verdict is unusable,
`n_order_miss` for a conflict without tie or a missing order), never scored.

**The position block** (`tasks.<t>.position`) is `stats.position_bias` over the targets with
exactly two responses (with more, a verdict may pick neither of the two responses shown first
in the two orders, which the statistic does not define), and the judge's alignment with the
gold in each order; plus the annotators' own first-position rate, from the order each saw.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import select as sa_select
from sqlmodel import Session

from calibrate import stats
from calibrate.calibration.options import Options
from calibrate.calibration.sections import ORDER_MISS, categorical_section
from calibrate.db import read_frame
from calibrate.models import TIE, Dataset, Label, Response, Sample, Task

ORDER_RULES = ("consistent", "original")
ORIGINAL, SWAPPED, OTHER = "original", "swapped", "other"


def order_kinds(order_keys: pd.Series) -> pd.Series:
    """Return per verdict "original", "swapped" or "other" from its order key ("0,1", "1,0", ""…)."""
    kinds: dict[str, str] = {}
    for key in pd.unique(order_keys):
        positions = [int(p) for p in key.split(",")] if key else []
        if not positions or positions == sorted(positions):
            kinds[key] = ORIGINAL
        elif positions == sorted(positions, reverse=True):
            kinds[key] = SWAPPED
        else:
            kinds[key] = OTHER
    return order_keys.map(kinds)


def _usable(frame: pd.DataFrame) -> pd.Series:
    return (frame["status"] == "ok") & frame["value"].notna()


def _by_order(verdicts: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Return the verdicts of the original and of the swapped order (one row per target each), present ones only."""
    kinds = order_kinds(verdicts["order_key"].fillna(""))
    out = {}
    for kind in (ORIGINAL, SWAPPED):
        part = verdicts[kinds == kind]
        if len(part):
            out[kind] = part.drop_duplicates("target_key", keep="last").drop(columns=["order_key"]).reset_index(drop=True)
    return out


def apply_order_rule(task: Task, verdicts: pd.DataFrame, rule: str) -> tuple[pd.DataFrame, list[str]]:
    """Return one verdict per target by the order rule (the columns of `verdicts` minus order_key), and the orders the judge has."""
    if rule not in ORDER_RULES:
        raise ValueError(f"order_rule must be one of {', '.join(ORDER_RULES)}, got {rule!r}")
    orders = _by_order(verdicts)
    if not orders:
        return verdicts.iloc[0:0].drop(columns=["order_key"]), []
    if len(orders) == 1 or rule == ORIGINAL:  # one order: it decides under either rule
        kind = next(iter(orders)) if len(orders) == 1 else ORIGINAL
        return orders[kind], list(orders)
    original, swapped = orders[ORIGINAL], orders[SWAPPED]
    both = original.merge(swapped[["target_key", "sample_id", "value", "status"]], on="target_key", how="outer",
                          suffixes=("", "_s"))
    both["sample_id"] = both["sample_id"].fillna(both["sample_id_s"])
    use_o = (both["status"] == "ok") & both["value"].notna()
    use_s = (both["status_s"] == "ok") & both["value_s"].notna()
    conflict = "tie" if TIE in (task.labels or []) else "miss"
    values = stats.consistent_verdicts(both["value"].where(use_o, None).tolist(), both["value_s"].where(use_s, None).tolist(),
                                       tie=TIE, on_conflict=conflict)
    both["value"] = values
    unusable = (both["status"].notna() & ~use_o) | (both["status_s"].notna() & ~use_s)
    both["status"] = np.where(both["value"].notna(), "ok", np.where(unusable, "unparsed", ORDER_MISS))
    if "active" in both:
        both["active"] = both["active"].fillna(True).astype(bool)
    columns = [c for c in verdicts.columns if c != "order_key"]
    return both[columns].reset_index(drop=True), [ORIGINAL, SWAPPED]


def responses_frame(session: Session, dataset: Dataset) -> pd.DataFrame:
    """Return the responses of the dataset's samples: sample_id, position, key (in position order)."""
    query = (sa_select(Response.sample_id, Response.position, Response.key)
             .join(Sample, Sample.id == Response.sample_id).where(Sample.dataset_id == dataset.id))
    return read_frame(session, query, ["sample_id", "position", "key"]).sort_values(["sample_id", "position"], kind="stable")


def _first_shown(responses: pd.DataFrame) -> pd.DataFrame:
    """Return, per sample with exactly two responses, the id shown first in the original and in the swapped order."""
    counts = responses.groupby("sample_id")["key"].transform("size")
    two = responses[counts == 2]
    first = two.groupby("sample_id", sort=False)["key"].agg(["first", "last"])
    return first.rename(columns={"first": "first_original", "last": "first_swapped"})


def _alignment(task: Task, labels: pd.DataFrame, verdicts: pd.DataFrame, gold: pd.DataFrame, fewshot: set[str],
               options: Options) -> dict[str, Any]:
    """Return the judge's alignment with the gold in one order: Cohen's κ with its CI, n, agreement, unusable."""
    section, _ = categorical_section(task, labels, verdicts, fewshot, None, options, gold=gold, light=True)
    kappa = section["cohen_kappa"]
    return {"metric": "cohen_kappa", "value": kappa.get("value"), "ci": kappa.get("ci"), "n": section["n"],
            "percent_agreement": section.get("percent_agreement"), "n_unparsed": section["n_unparsed"],
            "status": kappa.get("status"), "note": kappa.get("note", "")}


def human_first_position(session: Session, dataset: Dataset, task: Task, in_split: set[int] | None) -> dict[str, Any]:
    """Return the share of the annotators' non-tie labels that picked the response shown to them first, and its n."""
    query = (sa_select(Label.sample_id, Label.value, Label.order)
             .join(Sample, Sample.id == Label.sample_id)
             .where(Sample.dataset_id == dataset.id, Label.task_id == task.id, Label.adjudicated.is_(False),
                    Label.stale.is_(False)))
    rows = read_frame(session, query, ["sample_id", "value", "order"])
    if in_split is not None:
        rows = rows[rows["sample_id"].isin(in_split)]
    firsts = [_first(order) for order in rows["order"]]
    picked = [(value, first) for value, first in zip(rows["value"], firsts, strict=True) if first is not None and value != TIE]
    n = len(picked)
    rate = sum(value == first for value, first in picked) / n if n else None
    return {"human_first_position_rate": rate, "n_human_with_order": n,
            "n_human_without_order": int(sum(first is None for first in firsts))}


def _first(order: Any) -> str | None:
    """Return the first id of a stored order (JSON text on SQLite, a list on PostgreSQL), None when none was recorded."""
    if isinstance(order, str):
        order = json.loads(order)
    return order[0] if isinstance(order, list) and order else None


def position_summary(all_verdicts: pd.DataFrame | None, responses: pd.DataFrame | None,
                     fewshot: set[str]) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """Return the judge's position-bias statistics (`stats.position_bias` and the orders it has), and its verdicts by order."""
    out: dict[str, Any] = {}
    orders = _by_order(all_verdicts) if all_verdicts is not None and len(all_verdicts) else {}
    out["orders"] = list(orders)
    if len(orders) < 2:
        missing = "no verdicts" if not orders else f"verdicts in the {next(iter(orders))} order only"
        note = f"the judge has {missing}: position bias needs both presentation orders (judge run --orders both)"
        out.update(stats.position_bias([], [], [], []).to_dict(), status="undefined", note=note)
    else:
        original, swapped = (orders[k][~orders[k]["target_key"].isin(fewshot)] for k in (ORIGINAL, SWAPPED))
        keys = pd.concat([original[["target_key", "sample_id"]], swapped[["target_key", "sample_id"]]]
                         ).drop_duplicates("target_key").reset_index(drop=True)
        first = _first_shown(responses)
        keep = keys["sample_id"].isin(first.index)
        n_more = int((~keep).sum())
        keys = keys[keep]

        def value_of(frame: pd.DataFrame) -> list:
            usable = frame[_usable(frame)]
            return keys["target_key"].map(dict(zip(usable["target_key"], usable["value"], strict=True))).tolist()

        shown = first.loc[keys["sample_id"].to_numpy()]
        result = stats.position_bias(value_of(original), value_of(swapped), shown["first_original"].tolist(),
                                     shown["first_swapped"].tolist(), tie=TIE)
        out.update(result.to_dict())
        out["n_targets_more_responses"] = n_more
        if n_more:
            more = (f"{n_more} target{'s' if n_more != 1 else ''} with more than two responses left out "
                    "(the statistics are defined for two)")
            out["note"] = "; ".join(part for part in (out["note"], more) if part)
    return out, orders


def position_section(task: Task, all_verdicts: pd.DataFrame | None, responses: pd.DataFrame | None, labels: pd.DataFrame,
                     gold: pd.DataFrame, fewshot: set[str], options: Options, human: dict[str, Any]) -> dict[str, Any]:
    """Return `tasks.<t>.position`: position bias of the judge over its two orders, alignment per order, the humans' rate."""
    out, orders = position_summary(all_verdicts, responses, fewshot)
    if len(orders) == 2:
        for kind in (ORIGINAL, SWAPPED):
            out[f"alignment_{kind}"] = _alignment(task, labels, orders[kind], gold, fewshot, options)
    out.update(human)
    return out
