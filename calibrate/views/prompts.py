"""Judge prompts in the browser (engineers and admins): list, version view, new version from
the previous one, side-by-side diff. Annotators get 403."""

from __future__ import annotations

from dataclasses import replace

from flask import Blueprint, abort, current_app, flash, g, redirect, render_template, request, url_for
from sqlmodel import select

from calibrate import lookup
from calibrate.datasets import dataset_names
from calibrate.errors import Busy, CalibrateError
from calibrate.i18n import gettext
from calibrate.judges.render_pool import GRACE_SECONDS, trial_slot
from calibrate.judges.runner import MAX_SAMPLES
from calibrate.judges.sandbox import Limits
from calibrate.judges.versions import (
    check_version,
    diff_versions,
    format_params,
    latest_version,
    list_prompts,
    parse_few_shot_lines,
    parse_params,
    prompt_scope,
    save_version,
    version_view,
    versions_of,
)
from calibrate.models import PromptVersion, Task
from calibrate.tasks import METRIC_TASKS
from calibrate.views.auth import role_required
from calibrate.views.errors import back_to, refusal_text
from calibrate.views.fields import int_field
from calibrate.views.session import get_session, writing

bp = Blueprint("prompts", __name__)
ENGINEERS = ("engineer", "admin")


def _version_or_404(name: str, number: int):
    session = get_session()
    prompt = lookup.prompt(session, name)
    version = session.exec(select(PromptVersion).where(PromptVersion.prompt_id == prompt.id, PromptVersion.number == number)).first()
    if version is None:
        abort(404)
    return prompt, version


def trial_limits() -> Limits:
    """Return the limits of a trial render in a request: the settings', never waiting for a busy render worker."""
    return replace(Limits.from_settings(current_app.config), wait=False)


def trial():
    """Hold one of this user's and of the server's trial-render slots (Busy 429 / 503 at once past them; docs/security.md)."""
    config = current_app.config
    return trial_slot(g.user.id, per_user=int(config["PROMPT_TRIALS_PER_USER"]), total=int(config["PROMPT_TRIALS_TOTAL"]),
                      seconds=float(config["PROMPT_RENDER_SECONDS"]) + GRACE_SECONDS)


def run_choices() -> list[str]:
    """Return the backends the Run button offers: the baseline and the configured ones."""
    return ["baseline", *sorted(current_app.config.get("JUDGE_BACKENDS", {}) or {})]


@bp.route("/prompts")
@role_required(*ENGINEERS)
def index():
    """List the prompts (`?dataset=D`: only those shown on D, the global ones and D's own); offer a form for a new one."""
    session = get_session()
    tasks = session.exec(select(Task).order_by(Task.id)).all()
    dataset = request.args.get("dataset", "").strip() or None
    if dataset:
        dataset = lookup.dataset(session, dataset).name  # an unknown name: the 404 page naming the datasets
    return render_template("prompts/index.html", rows=list_prompts(session, dataset=dataset), tasks=tasks,
                           datasets=dataset_names(session), dataset=dataset)


@bp.route("/prompts", methods=("POST",))
@role_required(*ENGINEERS)
def create():
    """Create a prompt with the task's built-in template as version 1 (global, or for the dataset picked)."""
    name, task = request.form.get("name", "").strip(), request.form.get("task", "")
    datasets = [request.form["dataset"].strip()] if request.form.get("dataset", "").strip() else []
    back_to(url_for("prompts.index"))
    limits = trial_limits()
    # Checked before the write lock is taken: the trial render may take PROMPT_RENDER_SECONDS.
    with trial():
        checked = check_version(get_session(), name, task=task, limits=limits, datasets=datasets)
    with writing() as session:
        result = save_version(session, name, task=task, author=g.user, note="created from the built-in template",
                              limits=limits, checked=checked, datasets=datasets)
    return redirect(url_for("prompts.show", name=name, number=result.version.number), code=303)


