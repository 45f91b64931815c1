"""An honest number about the live system: the task's mean from the judge's verdicts and the experts' labels.

`calibrate estimate` (docs/cli.md) reads the data here and computes with `calibrate.stats.estimation`
(docs/statistics.md §17). The estimand is the mean of the task's gold as a number over every target
the judge has a usable verdict on:

- a categorical or pairwise task: the share of the positive label (`positive`, default the task's
  first declared label); a score task (ordinal, continuous): the mean score;
- **claim_support**: the share of faithful **answers** (`unit` "answer", `positive` "faithful"), not of claims:
  its targets are answers, faithful when every counted claim is supported (`answer_targets`);
- **labelled** targets have a gold (calibrate/gold.py: adjudicated, else majority, else mean;
  ties give none) and a usable verdict; **unlabelled** targets a usable verdict only;
- a usable verdict: status ok, a value, its claim or context still active, not an excluded label
  (`not_applicable`); a pairwise task's verdict is the one its order rule makes (pairwise.py);
- the judge version's **few-shot examples** are left out entirely (the judge has seen their gold)
  and counted (`n_fewshot_excluded`); so are labelled targets whose gold is an excluded label;
- `split` and `where` (`metadata.FIELD=VALUE`) restrict the samples;
- **weights**: `metadata.inclusion_prob` (π_t in (0, 1]) is a trace's probability of becoming a
  sample; when the labelled targets' samples carry it, every target weighs 1/π_t (the verdicts'
  term too) and a labelled one 1/(π_t·π_a), the Hájek PPI++ of stats/survey.py that `monitor`
  uses (stats docs §18); `weighted` says so. Some labelled with π and some without is refused;
- **production queues**: on a dataset with `queue auto` streams only the audit labels count
  (π_a their draw's probability); triage labels and labels outside the streams are left out and
  counted (`n_outside_audit`): labels chosen on purpose never feed an estimate;
- **windows** (`by_window` day, week, month) group targets by their sample's `metadata.started_at`
  (ISO 8601), else its creation time, and estimate each window with the same method.

Refusals (no labelled targets, a constant gold, sensitivity + specificity ≤ 1 for rogan-gladen, …)
come back as the result's `status` "undefined" with `reason` ({code, …}: a code of calibrate.reasons, listed in `stats.ESTIMATE_REASONS` or
of `REASONS` here) and `note`; the command turns them into an error, never a number.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import func, literal_column
from sqlalchemy import select as sa_select
from sqlmodel import Session

from calibrate import lookup
from calibrate.calibration.calibrated import calibrated_task
from calibrate.calibration.frames import claim_totals, fewshot_keys, labels_frame, verdicts_frame
from calibrate.calibration.pairwise import apply_order_rule
from calibrate.calibration.streams import audit_probabilities, stream_assignments, stream_labels
from calibrate.datasets import split_samples
from calibrate.db import read_frame
from calibrate.errors import CalibrationError
from calibrate.gold import gold_frame
from calibrate.models import Sample, Task
from calibrate.reasons import TEMPLATES, Reason, noted
from calibrate.stats import classical_mean, judge_mean, labels_needed, ppi_mean, rogan_gladen
from calibrate.stats.survey import hajek_mean, hajek_ppi_mean
from calibrate.task_values import has_labels

__all__ = ["CLAIM_SUPPORT", "METHODS", "REASONS", "WINDOWS", "answer_targets", "estimate_block", "estimate_values", "run_estimate",
           "sample_info", "window_keys"]

METHODS = ("ppi++", "ppi", "classical", "rogan-gladen")
WINDOWS = ("day", "week", "month")

#: The task whose targets (claims) are not the estimand's: its estimand is the share of faithful answers.
CLAIM_SUPPORT = "claim_support"
FAITHFUL = "faithful"

#: Refusals that come from the data's shape rather than from a statistic (codes of calibrate.reasons.TEMPLATES).
REASONS: dict[str, str] = {code: str(TEMPLATES[code]) for code in ("not_binary", "mixed_weights")}


def _check(method: str, alpha: float, by_window: str | None, target_width: float) -> None:
    if method not in METHODS:
        raise CalibrationError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    if not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or not 0 < alpha < 1:
        raise CalibrationError(f"alpha must lie strictly between 0 and 1, not {alpha!r}")
    if by_window is not None and by_window not in WINDOWS:
        raise CalibrationError(f"by-window must be one of {', '.join(WINDOWS)}, not {by_window!r}")
    if not isinstance(target_width, (int, float)) or not math.isfinite(target_width) or not 0 < target_width <= 1:
        raise CalibrationError(f"target-width must lie in (0, 1], not {target_width!r}")


def _where_samples(session: Session, dataset, where: str) -> set[int]:
    """Return the ids of the samples whose `metadata.FIELD` equals VALUE (as text)."""
    name, sep, value = where.partition("=")
    if not sep or not name.startswith("metadata.") or len(name) <= len("metadata."):
        raise CalibrationError(f"--where must be metadata.FIELD=VALUE, got {where!r}")
    key = name.removeprefix("metadata.")
    rows = session.execute(sa_select(Sample.id, Sample.meta).where(Sample.dataset_id == dataset.id)).all()
    ids = {sid for sid, meta in rows if isinstance(meta, dict) and meta.get(key) is not None and str(meta[key]) == value}
    if not ids:
        raise CalibrationError(f"no sample of {dataset.name} has {where}")
    return ids


def _positive(task: Task, positive: str | None) -> str | None:
    if task.name == CLAIM_SUPPORT:
        if positive is not None:
            raise CalibrationError(f"--positive does not apply to {CLAIM_SUPPORT}: its estimand is the share of faithful answers "
                                   "(every claim supported)")
        return FAITHFUL
    if not has_labels(task):
        if positive is not None:
            raise CalibrationError(f"--positive is for tasks with labels; {task.name} is {task.kind} (its mean score is estimated)")
        return None
    declared = [lab for lab in (task.labels or []) if lab not in set(task.excluded or [])]
    if positive is None:
        if task.kind == "pairwise" or not declared:
            raise CalibrationError(f"task {task.name} needs --positive LABEL (the label whose share is estimated)")
        return declared[0]
    if task.kind != "pairwise" and positive not in declared:
        raise CalibrationError(f"--positive {positive!r} is not a label of {task.name} (labels: {', '.join(declared)})")
    return positive


def _numbers(values: pd.Series, positive: str | None, what: str) -> np.ndarray:
    if positive is not None:
        return (values.astype(str) == positive).to_numpy(dtype=float)
    numbers = pd.to_numeric(values, errors="coerce")
    if numbers.isna().any():
        raise CalibrationError(f"{what} {values[numbers.isna()].iloc[0]!r} is not a number")
    return numbers.to_numpy(dtype=float)


def _target_values(task: Task, verdicts: pd.DataFrame, labels: pd.DataFrame, fewshot: set[str], pos: str | None,
                   order_rule: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Return per target with a usable verdict: labelled or not, the verdict and (labelled) the gold as numbers, its sample;
    and the few-shot examples left out."""
    if task.kind == "pairwise":
        verdicts, _ = apply_order_rule(task, verdicts, order_rule)
    excluded = set(task.excluded or [])
    usable = verdicts[(verdicts["status"] == "ok") & verdicts["value"].notna() & verdicts["active"]
                      & ~verdicts["value"].astype(str).isin(excluded)]
    usable = usable.drop_duplicates("target_key")
    gold = gold_frame(labels, task.kind)
    outside = gold["gold"].notna() & gold["gold"].astype(str).isin(excluded)  # e.g. "not a claim": not in the estimand
    usable = usable[~usable["target_key"].isin(gold.loc[outside, "target_key"])]
    gold = gold[gold["gold"].notna() & ~outside]
    n_fewshot = int(usable["target_key"].isin(fewshot).sum())
    usable = usable[~usable["target_key"].isin(fewshot)]
    merged = usable.merge(gold[["target_key", "gold"]], on="target_key", how="left")
    is_labelled = merged["gold"].notna().to_numpy()
    yhat_all = _numbers(merged["value"], pos, "verdict")
    y = _numbers(merged.loc[is_labelled, "gold"], pos, "gold value")
    return is_labelled, yhat_all, y, merged["sample_id"].astype(np.int64).to_numpy(), n_fewshot


