"""The Production page (dataset → Production) and the queue policy form: `calibrate monitor` and `calibrate queue auto` on the web."""

from __future__ import annotations

import math

from flask import Blueprint, flash, g, redirect, render_template, request, url_for
from sqlalchemy import select as sa_select

from calibrate import lazy, lookup
from calibrate.annotation import AnnotationError
from calibrate.annotation.auto_queue import MAX_DAILY, policy_dict, queue_auto, saved_policy, stream_counts
from calibrate.errors import CalibrationError
from calibrate.i18n import _
from calibrate.models import EXTRACTION, Judge, Sample, Task, User, Verdict
from calibrate.reasons import Reason
from calibrate.targets import level_name
from calibrate.task_values import decimal_number
from calibrate.views.auth import role_required
from calibrate.views.errors import back_to, refusal_text
from calibrate.views.prompts import ENGINEERS
from calibrate.views.session import get_session, writing

# Loaded on the first Production page, not with the app (pandas and SciPy).
production = lazy.module("calibrate.calibration")  # its public API (monitor), never one of its modules
production_report = lazy.module("calibrate.reports.production_report")

bp = Blueprint("production", __name__)
# A level of the live estimate (answers, claims, contexts, steps) in the reader's language (datasets/production.html).
bp.add_app_template_global(level_name, "level_name")


def judges_on(session, dataset) -> list[str]:
    """Return the names of the judges with verdicts on the dataset (not claim extractions), by name."""
    extraction = sa_select(Task.id).where(Task.kind == EXTRACTION)
    rows = session.execute(
        sa_select(Judge.name).join(Verdict, Verdict.judge_id == Judge.id).join(Sample, Sample.id == Verdict.sample_id)
        .where(Sample.dataset_id == dataset.id, Verdict.task_id.not_in(extraction)).distinct()).all()
    return sorted(r[0] for r in rows)


def tasks_of(session, dataset, judge_name: str | None) -> list[str]:
    """Return the tasks (not claim extractions) the judge has verdicts for on the dataset, by name."""
    if not judge_name:
        return []
    rows = session.execute(
        sa_select(Task.name).join(Verdict, Verdict.task_id == Task.id).join(Judge, Judge.id == Verdict.judge_id)
        .join(Sample, Sample.id == Verdict.sample_id)
        .where(Sample.dataset_id == dataset.id, Judge.name == judge_name, Task.kind != EXTRACTION).distinct()).all()
    return sorted(r[0] for r in rows)


def queue_form(session, dataset) -> dict:
    """Return what the queue policy form shows: the saved policy (or defaults), the experts, the streams' counts."""
    policy = saved_policy(session, dataset)
    experts = [u.username for u in session.exec(
        sa_select(User).where(User.active.is_(True), User.role == "annotator").order_by(User.username)).scalars().all()]
    return {"policy": policy_dict(policy) if policy else None, "experts": experts, "streams": stream_counts(session, dataset),
            "max_daily": MAX_DAILY}


def _number(form, name: str, default: float) -> float:
    raw = (form.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = decimal_number(raw)
    except ValueError:
        raise AnnotationError(Reason("auto_share_range", name=name, value=raw[:20])) from None
    if not math.isfinite(value):
        raise AnnotationError(Reason("auto_share_range", name=name, value=raw[:20]))
    return value


def _whole(form, name: str, default: int) -> int:
    raw = (form.get(name) or "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:
        raise AnnotationError(Reason("auto_daily_range", limit=MAX_DAILY, value=raw[:20]))
    return int(raw)


@bp.route("/datasets/<name>/production")
@role_required(*ENGINEERS)
def show(name: str):
    """Show the calibrated judge on production per window (`calibrate monitor`) and the queue policy."""
    session = get_session()
    dataset = lookup.dataset(session, name)
    judges = judges_on(session, dataset)
    judge = request.args.get("judge") if request.args.get("judge") in judges else (judges[0] if judges else None)
    tasks = tasks_of(session, dataset, judge)
    task = request.args.get("task") if request.args.get("task") in tasks else (tasks[0] if tasks else None)
    by = request.args.get("by") if request.args.get("by") in ("day", "week", "month") else "week"
    level = request.args.get("level") if request.args.get("level") in production.LEVELS else None
    raw_min = (request.args.get("min") or "").strip()
    min_value = None
    if raw_min:
        try:
            min_value = decimal_number(raw_min)
        except ValueError:
            min_value = None
        if min_value is not None and not math.isfinite(min_value):
            min_value = None
    result = body = message = None
    if judge and task:
        try:
            result = production.monitor(session, dataset.name, judge, task=task, by_window=by, min_value=min_value, level=level)
        except CalibrationError as refused:  # e.g. a pairwise task needs its positive label: say so on the page, keep the form
            message = refusal_text(refused)
        else:
            body = production_report.view(result)
    target = session.execute(sa_select(Task.target).where(Task.name == task)).scalar_one_or_none() if task else None
    levels = production.levels_of(target) if target else ("answers",)
    return render_template("datasets/production.html", dataset=dataset, judges=judges, judge=judge, tasks=tasks, task=task, by=by,
                           level=(result or {}).get("level") or levels[0], levels=levels,
                           min_value=raw_min if min_value is not None else "", result=result, body=body, message=message,
                           queue=queue_form(session, dataset))


@bp.route("/datasets/<name>/queue-auto", methods=("POST",))
@role_required(*ENGINEERS)
def queue(name: str):
    """Save the dataset's queue policy and apply it now (`calibrate queue auto`)."""
    back_to(request.form.get("back") == "dataset" and url_for("datasets.show", name=name) or url_for("production.show", name=name))
    with writing() as session:
        form = request.form
        summary = queue_auto(session, name, daily=_whole(form, "daily", 0), assign=form.getlist("assign"),
                             overlap=_whole(form, "overlap", 1), overlap_share=_number(form, "overlap_share", 0.0),
                             audit_share=_number(form, "audit_share", 0.5), seed=_whole(form, "seed", 0), user=g.user)
    flash(_("Queue policy saved and applied for %(day)s: %(audit)s audit and %(triage)s triage assignments added "
            "(today %(used)s of %(daily)s).", day=summary["day"], audit=summary["audit"]["added"],
            triage=summary["triage"]["added"],
            used=sum(summary[s]["used_before"] + summary[s]["added"] for s in ("audit", "triage")),
            daily=summary["policy"]["daily"]), "info")
    target = url_for("datasets.show", name=name) if form.get("back") == "dataset" else url_for("production.show", name=name)
    return redirect(target, code=303)
