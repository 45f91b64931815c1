"""Adjudication (engineers and admins): targets where annotators disagree, and the gold decision.

The list is a page (filters by GET); deciding one target is an htmx form that answers with the
updated dispute fragment (a plain form post gets a 303 back to the list).
"""

from __future__ import annotations

from flask import Blueprint, flash, g, redirect, render_template, request, url_for

from calibrate import lookup
from calibrate.annotation.adjudication import adjudicate, dispute, disputes
from calibrate.annotation.guidelines import current_versions, tasks_in_order
from calibrate.annotation.items import TaskNotOffered, widget_for
from calibrate.annotation.queue import for_review
from calibrate.datasets import dataset_names
from calibrate.i18n import _
from calibrate.task_scopes import offered_on, tasks_scopes
from calibrate.views.auth import is_script_request, role_required
from calibrate.views.errors import refusal_text, refuse_back_to
from calibrate.views.fields import MAX_PAGE, BadField, int_field, task_on_dataset
from calibrate.views.session import get_session, writing

bp = Blueprint("adjudicate", __name__, url_prefix="/adjudicate")

REVIEWERS = ("engineer", "admin")
SHOW = ("open", "decided", "all")


refuse_back_to(bp, lambda: url_for("adjudicate.index"), script_aware=True, vary_on_htmx=True)


@bp.route("")
@role_required(*REVIEWERS)
def index():
    """List the disputed targets of one task in one dataset (the dataset's tasks and the global ones are offered; another
    dataset's task is refused, 400), and the items flagged for review."""
    db = get_session()
    names = dataset_names(db)
    scopes = tasks_scopes(db)  # a task made for some datasets is offered only on them (the workbench's rule)
    asked = request.args.get("task") or None
    scope = scopes.get(lookup.task(db, asked).id) if asked else None
    dataset_name = request.args.get("dataset") or next((n for n in names if offered_on(scope, n)), names[0] if names else None)
    tasks = [t for t in tasks_in_order(db) if dataset_name is None or offered_on(scopes.get(t.id), dataset_name)]
    task_on_dataset(db, asked, dataset_name)  # another dataset's task: 400 naming the field
    task_name = asked or (tasks[0].name if tasks else None)
    show = request.args.get("show") if request.args.get("show") in SHOW else "open"
    page_no = int_field(request.args, "page", default=1, minimum=1, maximum=MAX_PAGE)
    page = task = dataset = widget = None
    if dataset_name and task_name:
        dataset = lookup.dataset(db, dataset_name)
        task = lookup.task(db, task_name)
        page = disputes(db, dataset, task, show=show, page=page_no)
        widget = widget_for(task, current_versions(db).get(task.id))
    return render_template("admin/adjudicate.html", datasets=names, tasks=tasks, dataset=dataset, task=task,
                           show=show, page=page, widget=widget, review=for_review(db))


@bp.route("/<task_name>/<target_key>", methods=("POST",))
@role_required(*REVIEWERS)
def decide(task_name: str, target_key: str):
    """Set the adjudicated (gold) label of one target, with a note."""
    with writing() as db:
        task = lookup.task(db, task_name)
        try:
            adjudicate(db, g.user, task, target_key, request.form.get("value", ""), request.form.get("note", ""))
        except TaskNotOffered as exc:  # a target of a dataset the task is not scoped to
            raise BadField("task", refusal_text(exc)) from None
    if not is_script_request():
        flash(_("Gold set for %(target)s.", target=target_key), "done")
        return redirect(request.form.get("back") if (request.form.get("back") or "").startswith("/adjudicate")
                        else url_for("adjudicate.index"), code=303)
    db = get_session()
    task = lookup.task(db, task_name)
    found = dispute(db, task, target_key)
    widget = widget_for(task, current_versions(db).get(task.id))
    return render_template("admin/_dispute.html", d=found, task=task, widget=widget, just_decided=True)
