"""RAG metrics from the same labels and verdicts: faithfulness (claim_support) and context precision (context_relevance).

Per-sample values from one side (the human gold or the judge's verdicts), computed by the pure
functions of stats.rag; the report's `rag` section compares the two sides. The metric tasks
faithfulness and context_precision also get their human gold here (`task_gold`): a direct
expert value where there is one, else the metric derived from the claim or context gold.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sqlmodel import Session

from calibrate import lookup, stats
from calibrate.calibration.frames import (
    claim_totals,
    labels_frame,
    per_sample,
    target_positions,
    verdicts_frame,
)
from calibrate.calibration.options import Options
from calibrate.calibration.sections import (
    estimate_dict,
)
from calibrate.gold import (
    categorical_gold,
    numeric_gold,
)
from calibrate.models import (
    LABEL_KINDS,
    Dataset,
    Judge,
    Task,
)
from calibrate.reasons import Reason, noted
from calibrate.stats import Estimate
from calibrate.task_values import format_number


def human_faithfulness(gold: pd.DataFrame, totals: pd.Series, *, excluded: set[str], skip: set[str] = frozenset()) -> tuple[pd.Series, int]:
    """Return the gold faithfulness per sample and the claims of those samples left without gold.

    Per sample with any gold row (ties included): supported / claims with a gold label,
    leaving out claims whose gold is an excluded label (not_applicable) and the keys in
    `skip` (few-shot examples). A claim without gold (a tie, or not labelled) is unknown, not
    unsupported: it is left out and counted.
    """
    if gold.empty:
        return per_sample(np.zeros(0), np.zeros(0)), 0
    rows = gold[~gold["target_key"].isin(skip)] if skip else gold
    samples = pd.unique(gold["sample_id"]).astype(np.int64)
    has_gold, is_excluded, is_supported = value_flags(rows["gold"], excluded, "supported")
    counted = has_gold & ~is_excluded
    supported = is_supported & counted
    codes = pd.Index(samples).get_indexer(rows["sample_id"].to_numpy(dtype=np.int64))
    s, c = stats.faithfulness_counts(codes, supported, counted, n_groups=len(samples))
    with_gold = np.bincount(codes, weights=has_gold.astype(float), minlength=len(samples))
    claims = totals.reindex(samples, fill_value=0).to_numpy()
    n_no_gold = int(np.clip(claims - with_gold - _skipped_per(gold, skip, samples), 0, None).sum())
    return per_sample(samples, stats.faithfulness(s, c)), n_no_gold


def value_flags(values: pd.Series, excluded: set[str], positive: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return per row whether the value is present (`notna`), one of `excluded` (`isin`) and equal to `positive`:
    the three comparisons made once per distinct value (10^6 labels or verdicts hold a few), the rows' flags taken
    by their codes."""
    codes, uniques = pd.factorize(values)
    present = codes >= 0
    distinct = pd.Series(np.asarray(uniques, dtype=object))
    in_excluded = np.append(distinct.isin(excluded).to_numpy(dtype=bool), False)  # code -1 (missing): the last, False
    equal = np.append((distinct == positive).to_numpy(dtype=bool), False)
    return present, in_excluded[codes], equal[codes]


def _skipped_per(frame: pd.DataFrame, skip: set[str], samples: np.ndarray) -> np.ndarray:
    """Return per sample how many of its targets are in `skip` (few-shot examples)."""
    if not skip:
        return np.zeros(len(samples))
    part = frame[frame["target_key"].isin(skip)].drop_duplicates("target_key")
    codes = pd.Index(samples).get_indexer(part["sample_id"].to_numpy(dtype=np.int64))
    return np.bincount(codes[codes >= 0], minlength=len(samples)).astype(float)


