"""The one live number over stored data: `calibrate estimate`, `monitor`, the Production page, `gate --production`,
the report's estimate block and the dashboard all read and estimate here (docs/statistics.md §17–18).

One definition of each thing an estimate depends on:

- **The estimand** (`Estimand`): a `level` — `answers` (one target per sample: sample tasks, and claim tasks
  read as "every counted claim has the positive label"), `claims`, `contexts` or `steps` (every target) —, the
  `positive` label whose share is estimated (a task with labels; default its first declared label that is
  not excluded), or none for a score task (`metric` "mean"). The default level is `answers` wherever a
  task has it (a context task has only `contexts`, a step task only `steps`), in every command.
- **The targets**: every active target of the task the judge attempted (a verdict row of the judge, its
  first sample), the version's few-shot examples left out (at `answers`, every answer with a few-shot
  claim); a pairwise task's verdict is the one its order rule makes. An answer is attempted when the judge
  has a verdict on each of its active claims.
- **A verdict as a number**: the positive label 1, another counted label 0, an excluded label
  (`not_applicable`) not counted (NaN); a failed or unparsed call is counted and taken as 0 for a share
  (not the positive label) or as the mean usable verdict for a score: the audit's labels correct it like
  any other error (a failed call is an audit candidate like any judged sample, annotation/auto_queue.py).
  At `answers`: not counted when every claim's verdict is excluded, else 1 when every counted claim's is
  positive (a failed claim is not).
- **The labels**: on a dataset with production queues, the audit stream's only (streams.py; triage and
  other labels are counted as `n_outside_audit`, never used), weighted by the draw's probability times the
  pass's response rate (drawn samples still waiting for their labels are assumed missing at random within
  their pass: a weighting-class adjustment); elsewhere every current label, as a uniform draw. The gold is
  gold.py's; a gold that is an excluded label is not counted; a tie has no gold.
- **The weights**: a target weighs 1/π_t (`metadata.inclusion_prob`, 1 when absent), a labelled one
  1/(π_t·π_a); its cluster is its sample.
- **Windows**: the sample's time (calibrate/sample_time.py: `metadata.started_at`, ISO 8601 within calibrate.bounds,
  else the creation time, in UTC);
  day `2026-12-02`, ISO week `2026-W49`, month `2026-12`.

`stats.design.design_estimate` computes every figure from these arrays.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import case, func, literal_column
from sqlalchemy import select as sa_select
from sqlmodel import Session

from calibrate.bounds import MIN_INCLUSION_PROB
from calibrate.calibration.frames import fewshot_keys, labels_frame, part_totals, verdicts_frame
from calibrate.calibration.pairwise import apply_order_rule
from calibrate.calibration.streams import audit_probabilities, stream_assignments, stream_labels
from calibrate.db import read_frame
from calibrate.errors import CalibrationError
from calibrate.gold import gold_frame
from calibrate.judged import ANSWERS, TARGET_KINDS, judging, target_kind
from calibrate.models import AuditDraw, Dataset, Judge, Sample, Task
from calibrate.reasons import Reason
from calibrate.sample_time import time_of
from calibrate.stats.agreement import shared_codes
from calibrate.stats.design import design_estimate, snap

__all__ = ["LEVELS", "WINDOWS", "Estimand", "LiveTargets", "difference_interval", "estimand_for", "estimate_targets", "live_targets",
           "sample_info", "samples_with_targets", "share_interval", "window_bounds", "window_keys"]

# A sample target's level is `answers`; a part kind's is its own (claims, contexts, steps: the registered kind's
# `items`), and a kind that offers its sample-level aggregation (TargetKind.answers: claims) also `answers` (every
# counted part of an answer has the label).
LEVELS = (ANSWERS, *(kind.items for kind in TARGET_KINDS.values() if kind.within))
WINDOWS = ("day", "week", "month")


def levels_of(target: str) -> tuple[str, ...]:
    """Return the levels a task on `target` can be estimated at, its default first (TargetKind.levels)."""
    return target_kind(target).levels


@dataclass(frozen=True)
class Estimand:
    """What a live number estimates: the share of `positive` (or the mean score) among `level`'s targets."""

    level: str
    positive: str | None
    metric: str  # "share" | "mean"

    def to_dict(self) -> dict:
        return {"level": self.level, "positive": self.positive, "metric": self.metric}


