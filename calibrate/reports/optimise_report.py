"""Render an optimisation (`calibrate optimise`, loop/optimise.py `result_dict`) as JSON, HTML or Markdown.

The candidates as a table with their lineage (parent, what changed), their dev value, CI,
`lower_adjusted` and n, their calls and cost; the chosen one; the stop reason in words; the test
result. The HTML is self-contained like the calibration report; its body
(`templates/reports/_optimise_body.html`) is also the web page's.
"""

from __future__ import annotations

import json
from typing import Any

from calibrate import __version__, i18n
from calibrate.i18n import N_
from calibrate.reports import summary
from calibrate.reports.html_report import environment

FORMATS = ("json", "html", "md")
KINDS = {"start": N_("start"), "fewshot": N_("few-shots"), "rewrite": N_("rewrite"), "fewshot+rewrite": N_("few-shots + rewrite")}


def _num(value: Any) -> str:
    return summary.number(value) if value is not None else "—"


def _ci(ci: Any) -> str:
    return summary.interval(ci) if ci else "—"


def stop_text(result: dict) -> str:
    """Return why the optimisation stopped, in the current language."""
    stop = result.get("stop") or {}
    code = stop.get("code")
    if not code:
        return i18n.gettext("still running")
    if code == "failed":
        return i18n.gettext("failed: %(error)s", error=stop.get("error", ""))
    return summary.reason_text({"note": stop.get("text", ""), "reason": {"code": f"stop_{code}",
                                                                         **{k: v for k, v in stop.items() if k not in ("code", "text")}}})


def kind_text(kind: str) -> str:
    """Return a candidate's kind of change (start, few-shots, rewrite…) in the current language."""
    return i18n.gettext(KINDS[kind]) if kind in KINDS else kind


def outcome_text(result: dict) -> str:
    """Return the outcome in one sentence: the chosen version and its test decision, or why there is none."""
    chosen, test, target = result.get("chosen"), result.get("test"), summary.threshold_text(result.get("target"))
    if chosen is None:
        return i18n.gettext("No version was shown to reach %(target)s on dev.", target=target)
    if test is None:
        return i18n.gettext("%(version)s reached %(target)s on dev; not confirmed: the dataset has no test split.",
                            version=chosen, target=target)
    return i18n.gettext("%(version)s reached %(target)s on dev; on test (look %(look)s): %(decision)s, %(metric)s %(value)s "
                        "%(ci)s, n %(n)s.", version=chosen, target=target, look=test.get("look"),
                        decision=i18n.gettext(test.get("decision") or "no decision"), metric=result.get("metric") or "",
                        value=_num(test.get("value")), ci=_ci(test.get("ci")), n=test.get("n"))


def context(result: dict) -> dict:
    """Return the template context of `_optimise_body.html`."""
    rows = []
    for c in result.get("candidates", []):
        change = c["change"]
        rows.append({"c": c, "kind": kind_text(change["kind"]), "value": _num(c["dev"]["value"]),
                     "ci": _ci(c["dev"]["ci"]), "lower": _num(c["dev"]["lower_adjusted"]),
                     "chosen": c["version"] == result.get("chosen"), "best": c["version"] == result.get("best")})
    refused = [{"r": r, "kind": kind_text(r["change"].get("kind", "")),
                "why": summary.reason_text({"note": r.get("text", ""), "reason": r.get("reason")})}
               for r in result.get("refused", [])]
    return {"result": result, "rows": rows, "refused": refused, "stop": stop_text(result), "outcome": outcome_text(result),
            "target": summary.threshold_text(result.get("target")), "num": _num, "ci": _ci}


def render_json(result: dict) -> str:
    return json.dumps(result, indent=2, ensure_ascii=False) + "\n"


def render_markdown(result: dict) -> str:
    ctx = context(result)
    _ = i18n.gettext
    title = _("Optimisation of %(start)s on %(dataset)s", start=summary.md_text(result.get("from")), dataset=summary.md_text(result.get("dataset")))
    task_line = _("Task: %(task)s, metric %(metric)s, target %(target)s", task=summary.md_text(result.get("task")),
                  metric=summary.md_text(result.get("metric") or "—"), target=ctx["target"])
    looks = _("Looks on dev: %(dev)s; on test: %(test)s; adjustment: %(how)s", dev=result["looks"]["dev"],
              test=result["looks"]["test"], how=summary.md_text(result.get("adjustment")))
    stopped = _("Stopped: %(why)s", why=summary.md_text(ctx["stop"]))
    outcome = _("Outcome: %(outcome)s", outcome=summary.md_text(ctx["outcome"]))
    calls = _("Calls: %(calls)s, cost $%(cost)s", calls=result.get("calls"), cost=f"{result.get('cost') or 0:.4f}")
    lines = [f"# {title}", "", f"- {task_line}", f"- {looks}", f"- {stopped}", f"- {outcome}", f"- {calls}"]
    if result.get("note"):
        lines.append(f"- {summary.md_text(result['note'])}")
    header = [_("Version"), _("Parent"), _("Change"), _("Dev value"), "CI", "lower_adjusted", "n", _("Calls"), _("Cost"), _("Note")]
    lines += ["", "## " + _("Candidates"), "", "| " + " | ".join(header) + " |", "|---|---|---|---:|---|---:|---:|---:|---:|---|"]
    for row in ctx["rows"]:
        c = row["c"]
        mark = " ✔" if row["chosen"] else ""
        lines.append(f"| {summary.md_text(c['version'])}{mark} | {summary.md_text(c.get('parent') or '—')} | {summary.md_text(row['kind'])} | {row['value']} | "
                     f"{row['ci']} | {row['lower']} | {c['dev'].get('n') or '—'} | {c['calls']} | ${c['cost']:.4f} | "
                     f"{summary.md_text(c['change'].get('note', ''))} |")
    if ctx["refused"]:
        lines += ["", "## " + _("Refused candidates"), ""]
        for r in ctx["refused"]:
            where = _("round %(n)s, %(kind)s from %(parent)s:", n=r["r"].get("round"), kind=summary.md_text(r["kind"]),
                      parent=summary.md_text(r["r"].get("parent")))
            lines.append(f"- {where} {summary.md_text(r['why'])}")
    return "\n".join(lines) + "\n"


def render_html(result: dict) -> str:
    return environment().get_template("reports/optimise.html").render(**context(result), version=__version__)


def render_optimise(result: dict, fmt: str, locale: str | None = None) -> str:
    """Return the optimisation rendered in `fmt` (json, html or md), HTML and Markdown in `locale`."""
    renderers = {"json": render_json, "html": render_html, "md": render_markdown}
    if fmt not in renderers:
        raise ValueError(f"unknown optimisation format {fmt!r} (formats: {', '.join(FORMATS)})")
    with i18n.rendering(fmt, locale):
        return renderers[fmt](result)


__all__ = ["FORMATS", "context", "kind_text", "outcome_text", "render_optimise", "stop_text"]
