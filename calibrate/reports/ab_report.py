"""Render an A/B comparison (`calibrate.calibration.ab.ABResult`) as JSON, HTML or Markdown.

Like the calibration report: JSON is `result.data` exactly; HTML is one self-contained page
(inline styles from templates/reports/_style.html, inline SVG charts, no JavaScript, every
text from users' data escaped by Jinja2's autoescaping); Markdown is a compact summary whose
untrusted text goes through `md_report.escape`. Numbers are worded once, by `summary`.
"""

from __future__ import annotations

import json
from typing import Any

from markupsafe import Markup

from calibrate import __version__, i18n
from calibrate.reports import charts, summary
from calibrate.reports.html_report import environment
from calibrate.reports.md_report import escape, table_row

FORMATS = ("json", "html", "md")
PAIRS_SHOWN = 50

METHODS = (
    "Each sample gets the metric from {values_from}. Samples are paired by question ({paired_by}); a question with "
    "several samples on one side takes their mean, and a question with a value on one side only is unpaired and left "
    "out. Every difference is B − A over the pairs. Paired t-test: t = mean(d) / (sd(d)/√n), n − 1 degrees of "
    "freedom (Student 1908). Wilcoxon signed-rank test: zero differences dropped, ties given mean ranks, the "
    "statistic is the smaller rank sum, exact p-value for up to 50 differences without zeros, else the normal "
    "approximation (Wilcoxon 1945). The interval of the mean difference is a {method} bootstrap of the pairs, "
    "{n_resamples} resamples, seed {seed}, at {confidence:g}% (Efron & Tibshirani 1993). The relative improvement is "
    "(mean B − mean A) / |mean A|."
)


def render_ab(result: Any, fmt: str, locale: str | None = None) -> str:
    """Return the comparison rendered in `fmt` (one of FORMATS)."""
    renderers = {"json": render_ab_json, "html": render_ab_html, "md": render_ab_markdown}
    try:
        renderer = renderers[fmt]
    except KeyError:
        raise ValueError(f"unknown A/B format {fmt!r} (formats: {', '.join(FORMATS)})") from None
    with i18n.rendering(fmt, locale):
        return renderer(result)