def estimand_for(task: Task, *, level: str | None = None, positive: str | None = None) -> Estimand:
    """Return the estimand of a task (defaults in the module docstring), refusing a level or label the task does not have."""
    levels = levels_of(task.target)
    level = level or levels[0]
    if level not in levels:
        raise CalibrationError(Reason("level_not_for_task", level=level, task=task.name, levels=", ".join(levels)))
    judged = judging(task)
    if not judged.kind.labels:
        if positive is not None:
            raise CalibrationError(Reason("positive_not_for_scores", task=task.name, kind=task.kind))
        if judged.target.aggregates(level):
            raise CalibrationError(Reason("answers_need_labels", task=task.name))
        return Estimand(level, None, "mean")
    declared = [lab for lab in (task.labels or []) if lab not in set(task.excluded or [])]
    if positive is None:
        if judged.kind.orders or not declared:
            raise CalibrationError(Reason("needs_positive", task=task.name))
        positive = declared[0]
    elif not judged.kind.orders and positive not in declared:
        raise CalibrationError(Reason("unknown_positive", positive=positive, task=task.name, labels=", ".join(declared)))
    return Estimand(level, positive, "share")


@dataclass
class LiveTargets:
    """Every attempted target of an estimand, as arrays (one row per target), and what was left out."""

    estimand: Estimand
    sample_id: np.ndarray          # the cluster
    yhat: np.ndarray               # the verdict as a number (NaN: not counted)
    failed: np.ndarray             # the call failed or could not be parsed (yhat imputed)
    labelled: np.ndarray           # an audit (or, without queues, any) gold
    y: np.ndarray                  # the gold as a number where labelled (NaN: not counted, or unlabelled)
    pi_t: np.ndarray               # the trace's inclusion probability
    pi_a: np.ndarray               # the audit draw's (response-adjusted) probability where labelled, else NaN
    time: np.ndarray               # datetime64[us, UTC] per target (its sample's)
    labels: str                    # "audit" (a dataset with production queues) or "all"
    target: str = "sample"         # the task's target kind's name (calibrate/judged.py: sample, claim, context, step)
    counts: dict[str, int] = field(default_factory=dict)
    drawn: pd.DataFrame | None = None  # audit draws of the dataset: sample_id, labelled (per task)

    def window_keys(self, by: str) -> np.ndarray:
        """Return each target's window key."""
        return window_keys(pd.Series(self.time), by).to_numpy() if len(self.time) else np.array([], dtype=object)

    @property
    def weighted(self) -> bool:
        """Whether the weights differ between targets (inclusion probabilities or audit draws that are not all 1)."""
        return bool((self.pi_t != 1).any() or (np.nan_to_num(self.pi_a, nan=1.0) != 1).any())


def window_keys(times: pd.Series, by: str) -> pd.Series:
    """Return each time's window: day `2026-12-02`, ISO week `2026-W49`, month `2026-12`."""
    times = pd.to_datetime(times, utc=True)
    if by == "day":
        return times.dt.strftime("%Y-%m-%d")
    if by == "month":
        return times.dt.strftime("%Y-%m")
    iso = times.dt.isocalendar()
    return iso["year"].astype(str) + "-W" + iso["week"].astype(int).map("{:02d}".format)


def window_bounds(key: str, by: str) -> tuple[datetime, datetime]:
    """Return a window's [start, end) in UTC from its key (`2026-12-02`, `2026-W49` or `2026-12`)."""
    if by == "day":
        start = datetime.fromisoformat(key).replace(tzinfo=UTC)
        return start, start + timedelta(days=1)
    if by == "month":
        year, month = (int(part) for part in key.split("-"))
        start = datetime(year, month, 1, tzinfo=UTC)
        return start, datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    year, week = key.split("-W")
    start = datetime.fromisocalendar(int(year), int(week), 1).replace(tzinfo=UTC)
    return start, start + timedelta(days=7)


def _meta_field(session: Session, key: str):
    """Return a column expression of `metadata.KEY` as the database gives it (SQLite's json_extract, PostgreSQL's ->>).

    On SQLite the JSON is parsed only where its text holds KEY or a backslash (an escape): a key that is in neither
    form is not in the object, and json_extract would give NULL — most samples carry no inclusion_prob or started_at,
    and the parse was most of sample_info's time.
    """
    if session.connection().dialect.name == "sqlite":
        may_hold = (func.instr(Sample.meta, literal_column(f"'{key}'")) > 0) | (func.instr(Sample.meta, literal_column("'\\'")) > 0)
        return case((may_hold, func.json_extract(Sample.meta, literal_column(f"'$.{key}'"))), else_=None)
    return Sample.meta.op("->>")(literal_column(f"'{key}'"))


