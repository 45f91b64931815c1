"""Guidelines (engineers and admins): read and edit each task's guideline; re-queue outdated items.

Saving adds a version (the old ones stay, and every label keeps the version it was made under).
"""

from __future__ import annotations

from flask import Blueprint, flash, g, redirect, render_template, request, url_for

from calibrate import lookup
from calibrate.annotation import AnnotationError
from calibrate.annotation.guidelines import guideline_overview, outdated_assignments, requeue_outdated, save_guideline, versions_of
from calibrate.i18n import _, ngettext
from calibrate.views.auth import role_required
from calibrate.views.errors import refusal_text, refuse_back_to
from calibrate.views.session import get_session, writing

bp = Blueprint("guidelines", __name__, url_prefix="/guidelines")

EDITORS = ("engineer", "admin")


refuse_back_to(bp, lambda: request.path if request.method == "GET" else url_for("guidelines.index"))


@bp.route("")
@role_required(*EDITORS)
def index():
    """List the tasks with their current guideline version and outdated items."""
    return render_template("admin/guidelines.html", rows=guideline_overview(get_session()))


@bp.route("/<task_name>")
@role_required(*EDITORS)
def show(task_name: str):
    """Show a task's guideline for editing, with its versions."""
    db = get_session()
    task = lookup.task(db, task_name)
    versions = versions_of(db, task)
    return render_template("admin/guideline.html", task=task, versions=versions,
                           current=versions[0][0] if versions else None, outdated=outdated_assignments(db, task))


@bp.route("/<task_name>", methods=("POST",))
@role_required(*EDITORS)
def update(task_name: str):
    """Save a new version of a task's guideline."""
    try:
        with writing() as db:
            task = lookup.task(db, task_name)
            guideline = save_guideline(db, task, request.form.get("text", ""), g.user)
    except AnnotationError as exc:
        flash(refusal_text(exc), "error")
        return redirect(url_for("guidelines.show", task_name=task_name), code=303)
    flash(_("Saved %(task)s guideline v%(version)s. New labels record v%(version)s.", task=task.name, version=guideline.version), "done")
    return redirect(url_for("guidelines.show", task_name=task.name), code=303)


@bp.route("/<task_name>/requeue", methods=("POST",))
@role_required(*EDITORS)
def requeue(task_name: str):
    """Put items labelled under an older guideline back in their annotators' queues."""
    with writing() as db:
        task = lookup.task(db, task_name)
        dataset = None
        if request.form.get("dataset"):
            dataset = lookup.dataset(db, request.form["dataset"])
        count = requeue_outdated(db, task, dataset)
    flash(ngettext("Re-queued %(num)s item: its annotator will confirm each outdated %(task)s label.",
                   "Re-queued %(num)s items: their annotators will confirm each outdated %(task)s label.", count, task=task.name), "done")
    return redirect(url_for("guidelines.show", task_name=task.name), code=303)