def answer_targets(verdicts: pd.DataFrame, gold: pd.DataFrame, totals: pd.Series, excluded: set[str],
                   fewshot: set[str]) -> tuple[pd.DataFrame, int, int]:
    """Return claim support's targets, the answers: per answer `sample_id`, `yhat` (the judge calls it faithful: 1/0)
    and `y` (the gold does; NaN when unlabelled); and the answers left out as few-shot examples and as incompletely judged.

    The faithfulness rule of the report's `rag` section (docs/statistics.md §8), read as "faithful = every counted claim
    supported": the judge's side counts every active claim less those it called an excluded label (`not_applicable`),
    a claim whose verdict failed or could not be parsed counting as not supported; the gold's side the claims whose gold
    is not excluded. An answer is a target when the judge has a verdict on every active claim, and not every one of them
    `not_applicable`; it is labelled when every active claim has a gold (a tie has none), and outside the estimand when
    every gold is `not_applicable`. An answer with a claim that is a few-shot example of the version is left out.
    """
    rows = verdicts[verdicts["active"]].drop_duplicates("target_key")
    few = pd.unique(rows.loc[rows["target_key"].isin(fewshot), "sample_id"])
    rows = rows[~rows["sample_id"].isin(few)]
    ok = (rows["status"] == "ok") & rows["value"].notna()
    value = rows["value"].astype(str)
    claim_gold = rows["target_key"].map(gold.drop_duplicates("target_key").set_index("target_key")["gold"])
    has_gold = claim_gold.notna()
    per = pd.DataFrame({
        "sample_id": rows["sample_id"].astype(np.int64), "judged": 1,
        "judge_na": ok & value.isin(excluded), "judge_sup": ok & (value == "supported"),
        "has_gold": has_gold, "gold_na": has_gold & claim_gold.astype(str).isin(excluded),
        "gold_sup": has_gold & (claim_gold.astype(str) == "supported"),
    }).groupby("sample_id").sum()
    claims = totals.reindex(per.index, fill_value=0).to_numpy()
    complete = per["judged"].to_numpy() >= claims
    counted = per["judged"] - per["judge_na"]
    gold_counted = per["has_gold"] - per["gold_na"]
    labelled = per["has_gold"] == per["judged"]
    keep = complete & (counted > 0).to_numpy() & ~(labelled & (gold_counted == 0)).to_numpy()
    out = pd.DataFrame({"sample_id": per.index.to_numpy(dtype=np.int64),
                        "yhat": (per["judge_sup"] == counted).to_numpy(dtype=float),
                        "y": np.where(labelled, (per["gold_sup"] == gold_counted).to_numpy(dtype=float), np.nan)})
    return out[keep].reset_index(drop=True), len(few), int((~complete).sum())


