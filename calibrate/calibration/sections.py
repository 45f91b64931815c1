"""A task's section of the report: gold joined with verdicts, the judge–human statistics, the human ceiling.

`categorical_section` (Cohen's kappa, confusion, per label, per annotator, grouped) and
`numeric_section` (Spearman, Kendall, Pearson, weighted kappa) each return the section's
JSON and the merged frame (one row per target: gold, judge, why it is excluded) that the
item rows and the RAG metrics reuse.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from calibrate import stats
from calibrate.calibration.budget import budget_candidates, label_budget
from calibrate.calibration.decision import decide_section, labels_to_settle, rule_of
from calibrate.calibration.options import Options
from calibrate.gold import categorical_gold, numeric_gold
from calibrate.judged import judging, task_kind
from calibrate.models import (
    Task,
)
from calibrate.reasons import Reason, join, noted
from calibrate.stats import Estimate
from calibrate.stats.agreement import code_table, cohen_kappa_table, label_codes, per_label_prf_table, shared_codes
from calibrate.stats.intervals import cluster_bootstrap_alpha_counts

NO_GROUP = ("no value",)  # the group of samples without the group-by field (a tuple: never a field's text value)

# The judge's category for an abstention (a usable verdict outside the labels the statistics use, such as
# not_applicable, on a target whose gold is a checkable label): never a gold value, so always a miss.
ABSTAINED = "(abstained)"

# The status of a pairwise target that the order rule leaves without a verdict although no call
# failed: the two orders conflict and the task has no tie, or one order is missing (pairwise.py).
ORDER_MISS = "order_miss"

# The values of join_verdicts' column `excluded`, scored ("") first.
EXCLUSIONS = ("", "fewshot", "unparsed", ORDER_MISS, "no_gold", "excluded_label")


def estimate_dict(est: Estimate, *, keep: tuple[str, ...] = ("value", "ci", "status", "note")) -> dict:
    """Return the JSON form of an estimate with the report's keys (plus its p-value when it has one, and the
    note's `reason` beside a kept non-empty note)."""
    full = est.to_dict()
    out = {k: full[k] for k in keep if k in full}
    if "note" in keep and "reason" in full:
        out["reason"] = full["reason"]
    if est.p_value is not None:
        out["p_value"] = est.p_value
    return out


def score_tolerance(task: Task, gold: np.ndarray | None = None) -> float:
    """Return how close a judge's score must be to the gold to count as right (a fixed/broken flip, `agree`).

    Half a step on an ordinal task's integer scale (0.5: 3 is right for 3, wrong for 2 or 4 and
    for a mean gold of 3.5). A tenth of the range of a continuous task's scale (0.1 on 0–1,
    the metric tasks). A continuous task without a scale: a tenth of the range of the `gold`
    values compared (0 when they are all equal: then only the exact value is right).
    """
    kind = task_kind(task.kind)
    if kind.tolerance is not None:
        return kind.tolerance
    if task.scale_min is not None and task.scale_max is not None:
        return (task.scale_max - task.scale_min) / 10
    if gold is None or len(gold) == 0:
        return 0.0
    return float(np.max(gold) - np.min(gold)) / 10


def score_agrees(task: Task, gold: np.ndarray, judge: np.ndarray, tolerance: float | None = None) -> np.ndarray:
    """Return, per target, whether the judge's score is right by `score_tolerance` (the exact value when it is 0)."""
    tolerance = score_tolerance(task, gold) if tolerance is None else tolerance
    distance = np.abs(np.asarray(judge, dtype=float) - np.asarray(gold, dtype=float))
    return distance < tolerance if tolerance > 0 else distance < 1e-12


def _counted(task: Task, merged: pd.DataFrame, scored: pd.DataFrame, *reasons: str) -> dict[str, Any]:
    """Return a section's head: kind, target, n (scored), n_samples (claim and context targets), n_<reason> per reason."""
    section: dict[str, Any] = {"kind": task.kind, "target": task.target, "n": int(len(scored))}
    if judging(task).target.within:
        section["n_samples"] = int(scored["sample_id"].nunique())
    for reason in reasons:
        section[f"n_{reason}"] = int((merged["excluded"] == reason).sum())
    return section


def align_section(section: dict, metric: str, est: Estimate, options: Options, candidates: list[str], *,
                  light: bool = False) -> None:
    """Add the task's alignment, its decision (`passed`, `decision`, `rule`, `labels_to_decide`), (unless light)
    the labels needed, and the label budget (`candidates`: targets with a usable verdict but no gold)."""
    alignment = {"metric": metric, "value": est.value, "ci": list(est.ci) if est.ci else None}
    section["alignment"] = alignment
    decide_section(section, options.threshold, rule_of(options.ci_lower))
    if not light:
        section["labels_needed"] = labels_to_settle(section["n"], est.value, est.ci, options.threshold)
    section["budget"] = label_budget(section["n"], est.ci, options.budget_half_width, candidates)