def sample_info(session: Session, dataset: Dataset, *, with_time: bool = True) -> pd.DataFrame:
    """Return per sample (index: sample id): inclusion_prob (NaN when absent) and (`with_time`) its time.

    A stored probability outside [MIN_INCLUSION_PROB, 1] is refused naming the sample (the imports refuse it too);
    a `started_at` that is not a time within calibrate.bounds falls back to the creation time.
    """
    # Only the two metadata fields, extracted by the database and read through the raw cursor: decoding every sample's
    # whole metadata JSON was most of the estimate's time on 10^5 samples (bench/results/estimate.md).
    times = (_meta_field(session, "started_at"), Sample.created_at) if with_time else ()
    query = sa_select(Sample.id, _meta_field(session, "inclusion_prob"), *times).where(Sample.dataset_id == dataset.id)
    frame = read_frame(session, query, ["sample_id", "inclusion_prob", *(["started_at", "created_at"] if with_time else [])])
    prob = pd.to_numeric(frame["inclusion_prob"].astype(object), errors="coerce")
    bad = prob.notna() & ~((prob >= MIN_INCLUSION_PROB) & (prob <= 1))
    if bad.any():
        first = int(frame["sample_id"][bad].iloc[0])
        raise CalibrationError(Reason("inclusion_prob_stored", sample=session.get(Sample, first).external_id,
                                      value=repr(float(prob[bad].iloc[0])), floor=MIN_INCLUSION_PROB))
    index = frame["sample_id"].astype(np.int64).to_numpy()
    if not with_time:
        return pd.DataFrame({"inclusion_prob": prob.to_numpy(dtype=float)}, index=index)
    return pd.DataFrame({"inclusion_prob": prob.to_numpy(dtype=float),
                         "time": time_of(frame["started_at"], frame["created_at"])}, index=index)


def _numbers(values: pd.Series, estimand: Estimand, excluded: set[str]) -> np.ndarray:
    """Return values as the estimand's numbers: 1/0 for the positive label or another one, NaN for an excluded label."""
    text = values.astype(str)
    if estimand.metric == "share":
        out = (text == estimand.positive).to_numpy(dtype=float, copy=True)
    else:
        out = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, copy=True)
    out[text.isin(excluded).to_numpy()] = np.nan
    return out


def numbers_of(values: pd.Series, estimand: Estimand, excluded: set[str]) -> np.ndarray:
    """Return `_numbers` of values computed once per distinct value (10^6 verdicts hold a few): the same numbers."""
    if values.dtype.kind in "fiucb":  # numbers (a score's mean gold): as they are
        return _numbers(values, estimand, excluded)
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    if len(uniques) * 4 > len(values):
        return _numbers(values, estimand, excluded)
    return _numbers(pd.Series(np.asarray(uniques, dtype=object)), estimand, excluded)[codes]


def _labels(session: Session, dataset: Dataset, task: Task, labels: pd.DataFrame | None = None, *,
            streams: bool = True) -> tuple[pd.DataFrame, pd.Series | None, str, int]:
    """Return the labels an estimate uses, each audit sample's draw probability (None without queues), which, and the left out.

    `streams` False: the labels as given, every one a uniform draw (the calibration-time figure's labels, outside the
    production streams).
    """
    labels = labels_frame(session, dataset, task) if labels is None else labels
    labels = labels[~labels["stale"]]
    if not streams:
        return labels, None, "all", 0
    streams = stream_assignments(session, dataset)
    audit_prob = audit_probabilities(streams)
    if audit_prob.empty and (streams.empty or not (streams["stream"] == "triage").any()):
        return labels, None, "all", 0
    kept = stream_labels(labels, streams, "audit")
    outside = int(labels["target_key"].nunique() - kept["target_key"].nunique())
    return kept, audit_prob, "audit", outside


