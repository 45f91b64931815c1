"""The annotation workbench: my queue, the item page, and the label, undo and submit actions.

Each action reads and checks the item, then makes its domain call (calibrate.annotation) in a
write transaction that starts with BEGIN IMMEDIATE, behind the process's writer lock (`views.session.write`).
A request from the workbench script (header `HX-Request: true`) gets the updated fragment (the
cell, and the item status out of band); a plain form post (no script) gets a 303 back to the
page. Someone else's assignment is a 404, never a hint that it exists.
"""

from __future__ import annotations

from typing import TypeVar
from urllib.parse import urlsplit

from flask import Blueprint, abort, current_app, flash, g, make_response, redirect, render_template, request, session, url_for

from calibrate import lookup
from calibrate.annotation.claim_edits import (
    ACTIONS,
    claim_history,
    edit_claim,
    merge_with_next,
    sample_of,
    split_claim,
    undo_last_action,
)
from calibrate.annotation.items import (
    REQUIRED_TASKS,
    TaskNotOffered,
    choice_text,
    error_type_name,
    get_assignment,
    item_view,
    load_item,
    shown_positions,
    step_kind_name,
    step_part_name,
)
from calibrate.annotation.label_posts import LabelPost, post_label
from calibrate.annotation.labels import (
    ErrorTypeRefused,
    EvidenceError,
    TargetRetired,
    history,
    resolve_target,
)
from calibrate.annotation.queue import (
    claim_open_slot,
    my_assignments,
    my_progress,
    my_queue,
    open_slots,
    pending_assignment,
    set_status,
    submit,
)
from calibrate.annotation.review import REVIEWER_ROLES, may_review, others_on, task_names
from calibrate.i18n import _
from calibrate.reasons import Reason
from calibrate.views.auth import is_script_request, login_required, role_required, safe_next
from calibrate.views.errors import refusal_text, refuse_back_to
from calibrate.views.fields import BadField, int_field
from calibrate.views.session import close_session, get_session, write

bp = Blueprint("annotate", __name__)
# A label button's text in the reader's language (the task's display name, a built-in name translated, "Response 2").
bp.add_app_template_global(choice_text, "choice_text")
# A trajectory's step kinds and parts in the reader's language (templates/annotate/_steps.html).
bp.add_app_template_global(step_kind_name, "step_kind_name")
bp.add_app_template_global(step_part_name, "step_part_name")
# An error type in the reader's language (the cell's choice, the history, review mode, the disputes).
bp.add_app_template_global(error_type_name, "error_type_name")

T = TypeVar("T")


refuse_back_to(bp, lambda: _back(), script_aware=True, vary_on_htmx=True)


def _back() -> str:
    """Return the page the form was posted from (a path on this site), else the queue."""
    referrer = urlsplit(request.referrer or "")
    if referrer.netloc and referrer.netloc != request.host:
        return url_for("annotate.queue")
    return safe_next(referrer.path) or url_for("annotate.queue")


def _required() -> tuple[str, ...]:
    return tuple(current_app.config.get("ANNOTATE_REQUIRED_TASKS", REQUIRED_TASKS))


def _review_mode() -> bool:
    return bool(session.get("review_mode")) and g.user.role in REVIEWER_ROLES

# --------------------------------------------------------------------------- queue


@bp.route("/annotate")
@login_required
def queue():
    """Show my queue: progress per dataset, what I skipped or flagged, what I did last."""
    db = get_session()
    rows = my_queue(db, g.user)
    return render_template(
        "annotate/queue.html", rows=rows, review_mode=_review_mode(),
        parked=my_assignments(db, g.user, ("skipped", "flagged")),
        recent=my_assignments(db, g.user, ("done",), limit=10),
        can_start=any(r.progress.pending or r.open_slots for r in rows),
    )


def _next_for(dataset_id: int | None):
    """Return my next pending assignment (in the dataset if given, else anywhere), or None. Reads only."""
    db = get_session()
    found = pending_assignment(db, g.user, dataset_id=dataset_id)
    if found is None and dataset_id is not None:
        found = pending_assignment(db, g.user)
    return found


