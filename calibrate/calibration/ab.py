"""A/B test between two RAG systems (or two retrieval settings) on the same questions.

`compare_systems` takes the samples of one dataset, splits them by a field (for example
`metadata.system`) into system A and system B, pairs them by question, measures one metric
per sample from the experts' gold or from a judge, and tests the paired differences:

- **Pairing.** A sample's question key is its `metadata.query_id` when it has one, else its
  question text exactly. A question with a value on both sides is a pair; one with a value
  on one side only is unpaired (counted). When one side has several samples of a question
  (repeated runs), their values are averaged into one (counted in `n_repeated`).
- **Direction.** Every difference is B − A: positive means B scores higher. `mean_a` and
  `mean_b` are over the pairs; `relative_improvement` = (mean_b − mean_a) / |mean_a|.
- **Values.** From `calibration.sample_metric`: the human side of a metric task
  (faithfulness, context_precision, answer_relevancy, context_recall) is the gold the report
  calibrates metric judges against (`calibration.task_gold`: direct expert values first,
  faithfulness and context precision otherwise derived from claim_support and
  context_relevance gold), so the two never disagree; the judge side is a metric judge's
  per-sample scores (faithfulness and context precision also from a claim_support or
  context_relevance judge).
- **Tests.** Paired t-test, Wilcoxon signed-rank (zero differences dropped), and a paired
  bootstrap interval of the mean difference (questions resampled with both their values),
  from `calibrate.stats.paired`.

The result's `data` is the JSON contract of docs/cli.md (`calibrate ab`); the renderers are
in `calibrate/reports/ab_report.py`. Like `calibration`, this module takes a Session and
never imports Flask.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import select as sa_select
from sqlmodel import Session, select

from calibrate import __version__, lookup, stats
from calibrate.calibration.frames import (
    claim_totals,
    fewshot_keys,
    labels_frame,
    per_sample,
    require_verdicts,
    sample_field_values,
    target_positions,
)
from calibrate.calibration.rag import (
    DERIVED_GOLD,
    gold_relevance,
    judge_faithfulness,
    judge_relevance,
    metric_scores,
    task_gold,
)
from calibrate.calibration.retrieval import (
    RETRIEVAL_METRICS,
    id_lists,
)
from calibrate.errors import ABError, CalibrationError
from calibrate.gold import (
    categorical_gold,
    numeric_gold,
)
from calibrate.models import (
    Dataset,
    Judge,
    Sample,
    Task,
)
from calibrate.reasons import Reason
from calibrate.tasks import METRIC_TASKS

#: Metrics with a fixed name (the metric tasks, whose human values are the report's gold and
#: whose judge values are a metric judge's scores, and MRR); retrieval metrics take a cut-off
#: (`ndcg@10`), and any ordinal or continuous task on whole samples (such as answer_quality)
#: is a metric too.
NAMED_METRICS = (*METRIC_TASKS, "mrr")
CUTOFF_METRICS = ("ndcg", "recall", "precision", "f1")
_CUTOFF = re.compile(r"^(ndcg|recall|precision|f1)@([1-9][0-9]{0,5})$")


@dataclass
class ABOptions:
    bootstrap: int = 2000
    confidence: float = 0.95
    seed: int = 0
    ci_method: str = "percentile"


@dataclass
class ABResult:
    """The comparison; `data` has exactly the JSON shape of docs/cli.md (`calibrate ab`)."""

    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class SampleValues:
    """One metric per sample (index: sample primary key; NaN where undefined) and where it came from."""

    values: pd.Series
    source: str
    note: Reason | None = None  # what the values were computed from, when that needs saying


def sample_metric(session: Session, dataset: Dataset, metric: str, *, judge: Judge | None = None, k: int = 10) -> SampleValues:
    """Return a metric per sample from the human gold (judge None) or from a judge's verdicts.

    `metric`: "faithfulness", "context_precision", a retrieval metric ("recall", "precision",
    "f1", "ndcg" at cut-off `k`, or "mrr"), or the name of an ordinal or continuous task on
    whole samples (such as answer_quality: the gold mean or adjudicated value, or the judge's
    score). Retrieval metrics from the human side use the samples' retrieved_ids and
    relevant_ids when any sample carries both, else the context_relevance gold; from a judge,
    its context_relevance verdicts. A metric judge of faithfulness or context_precision gives
    its own per-sample scores. The human faithfulness and context precision are `task_gold`'s,
    the gold the report calibrates metric judges against (direct expert values first, else
    derived), so an A/B test and a report never disagree on a sample's human value.
    """
    side = f"judge {judge.name}" if judge is not None else "the human gold"
    if judge is not None and metric in DERIVED_GOLD:
        scores = metric_scores(session, dataset, judge, metric, None)
        if scores is not None:  # a metric judge: its own per-sample scores
            return SampleValues(scores, f"{metric}: {side} (metric judge)")
    if judge is None and metric in DERIVED_GOLD:
        task = lookup.task(session, metric)
        gold = task_gold(session, dataset, task, labels_frame(session, dataset, task))
        direct = int((gold["gold_source"] != f"derived:{DERIVED_GOLD[metric]}").sum()) if len(gold) else 0
        return SampleValues(per_sample(gold["sample_id"].to_numpy(dtype=np.int64), gold["gold"].astype(float).to_numpy()),
                            f"{DERIVED_GOLD[metric]}: {side}" + (f" (direct {metric} values for {direct} samples)" if direct else ""))
    if metric == "faithfulness":
        task = lookup.task(session, "claim_support")
        totals = claim_totals(session, dataset)
        excluded = set(task.excluded or [])
        values, _ = judge_faithfulness(require_verdicts(session, dataset, task, judge), totals, excluded=excluded,
                                       skip=fewshot_keys(session, judge))
        return SampleValues(values, f"claim_support: {side}")
    if metric == "context_precision" or metric in RETRIEVAL_METRICS:
        if metric in RETRIEVAL_METRICS and judge is None:
            ids, retrieved, relevant, _ = id_lists(session, dataset)
            if len(ids):
                rel, n_relevant = stats.relevance_matrix(retrieved, relevant)
                per_query = stats.per_query_metrics(rel, n_relevant, k=k)
                return SampleValues(per_sample(ids, per_query[RETRIEVAL_METRICS[metric]]), "ids", Reason("retrieval_source_ids"))
        task = lookup.task(session, "context_relevance")
        if judge is None:
            labels = labels_frame(session, dataset, task)
            samples, rel = gold_relevance(categorical_gold(labels), target_positions(labels, None))
            source = "context_relevance_gold"
        else:
            samples, rel = judge_relevance(require_verdicts(session, dataset, task, judge))
            source = "context_relevance_judge"
        if metric == "context_precision":
            return SampleValues(per_sample(samples, stats.context_precision(rel)), f"context_relevance: {side}")
        per_query = stats.per_query_metrics(rel, rel.sum(axis=1), k=k)
        return SampleValues(per_sample(samples, per_query[RETRIEVAL_METRICS[metric]]), source, Reason(f"retrieval_source_{source}"))
    task = session.exec(select(Task).where(Task.name == metric)).first()
    if task is None or task.target != "sample" or task.kind not in ("ordinal", "continuous"):
        scored = ", ".join(name for name in session.exec(select(Task.name).where(Task.target == "sample",
                                                                               Task.kind.in_(("ordinal", "continuous")))
                                                         .order_by(Task.id)).all() if name not in DERIVED_GOLD)
        raise CalibrationError(f"unknown metric {metric!r} (metrics: faithfulness, context_precision, ndcg@K, recall@K, "
                               f"precision@K, f1@K, mrr{', ' + scored if scored else ''})")
    if judge is None:
        gold = numeric_gold(labels_frame(session, dataset, task))
        return SampleValues(per_sample(gold["sample_id"].to_numpy(dtype=np.int64), gold["gold"].astype(float).to_numpy()),
                            f"{task.name}: {side} (adjudicated value, else the mean of the annotators)")
    verdicts = require_verdicts(session, dataset, task, judge)
    usable = verdicts[(verdicts["status"] == "ok") & verdicts["value"].notna()]
    return SampleValues(per_sample(usable["sample_id"].to_numpy(dtype=np.int64), usable["value"].astype(float).to_numpy()),
                        f"{task.name}: {side}")


def parse_metric(metric: str) -> tuple[str, int | None]:
    """Return (metric name, cut-off K or None): "ndcg@10" → ("ndcg", 10)."""
    text = metric.strip().lower()
    match = _CUTOFF.match(text)
    if match:
        return match.group(1), int(match.group(2))
    if text in CUTOFF_METRICS:
        raise ABError(f"metric {metric!r} needs a cut-off, for example {text}@10")
    return (text if text in NAMED_METRICS else metric.strip()), None


def question_keys(session: Session, sample_ids: list[int]) -> dict[int, tuple[str, str]]:
    """Return sample id → (key, how): `metadata.query_id` when present, else the question text."""
    out: dict[int, tuple[str, str]] = {}
    chunk = 5000
    for start in range(0, len(sample_ids), chunk):
        part = sample_ids[start: start + chunk]
        for sid, question, meta in session.execute(sa_select(Sample.id, Sample.question, Sample.meta).where(Sample.id.in_(part))):
            query_id = meta.get("query_id") if isinstance(meta, dict) else None
            out[sid] = (str(query_id), "query_id") if query_id is not None and str(query_id) != "" else (question, "question")
    return out


def _side(values: pd.Series, samples: list[int], keys: dict[int, tuple[str, str]]) -> tuple[pd.Series, dict[str, list[int]], int, int]:
    """Return the side's value per question key, the samples behind each, undefined samples, repeated keys."""
    present = values.reindex(samples)
    defined = present[np.isfinite(present.to_numpy(dtype=float))]
    frame = pd.DataFrame({"key": [keys[s][0] for s in defined.index], "value": defined.to_numpy(dtype=float),
                          "sample": defined.index.to_numpy()})
    grouped = frame.groupby("key", sort=True)
    means = grouped["value"].mean()
    members = {key: list(part) for key, part in grouped["sample"]}
    repeated = int((grouped.size() > 1).sum())
    return means, members, len(samples) - len(defined), repeated


