"""An honest number about the live system: `calibrate estimate` and a report section's estimate block.

The targets, the estimand, the labels, the weights and the windows are calibration/live.py's (the one
definition every production figure uses); `live.estimate_targets` computes every figure through
`stats.design.design_estimate` (docs/statistics.md §18). Here: the options, the scope (`split`, `where`:
calibrate/where.py's grammar, its `labelled` a label of the estimated task; `golden`), the alternatives beside
the estimate (the labels alone, the judge alone, Rogan–Gladen), the labels needed for a width, and the windows.

Undefined results (no labels; too few audit labels where the traffic is; a score whose audit does not vary;
Rogan–Gladen's refusals) come back as the result's `status` ("no_data" or "too_few"; "undefined" for
Rogan–Gladen) with `reason` ({code, …}: a code of calibrate.reasons) and `note`; the command turns them into an
error, never a number.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sqlmodel import Session

from calibrate import lookup
from calibrate.calibration.calibrated import calibrated_task
from calibrate.calibration.live import WINDOWS, Estimand, LiveTargets, estimand_for, estimate_targets, live_targets
from calibrate.datasets import split_samples
from calibrate.errors import CalibrationError
from calibrate.models import Task
from calibrate.reasons import TEMPLATES, Reason, noted
from calibrate.stats import labels_needed, rogan_gladen
from calibrate.where import select_ids

__all__ = ["BLOCK_KEYS", "METHODS", "REASONS", "WINDOWS", "estimate_block", "run_estimate"]

METHODS = ("ppi++", "ppi", "classical", "rogan-gladen")

#: Refusals that come from the data's shape rather than from a statistic (codes of calibrate.reasons.TEMPLATES).
REASONS: dict[str, str] = {code: str(TEMPLATES[code]) for code in ("not_binary", "rogan_gladen_weighted")}


def check_options(method: str, alpha: float, by_window: str | None, target_width: float) -> None:
    """Refuse options no estimate can take (each a CalibrationError naming the option)."""
    if method not in METHODS:
        raise CalibrationError(Reason("option_method", methods=", ".join(METHODS), method=method))
    check_alpha(alpha)
    if by_window is not None and by_window not in WINDOWS:
        raise CalibrationError(Reason("option_by_window", windows=", ".join(WINDOWS), value=by_window))
    if not isinstance(target_width, (int, float)) or not math.isfinite(target_width) or not 1e-6 <= target_width <= 1:
        raise CalibrationError(Reason("option_target_width", value=target_width))


def check_alpha(alpha: float) -> None:
    """Refuse an error level outside [1e-6, 0.5] (an interval at 1 − 1e-320 has no finite quantile)."""
    if not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or not 1e-6 <= alpha <= 0.5:
        raise CalibrationError(Reason("option_alpha", value=alpha))


def _pair(est: dict) -> dict:
    return {"estimate": est["estimate"], "ci": est["ci"]}


def _rogan_gladen(targets: LiveTargets, alpha: float) -> dict[str, Any]:
    """Return Rogan–Gladen's figures (unweighted: refused on a weighted dataset, whose traffic it would misstate)."""
    if targets.estimand.metric != "share":
        return {"status": "undefined", **noted(Reason("not_binary"))}
    if targets.weighted:
        return {"status": "undefined", **noted(Reason("rogan_gladen_weighted"))}
    lab = targets.labelled & ~np.isnan(targets.y) & ~np.isnan(targets.yhat)
    unl = ~targets.labelled & ~np.isnan(targets.yhat)
    est = rogan_gladen(targets.y[lab], targets.yhat[lab], targets.yhat[unl], alpha=alpha)
    out = {"estimate": est.value, "ci": list(est.ci) if est.ci else None, "status": est.status, "lambda": None,
           "reason": est.reason.to_dict() if est.note and est.reason else None, "note": est.note or None,
           "method": "rogan-gladen", "interval": "lee"}
    out.update({k: est.extra.get(k) for k in ("sensitivity", "specificity", "n_positive", "n_negative")})
    return out


def _window_rows(targets: LiveTargets, by: str, method: str, alpha: float) -> list[dict]:
    keys = targets.window_keys(by)
    rows = []
    for key in sorted(set(keys.tolist())):
        one = estimate_targets(targets, keys == key, method=method, alpha=alpha)
        rows.append({"window": key, "n_labelled": one["n_labelled"], "n_unlabelled": one["n_unlabelled"],
                     "estimate": one["estimate"], "ci": one["ci"], "method": one["method"], "status": one["status"],
                     **({"reason": one["reason"], "note": one["note"], "labels_to_settle": one["labels_needed"]}
                        if one["status"] != "ok" else {})})
    return rows


