"""Judge runs in the browser: the Run button (a background thread), the run page with live
progress (htmx polls `/runs/<id>/status`), the list of runs, and Stop."""

from __future__ import annotations

import logging
import threading

from flask import Blueprint, abort, current_app, flash, redirect, render_template, request, url_for
from sqlalchemy import Engine
from sqlmodel import select

from calibrate.i18n import _
from calibrate.judges import NothingToDo, RunOptions, RunSpec, execute_run, prepare_run
from calibrate.judges.extraction import report_for
from calibrate.judges.prices import load_prices
from calibrate.judges.runner import MAX_SAMPLES, request_stop, run_is_live, settle_dead_runs
from calibrate.judges.sandbox import Limits
from calibrate.models import Dataset, Judge, JudgeRun, Prompt, PromptVersion, Task, Verdict
from calibrate.targets import target_names
from calibrate.views.auth import role_required
from calibrate.views.errors import back_to, refusal_text
from calibrate.views.fields import int_field
from calibrate.views.prompts import ENGINEERS, run_choices
from calibrate.views.session import app_engine, get_session, write, writing

bp = Blueprint("runs", __name__)
log = logging.getLogger(__name__)


def _execute_in_background(engine: Engine, run_id: int, prices: dict, limits: Limits) -> None:
    try:
        execute_run(engine, run_id, prices=prices, limits=limits)
    except Exception:
        log.exception("judge run %s failed", run_id)


def start_in_background(run_id: int) -> threading.Thread:
    """Execute a prepared run in a daemon thread (the page polls its progress)."""
    prices = load_prices(current_app.instance_path)
    limits = Limits.from_settings(current_app.config)
    thread = threading.Thread(target=_execute_in_background, args=(app_engine(), run_id, prices, limits),
                              name=f"judge-run-{run_id}", daemon=True)
    thread.start()
    current_app.extensions.setdefault("judge_threads", {})[run_id] = thread
    return thread


@bp.route("/datasets/<name>/extract", methods=("POST",))
@role_required(*ENGINEERS)
def extract(name: str):
    """Start a claim extraction over a dataset's answers (the dataset page's button), in the background."""
    choice = request.form.get("backend", "baseline")
    if choice not in run_choices():
        abort(400, description=f"Unknown backend {choice!r}.")
    config = {"backend": "baseline"} if choice == "baseline" else dict(current_app.config["JUDGE_BACKENDS"][choice])
    limit = request.form.get("limit", type=int)
    spec = RunSpec(dataset=name, prompt=request.form.get("prompt", ""), backend=config["backend"], model=config.get("model"),
                   base_url=config.get("base_url"), api_key_env=config.get("api_key_env"),
                   limit=limit if limit and limit > 0 else None, extraction=True, force=bool(request.form.get("force")),
                   options=RunOptions(concurrency=int(config.get("concurrency", 8))))
    back_to(url_for("datasets.show", name=name))
    try:
        run_id = prepare_run(app_engine(), spec)
    except NothingToDo as exc:  # every answer carries this version's claims already
        flash(refusal_text(exc), "info")
        return redirect(url_for("datasets.show", name=name), code=303)
    start_in_background(run_id)
    return redirect(url_for("runs.show", run_id=run_id), code=303)


@bp.route("/prompts/<name>/<int:number>/run", methods=("POST",))
@role_required(*ENGINEERS)
def create(name: str, number: int):
    """Start a run of a version over a dataset (baseline, or a backend configured in JUDGE_BACKENDS); `samples` K calls
    per target for self-consistency, as `judge run --samples K` (1–20, default 1; a number outside: 400 naming it)."""
    choice = request.form.get("backend", "baseline")
    if choice not in run_choices():
        abort(400, description=f"Unknown backend {choice!r}.")
    config = {"backend": "baseline"} if choice == "baseline" else dict(current_app.config["JUDGE_BACKENDS"][choice])
    limit = int_field(request.form, "limit", minimum=0)
    samples = int_field(request.form, "samples", default=1, minimum=1, maximum=MAX_SAMPLES)  # `judge run --samples K`
    options = RunOptions(concurrency=int(config.get("concurrency", 8)))
    spec = RunSpec(dataset=request.form.get("dataset", ""), prompt=f"{name}@{number}", backend=config["backend"],
                   model=config.get("model"), base_url=config.get("base_url"), api_key_env=config.get("api_key_env"),
                   split=request.form.get("split") or None, labelled_only=bool(request.form.get("labelled_only")),
                   limit=limit if limit and limit > 0 else None, rerun=bool(request.form.get("rerun")),
                   orders=request.form.get("orders") or None, samples=samples, options=options)
    back_to(url_for("prompts.show", name=name, number=number))
    try:
        run_id = prepare_run(app_engine(), spec)
    except NothingToDo as exc:  # not a refusal: every target is judged already
        flash(refusal_text(exc), "info")
        return redirect(url_for("prompts.show", name=name, number=number), code=303)
    start_in_background(run_id)
    return redirect(url_for("runs.show", run_id=run_id), code=303)


