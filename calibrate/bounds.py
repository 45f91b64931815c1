"""Bounds on what production data may say about itself: its inclusion probability and when it started.

A low floor (the standard library only), so the imports that refuse a value and the estimates
that read it (calibration/) share one rule without importing each other:

    MIN_INCLUSION_PROB      the smallest `metadata.inclusion_prob` (and sampling rate) taken: 1e-6.
                            A weight of 1/π past 10^6 lets one sample outweigh a million others;
                            1e-300 flipped a production gate and put NaN in the monitor's JSON.
    inclusion_prob_problem  why a value is not an inclusion probability in [MIN_INCLUSION_PROB, 1]
    EARLIEST, LATEST        start times are taken in [1970-01-01, 2200-01-01) UTC: before is not
                            a production trace's, after is past what the windows can hold
                            (pandas' nanosecond timestamps end in 2262; year 318857 stopped settling)
    start_ns_problem        why an OTLP start time (Unix nanoseconds; 0 is "unset") is out of range
    started_at_problem      why a `metadata.started_at` is not an ISO 8601 time in range
    metadata_problems       both, for a sample's metadata (the samples import files each under its field)
    MAX_STEPS               steps kept of one sample's trajectory: 500 (the rest are left out, counted)
    MAX_STEP_TEXT           characters kept of each text of a step (its input, output, tool arguments and
                            result as JSON text): 10,000 (the rest is cut, counted); a trajectory of 500
                            steps then holds at most 20 million characters
    MAX_STEP_NAME           characters kept of a step's name: 500 (cut, counted with the texts)

docs/formats.md ("Samples" metadata, "Traces") and docs/security.md list them.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

MIN_INCLUSION_PROB = 1e-6
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)  # excluded
LATEST_NS = int((LATEST - EARLIEST).total_seconds()) * 1_000_000_000  # OTLP start times are nanoseconds since EARLIEST
MAX_STEPS = 500
MAX_STEP_TEXT = 10_000
MAX_STEP_NAME = 500
ISO_DATE = re.compile(r"\s*([+-]?\d{4,6})-\d{1,2}-\d{1,2}(?:[T ]|\s*$)")  # a date's year, however the time is written


def inclusion_prob_problem(value: Any) -> str | None:
    """Return why `value` is not an inclusion probability (a number in [MIN_INCLUSION_PROB, 1]), or None when it is."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be a number in [{MIN_INCLUSION_PROB:g}, 1], found {_shown(value)}"
    if not math.isfinite(value) or not MIN_INCLUSION_PROB <= value <= 1:
        return f"must be a number in [{MIN_INCLUSION_PROB:g}, 1] (a weight of 1/π past 10^6 is refused), found {value!r}"
    return None


def start_ns_problem(start_ns: int) -> str | None:
    """Return why an OTLP start time in Unix nanoseconds is out of range, or None (0 means unset and is taken)."""
    if start_ns == 0 or 0 < start_ns < LATEST_NS:
        return None
    return (f"{start_ns} is out of range: a start time is Unix nanoseconds from {EARLIEST:%Y-%m-%d} to before "
            f"{LATEST:%Y-%m-%d} (0 when unset)")[:300]


def started_at_problem(value: Any) -> str | None:
    """Return why a `metadata.started_at` is not an ISO 8601 time from EARLIEST to before LATEST, or None when it is.

    A time without a zone is taken as UTC (as the estimates read it). The estimates' reader (pandas'
    ISO 8601 parser) also takes forms the standard library does not, such as a one-digit hour
    (`2026-11-23T9:00:00Z`): for those the date's year must be in range.
    """
    if not isinstance(value, str) or len(value) > 64:
        return f"must be an ISO 8601 time such as 2025-11-24T16:00:00Z, found {_shown(value)}"
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        date = ISO_DATE.match(value)
        if date is None:
            return f"must be an ISO 8601 time such as 2025-11-24T16:00:00Z, found {_shown(value)}"
        inside = EARLIEST.year <= int(date.group(1)) < LATEST.year
    else:
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        try:
            inside = EARLIEST <= when < LATEST
        except OverflowError:  # an offset that moves year 1 or 9999 past what datetime holds
            inside = False
    if not inside:
        return f"{value!r} is out of range: from {EARLIEST:%Y-%m-%d} to before {LATEST:%Y-%m-%d}"
    return None


def metadata_problems(metadata: dict[str, Any]) -> list[tuple[str, str]]:
    """Return (field, why) for each of a sample's `metadata.inclusion_prob` and `metadata.started_at` that is given and
    out of bounds: the two fields the production estimates read (a weight they can trust, a time their windows hold)."""
    out = []
    for key, problem in (("inclusion_prob", inclusion_prob_problem), ("started_at", started_at_problem)):
        found = problem(metadata[key]) if key in metadata else None
        if found is not None:
            out.append((f"metadata.{key}", found))
    return out


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:40] + "…")
    return "null" if value is None else type(value).__name__ if not isinstance(value, (int, float)) else repr(value)