def run_estimate(session: Session, dataset_name: str, task_name: str, judge_name: str, *, method: str = "ppi++",
                 alpha: float = 0.05, split: str | None = None, where: str | None = None, positive: str | None = None,
                 level: str | None = None, by_window: str | None = None, target_width: float = 0.05,
                 order_rule: str = "consistent", samples: frozenset[int] | None = None, golden: dict | None = None,
                 frames=None, totals=None) -> dict:
    """Return what `calibrate estimate` writes (docs/cli.md lists the keys); undefined results carry status, reason, note.

    `samples` and `golden` (--golden NAME[@v]): only those samples, and the golden version cited as `golden`.

    Raises NotFound for an unknown dataset, task or judge and CalibrationError for options the data
    cannot answer (a split or --where value no sample has, an unknown positive label or level).
    """
    check_options(method, alpha, by_window, target_width)
    dataset = lookup.dataset(session, dataset_name)
    task = calibrated_task(session, task_name)
    judge = lookup.judge(session, judge_name)
    estimand = estimand_for(task, level=level, positive=positive)
    scope = split_samples(session, dataset, split) if split else None
    if where:
        chosen = set(select_ids(session, dataset, where, task_ids=(task.id,), error=CalibrationError, required=True))
        scope = chosen if scope is None else scope & chosen
    if samples is not None:
        scope = set(samples) if scope is None else scope & samples
    targets = live_targets(session, dataset, task, judge, estimand, samples=scope, order_rule=order_rule,
                           with_time=by_window is not None, frames=frames, totals=totals)
    return estimate_result(targets, dataset=dataset.name, task=task.name, judge=judge.name, method=method, alpha=alpha,
                           split=split, where=where, by_window=by_window, target_width=target_width, golden=golden)


def estimate_result(targets: LiveTargets, *, dataset: str, task: str, judge: str, method: str, alpha: float,
                    split: str | None = None, where: str | None = None, by_window: str | None = None,
                    target_width: float = 0.05, golden: dict | None = None) -> dict:
    """Return `calibrate estimate`'s result for targets already read (run_estimate; the report's block)."""
    estimand: Estimand = targets.estimand
    head: dict[str, Any] = {"dataset": dataset, "task": task, "judge": judge, "split": split, "where": where,
                            "estimand": estimand.to_dict(), "target": targets.target, "positive": estimand.positive,
                            "unit": "answer" if estimand.level == "answers" else "target", "method": method, "alpha": alpha,
                            "labels": targets.labels, **({"golden": golden} if golden else {})}
    main = estimate_targets(targets, method="ppi++" if method == "rogan-gladen" else method, alpha=alpha)
    counts = {"n_labelled": main["n_labelled"], "n_unlabelled": main["n_unlabelled"], "n_failed": main["n_failed"],
              **targets.counts}
    if method == "rogan-gladen":
        figures = _rogan_gladen(targets, alpha)
        weighted = False
    else:
        figures = {k: main[k] for k in ("estimate", "ci", "method", "lambda", "status", "reason", "note", "interval",
                                         "n_effective")}
        weighted = targets.weighted
    result: dict[str, Any] = {**head, **counts, **figures, "weighted": weighted}
    if figures["status"] != "ok":
        result["labels_to_settle"] = main["labels_needed"] if method != "rogan-gladen" else None
        result["classes"] = main["classes"]
        return result
    labels_alone = estimate_targets(targets, method="classical", alpha=alpha)
    result["classical"] = _pair(labels_alone)
    result["naive_judge"] = {"estimate": main["judge_only"], "ci": main["judge_only_ci"]}
    lab = targets.labelled & ~np.isnan(targets.y)
    weights = 1.0 / (targets.pi_t[lab] * targets.pi_a[lab]) if targets.weighted else None
    yhat_lab = np.nan_to_num(targets.yhat[lab], nan=0.0)
    power = labels_needed(targets.y[lab], yhat_lab, n_total=len(targets.yhat), target_width=target_width, alpha=alpha,
                          method="classical" if method == "classical" else "ppi++", weights=weights)
    result["labels_needed"] = int(power.value) if power.ok else None
    result["target_width"] = target_width
    if not power.ok:
        result["labels_needed_note"] = power.note
        result["labels_needed_reason"] = power.reason.to_dict() if power.reason else None
    if by_window:
        result["by_window"] = by_window
        result["windows"] = _window_rows(targets, by_window, "ppi++" if method == "rogan-gladen" else method, alpha)
    return result


#: The keys of run_estimate's result a report section's `estimate` block keeps (the dataset, task and judge are the report's).
BLOCK_KEYS = ("method", "estimand", "target", "positive", "unit", "alpha", "estimate", "ci", "lambda", "status", "reason", "note", "n_labelled",
              "n_unlabelled", "n_failed", "n_fewshot_excluded", "n_incomplete_answers", "n_outside_audit", "weighted", "labels",
              "interval", "classical", "naive_judge", "labels_needed", "target_width", "labels_needed_note", "labels_needed_reason",
              "labels_to_settle")


def estimate_block(session: Session, dataset_name: str, task: Task, judge_name: str, *, split: str | None = None,
                   confidence: float = 0.95, order_rule: str = "consistent", frames=None, totals=None) -> dict | None:
    """Return a report section's `estimate` block: `calibrate estimate`'s default on the report's split, or None.

    None when the judge has no unlabelled target (nothing beyond the labels to estimate from), for a task without a
    default positive label (pairwise), and for the metric tasks whose gold is derived (faithfulness, context_precision:
    claim_support's block is the share of answers whose every claim is supported). An estimate the data cannot give is
    a block with its status and reason, never a number.
    """
    if task.kind == "pairwise" or task.name in ("faithfulness", "context_precision"):
        return None
    try:
        result = run_estimate(session, dataset_name, task.name, judge_name, method="ppi++", alpha=round(1 - confidence, 10),
                              split=split, order_rule=order_rule, frames=frames, totals=totals)
    except CalibrationError:
        return None  # a task this estimand does not fit (e.g. values that are not numbers)
    if not result.get("n_unlabelled"):
        return None
    return {key: result[key] for key in BLOCK_KEYS if key in result}
