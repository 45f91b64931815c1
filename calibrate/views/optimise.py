"""`calibrate optimise` in the browser (engineers and admins): the dashboard's Optimise form starts one in a background
thread, its page shows the candidates as they are scored (htmx polls the status fragment), Cancel stops it after its
current step, and the result is the command's (reports/optimise_report.py's body)."""

from __future__ import annotations

import logging
import threading

from flask import Blueprint, abort, current_app, flash, g, redirect, render_template, request, url_for
from sqlalchemy import Engine

from calibrate.errors import CalibrationError
from calibrate.i18n import _
from calibrate.judges.errors import PromptError
from calibrate.judges.prices import load_prices
from calibrate.judges.sandbox import Limits
from calibrate.judges.versions import parse_ref
from calibrate.loop.optimise import (
    STRATEGIES,
    OptimiseSpec,
    execute_optimisation,
    optimisation_is_live,
    prepare_optimisation,
    request_cancel,
    result_dict,
    settle_dead,
)
from calibrate.models import Optimisation
from calibrate.reasons import Reason
from calibrate.reports.optimise_report import context as optimise_context
from calibrate.task_values import decimal_number
from calibrate.views.auth import role_required
from calibrate.views.errors import back_to
from calibrate.views.fields import int_field
from calibrate.views.prompts import ENGINEERS, run_choices
from calibrate.views.session import app_engine, get_session, write, writing

bp = Blueprint("optimise", __name__)
log = logging.getLogger(__name__)


def _execute_in_background(engine: Engine, opt_id: int, prices: dict, limits: Limits) -> None:
    try:
        execute_optimisation(engine, opt_id, prices=prices, limits=limits)
    except Exception:
        log.exception("optimisation %s failed", opt_id)


def _number(name: str, default: float | None, *, comma: bool = False) -> float | None:
    """Return a form's number; `comma`: also in the decimal-comma notation (a value in (0, 1], where "1,000" cannot
    mean a thousand)."""
    raw = (request.form.get(name) or "").strip()
    if not raw:
        return default
    try:
        return decimal_number(raw) if comma else float(raw)
    except ValueError:
        raise CalibrationError(Reason("optimise_form_number", name=name, raw=raw[:40])) from None


@bp.route("/datasets/<name>/calibration/optimise", methods=("POST",))
@role_required(*ENGINEERS)
def create(name: str):
    """Start an optimisation from the dashboard's form (a backend configured in JUDGE_BACKENDS), in the background."""
    task = request.form.get("task") or "claim_support"
    back_to(url_for("loop.show", name=name, task=task))
    choice = request.form.get("backend", "")
    if choice not in run_choices() or choice == "baseline":
        raise CalibrationError(Reason("optimise_baseline") if choice == "baseline"
                               else Reason("optimise_form_backend", backend=choice[:40], backends=", ".join(run_choices()[1:]) or "—"))
    config = dict(current_app.config["JUDGE_BACKENDS"][choice])
    strategies = tuple(s for s in STRATEGIES if request.form.get(f"strategy_{s}"))
    max_calls = int_field(request.form, "max_calls", minimum=1)
    spec = OptimiseSpec(dataset=name, task=task, start=request.form.get("start", ""), backend=config["backend"],
                        model=config.get("model"), base_url=config.get("base_url"), api_key_env=config.get("api_key_env"),
                        concurrency=int(config.get("concurrency", 8)), target=_number("target", 0.75, comma=True),
                        max_candidates=int_field(request.form, "max_candidates", default=12, minimum=2, maximum=200),
                        max_calls=max_calls, max_cost=_number("max_cost", None),
                        patience=int_field(request.form, "patience", default=2, minimum=1, maximum=50),
                        strategies=strategies, seed=int_field(request.form, "seed", default=0),
                        reuse_test=bool(request.form.get("reuse_test")),
                        bootstrap=current_app.config["BOOTSTRAP"], confidence=current_app.config["CONFIDENCE"],
                        score_seed=current_app.config["SEED"])
    prices = load_prices(current_app.instance_path)
    opt_id = prepare_optimisation(app_engine(), spec, prices=prices, user=g.user)
    thread = threading.Thread(target=_execute_in_background,
                              args=(app_engine(), opt_id, prices, Limits.from_settings(current_app.config)),
                              name=f"optimise-{opt_id}", daemon=True)
    thread.start()
    current_app.extensions.setdefault("optimise_threads", {})[opt_id] = thread
    return redirect(url_for("optimise.show", opt_id=opt_id), code=303)


def _context(opt_id: int) -> dict:
    session = get_session()
    opt = session.get(Optimisation, opt_id) or abort(404)
    if opt.status == "running" and not optimisation_is_live(session, opt):  # its process was killed: failed, resumable
        write(lambda db: settle_dead(db, db.get(Optimisation, opt_id)))
        session = get_session()
        opt = session.get(Optimisation, opt_id)
    result = opt.result if opt.status != "running" and opt.result is not None else result_dict(session, opt)
    return {"opt": opt, "active": opt.status == "running", "version_url": _version_url, **optimise_context(result)}


def _version_url(ref: str | None) -> str | None:
    """Return the prompt page of a candidate `NAME@N` (the page links each version tried), else None."""
    try:
        name, number = parse_ref(ref or "")  # the one reading of a version's name (judges/versions.py)
    except PromptError:
        return None
    return url_for("prompts.show", name=name, number=number) if number is not None else None


@bp.route("/optimisations/<int:opt_id>")
@role_required(*ENGINEERS)
def show(opt_id: int):
    """Show an optimisation: its candidates as they are scored, then its result."""
    return render_template("calibration/optimise.html", **_context(opt_id))


@bp.route("/optimisations/<int:opt_id>/status")
@role_required(*ENGINEERS)
def status(opt_id: int):
    """Return the progress fragment (polled by htmx while the optimisation runs)."""
    return render_template("calibration/_optimise_status.html", **_context(opt_id))


@bp.route("/optimisations/<int:opt_id>/cancel", methods=("POST",))
@role_required(*ENGINEERS)
def cancel(opt_id: int):
    """Ask a running optimisation to stop after its current step (its current run after that run's batch)."""
    with writing() as session:
        opt = session.get(Optimisation, opt_id) or abort(404)
        running = opt.status == "running"
        if running:
            request_cancel(session, opt)
    if running:
        flash(_("Cancelling after the current step; the same settings continue it later."), "info")
    return redirect(url_for("optimise.show", opt_id=opt_id), code=303)