def _response_adjusted(session: Session, dataset: Dataset, audit_prob: pd.Series,
                       labelled_samples: set[int]) -> tuple[pd.Series, pd.DataFrame]:
    """Return each audit sample's π_a times its pass's response rate, and the draws (sample_id, labelled).

    A pass is the draws of one UTC day with one probability (auto_queue draws once a day while budget lasts); its
    response rate is the share of its drawn samples that carry a label of the task.
    """
    rows = session.execute(sa_select(AuditDraw.sample_id, AuditDraw.probability, AuditDraw.created_at)
                           .where(AuditDraw.dataset_id == dataset.id, AuditDraw.drawn.is_(True))).all()
    draws = pd.DataFrame(rows, columns=["sample_id", "probability", "created_at"])
    if draws.empty:
        return audit_prob.astype(float), pd.DataFrame({"sample_id": audit_prob.index.astype(np.int64),
                                                        "labelled": audit_prob.index.isin(list(labelled_samples))})
    draws["sample_id"] = draws["sample_id"].astype(np.int64)
    draws["labelled"] = draws["sample_id"].isin(labelled_samples)
    day = pd.to_datetime(draws["created_at"], utc=True).dt.strftime("%Y-%m-%d")
    rate = draws.groupby([day, draws["probability"].round(12)])["labelled"].transform("mean")
    adjusted = pd.Series((draws["probability"] * rate).to_numpy(dtype=float), index=draws["sample_id"].to_numpy())
    out = audit_prob.astype(float).copy()
    known = out.index.isin(adjusted.index)
    out[known] = adjusted.reindex(out.index[known]).to_numpy()
    return out, draws[["sample_id", "labelled"]]


def _pairwise_ready(task: Task, verdicts: pd.DataFrame, order_rule: str) -> pd.DataFrame:
    if not judging(task).kind.orders:
        return verdicts
    ruled, _ = apply_order_rule(task, verdicts, order_rule)
    return ruled


def live_targets(session: Session, dataset: Dataset, task: Task, judge: Judge, estimand: Estimand, *,
                 samples: set[int] | frozenset[int] | None = None, order_rule: str = "consistent", with_time: bool = True,
                 frames: tuple | None = None, streams: bool = True,
                 totals: Callable[[type], pd.Series] | None = None) -> LiveTargets:
    """Return every attempted target of the estimand with its verdict, gold, weights and time (module docstring).

    `samples`: only these samples (a split, a WHERE, a golden set). `frames`: the judge's verdicts and the task's
    labels as frames.py reads them, when the caller has them (the report), optionally with those labels' gold by
    gold.py's rule (computed once by the report): used when every given label counts here (no production stream
    keeps some out, no sample filter drops any), else the gold is formed again from the labels that count.
    `streams` False: every given label is used as a uniform draw (the calibration-time agreement, outside the
    production streams). `totals`: the active parts per sample of a part table (frames.part_totals), when the caller
    has read them already (the report reads them once per task for this and faithfulness).
    """
    excluded = set(task.excluded or [])
    verdicts, all_labels, *known = frames if frames is not None else (verdicts_frame(session, dataset, task, judge), None)
    verdicts = _pairwise_ready(task, verdicts, order_rule)
    verdicts = verdicts[verdicts["active"]].drop_duplicates("target_key")
    if samples is not None:
        verdicts = verdicts[verdicts["sample_id"].isin(samples)]
    labels, audit_prob, which, outside = _labels(session, dataset, task, all_labels, streams=streams)
    every = which == "all"
    if samples is not None:
        inside = labels["sample_id"].isin(samples)
        every, labels = every and bool(inside.all()), labels[inside]
    fewshot = fewshot_keys(session, judge)
    counts: dict[str, int] = {"n_outside_audit": outside} if which == "audit" else {}

    ok = (verdicts["status"] == "ok") & verdicts["value"].notna()
    yhat = np.where(ok.to_numpy(), numbers_of(verdicts["value"].where(ok, ""), estimand, excluded), np.nan)
    failed = ~ok.to_numpy()
    if estimand.metric == "mean":
        usable = yhat[~failed & ~np.isnan(yhat)]
        yhat[failed] = float(usable.mean()) if usable.size else 0.0
    else:
        yhat[failed] = 0.0
    gold = known[0] if known and every else gold_frame(labels, task.kind)
    gold = gold[gold["gold"].notna()].drop_duplicates("target_key")
    # The gold by the verdicts' and the gold's keys in one integer coding (stats.agreement.shared_codes: the report's
    # categorical keys by their codes, plain text keys factorized once), each gold value made a number once per target.
    codes, gold_codes, n_keys = shared_codes(verdicts["target_key"], gold["target_key"])
    found = gold_codes >= 0
    has_gold, y_of = np.zeros(n_keys, dtype=bool), np.full(n_keys, np.nan)
    has_gold[gold_codes[found]] = True
    y_of[gold_codes[found]] = numbers_of(gold["gold"], estimand, excluded)[found]
    is_fewshot = verdicts["target_key"].isin(fewshot).to_numpy() if fewshot else np.zeros(len(codes), dtype=bool)
    judged = np.zeros(n_keys, dtype=bool)
    judged[codes] = True
    labelled = has_gold[codes]
    frame = pd.DataFrame({"sample_id": verdicts["sample_id"].astype(np.int64).to_numpy(), "yhat": yhat, "failed": failed,
                          "fewshot": is_fewshot, "labelled": labelled, "y": np.where(labelled, y_of[codes], np.nan)})
    counts["n_labelled_unjudged"] = int((~found).sum() + (~judged[gold_codes[found]]).sum())

    kind = judging(task).target
    if kind.aggregates(estimand.level):
        per_sample = totals(kind.row) if totals is not None else part_totals(session, dataset, kind.row)
        frame, few, incomplete = _answers(frame, per_sample)
        counts.update(n_fewshot_excluded=few, n_incomplete_answers=incomplete)
    else:
        counts["n_fewshot_excluded"] = int(frame["fewshot"].sum())
        frame = frame[~frame["fewshot"]]

    info = sample_info(session, dataset, with_time=with_time)
    sample_ids = frame["sample_id"].to_numpy(dtype=np.int64)
    pi_t = info["inclusion_prob"].reindex(sample_ids).to_numpy(dtype=float)
    counts["n_without_inclusion_prob"] = int(np.isnan(pi_t).sum()) if not np.isnan(pi_t).all() else 0
    pi_t = np.where(np.isnan(pi_t), 1.0, pi_t)
    labelled = frame["labelled"].to_numpy(dtype=bool)
    drawn = None
    if audit_prob is not None:
        adjusted, drawn = _response_adjusted(session, dataset, audit_prob, set(frame.loc[frame["labelled"], "sample_id"].astype(int)))
        pi_a = adjusted.reindex(sample_ids).to_numpy(dtype=float)
    else:
        pi_a = np.ones(len(frame))
    pi_a = np.where(labelled, pi_a, np.nan)
    if (labelled & ~(pi_a > 0)).any():  # an audit label whose draw probability is unknown: not a usable audit label
        labelled = labelled & (pi_a > 0)
    time = info["time"].reindex(sample_ids).to_numpy() if with_time else np.array([], dtype="datetime64[us]")
    return LiveTargets(estimand=estimand, sample_id=sample_ids, yhat=frame["yhat"].to_numpy(dtype=float),
                       failed=frame["failed"].to_numpy(dtype=bool), labelled=labelled,
                       y=np.where(labelled, frame["y"].to_numpy(dtype=float), np.nan), pi_t=pi_t, pi_a=pi_a, time=time,
                       labels=which, target=task.target, counts=counts, drawn=drawn)


