"""A sample's steps (an agent's trajectory), validated: the `steps` field of the samples format.

Pure (no database: the standard library, calibrate.bounds and the field names of models): `check_steps` takes the field's value as
parsed from the file (or as the traces mapping builds it) and returns the steps in canonical
form, the form that is hashed, stored (models.Step) and exported, or raises `StepsInvalid`
naming the field (`steps[3].tool.name`) and why. One problem is enough to refuse the record.

A step is {id, parent, kind, name, input, output, status, started_at, duration_ms, tool {name,
arguments, result}, turn}; only `id` and `kind` are required. The list is in start order (depth
first among steps started together): a step's `started_at` is never before the previous step's,
and its `parent` is the id of an earlier step. What is too long is cut, not refused, and counted
(calibrate.bounds: MAX_STEPS, MAX_STEP_TEXT, MAX_STEP_NAME): a trajectory past MAX_STEPS keeps its
first steps (the rest are not read); a text past its bound keeps its beginning and ends in "…";
tool arguments or a result whose JSON text is past the bound become that text, cut. docs/formats.md,
"Steps".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from calibrate.bounds import MAX_STEP_NAME, MAX_STEP_TEXT, MAX_STEPS, started_at_problem
from calibrate.ingest.fields import kind_of
from calibrate.models import STEP_KINDS, STEP_STATUSES

FIELD = "steps"
MAX_STEP_ID_CHARS = 200  # models.Step.external_id
MAX_TOOL_NAME_CHARS = 200  # models.Step.tool_name
STEP_KEYS = ("id", "parent", "kind", "name", "input", "output", "status", "started_at", "duration_ms", "tool", "turn")
TOOL_KEYS = ("name", "arguments", "result")
CUT = "…"  # the last character of a text that was cut


class StepsInvalid(ValueError):
    """A `steps` value that cannot be taken: `field` names where (`steps[2].kind`), the message why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass
class CheckedSteps:
    """A trajectory in canonical form, and what its bounds cut."""

    steps: list[dict[str, Any]]
    steps_cut: int = 0  # steps past MAX_STEPS, left out
    texts_cut: int = 0  # names, inputs, outputs, tool arguments and results cut to their bound


def check_steps(value: Any) -> CheckedSteps:
    """Return the steps of a `steps` value in canonical form, or raise StepsInvalid (field, why)."""
    if not isinstance(value, list):
        raise StepsInvalid(FIELD, f"must be a list of step objects, found {kind_of(value)}")
    out = CheckedSteps([], steps_cut=max(0, len(value) - MAX_STEPS))
    seen: dict[str, int] = {}
    previous_start: datetime | None = None
    for index, item in enumerate(value[:MAX_STEPS]):
        step, start = _step(item, index, seen, out)
        if start is not None and previous_start is not None and start < previous_start:
            raise StepsInvalid(f"{FIELD}[{index}].started_at", f"is before step {index - 1}'s: steps are listed in "
                               "start order (depth first among steps started together)")
        previous_start = start if start is not None else previous_start
        seen[step["id"]] = index
        out.steps.append(step)
    return out


def _step(item: Any, index: int, seen: dict[str, int], out: CheckedSteps) -> tuple[dict[str, Any], datetime | None]:
    where = f"{FIELD}[{index}]"
    if not isinstance(item, dict):
        raise StepsInvalid(where, f"must be a step object {{id, kind, …}}, found {kind_of(item)}")
    extra = sorted(set(item) - set(STEP_KEYS))
    if extra:
        raise StepsInvalid(f"{where}.{extra[0]}", f"unknown key (keys: {', '.join(STEP_KEYS)})")
    step_id = _step_id(item.get("id"), f"{where}.id", required=True)
    if step_id in seen:
        raise StepsInvalid(f"{where}.id", f"{step_id!r} is also step {seen[step_id]}'s id: ids are unique within a sample")
    parent = _step_id(item.get("parent"), f"{where}.parent", required=False)
    if parent is not None and parent not in seen:
        raise StepsInvalid(f"{where}.parent", f"{parent!r} is not the id of an earlier step (a parent starts before its "
                           "children and is listed before them)")
    start, started_at = _started_at(item.get("started_at"), f"{where}.started_at")
    step = {
        "id": step_id,
        "parent": parent,
        "kind": _choice(item.get("kind"), f"{where}.kind", STEP_KINDS, default=None),
        "name": _text(item.get("name"), f"{where}.name", MAX_STEP_NAME, out) or "",
        "input": _text(item.get("input"), f"{where}.input", MAX_STEP_TEXT, out),
        "output": _text(item.get("output"), f"{where}.output", MAX_STEP_TEXT, out),
        "status": _choice(item.get("status"), f"{where}.status", STEP_STATUSES, default="ok"),
        "started_at": started_at,
        "duration_ms": _duration(item.get("duration_ms"), f"{where}.duration_ms"),
        "tool": _tool(item.get("tool"), f"{where}.tool", out),
        "turn": _turn(item.get("turn"), f"{where}.turn"),
    }
    return step, start


def _step_id(value: Any, field: str, *, required: bool) -> str | None:
    if value is None:
        if required:
            raise StepsInvalid(field, "is missing (a string or an integer, unique within the sample)")
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise StepsInvalid(field, f"must be a string or an integer, found {kind_of(value)}")
    if not value.strip():
        raise StepsInvalid(field, "must not be empty")
    if len(value) > MAX_STEP_ID_CHARS:
        raise StepsInvalid(field, f"{len(value):,} characters, the limit is {MAX_STEP_ID_CHARS}")
    _encodable(value, field)
    return value


