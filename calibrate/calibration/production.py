"""The calibrated judge watching production: per window, an honest number from the audit labels (`calibrate monitor`).

The estimand of a window is the mean of the task's gold as a number over the window's traffic
(a categorical task: the share of its positive label; a score task: the mean score), the samples
of the window standing for the traces they were sampled from (`metadata.inclusion_prob` π_t, 1
when absent; `metadata.started_at`, else the creation time, places a sample in its window).

- **Only audit labels** (labels by an expert on a sample whose assignment is in the `audit`
  stream, and adjudicated labels on such samples; annotation/auto_queue.py) are used. Triage
  labels (thumbs-down first, least certain first) are counted and never used: their samples were
  chosen for being bad or hard, so any mean over them is biased.
- The estimate is PPI++ with ratio (Hájek) weights (stats/survey.py): the judge's verdicts on every
  judged target of the window as the imputed term, weighted 1/π_t, and the audit-labelled targets
  weighted 1/(π_t·π_a) (π_a: `Assignment.audit_prob`, the draw's probability); λ is the weighted
  regression coefficient of the gold on the verdict (the audit is drawn from the judged targets:
  stats/survey.py says why not PPI++'s λ). When λ is 0 (verdicts that do not vary, or do not follow the gold) it is the weighted labels alone (`method`
  "classical"). The judge-only number (the weighted mean verdict) stands beside it, never trusted.
- **Agreement**: the weighted share of audit-labelled targets whose verdict matches the gold
  (categorical, pairwise: the same label; ordinal: within half a point, as the gold of two experts
  may be a half; continuous: within a tenth of the scale's width), against the judge's calibration-time figure, the same share over every
  labelled target it judged outside the production streams (any dataset). The change's interval
  is normal: change ± z·√(se_window² + se_calibration²).
- **Status** per window: `no data` (no audit label), `alert` (the metric's CI lies below `min`, or
  the agreement's CI lies below `min_agreement`), `undecided` (`min` given and inside the CI, or
  no interval), else `ok`.
- A window is **complete** when its end has passed and each of its samples has a verdict of the
  judge on the task, none of them a failed call. The latest judge run on the dataset
  (`JudgeRun`) counts as failed when its status is `failed` or `stopped` (a budget hit).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from calibrate import lookup
from calibrate.calibration.calibrated import calibrated_task
from calibrate.calibration.estimate import sample_info, window_keys
from calibrate.calibration.frames import fewshot_keys, labels_frame, verdicts_frame
from calibrate.calibration.pairwise import apply_order_rule
from calibrate.calibration.streams import audit_probabilities, stream_assignments, stream_labels
from calibrate.errors import CalibrationError
from calibrate.gold import gold_frame
from calibrate.models import Dataset, Judge, JudgeRun, Sample, Task, Verdict, utcnow
from calibrate.reasons import Reason
from calibrate.stats.survey import hajek_mean, hajek_ppi_mean
from calibrate.task_values import has_labels

__all__ = ["STATUSES", "WINDOWS", "agreement_share", "monitor", "production_estimate", "production_gate", "window_bounds"]

WINDOWS = ("day", "week")
STATUSES = ("ok", "alert", "undecided", "no data")
FAILED_RUNS = ("failed", "stopped")


def window_bounds(key: str, by: str) -> tuple[datetime, datetime]:
    """Return a window's [start, end) in UTC from its key (`2026-12-02` or `2026-W49`)."""
    if by == "day":
        start = datetime.fromisoformat(key).replace(tzinfo=UTC)
        return start, start + timedelta(days=1)
    year, week = key.split("-W")
    start = datetime.fromisocalendar(int(year), int(week), 1).replace(tzinfo=UTC)
    return start, start + timedelta(days=7)