def _meta_field(session: Session, key: str):
    """Return a column expression of `metadata.KEY` as the database gives it (SQLite's json_extract, PostgreSQL's ->>)."""
    if session.connection().dialect.name == "sqlite":
        return func.json_extract(Sample.meta, literal_column(f"'$.{key}'"))
    return Sample.meta.op("->>")(literal_column(f"'{key}'"))


def sample_info(session: Session, dataset, *, with_time: bool = True) -> pd.DataFrame:
    """Return per sample: inclusion_prob (NaN when absent) and (`with_time`) the time it belongs to (started_at, else
    created_at; parsing 10^5 times is a good part of the estimate's time, so only windows ask for it)."""
    # Only the two metadata fields, extracted by the database and read through the raw cursor: decoding every sample's
    # whole metadata JSON was most of the estimate's time on 10^5 samples (bench/results/estimate.md).
    times = (_meta_field(session, "started_at"), Sample.created_at) if with_time else ()
    query = sa_select(Sample.id, _meta_field(session, "inclusion_prob"), *times).where(Sample.dataset_id == dataset.id)
    frame = read_frame(session, query, ["sample_id", "inclusion_prob", *(["started_at", "created_at"] if with_time else [])])
    prob = pd.to_numeric(frame["inclusion_prob"].astype(object), errors="coerce")
    bad = prob.notna() & ~((prob > 0) & (prob <= 1))
    if bad.any():
        raise CalibrationError(f"sample {int(frame['sample_id'][bad].iloc[0])}: metadata.inclusion_prob must lie in (0, 1], "
                               f"not {prob[bad].iloc[0]!r}")
    index = frame["sample_id"].astype(np.int64).to_numpy()
    if not with_time:
        return pd.DataFrame({"inclusion_prob": prob.to_numpy(dtype=float)}, index=index)
    started = pd.to_datetime(frame["started_at"].astype(object).astype("string"),
                             errors="coerce", utc=True, format="ISO8601").dt.as_unit("us")
    created = pd.to_datetime(frame["created_at"], errors="coerce", utc=True).dt.as_unit("us")
    return pd.DataFrame({"inclusion_prob": prob.to_numpy(dtype=float), "time": started.fillna(created).to_numpy()}, index=index)


