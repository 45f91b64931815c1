"""The admin page: accounts (add, reset a password, deactivate), assigning work, progress, review list.

Admin only. Full-page forms answer with a 303 back to the page and a message.
"""

from __future__ import annotations

from flask import Blueprint, abort, flash, g, redirect, render_template, request, url_for

from calibrate import i18n
from calibrate.accounts import set_locale
from calibrate.annotation import AnnotationError
from calibrate.annotation.queue import for_review, set_status, team_progress
from calibrate.annotation.team import assign, create_user, get_user_by_id, reset_password, set_active, users
from calibrate.datasets import dataset_names
from calibrate.i18n import _, ngettext
from calibrate.models import ROLES, Assignment
from calibrate.reasons import Reason
from calibrate.task_values import decimal_number
from calibrate.views.auth import role_required
from calibrate.views.errors import refuse_back_to
from calibrate.views.fields import int_field
from calibrate.views.session import get_session, writing

bp = Blueprint("admin", __name__, url_prefix="/admin")


refuse_back_to(bp, lambda: url_for("admin.index"))


@bp.route("")
@role_required("admin")
def index():
    """Show the team, the assignment form, progress and the items waiting for review."""
    db = get_session()
    per_annotator, per_dataset = team_progress(db)
    everyone = users(db)
    return render_template(
        "admin/index.html", users=everyone, roles=ROLES, datasets=dataset_names(db),
        annotators=[u for u in everyone if u.active], per_annotator=per_annotator, per_dataset=per_dataset,
        review=for_review(db),
    )


@bp.route("/users", methods=("POST",))
@role_required("admin")
def add_user():
    """Add an account (there is no self-signup)."""
    form = request.form
    with writing() as db:
        user = create_user(db, form.get("username", ""), role=form.get("role", "annotator"), password=form.get("password", ""),
                           display_name=form.get("display_name", ""))
    flash(_("Added %(user)s (%(role)s).", user=user.username, role=_(user.role)), "done")
    return redirect(url_for("admin.index"), code=303)


@bp.route("/users/<int:user_id>/password", methods=("POST",))
@role_required("admin")
def password(user_id: int):
    """Reset a user's password (their other sessions end)."""
    with writing() as db:
        user = get_user_by_id(db, user_id)
        reset_password(db, user, request.form.get("password", ""))
    flash(_("New password set for %(user)s.", user=user.username), "done")
    return redirect(url_for("admin.index"), code=303)


@bp.route("/users/<int:user_id>/locale", methods=("POST",))
@role_required("admin")
def locale(user_id: int):
    """Set a user's interface language (as she can on her Account page); empty: follow her browser."""
    with writing() as db:
        user = get_user_by_id(db, user_id)
        set_locale(db, user, request.form.get("locale", ""))
    flash(_("Language of %(user)s: %(language)s.", user=user.username,
            language=i18n.LANGUAGE_NAMES.get(user.locale or "", _("as the browser asks"))), "done")
    return redirect(url_for("admin.index"), code=303)


@bp.route("/users/<int:user_id>/active", methods=("POST",))
@role_required("admin")
def active(user_id: int):
    """Deactivate an account (returning its pending items to the open pool) or activate it again."""
    with writing() as db:
        user = get_user_by_id(db, user_id)
        turn_on = request.form.get("active") == "1"
        released = set_active(db, user, turn_on, acting=g.user, release=request.form.get("release") == "1")
    if turn_on:
        flash(_("%(user)s can log in again.", user=user.username), "done")
    else:
        flash(ngettext("%(user)s is deactivated; %(num)s pending item returned to the open pool.",
                       "%(user)s is deactivated; %(num)s pending items returned to the open pool.", released, user=user.username)
              if released else _("%(user)s is deactivated.", user=user.username), "done")
    return redirect(url_for("admin.index"), code=303)


@bp.route("/assign", methods=("POST",))
@role_required("admin")
def assign_work():
    """Queue a dataset's sampled items for annotators with overlap K (the same as `calibrate sample`)."""
    form = request.form
    fraction = form.get("fraction", "").strip()
    n_value = int_field(form, "n", minimum=0)
    seed = int_field(form, "seed", default=0, maximum=2**32 - 1)
    overlap = int_field(form, "overlap", default=1, minimum=0, maximum=1000)
    try:
        fraction_value = decimal_number(fraction) if fraction else None
    except ValueError:
        raise AnnotationError(Reason("fraction_not_number")) from None
    with writing() as db:
        summary = assign(db, form.get("dataset", ""), n=n_value, fraction=fraction_value, seed=seed, overlap=overlap,
                         usernames=form.getlist("annotator"), negative_first=form.get("negative_first") == "1")
    flash(summary.line(), "done")
    return redirect(url_for("admin.index"), code=303)


@bp.route("/assignments/<int:assignment_id>/reopen", methods=("POST",))
@role_required("admin", "engineer")
def reopen(assignment_id: int):
    """Put a skipped or flagged item back in its annotator's queue."""
    with writing() as db:
        assignment = db.get(Assignment, assignment_id) or abort(404)
        set_status(db, assignment, "pending", "")
    flash(_("Back in the queue."), "done")
    back = request.form.get("back", "")
    return redirect(back if back in (url_for("admin.index"), url_for("adjudicate.index")) else url_for("admin.index"), code=303)
