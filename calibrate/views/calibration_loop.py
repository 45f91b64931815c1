"""The calibration loop in the browser (engineers and admins): the dashboard of every judge of a
dataset and task on one split, a judge's disagreements with the human gold, one disagreement
opened, "add as few-shot example", two judges compared, and the order of the annotation queue
(uncertain first or as sampled). Annotators get 403."""

from __future__ import annotations

from flask import (
    Blueprint,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    url_for,
)
from markupsafe import Markup
from sqlmodel import select

from calibrate import lazy, lookup, reports
from calibrate.annotation.uncertainty import order_queue
from calibrate.calibration import (
    DEFAULT_ALPHA,
    DEFAULT_EPSILON,
    DEFAULT_MIN_ITEMS,
    ORDER_RULES,
    Options,
    build_report,
)
from calibrate.datasets import dataset_names
from calibrate.errors import CalibrationError
from calibrate.i18n import _
from calibrate.judges.sandbox import Limits
from calibrate.loop.dashboard import (
    TRIAGE_KINDS,
    add_fewshot,
    alt_test_on_split,
    compare_two,
    dashboard,
    triage,
)
from calibrate.loop.disagreements import disagreement_detail, disagreements
from calibrate.loop.next_step import next_step
from calibrate.loop.testsplit import dataset_splits, evaluate_on_test, look_text, opening_split, test_look_preview
from calibrate.models import Prompt, Task
from calibrate.reasons import Reason
from calibrate.reports import charts
from calibrate.reports.compare_report import compare_context
from calibrate.reports.summary import alt_test_context, alt_test_verdict, ci_label, reason_text
from calibrate.task_values import decimal_number
from calibrate.views.auth import role_required
from calibrate.views.errors import back_to, refusal_text
from calibrate.views.fields import task_on_dataset
from calibrate.views.prompts import ENGINEERS, run_choices
from calibrate.views.session import get_session, writing

bp = Blueprint("loop", __name__)


@bp.before_request
def _task_of_the_dataset():
    """Refuse (400 naming `task`) a page or form of dataset `<name>` that names another dataset's task (`?task=` or a
    form's `task`): the workbench's scoping rule (task_scopes). Only for those the pages are for; the others get the
    login page or 403 from the view, not a hint about tasks."""
    name = (request.view_args or {}).get("name")
    if name and g.get("user") is not None and g.user.role in ENGINEERS:
        task_on_dataset(get_session(), request.values.get("task"), name)

# Golden sets (`?golden=NAME[@V]`): loaded on first use, like the dataset page's.
golden = lazy.module("calibrate.loop.golden")


def _options() -> Options:
    config = current_app.config
    budget = request.args.get("budget", 0.05, type=decimal_number)
    budget = budget if budget is not None and 0 < budget <= 1 else 0.05
    return Options(threshold=config["THRESHOLD"], ci_lower=bool(config.get("CI_LOWER", False)), bootstrap=config["BOOTSTRAP"],
                   confidence=config["CONFIDENCE"], seed=config["SEED"], budget_half_width=budget,
                   order_rule=_order_rule())


def _epsilon() -> float:
    """Return `?epsilon=` as a number (NaN when it is not one: the domain call says so on the page)."""
    raw = request.args.get("epsilon", "").strip()
    if not raw:
        return DEFAULT_EPSILON
    try:
        return decimal_number(raw)
    except ValueError:
        return float("nan")


def _order_rule() -> str:
    """Return the `?order_rule=` of a pairwise task's pages (consistent by default), refusing any other word."""
    rule = request.args.get("order_rule") or "consistent"
    if rule not in ORDER_RULES:
        raise CalibrationError(Reason("unknown_order_rule", rules=", ".join(ORDER_RULES), value=rule[:40]))
    return rule


@bp.route("/calibration")
@role_required(*ENGINEERS)
def index():
    """List the datasets, each linking to its calibration dashboard."""

    return render_template("calibration/index.html", names=dataset_names(get_session()))