def window_keys(times: pd.Series, by: str) -> pd.Series:
    """Return each time's window: day `2026-12-02`, ISO week `2026-W49`, month `2026-12`."""
    times = pd.to_datetime(times, utc=True)
    if by == "day":
        return times.dt.strftime("%Y-%m-%d")
    if by == "month":
        return times.dt.strftime("%Y-%m")
    iso = times.dt.isocalendar()
    return iso["year"].astype(str) + "-W" + iso["week"].astype(int).map("{:02d}".format)


def _pair(est) -> dict:
    return {"estimate": est.value, "ci": list(est.ci) if est.ci else None}


def estimate_values(y: np.ndarray, yhat: np.ndarray, yhat_unl: np.ndarray, *, method: str, alpha: float,
                    weights: np.ndarray | None = None, yhat_all: np.ndarray | None = None,
                    weights_all: np.ndarray | None = None) -> dict:
    """Return the method's estimate on arrays: `estimate`, `ci`, `lambda`, `status`, `reason`, `note` (+ Rogan–Gladen's rates).

    With `weights` (1/(π_t·π_a) of the labelled targets), `yhat_all` (every target's verdict, the labelled
    ones included) and `weights_all` (1/π_t of every target): the Hájek forms of stats/survey.py, as
    `calibrate monitor` computes a window (docs/statistics.md §18).
    """
    if weights is not None and (yhat_all is None or weights_all is None):
        raise ValueError("weights need every target's verdict and weight (yhat_all, weights_all)")
    if method == "classical":
        est = classical_mean(y, alpha=alpha) if weights is None else hajek_mean(y, weights, alpha=alpha)
    elif method == "rogan-gladen":
        est = rogan_gladen(y, yhat, yhat_unl, alpha=alpha)
    elif weights is None:
        est = ppi_mean(y, yhat, yhat_unl, alpha=alpha, lam=None if method == "ppi++" else 1.0)
    else:
        est = hajek_ppi_mean(y, yhat, yhat_all, weights, weights_all, alpha=alpha, lam=None if method == "ppi++" else 1.0)
    out: dict[str, Any] = {"estimate": est.value, "ci": list(est.ci) if est.ci else None, "status": est.status,
                           "reason": est.reason.to_dict() if est.note and est.reason else None, "note": est.note,
                           "lambda": est.extra.get("lambda") if method in ("ppi++", "ppi") else None}
    if method == "rogan-gladen":
        out.update({k: est.extra.get(k) for k in ("sensitivity", "specificity", "n_positive", "n_negative")})
    return out


