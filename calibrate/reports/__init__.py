"""Render a calibration `Report` as JSON, HTML, Markdown or CSV.

Every format renders the same `Report` object (built once by
`calibrate.calibration.build_report`), so they never disagree:

- ``json``: `report.data` as it is, the contract of docs/report.md (no reshaping).
- ``html``: one self-contained printable page (inline CSS and SVG charts, no JavaScript).
- ``md``: a compact summary for pull requests.
- ``csv``: one row per target per task, with formula injection neutralised.

This package takes a `Report` and never imports Flask: the CLI renders without a request.
`ab_report` renders an A/B comparison (`calibrate.calibration.ab.ABResult`) the same way, as JSON, HTML
or Markdown.
"""

from __future__ import annotations

from typing import Any

from calibrate import i18n
from calibrate.reports.csv_report import render_csv
from calibrate.reports.html_report import render_html
from calibrate.reports.json_report import render_json
from calibrate.reports.md_report import render_markdown

FORMATS = ("json", "html", "md", "csv")

_RENDERERS = {"json": render_json, "html": render_html, "md": render_markdown, "csv": render_csv}


def render(report: Any, fmt: str, locale: str | None = None) -> str:
    """Return the report rendered in `fmt` (one of FORMATS); HTML and Markdown in `locale` (default: the current
    locale, English outside the web app), JSON and CSV always locale-independent."""
    try:
        renderer = _RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown report format {fmt!r} (formats: {', '.join(FORMATS)})") from None
    with i18n.rendering(fmt, locale):
        return renderer(report)


__all__ = ["FORMATS", "render", "render_csv", "render_html", "render_json", "render_markdown"]