@bp.route("/datasets/<name>/calibration")
@role_required(*ENGINEERS)
def show(name: str):
    """Show every judge of a task on the dataset on `?split=` (`all`: every sample; without it, the split the dataset
    opens on: dev when it has one, else every sample when it has no test split; testsplit.opening_split)."""
    task = request.args.get("task") or "claim_support"
    ref = request.args.get("golden", "").strip() or None
    session = get_session()
    # On a golden set every sample of its version counts, unless a split is asked for too.
    split = None if ref and "split" not in request.args else _split_arg(name)
    options = _options()
    if ref:  # ?golden=NAME[@V]: the decision is made on that version's members, and the page names it
        options.sample_ids, options.golden = golden.golden_scope(session, name, ref)
    board = dashboard(session, name, task=task, split=split, options=options,
                      group_by=request.args.get("group_by", "").strip() or None, epsilon=_epsilon())
    board.golden_sets = [row["name"] for row in golden.list_golden(session, name)]
    chart = None
    if board.scored:
        confidence = current_app.config["CONFIDENCE"]
        points = [charts.VersionPoint(label=r.judge, value=r.value, ci=r.ci, outcome=r.decision or "undefined")
                  for r in board.rows if r.ran]
        chart = Markup(charts.versions_chart(points, threshold=board.threshold, ceiling=board.ceiling,
                                             metric=board.scored[0].metric or "alignment", ci_label=ci_label(confidence)))
    page = render_template("calibration/dashboard.html", board=board, chart=chart, alt_verdict=alt_test_verdict, look_text=look_text,
                           next_step=next_step(board), optimise_backends=run_choices()[1:])
    return page, 400 if board.input_errors else 200


def _split_arg(name: str) -> str | None:
    """Return `?split=` (None for `all`), or without it the split the dataset's pages open on."""
    if "split" not in request.args:
        session = get_session()
        return opening_split(dataset_splits(session, lookup.dataset(session, name)))
    split = request.args["split"]
    return None if split in ("", "all") else split


@bp.route("/datasets/<name>/calibration/judges/<judge>/disagreements")
@role_required(*ENGINEERS)
def disagreement_list(name: str, judge: str):
    """List the targets where the judge differs from the gold (filters: pair, agreement, meta=FIELD=VALUE)."""
    task = request.args.get("task") or "claim_support"
    found = disagreements(get_session(), name, judge, task=task, split=_split_arg(name), pair=request.args.get("pair") or None,
                          agreement=request.args.get("agreement") or None, meta=request.args.get("meta") or None,
                          order_rule=_order_rule())
    task_row = get_session().exec(select(Task).where(Task.name == found.task)).first()
    return render_template("calibration/disagreements.html", found=found, args=request.args, task=task_row)


@bp.route("/datasets/<name>/calibration/judges/<judge>/disagreements/<target>")
@role_required(*ENGINEERS)
def disagreement(name: str, judge: str, target: str):
    """Open one target: the item, the human labels and rationales, the judge's verdict, reason and raw response."""
    detail = disagreement_detail(get_session(), name, judge, target, task=request.args.get("task") or "claim_support",
                                 options=Options(order_rule=_order_rule()))
    return render_template("calibration/disagreement.html", d=detail, kinds=TRIAGE_KINDS)


@bp.route("/datasets/<name>/calibration/judges/<judge>/disagreements/<target>/fewshot", methods=("POST",))
@role_required(*ENGINEERS)
def fewshot(name: str, judge: str, target: str):
    """Create the next version of the judge's prompt with this target as a few-shot example."""
    task = request.form.get("task") or "claim_support"
    back_to(url_for("loop.disagreement", name=name, judge=judge, target=target, task=task))
    with writing() as session:
        result = add_fewshot(session, name, judge, target, request.form.get("rationale", ""), task=task, author=g.user,
                             limits=Limits.from_settings(current_app.config))
        prompt_name = session.get(Prompt, result.version.prompt_id).name
    if result.created:
        flash(_("Created %(version)s with %(target)s as a few-shot example; run it to see its scores (the example is excluded "
                "from them).", version=f"{prompt_name}@{result.version.number}", target=target), "info")
    else:
        flash(_("Unchanged: identical to version %(n)s.", n=result.version.number), "info")
    return redirect(url_for("prompts.show", name=prompt_name, number=result.version.number), code=303)