def run_estimate(session: Session, dataset_name: str, task_name: str, judge_name: str, *, method: str = "ppi++",
                 alpha: float = 0.05, split: str | None = None, where: str | None = None, positive: str | None = None,
                 by_window: str | None = None, target_width: float = 0.05, order_rule: str = "consistent",
                 samples: frozenset[int] | None = None, golden: dict | None = None,
                 frames: tuple[pd.DataFrame, pd.DataFrame] | None = None) -> dict:
    """Return what `calibrate estimate` writes (docs/cli.md lists the keys); undefined results carry status, reason, note.

    `samples` and `golden` (--golden NAME[@v]): only those samples, and the golden version cited as `golden`.

    Raises NotFound for an unknown dataset, task or judge and CalibrationError for options the data
    cannot answer (a split or --where value no sample has, an unknown positive label).
    """
    _check(method, alpha, by_window, target_width)
    dataset = lookup.dataset(session, dataset_name)
    task = calibrated_task(session, task_name)
    judge = lookup.judge(session, judge_name)
    pos = _positive(task, positive)
    scope = split_samples(session, dataset, split) if split else None
    if where:
        chosen = _where_samples(session, dataset, where)
        scope = chosen if scope is None else scope & chosen
    if samples is not None:
        scope = set(samples) if scope is None else scope & samples

    # `frames`: the judge's verdicts and the task's labels as frames.py reads them, already read by the caller (the report)
    verdicts, labels = frames if frames is not None else (verdicts_frame(session, dataset, task, judge),
                                                          labels_frame(session, dataset, task))
    if scope is not None:
        verdicts = verdicts[verdicts["sample_id"].isin(scope)]
        labels = labels[labels["sample_id"].isin(scope)]
    fewshot = fewshot_keys(session, judge)
    extra_counts: dict[str, int] = {}
    # A production dataset's labels: only the audit draws have a known design (their π_a); triage labels were
    # chosen on purpose and labels outside the streams by nobody knows what rule, so neither feeds the estimate.
    streams = stream_assignments(session, dataset)
    audit_prob = audit_probabilities(streams)
    if not audit_prob.empty:
        kept = stream_labels(labels, streams, "audit")
        extra_counts["n_outside_audit"] = int(labels["target_key"].nunique() - kept["target_key"].nunique())
        labels = kept
    if task.name == CLAIM_SUPPORT:
        answers, n_fewshot, extra_counts["n_incomplete_answers"] = answer_targets(
            verdicts, gold_frame(labels, task.kind), claim_totals(session, dataset), set(task.excluded or []), fewshot)
        is_labelled = answers["y"].notna().to_numpy()
        yhat_all = answers["yhat"].to_numpy(dtype=float)
        y = answers.loc[is_labelled, "y"].to_numpy(dtype=float)
        samples = answers["sample_id"].astype(np.int64).to_numpy()
    else:
        is_labelled, yhat_all, y, samples, n_fewshot = _target_values(task, verdicts, labels, fewshot, pos, order_rule)
    info = sample_info(session, dataset, with_time=by_window is not None)
    prob = info["inclusion_prob"].reindex(samples).to_numpy(dtype=float)
    n_targets = len(yhat_all)

    head: dict[str, Any] = {"dataset": dataset.name, "task": task.name, "judge": judge.name, "split": split, "where": where,
                            "positive": pos, "unit": "answer" if task.name == CLAIM_SUPPORT else "target",
                            "method": method, "alpha": alpha, **({"golden": golden} if golden else {})}
    counts = {"n_labelled": int(is_labelled.sum()), "n_unlabelled": int((~is_labelled).sum()), "n_fewshot_excluded": n_fewshot,
              **extra_counts}
    lab_prob = prob[is_labelled]
    if np.isnan(lab_prob).any() and not np.isnan(lab_prob).all():
        return {**head, **counts, "status": "undefined", **noted(Reason("mixed_weights"))}
    # Weights: π_t, the sample's inclusion probability from the traffic (metadata.inclusion_prob, 1 when absent), and
    # π_a, the audit's draw. Every target weighs 1/π_t, a labelled one 1/(π_t·π_a) (docs/statistics.md §17-18).
    # Rogan–Gladen is unweighted (its rates are per-target counts): weighted stays false for it.
    audited = not audit_prob.empty
    weighted = (audited or (bool(lab_prob.size) and not np.isnan(lab_prob).any())) and method != "rogan-gladen"
    if method == "rogan-gladen" and pos is None:
        return {**head, **counts, "status": "undefined", **noted(Reason("not_binary"))}
    pi_t = np.where(np.isnan(prob), 1.0, prob)
    pi_a = audit_prob.reindex(samples).to_numpy(dtype=float) if audited else np.ones(n_targets)
    pi_a = np.where(np.isnan(pi_a), 1.0, pi_a)
    weights = 1.0 / (pi_t[is_labelled] * pi_a[is_labelled]) if weighted else None

    def compute(mask: np.ndarray) -> dict:
        lab, unl = mask & is_labelled, mask & ~is_labelled
        w = 1.0 / (pi_t[lab] * pi_a[lab]) if weighted else None
        return estimate_values(y[lab[is_labelled]], yhat_all[lab], yhat_all[unl], method=method, alpha=alpha,
                               weights=w, yhat_all=yhat_all[mask], weights_all=1.0 / pi_t[mask] if weighted else None)

    everything = np.ones(n_targets, dtype=bool)
    main = compute(everything)
    result: dict[str, Any] = {**head, **counts, **{k: v for k, v in main.items() if k not in ("status", "reason", "note")},
                              "status": main["status"], "reason": main["reason"], "note": main["note"], "weighted": weighted}
    if method != "rogan-gladen":
        for key in ("sensitivity", "specificity", "n_positive", "n_negative"):
            result.pop(key, None)
    result["classical"] = _pair(classical_mean(y, alpha=alpha) if weights is None else hajek_mean(y, weights, alpha=alpha))
    result["naive_judge"] = _pair(judge_mean(yhat_all, alpha=alpha) if not weighted or not n_targets
                                  else hajek_mean(yhat_all, 1.0 / pi_t, alpha=alpha))
    power = labels_needed(y, yhat_all[is_labelled], n_total=n_targets, target_width=target_width, alpha=alpha,
                          method="classical" if method == "classical" else "ppi++", weights=weights) if n_targets else None
    result["labels_needed"] = int(power.value) if power is not None and power.ok else None
    result["target_width"] = target_width
    if power is not None and not power.ok:
        result["labels_needed_note"] = power.note
        result["labels_needed_reason"] = power.reason.to_dict() if power.reason else None
    if by_window:
        keys = window_keys(pd.Series(info["time"].reindex(samples).to_numpy()), by_window).to_numpy()
        windows = []
        for key in sorted(set(keys.tolist())):
            mask = keys == key
            one = compute(mask)
            windows.append({"window": key, "n_labelled": int((mask & is_labelled).sum()),
                            "n_unlabelled": int((mask & ~is_labelled).sum()), "estimate": one["estimate"], "ci": one["ci"],
                            **({"reason": one["reason"], "note": one["note"]} if one["status"] != "ok" else {})})
        result["by_window"] = by_window
        result["windows"] = windows
    return result


