"""The calibrated judge watching production: per window, an honest number from the audit labels (`calibrate monitor`).

Each window's estimate is calibration/live.py's (the one estimator: `calibrate estimate --by-window` gives the
same figures to the last digit). Beside it:

- **Agreement**: the weighted share of the window's audit-labelled targets (at the estimand's level) where the
  verdict matches the gold (labels: the same label, a failed call or an excluded verdict on a counted gold is a
  miss; ordinal: within half a point, as the gold of two experts may be a half; continuous: within a tenth of the
  scale's width), with the live interval of a share; against the judge's calibration-time figure, the same share over
  every labelled target it judged outside the production streams (any dataset, unweighted, clustered by sample). The
  change's interval is MOVER's (Zou & Donner 2008) from the two intervals.
- **Status** per window: `no data` (no audit label), `too_few` (an interval cannot be trusted: too few audit labels
  where the traffic is, `labels_to_settle` says how many more), `alert` (the metric's CI lies below `min`, or the
  agreement's below `min_agreement`), `undecided` (`min` inside the metric's CI), else `ok`. A too_few window is never
  ok.
- **Complete** windows: ended, and every sample of the window has a verdict of the judge on the task (a failed or
  refused call counts as attempted: it is counted, estimated through the audit, and drawn for audit like any judged
  sample). The gate checks the latest ended window: if it is not complete it is `undecided`, never a pass on an older
  one.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from calibrate import lookup
from calibrate.calibration.calibrated import calibrated_task
from calibrate.calibration.estimate import check_alpha
from calibrate.calibration.frames import labels_frame, verdicts_frame
from calibrate.calibration.live import (
    WINDOWS,
    Estimand,
    LiveTargets,
    difference_interval,
    estimand_for,
    estimate_targets,
    live_targets,
    sample_info,
    samples_with_targets,
    share_interval,
    window_bounds,
    window_keys,
)
from calibrate.calibration.streams import stream_assignments, stream_labels
from calibrate.errors import CalibrationError
from calibrate.gold import gold_frame
from calibrate.models import Dataset, Judge, JudgeRun, Sample, Task, Verdict, utcnow
from calibrate.reasons import Reason

__all__ = ["EXIT_CODES", "STATUSES", "WINDOWS", "agreement_hits", "monitor", "production_gate", "window_bounds"]

STATUSES = ("ok", "alert", "undecided", "too_few", "no data")
#: gate --production's exit codes: 0 pass, 1 fail, 2 nothing to decide on (no data, too few labels, nothing complete),
#: 3 undecided (the interval straddles the minimum, or the latest window is not complete).
EXIT_CODES = {"ok": 0, "alert": 1, "no data": 2, "too_few": 2, "undecided": 3}
FAILED_RUNS = ("failed", "stopped")


def agreement_hits(yhat: np.ndarray, y: np.ndarray, failed: np.ndarray, *, task: Task, estimand: Estimand) -> np.ndarray:
    """Return 1 where the verdict matches the gold (module docstring), per labelled target whose gold is counted."""
    if estimand.metric == "share":
        hits = (yhat == y) & ~np.isnan(yhat)
    elif task.kind == "continuous":
        width = (task.scale_max - task.scale_min) if task.scale_min is not None and task.scale_max is not None else 1.0
        hits = np.abs(yhat - y) <= width / 10
    else:  # ordinal: within half a point, as the gold of two experts may be a half
        hits = np.abs(yhat - y) <= 0.5
    return (hits & ~failed).astype(float)


def _task_of(session: Session, dataset: Dataset, judge: Judge, task_name: str | None) -> Task:
    if task_name:
        return calibrated_task(session, task_name)
    ids = sorted({int(t) for (t,) in session.execute(
        sa_select(Verdict.task_id).join(Sample, Sample.id == Verdict.sample_id)
        .where(Sample.dataset_id == dataset.id, Verdict.judge_id == judge.id).distinct()).all()})
    tasks = [session.get(Task, i) for i in ids]
    tasks = [t for t in tasks if t is not None and t.kind != "extraction"]
    if len(tasks) != 1:
        raise CalibrationError(Reason("monitor_needs_task", judge=judge.name, dataset=dataset.name,
                                      tasks=", ".join(t.name for t in tasks) or "none"))
    return tasks[0]


def _calibration_figure(session: Session, judge: Judge, task: Task, estimand: Estimand, alpha: float) -> dict:
    """Return the judge's agreement on every labelled target it judged outside the production streams (any dataset)."""
    dataset_ids = sorted({int(d) for (d,) in session.execute(
        sa_select(Sample.dataset_id).join(Verdict, Verdict.sample_id == Sample.id)
        .where(Verdict.judge_id == judge.id, Verdict.task_id == task.id).distinct()).all()})
    hits, clusters = [], []
    for dataset_id in dataset_ids:
        dataset = session.get(Dataset, dataset_id)
        labels = labels_frame(session, dataset, task)
        streams = stream_assignments(session, dataset)
        if not streams.empty and not labels.empty:
            labels = labels.drop(index=stream_labels(labels, streams, "audit").index.union(
                stream_labels(labels, streams, "triage").index))
        targets = live_targets(session, dataset, task, judge, estimand, with_time=False,
                               frames=(verdicts_frame(session, dataset, task, judge), labels), streams=False)
        lab = targets.labelled & ~np.isnan(targets.y)
        hits.append(agreement_hits(targets.yhat[lab], targets.y[lab], targets.failed[lab], task=task, estimand=estimand))
        clusters.append(targets.sample_id[lab])
    h = np.concatenate(hits) if hits else np.zeros(0)
    c = np.concatenate(clusters) if clusters else np.zeros(0, dtype=np.int64)
    ones = np.ones(len(h))
    share = share_interval(h, ones, ones, c, ones, c, alpha=alpha)
    if share["value"] is None and not len(h):
        share.update(reason=Reason("no_calibration_figure").to_dict(), note=str(Reason("no_calibration_figure")))
    return share