def samples_with_targets(session: Session, dataset: Dataset, task: Task) -> set[int] | None:
    """Return the samples that have a target of the task (an active claim, context or step), or None for sample tasks
    (all)."""
    model = judging(task).target.row
    if model is None:
        return None
    rows = session.execute(sa_select(model.sample_id).join(Sample, Sample.id == model.sample_id)
                           .where(Sample.dataset_id == dataset.id, model.active.is_(True)).distinct()).all()
    return {int(r[0]) for r in rows}


def _answers(claims: pd.DataFrame, totals: pd.Series) -> tuple[pd.DataFrame, int, int]:
    """Return one row per attempted answer from its claims' rows (module docstring), the answers left out as few-shot
    examples, and those not yet judged on every active claim.

    Counted per answer with one integer coding of the sample ids (sorted: the answers in id order) and a bincount per
    column, not a groupby of a frame of flags.
    """
    sample_ids = claims["sample_id"].to_numpy(dtype=np.int64)
    fewshot = claims["fewshot"].to_numpy(dtype=bool)
    few = pd.unique(sample_ids[fewshot])
    keep = ~np.isin(sample_ids, few) if len(few) else np.ones(len(sample_ids), dtype=bool)
    codes, samples = pd.factorize(sample_ids[keep], sort=True)
    n = len(samples)
    yhat, y = claims["yhat"].to_numpy(dtype=float)[keep], claims["y"].to_numpy(dtype=float)[keep]
    labelled_rows = claims["labelled"].to_numpy(dtype=bool)[keep]
    counted = ~np.isnan(yhat)
    gold_counted = labelled_rows & ~np.isnan(y)

    def per(flags: np.ndarray) -> np.ndarray:
        return np.bincount(codes[flags], minlength=n)

    judged = np.bincount(codes, minlength=n)
    counted_n, positive = per(counted), per(counted & (yhat == 1))
    failed, labelled_n = per(claims["failed"].to_numpy(dtype=bool)[keep]), per(labelled_rows)
    gold_n, gold_positive = per(gold_counted), per(gold_counted & (y == 1))
    complete = judged >= totals.reindex(samples, fill_value=0).to_numpy()
    answer_yhat = np.where(counted_n > 0, (positive == counted_n).astype(float), np.nan)
    labelled = labelled_n == judged
    answer_y = np.where(labelled & (gold_n > 0), (gold_positive == gold_n).astype(float), np.nan)
    out = pd.DataFrame({"sample_id": np.asarray(samples, dtype=np.int64), "yhat": answer_yhat, "failed": failed > 0,
                        "labelled": labelled, "y": answer_y})
    return out[complete].reset_index(drop=True), len(few), int((~complete).sum())