def _claim_for(dataset_id: int | None):
    """Claim an open slot for me (in the dataset if given, else anywhere) in a write transaction; None if there is none."""
    def claim(db):
        slot = claim_open_slot(db, g.user, dataset_id=dataset_id)
        return slot if slot is not None or dataset_id is None else claim_open_slot(db, g.user)
    return write(claim)


@bp.route("/annotate/next", methods=("GET", "POST"))
@login_required
def next_item():
    """Go to my next item (in `?dataset=NAME` first), or back to the queue when there is none.

    GET only reads: it goes to an item already mine; when only open slots are left it shows
    the one-button form that takes one (POST), so a prefetch, a crawler or a reload never
    hands an item out. POST takes an open slot when nothing of mine is pending.
    """
    dataset_name = request.values.get("dataset") or None
    dataset_id = lookup.dataset(get_session(), dataset_name).id if dataset_name else None
    found = _next_for(dataset_id)
    if found is None and request.method == "POST":
        found = _claim_for(dataset_id)
    if found is not None:
        return redirect(url_for("annotate.show", assignment_id=found.id), code=303 if request.method == "POST" else 302)
    if request.method == "GET" and (open_slots(get_session(), g.user, dataset_id=dataset_id)
                                    or dataset_id is not None and open_slots(get_session(), g.user)):
        return render_template("annotate/next.html", dataset=dataset_name)
    flash(_("Nothing left to label. Thank you!"), "done")
    return redirect(url_for("annotate.queue"), code=303 if request.method == "POST" else 302)


# --------------------------------------------------------------------------- the item


def _item(db, assignment_id: int, *, page: bool = True):
    return item_view(load_item(db, g.user, assignment_id, page=page), required=_required())


@bp.route("/annotate/<int:assignment_id>")
@login_required
def show(assignment_id: int):
    """Show one item to label."""
    db = get_session()
    item = _item(db, assignment_id)
    reviewing = may_review(g.user, item, _review_mode())
    return render_template(
        "annotate/item.html", item=item, position=my_progress(db, g.user),
        review_mode=_review_mode(), others=others_on(db, item, g.user) if reviewing else None,
        reviewing=reviewing, task_names=task_names(db) if reviewing else {},
        claim_history=claim_history(db, item.assignment.sample_id),
    )


@bp.context_processor
def _item_urls():
    """Give the item templates their action URLs once per request (not once per cell, nor per template)."""
    assignment_id = (request.view_args or {}).get("assignment_id")
    if assignment_id is None:
        return {}
    if "item_urls" not in g:
        g.item_urls = {"label": url_for("annotate.label", assignment_id=assignment_id),
                       "claims": url_for("annotate.change_claims", assignment_id=assignment_id),
                       "history": url_for("annotate.label_history", assignment_id=assignment_id)}
    return {"urls": g.item_urls}


def _cell_response(item, task_id: int, key: str):
    """Answer a script with the cell's fragment (and the item status out of band), a form with a 303."""
    cell = item.cell(task_id, key)
    if not is_script_request():
        return redirect(url_for("annotate.show", assignment_id=item.assignment.id) + (f"#{cell.dom_id}" if cell else ""), code=303)
    html = render_template("annotate/_cell.html", item=item, cell=cell)
    html += render_template("annotate/_status.html", item=item, oob=True, review_mode=_review_mode())
    response = make_response(html)
    if cell is not None:
        response.headers["HX-Retarget"] = f"#{cell.dom_id}"
    return response