def join_verdicts(gold: pd.DataFrame, verdicts: pd.DataFrame | None, fewshot: set[str], *,
                  excluded_labels: set[str] = frozenset(), stat_labels: list[str] | None = None) -> pd.DataFrame:
    """Join gold and verdicts per target and say why each target is left out of the statistics.

    Column `excluded`: "" (scored: gold and a usable verdict), "fewshot", "unparsed" (the verdict
    has no usable value), "order_miss" (pairwise: the order rule gives no verdict, see
    pairwise.py), "no_gold" (a verdict but no gold, ties included), "excluded_label" (the gold is
    a label the task keeps out of statistics, such as not_applicable). Column `scored`: whether
    the target counts (gold and a usable verdict, not excluded).

    Column `abstained`: with `stat_labels`, a scored target whose gold is one of them while the
    judge's usable verdict is not (the claim task's not_applicable, or any other value outside
    the labels the statistics use): the judge declined a checkable target. It stays scored, as a
    miss (`ABSTAINED` in the statistics): leaving it out would let a judge abstain its way to a
    better score. Without `stat_labels` (older callers), a verdict in `excluded_labels` is left
    out as `excluded_label` like the gold.
    """
    if verdicts is not None:
        right = verdicts[["target_key", "sample_id", "value", "status"]].rename(columns={"value": "judge", "sample_id": "v_sample"})
        merged = _outer_join_on_codes(gold, right, "target_key")
        if merged is None:
            merged = gold.merge(right, on="target_key", how="outer")
        merged["sample_id"] = merged["sample_id"].fillna(merged["v_sample"])
        merged = merged.drop(columns=["v_sample"])
    else:
        merged = gold.copy()
        merged["judge"] = None
        merged["status"] = None
    # The reasons as codes into EXCLUSIONS, each rule in turn overriding the ones before it, written once as text.
    status = merged["status"]
    fewshot_ = merged["target_key"].isin(fewshot).to_numpy()
    has_verdict = status.notna().to_numpy()
    usable = has_verdict & merged["judge"].notna().to_numpy() & (status == "ok").to_numpy()
    has_gold = merged["gold"].notna().to_numpy()
    open_ = ~fewshot_
    reason = np.where(fewshot_, EXCLUSIONS.index("fewshot"), 0).astype(np.int8)
    unusable = np.flatnonzero(open_ & has_verdict & ~usable)  # ORDER_MISS is a verdict's status that is not "ok"
    reason[unusable] = EXCLUSIONS.index("unparsed")
    reason[unusable[(status.iloc[unusable] == ORDER_MISS).to_numpy()]] = EXCLUSIONS.index(ORDER_MISS)
    reason[open_ & usable & ~has_gold] = EXCLUSIONS.index("no_gold")
    if stat_labels is not None:
        reason[open_ & usable & has_gold & ~merged["gold"].isin(stat_labels).to_numpy()] = EXCLUSIONS.index("excluded_label")
    elif excluded_labels:
        na = (merged["gold"].isin(excluded_labels) | merged["judge"].isin(excluded_labels)).to_numpy()
        reason[open_ & usable & has_gold & na] = EXCLUSIONS.index("excluded_label")
    merged["excluded"] = pd.Series(EXCLUSIONS).array.take(reason)  # text, as `merged["excluded"] = ""` made it
    scored = (reason == 0) & usable & has_gold
    merged["scored"] = scored
    merged["abstained"] = (scored & ~merged["judge"].isin(stat_labels).to_numpy()) if stat_labels is not None else False
    return merged


def _outer_join_on_codes(left: pd.DataFrame, right: pd.DataFrame, key: str) -> pd.DataFrame | None:
    """Return `left.merge(right, on=key, how="outer")` through the key's categorical codes, or None where that is not
    the same frame for certain (the key not categorical with the same categories in the same order on both sides, a
    missing or repeated key, an empty side, a column name on both sides): for unique keys pandas' outer join has one row per key of either side, in the
    order of the codes (its keys sorted), the left's columns then the right's, taken with pandas' missing-value fill."""
    dtype = left[key].dtype
    if (not isinstance(dtype, pd.CategoricalDtype) or right[key].dtype != dtype  # unordered: equal in any order
            or not right[key].cat.categories.equals(dtype.categories) or left.empty or right.empty
            or set(left.columns) & set(right.columns) != {key}):
        return None
    n_codes = len(dtype.categories)
    where = []
    for frame in (left, right):
        codes = frame[key].cat.codes.to_numpy()
        if (codes < 0).any() or np.bincount(codes, minlength=n_codes).max() > 1:
            return None
        at = np.full(n_codes, -1, dtype=np.intp)
        at[codes] = np.arange(len(codes))
        where.append(at)
    present = np.flatnonzero((where[0] >= 0) | (where[1] >= 0))
    rows = {key: pd.Categorical.from_codes(present, dtype=dtype)}
    for frame, at in zip((left, right), where, strict=True):
        taken = at[present]
        for column in frame.columns.drop(key):
            values = frame[column].array if isinstance(frame[column].dtype, pd.api.extensions.ExtensionDtype) else frame[column].to_numpy()
            values = pd.api.extensions.take(values, taken, allow_fill=True)
            rows[column] = pd.Series(values, dtype=values.dtype, copy=False)  # object stays object (not inferred as text)
    return pd.DataFrame(rows, columns=[*left.columns, *right.columns.drop(key)])