def compare_systems(session: Session, dataset_name: str, *, by: str, a: str, b: str, metric: str,
                    source: str = "human", options: ABOptions | None = None) -> ABResult:
    """Compare system `a` with system `b` (values of the field `by`) on `metric`, paired by question.

    `source` is "human" (the experts' gold, or the samples' id lists for retrieval metrics)
    or the name of a judge. Raises ABError or CalibrationError naming what exists when the
    dataset, field, value, judge or metric is unknown, or when no question can be paired.
    """
    options = options or ABOptions()
    dataset = lookup.dataset(session, dataset_name)
    name, k = parse_metric(metric)
    judge = None if source == "human" else lookup.judge(session, source)
    groups = sample_field_values(session, dataset, by)
    present = sorted({v for v in groups.values() if v is not None})
    for flag, value in (("--a", a), ("--b", b)):
        if value not in present:
            shown = ", ".join(present[:20]) + (f", … ({len(present)} values)" if len(present) > 20 else "")
            raise ABError(f"no sample of {dataset.name} has {by} = {value!r} ({flag}; values: {shown or 'none'})")
    if a == b:
        raise ABError(f"--a and --b are the same value ({a!r}): compare two different systems")
    samples_a = sorted(s for s, v in groups.items() if v == a)
    samples_b = sorted(s for s, v in groups.items() if v == b)
    per_sample = sample_metric(session, dataset, name, judge=judge, k=k or 10)
    if not np.isfinite(per_sample.values.to_numpy(dtype=float)).any():
        raise ABError(f"no sample of {dataset.name} has a {metric} value (from {per_sample.source}): nothing to compare")
    keys = question_keys(session, samples_a + samples_b)
    mean_a_of, members_a, undefined_a, repeated_a = _side(per_sample.values, samples_a, keys)
    mean_b_of, members_b, undefined_b, repeated_b = _side(per_sample.values, samples_b, keys)
    paired = mean_a_of.index.intersection(mean_b_of.index).sort_values()
    how = {h for s in samples_a + samples_b for _, h in [keys[s]]}
    paired_by = ("metadata.query_id" if how == {"query_id"} else "the question text" if how == {"question"}
                 else "metadata.query_id where the sample has one, else the question text")
    if len(paired) == 0:
        raise ABError(
            f"no question has a {metric} value for both {by}={a} and {by}={b} (paired by {paired_by}): "
            f"{by}={a} has {len(samples_a)} samples, {len(samples_a) - undefined_a} with a value; "
            f"{by}={b} has {len(samples_b)} samples, {len(samples_b) - undefined_b} with a value")
    x = mean_a_of[paired].to_numpy(dtype=float)
    y = mean_b_of[paired].to_numpy(dtype=float)
    boot = stats.paired_bootstrap_diff(x, y, n_resamples=options.bootstrap, confidence=options.confidence,
                                       method=options.ci_method, seed=options.seed)
    ttest = stats.paired_t_test(x, y)
    wilcoxon = stats.wilcoxon_signed_rank(x, y)
    relative = stats.relative_improvement(x, y)

    external = _external_ids_of(session, [s for key in paired for s in (*members_a[key], *members_b[key])])
    unpaired_a = len(mean_a_of) - len(paired)
    unpaired_b = len(mean_b_of) - len(paired)
    data: dict[str, Any] = {
        "dataset": dataset.name,
        "by": by, "a": a, "b": b,
        "metric": metric, "k": k,
        "source": source,
        "values_from": per_sample.source,
        "paired_by": paired_by,
        "direction": "B − A: a positive difference means B scores higher",
        "n_pairs": len(paired),
        "n_unpaired": unpaired_a + unpaired_b,
        "unpaired": {"a": unpaired_a, "b": unpaired_b},
        "n_undefined": {"a": undefined_a, "b": undefined_b},
        "n_repeated": {"a": repeated_a, "b": repeated_b},
        "mean_a": float(x.mean()),
        "mean_b": float(y.mean()),
        "relative_improvement": relative.value,
        "difference": {"value": boot.value, "ci": list(boot.ci) if boot.ci else None, "p_value": boot.p_value,
                       "confidence": options.confidence, "method": options.ci_method, "n_resamples": options.bootstrap,
                       "seed": options.seed, "status": boot.status, **boot.note_fields()},
        "ttest": {"t": ttest.value, "p_value": ttest.p_value, "df": ttest.extra.get("df"), "status": ttest.status,
                  **ttest.note_fields()},
        "wilcoxon": {"statistic": wilcoxon.value, "p_value": wilcoxon.p_value, "n_nonzero": wilcoxon.extra.get("n_nonzero"),
                     "status": wilcoxon.status, **wilcoxon.note_fields()},
        **_notes(per_sample.note, relative, undefined_a, undefined_b, repeated_a, repeated_b, unpaired_a, unpaired_b,
                 by, a, b),
        "pairs": [{"key": key, "a": float(va), "b": float(vb), "difference": float(vb - va),
                   "samples_a": [external[s] for s in members_a[key]], "samples_b": [external[s] for s in members_b[key]]}
                  for key, va, vb in zip(paired, x, y, strict=True)],
        "generated_at": datetime.now(UTC).replace(microsecond=0).isoformat(),
        "calibrate_version": __version__,
    }
    return ABResult(data=data)