def _latest_run(session: Session, dataset: Dataset, judge: Judge) -> dict | None:
    run = session.exec(select(JudgeRun).where(JudgeRun.judge_id == judge.id, JudgeRun.dataset_id == dataset.id)
                       .order_by(col(JudgeRun.id).desc())).first()
    if run is None:
        return None
    return {"id": run.id, "status": run.status, "error": run.error or "", "failed": run.status in FAILED_RUNS,
            "started_at": run.started_at.isoformat() if run.started_at else None}


def _status(est: dict, agreement: dict, *, min_value: float | None, min_agreement: float) -> tuple[str, list[str]]:
    if est["status"] == "no_data":
        return "no data", []
    alerts = []
    ci = est["ci"]
    if min_value is not None and ci and ci[1] < min_value:
        alerts.append("metric_below_min")
    a_ci = agreement.get("ci")
    if a_ci and a_ci[1] < min_agreement:
        alerts.append("agreement_below_gate")
    if alerts:
        return "alert", alerts
    if est["status"] == "too_few":
        return "too_few", []
    if min_value is not None and ci[0] < min_value:
        return "undecided", []
    return "ok", []


def _window(targets: LiveTargets, key: str, keys: np.ndarray, *, by: str, task: Task, sample_ids: np.ndarray,
            sample_keys: np.ndarray, triage: dict[str, int], calibration: dict, min_value: float | None, min_agreement: float,
            alpha: float, now: datetime, pi_of: dict[int, float]) -> dict[str, Any]:
    start, end = window_bounds(key, by)
    mask = keys == key
    est = estimate_targets(targets, mask, alpha=alpha)
    lab = mask & targets.labelled & ~np.isnan(targets.y)
    hits = agreement_hits(targets.yhat[lab], targets.y[lab], targets.failed[lab], task=task, estimand=targets.estimand)
    agree = share_interval(hits, 1.0 / (targets.pi_t[lab] * targets.pi_a[lab]), targets.pi_t[lab], targets.sample_id[lab],
                           targets.pi_t[mask], targets.sample_id[mask], alpha=alpha)
    agreement = {"value": agree["value"], "ci": agree["ci"], "n": agree["n"], "status": agree["status"],
                 "calibration": calibration["value"],
                 "change": None if agree["value"] is None or calibration["value"] is None else agree["value"] - calibration["value"],
                 "change_ci": difference_interval(agree, calibration)}
    status, alerts = _status(est, agreement, min_value=min_value, min_agreement=min_agreement)
    in_window = sample_ids[sample_keys == key]
    attempted = set(targets.sample_id[mask].tolist())
    unjudged = int(sum(1 for s in in_window.tolist() if s not in attempted))
    failed_samples = int(np.unique(targets.sample_id[mask & targets.failed]).size)
    drawn = targets.drawn
    window_drawn = drawn[drawn["sample_id"].isin(in_window)] if drawn is not None else None
    counts = {"traces": int(round(sum(1.0 / pi_of[int(s)] for s in in_window.tolist()))), "sampled": int(in_window.size),
              "judged": len(attempted & set(in_window.tolist())), "failed": failed_samples, "unjudged": unjudged,
              "audit_labels": int(lab.sum()), "audit_drawn": int(len(window_drawn)) if window_drawn is not None else None,
              "audit_pending": int((~window_drawn["labelled"]).sum()) if window_drawn is not None else None,
              "triage_labels": int(triage.get(key, 0))}
    return {"window": key, "start": start.isoformat(), "end": end.isoformat(), "closed": end <= now,
            "complete": end <= now and unjudged == 0, "counts": counts,
            "estimate": est["estimate"], "ci": est["ci"], "method": est["method"], "lambda": est["lambda"],
            "interval": est["interval"], "n_effective": est["n_effective"],
            "judge_only": est["judge_only"], "judge_only_ci": est["judge_only_ci"], "agreement": agreement,
            "status": status, "alerts": alerts, "labels_to_settle": est["labels_needed"] if status == "too_few" else None,
            "reason": est["reason"] if est["status"] != "ok" else None, "note": est["note"] if est["status"] != "ok" else None}