def _weighted_share(hits: np.ndarray, weights: np.ndarray, alpha: float) -> dict:
    """Return the weighted share of hits with a normal interval (linearised: se = √Σw²(h−p)² / Σw)."""
    if hits.size == 0:
        return {"value": None, "ci": None, "n": 0, "se": None}
    total = float(weights.sum())
    p = float((weights * hits).sum() / total)
    se = float(math.sqrt(float((weights ** 2 * (hits - p) ** 2).sum())) / total) if hits.size > 1 else None
    z = float(norm.ppf(1 - alpha / 2))
    ci = [max(0.0, p - z * se), min(1.0, p + z * se)] if se is not None else None
    return {"value": p, "ci": ci, "n": int(hits.size), "se": se}


def agreement_share(verdicts: np.ndarray, gold: np.ndarray, *, kind: str, scale: tuple[float, float] | None,
                    weights: np.ndarray | None = None, alpha: float = 0.05) -> dict:
    """Return the judge's agreement with the gold: {value, ci, n, se} (the weighted share of matches)."""
    weights = np.ones(len(verdicts)) if weights is None else np.asarray(weights, dtype=float)
    if kind == "continuous":
        width = (scale[1] - scale[0]) if scale else 1.0
        hits = np.abs(verdicts.astype(float) - gold.astype(float)) <= width / 10
    elif kind == "ordinal":  # within half a point: two experts' gold may be a half
        hits = np.abs(verdicts.astype(float) - gold.astype(float)) <= 0.5
    else:
        hits = verdicts.astype(str) == gold.astype(str)
    return _weighted_share(hits.astype(float), weights, alpha)


def production_estimate(y: np.ndarray, yhat: np.ndarray, yhat_all: np.ndarray, w_labelled: np.ndarray,
                        w_all: np.ndarray, *, alpha: float = 0.05) -> dict:
    """Return a window's estimate from arrays: PPI++ with Hájek weights (stats/survey.py), else the weighted labels alone.

    y, yhat: gold and verdict of the audit-labelled targets (weights 1/(π_t·π_a)); yhat_all: the
    verdicts of every judged target (weights 1/π_t). Keys: estimate, ci, method, lambda, reason, note,
    judge_only, judge_only_ci.
    """
    judge = hajek_mean(yhat_all, w_all, alpha=alpha) if yhat_all.size else None
    out: dict[str, Any] = {"judge_only": judge.value if judge is not None else None,
                           "judge_only_ci": list(judge.ci) if judge is not None and judge.ci else None}
    if y.size == 0:
        return {**out, "estimate": None, "ci": None, "method": None, "lambda": None,
                "reason": Reason("no_audit_labels").to_dict(), "note": str(Reason("no_audit_labels"))}
    est = hajek_ppi_mean(y, yhat, yhat_all, w_labelled, w_all, alpha=alpha)
    method = "ppi++" if est.extra.get("lambda", 0) > 0 else "classical"  # λ = 0 is the labels alone
    return {**out, "estimate": est.value, "ci": list(est.ci) if est.ci else None, "method": method if est.value is not None else None,
            "lambda": est.extra.get("lambda"), "reason": est.reason.to_dict() if est.note and est.reason else None,
            "note": est.note or None}


def _numbers(values: pd.Series, positive: str | None) -> np.ndarray:
    if positive is not None:
        return (values.astype(str) == positive).to_numpy(dtype=float)
    return pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)


def _task_of(session: Session, dataset: Dataset, judge: Judge, task_name: str | None) -> Task:
    if task_name:
        return calibrated_task(session, task_name)
    ids = sorted({int(t) for (t,) in session.execute(
        sa_select(Verdict.task_id).join(Sample, Sample.id == Verdict.sample_id)
        .where(Sample.dataset_id == dataset.id, Verdict.judge_id == judge.id).distinct()).all()})
    tasks = [session.get(Task, i) for i in ids]
    tasks = [t for t in tasks if t is not None and t.kind != "extraction"]
    if len(tasks) != 1:
        names = ", ".join(t.name for t in tasks) or "none"
        raise CalibrationError(f"judge {judge.name} has verdicts on {dataset.name} for tasks: {names}; name one with --task")
    return tasks[0]