def judge_faithfulness(verdicts: pd.DataFrame, totals: pd.Series, *, excluded: set[str],
                       skip: set[str] = frozenset()) -> tuple[pd.Series, int]:
    """Return the judge's faithfulness per sample and the claims counted without a usable verdict.

    Per sample with any verdict: supported verdicts / the sample's active claims, less the
    claims the judge called an excluded label (not_applicable) and few-shot examples (`skip`).
    The division is by the claims, not by the verdicts returned: a claim whose verdict
    failed, could not be parsed, or was never given counts as not supported.
    """
    if verdicts.empty:
        return per_sample(np.zeros(0), np.zeros(0)), 0
    rows = verdicts[verdicts["active"].astype(bool)] if "active" in verdicts else verdicts
    samples = pd.unique(rows["sample_id"]).astype(np.int64)
    rows = rows[~rows["target_key"].isin(skip)] if skip else rows
    valued, is_excluded, is_supported = value_flags(rows["value"], excluded, "supported")
    ok = value_flags(rows["status"], set(), "ok")[2] & valued
    excluded_rows = ok & is_excluded
    usable = ok & ~excluded_rows
    supported = usable & is_supported
    codes = pd.Index(samples).get_indexer(rows["sample_id"].to_numpy(dtype=np.int64))
    n = len(samples)
    claims = totals.reindex(samples, fill_value=0).to_numpy(dtype=float)
    counted = np.clip(claims - _skipped_per(verdicts, skip, samples)
                      - np.bincount(codes, weights=excluded_rows.astype(float), minlength=n), 0, None)
    hits = np.bincount(codes, weights=supported.astype(float), minlength=n)
    valued = np.bincount(codes, weights=usable.astype(float), minlength=n)
    counted = np.maximum(counted, valued)  # verdicts on claims the totals do not know (never expected)
    return per_sample(samples, stats.faithfulness(hits, counted)), int((counted - valued).sum())