def _choice(value: Any, field: str, choices: tuple[str, ...], *, default: str | None) -> str:
    if value is None:
        if default is None:
            raise StepsInvalid(field, f"is missing (one of {', '.join(choices)})")
        return default
    if not isinstance(value, str) or value.strip().lower() not in choices:
        shown = repr(value[:40]) if isinstance(value, str) else kind_of(value)
        raise StepsInvalid(field, f"must be one of {', '.join(choices)}, found {shown}")
    return value.strip().lower()


def _text(value: Any, field: str, limit: int, out: CheckedSteps) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise StepsInvalid(field, f"must be a string or null, found {kind_of(value)}")
    _encodable(value, field)
    return _cut(value, limit, out)


def _cut(text: str, limit: int, out: CheckedSteps) -> str:
    if len(text) <= limit:
        return text
    out.texts_cut += 1
    return text[: limit - len(CUT)] + CUT


def _started_at(value: Any, field: str) -> tuple[datetime | None, str | None]:
    """Return the start as a datetime in UTC and in its canonical text (ISO 8601, microseconds, Z)."""
    if value is None:
        return None, None
    problem = started_at_problem(value)
    when = None
    if problem is None:
        try:
            when = datetime.fromisoformat(value.strip())
        except ValueError:
            problem = f"must be an ISO 8601 time such as 2025-11-24T16:00:00.250Z, found {value[:40]!r}"
    if problem is not None or when is None:
        raise StepsInvalid(field, problem or "is not a time")
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return when, step_time(when)


def step_time(when: datetime) -> str:
    """Return a step's start in canonical text: UTC, microseconds, "Z" (2026-12-03T16:00:00.250000Z)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _duration(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise StepsInvalid(field, f"must be a number of milliseconds, 0 or more, found {value!r}"[:200])
    return float(value)


def _turn(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1_000_000:
        raise StepsInvalid(field, f"must be a whole number from 0 (the conversation's first turn), found {value!r}"[:200])
    return value


def _tool(value: Any, field: str, out: CheckedSteps) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise StepsInvalid(field, f"must be an object {{name, arguments, result}}, found {kind_of(value)}")
    extra = sorted(set(value) - set(TOOL_KEYS))
    if extra:
        raise StepsInvalid(f"{field}.{extra[0]}", f"unknown key (keys: {', '.join(TOOL_KEYS)})")
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        raise StepsInvalid(f"{field}.name", f"must be the tool's name, a string, found {kind_of(name)}")
    if len(name) > MAX_TOOL_NAME_CHARS:
        raise StepsInvalid(f"{field}.name", f"{len(name):,} characters, the limit is {MAX_TOOL_NAME_CHARS}")
    _encodable(name, f"{field}.name")
    return {"name": name, "arguments": _json_value(value.get("arguments"), f"{field}.arguments", out),
            "result": _json_value(value.get("result"), f"{field}.result", out)}


def _json_value(value: Any, field: str, out: CheckedSteps) -> Any:
    """Return a tool's arguments or result: any JSON value; one whose JSON text is past MAX_STEP_TEXT becomes that text, cut."""
    if value is None:
        return None
    if isinstance(value, str):
        _encodable(value, field)
        return _cut(value, MAX_STEP_TEXT, out)
    if isinstance(value, float) and not math.isfinite(value):
        raise StepsInvalid(field, "must be a JSON value (NaN and infinities are not)")
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):
        raise StepsInvalid(field, "must be a JSON value (NaN and infinities are not)") from None
    _encodable(text, field)
    return value if len(text) <= MAX_STEP_TEXT else _cut(text, MAX_STEP_TEXT, out)


def _encodable(text: str, field: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise StepsInvalid(field, "contains an unpaired surrogate escape (\\ud800–\\udfff), which is not text") from None



# The columns of models.Step a stored step fills, after (id, sample_id): what `step_rows` gives and `stored_step` reads.
STEP_COLUMNS = ("index", "parent", "external_id", "kind", "name", "input", "output", "status", "started_at", "duration_ms",
                "tool_name", "tool_arguments", "tool_result", "turn")


def step_rows(steps: list[dict[str, Any]]) -> list[tuple]:
    """Return canonical steps as rows in STEP_COLUMNS order: the parent as its index, the start as a datetime in UTC."""
    index = {step["id"]: n for n, step in enumerate(steps)}
    out = []
    for n, step in enumerate(steps):
        tool = step.get("tool") or {}
        started = step.get("started_at")
        out.append((n, index.get(step.get("parent")), step["id"], step["kind"], step.get("name") or "", step.get("input"),
                    step.get("output"), step.get("status") or "ok",
                    None if started is None else datetime.fromisoformat(started).astimezone(UTC), step.get("duration_ms"),
                    tool.get("name"), tool.get("arguments"), tool.get("result"), step.get("turn")))
    return out


def stored_steps(rows: list[Any]) -> list[dict[str, Any]]:
    """Return a sample's stored steps (rows with STEP_COLUMNS' attributes, in index order) in canonical form: what the
    export writes and an --update compares (`check_steps(stored_steps(rows)).steps == stored_steps(rows)`)."""
    ids = {row.index: row.external_id for row in rows}
    out = []
    for row in rows:
        started = row.started_at
        if started is not None and started.tzinfo is None:
            started = started.replace(tzinfo=UTC)  # SQLite gives naive datetimes back: they were stored in UTC
        out.append({"id": row.external_id, "parent": ids.get(row.parent), "kind": row.kind, "name": row.name,
                    "input": row.input, "output": row.output, "status": row.status,
                    "started_at": None if started is None else step_time(started), "duration_ms": row.duration_ms,
                    "tool": None if row.tool_name is None else {"name": row.tool_name, "arguments": row.tool_arguments,
                                                                "result": row.tool_result},
                    "turn": row.turn})
    return out
