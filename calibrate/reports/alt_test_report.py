"""`calibrate alt-test` rendered as JSON, Markdown or HTML.

The wording is shared with the report's `alt_test` blocks and the dashboard: `summary.alt_test_verdict`
and `summary.alt_test_context` (HTML), `md_report.alt_test_lines` (Markdown).

The HTML is self-contained like the calibration report (inline CSS, no JavaScript) and escapes
every name it shows (Jinja2's autoescaping); the Markdown escapes with `md_report.escape`.
"""

from __future__ import annotations

import json

from calibrate import __version__, i18n
from calibrate.reports.html_report import environment
from calibrate.reports.md_report import alt_test_lines, escape
from calibrate.reports.summary import alt_test_context, golden_citation

FORMATS = ("json", "md", "html")


def render_alt_test_json(result: dict) -> str:
    return json.dumps(result, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def render_alt_test_markdown(result: dict) -> str:
    scope = f", split {escape(result['split'])}" if result.get("split") else ""
    scope += f", {escape(golden_citation(result))}" if result.get("golden") else ""
    head = [f"## Alternative Annotator Test: {escape(result['judge'])} on {escape(result['task'])} "
            f"({escape(result['dataset'])}{scope})", ""]
    method = (f"Leave-one-annotator-out (Calderon, Reichart & Dror, ACL 2025): ε = {result['epsilon']:g}, "
              f"α = {result['alpha']:g} (Benjamini–Yekutieli), {escape(result['scoring'])} scoring; "
              f"{result.get('n_skipped', 0)} annotator(s) with too few items not tested. calibrate {__version__}.")
    return "\n".join([*head, *alt_test_lines(result), method]) + "\n"


def render_alt_test_html(result: dict) -> str:
    return environment().get_template("reports/alt_test.html").render(result=result, body=alt_test_context(result), version=__version__)


def render_alt_test(result: dict, fmt: str, locale: str | None = None) -> str:
    """Return `calibrate alt-test`'s result rendered in `fmt` (json, md or html)."""
    renderers = {"json": render_alt_test_json, "md": render_alt_test_markdown, "html": render_alt_test_html}
    if fmt not in renderers:
        raise ValueError(f"unknown alt-test format {fmt!r} (formats: {', '.join(FORMATS)})")
    with i18n.rendering(fmt, locale):
        return renderers[fmt](result)
