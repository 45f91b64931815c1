"""The CSV report: one row per target per task, every item behind the report's numbers.

Columns: task, sample_id, target, claim, context, step, group, one `human_<annotator>` column per
annotator seen in any task (sorted), gold, gold_source, judge, judge_status, agree, excluded.
Targets are named as the user names them, never by database id: `target` is `SAMPLE_ID`,
`SAMPLE_ID/claim/N`, `SAMPLE_ID/context/R` or `SAMPLE_ID/step/S` (0-based, as `compare` names flips), and
`sample_id`, `claim`, `context`, `step` are the labels import's own fields.

Spreadsheet formula injection (OWASP "CSV Injection"): a cell that starts with `=`, `+`,
`-`, `@`, a tab or a carriage return is prefixed with a single quote so that a spreadsheet
shows it as text instead of evaluating it. A cell that is purely a decimal number
(`^-?\\d+(\\.\\d+)?$`, such as a score of "-1" or "-0.5") is left alone: a spreadsheet reads
it as that number, which is what it is, and no formula can hide in it.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any

FIXED_BEFORE = ("task", "sample_id", "target", "claim", "context", "step", "group")
FIXED_AFTER = ("gold", "gold_source", "judge", "judge_status", "agree", "excluded")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
PLAIN_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def neutralise(value: Any) -> str:
    """Return a cell's text, prefixed with ' when a spreadsheet would read it as a formula."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if text.startswith(FORMULA_STARTS) and not PLAIN_NUMBER.match(text):
        return "'" + text
    return text


def annotators(report: Any) -> list[str]:
    """Return every annotator with a label in any task of the report, sorted."""
    return sorted({name for rows in report.rows.values() for row in rows for name in row.humans})


def header(report: Any) -> list[str]:
    """Return the CSV's column names."""
    return [*FIXED_BEFORE, *(f"human_{name}" for name in annotators(report)), *FIXED_AFTER]


def readable_target(row: Any) -> str:
    """Return a row's target as the user names it: SAMPLE_ID, SAMPLE_ID/claim/N, /context/R or /step/S (0-based)."""
    if row.claim is not None:
        return f"{row.sample_id}/claim/{row.claim}"
    if row.context is not None:
        return f"{row.sample_id}/context/{row.context}"
    if row.step is not None:
        return f"{row.sample_id}/step/{row.step}"
    return row.sample_id


def render_csv(report: Any) -> str:
    """Return the per-item rows of the report as CSV (RFC 4180: comma, double quotes, CRLF)."""
    names = annotators(report)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([neutralise(c) for c in header(report)])
    for task, rows in report.rows.items():
        for row in rows:
            cells = [task, row.sample_id, readable_target(row), row.claim, row.context, row.step, row.group,
                     *(row.humans.get(name) for name in names),
                     row.gold, row.gold_source, row.judge, row.judge_status, row.agree, row.excluded]
            writer.writerow([neutralise(c) for c in cells])
    return buffer.getvalue()