@bp.route("/annotate/<int:assignment_id>/label", methods=("POST",))
@login_required
def label(assignment_id: int):
    """Save my label on one target of the item: a value, a rationale, an evidence toggle and/or an error type.

    Evidence: `evidence` is a context rank (the whole context); `evidence_sentence` is
    `CONTEXT_ID:SENTENCE_INDEX`, one sentence of one of the item's contexts (else 400, naming the field).
    `error_type`: one of the task's error types with its negative label, empty for none given (else 400, naming it).
    """
    form = request.form
    value = form.get("value", "").strip() or None
    rationale = form.get("rationale") if "rationale" in form else None
    error_type = form.get("error_type") if "error_type" in form else None
    evidence = int_field(form, "evidence")
    sentence = form.get("evidence_sentence", "")
    context_id, _, index = sentence.partition(":")
    if sentence:
        if not (context_id.isascii() and index.isascii() and context_id.isdigit() and index.isdigit()):
            raise BadField("evidence_sentence", Reason("field_evidence_sentence"))
        for part in (context_id, index):  # each within what a row id can be
            int_field({"evidence_sentence": part}, "evidence_sentence")

    if value is not None and value.isdigit() and not value.isascii():  # `²`: a digit int() does not read
        raise BadField("value", Reason("field_response_position"))
    post = LabelPost(task=form.get("task", ""), target=form.get("target", ""), value=value, rationale=rationale,
                     evidence=evidence, sentence=(int(context_id), int(index)) if sentence else None, error_type=error_type)
    try:
        saved = post_label(get_session(), g.user, assignment_id, post, write=write, release=close_session,
                           required=_required())
    except (EvidenceError, ErrorTypeRefused) as exc:
        raise BadField(exc.field, refusal_text(exc)) from None
    except TaskNotOffered as exc:  # a task scoped to other datasets than the item's
        raise BadField("task", refusal_text(exc)) from None
    except TargetRetired:  # a claim split or merged since the page was shown, or one that won the race
        return _target_changed(assignment_id)
    return _cell_response(saved.item, saved.task_id, saved.key)


def _target_changed(assignment_id: int):
    """Answer a label on a claim or context changed meanwhile: 409, and the item shown again with a notice."""
    message = _("This claim or context was changed by someone else meanwhile; the item is shown again with the "
                "current ones. Label it again.")
    flash(message, "error")
    url = url_for("annotate.show", assignment_id=assignment_id)
    if is_script_request():
        response = make_response(message, 409)
        response.mimetype = "text/plain"
        response.headers["HX-Redirect"] = url
        return response
    return redirect(url, code=303)


@bp.route("/annotate/<int:assignment_id>/undo", methods=("POST",))
@login_required
def undo(assignment_id: int):
    """Undo my last change on this item, a label's or the claims' (again and again, further back)."""

    def act(db):
        undone = undo_last_action(db, get_assignment(db, g.user, assignment_id), g.user)
        if undone is not None and undone.edit is not None:
            return None, undone
        return _item(db, assignment_id, page=False), undone

    item, undone = write(act)
    if undone is not None and undone.edit is not None:
        # The claims changed: the page is drawn again, focused where the claims were.
        flash(_("Undone: %(what)s.", what=undone.what), "info")
        return _reload(assignment_id, int(undone.edit.before[0]["id"]))
    if undone is None:
        if is_script_request():
            response = make_response(_("Nothing to undo on this item."), 200)
            response.mimetype = "text/plain"
            response.headers["X-Nothing"] = "1"
            return response
        flash(_("Nothing to undo on this item."), "info")
        return redirect(url_for("annotate.show", assignment_id=assignment_id), code=303)
    return _cell_response(item, undone.label.task_id, undone.label.target_key)


@bp.route("/annotate/<int:assignment_id>/claims", methods=("POST",))
@login_required
def change_claims(assignment_id: int):
    """Split a claim at a character (`at`), merge it with the next, or edit its text (`change`: split, merge, edit).

    The field is `change`, not `action`: a form field named "action" would hide the form's own
    `action` property from the script.
    """
    form = request.form
    action = form.get("change", "")
    if action not in ACTIONS:
        raise BadField("change", Reason("field_change", actions=", ".join(ACTIONS)))
    claim_id, at = form.get("claim", ""), form.get("at", "")
    if not (claim_id.isascii() and claim_id.isdigit()):
        raise BadField("claim", Reason("field_claim_id"))
    if action == "split" and not (at.isascii() and at.isdigit()):
        raise BadField("at", Reason("field_split_at"))
    int_field(form, "claim")  # within what a row id can be (400 naming the field beyond)
    if action == "split":
        int_field(form, "at")

    def act(db):
        assignment = get_assignment(db, g.user, assignment_id)
        sample = sample_of(db, assignment)
        if action == "split":
            return split_claim(db, sample, g.user, int(claim_id), int(at))
        if action == "merge":
            return merge_with_next(db, sample, g.user, int(claim_id))
        return edit_claim(db, sample, g.user, int(claim_id), form.get("text", ""))

    change = write(act)
    if change is None:
        return _reload(assignment_id, int(claim_id))
    return _reload(assignment_id, int(change.after[0]["id"]))


