"""`calibrate monitor` rendered as JSON, Markdown or HTML, and the Production page's body (one view for both).

JSON is the result as calibration/production.py returns it (docs/production.md lists the keys). Markdown
and HTML show one row per window: its status, the estimate from the audit labels with its interval, the
judge-only number struck through beside it (never trusted), the counts, and the judge's agreement on the
window's audit labels against its calibration-time figure with the interval of the change. Statuses and
notes are worded from their codes in the reader's language.
"""

from __future__ import annotations

import json
from typing import Any

from markupsafe import Markup

from calibrate import __version__, i18n
from calibrate.i18n import N_, gettext
from calibrate.reports import charts
from calibrate.reports.estimate_summary import what as estimated
from calibrate.reports.html_report import environment
from calibrate.reports.md_report import escape, table_row
from calibrate.reports.summary import ci_label, interval, reason_text

FORMATS = ("json", "md", "html")

STATUS_WORDS = {"ok": N_("ok"), "alert": N_("alert"), "undecided": N_("undecided"), "too_few": N_("too few labels"),
                "no data": N_("no data")}
ALERT_WORDS = {"metric_below_min": N_("metric below the minimum"), "agreement_below_gate": N_("agreement below its gate")}
METHOD_NAMES = {"ppi++": "PPI++", "ppi": "PPI", "classical": N_("labels alone")}
WINDOW_WORDS = {"day": N_("day"), "week": N_("week"), "month": N_("month")}


def _number(value: float | None) -> str:
    return "—" if value is None else i18n.current().number(value, 3)


def _interval(ci: list | None) -> str:
    """Return "[low, high]" ("[low; high]" in Spanish, where the comma is the decimal sign), or "—" without one."""
    return "—" if not ci else interval(ci)


def _signed(value: float | None) -> str:
    return "—" if value is None else ("+" if value >= 0 else "") + _number(value)


def chart(result: dict) -> str:
    """Return the windows as one inline SVG chart (oldest first), worded in the current locale."""
    points = [charts.WindowPoint(label=w["window"], value=w["estimate"], ci=tuple(w["ci"]) if w["ci"] else None,
                                 judge_only=w["judge_only"], status=w["status"], word=gettext(STATUS_WORDS[w["status"]]))
              for w in result["windows"]]
    return charts.windows_chart(points, minimum=result["min"], share=result["metric"] == "share", metric=estimated(result),
                                ci_label=ci_label(1 - result["alpha"]), too_few_label=gettext("no estimate"),
                                judge_label=gettext("judge only"), minimum_label=gettext("minimum"))


def view(result: dict) -> dict[str, Any]:
    """Return what Markdown, HTML and the Production page show, in the current locale."""
    what = estimated(result)
    windows = []
    for w in reversed(result["windows"]):  # newest first
        a = w["agreement"]
        windows.append({
            "window": w["window"], "status": w["status"], "status_word": gettext(STATUS_WORDS[w["status"]]),
            "complete": w["complete"], "closed": w.get("closed", w["complete"]), "value": w["estimate"], "low": (w["ci"] or [None])[0],
            "high": (w["ci"] or [None, None])[1], "estimate": _number(w["estimate"]), "ci": _interval(w["ci"]),
            "method": gettext(METHOD_NAMES[w["method"]]) if w["method"] in METHOD_NAMES else "—",
            "judge_only": _number(w["judge_only"]), "counts": w["counts"],
            "agreement": _number(a["value"]), "agreement_ci": _interval(a["ci"]), "agreement_n": a["n"],
            "change": _signed(a["change"]), "change_ci": _interval(a["change_ci"]),
            "alerts": [gettext(ALERT_WORDS[code]) for code in w["alerts"]], "note": reason_text(w),
        })
    calibration = result["calibration"]
    facts = [(gettext("Metric"), what), (gettext("Window"), gettext(WINDOW_WORDS[result["by_window"]])),
             (gettext("Minimum"), _number(result["min"]) if result["min"] is not None else "—"),
             (gettext("Agreement gate"), _number(result["min_agreement"])),
             (gettext("Agreement at calibration"),
              f"{_number(calibration['value'])} {_interval(calibration['ci'])} (n = {calibration['n']})"
              if calibration["value"] is not None else reason_text(calibration) or gettext(
                  "none yet: calibrate this judge version on a labelled dataset (its verdicts on expert labels outside the "
                  "production streams give this figure)"))]
    run = result.get("latest_run")
    if run:
        facts.append((gettext("Latest judge run"), f"#{run['id']} {run['status']}" + (f": {run['error']}" if run["error"] else "")))
    return {"title": gettext("Production: %(what)s", what=what), "windows": windows, "facts": facts,
            "ci_label": ci_label(1 - result["alpha"]), "chart": Markup(chart(result)) if result["windows"] else "",
            "estimand": gettext("Each window estimates the %(what)s over its traffic, from the audit labels and the judge's "
                                "verdicts.", what=what) if result.get("labels", "audit") == "audit" else gettext(
                "Each window estimates the %(what)s over its traffic, from every expert label (this dataset has no production "
                "queues: the labels are taken as a uniform draw) and the judge's verdicts.", what=what)}


def render_json(result: dict) -> str:
    return json.dumps(result, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def render_markdown(result: dict) -> str:
    body = view(result)
    lines = [f"## {escape(body['title'])}: {escape(result['judge'])} on {escape(result['task'])} ({escape(result['dataset'])})", "",
             escape(body["estimand"]), "",
             *[f"- {escape(name)}: {escape(value)}" for name, value in body["facts"]], "",
             table_row([gettext("Window"), gettext("Status"), gettext("Estimate"), body["ci_label"], gettext("Judge only"),
                        gettext("Traces"), gettext("Sampled"), gettext("Judged"), gettext("Failed calls"), gettext("Audit labels"),
                        gettext("Triage labels"), gettext("Agreement"), gettext("Change"), gettext("Change CI")]),
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for w in body["windows"]:
        c = w["counts"]
        status = w["status_word"] + (f" ({', '.join(w['alerts'])})" if w["alerts"] else "")
        lines.append(table_row([escape(w["window"]), escape(status), w["estimate"], w["ci"], f"~~{w['judge_only']}~~",
                                c["traces"], c["sampled"], c["judged"], c["failed"], c["audit_labels"], c["triage_labels"],
                                f"{w['agreement']} (n = {w['agreement_n']})", w["change"], w["change_ci"]]))
    notes = [f"- {escape(w['window'])}: {escape(w['note'])}" for w in body["windows"] if w["note"]]
    lines += ["", *notes, *([""] if notes else []), f"calibrate {__version__}"]
    return "\n".join(lines) + "\n"


def render_html(result: dict) -> str:
    return environment().get_template("reports/production.html").render(result=result, body=view(result), version=__version__)


def render_monitor(result: dict, fmt: str, locale: str | None = None) -> str:
    """Return `calibrate monitor`'s result rendered in `fmt` (json, md or html)."""
    renderers = {"json": render_json, "md": render_markdown, "html": render_html}
    if fmt not in renderers:
        raise ValueError(f"unknown monitor format {fmt!r} (formats: {', '.join(FORMATS)})")
    with i18n.rendering(fmt, locale):
        return renderers[fmt](result)