@bp.route("/datasets/<name>/calibration/judges/<judge>/disagreements/<target>/triage", methods=("POST",))
@role_required(*ENGINEERS)
def triage_one(name: str, judge: str, target: str):
    """Record the triage of one disagreement (human_error also flags the sample for adjudication)."""
    task = request.form.get("task") or "claim_support"
    back_to(url_for("loop.disagreement", name=name, judge=judge, target=target, task=task))
    with writing() as session:
        result = triage(session, name, judge, target, request.form.get("kind", ""), task=task,
                        note=request.form.get("note", ""), user=g.user)
    message = _("Triaged %(target)s as %(kind)s.", target=target, kind=_(result.triage.kind.replace("_", " ")))
    if result.triage.kind == "human_error":
        message += " " + (_("The sample is flagged for review on the adjudication page.") if result.flagged
                          else _("No queue assignment to flag: adjudicate it from the adjudication page."))
    flash(message, "info")
    return redirect(url_for("loop.disagreement", name=name, judge=judge, target=target, task=task), code=303)


@bp.route("/datasets/<name>/calibration/judges/<judge>/evaluate-test", methods=("GET", "POST"))
@role_required(*ENGINEERS)
def evaluate_test(name: str, judge: str):
    """Look at the judge's score on the frozen test split: a GET, or a POST without `confirm`, shows what a look
    costs and how many were made (nothing is computed); only a POST with `confirm=yes` computes and records one."""
    values = request.form if request.method == "POST" else request.args
    task = values.get("task") or "claim_support"
    back = values.get("split") or None  # none: the dashboard opens on its default split
    back_to(url_for("loop.show", name=name, task=task, split=back))
    if request.method == "GET" or values.get("confirm") != "yes":
        preview = test_look_preview(get_session(), name, judge, task=task)
        return render_template("calibration/evaluate_test.html", preview=preview, back=back,
                               last=look_text(preview.last) if preview.last is not None else "")
    with writing() as session:
        row = evaluate_on_test(session, name, judge, task=task, options=_options(), user=g.user)
    flash(_("%(judge)s on test: %(look)s; n = %(n)s (this look is recorded).", judge=judge, look=look_text(row), n=row.n), "info")
    return redirect(url_for("loop.show", name=name, task=task, split=back), code=303)


@bp.route("/datasets/<name>/calibration/judges/<judge>/alt-test")
@role_required(*ENGINEERS)
def alt_test_page(name: str, judge: str):
    """Could the judge replace one of the experts? The Alternative Annotator Test on one split, with its parameters."""
    task = request.args.get("task") or "claim_support"
    split = _split_arg(name)
    form = {key: request.args.get(key, "").strip() for key in ("epsilon", "alpha", "scoring", "min_items")}
    result, message, status = None, "", 200
    try:
        epsilon = decimal_number(form["epsilon"]) if form["epsilon"] else DEFAULT_EPSILON
        alpha = decimal_number(form["alpha"]) if form["alpha"] else DEFAULT_ALPHA
        min_items = int(form["min_items"]) if form["min_items"] else DEFAULT_MIN_ITEMS
    except ValueError:
        message, status = _("epsilon and alpha must be numbers in (0, 1), min_items a positive whole number"), 400
    else:
        try:
            result = alt_test_on_split(get_session(), name, judge, task=task, split=split, epsilon=epsilon, alpha=alpha,
                                       scoring=form["scoring"] or None, min_items=min_items, order_rule=_order_rule())
        except CalibrationError as exc:  # a parameter out of range, the frozen test split, a split without samples
            message, status = refusal_text(exc), 400
    if result is not None and result["status"] != "ok":
        message = _("The alt-test cannot be run here: %(why)s.", why=reason_text(result))
    order_rule = request.args.get("order_rule") if request.args.get("order_rule") in ORDER_RULES else None
    return render_template("calibration/alt_test.html", dataset=name, judge=judge, task=task, split=split, form=form,
                           result=result, message=message, body=alt_test_context(result) if result else None,
                           order_rule=(result or {}).get("order_rule") or order_rule), status


