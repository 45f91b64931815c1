"""Sampling upstream of calibrate: the probability a W3C `tracestate` says a span was kept with.

An OpenTelemetry Collector's `probabilistic_sampler` in `proportional` (or `equalizing`) mode, and
the SDKs' consistent probability samplers, write their effective sampling threshold into each span's
`tracestate`, under the OpenTelemetry entry `ot`: `ot=th:c` is a rejection threshold of 0xc followed
by zeros to 14 hex digits (56 bits), so the span was kept with probability 1 − th/2^56 = 25 %
(OpenTelemetry's "TraceState: Probability Sampling" and "TraceState Handling"). The randomness it
was compared with is `rv` (14 hex digits) when the entry has one, else the trace id's last 56 bits;
a kept span has randomness ≥ th, so one whose randomness is below its threshold carries a threshold
that cannot be true (the specification says to erase such a threshold).

A trace's upstream probability is its root span's (`trace_upstream`); spans that disagree with the
root are counted (`mixed`). No threshold, a malformed one and an impossible one all read as 1 (no
sampling we can account for) and are counted by kind, never refused: docs/formats.md, "Traces".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_ADJUSTED = 1 << 56  # 2^56: thresholds and randomness are 56-bit
TRACESTATE_MAX = 512  # a W3C tracestate header is at most 512 characters
TH = re.compile(r"[0-9a-fA-F]{1,14}")
RV = re.compile(r"[0-9a-fA-F]{14}")
# How a trace's upstream probability was read (the summary's `upstream` counts, docs/formats.md).
WITH_THRESHOLD, NO_THRESHOLD, INVALID, INCONSISTENT = "with_threshold", "no_threshold", "invalid_threshold", \
    "inconsistent_threshold"
MIXED = "mixed_thresholds"
UPSTREAM_WORDS = {WITH_THRESHOLD: "with a threshold", NO_THRESHOLD: "without one (probability 1)",
                  INVALID: "with a malformed one (probability 1)",
                  INCONSISTENT: "with one their randomness contradicts (probability 1)",
                  MIXED: "whose spans disagree (the root's used)"}


@dataclass(frozen=True)
class Upstream:
    """The probability a span was kept with upstream (1 when unknown) and how it was read (a kind above)."""

    probability: float
    kind: str
    threshold: int | None = None


def ot_fields(trace_state: str) -> dict[str, str] | None:
    """Return the sub-keys of the `ot` entry of a W3C tracestate ({} when it has none), or None when it is malformed."""
    if not trace_state.strip():
        return {}
    if len(trace_state) > TRACESTATE_MAX:
        return None
    ot = None
    for member in trace_state.split(","):
        if not member.strip():
            continue  # empty list members are allowed
        key, sep, value = member.strip().partition("=")
        if not sep:
            return None
        if key == "ot":
            if ot is not None:
                return None  # a key may appear once
            ot = value
    if ot is None:
        return {}
    fields: dict[str, str] = {}
    for item in ot.split(";"):
        key, sep, value = item.partition(":")
        if not sep or not key or key in fields:
            return None
        fields[key] = value
    return fields


def threshold_of(value: str) -> int | None:
    """Return the 56-bit rejection threshold of a `th` value (1 to 14 hex digits, right-padded with zeros), or None."""
    if not TH.fullmatch(value):
        return None
    return int(value.ljust(14, "0"), 16)


def upstream_of(trace_state: str, trace_id: str) -> Upstream:
    """Return the upstream sampling probability one span's tracestate says (1 with a kind when it says none)."""
    fields = ot_fields(trace_state)
    if fields is None:
        return Upstream(1.0, INVALID)
    if "th" not in fields:
        return Upstream(1.0, NO_THRESHOLD)
    threshold = threshold_of(fields["th"])
    if threshold is None:
        return Upstream(1.0, INVALID)
    if "rv" in fields:
        if not RV.fullmatch(fields["rv"]):
            return Upstream(1.0, INVALID)
        randomness = int(fields["rv"], 16)
    else:
        randomness = int(trace_id[-14:], 16)  # the trace id's last 56 bits (W3C Trace Context Level 2)
    if randomness < threshold:
        return Upstream(1.0, INCONSISTENT, threshold)  # a kept span with randomness below its threshold
    return Upstream((MAX_ADJUSTED - threshold) / MAX_ADJUSTED, WITH_THRESHOLD, threshold)


def trace_upstream(root_state: str, trace_id: str, others: list[str]) -> tuple[Upstream, bool]:
    """Return the root span's upstream reading and whether another span of the trace carries a different threshold."""
    root = upstream_of(root_state, trace_id)
    mixed = any(upstream_of(state, trace_id).threshold != root.threshold for state in set(others) if state != root_state)
    return root, mixed
