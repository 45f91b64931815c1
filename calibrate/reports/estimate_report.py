"""`calibrate estimate` rendered as JSON, Markdown or HTML.

JSON is the result as calibration/estimate.py returns it (docs/cli.md lists the keys). Markdown and
HTML show the estimate with its interval, the labels-alone and the naive-judge numbers beside it (the
latter struck through: it is biased by the judge's errors), the counts, the labels needed for the
target width and the windows. The HTML is self-contained (inline CSS, no JavaScript) and escapes every
name (Jinja2's autoescaping); the Markdown escapes with `md_report.escape`.
"""

from __future__ import annotations

import json
from typing import Any

from calibrate import __version__, i18n
from calibrate.i18n import gettext
from calibrate.reports.estimate_summary import METHOD_NAMES, interval, naive_why, number
from calibrate.reports.estimate_summary import what as estimated
from calibrate.reports.html_report import environment
from calibrate.reports.md_report import escape, table_row
from calibrate.reports.summary import ci_label, reason_text

FORMATS = ("json", "md", "html")

_number, _interval = number, interval


def view(result: dict) -> dict[str, Any]:
    """Return what Markdown and HTML show, in the current locale: headline, rows, counts, windows."""
    method = METHOD_NAMES.get(result["method"], result["method"])
    answers = result.get("unit") == "answer"
    what = estimated(result)
    rows = [
        {"name": method, "estimate": _number(result.get("estimate")), "ci": _interval(result.get("ci")), "struck": False, "why": ""},
        {"name": gettext("Expert labels alone"), "estimate": _number(result["classical"]["estimate"]),
         "ci": _interval(result["classical"]["ci"]), "struck": False, "why": ""},
        {"name": gettext("Judge's verdicts alone"), "estimate": _number(result["naive_judge"]["estimate"]),
         "ci": _interval(result["naive_judge"]["ci"]), "struck": True,
         "why": naive_why()},
    ]
    facts = [
        (gettext("Labelled answers") if answers else gettext("Labelled targets"), str(result["n_labelled"])),
        (gettext("Unlabelled answers") if answers else gettext("Unlabelled targets"), str(result["n_unlabelled"])),
        (gettext("Few-shot examples left out"), str(result["n_fewshot_excluded"])),
        *([(gettext("Answers not judged on every claim"), str(result["n_incomplete_answers"]))]
          if "n_incomplete_answers" in result else []),
        (gettext("Weighted by 1/π"), gettext("yes") if result.get("weighted") else gettext("no")),
    ]
    golden = result.get("golden")
    if golden:  # --golden: the estimate was made on this version's members
        facts.append((gettext("Golden set"), f"{golden['name']}@{golden['version']} (sha256 {golden['hash']})"))
    if result.get("lambda") is not None:
        facts.append(("λ", _number(result["lambda"])))
    if result["method"] == "rogan-gladen":
        facts += [(gettext("Sensitivity"), f"{_number(result.get('sensitivity'))} (n = {result.get('n_positive')})"),
                  (gettext("Specificity"), f"{_number(result.get('specificity'))} (n = {result.get('n_negative')})")]
    needed = result.get("labels_needed")
    facts.append((gettext("Expert labels for a half-width of %(width)s", width=_number(result["target_width"])),
                  str(needed) if needed is not None else reason_text(result, "labels_needed_note") or "—"))
    windows = [{"window": w["window"], "n_labelled": w["n_labelled"], "n_unlabelled": w["n_unlabelled"],
                "estimate": _number(w["estimate"]), "ci": _interval(w["ci"])} for w in result.get("windows", [])]
    return {"title": gettext("Estimate of the %(what)s", what=what), "method": method, "rows": rows, "facts": facts,
            "windows": windows, "ci_label": ci_label(1 - result["alpha"]), "note": reason_text(result)}


def render_estimate_json(result: dict) -> str:
    return json.dumps(result, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def render_estimate_markdown(result: dict) -> str:
    body = view(result)
    scope = f", split {escape(result['split'])}" if result.get("split") else ""
    lines = [f"## {escape(body['title'])}: {escape(result['judge'])} on {escape(result['task'])} ({escape(result['dataset'])}{scope})", "",
             table_row([gettext("Method"), gettext("Estimate"), body["ci_label"], ""]), "|---|---:|---|---|"]
    for row in body["rows"]:
        estimate = f"~~{row['estimate']}~~" if row["struck"] else f"**{row['estimate']}**" if row["name"] == body["method"] else row["estimate"]
        lines.append(table_row([escape(row["name"]), estimate, row["ci"], escape(row["why"])]))
    lines += ["", *[f"- {escape(name)}: {escape(value)}" for name, value in body["facts"]], ""]
    if body["windows"]:
        lines += [table_row([gettext("Window"), gettext("Labelled targets"), gettext("Unlabelled targets"), gettext("Estimate"),
                             body["ci_label"]]), "|---|---:|---:|---:|---|"]
        lines += [table_row([escape(w["window"]), w["n_labelled"], w["n_unlabelled"], w["estimate"], w["ci"]]) for w in body["windows"]]
        lines.append("")
    if body["note"]:
        lines += [f"{gettext('Note')}: {escape(body['note'])}", ""]
    lines.append(f"calibrate {__version__}")
    return "\n".join(lines) + "\n"


def render_estimate_html(result: dict) -> str:
    return environment().get_template("reports/estimate.html").render(result=result, body=view(result), version=__version__)


def render_estimate(result: dict, fmt: str, locale: str | None = None) -> str:
    """Return `calibrate estimate`'s result rendered in `fmt` (json, md or html)."""
    renderers = {"json": render_estimate_json, "md": render_estimate_markdown, "html": render_estimate_html}
    if fmt not in renderers:
        raise ValueError(f"unknown estimate format {fmt!r} (formats: {', '.join(FORMATS)})")
    with i18n.rendering(fmt, locale):
        return renderers[fmt](result)