def monitor(session: Session, dataset_name: str, judge_name: str, *, task: str | None = None, by_window: str = "week",
            min_value: float | None = None, min_agreement: float = 0.75, positive: str | None = None, level: str | None = None,
            alpha: float = 0.05, now: datetime | None = None) -> dict:
    """Return what `calibrate monitor` writes (docs/production.md lists every key)."""
    if by_window not in WINDOWS:
        raise CalibrationError(f"by-window must be one of {', '.join(WINDOWS)}, not {by_window!r}")
    check_alpha(alpha)
    for name, value in (("min", min_value), ("min-agreement", min_agreement)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)):
            raise CalibrationError(f"--{name} must be a finite number, not {value!r}")
    now = (now or utcnow()).astimezone(UTC)
    dataset = lookup.dataset(session, dataset_name)
    judge = lookup.judge(session, judge_name)
    the_task = _task_of(session, dataset, judge, task)
    estimand = estimand_for(the_task, level=level, positive=positive)
    targets = live_targets(session, dataset, the_task, judge, estimand)
    keys = targets.window_keys(by_window)
    info = _samples(session, dataset, the_task, by_window)
    sample_ids, sample_keys, pi_of = info
    triage = _triage_counts(session, dataset, the_task, sample_ids, sample_keys)
    calibration = _calibration_figure(session, judge, the_task, estimand, alpha)
    windows = [_window(targets, key, keys, by=by_window, task=the_task, sample_ids=sample_ids, sample_keys=sample_keys,
                       triage=triage, calibration=calibration, min_value=min_value, min_agreement=min_agreement, alpha=alpha,
                       now=now, pi_of=pi_of)
               for key in sorted(set(sample_keys.tolist()))]
    return {"dataset": dataset.name, "judge": judge.name, "task": the_task.name, "estimand": estimand.to_dict(), "target": the_task.target,
            "positive": estimand.positive, "metric": estimand.metric, "level": estimand.level, "labels": targets.labels,
            "by_window": by_window, "alpha": alpha, "min": min_value, "min_agreement": min_agreement, "now": now.isoformat(),
            "calibration": {k: calibration[k] for k in ("value", "ci", "n")} | (
                {"reason": calibration["reason"], "note": calibration["note"]} if calibration.get("reason") else {}),
            "counts": {k: v for k, v in targets.counts.items()}, "latest_run": _latest_run(session, dataset, judge),
            "windows": windows}