def _positive(task: Task, positive: str | None) -> str | None:
    if not has_labels(task):
        return None
    declared = [lab for lab in (task.labels or []) if lab not in set(task.excluded or [])]
    if positive is None:
        if not declared or task.kind == "pairwise":
            raise CalibrationError(f"task {task.name} needs --positive LABEL (the label whose share is estimated)")
        return declared[0]
    if task.kind != "pairwise" and positive not in declared:
        raise CalibrationError(f"--positive {positive!r} is not a label of {task.name} (labels: {', '.join(declared)})")
    return positive


def _usable(task: Task, verdicts: pd.DataFrame, fewshot: set[str]) -> pd.DataFrame:
    if task.kind == "pairwise":
        verdicts, _ = apply_order_rule(task, verdicts, "consistent")
    excluded = set(task.excluded or [])
    usable = verdicts[(verdicts["status"] == "ok") & verdicts["value"].notna() & verdicts["active"]
                      & ~verdicts["value"].astype(str).isin(excluded)]
    return usable[~usable["target_key"].isin(fewshot)].drop_duplicates("target_key")


def _current(labels: pd.DataFrame) -> pd.DataFrame:
    return labels[~labels["stale"]] if "stale" in labels else labels


def _calibration_figure(session: Session, judge: Judge, task: Task, alpha: float) -> dict:
    """Return the judge's agreement on every labelled target it judged outside the production streams."""
    scale = (task.scale_min, task.scale_max) if task.scale_min is not None and task.scale_max is not None else None
    dataset_ids = sorted({int(d) for (d,) in session.execute(
        sa_select(Sample.dataset_id).join(Verdict, Verdict.sample_id == Sample.id)
        .where(Verdict.judge_id == judge.id, Verdict.task_id == task.id).distinct()).all()})
    fewshot = fewshot_keys(session, judge)
    verdicts, gold = [], []
    for dataset_id in dataset_ids:
        dataset = session.get(Dataset, dataset_id)
        labels = _current(labels_frame(session, dataset, task))
        streams = stream_assignments(session, dataset)
        if not streams.empty and not labels.empty:
            in_stream = stream_labels(labels, streams, "audit").index.union(stream_labels(labels, streams, "triage").index)
            labels = labels.drop(index=in_stream)
        g = gold_frame(labels, task.kind)
        g = g[g["gold"].notna() & ~g["gold"].astype(str).isin(set(task.excluded or []))]
        merged = _usable(task, verdicts_frame(session, dataset, task, judge), fewshot).merge(g[["target_key", "gold"]], on="target_key")
        verdicts.append(merged["value"].to_numpy())
        gold.append(merged["gold"].to_numpy())
    v = np.concatenate(verdicts) if verdicts else np.array([])
    y = np.concatenate(gold) if gold else np.array([])
    share = agreement_share(v, y, kind=task.kind, scale=scale, alpha=alpha)
    if share["value"] is None:
        share.update(reason=Reason("no_calibration_figure").to_dict(), note=str(Reason("no_calibration_figure")))
    return share


def _latest_run(session: Session, dataset: Dataset, judge: Judge) -> dict | None:
    run = session.exec(select(JudgeRun).where(JudgeRun.judge_id == judge.id, JudgeRun.dataset_id == dataset.id)
                       .order_by(col(JudgeRun.id).desc())).first()
    if run is None:
        return None
    return {"id": run.id, "status": run.status, "error": run.error or "", "failed": run.status in FAILED_RUNS,
            "started_at": run.started_at.isoformat() if run.started_at else None}


def _status(estimate: dict, agreement: dict, *, min_value: float | None, min_agreement: float) -> tuple[str, list[str]]:
    if estimate["estimate"] is None and not agreement["n"]:
        return "no data", []
    alerts = []
    ci = estimate["ci"]
    if min_value is not None and ci and ci[1] < min_value:
        alerts.append("metric_below_min")
    a_ci = agreement.get("ci")
    if a_ci and a_ci[1] < min_agreement:
        alerts.append("agreement_below_gate")
    if alerts:
        return "alert", alerts
    if estimate["estimate"] is None:
        return "no data", []
    if min_value is not None and (not ci or ci[0] < min_value):
        return "undecided", []
    return "ok", []


