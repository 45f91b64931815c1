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

Each renderer's module loads when its format is first rendered (calibrate/lazy.py): the HTML page
brings Jinja, its charts and the models (`targets`), which a JSON report does not use, and naming
any module of this package (`lazy.module("calibrate.reports.alt_test_report")`) imports this
`__init__` first, so it imports none of them.
"""

from __future__ import annotations

import sys
from typing import Any

from calibrate import i18n, lazy

FORMATS = ("json", "html", "md", "csv")

_RENDERERS = {"json": "render_json", "html": "render_html", "md": "render_markdown", "csv": "render_csv"}
_API = {"render_csv": "csv_report", "render_html": "html_report", "render_json": "json_report", "render_markdown": "md_report"}

__getattr__ = lazy.api_getattr(__name__, _API)


def render(report: Any, fmt: str, locale: str | None = None) -> str:
    """Return the report rendered in `fmt` (one of FORMATS); HTML and Markdown in `locale` (default: the current
    locale, English outside the web app), JSON and CSV always locale-independent."""
    if fmt not in _RENDERERS:
        raise ValueError(f"unknown report format {fmt!r} (formats: {', '.join(FORMATS)})")
    renderer = getattr(sys.modules[__name__], _RENDERERS[fmt])  # the format's module, imported now
    with i18n.rendering(fmt, locale):
        return renderer(report)


__all__ = ["FORMATS", "render", "render_csv", "render_html", "render_json", "render_markdown"]