def estimate_targets(targets: LiveTargets, mask: np.ndarray | None = None, *, method: str = "ppi++",
                     alpha: float = 0.05) -> dict[str, Any]:
    """Return the live estimate of the targets in `mask` (all by default): the one place every production figure is made.

    Keys: estimate, ci, method, lambda, status ("ok" | "too_few" | "no_data"), reason, note, n_labelled, n_unlabelled,
    n_failed, n_effective, labels_needed, judge_only, judge_only_ci, interval, classes.
    """
    mask = np.ones(len(targets.sample_id), dtype=bool) if mask is None else mask
    lab = mask & targets.labelled
    lam = {"ppi++": None, "ppi": 1.0, "classical": 0.0}[method]
    est = design_estimate(targets.y[lab], targets.yhat[lab], 1.0 / (targets.pi_t[lab] * targets.pi_a[lab]), targets.pi_t[lab],
                          targets.sample_id[lab], targets.yhat[mask], 1.0 / targets.pi_t[mask], targets.pi_t[mask],
                          targets.sample_id[mask], binary=targets.estimand.metric == "share", alpha=alpha, lam=lam)
    n_labelled = int(lab.sum())
    status = "ok" if est.ok else ("no_data" if n_labelled == 0 or (est.reason and est.reason.code == "no_labels") else "too_few")
    extra = est.extra
    return {"estimate": est.value, "ci": list(est.ci) if est.ci else None, "method": extra.get("method"),
            "lambda": extra.get("lambda"), "status": status, "reason": est.reason.to_dict() if est.reason else None,
            "note": est.note, "n_labelled": n_labelled, "n_unlabelled": int((mask & ~targets.labelled).sum()),
            "n_failed": int((mask & targets.failed).sum()), "n_effective": extra.get("n_effective"),
            "labels_needed": extra.get("labels_needed"), "judge_only": extra.get("judge_only"),
            "judge_only_ci": extra.get("judge_only_ci"), "interval": extra.get("interval"), "classes": extra.get("classes")}


def share_interval(hits: np.ndarray, w: np.ndarray, pi: np.ndarray, cluster: np.ndarray, pi_all: np.ndarray,
                   cluster_all: np.ndarray, *, alpha: float = 0.05) -> dict[str, Any]:
    """Return a weighted share of hits (the judge's agreement) with the live interval: {value, ci, n, status, reason, note}.

    The population is every attempted target (`pi_all`, `cluster_all`); the hits are known on the labelled ones.
    """
    zeros_all = np.zeros(len(pi_all))
    est = design_estimate(hits, np.zeros(len(hits)), w, pi, cluster, zeros_all, 1.0 / pi_all, pi_all, cluster_all,
                          binary=True, alpha=alpha, lam=0.0)
    return {"value": est.value, "ci": list(est.ci) if est.ci else None, "n": int(len(hits)),
            "status": "ok" if est.ok else ("no_data" if not len(hits) else "too_few"),
            "reason": est.reason.to_dict() if est.reason else None, "note": est.note or None}


def difference_interval(a: dict, b: dict) -> list[float] | None:
    """Return the interval of a − b for two independent estimates with intervals (MOVER: Zou & Donner 2008)."""
    if a.get("value") is None or b.get("value") is None or not a.get("ci") or not b.get("ci"):
        return None
    d = a["value"] - b["value"]
    (la, ua), (lb, ub) = a["ci"], b["ci"]
    low = d - math.sqrt((a["value"] - la) ** 2 + (ub - b["value"]) ** 2)
    high = d + math.sqrt((ua - a["value"]) ** 2 + (b["value"] - lb) ** 2)
    return [snap(low, -1.0, 1.0), snap(high, -1.0, 1.0)]