def _run_or_404(run_id: int) -> tuple[JudgeRun, Judge, Dataset]:
    session = get_session()
    run = session.get(JudgeRun, run_id) or abort(404)
    return run, session.get(Judge, run.judge_id), session.get(Dataset, run.dataset_id)


def _status_context(run_id: int) -> dict:
    run, judge, dataset = _run_or_404(run_id)
    if run.status in ("pending", "running") and not run_is_live(run):  # its process was killed: failed, resumable
        write(lambda db: settle_dead_runs(db, [db.get(JudgeRun, run_id)]))
        run, judge, dataset = _run_or_404(run_id)
    session = get_session()
    errors = session.exec(
        select(Verdict).where(Verdict.run_id == run.id, Verdict.status.in_(("error", "unparsed"))).order_by(Verdict.id.desc()).limit(10)
    ).all()
    active = run.status in ("pending", "running")
    percent = int(100 * run.n_done / run.n_total) if run.n_total else 0
    params = run.params or {}
    lines = []
    if "kept_labelled" in params and not active:  # an extraction: what it did to the answers, once it ended
        lines = report_for(session, dataset.name, judge.name, limit=(params.get("scope") or {}).get("limit"),
                           force=bool(params.get("force"))).lines()
    return {"run": run, "judge": judge, "dataset": dataset, "problems": errors, "active": active, "percent": percent,
            "p": params, "extraction_lines": lines, "names": target_names(session, [v.target_key for v in errors])}


@bp.route("/runs")
@role_required(*ENGINEERS)
def index():
    """List the runs, newest first (runs whose process was killed are marked failed first)."""
    session = get_session()
    if any(not run_is_live(r) for r in session.exec(select(JudgeRun).where(JudgeRun.status.in_(("pending", "running"))))):
        write(settle_dead_runs)
        session = get_session()
    rows = session.exec(
        select(JudgeRun, Judge.name, Dataset.name).join(Judge, Judge.id == JudgeRun.judge_id)
        .join(Dataset, Dataset.id == JudgeRun.dataset_id).order_by(JudgeRun.id.desc()).limit(200)
    ).all()
    return render_template("runs/index.html", rows=rows)


@bp.route("/runs/<int:run_id>")
@role_required(*ENGINEERS)
def show(run_id: int):
    """Show a run with its live progress."""
    context = _status_context(run_id)
    return render_template("runs/show.html", **context, scored=_scored_as(context["run"], context["judge"]))


def _scored_as(run: JudgeRun, judge: Judge) -> dict | None:
    """Return where a run's verdicts are scored (the dashboard's task and split), or None for an extraction run."""
    if judge.prompt_version_id is None or "kept_labelled" in (run.params or {}):
        return None
    task = get_session().exec(select(Task.name).join(Prompt, Prompt.task_id == Task.id)
                              .join(PromptVersion, PromptVersion.prompt_id == Prompt.id)
                              .where(PromptVersion.id == judge.prompt_version_id)).first()
    if task is None:
        return None
    split = ((run.params or {}).get("scope") or {}).get("split")
    return {"task": task, "split": split or "all"}


@bp.route("/runs/<int:run_id>/status")
@role_required(*ENGINEERS)
def status(run_id: int):
    """Return the progress fragment (polled by htmx while the run is active)."""
    return render_template("runs/_status.html", **_status_context(run_id))


@bp.route("/runs/<int:run_id>/stop", methods=("POST",))
@role_required(*ENGINEERS)
def stop(run_id: int):
    """Ask a running run to stop after its current batch."""
    with writing() as session:
        run = session.get(JudgeRun, run_id) or abort(404)
        stopping = run.status in ("pending", "running")
        if stopping:
            request_stop(session, run)
    if stopping:
        flash(_("Stopping after the current batch; run it again to continue."), "info")
    return redirect(url_for("runs.show", run_id=run_id), code=303)