@bp.route("/prompts/<name>")
@role_required(*ENGINEERS)
def latest(name: str):
    """Send to the newest version of a prompt."""
    session = get_session()
    version = latest_version(session, lookup.prompt(session, name))
    return redirect(url_for("prompts.show", name=name, number=version.number))


@bp.route("/prompts/<name>/<int:number>")
@role_required(*ENGINEERS)
def show(name: str, number: int):
    """Show one version: its template, system text, model, parameters, few-shots and runs."""
    prompt, version = _version_or_404(name, number)
    session = get_session()
    view = version_view(session, prompt, version)
    scope = prompt_scope(session, prompt)
    datasets = [d for d in dataset_names(session) if not scope or d in scope]  # a scoped prompt runs on its datasets only
    return render_template("prompts/show.html", scope=scope, v=view, versions=versions_of(session, prompt), datasets=datasets,
                           backends=run_choices(), params_text=format_params(version.params),
                           # the Run form's samples (self-consistency): not for metric tasks (one verdict per sample)
                           self_consistency=view.task.name not in METRIC_TASKS, max_samples=MAX_SAMPLES)


def _form_fields(version: PromptVersion, view) -> dict:
    return {
        "template": version.template, "system": version.system, "model": version.model,
        "params": format_params(version.params),
        "few_shots": "\n".join(f"{e.ref}" + (f" | {e.rationale}" if e.rationale else "") for e in view.examples),
        "note": "", "dataset": "",
    }


@bp.route("/prompts/<name>/<int:number>/edit", methods=("GET", "POST"))
@role_required(*ENGINEERS)
def update(name: str, number: int):
    """Edit a copy of a version; saving creates the next version (or nothing, if identical)."""
    prompt, version = _version_or_404(name, number)
    session = get_session()
    view = version_view(session, prompt, version)
    if request.method == "GET":
        return render_template("prompts/edit.html", v=view, form=_form_fields(version, view), error=None)
    form = {key: request.form.get(key, "") for key in ("template", "system", "model", "params", "few_shots", "note", "dataset")}
    try:
        fields = {"template": form["template"], "system": form["system"], "model": form["model"],
                  "params": parse_params(form["params"].splitlines()), "few_shots": parse_few_shot_lines(form["few_shots"]),
                  "dataset": form["dataset"].strip() or None, "limits": trial_limits()}
        # Checked before the write lock is taken: the trial render may take PROMPT_RENDER_SECONDS.
        with trial():
            checked = check_version(session, prompt.name, **fields)
        with writing() as db:
            result = save_version(db, prompt.name, note=form["note"], author=g.user, checked=checked, **fields)
    except CalibrateError as exc:  # the form again, with what was typed and why it was refused
        page = render_template("prompts/edit.html", v=view, form=form, error=refusal_text(exc))
        if isinstance(exc, Busy):  # too many trial renders at once: nothing was checked, send it again later
            return page, exc.status, {"Retry-After": str(exc.retry_after)}
        return page, 400
    ref = f"{prompt.name}@{result.version.number}"
    if result.created:
        flash(gettext("Saved %(version)s.", version=ref), "info")
    else:
        flash(gettext("Nothing saved: identical to %(version)s.", version=ref), "info")
    return redirect(url_for("prompts.show", name=prompt.name, number=result.version.number), code=303)


@bp.route("/prompts/<name>/diff")
@role_required(*ENGINEERS)
def diff(name: str):
    """Compare two versions side by side (template, system, model, params, few-shots)."""
    session = get_session()
    prompt = lookup.prompt(session, name)
    a, b = int_field(request.args, "a", minimum=1), int_field(request.args, "b", minimum=1)
    if a is None or b is None:
        abort(400, description=gettext("Choose two versions to compare (a and b)."))
    _, version_a = _version_or_404(name, a)
    _, version_b = _version_or_404(name, b)
    return render_template("prompts/diff.html", d=diff_versions(session, prompt, version_a, version_b),
                           versions=versions_of(session, prompt))