def relevance_by_sample(frame: pd.DataFrame, relevant: np.ndarray, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the sample ids and their rank-ordered relevance matrix (samples × ranks, bool).

    `frame` has one row per judged context (`sample_id`), `relevant` says whether each is
    relevant and `ranks` gives its 0-based rank; ranks without a row are not relevant.
    """
    keep = ~pd.isna(ranks)
    sample_col = frame["sample_id"].to_numpy(dtype=np.int64)
    samples = pd.unique(sample_col).astype(np.int64)
    codes = pd.Index(samples).get_indexer(sample_col[keep])
    matrix = stats.ranked_matrix(codes, np.asarray(ranks[keep], dtype=np.int64), np.asarray(relevant, dtype=float)[keep],
                                 n_groups=len(samples))
    return samples, matrix.astype(bool)


def gold_rows(merged: pd.DataFrame) -> pd.DataFrame:
    """Return the targets of a merged frame that have human gold rows (ties included, gold None)."""
    return merged[merged["gold_source"].notna()] if "gold_source" in merged else merged.iloc[:0]


def gold_relevance(gold: pd.DataFrame, positions: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    ranks = gold["target_key"].map(positions).to_numpy(dtype=float)
    return relevance_by_sample(gold, (gold["gold"] == "relevant").to_numpy(), ranks)


def judge_relevance(verdicts: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    rows = verdicts[verdicts["active"].astype(bool)] if "active" in verdicts else verdicts
    relevant = ((rows["status"] == "ok") & (rows["value"] == "relevant")).to_numpy()
    return relevance_by_sample(rows, relevant, rows["position"].to_numpy(dtype=float))


def _human_vs_judge(human: pd.Series, judge: pd.Series | None, options: Options) -> dict:
    """Return the per-sample metric's mean from gold and from the judge (each over its own answers), `paired`
    (both means and their difference over the answers that have both), and their Spearman correlation."""
    human = human[np.isfinite(human.to_numpy())]
    out: dict[str, Any] = {"human_mean": float(human.mean()) if len(human) else None, "n_human": len(human)}
    if judge is not None:
        judge = judge[np.isfinite(judge.to_numpy())]
        both = human.index.intersection(judge.index).sort_values()  # by sample id: the same draws on every database
        out["judge_mean"] = float(judge.mean()) if len(judge) else None
        out["n_judge"] = len(judge)
        out["paired"] = paired_means(human[both].to_numpy(dtype=float), judge[both].to_numpy(dtype=float), options)
        est = stats.spearman_rho(human[both].to_numpy(), judge[both].to_numpy()) if len(both) else Estimate.no_data(Reason("no_pairs_both_values"))
        out["spearman_rho"] = estimate_dict(est, keep=("value", "p_value", "status", "note")) | {"n": est.n}
    return out


def paired_means(human: np.ndarray, judge: np.ndarray, options: Options) -> dict:
    """Return `paired` {n, human_mean, judge_mean, difference, ci} over the answers that have both values.

    `difference` is judge − human (positive: the judge overstates the metric), its `ci` a paired
    bootstrap over answers (an answer keeps both of its values; `stats.paired_bootstrap_diff` with
    the report's resamples, confidence, interval method and seed). The two own-answer means beside
    it (`human_mean`, `judge_mean` of the block) can differ from these when the sides cover
    different answers; the comparison is this one.
    """
    n = len(human)
    if n == 0:
        none = Reason("no_pairs_both_values")
        return {"n": 0, "human_mean": None, "judge_mean": None, "difference": None, "ci": None, "status": "no_data",
                **noted(none)}
    diff = stats.paired_bootstrap_diff(human, judge, n_resamples=options.bootstrap, confidence=options.confidence,
                                       method=options.ci_method, seed=options.seed)
    return {"n": n, "human_mean": float(human.mean()), "judge_mean": float(judge.mean()), "difference": diff.value,
            "ci": list(diff.ci) if diff.ci else None, "status": diff.status, **diff.note_fields()}


def faithfulness_section(gold: pd.DataFrame, verdicts: pd.DataFrame | None, totals: pd.Series, excluded: set[str], fewshot: set[str],
                  metric: pd.Series | None = None, *, options: Options | None = None) -> dict:
    """Faithfulness per sample (supported / claims) from the gold and from the judge.

    `metric`: the judge's per-sample scores when it is a faithfulness metric judge (no
    claim_support verdicts of its own).
    """
    human, no_gold = human_faithfulness(gold, totals, excluded=excluded, skip=fewshot)
    judge, no_verdict = (judge_faithfulness(verdicts, totals, excluded=excluded, skip=fewshot)
                         if verdicts is not None else (metric, 0))
    out = _human_vs_judge(human, judge, options or Options())
    out["n_claims_no_gold"] = no_gold
    if verdicts is not None:
        out["n_claims_no_verdict"] = no_verdict
    return out


def context_precision_section(gold_relevance: tuple[np.ndarray, np.ndarray], verdicts: pd.DataFrame | None,
                       metric: pd.Series | None = None, *, options: Options | None = None) -> dict:
    """Rank-weighted context precision per sample, (1/R) Σ_k precision@k · rel_k, from gold and judge.

    Contexts keep their retrieval rank; one without gold (or without a usable verdict) counts
    as not relevant at its rank. A sample with no relevant context scores 0. `metric`: the
    judge's per-sample scores when it is a context_precision metric judge.
    """
    samples, rel = gold_relevance
    human = per_sample(samples, stats.context_precision(rel))
    judge = metric
    if verdicts is not None:
        j_samples, j_rel = judge_relevance(verdicts)
        judge = per_sample(j_samples, stats.context_precision(j_rel))
    return _human_vs_judge(human, judge, options or Options())


# Metric tasks whose human gold is derived from another task's labels, per sample, with the same
# computation as the report's `rag` section (human_faithfulness, stats.context_precision).
DERIVED_GOLD = {"faithfulness": "claim_support", "context_precision": "context_relevance"}


def task_gold(session: Session, dataset: Dataset, task: Task, labels: pd.DataFrame,
              in_split: set[int] | None = None) -> pd.DataFrame:
    """Return the gold of a task per target, as `categorical_gold`/`numeric_gold` do.

    For the metric tasks faithfulness and context_precision (DERIVED_GOLD), a sample's gold is
    its direct human value where experts gave one (adjudicated, else their mean: they judged
    the metric itself), else the metric computed from the claim_support or context_relevance
    gold exactly as the report's `rag` section does (gold_source "derived:TASK"); samples whose
    derived value is undefined (no countable claim with gold) have none. Other metric tasks
    have direct labels only.
    """
    if task.kind in LABEL_KINDS:
        return categorical_gold(labels)
    direct = numeric_gold(labels)
    source_name = DERIVED_GOLD.get(task.name)
    if source_name is None:
        return direct
    source, source_labels, totals = metric_source(session, dataset, source_name, in_split)
    values = derived_metric(source, categorical_gold(source_labels), totals, target_positions(source_labels, None))
    keys = [f"sample:{sid}" for sid in values.index]
    derived = pd.DataFrame({"target_key": keys, "sample_id": values.index.to_numpy(dtype=np.int64),
                            "gold": values.to_numpy(), "gold_source": f"derived:{source_name}"})
    # Metric tasks judge whole samples: a sample with a direct value keeps only that. (By sample id,
    # not key: callers such as compare key targets by integer id, derived rows by "sample:ID".)
    derived = derived[~derived["sample_id"].isin(direct["sample_id"])]
    return pd.concat([direct, derived], ignore_index=True) if len(direct) else derived.reset_index(drop=True)


def metric_source(session: Session, dataset: Dataset, source_name: str,
                   in_split: set[int] | None) -> tuple[Task, pd.DataFrame, pd.Series | None]:
    """Return the source task of a derived metric, its labels (in the split) and, for
    claim_support, the claims per sample (faithfulness's denominator)."""
    source = lookup.task(session, source_name)
    source_labels = labels_frame(session, dataset, source)
    if in_split is not None:
        source_labels = source_labels[source_labels["sample_id"].isin(in_split)].reset_index(drop=True)
    totals = claim_totals(session, dataset) if source_name == "claim_support" else None
    return source, source_labels, totals


def derived_metric(source: Task, gold: pd.DataFrame, totals: pd.Series | None, positions: dict[str, int]) -> pd.Series:
    """Return the defined per-sample metric computed from a gold frame of its source task
    (faithfulness from claim_support, context precision from context_relevance)."""
    if source.name == "claim_support":
        values, _ = human_faithfulness(gold, totals, excluded=set(source.excluded or []))
    else:
        samples, rel = gold_relevance(gold, positions)
        values = per_sample(samples, stats.context_precision(rel))
    return values[np.isfinite(values.to_numpy())]


def annotator_metric_labels(session: Session, dataset: Dataset, task: Task, labels: pd.DataFrame,
                            in_split: set[int] | None = None) -> pd.DataFrame:
    """Return a derived-gold metric task's labels plus each annotator's own value per sample.

    An annotator's faithfulness (or context precision) of a sample is the metric computed from
    their own claim_support (context_relevance) labels, as the gold is from everyone's: the
    human–human agreement and the per-annotator rows of a metric task then compare experts on
    the metric itself, and the dashboard has its ceiling. A direct label of the annotator on the
    sample takes precedence, as in `task_gold`. Other tasks: `labels` unchanged.
    """
    source_name = DERIVED_GOLD.get(task.name)
    if source_name is None:
        return labels
    source, source_labels, totals = metric_source(session, dataset, source_name, in_split)
    current = source_labels[~source_labels["stale"] & ~source_labels["adjudicated"]]
    positions = target_positions(source_labels, None)
    direct = set(zip(labels["annotator"], labels["target_key"], strict=True)) if len(labels) else set()
    frames = [labels] if len(labels) else []
    for annotator, own in current.groupby("annotator", sort=True):
        values = derived_metric(source, own[["target_key", "sample_id"]].assign(gold=own["value"].to_numpy()), totals, positions)
        keys = [f"sample:{sid}" for sid in values.index]
        frame = pd.DataFrame({"target_key": keys, "sample_id": values.index.to_numpy(dtype=np.int64), "position": None,
                              "annotator": annotator, "value": [format_number(v) for v in values.to_numpy()],
                              "adjudicated": False, "stale": False})
        frames.append(frame[[(annotator, key) not in direct for key in keys]])
    if not frames:
        return labels
    return pd.concat(frames, ignore_index=True).astype({"adjudicated": bool, "stale": bool})


def metric_scores(session: Session, dataset: Dataset, judge: Judge | None, name: str,
                   in_split: set[int] | None) -> pd.Series | None:
    """Return a metric judge's usable per-sample scores of metric task `name` (None: it has none)."""
    if judge is None:
        return None
    task = lookup.task(session, name)
    verdicts = verdicts_frame(session, dataset, task, judge)
    if in_split is not None:
        verdicts = verdicts[verdicts["sample_id"].isin(in_split)]
    usable = verdicts[(verdicts["status"] == "ok") & verdicts["value"].notna()]
    if usable.empty:
        return None
    return per_sample(usable["sample_id"].to_numpy(dtype=np.int64), usable["value"].astype(float).to_numpy())


def missing_gold_note(task: Task) -> Reason:
    """Return what a report says when a task has verdicts but no human gold at all."""
    if task.name in DERIVED_GOLD:
        return Reason("no_gold_derived", task=task.name, source=DERIVED_GOLD[task.name])
    return Reason("no_gold_metric", task=task.name)
