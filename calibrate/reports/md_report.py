"""The Markdown report: a compact summary for a pull request or an issue.

Untrusted text (dataset, judge, annotator and label names, notes) is neutralised by
`escape`: it cannot open HTML, a link, an image, a code span or a table cell, and cannot
break a line.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from calibrate import __version__
from calibrate.i18n import gettext
from calibrate.reports import decisions as decided
from calibrate.reports import rag_summary, summary
from calibrate.reports.estimate_summary import consistency_text, rater_rows, section_estimate

ICONS = {"passed": "✅", "not passed": "❌", "undefined": "⚠️", "not judged": "➖"}

# Markdown punctuation that can start markup anywhere in a line; `<`, `>` and `&` become entities.
_BACKSLASHED = set("\\`*_[]|~#!")
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def escape(text: Any) -> str:
    """Return `text` as inert Markdown on one line: no HTML, links, images, code, emphasis or cell breaks."""
    out = []
    for ch in " ".join(str(text).splitlines()):
        if ch in _BACKSLASHED:
            out.append("\\" + ch)
        elif ch in _ENTITIES:
            out.append(_ENTITIES[ch])
        elif ch < " " or ch == "\x7f":
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


def table_row(cells: list[Any]) -> str:
    """Return one Markdown table row."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def render_markdown(report: Any, *, generated: datetime | None = None) -> str:
    """Return the report as GitHub-flavoured Markdown."""
    data = report.data
    ci_label = summary.confidence_text(data)
    lines = _head(data, generated) + _decisions(data, ci_label)
    for name, section in (data.get("tasks") or {}).items():
        lines += _task(name, section, data, ci_label)
    lines += _rag(data) + _retrieval(data) + _versions(data, ci_label)
    lines += ["## " + gettext("Methods"), "", escape(_methods_paragraph(data)), ""]
    lines += [gettext("Provenance") + ":", ""]
    lines += [f"- {escape(name)}: {escape(value)}" for name, value in summary.provenance(data)]
    return "\n".join(lines).rstrip("\n") + "\n"