def _reload(assignment_id: int, claim_id: int):
    """Send the script (HX-Redirect) or the browser (303) to the item again, focused on a claim."""
    url = url_for("annotate.show", assignment_id=assignment_id, claim=claim_id)
    if is_script_request():
        response = make_response("", 200)
        response.headers["HX-Redirect"] = url
        return response
    return redirect(url, code=303)


@bp.route("/annotate/<int:assignment_id>/submit", methods=("POST",))
@login_required
def submit_item(assignment_id: int):
    """Submit the item (when complete) and go to the next one."""

    # Read and check outside the write lock; the write itself is one idempotent UPDATE.
    item = _item(get_session(), assignment_id, page=False)
    if not item.status.submittable:
        if is_script_request():
            html = render_template("annotate/_status.html", item=item, oob=False, explain=True, review_mode=_review_mode())
            response = make_response(html, 422)
            response.headers["HX-Retarget"] = "#item-status"
            return response
        flash(_("Not submitted yet: %(what)s", what="; ".join(item.status.explain())), "error")
        return redirect(url_for("annotate.show", assignment_id=assignment_id), code=303)
    close_session()
    write(lambda db: submit(db, item.assignment, item.status))
    return _go_next(item.assignment.dataset_id)


def _go_next(dataset_id: int):
    found = _next_for(dataset_id)
    if found is None:
        flash(_("Nothing left to label. Thank you!"), "done")
        url = url_for("annotate.queue")
    else:
        url = url_for("annotate.show", assignment_id=found.id)
    if is_script_request():
        response = make_response("", 204)
        response.headers["HX-Redirect"] = url
        return response
    return redirect(url, code=303)


@bp.route("/annotate/<int:assignment_id>/<any(skip, flag):action>", methods=("POST",))
@login_required
def park(assignment_id: int, action: str):
    """Skip the item (with a reason) or flag it for review (with a note), and go to the next one."""
    status = "skipped" if action == "skip" else "flagged"

    def act(db):
        item = _item(db, assignment_id)
        set_status(db, item.assignment, status, request.form.get("note", ""))
        return item

    item = write(act)
    flash(_("%(sample)s: skipped.", sample=item.sample.external_id) if status == "skipped"
          else _("%(sample)s: flagged for review.", sample=item.sample.external_id), "info")
    return _go_next(item.assignment.dataset_id)


@bp.route("/annotate/<int:assignment_id>/history")
@login_required
def label_history(assignment_id: int):
    """Show the history of my label on one target of the item (never anyone else's)."""
    db = get_session()
    assignment = get_assignment(db, g.user, assignment_id)
    target = resolve_target(db, assignment, request.args.get("task", ""), request.args.get("target", ""))
    label, entries = history(db, target, g.user)
    positions = None
    if target.task.kind == "pairwise":  # blind: the history names positions, as the buttons do
        positions = shown_positions(db, g.user.id, assignment.sample_id)
    return render_template("annotate/_history.html", label=label, entries=entries, task=target.task, positions=positions)


@bp.route("/annotate/<int:assignment_id>/review")
@login_required
def review(assignment_id: int):
    """Show other annotators' labels and the judges' verdicts on the item, if the blind rules allow it."""
    db = get_session()
    item = _item(db, assignment_id)
    if not may_review(g.user, item, _review_mode()):
        abort(403)
    return render_template("annotate/_review.html", item=item, others=others_on(db, item, g.user),
                           task_names=task_names(db))


@bp.route("/annotate/review-mode", methods=("POST",))
@role_required(*REVIEWER_ROLES)
def review_mode():
    """Turn review mode on or off (engineers and admins)."""
    session["review_mode"] = request.form.get("on") == "1"
    back = request.form.get("back", "")
    if not back.startswith("/annotate"):
        back = url_for("annotate.queue")
    return redirect(back, code=303)