def _external_ids_of(session: Session, sample_ids: list[int]) -> dict[int, str]:
    out: dict[int, str] = {}
    for start in range(0, len(sample_ids), 5000):
        part = sample_ids[start: start + 5000]
        out.update(session.execute(sa_select(Sample.id, Sample.external_id).where(Sample.id.in_(part))).all())
    return out


def _notes(source_note: Reason | None, relative: Any, undefined_a: int, undefined_b: int, repeated_a: int, repeated_b: int,
           unpaired_a: int, unpaired_b: int, by: str, a: str, b: str) -> dict:
    """Return `notes` (English sentences) and `reasons` (the same, as data, one for one)."""
    found = [source_note] if source_note is not None else []
    if relative.value is None and relative.note:
        found.append(Reason("relative_undefined", reason=relative.reason or Reason("unexpected", message=relative.note)))
    for code, counts in (("ab_no_value", (undefined_a, undefined_b)), ("ab_repeated", (repeated_a, repeated_b)),
                         ("ab_unpaired", (unpaired_a, unpaired_b))):
        found += [Reason(code, count=n, by=by, value=side) for side, n in zip((a, b), counts, strict=True) if n]
    return {"notes": [r.text() for r in found], "reasons": [r.to_dict() for r in found]}


__all__ = ["ABError", "ABOptions", "ABResult", "compare_systems", "parse_metric", "question_keys"]