def _samples(session: Session, dataset: Dataset, task: Task, by: str) -> tuple[np.ndarray, np.ndarray, dict[int, float]]:
    """Return every sample of the dataset with a target of the task, its window key and its inclusion probability (1 when
    absent): a sample without a claim is not waiting for a claim verdict."""
    info = sample_info(session, dataset)
    having = samples_with_targets(session, dataset, task)
    if having is not None:
        info = info[info.index.isin(list(having))]
    ids = info.index.to_numpy(dtype=np.int64)
    keys = window_keys(info["time"].reset_index(drop=True), by).to_numpy() if len(info) else np.array([], dtype=object)
    pi = info["inclusion_prob"].fillna(1.0)
    return ids, keys, dict(zip(ids.tolist(), pi.tolist(), strict=True))


def _triage_counts(session: Session, dataset: Dataset, task: Task, sample_ids: np.ndarray, sample_keys: np.ndarray) -> dict[str, int]:
    """Return per window the number of triage-labelled targets (counted, never used)."""
    labels = labels_frame(session, dataset, task)
    labels = labels[~labels["stale"]]
    streams = stream_assignments(session, dataset)
    if labels.empty or streams.empty:
        return {}
    gold = gold_frame(stream_labels(labels, streams, "triage"), task.kind)
    gold = gold[gold["gold"].notna()]
    key_of = dict(zip(sample_ids.tolist(), sample_keys.tolist(), strict=True))
    out: dict[str, int] = {}
    for sample_id in gold["sample_id"].astype(np.int64).tolist():
        key = key_of.get(int(sample_id))
        if key is not None:
            out[key] = out.get(key, 0) + 1
    return out


def production_gate(result: dict) -> dict:
    """Return the gate's verdict on the latest ended window of a `monitor` result.

    Keys: status (ok | alert | undecided | too_few | no data), exit (EXIT_CODES), window (the window whose figures are
    shown, or None), checked (the window checked), fallback (true when the latest ended window is not complete and the
    figures shown are an earlier complete window's: the gate is then undecided, never a pass), reason, note.
    """
    closed = [w for w in result["windows"] if w["closed"]]
    run = result.get("latest_run") or {}
    if not closed:
        reason = Reason("no_complete_window")
        return {"status": "no data", "exit": EXIT_CODES["no data"], "window": None, "checked": None, "fallback": False,
                "reason": reason.to_dict(), "note": str(reason)}
    latest = closed[-1]
    if latest["complete"]:
        out = {"status": latest["status"], "exit": EXIT_CODES[latest["status"]], "window": latest, "checked": latest["window"],
               "fallback": False, "reason": None, "note": None}
        if run.get("failed"):
            reason = Reason("judge_pass_failed_latest", run=run.get("id"), error=run.get("error") or run.get("status"),
                            window=latest["window"])
            out.update(reason=reason.to_dict(), note=str(reason))
        return out
    complete = [w for w in closed if w["complete"]]
    shown = complete[-1] if complete else None
    counts = latest["counts"]
    reason = Reason("window_incomplete", window=latest["window"], unjudged=counts["unjudged"], sampled=counts["sampled"],
                    failed=counts["failed"], earlier=shown["window"] if shown else "none",
                    earlier_status=shown["status"] if shown else "none",
                    run=f" (the latest judge run, {run.get('id')}, {run.get('status')}: {run.get('error')})" if run.get("failed") else "")
    return {"status": "undecided", "exit": EXIT_CODES["undecided"], "window": shown, "checked": latest["window"],
            "fallback": shown is not None, "reason": reason.to_dict(), "note": str(reason)}