def monitor(session: Session, dataset_name: str, judge_name: str, *, task: str | None = None, by_window: str = "week",
            min_value: float | None = None, min_agreement: float = 0.75, positive: str | None = None, alpha: float = 0.05,
            now: datetime | None = None) -> dict:
    """Return what `calibrate monitor` writes (docs/production.md lists every key)."""
    if by_window not in WINDOWS:
        raise CalibrationError(f"by-window must be one of {', '.join(WINDOWS)}, not {by_window!r}")
    if not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or not 0 < alpha < 1:
        raise CalibrationError(f"alpha must lie strictly between 0 and 1, not {alpha!r}")
    for name, value in (("min", min_value), ("min-agreement", min_agreement)):
        if value is not None and (not isinstance(value, (int, float)) or not math.isfinite(value)):
            raise CalibrationError(f"--{name} must be a finite number, not {value!r}")
    now = (now or utcnow()).astimezone(UTC)
    dataset = lookup.dataset(session, dataset_name)
    judge = lookup.judge(session, judge_name)
    the_task = _task_of(session, dataset, judge, task)
    pos = _positive(the_task, positive)
    scale = (the_task.scale_min, the_task.scale_max) if the_task.scale_min is not None and the_task.scale_max is not None else None

    info = sample_info(session, dataset)
    info["pi_t"] = info["inclusion_prob"].fillna(1.0)
    info["window"] = window_keys(pd.Series(info["time"].to_numpy()), by_window).to_numpy() if len(info) else []
    all_verdicts = verdicts_frame(session, dataset, the_task, judge)
    errors = set(all_verdicts.loc[all_verdicts["status"] == "error", "sample_id"].astype(int))
    judged_samples = set(all_verdicts.loc[all_verdicts["status"] != "error", "sample_id"].astype(int))
    usable = _usable(the_task, all_verdicts, fewshot_keys(session, judge))

    labels = _current(labels_frame(session, dataset, the_task))
    streams = stream_assignments(session, dataset)
    excluded = set(the_task.excluded or [])
    audit_gold = gold_frame(stream_labels(labels, streams, "audit"), the_task.kind)
    audit_gold = audit_gold[audit_gold["gold"].notna() & ~audit_gold["gold"].astype(str).isin(excluded)]
    triage_gold = gold_frame(stream_labels(labels, streams, "triage"), the_task.kind)
    triage_gold = triage_gold[triage_gold["gold"].notna()]
    audit_prob = audit_probabilities(streams)

    merged = usable.merge(audit_gold[["target_key", "gold"]], on="target_key", how="left")
    merged["window"] = info["window"].reindex(merged["sample_id"].astype(np.int64)).to_numpy() if len(merged) else []
    merged["pi_t"] = info["pi_t"].reindex(merged["sample_id"].astype(np.int64)).to_numpy() if len(merged) else []
    merged["pi_a"] = audit_prob.reindex(merged["sample_id"].astype(np.int64)).to_numpy() if len(merged) else []
    calibration = _calibration_figure(session, judge, the_task, alpha)
    z = float(norm.ppf(1 - alpha / 2))

    triage_counts: dict[str, int] = {}
    if not triage_gold.empty:
        sample_of = labels.drop_duplicates("target_key").set_index("target_key")["sample_id"]
        for sample_id in sample_of.reindex(triage_gold["target_key"]).astype(np.int64):
            key = info["window"].get(int(sample_id))
            triage_counts[key] = triage_counts.get(key, 0) + 1

    windows = []
    for key in sorted(set(info["window"].tolist())):
        start, end = window_bounds(key, by_window)
        in_window = info[info["window"] == key]
        ids = set(in_window.index.astype(int))
        rows = merged[merged["window"] == key]
        lab = rows[rows["gold"].notna() & rows["pi_a"].notna()]
        yhat_all = _numbers(rows["value"], pos)
        w_all = 1.0 / rows["pi_t"].to_numpy(dtype=float)
        y, yhat = _numbers(lab["gold"], pos), _numbers(lab["value"], pos)
        w_lab = 1.0 / (lab["pi_t"].to_numpy(dtype=float) * lab["pi_a"].to_numpy(dtype=float))
        est = production_estimate(y, yhat, yhat_all, w_lab, w_all, alpha=alpha)
        agree = agreement_share(lab["value"].to_numpy(), lab["gold"].to_numpy(), kind=the_task.kind, scale=scale,
                                weights=w_lab, alpha=alpha)
        change = change_ci = None
        if agree["value"] is not None and calibration["value"] is not None:
            change = agree["value"] - calibration["value"]
            if agree["se"] is not None and calibration["se"] is not None:
                half = z * math.sqrt(agree["se"] ** 2 + calibration["se"] ** 2)
                change_ci = [change - half, change + half]
        agreement = {"value": agree["value"], "ci": agree["ci"], "n": agree["n"], "calibration": calibration["value"],
                     "change": change, "change_ci": change_ci}
        status, alerts = _status(est, agreement, min_value=min_value, min_agreement=min_agreement)
        judged = ids & judged_samples
        complete = end <= now and not (ids - judged) and not (ids & errors)
        window: dict[str, Any] = {
            "window": key, "start": start.isoformat(), "end": end.isoformat(), "complete": complete,
            "counts": {"traces": int(round(float((1.0 / in_window["pi_t"]).sum()))), "sampled": len(ids), "judged": len(judged),
                       "audit_labels": len(lab), "triage_labels": int(triage_counts.get(key, 0))},
            "estimate": est["estimate"], "ci": est["ci"], "method": est["method"],
            "judge_only": est["judge_only"], "judge_only_ci": est["judge_only_ci"],
            "agreement": agreement, "status": status, "alerts": alerts,
            "reason": est["reason"] if status == "no data" or est["estimate"] is None else None,
            "note": est["note"] if status == "no data" or est["estimate"] is None else None,
        }
        windows.append(window)
    return {"dataset": dataset.name, "judge": judge.name, "task": the_task.name, "positive": pos,
            "metric": "share" if pos is not None else "mean", "by_window": by_window, "alpha": alpha, "min": min_value,
            "min_agreement": min_agreement, "now": now.isoformat(),
            "calibration": {k: calibration[k] for k in ("value", "ci", "n")} | (
                {"reason": calibration["reason"], "note": calibration["note"]} if "reason" in calibration else {}),
            "latest_run": _latest_run(session, dataset, judge), "windows": windows}


def production_gate(result: dict) -> dict:
    """Return the gate's verdict on the latest complete window of a `monitor` result.

    Keys: status (ok | alert | undecided | no data), exit (0 ok, 1 alert, 2 otherwise), window (the
    window checked, or None), fallback (true when the latest judge pass failed and an earlier
    window is reported), reason, note.
    """
    complete = [w for w in result["windows"] if w["complete"]]
    run = result.get("latest_run") or {}
    failed = bool(run.get("failed"))
    if not complete:
        reason = Reason("no_complete_window")
        return {"status": "no data", "exit": 2, "window": None, "fallback": failed, "reason": reason.to_dict(), "note": str(reason)}
    chosen = complete[-1]
    out = {"status": chosen["status"], "exit": {"ok": 0, "alert": 1}.get(chosen["status"], 2), "window": chosen,
           "fallback": failed, "reason": None, "note": None}
    if failed:
        reason = Reason("judge_pass_failed", run=run.get("id"), error=run.get("error") or run.get("status"), window=chosen["window"])
        out.update(reason=reason.to_dict(), note=str(reason))
    return out