def _head(data: dict, generated: datetime | None) -> list[str]:
    """Return the title, the judge, threshold and date, the decision and the warnings."""
    when = data.get("generated_at") or (generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    threshold = data.get("threshold")
    outcome, why = decided.overall(data)
    judge = data.get("judge")
    lines = ["# " + gettext("Calibration report: %(dataset)s", dataset=escape(data.get("dataset", ""))), ""]
    meta = [f"**{gettext('Judge')}:** {escape(judge) if judge is not None else gettext('none (human agreement only)')}",
            f"**{gettext('Threshold')}:** {escape(threshold)}"
            + (f" ({gettext('CI lower bound must pass')})" if data.get("ci_lower") else ""),
            f"**{gettext('Generated')}:** {escape(when)}", f"calibrate {escape(__version__)}"]
    lines += [" · ".join(meta), ""]
    heading = {"passed": "✅ " + gettext("PASSED"), "not passed": "❌ " + gettext("NOT PASSED")}.get(outcome, gettext("no decision"))
    if judge is not None:  # the three-state decision first, then what `passed` (the gate's exit code) is under the rule
        state, state_why = decided.overall_decision(data)
        heading = gettext("%(state)s — %(outcome)s under rule %(rule)s", state=gettext(decided.STATE_WORDS.get(state, state)),
                          outcome=heading, rule=escape(data.get("rule") or "point"))
        lines += ["## " + gettext("Decision: %(heading)s", heading=heading), "", escape(state_why), "", escape(why), ""]
    else:
        lines += ["## " + gettext("Decision: %(heading)s", heading=heading), "", escape(why), ""]
    for warning in data.get("warnings") or []:
        lines += [f"> ⚠️ **{gettext('Warning')} ({escape(warning.get('kind', ''))}):** {escape(warning.get('message', ''))}", ""]
    return lines


def _decisions(data: dict, ci_label: str) -> list[str]:
    """Return one line per task: its outcome, why, its interval and n, and the decision's sentence."""
    judge, threshold = data.get("judge"), data.get("threshold")
    decisions = decided.decisions(data)
    lines = []
    for d in decisions:
        if d.outcome == "not judged":
            if judge is not None:
                lines.append(f"- {ICONS[d.outcome]} **{escape(d.task)}**: not judged. {escape(d.reason)}.")
            continue
        ceiling = f"; human–human {d.ceiling.text} ({escape(d.ceiling.name)})" if d.ceiling else ""
        lines.append(f"- {ICONS[d.outcome]} **{escape(d.task)}**: {d.outcome}. {escape(d.reason)}; {ci_label} {d.ci_text}; "
                     f"n = {d.n} {summary.noun(d.target, d.n)}; threshold {escape(threshold)}{ceiling}. "
                     f"Decision: {escape(d.text)}.")
    if judge is not None and decisions:
        lines.append("")
    return lines


def _rag(data: dict) -> list[str]:
    """Return the RAG metrics' table, their headlines and notes (none without them)."""
    rag = rag_summary.rag(data)
    if not rag:
        return []
    lines = ["## " + gettext("RAG metrics"), "",
             table_row([gettext("metric"), gettext("human mean"), gettext("answers"), gettext("judge mean"), gettext("answers"),
                        gettext("answers with both"), gettext("judge − human on them"), "Spearman's ρ"]),
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [table_row([escape(r["name"]), r["human"], str(r["n_human"]), r["judge"] or "—", str(r["n_judge"]) or "—",
                         str(r["n_paired"]) or "—", r["difference"] or "—", r["rho"] or "—"]) for r in rag]
    lines.append("")
    lines += [*(f"- {escape(r['headline'])}" for r in rag if r["headline"]), ""] if any(r["headline"] for r in rag) else []
    notes = [f"- {escape(r['name'])}: {escape(r['rho_note'])}." for r in rag if r["rho_note"]]
    return lines + ([*notes, ""] if notes else [])


def _retrieval(data: dict) -> list[str]:
    """Return the retrieval metrics' table (none without them)."""
    retrieval = rag_summary.retrieval(data)
    if not retrieval:
        return []
    lines = ["## " + gettext("Retrieval at K = %(k)s", k=escape(retrieval.k)), "", escape(retrieval.summary), "",
             table_row([gettext("metric"), gettext("mean")]), "|---|---:|"]
    return lines + [table_row([escape(name), value]) for name, value, _ in retrieval.rows] + [""]


def _versions(data: dict, ci_label: str) -> list[str]:
    """Return the prompt's versions on their common targets, and the latest two compared (none without `versions`)."""
    versions = data.get("versions")
    if not versions:
        return []
    lines = ["## " + gettext("Versions of %(prompt)s", prompt=escape(versions.get("prompt", ""))), "",
             escape(f"Scored on the {versions.get('common_targets', 0)} targets common to all versions "
                    "(an unusable verdict counts as a miss); own: each version on all its own targets."
                    + (f" {summary.reason_text(versions, 'common_note')}." if versions.get("common_note") else "")), "",
             table_row(["version", "alignment", ci_label, "n", "decision", "own", "changed", "note"]),
             "|---|---:|---|---:|---|---:|---|---|"]
    for v in versions.get("versions") or []:
        own = v.get("own") or {}
        decided = (f"{v['decision']} (rule {v.get('rule')}; {'passes' if v.get('passed') else 'does not pass'})"
                   if v.get("decision") else "—")
        lines.append(table_row([escape(v["judge"]), summary.number(v.get("value")) if v.get("status") == "ok" else escape(v.get("status")),
                           summary.interval(v.get("ci")), escape(v.get("n") if v.get("n") is not None else "—"),
                           escape(decided), f"{summary.number(own.get('value'))}, n {own.get('n')}" if own else "—",
                           escape(", ".join(v.get("changed") or []) or "—"), escape(v.get("note") or "")]))
    lines.append("")
    comparison = versions.get("comparison")
    if comparison:
        diff = comparison.get("difference") or {}
        flips = comparison.get("flips") or {}
        lines += [escape(f"{comparison.get('judge_b')} minus {comparison.get('judge_a')} on {comparison.get('common_n')} common "
                         f"targets ({comparison.get('scope')}): {summary.number(diff.get('value'))} "
                         f"{ci_label} {summary.interval(diff.get('ci'))}; McNemar p = "
                         f"{summary.p_value((comparison.get('mcnemar') or {}).get('p_value'))}; "
                         f"fixed {flips.get('fixed', 0)}, broken {flips.get('broken', 0)}."
                         + (f" Changed: {', '.join(comparison['changed']) or 'nothing'}." if comparison.get("changed") is not None else "")
                         + (f" {comparison['reconciliation']}" if comparison.get("reconciliation") else "")), ""]
    elif versions.get("comparison_note"):
        lines += [escape(versions["comparison_note"]), ""]
    return lines


def _grouped(section: dict, ci_label: str) -> list[str]:
    """Return a section's statistics within groups (--group-by), and each group's own (none without groups)."""
    grouped = summary.grouped(section)
    if not grouped:
        return []
    info = section.get("grouped") or {}
    lines = [f"Within groups of {escape(info.get('by'))} ({info.get('groups', 0)} groups, "
             f"{info.get('groups_skipped', 0)} skipped), averaged over groups:"]
    lines += [f"- {escape(s.name)} {s.value} (pooled {summary.pooled(section, s.key)}){'; ' + escape(s.note) if s.note else ''}"
              for s in grouped]
    lines.append("")
    groups = summary.per_group(section)
    if groups:
        metric = "Cohen's κ" if section.get("kind") in summary.LABEL_KINDS else "Spearman's ρ"
        lines += [f"Each group on its own ({metric}, {ci_label} by cluster bootstrap over samples):", "",
                  table_row(["group", "n", metric, ci_label, "note"]), "|---|---:|---:|---|---|"]
        lines += [table_row([escape(g["group"]), g["n"], g["value"], g["ci"], escape(g["note"])]) for g in groups]
        lines.append("")
    return lines


def _task(name: str, section: dict, data: dict, ci_label: str) -> list[str]:
    decision = decided.decision(name, section, data)
    target = section.get("target", "")
    lines = [f"### {escape(name)} ({escape(section.get('kind', ''))}, {gettext('one value per %(target)s', target=summary.noun(target, 1))})",
             ""]
    if section.get("status") == "no_data":
        lines += [gettext("This task has no data: no current human label and no verdict of the judge remain for it."), ""]
    note = summary.judge_note(section, data)
    if note:
        lines += [f"**{gettext('No comparison possible:')}** {escape(note)}.", ""]
    stats = summary.statistics(section)
    if stats:
        lines += [table_row([gettext("statistic"), gettext("value"), ci_label, "p", gettext("note")]), "|---|---:|---|---:|---|"]
        for s in stats:
            value = f"**{s.value}**" if s.alignment else s.value
            lines.append(table_row([escape(s.name), value, s.ci or "—", escape(s.p) or "—", escape(s.note) or ""]))
        lines.append("")
    lines += _grouped(section, ci_label)
    block = summary.position(section)
    if block:
        lines += [gettext("Presentation order") + ":", "", table_row(["", gettext("value"), gettext("note")]), "|---|---:|---|"]
        lines += [table_row([escape(label), escape(value), escape(note) or ""]) for _, label, value, note in block]
        lines.append("")
    rows = summary.localisation(section)
    if rows:
        lines += [gettext("Where the first wrong step is (localisation)") + ":", "",
                  table_row(["", gettext("value"), gettext("note")]), "|---|---:|---|"]
        lines += [table_row([escape(label), escape(value), escape(note)]) for _, label, value, note in rows]
        lines.append("")
    human = section.get("human") or {}
    parts = []
    if decision.ceiling:
        parts.append(f"{escape(decision.ceiling.name)} {decision.ceiling.text}")
    parts += [f"{escape(s.name)} {s.value}" for s in summary.human_statistics(section)]
    annotators = human.get("annotators") or []
    note = f" ({escape(summary.reason_text(human))})" if human.get("note") else ""
    lines += [gettext("Human–human agreement over %(n)s %(targets)s labelled by two or more of %(annotators)s annotators: %(values)s",
                      n=human.get("n", 0), targets=summary.noun(target, human.get("n", 0)), annotators=len(annotators),
                      values="; ".join(parts) or gettext("none")) + f"{note}.", ""]
    raters = rater_rows(section)
    if raters:
        lines += ["; ".join(f"{escape(r['who'])}: {escape(r['name'])} {r['value']} ({escape(r['note'])})" for r in raters) + ".", ""]
    if consistency_text(section):
        lines += [escape(consistency_text(section)) + ".", ""]
    counts = [(label, count) for key, label, count, _ in summary.counts(section)
              if key not in ("n", "n_samples", "n_ties", "n_abstained")]
    if "n_abstained" in section and "alignment" in section:  # scored, not excluded: said on its own
        lines += [gettext("Abstentions (the judge declined a checkable target; scored as misses): %(n)s.",
                          n=section["n_abstained"]), ""]
    if counts:
        ties = " " + gettext("Ties awaiting adjudication: %(n)s.", n=section["n_ties"]) if section.get("n_ties") else ""
        lines += [gettext("Excluded from the statistics: %(counts)s (scored: %(n)s).",
                          counts=", ".join(f"{label.lower()} {count}" for label, count in counts), n=section.get("n", 0)) + ties, ""]
    if section.get("claim_sources"):
        lines += [gettext("Claim sets: %(sources)s.", sources=escape(summary.claim_sources(section))), ""]
    needed = summary.labels_needed_text(section)
    if needed:
        lines += [f"{gettext('Labels needed:')} {escape(needed)}.", ""]
    if isinstance(section.get("alt_test"), dict):
        lines += alt_test_lines(section["alt_test"], summary.ceiling(section))
    lines += estimate_lines(section_estimate(section.get("estimate")))
    return lines


def estimate_lines(body: dict | None) -> list[str]:
    """Return a section's `estimate` block as Markdown: the estimate, and the naive judge number struck through with why."""
    if body is None:
        return []
    if not body["ok"]:
        return [f"{escape(body['title'])} ({body['method']}): {gettext('no estimate')}: {escape(body['note'])}.", ""]
    return [f"{escape(body['title'])} ({body['method']}): **{body['estimate']}** {body['ci_label']} {body['ci']}, "
            f"{escape(body['counts'])}. {gettext('The judge alone')}: ~~{body['naive']}~~ ({escape(body['why'])}).", ""]


def alt_test_lines(block: dict, top: summary.Ceiling | None = None) -> list[str]:
    """Return an `alt_test` block as Markdown lines: the answer with why, then the per-annotator table when it ran,
    and the task's human–human ceiling (`top`) beside it."""
    answer, why = summary.alt_test_verdict(block)
    out = [gettext("Could the judge replace an expert (Alternative Annotator Test)?") + f" **{escape(answer)}**: {escape(why)}.", ""]
    rows = summary.alt_test_rows(block)
    if rows:
        out += [table_row(["annotator", "items", "p", "rejected", "judge wins", "annotator wins"]), "|---|---:|---:|---|---:|---:|"]
        out += [table_row([escape(r["annotator"]), r["n"], r["p"], r["rejected"], r["judge"], r["annotator_rate"]]) for r in rows]
        out.append("")
    if block.get("status") == "ok" and block.get("note"):
        out += [f"{gettext('Note:')} {escape(summary.reason_text(block))}.", ""]
    if top is not None and top.value is not None:
        out += [f"{gettext('Human–human ceiling')}: {escape(top.name)} {top.text}.", ""]
    return out


def _methods_paragraph(data: dict) -> str:
    boot = (data.get("method") or {}).get("bootstrap") or {}
    method = boot.get("method", "percentile")
    return (
        gettext("Gold per target: the adjudicated label, else the majority of annotators (a tie gives no gold); for scores, "
                "the mean of the annotators. Excluded and counted: unparsed verdicts, targets without gold, labels left out "
                "of statistics (such as not_applicable) and few-shot examples of the judge's prompt.") + " "
        + gettext("Intervals: %(level)s %(method)s cluster bootstrap over samples (answers), %(n)s resamples, seed %(seed)s.",
                  level=summary.confidence_level(boot.get("confidence", 0.95)), method=gettext(method), n=boot.get("n_resamples", "?"),
                  seed=boot.get("seed", "?")) + " "
        + summary.threshold_rule(data)
        + (" " + gettext("The CI lower bound must reach the threshold.") if data.get("ci_lower") else "") + " "
        + gettext("Human–human agreement is over targets with two or more annotators.")
        + (f" {summary.position_methods(data)}" if summary.position_methods(data) else "")
        + (f" {rag_summary.rag_methods(data)}" if rag_summary.rag_methods(data) else "")
    )
