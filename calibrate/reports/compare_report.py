"""Render a judge comparison (`calibrate.calibration.compare.compare_judges`) as JSON, HTML or Markdown.

The HTML is self-contained like the calibration report (inline CSS from the same partial,
no JavaScript, no network) and escapes every name and id it shows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from calibrate import __version__, i18n
from calibrate.reports import summary
from calibrate.reports.decisions import decision_text
from calibrate.reports.html_report import environment
from calibrate.reports.summary import reason_text
from calibrate.targets import target_name

FORMATS = ("json", "html", "md")


def _num(value: Any, digits: int = 3) -> str:
    return summary.number(value, digits)


def _ci(ci: list | None) -> str:
    return "—" if not ci else summary.interval(ci)


def _p(value: float | None) -> str:
    return summary.p_value(value) or "—"


def headline(section: dict) -> str:
    """Return one sentence saying whether B beat A on a task, with the evidence."""
    diff = section["difference"]
    if diff["value"] is None:
        return i18n.gettext("the difference is undefined: %(why)s", why=reason_text(diff))
    ci = diff.get("ci")
    if ci and ci[0] > 0:
        verdict = i18n.gettext("B is better")
    elif ci and ci[1] < 0:
        verdict = i18n.gettext("B is worse")
    else:
        verdict = i18n.gettext("no clear difference (the CI includes 0)")
    sign = "+" if diff["value"] >= 0 else "−"
    return (f"{verdict}: {section['metric']} {_num(section['a']['value'])} → {_num(section['b']['value'])}, "
            f"B − A = {sign}{_num(abs(diff['value']))} {_ci(ci)}")


def judge_decision(section: dict, side: str, threshold: float | None) -> str:
    """Return one judge's decision on the common targets in words (reports.decisions.decision_text)."""
    est = section[side]
    if threshold is None:
        return "no threshold"
    return decision_text(est.get("decision") or "undefined", est.get("rule") or "point", section["metric"], est.get("value"),
                         est.get("ci"), threshold, est.get("passed"), None, note=reason_text(est))