def judge_codes(judge: list, stat_labels: list[str]) -> tuple[list, list[str]]:
    """Return the judge's values with every abstention (a value outside `stat_labels`) as `ABSTAINED`, and the labels
    the statistics use: `stat_labels`, plus `ABSTAINED` when the judge abstained (a category the gold never takes,
    so an abstention is always a miss; without one, κ is exactly κ over the labels)."""
    mapped = [v if v in stat_labels else ABSTAINED for v in judge]
    return mapped, ([*stat_labels, ABSTAINED] if ABSTAINED in mapped else list(stat_labels))


def judge_label_codes(gold: pd.Series, judge: pd.Series, stat_labels: list[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Return the codes of the gold and the judge's values in the labels the statistics use, and those labels: as
    `judge_codes`, an abstention (a judge's value outside `stat_labels`) is the code of `ABSTAINED`, added after
    `stat_labels` when the judge abstained. Raises ValueError for a gold value outside `stat_labels` (κ does)."""
    gold_c, judge_c = label_codes(gold, stat_labels), label_codes(judge, stat_labels)
    if (gold_c < 0).any():
        raise ValueError(f"a contains {gold.iloc[int(np.flatnonzero(gold_c < 0)[0])]!r}, which is not in labels")
    abstained = judge_c < 0
    if not abstained.any():
        return gold_c, judge_c, list(stat_labels)
    judge_c[abstained] = len(stat_labels)
    return gold_c, judge_c, [*stat_labels, ABSTAINED]


def categorical_section(task: Task, labels: pd.DataFrame, verdicts: pd.DataFrame | None, fewshot: set[str],
                         groups: dict[int, str | None] | None, options: Options, *,
                         gold: pd.DataFrame | None = None, light: bool = False) -> tuple[dict, pd.DataFrame]:
    stat_labels = [lab for lab in (task.labels or []) if lab not in (task.excluded or [])]
    excluded_labels = set(task.excluded or [])
    gold = categorical_gold(labels) if gold is None else gold
    merged = join_verdicts(gold, verdicts, fewshot, excluded_labels=excluded_labels, stat_labels=stat_labels)
    scored = merged[merged["scored"]]
    per_order = task_kind(task.kind).orders  # one verdict per target by the order rule, one target per sample
    reasons = ("unparsed", ORDER_MISS) if per_order else ("unparsed",)
    section = _counted(task, merged, scored, *reasons, "no_gold", "excluded_label", "fewshot")
    section["n_abstained"] = int(merged["abstained"].sum())
    section["n_ties"] = int((gold["gold_source"] == "tie").sum()) if not gold.empty else 0
    section["labels"] = stat_labels

    if verdicts is not None:
        # Integer codes and one contingency table (rows gold, columns judge) give κ, the percent agreement, the
        # confusion and the per-label figures: the numbers of stats.cohen_kappa & co on the lists, without them.
        gold_c, judge_c, used = judge_label_codes(scored["gold"], scored["judge"], stat_labels)
        k = len(used)
        table = code_table(gold_c, judge_c, k)
        if scored.empty:
            note = Reason("no_usable_verdicts_on_gold")  # (no verdicts at all: see judge_note)
            kappa = Estimate.no_data(note)
        else:
            kappa = cohen_kappa_table(table, labels=used)  # its notes name the labels
        if kappa.status == "ok":
            boot = dict(n_labels=k, n_resamples=options.bootstrap, confidence=options.confidence,
                        method=options.ci_method, seed=options.seed)
            if per_order:  # one target per sample: the cluster bootstrap's tables are multinomial
                kappa = stats.multinomial_bootstrap_kappa(gold_c, judge_c, **boot)
            else:
                kappa = stats.cluster_bootstrap_kappa(gold_c, judge_c, scored["sample_id"].to_numpy(), **boot)
        section["cohen_kappa"] = estimate_dict(kappa)
        section["percent_agreement"] = int(np.trace(table)) / len(scored) if len(scored) else None
        if light:  # the alignment, its decision and the label budget only (the dashboard's rows)
            align_section(section, "cohen_kappa", kappa, options, budget_candidates(merged), light=True)
            return section, merged
        section["confusion"] = {"labels": used, "rows": "human gold", "columns": "judge", "matrix": table.tolist()}
        section["per_label"] = _per_label(table, stat_labels, used)
        section["per_annotator"] = _per_annotator_categorical(labels, merged, stat_labels, excluded_labels)
        if groups is not None:
            judge_v = np.asarray(used, dtype=object)[judge_c]
            section["grouped"] = _grouped_kappa(scored.assign(judge=judge_v), groups, used, options.group_by, options)
        align_section(section, "cohen_kappa", kappa, options, budget_candidates(merged))
    if not light:  # (a light section without verdicts: a decision-only report's human-only task)
        section["human"] = human_block(task, labels, options=options)
    if len(merged) == 0:
        section["status"] = "no_data"
    return section, merged


def human_block(task: Task, labels: pd.DataFrame, *, options: Options | None = None) -> dict:
    """Return the annotators' agreement among themselves (a section's `human` block) for the task's kind.

    Annotator pairs sharing fewer than `options.min_shared` targets are counted (`n_pairs_sparse`),
    not listed. `ceiling` is the one human–human figure the report, the dashboard and the
    Alt-Test set the judge beside (`human_ceiling`).
    """
    options = options or Options()
    kind = task_kind(task.kind)
    if kind.labels:
        return _human_categorical(labels, [lab for lab in (task.labels or []) if lab not in (task.excluded or [])],
                                  set(task.excluded or []), options)
    return _human_numeric(labels, options, level=kind.level)


def human_ceiling(human: dict, *, pairs_key: str, counts: np.ndarray | None, values: list, level: str,
                  options: Options) -> dict:
    """Return `human.ceiling` {metric, value, ci, why}: the one human–human figure a judge is set beside.

    The mean of the pairwise statistic (Cohen's κ for labels, Spearman's ρ for scores: like for
    like with the judge's alignment) when every annotator pair shares at least `min_shared`
    targets, so every pair's figure rests on enough targets; else (a crowd where most pairs share
    a few targets or none) Krippendorff's α at the task's level of measurement, pooled over every
    target labelled by two or more, with a percentile bootstrap CI over targets. The mean of
    pairwise figures has no CI (`ci` null). `why` says which and why, with its `reason`.
    """
    pairs = human.get(pairs_key) or []
    defined = [p["value"] for p in pairs if p.get("value") is not None]
    stat = "Cohen's κ" if pairs_key == "pairwise_kappa" else "Spearman's ρ"
    short = "kappa" if pairs_key == "pairwise_kappa" else "spearman"
    sparse = int(human.get("n_pairs_sparse") or 0)
    if pairs and sparse == 0 and defined:
        why = Reason("ceiling_pairwise", count=len(defined), min_shared=options.min_shared, stat=stat)
        return {"metric": f"mean_pairwise_{short}", "value": float(np.mean(defined)), "ci": None,
                "why": why.text(), "reason": why.to_dict()}
    if sparse:
        why = Reason("ceiling_pooled", count=sparse, pairs=sparse + len(pairs), min_shared=options.min_shared, level=level)
    else:
        why = Reason("ceiling_pooled_undefined_pairs", stat=stat, level=level)
    metric = f"krippendorff_alpha_{level}"
    if counts is None or not len(counts):
        est = Estimate.no_data(Reason("no_two_annotators"))
    else:
        est = stats.krippendorff_alpha_counts(counts, level=level, values=values)
        if est.status == "ok" and len(counts) > 1:  # the units resampled (vectorised: each unit's coincidences)
            est = cluster_bootstrap_alpha_counts(counts, level=level, values=values, n_resamples=options.bootstrap,
                                                 confidence=options.confidence, seed=options.seed)
    if est.value is None:
        why = join([why, est.reason])
    return {"metric": metric, "value": est.value, "ci": list(est.ci) if est.ci else None,
            "why": why.text(), "reason": why.to_dict()}


def _per_label(table: np.ndarray, labels: list[str], used: list[str]) -> dict:
    """Return precision, recall, F1 and support per label of `labels` from the gold × judge table over `used`; `used`
    adds the abstentions' category, so an abstention on a label's target lowers that label's recall."""
    if not table.sum():
        return {lab: {"precision": None, "recall": None, "f1": None, "support": 0} for lab in labels}
    prf = per_label_prf_table(table, labels=used)
    return {lab: {k: prf[lab].get(k) for k in ("precision", "recall", "f1", "support")} for lab in labels}


def _human_categorical(labels: pd.DataFrame, stat_labels: list[str], excluded: set[str], options: Options) -> dict:
    min_shared = options.min_shared
    current = labels[~labels["stale"] & ~labels["adjudicated"] & ~labels["value"].isin(excluded)] if not labels.empty else labels
    annotators = sorted(current["annotator"].unique().tolist()) if not current.empty else []
    shared, n_shared = _multi_rated(current)
    out: dict[str, Any] = {"n": n_shared, "annotators": annotators}
    if shared.empty:
        out["status"] = "no_data"
        none = Reason("no_two_annotators")
        out.update(noted(none))
        out["pairwise_kappa"] = []
        out["n_pairs_sparse"] = len(annotators) * (len(annotators) - 1) // 2
        out["fleiss_kappa"] = estimate_dict(Estimate.no_data(none))
        out["krippendorff_alpha"] = {"nominal": estimate_dict(Estimate.no_data(none))}
        out["ceiling"] = human_ceiling(out, pairs_key="pairwise_kappa", counts=None, values=stat_labels, level="nominal",
                                       options=options)
        return out
    # Only the pairs that co-occur are enumerated (a crowd of 246 has 30,135 pairs, most sharing nothing).
    pairwise = stats.crowd_pairwise_kappa(shared["target_key"], shared["annotator"], shared["value"],
                                          labels=stat_labels, min_shared=min_shared)
    out["pairwise_kappa"] = pairwise["pairs"]
    out["n_pairs_sparse"] = len(annotators) * (len(annotators) - 1) // 2 - len(pairwise["pairs"])
    counts = _unit_counts(shared["target_key"], shared["value"].map({lab: i for i, lab in enumerate(stat_labels)}), len(stat_labels))
    out["fleiss_kappa"] = estimate_dict(stats.fleiss_kappa_counts(counts, labels=stat_labels))
    out["krippendorff_alpha"] = {"nominal": estimate_dict(stats.krippendorff_alpha_counts(counts, level="nominal", values=stat_labels))}
    out["ceiling"] = human_ceiling(out, pairs_key="pairwise_kappa", counts=counts, values=stat_labels, level="nominal",
                                   options=options)
    return out


def _multi_rated(current: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Return the rows of the targets two or more annotators labelled, and how many targets that is.

    Through integer codes: each distinct (target, annotator) pair once, then a bincount of targets (the grouping's
    `nunique` of annotators per target, without hashing 10^6 text keys)."""
    if current.empty:
        return current, 0
    target, _, n_targets = shared_codes(current["target_key"], current["target_key"].iloc[0:0])
    annotator, names = pd.factorize(current["annotator"])
    rated = (target >= 0) & (annotator >= 0)
    pairs = pd.unique(target[rated] * max(len(names), 1) + annotator[rated])
    raters = np.bincount(pairs // max(len(names), 1), minlength=n_targets)
    multi = (target >= 0) & (raters[np.maximum(target, 0)] >= 2)
    return current[multi], int((raters >= 2).sum())


def _unit_counts(units: pd.Series, codes: pd.Series, k: int) -> np.ndarray:
    """Return a units × k matrix counting how many raters gave each unit each code.

    Rows are in sorted unit order, not in the order rows arrived, so the bootstrap that resamples
    them draws the same units on SQLite and PostgreSQL (which return labels in different orders).
    """
    unit_index, uniques = pd.factorize(units, sort=True)
    counts = np.zeros((len(uniques), k), dtype=np.int64)
    np.add.at(counts, (unit_index, codes.to_numpy(dtype=np.int64)), 1)
    return counts


def _per_annotator_categorical(labels: pd.DataFrame, merged: pd.DataFrame, stat_labels: list[str], excluded: set[str]) -> list[dict]:
    """Return each annotator's κ and percent agreement with the judge on the targets both labelled; the annotator's
    excluded labels are left out, the judge's abstentions on the annotator's checkable labels count as misses.

    Through codes: each label row reads its target's judge code from an array indexed by the target's code, and
    each annotator's κ comes from one table (`cohen_kappa_table`): the numbers of `stats.cohen_kappa` on the joined
    lists. An annotator with a label outside the labels goes the lists' way (κ says what is wrong with it)."""
    judged = merged[(merged["status"] == "ok") & merged["judge"].notna() & (merged["excluded"] != "fewshot")]
    current = labels[~labels["stale"] & ~labels["adjudicated"] & ~labels["value"].isin(excluded)] if not labels.empty else labels
    if current.empty:
        return []
    label_keys, judged_keys, n_keys = shared_codes(current["target_key"], judged["target_key"])
    if len(judged_keys) and (judged_keys.min() < 0 or np.bincount(judged_keys, minlength=n_keys).max() > 1):
        return [_annotator_row_lists(annotator, group, judged, stat_labels)
                for annotator, group in current.groupby("annotator")]  # (one judged row per target: never seen)
    k = len(stat_labels)
    judge_of = np.full(n_keys + 1, -1, dtype=np.int64)  # the last: a label without a target key
    judge_c = label_codes(judged["judge"], stat_labels)
    judge_of[judged_keys] = np.where(judge_c < 0, k, judge_c)  # an abstention: the code after the labels
    human_all, judge_all = label_codes(current["value"], stat_labels), judge_of[label_keys]
    out = []
    for annotator, rows in _annotator_rows(current["annotator"]):
        paired = rows[judge_all[rows] >= 0]
        human, judge = human_all[paired], judge_all[paired]
        if (human < 0).any():
            out.append(_annotator_row_lists(annotator, current.iloc[rows], judged, stat_labels))
            continue
        used = [*stat_labels, ABSTAINED] if (judge == k).any() else list(stat_labels)
        table = code_table(human, judge, len(used))
        est = cohen_kappa_table(table, labels=used) if len(paired) else Estimate.no_data(Reason("no_shared_targets_judge"))
        out.append({"annotator": annotator, "n": est.n, "cohen_kappa": estimate_dict(est, keep=("value", "status", "note")),
                    "percent_agreement": float((human == judge).mean()) if len(paired) else None})
    return out


def _annotator_rows(annotators: pd.Series) -> list[tuple[Any, np.ndarray]]:
    """Return (annotator, their row positions) in the order `groupby("annotator")` gives them: a categorical's
    categories in order (those with rows), else the sorted values; missing annotators left out."""
    if isinstance(annotators.dtype, pd.CategoricalDtype):
        codes, names = annotators.cat.codes.to_numpy().astype(np.int64), annotators.cat.categories
    else:
        codes, names = pd.factorize(annotators, sort=True)
        codes = codes.astype(np.int64)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    return [(names[a], order[bounds[a]:bounds[a + 1]]) for a in range(len(names)) if bounds[a + 1] > bounds[a]]


def _annotator_row_lists(annotator: Any, group: pd.DataFrame, judged: pd.DataFrame, stat_labels: list[str]) -> dict:
    """Return one annotator's per-annotator row from the joined lists (the general way; see _per_annotator_categorical)."""
    pairs = group[["target_key", "value"]].merge(judged[["target_key", "judge"]], on="target_key")
    codes, used = judge_codes(pairs["judge"].tolist(), stat_labels)
    human, judge = pairs["value"].to_numpy(), np.asarray(codes, dtype=object)
    est = stats.cohen_kappa(human, judge, labels=used) if len(pairs) else Estimate.no_data(Reason("no_shared_targets_judge"))
    return {"annotator": annotator, "n": est.n, "cohen_kappa": estimate_dict(est, keep=("value", "status", "note")),
            "percent_agreement": float((human == judge).mean()) if len(pairs) else None}


def _grouped_kappa(scored: pd.DataFrame, groups: dict[int, str | None], stat_labels: list[str], by: str | None,
                   options: Options) -> dict:
    values = scored["sample_id"].map(groups)
    used, skipped, kappas = 0, 0, []
    for _, part in scored.groupby(values, dropna=False):
        est = _part_kappa(part, stat_labels)
        if est.value is None:
            skipped += 1
        else:
            used += 1
            kappas.append(est.value)
    mean = float(np.mean(kappas)) if kappas else None
    note = None if kappas else Reason("kappa_undefined_every_group")
    return {"by": by, "groups": used, "groups_skipped": skipped,
            "cohen_kappa": {"value": mean, "status": "ok" if kappas else "undefined", **noted(note)},
            "per_group": per_group("categorical", scored, groups, options, labels=stat_labels)}


def _part_kappa(part: pd.DataFrame, labels: list[str] | None) -> Estimate:
    """Return Cohen's κ of a part's gold and judge over `labels`: from their codes' table, or (a value outside the
    labels, or no labels given) `stats.cohen_kappa` on the lists, which says what is wrong."""
    if labels:
        gold, judge = label_codes(part["gold"], labels), label_codes(part["judge"], labels)
        if len(gold) and gold.min() >= 0 and judge.min() >= 0:
            return cohen_kappa_table(code_table(gold, judge, len(labels)), labels=labels)
    return stats.cohen_kappa(part["gold"].tolist(), part["judge"].tolist(), labels=labels)


def per_group(kind: str, scored: pd.DataFrame, groups: dict[int, str | None], options: Options, *,
              labels: list[str] | None = None) -> list[dict]:
    """Return the alignment statistic of each group alone, with its own cluster-bootstrap CI (clustered by sample).

    `scored`: one row per scored target with `sample_id`, `gold` and `judge` (labels for
    categorical tasks, numbers for scores). Cohen's κ over `labels` for categorical tasks,
    Spearman's ρ for scores. One entry per group, sorted by name (samples without the field
    last, `group` null): `{group, n, value, ci, status, note}`; a group where the statistic is
    undefined (one label only, a constant side, a single target) has `value` and `ci` null and
    says why in `note`.
    """
    if scored.empty:
        return []
    keys = scored["sample_id"].map(groups)
    order = sorted({None if pd.isna(k) else str(k) for k in keys}, key=lambda g: (g is None, g or ""))
    boot = dict(n_resamples=options.bootstrap, confidence=options.confidence, seed=options.seed)
    out = []
    for group in order:
        part = scored[keys.isna()] if group is None else scored[keys == group]
        clusters = part["sample_id"].to_numpy()
        if task_kind(kind).labels:
            est = _part_kappa(part, labels)
            if est.status == "ok":
                gold, judge = label_codes(part["gold"], labels), label_codes(part["judge"], labels)
                est = stats.cluster_bootstrap_kappa(gold, judge, clusters, n_labels=len(labels), method=options.ci_method,
                                                    **boot)
        else:
            x, y = part["gold"].astype(float).to_numpy(), part["judge"].astype(float).to_numpy()
            est = stats.spearman_rho(x, y)
            if est.status == "ok":
                est = stats.cluster_bootstrap_corr(x, y, clusters, method="spearman", ci_method=options.ci_method, **boot)
        out.append({"group": group, "n": int(len(part)), "value": est.value, "ci": list(est.ci) if est.ci else None,
                    "status": est.status, **est.note_fields()})
    return out


def numeric_section(task: Task, labels: pd.DataFrame, verdicts: pd.DataFrame | None, fewshot: set[str],
                     groups: dict[int, str | None] | None, options: Options, *,
                     gold: pd.DataFrame | None = None, light: bool = False) -> tuple[dict, pd.DataFrame]:
    gold = numeric_gold(labels) if gold is None else gold
    merged = join_verdicts(gold, verdicts, fewshot)
    scored = merged[merged["scored"]]
    section = _counted(task, merged, scored, "unparsed", "no_gold", "fewshot")
    if task.scale_min is not None:
        section["scale"] = [_plain_number(task.scale_min), _plain_number(task.scale_max)]
    if verdicts is not None:
        x = scored["gold"].astype(float).to_numpy()
        y = scored["judge"].astype(float).to_numpy()
        clusters = scored["sample_id"].to_numpy()
        boot = dict(n_resamples=options.bootstrap, confidence=options.confidence, ci_method=options.ci_method, seed=options.seed)
        if scored.empty:
            note = Reason("no_usable_verdicts_on_gold")  # (no verdicts at all: see judge_note)
            rho = tau = Estimate.no_data(note)
            r = Estimate.no_data(note)
        elif light:  # the alignment and its decision only (the dashboard's rows)
            rho = with_point_p(stats.cluster_bootstrap_corr(x, y, clusters, method="spearman", **boot), stats.spearman_rho(x, y))
        else:
            rho = stats.cluster_bootstrap_corr(x, y, clusters, method="spearman", **boot)
            tau = stats.cluster_bootstrap_corr(x, y, clusters, method="kendall", **boot)
            r = stats.pearson_r(x, y)
            point_rho, point_tau = stats.spearman_rho(x, y), stats.kendall_tau_b(x, y)
            rho = with_point_p(rho, point_rho)
            tau = with_point_p(tau, point_tau)
        section["spearman_rho"] = estimate_dict(rho, keep=("value", "ci", "p_value", "status", "note"))
        if light:
            align_section(section, "spearman_rho", rho, options, budget_candidates(merged), light=True)
            return section, merged
        section["kendall_tau"] = estimate_dict(tau, keep=("value", "ci", "p_value", "status", "note"))
        section["pearson_r"] = estimate_dict(r, keep=("value", "p_value", "status", "note"))
        section["weighted_kappa"] = _weighted_kappa(task, x, y, labels, scored)
        section["per_annotator"] = _per_annotator_numeric(labels, merged)
        if groups is not None:
            # samples without the field form a group of their own, as for categorical tasks (stats refuses missing ids)
            gvals = [NO_GROUP if g is None or (isinstance(g, float) and np.isnan(g)) else g
                     for g in scored["sample_id"].map(groups).tolist()]
            grouped = {"by": options.group_by}
            for name, method in (("spearman_rho", "spearman"), ("kendall_tau", "kendall"), ("pearson_r", "pearson")):
                est = stats.grouped_correlation(x, y, gvals, method=method) if len(x) else Estimate.no_data(Reason("no_scored_targets"))
                grouped[name] = estimate_dict(est, keep=("value", "status", "note"))
                grouped.setdefault("groups", est.extra.get("groups", 0))
                grouped.setdefault("groups_skipped", est.extra.get("groups_skipped", 0))
            grouped["per_group"] = per_group(task.kind, scored, groups, options)
            section["grouped"] = grouped
        align_section(section, "spearman_rho", rho, options, budget_candidates(merged))
    if not light:
        section["human"] = human_block(task, labels, options=options)
    if len(merged) == 0:
        section["status"] = "no_data"
    return section, merged


def with_point_p(boot: Estimate, point: Estimate) -> Estimate:
    """Return the bootstrap estimate carrying the p-value of the point estimate's conventional test."""
    if boot.status != "ok" or point.p_value is None:
        return boot
    return Estimate(value=boot.value, n=boot.n, ci=boot.ci, status=boot.status, reason=boot.reason,
                    p_value=point.p_value, extra=boot.extra)


def _weighted_kappa(task: Task, x: np.ndarray, y: np.ndarray, labels: pd.DataFrame, scored: pd.DataFrame) -> dict:
    """Quadratic weighted kappa between gold and judge on the task's integer scale.

    When the gold is fractional (a mean of annotators who differ), kappa against it is not
    defined; the value is then the mean of each annotator's weighted kappa with the judge.
    """
    if len(x) == 0:
        return estimate_dict(Estimate.no_data(Reason("no_scored_targets")), keep=("value", "status", "note"))
    if task.scale_min is None or task.scale_max is None:
        return {"value": None, "status": "undefined", **noted(Reason("no_scale"))}
    if not np.all(np.mod(y, 1) == 0):
        return {"value": None, "status": "undefined", **noted(Reason("fractional_scores"))}
    scale = list(range(int(task.scale_min), int(task.scale_max) + 1))
    if np.all(np.mod(x, 1) == 0):
        est = stats.cohen_kappa(x.astype(int).tolist(), y.astype(int).tolist(), labels=scale, weights="quadratic")
        return estimate_dict(est, keep=("value", "status", "note")) | {"weights": "quadratic", "against": "gold"}
    judge_of = dict(zip(scored["target_key"], y, strict=True))
    current = labels[~labels["stale"] & ~labels["adjudicated"]]
    values = []
    for _, group in current.groupby("annotator"):
        pairs = [(float(v), judge_of[k]) for k, v in zip(group["target_key"], group["value"], strict=True) if k in judge_of]
        if len(pairs) >= 2 and all(float(h).is_integer() for h, _ in pairs):
            est = stats.cohen_kappa([int(h) for h, _ in pairs], [int(j) for _, j in pairs], labels=scale, weights="quadratic")
            if est.value is not None:
                values.append(est.value)
    if not values:
        return {"value": None, "status": "undefined", **noted(Reason("fractional_gold"))}
    return {"value": float(np.mean(values)), "status": "ok", "weights": "quadratic", "against": "each annotator",
            **noted(Reason("mean_of_annotators", count=len(values)))}


def _plain_number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def _human_numeric(labels: pd.DataFrame, options: Options, *, level: str) -> dict:
    min_shared = options.min_shared
    current = labels[~labels["stale"] & ~labels["adjudicated"]] if not labels.empty else labels
    annotators = sorted(current["annotator"].unique().tolist()) if not current.empty else []
    multi = current.groupby("target_key")["annotator"].transform("nunique") >= 2 if not current.empty else pd.Series(dtype=bool)
    shared = current[multi] if not current.empty else current
    out: dict[str, Any] = {"n": int(shared["target_key"].nunique()) if not shared.empty else 0, "annotators": annotators}
    if shared.empty:
        note = Reason("no_two_annotators")
        out.update(status="no_data", **noted(note), krippendorff_alpha={
            "ordinal": estimate_dict(Estimate.no_data(note)), "interval": estimate_dict(Estimate.no_data(note))})
        out["pairwise_spearman"] = []
        out["n_pairs_sparse"] = len(annotators) * (len(annotators) - 1) // 2
        out["ceiling"] = human_ceiling(out, pairs_key="pairwise_spearman", counts=None, values=[], level=level, options=options)
        return out
    numbers = shared["value"].astype(float)
    domain = np.sort(numbers.unique())
    counts = _unit_counts(shared["target_key"], pd.Series(np.searchsorted(domain, numbers.to_numpy())), len(domain))
    values = domain.tolist()
    out["krippendorff_alpha"] = {
        "ordinal": estimate_dict(stats.krippendorff_alpha_counts(counts, level="ordinal", values=values)),
        "interval": estimate_dict(stats.krippendorff_alpha_counts(counts, level="interval", values=values)),
    }
    co = stats.co_rated_pairs(shared["target_key"], shared["annotator"], min_shared=min_shared)
    pairs, number = [], numbers.to_numpy()
    by_pair = np.argsort(co["pair"], kind="stable")
    bounds = np.searchsorted(co["pair"][by_pair], np.arange(len(co["a"]) + 1))
    for i in range(len(co["a"])):
        rows = by_pair[bounds[i]:bounds[i + 1]]
        est = stats.spearman_rho(number[co["rows_a"][rows]], number[co["rows_b"][rows]])
        pairs.append({"a": co["raters"][co["a"][i]], "b": co["raters"][co["b"][i]], "n": est.n, "value": est.value,
                      "status": est.status, **est.note_fields()})
    out["pairwise_spearman"] = pairs
    out["n_pairs_sparse"] = len(annotators) * (len(annotators) - 1) // 2 - len(pairs)
    out["ceiling"] = human_ceiling(out, pairs_key="pairwise_spearman", counts=counts, values=values, level=level, options=options)
    return out


def _per_annotator_numeric(labels: pd.DataFrame, merged: pd.DataFrame) -> list[dict]:
    judged = merged[(merged["status"] == "ok") & merged["judge"].notna() & (merged["excluded"] != "fewshot")]
    current = labels[~labels["stale"] & ~labels["adjudicated"]] if not labels.empty else labels
    out = []
    for annotator, group in (current.groupby("annotator") if not current.empty else []):
        pairs = group[["target_key", "value"]].merge(judged[["target_key", "judge"]], on="target_key")
        est = (stats.spearman_rho(pairs["value"].astype(float).to_numpy(), pairs["judge"].astype(float).to_numpy())
               if len(pairs) else Estimate.no_data(Reason("no_shared_targets_judge")))
        out.append({"annotator": annotator, "n": est.n, "spearman_rho": estimate_dict(est, keep=("value", "status", "note"))})
    return out
