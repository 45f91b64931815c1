"""The HTML report: one self-contained, printable file for an auditor who has never seen calibrate.

No JavaScript, no network: styles are inline, charts are inline SVG made by `charts`. The
template (templates/reports/report.html) is rendered with Jinja2 directly, so the CLI
renders it without a Flask request; autoescaping is on, and the only markup passed in as
safe is the SVG that `charts` builds (which escapes every text it draws).
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from calibrate import PROJECT_ROOT, __version__, i18n
from calibrate.reports import charts, rag_summary, summary
from calibrate.reports import decisions as decided
from calibrate.reports.estimate_summary import consistency_text, rater_rows, section_estimate
from calibrate.targets import target_name


@functools.cache
def environment() -> Environment:
    """Return the Jinja2 environment of the report templates (autoescaped, strict about missing names).

    Their text is translated as the web app's templates are (`{{ _('…') }}`, Jinja's i18n extension, new-style
    gettext) by the current locale of calibrate.i18n: the renderers set it (`i18n.rendering`), no Flask.
    """
    env = Environment(loader=FileSystemLoader(PROJECT_ROOT / "templates"), autoescape=select_autoescape(["html"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                      extensions=["jinja2.ext.i18n"])
    env.install_gettext_callables(  # type: ignore[attr-defined]  # added by the i18n extension
        lambda message: i18n.current().catalog.gettext(message),
        lambda singular, plural, n: i18n.current().catalog.ngettext(singular, plural, n), newstyle=True,
        pgettext=lambda context, message: i18n.current().catalog.pgettext(context, message))
    env.globals.update(current_locale=lambda: i18n.current().locale, target_name=target_name,
                       golden_citation=summary.golden_citation)
    env.filters["reason"] = summary.reason_text  # a JSON block's note, worded from its reason's code
    return env


def render_html(report: Any, *, generated: datetime | None = None) -> str:
    """Return the report as one self-contained HTML page."""
    return environment().get_template("reports/report.html").render(**context(report, generated=generated))


def context(report: Any, *, generated: datetime | None = None) -> dict:
    """Return the template context of a report: every number already worded by `summary`."""
    data = report.data
    when = data.get("generated_at") or (generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    decisions = decided.decisions(data)
    outcome, why = decided.overall(data)
    state, state_why = decided.overall_decision(data)
    ci_label = summary.confidence_text(data)
    judged = [d for d in decisions if d.outcome != "not judged"]
    chart = None
    if judged:
        rows = [charts.AgreementRow(label=f"{d.task} · {d.metric_name}", value=d.value, ci=d.ci, outcome=d.state,
                                    ceiling=d.ceiling.value if d.ceiling else None) for d in judged]
        chart = Markup(charts.agreement_chart(rows, threshold=float(data.get("threshold") or 0), ci_label=ci_label,
                                              ceiling_label=i18n.gettext("human–human agreement")))
    return {
        "data": data,
        "dataset": str(data.get("dataset") or ""),
        "judge": data.get("judge"),
        "generated": when,
        "version": __version__,
        "threshold": data.get("threshold"),
        "ci_lower": bool(data.get("ci_lower")),
        "ci_label": ci_label,
        "outcome": outcome,
        "outcome_reason": why,
        "state": state,
        "state_reason": state_why,
        "rule": data.get("rule") or "point",
        "decisions": decisions,
        "agreement_chart": chart,
        "tasks": [task_context(name, section, report, ci_label) for name, section in (data.get("tasks") or {}).items()],
        "rag": rag_summary.rag(data),
        "retrieval": rag_summary.retrieval(data),
        "methods": [*summary.methods(data), *rag_summary.methods(data)],
        "provenance": summary.provenance(data),
        "is_demo": bool((data.get("provenance") or {}).get("is_demo")),
    }


def task_context(name: str, section: dict, report: Any, ci_label: str) -> dict:
    """Return what the template shows for one task."""
    data = report.data
    decision = decided.decision(name, section, data)
    judged = "alignment" in section
    confusion = section.get("confusion")
    heatmap = None
    if judged and summary.labelled(section) and confusion and confusion.get("labels"):
        heatmap = Markup(charts.confusion_heatmap(confusion["labels"], confusion["matrix"], title=i18n.gettext("Confusion matrix of %(task)s", task=name),
                                                  row_axis=i18n.gettext("human gold"), column_axis=i18n.gettext("judge")))
    scatter = None
    if judged and not summary.labelled(section):
        points = []
        for row in report.rows.get(name, []):
            if row.excluded == "" and row.gold is not None and row.judge is not None:
                try:
                    points.append((float(row.gold), float(row.judge), f"{row.sample_id} {row.target}"))
                except (TypeError, ValueError):
                    continue
        if points:  # no scored target (no gold, say): the section's note says why, no empty chart
            scatter = Markup(charts.score_scatter(points, scale=section.get("scale"), title=i18n.gettext("Human gold against judge, %(task)s", task=name)))
    ties = [row for row in report.rows.get(name, []) if row.gold_source == "tie"]
    needed = section.get("labels_needed")
    return {
        "name": name,
        "kind": section.get("kind", ""),
        "target": section.get("target", ""),
        "noun": summary.noun(section.get("target", "")),
        "noun_one": summary.noun(section.get("target", ""), 1),
        "no_data": section.get("status") == "no_data",
        "judged": judged,
        "decision": decision,
        "judge_note": summary.judge_note(section, data),
        "statistics": summary.statistics(section),
        "grouped": summary.grouped(section),
        "grouped_info": section.get("grouped") or {},
        "pooled": {key: summary.pooled(section, key) for key in ("cohen_kappa", "spearman_rho", "kendall_tau", "pearson_r")},
        "per_group": summary.per_group(section),
        "estimate": section_estimate(section.get("estimate")),
        "rater_rows": rater_rows(section),
        "consistency": consistency_text(section),
        "alt_test": summary.alt_test_context(section["alt_test"], summary.ceiling(section)) if isinstance(section.get("alt_test"), dict) else None,
        "counts": summary.counts(section),
        "excluded_total": summary.excluded_total(section),
        "claim_sources": summary.claim_sources(section),
        "n_stale": int(section.get("n_stale") or 0),
        "labels_needed": summary.labels_needed_text(section),
        "settled": judged and needed is None and decision.outcome in ("passed", "not passed"),
        "heatmap": heatmap,
        "scatter": scatter,
        "per_label": [{"label": lab, **{k: summary.number(v.get(k)) for k in ("precision", "recall", "f1")},
                       "support": v.get("support", "")} for lab, v in (section.get("per_label") or {}).items()],
        "ceiling": decision.ceiling,
        "human": section.get("human") or {},
        "human_note": summary.reason_text(section.get("human")) or i18n.gettext("no target was labelled by two or more annotators"),
        "human_statistics": summary.human_statistics(section),
        "pairwise": summary.pairwise(section),
        "per_annotator": summary.per_annotator(section),
        "ties": ties[:25],
        "n_ties_listed": len(ties),
        "scale_text": summary.scale(section.get("scale")),
        "labelled": summary.labelled(section),
        "position": summary.position(section),
        "localisation": summary.localisation(section),
        "ci_label": ci_label,
    }