def changed_lines(result: dict) -> list[str]:
    """Return what changed between the two prompt versions, one line per changed field (params key by key)."""
    if result.get("changed") is None:
        return [reason_text(result, "changed_note") or "what changed is not known"]
    if not result["changed"]:
        return ["nothing: same template, system text, model, parameters and few-shot examples"]
    versions = result.get("versions") or {}
    lines = []
    for part in result["changed"]:
        if part == "model":
            a, b = versions.get("model") or (None, None)
            lines.append(f"model: {a} → {b}")
        elif part == "params":
            lines += [f"params.{p['key']}: {json.dumps(p['a'])} → {json.dumps(p['b'])}" for p in versions.get("params_diff") or []]
        else:
            diff = versions.get(part) or []
            changed = sum(1 for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---")))
            lines.append(f"{part}: {changed} line(s) differ")
    return lines


def misses(section: dict, side: str) -> str:
    """Return a judge's misses on the common targets as "unusable / abstained" ("2 / 1")."""
    return f"{section.get(f'n_unparsed_{side}', 0)} / {section.get(f'n_abstained_{side}', 0)}"


def render_compare_json(result: dict) -> str:
    return json.dumps(result, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def render_compare_markdown(result: dict) -> str:
    _ = i18n.gettext
    scope = " (" + _("split %(split)s", split=summary.md_text(result["split"])) + ")" if result.get("split") else ""
    scope += " · " + summary.md_text(summary.golden_citation(result)) if result.get("golden") else ""
    lines = [_("## Judge comparison on %(dataset)s%(scope)s: A = `%(a)s`, B = `%(b)s`", dataset=summary.md_text(result["dataset"]), scope=scope,
               a=summary.md_text(result["judge_a"]), b=summary.md_text(result["judge_b"])), ""]
    for name, section in result["tasks"].items():
        lines += ["### " + summary.md_text(name) + " (" + _("%(n)s common targets in %(samples)s samples", n=section["common_n"],
                                                 samples=section["n_samples"]) + ")", "",
                  f"**{summary.md_text(headline(section))}**", "",
                  "| | A | B |", "|---|---|---|",
                  f"| {section['metric']} | {_num(section['a']['value'])} | {_num(section['b']['value'])} |"]
        if section["metric"] == "cohen_kappa":
            lines.append(f"| {_('accuracy against gold')} | {_num(section['accuracy']['a'])} | {_num(section['accuracy']['b'])} |")
            mc = section["mcnemar"]
            tests = _("McNemar exact: fixed (b01) %(fixed)s, broken (b10) %(broken)s, p = %(p)s", fixed=mc["b01"], broken=mc["b10"],
                      p=_p(mc["p_value"]))
        else:
            lines.append(f"| {_('mean absolute error')} | {_num(section['mean_abs_error']['a'])} | {_num(section['mean_abs_error']['b'])} |")
            tests = _("paired t-test on per-sample absolute error: t = %(t)s, p = %(p)s; Wilcoxon: p = %(w)s", t=_num(section["ttest"]["t"]),
                      p=_p(section["ttest"]["p_value"]), w=_p(section["wilcoxon"]["p_value"]))
        lines.append(f"| {summary.confidence_text(result)} | {_ci(section['a'].get('ci'))} | {_ci(section['b'].get('ci'))} |")
        decided = [summary.md_text(_(section[side]["decision"]) if section[side].get("decision") else _("no decision")) for side in ("a", "b")]
        lines.append(f"| {_('decision')} | {decided[0]} | {decided[1]} |")
        if "n_unparsed_a" in section:  # misses on the common targets (an unusable verdict, an abstention): scored as wrong
            lines.append(f"| {_('misses: unusable verdicts / abstentions')} | {misses(section, 'a')} | {misses(section, 'b')} |")
        flips = section["flips"]
        lines += ["", f"A: {summary.md_text(judge_decision(section, 'a', result.get('threshold')))}.",
                  f"B: {summary.md_text(judge_decision(section, 'b', result.get('threshold')))}."]
        if section.get("reconciliation"):
            lines += ["", f"**{summary.md_text(section['reconciliation'])}**"]
        lines += ["", tests, "", _("Flipped: %(fixed)s fixed by B, %(broken)s broken by B.", fixed=flips["n_fixed"], broken=flips["n_broken"])]
        if flips["broken"]:
            lines.append(_("Broken:") + " " + ", ".join(f"`{summary.md_text(person_target(t))}`" for t in flips["broken"][:30])
                         + (" …" if flips["n_broken"] > 30 else ""))
        lines.append("")
    lines += ["### " + _("What changed between the prompt versions"), ""] + [f"- {summary.md_text(line)}" for line in changed_lines(result)] + [""]
    if result.get("skipped"):
        lines += [_("Not compared:") + " " + "; ".join(summary.md_text(s) for s in result["skipped"]), ""]
    boot = result["method"]["bootstrap"]
    lines.append(_("Paired cluster bootstrap over samples (%(n)s resamples, %(level)s, seed %(seed)s); few-shot targets of either version "
                   "excluded. calibrate %(version)s.", n=boot["n_resamples"], level=i18n.current().percent(boot["confidence"], 0),
                   seed=boot["seed"], version=__version__))
    return "\n".join(lines) + "\n"


def person_target(readable: str) -> str:
    """Return a flipped target's file-style id ("demo-001/claim/2", 0-based) as people read it ("demo-001 · claim 3")."""
    head, _, position = readable.rpartition("/")
    sample, _, kind = head.rpartition("/")
    if kind in ("claim", "context") and sample and position.isascii() and position.isdigit():
        return target_name(sample, kind, int(position))
    return readable


def compare_context(result: dict, link: Callable[[str, str, str], str] | None = None) -> dict:
    """Return the template context of a comparison (templates/reports/_compare_body.html).

    `link(task, side, target_key)` gives the URL a flipped target opens (side: "fixed" or
    "broken"); the self-contained report has none, the engineers' page links each flip to
    the disagreement of the judge that got it wrong.
    """
    def flips(name: str, section: dict, side: str) -> list[tuple[str, str | None]]:
        ids, keys = section["flips"][side], section["flips"].get(f"{side}_keys") or []
        hrefs = [link(name, side, key) for key in keys] if link else []
        return list(zip([person_target(i) for i in ids], hrefs + [None] * (len(ids) - len(hrefs)), strict=True))

    threshold = result.get("threshold")
    sections = [{"name": name, "s": section, "headline": headline(section), "threshold": threshold,
                 "text_a": judge_decision(section, "a", threshold), "text_b": judge_decision(section, "b", threshold),
                 "ci_a": _ci(section["a"].get("ci")), "ci_b": _ci(section["b"].get("ci")),
                 "a": _num(section["a"]["value"]), "b": _num(section["b"]["value"]),
                 "diff": _num(section["difference"]["value"]), "ci": _ci(section["difference"].get("ci")),
                 "fixed": flips(name, section, "fixed"), "broken": flips(name, section, "broken"),
                 "misses_a": misses(section, "a") if "n_unparsed_a" in section else None,
                 "misses_b": misses(section, "b") if "n_unparsed_a" in section else None,
                 "p": _p, "num": _num, "ci_label": summary.confidence_text(result)} for name, section in result["tasks"].items()]
    return {"result": result, "sections": sections}


def render_compare_html(result: dict) -> str:
    return environment().get_template("reports/compare.html").render(**compare_context(result), version=__version__)


def render_compare(result: dict, fmt: str, locale: str | None = None) -> str:
    """Return the comparison rendered in `fmt` (json, html or md)."""
    renderers = {"json": render_compare_json, "html": render_compare_html, "md": render_compare_markdown}
    if fmt not in renderers:
        raise ValueError(f"unknown comparison format {fmt!r} (formats: {', '.join(FORMATS)})")
    with i18n.rendering(fmt, locale):
        return renderers[fmt](result)