def render_ab_json(result: Any) -> str:
    """Return the comparison's data as indented JSON (NaN refused)."""
    return json.dumps(result.data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _signed(value: Any) -> str:
    text = summary.number(value)
    return text if not summary.finite(value) or text.startswith("-") or round(value, summary.DIGITS) == 0 else f"+{text}"


def _relative(value: Any) -> str:
    if not summary.finite(value):
        return i18n.gettext("undefined")
    return ("+" if value >= 0 else "") + i18n.current().percent(value, 1)


def headline(data: dict) -> str:
    """Return one sentence: the difference, its interval, and whether the interval excludes zero."""
    diff = data["difference"]
    ci = diff.get("ci")
    level = f"{100 * diff.get('confidence', 0.95):g}% CI"
    if not summary.finite(diff.get("value")):
        return f"The difference B − A is undefined: {summary.reason_text(diff) or 'no pairs'}."
    if not ci:
        return (f"Mean {data['metric']}: A {summary.number(data['mean_a'])}, B {summary.number(data['mean_b'])}; difference "
                f"B − A {_signed(diff['value'])} over {data['n_pairs']} pair(s), with no interval ({summary.reason_text(diff) or 'too few pairs'}).")
    if ci[0] > 0:
        side = "B scores higher than A: the interval lies above 0"
    elif ci[1] < 0:
        side = "B scores lower than A: the interval lies below 0"
    else:
        side = "the interval includes 0: no difference is shown"
    return (f"Mean {data['metric']}: A {summary.number(data['mean_a'])}, B {summary.number(data['mean_b'])}; difference "
            f"B − A {_signed(diff['value'])} ({level} {summary.interval(ci)}) over {data['n_pairs']} pairs; {side}.")


def rows(data: dict) -> list[tuple[str, str, str]]:
    """Return (statistic, value, detail) rows, the same in HTML and Markdown."""
    diff, ttest, wil = data["difference"], data["ttest"], data["wilcoxon"]
    level = f"{100 * diff.get('confidence', 0.95):g}% CI"

    def why(est: dict) -> str:
        return summary.reason_text(est)
    return [
        (f"Mean A ({data['a']})", summary.number(data["mean_a"]), f"over {data['n_pairs']} pairs"),
        (f"Mean B ({data['b']})", summary.number(data["mean_b"]), f"over {data['n_pairs']} pairs"),
        ("Difference B − A", _signed(diff.get("value")),
         "; ".join(p for p in (f"{level} {summary.interval(diff.get('ci'))}",
                               f"bootstrap p {summary.p_value(diff.get('p_value'))}" if summary.p_value(diff.get("p_value")) else "",
                               why(diff)) if p)),
        ("Relative improvement", _relative(data.get("relative_improvement")), "(mean B − mean A) / |mean A|"),
        ("Paired t-test: t", summary.number(ttest.get("t")),
         "; ".join(p for p in (f"p {summary.p_value(ttest.get('p_value'))}" if summary.p_value(ttest.get("p_value")) else "",
                               f"df {ttest['df']}" if ttest.get("df") is not None else "", why(ttest)) if p)),
        ("Wilcoxon signed-rank: statistic", summary.number(wil.get("statistic"), 1) if wil.get("statistic") is not None else i18n.gettext("undefined"),
         "; ".join(p for p in (f"p {summary.p_value(wil.get('p_value'))}" if summary.p_value(wil.get("p_value")) else "",
                               f"{wil.get('n_nonzero')} non-zero differences" if wil.get("n_nonzero") is not None else "",
                               why(wil)) if p)),
        ("Pairs", str(data["n_pairs"]), "questions with a value in both systems"),
        ("Unpaired", str(data["n_unpaired"]),
         f"{data['unpaired']['a']} only in A, {data['unpaired']['b']} only in B (left out)"),
    ]


def methods(data: dict) -> str:
    """Return the methods paragraph with this comparison's settings."""
    diff = data["difference"]
    return METHODS.format(values_from=data.get("values_from", ""), paired_by=data.get("paired_by", ""),
                          method=diff.get("method", "percentile"), n_resamples=diff.get("n_resamples", "?"),
                          seed=diff.get("seed", "?"), confidence=100 * diff.get("confidence", 0.95))


def largest_pairs(data: dict, limit: int = PAIRS_SHOWN) -> list[dict]:
    """Return the pairs with the largest absolute differences first (at most `limit`)."""
    pairs = sorted(data.get("pairs") or [], key=lambda p: (-abs(p["difference"]), p["key"]))
    return [{**p, "a_text": summary.number(p["a"]), "b_text": summary.number(p["b"]), "diff_text": _signed(p["difference"])}
            for p in pairs[:limit]]


def render_ab_html(result: Any) -> str:
    """Return the comparison as one self-contained HTML page."""
    data = result.data
    diff = data["difference"]
    level = f"{100 * diff.get('confidence', 0.95):g}% CI"
    ci = diff.get("ci")
    chart = Markup(charts.difference_chart(diff.get("value"), ci, label=f"difference B − A in {data['metric']}", ci_label=level))
    points = [(p["a"], p["b"], p["key"]) for p in data.get("pairs") or []]
    scatter = Markup(charts.score_scatter(points, x_axis=f"A: {data['a']}", y_axis=f"B: {data['b']}",
                                          title=f"{data['metric']} per question, A against B", x_name="A", y_name="B"))
    return environment().get_template("reports/ab.html").render(
        data=data, version=__version__, headline=headline(data), rows=rows(data), notes=data.get("notes") or [],
        methods=methods(data), pairs=largest_pairs(data), n_pairs=data["n_pairs"], pairs_shown=PAIRS_SHOWN,
        difference_chart=chart, scatter=scatter, ci_label=level,
    )


def render_ab_markdown(result: Any) -> str:
    """Return the comparison as GitHub-flavoured Markdown."""
    data = result.data
    lines = [f"# A/B test: {escape(data['a'])} vs {escape(data['b'])} on {escape(data['metric'])}", ""]
    meta = [f"**Dataset:** {escape(data['dataset'])}", f"**Systems by:** {escape(data['by'])}",
            f"**Values from:** {escape(data.get('values_from', ''))}", f"**Generated:** {escape(data.get('generated_at', ''))}",
            f"calibrate {escape(__version__)}"]
    lines += [" · ".join(meta), "", escape(headline(data)), ""]
    lines += [table_row(["statistic", "value", "detail"]), "|---|---:|---|"]
    lines += [table_row([escape(name), escape(value), escape(detail)]) for name, value, detail in rows(data)]
    lines.append("")
    if data.get("notes"):
        lines += ["Notes:", ""] + [f"- {escape(note)}" for note in data["notes"]] + [""]
    lines += ["## Methods", "", escape(methods(data)), ""]
    return "\n".join(lines).rstrip("\n") + "\n"
