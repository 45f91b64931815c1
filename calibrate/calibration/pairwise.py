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
gold in each order; plus the annotators' own first-position rate, from the order each saw. It
covers the report's samples, as every other block: the split's, within a golden version's
members under `--golden` (the caller passes the verdicts and gold already restricted, and
`human_first_position` the same scope).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import and_, case, func
from sqlalchemy import select as sa_select
from sqlmodel import Session

from calibrate import stats
from calibrate.calibration.options import Options
from calibrate.calibration.sections import ORDER_MISS, estimate_dict
from calibrate.db import read_frame
from calibrate.models import TIE, Dataset, Label, Response, Sample, Task
from calibrate.reasons import Reason, join, noted
from calibrate.stats import Estimate

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


def split_orders(verdicts: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    """Return a judge's verdicts of the original and of the swapped order (one row per target each), present ones only.

    Read once per judge and task: the order rule and the position block both take it.
    """
    if verdicts is None or not len(verdicts):
        return {}
    kinds = order_kinds(verdicts["order_key"].fillna(""))
    out = {}
    for kind in (ORIGINAL, SWAPPED):
        part = verdicts[kinds == kind]
        if len(part):
            if not part["target_key"].is_unique:  # "" and the identity key are both the original order
                part = part.drop_duplicates("target_key", keep="last")
            out[kind] = part.drop(columns=["order_key"]).reset_index(drop=True)
    return out


def apply_order_rule(task: Task, verdicts: pd.DataFrame, rule: str, *,
                     orders: dict[str, pd.DataFrame] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Return one verdict per target by the order rule (the columns of `verdicts` minus order_key), and the orders the judge has.

    `orders`: `split_orders(verdicts)`, when the caller has it already.
    """
    if rule not in ORDER_RULES:
        raise ValueError(f"order_rule must be one of {', '.join(ORDER_RULES)}, got {rule!r}")
    orders = split_orders(verdicts) if orders is None else orders
    if not orders:
        return verdicts.iloc[0:0].drop(columns=["order_key"]), []
    if len(orders) == 1 or rule == ORIGINAL:  # one order: it decides under either rule
        kind = next(iter(orders)) if len(orders) == 1 else ORIGINAL
        return orders[kind], list(orders)
    original, swapped = orders[ORIGINAL], orders[SWAPPED]
    # Both orders side by side, by hashing target keys (a merge would sort 10^5 strings; row order does not
    # matter to the pairwise statistics, whose bootstrap is multinomial).
    both = pd.concat([original, swapped[~swapped["target_key"].isin(original["target_key"])]], ignore_index=True)
    other = swapped.set_index("target_key")
    both["value_s"] = both["target_key"].map(other["value"])
    both["status_s"] = both["target_key"].map(other["status"])
    own = both["target_key"].isin(original["target_key"])
    both.loc[~own, ["value", "status"]] = None  # a target judged in the swapped order only
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


def first_shown(session: Session, dataset: Dataset) -> pd.DataFrame:
    """Return, per sample with exactly two responses, the id shown first in the original and in the swapped order.

    Indexed by sample id: `first_original` (position 0) and `first_swapped` (position 1).
    """
    query = (sa_select(Response.sample_id, func.max(case((Response.position == 0, Response.key))),
                       func.max(case((Response.position == 1, Response.key))))
             .join(Sample, Sample.id == Response.sample_id).where(Sample.dataset_id == dataset.id)
             .group_by(Response.sample_id).having(func.count() == 2))
    frame = read_frame(session, query, ["sample_id", "first_original", "first_swapped"])
    return frame.set_index("sample_id")


def order_alignment(task: Task, verdicts: pd.DataFrame, gold: pd.DataFrame, fewshot: set[str], options: Options) -> dict[str, Any]:
    """Return the judge's alignment with the gold in one order: Cohen's κ with its CI, n, agreement, unusable.

    The same targets, exclusions, κ and bootstrap as `categorical_section` gives for these
    verdicts (a test holds them equal), computed without its outer merge: the gold is looked up
    by target key, so the two orders of 10^5 targets cost a fraction of a second.
    """
    rows = verdicts[~verdicts["target_key"].isin(fewshot)]
    usable = _usable(rows)
    gold_of = gold.dropna(subset=["gold"]).set_index("target_key")["gold"]
    rows = rows.assign(gold=rows["target_key"].map(gold_of))
    excluded = set(task.excluded or [])
    scored = rows[usable & rows["gold"].notna() & ~rows["gold"].isin(excluded) & ~rows["value"].isin(excluded)]
    stat_labels = [label for label in (task.labels or []) if label not in excluded]
    gold_v, judge_v = scored["gold"].tolist(), scored["value"].tolist()
    if scored.empty:
        kappa = Estimate.no_data(Reason("order_no_usable_verdicts"))
    else:
        kappa = stats.cohen_kappa(gold_v, judge_v, labels=stat_labels)
    if kappa.status == "ok":
        index = {label: i for i, label in enumerate(stat_labels)}
        kappa = stats.multinomial_bootstrap_kappa([index[v] for v in gold_v], [index[v] for v in judge_v],
                                                  n_labels=len(stat_labels), n_resamples=options.bootstrap,
                                                  confidence=options.confidence, method=options.ci_method, seed=options.seed)
    found = estimate_dict(kappa)
    return {"metric": "cohen_kappa", "value": found.get("value"), "ci": found.get("ci"), "n": int(len(scored)),
            "percent_agreement": stats.percent_agreement(gold_v, judge_v).value if gold_v else None,
            "n_unparsed": int((~usable).sum()), "status": found.get("status"), "note": found.get("note", ""),
            **({"reason": found["reason"]} if "reason" in found else {})}


def human_first_position(session: Session, dataset: Dataset, task: Task, split: str | None,
                         sample_ids: frozenset[int] | set[int] | None = None) -> dict[str, Any]:
    """Return the share of the annotators' non-tie labels that picked the response shown to them first, and its n.

    `split` and `sample_ids` (`Options.sample_ids`: a golden version's members, `--golden`) keep it to the
    samples every other block of the report covers.

    Counted in SQL (the first id of each label's stored order: JSON_EXTRACT on SQLite, ->> on
    PostgreSQL), so 10^5 labels cost one aggregate row, not 10^5 parsed JSON lists (one per 500
    members with `sample_ids`: the counts add up).
    """
    first = Label.order[0].as_string()
    picked = and_(first.is_not(None), Label.value != TIE)
    query = (sa_select(func.sum(case((picked, 1), else_=0)), func.sum(case((and_(picked, Label.value == first), 1), else_=0)),
                       func.sum(case((first.is_(None), 1), else_=0)))
             .join(Sample, Sample.id == Label.sample_id)
             .where(Sample.dataset_id == dataset.id, Label.task_id == task.id, Label.adjudicated.is_(False),
                    Label.stale.is_(False)))
    if split is not None:
        query = query.where(Sample.split == split)
    if sample_ids is None:
        parts = [query]
    else:
        ids = sorted(sample_ids)
        parts = [query.where(Sample.id.in_(ids[start:start + 500])) for start in range(0, len(ids), 500)]
    n = n_first = without = 0
    for part in parts:
        counts = [int(x or 0) for x in session.execute(part).one()]
        n, n_first, without = n + counts[0], n_first + counts[1], without + counts[2]
    return {"human_first_position_rate": n_first / n if n else None, "n_human_with_order": n,
            "n_human_without_order": without}


def position_summary(orders: dict[str, pd.DataFrame], first: pd.DataFrame | None, fewshot: set[str]) -> dict[str, Any]:
    """Return the judge's position-bias statistics (`stats.position_bias` and the orders it has) from `split_orders`."""
    out: dict[str, Any] = {}
    out["orders"] = list(orders)
    if len(orders) < 2:
        missing = Reason("no_verdicts") if not orders else Reason("verdicts_in_one_order", order=next(iter(orders)))
        out.update(stats.position_bias([], [], [], []).to_dict(), status="undefined",
                   **noted(Reason("one_order_missing", missing=missing)))
    else:
        original, swapped = (orders[k][~orders[k]["target_key"].isin(fewshot)] for k in (ORIGINAL, SWAPPED))
        keys = pd.concat([original[["target_key", "sample_id"]], swapped[["target_key", "sample_id"]]]
                         ).drop_duplicates("target_key").reset_index(drop=True)
        keep = keys["sample_id"].isin(first.index)
        n_more = int((~keep).sum())
        keys = keys[keep].copy()
        for name, frame in (("o", original), ("s", swapped)):  # by hashing keys: no merge sorts 10^5 strings
            usable = frame[_usable(frame)]
            keys[name] = keys["target_key"].map(pd.Series(usable["value"].to_numpy(), index=usable["target_key"].to_numpy()))
        shown = first.loc[keys["sample_id"].to_numpy()]
        result = stats.position_bias(keys["o"].to_numpy(dtype=object), keys["s"].to_numpy(dtype=object),
                                     shown["first_original"].to_numpy(dtype=object),
                                     shown["first_swapped"].to_numpy(dtype=object), tie=TIE)
        out.update(result.to_dict())
        out["n_targets_more_responses"] = n_more
        if n_more:
            out.update(noted(join([result.reason, Reason("more_responses", count=n_more)])))
    return out


def position_section(task: Task, orders: dict[str, pd.DataFrame], first: pd.DataFrame | None, gold: pd.DataFrame,
                     fewshot: set[str], options: Options, human: dict[str, Any]) -> dict[str, Any]:
    """Return `tasks.<t>.position`: position bias of the judge over its two orders (`split_orders`), alignment per order,
    the humans' rate."""
    out = position_summary(orders, first, fewshot)
    if len(orders) == 2:
        for kind in (ORIGINAL, SWAPPED):
            out[f"alignment_{kind}"] = order_alignment(task, orders[kind], gold, fewshot, options)
    out.update(human)
    return out
