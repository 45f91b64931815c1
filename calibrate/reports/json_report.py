"""The JSON report: `report.data` exactly, the shape documented in docs/report.md."""

from __future__ import annotations

import json
from typing import Any


def render_json(report: Any) -> str:
    """Return the report's data as indented JSON (UTF-8 text kept as is; NaN is refused, never written)."""
    return json.dumps(report.data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