#: The keys of run_estimate's result a report section's `estimate` block keeps (the dataset, task and judge are the report's).
BLOCK_KEYS = ("method", "positive", "unit", "alpha", "estimate", "ci", "lambda", "status", "reason", "note", "n_labelled",
              "n_unlabelled", "n_fewshot_excluded", "n_incomplete_answers", "n_outside_audit", "weighted", "classical", "naive_judge",
              "labels_needed", "target_width", "labels_needed_note", "labels_needed_reason")


def estimate_block(session: Session, dataset_name: str, task: Task, judge_name: str, *, split: str | None = None,
                   confidence: float = 0.95, order_rule: str = "consistent",
                   frames: tuple[pd.DataFrame, pd.DataFrame] | None = None) -> dict | None:
    """Return a report section's `estimate` block: `calibrate estimate`'s default (ppi++) on the report's split, or None.

    None when the judge has no unlabelled target (nothing beyond the labels to estimate from), for a task without a
    default positive label (pairwise), and for the metric tasks whose gold is derived (faithfulness, context_precision:
    claim_support's block is the faithful share of answers). An estimate the data cannot give is a block with status
    "undefined" and its reason, never a number.
    """
    if task.kind == "pairwise" or task.name in ("faithfulness", "context_precision"):
        return None
    try:
        result = run_estimate(session, dataset_name, task.name, judge_name, method="ppi++", alpha=round(1 - confidence, 10),
                              split=split, order_rule=order_rule, frames=frames)
    except CalibrationError:
        return None  # a task this estimand does not fit (e.g. values that are not numbers)
    if not result.get("n_unlabelled"):
        return None
    return {key: result[key] for key in BLOCK_KEYS if key in result}