@bp.route("/datasets/<name>/calibration/compare")
@role_required(*ENGINEERS)
def compare(name: str):
    """Compare judge B against judge A on one split: `calibrate compare --split`, with each flip linked to its disagreement."""
    task = request.args.get("task") or "claim_support"
    a, b = request.args.get("a", "").strip(), request.args.get("b", "").strip()
    page = compare_two(get_session(), name, a, b, task=task, split=_split_arg(name), options=_options())
    context = {"result": None, "sections": []}
    if page.result is not None:

        def link(task_name: str, side: str, target: str) -> str:
            # a target fixed by B was one of A's disagreements; one broken by B is one of B's
            judge = page.a if side == "fixed" else page.b
            return url_for("loop.disagreement", name=page.dataset, judge=judge, target=target, task=task_name)

        context = compare_context(page.result, link)
    return render_template("calibration/compare.html", page=page, **context)


@bp.route("/datasets/<name>/calibration/queue-order", methods=("POST",))
@role_required(*ENGINEERS)
def queue_order(name: str):
    """Put the dataset's pending annotation items in uncertain-first order (by the task's judges) or back in the sampled order."""
    task = request.form.get("task") or "claim_support"
    back = request.form.get("split") or None
    back_to(url_for("loop.show", name=name, task=task, split=back))
    with writing() as session:
        result = order_queue(session, name, mode=request.form.get("mode", ""), task=task)
    flash(result.line(), "info")
    return redirect(url_for("loop.show", name=name, task=task, split=back), code=303)


REPORT_TYPES = {"html": "text/html", "md": "text/markdown", "csv": "text/csv"}
REPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"


@bp.route("/datasets/<name>/calibration/report.<fmt>")
@role_required(*ENGINEERS)
def report_file(name: str, fmt: str):
    """Serve the calibration report of `?judge=` on the dashboard's task and split: the same bytes as
    `calibrate report --dataset NAME --judge J --task T --split S --format FMT` (HTML, Markdown or CSV), in the
    reader's language for HTML and Markdown (CSV stays locale-independent)."""
    if fmt not in REPORT_TYPES:
        raise CalibrationError(_("the report comes as html, md or csv, not %(fmt)s", fmt=fmt[:20]))
    judge = request.args.get("judge") or None
    task = request.args.get("task") or "claim_support"
    config = current_app.config
    budget = request.args.get("budget", 0.05, type=decimal_number)
    options = Options(split=_split_arg(name), budget_half_width=budget if budget is not None and 0 < budget <= 1 else 0.05,
                      order_rule=_order_rule(), threshold=config["THRESHOLD"], ci_lower=bool(config.get("CI_LOWER", False)),
                      bootstrap=config["BOOTSTRAP"], confidence=config["CONFIDENCE"], seed=config["SEED"])
    built = build_report(get_session(), name, judge, options=options, tasks=[task])
    response = current_app.response_class(reports.render(built, fmt), mimetype=REPORT_TYPES[fmt])
    # The HTML report is one self-contained file (its style inline, its charts inline SVG, no script): its own policy,
    # stricter than the app's but for the inline style it needs.
    response.headers["Content-Security-Policy"] = REPORT_CSP
    if fmt != "html":
        stem = f"{name}-{judge or 'humans'}-{task}".replace("@", "-v").replace("/", "-")
        response.headers["Content-Disposition"] = f'attachment; filename="{stem}.{fmt}"'
    return response
