"""The Tasks page (engineers and admins): every task, and for custom ones a form to edit and a button to remove.

The same domain calls and checks as `calibrate task edit` and `calibrate task remove`
(calibrate/tasks.py): a refusal comes back as the same one-line message, flashed
(views/errors.py).
"""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from sqlmodel import select

from calibrate import i18n, lookup
from calibrate.i18n import _
from calibrate.models import Task
from calibrate.task_scopes import tasks_scopes
from calibrate.task_values import describe_values
from calibrate.tasks import MAX_DISPLAY_CHARS, edit_task, parse_scale, remove_task, shipped_text
from calibrate.views.auth import role_required
from calibrate.views.errors import back_to
from calibrate.views.prompts import ENGINEERS
from calibrate.views.session import get_session, writing

bp = Blueprint("tasks", __name__, url_prefix="/tasks")


@bp.route("")
@role_required(*ENGINEERS)
def index():
    """List the tasks: built-in ones as they are, custom ones with their edit form."""
    tasks = get_session().exec(select(Task).order_by(Task.id)).all()
    # "shipped": the default description as a shipped text (a built-in's, translated), not the per-language one
    scopes = tasks_scopes(get_session())  # the datasets of a task made for some (task add --dataset)
    rows = [{"task": task, "values": describe_values(task), "shipped": shipped_text(task.description or ""),
             "scope": scopes.get(task.id, [])} for task in tasks]
    return render_template("tasks/index.html", rows=rows, locales=i18n.LOCALES, default_locale=i18n.DEFAULT_LOCALE,
                           max_display=MAX_DISPLAY_CHARS)


def display_fields(task: Task, form) -> dict[str, dict[str, str]]:
    """Return the display names the form sends (`display.<locale>.<label index>`) as {locale: {label: name}}.

    Only the fields present are read (an empty one removes the name); an index that is not one of the
    task's labels, or a locale calibrate does not speak, is ignored: the form only ever names real ones.
    """
    display: dict[str, dict[str, str]] = {}
    for locale in i18n.LOCALES:
        for index, label in enumerate(task.labels or []):
            field = f"display.{locale}.{index}"
            if field in form:
                display.setdefault(locale, {})[label] = form[field].strip()
    return display


def description_fields(form) -> dict[str, str]:
    """Return the descriptions in other languages the form sends (`description.<locale>`) as {locale: text}
    (an empty one removes that language's; a locale calibrate does not speak is ignored)."""
    return {locale: form[f"description.{locale}"].strip() for locale in i18n.LOCALES
            if locale != i18n.DEFAULT_LOCALE and f"description.{locale}" in form}


@bp.route("/<name>", methods=("POST",))
@role_required(*ENGINEERS)
def update(name: str):
    """Change a task's description, add labels, or set its scale (`calibrate task edit`)."""
    back_to(url_for("tasks.index"))
    form = request.form
    labels = [label for label in form.get("add_labels", "").split(",") if label.strip()]
    scale = parse_scale(form["scale"]) if form.get("scale", "").strip() else None
    with writing() as session:
        task = lookup.task(session, name)
        display = display_fields(task, form)
        description = form.get("description")
        if description == "" and shipped_text(task.description or "") != task.description:
            description = None  # a built-in's shipped description, shown translated as the placeholder: unchanged
        change = edit_task(session, name, description=description, add_labels=labels or None, scale=scale,
                           display=display or None, descriptions=description_fields(form) or None)
    flash(f"{change.line()}.", "info")
    return redirect(url_for("tasks.index"), code=303)


@bp.route("/<name>/remove", methods=("POST",))
@role_required(*ENGINEERS)
def remove(name: str):
    """Remove a custom task nothing uses yet (`calibrate task remove`)."""
    back_to(url_for("tasks.index"))
    with writing() as session:
        task = remove_task(session, name)
    flash(_("Removed task %(task)s.", task=task.name), "info")
    return redirect(url_for("tasks.index"), code=303)
