"""Browse datasets and their samples."""

from __future__ import annotations

import math

from flask import Blueprint, abort, current_app, flash, g, redirect, render_template, request, send_from_directory, url_for
from sqlalchemy import select as sa_select
from sqlmodel import col

from calibrate import lazy, lookup
from calibrate.annotation.claim_edits import claim_history
from calibrate.claimsets import expert_changes, source_counts
from calibrate.datasets import dataset_overview, sample_detail, sample_page
from calibrate.errors import GoldenError
from calibrate.i18n import N_, _
from calibrate.ingest.traces.staging import production_source
from calibrate.judges.extraction import extraction_versions
from calibrate.models import Sample
from calibrate.reasons import Reason
from calibrate.reports.summary import reason_text
from calibrate.views.auth import landing_page, login_required, role_required
from calibrate.views.errors import back_to
from calibrate.views.fields import MAX_PAGE, int_field
from calibrate.views.production import queue_form
from calibrate.views.prompts import ENGINEERS, run_choices
from calibrate.views.session import get_session, writing

# Loaded on the first dataset page an engineer opens, not when the app starts (it brings pandas and SciPy).
golden = lazy.module("calibrate.loop.golden")
retention = lazy.module("calibrate.ingest.traces.retention")  # the production source's retention (it brings pandas)

bp = Blueprint("datasets", __name__)

# The claim changes of the claim history as people read them (_claim_history.html translates `row.action`).
CLAIM_ACTIONS = (N_("split"), N_("merge"), N_("edit"))

PER_PAGE = 50


@bp.route("/")
@login_required
def home():
    """Send a visitor where she starts: an annotator to her queue, engineers and admins to the datasets (else the login)."""
    return redirect(landing_page(g.user))


@bp.route("/favicon.ico")
def favicon():
    """Serve the icon browsers ask for by this name (pages name the SVG one)."""
    return send_from_directory(current_app.static_folder, "favicon.ico", mimetype="image/vnd.microsoft.icon", max_age=86400)


@bp.route("/datasets")
@login_required
def index():
    """List the datasets."""
    return render_template("datasets/index.html", rows=dataset_overview(get_session()))


@bp.route("/datasets/<name>")
@login_required
def show(name: str):
    """List a dataset's samples, a page at a time."""
    session = get_session()
    dataset = lookup.dataset(session, name)
    page = int_field(request.args, "page", default=1, minimum=1, maximum=MAX_PAGE)
    split = request.args.get("split") or None
    rows, total = sample_page(session, dataset, page=page, per_page=PER_PAGE, split=split)
    pages = max((total + PER_PAGE - 1) // PER_PAGE, 1)
    claims = goldens = queue = None
    if g.user.role in ENGINEERS:  # the claim sets, the experts' changes per method, the extraction button, golden sets
        queue = queue_form(session, dataset)
        claims = {"sources": source_counts(session, dataset=dataset), "changes": expert_changes(session, dataset),
                  "versions": extraction_versions(session), "backends": run_choices()}
        goldens = [{**row, "status": golden.golden_status(session, dataset.name, row["name"])}
                   for row in golden.list_golden(session, dataset.name)]
    drift = _drift_check(session, dataset, goldens or [])
    production = production_source(session, dataset)
    if production is not None:
        production["retention"] = retention.retention_of(session, dataset)
    has_splits = session.scalar(sa_select(Sample.id).where(Sample.dataset_id == dataset.id, col(Sample.split).is_not(None))
                                .limit(1)) is not None
    return render_template("datasets/show.html", dataset=dataset, rows=rows, total=total, page=page, pages=pages, split=split,
                           claims=claims, goldens=goldens, queue=queue, drift=drift, production=production,
                           has_splits=has_splits)


def _drift_check(session, dataset, goldens: list[dict]) -> dict | None:
    """Run `golden drift` when the page is asked for one (`?drift=NAME&against=WHERE&fields=…`), else None.

    A refused WHERE or field answers as every refused page does: the error page with the refusal,
    worded from its reason (views/errors.py).
    """
    name = request.args.get("drift")
    if not name or not any(row["name"] == name for row in goldens):
        return None
    raw = (request.args.get("fields") or "").strip()
    if len(raw) > golden.FIELDS_MAX:
        raise GoldenError(Reason("golden_strata_field", field=raw[:80]))
    fields = [f.strip() for f in raw.split(",") if f.strip()]
    found = golden.golden_drift(session, dataset.name, name, against=(request.args.get("against") or "").strip(), fields=fields)
    flagged = [field for field, row in found["fields"].items() if row.get("p_holm") is not None and row["p_holm"] < found["alpha"]]
    return {**found, "name": name, "fields_asked": raw, "flagged": flagged}


def _share(name: str, default: float) -> float:
    """Return a form's share (NaN when it is not a number: the domain refuses it, naming the option)."""
    raw = (request.form.get(name) or "").strip()
    try:
        return float(raw) if raw else default
    except ValueError:
        return math.nan


@bp.route("/datasets/<name>/golden/<golden_name>/refresh", methods=("POST",))
@role_required(*ENGINEERS)
def refresh_golden(name: str, golden_name: str):
    """Make the next version of a golden set (the dataset page's refresh form)."""
    back_to(url_for("datasets.show", name=name))
    with writing() as session:
        made = golden.refresh_golden(session, name, golden_name, source=(request.form.get("source") or "").strip(),
                                     renew=_share("renew", 0.2), anchor_share=_share("anchor_share", 0.5),
                                     strata=(request.form.get("strata") or "").strip() or None,
                                     seed=int_field(request.form, "seed", default=0, maximum=2**31 - 1), user=g.user)
    why = "; ".join(reason_text({"note": note, "reason": reason}) for note, reason in zip(made["queue_notes"],
                                                                                         made["queue_reasons"], strict=True))
    flash(_("%(golden)s@%(version)s made: %(retired)s retired, %(added)s added. %(why)s.",
            golden=golden_name, version=made["version"], retired=made["retired"], added=made["added"], why=why), "done")
    return redirect(url_for("datasets.show", name=name), code=303)


@bp.route("/datasets/<name>/samples/<path:external_id>")
@login_required
def sample(name: str, external_id: str):
    """Show one sample: question, contexts, the answer with its claims highlighted."""
    session = get_session()
    dataset = lookup.dataset(session, name)
    # Blind by default: only engineers and admins see everyone's labels here.
    detail = sample_detail(session, dataset, external_id, with_labels=g.user.role in ("engineer", "admin"))
    if detail is None:
        abort(404)
    return render_template("datasets/sample.html", dataset=dataset, d=detail, claim_history=claim_history(session, detail.sample.id))
