"""A task's values: the one stored form of every label, score and claim list, checked against the task.

Every label and every verdict is validated against its task by `canonical_value`, which returns
the value in the one text form it is stored in (so "Supported", " supported" and "supported" are
one label, and 4, "4" and 4.0 are one score); a pairwise value must also name one of the
sample's own responses (`pairwise_value`); an extraction's value is a claim list
(`canonical_claims`). A label of the task's *negative* label (`incorrect`: `negative_label`) may
name what was wrong, one of the task's error types (`canonical_error_type`). Task records (adding, editing, removing tasks, their words per language)
are calibrate/tasks.py.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from calibrate import lazy
from calibrate.errors import TaskError
from calibrate.reasons import Reason

if TYPE_CHECKING:
    from calibrate.models import Task

# Loaded on first use: `describe_values` needs none of it, and `calibrate task list` reads tasks without the ORM.
models = lazy.module("calibrate.models")

# A number value of a task without a scale: at most this magnitude, so that the statistics'
# squares and sums over millions of values stay far from double precision's overflow (1.8e308).
MAX_MAGNITUDE = 1e12
MAX_CLAIMS = 200  # claims in one extraction, at most
MAX_CLAIM_CHARS = 2000  # characters of one extracted claim, at most
# The label that marks a target as an error (step_correctness's): the first wrong step of a trajectory
# (calibration/localisation.py) and the label the workbench asks an error type for (docs/annotation.md).
NEGATIVE_LABEL = "incorrect"


def is_extraction(task: Task) -> bool:
    """Return whether a task is an extraction (its value a claim list, never calibrated)."""
    return task.kind == models.EXTRACTION


def is_rewrite(task: Task) -> bool:
    """Return whether a task is the instruction rewrite (its value a judge's instructions; never run over a dataset)."""
    return task.kind == models.REWRITE


def has_labels(task: Task) -> bool:
    """Whether the task's values are labels (categorical and pairwise tasks), not numbers."""
    return task.kind in models.LABEL_KINDS


def describe_values(task: Task) -> str:
    """Return a task's values as `task list` shows them: its labels, its scale, or "any"."""
    if task.labels:
        return ",".join(task.labels)
    if task.scale_min is not None:
        return f"{task.scale_min:g}-{task.scale_max:g}"
    return "any"


def format_number(x: float) -> str:
    """Return the canonical text of a number: "4" for 4.0, "3.5" for 3.5."""
    if float(x).is_integer():
        return str(int(x))
    return repr(float(x))


def canonical_value(task: Task, value: object) -> str:
    """Return `value` in its stored form for `task`, or raise TaskError saying why it does not fit."""
    if value is None:
        raise TaskError(Reason("value_missing"))
    if task.kind == models.EXTRACTION:
        return canonical_claims(value)
    if isinstance(value, bool):
        raise TaskError(Reason("value_needs_label" if task.kind in models.LABEL_KINDS else "value_needs_number", value=value))
    if task.kind in models.LABEL_KINDS:
        if isinstance(value, (int, float)):
            text = format_number(value) if math.isfinite(value) else str(value)
        elif isinstance(value, str):
            text = value.strip()
        else:
            raise TaskError(Reason("value_type_not_label", listed=', '.join(task.labels or []), name=type(value).__name__))
        labels = task.labels or []
        if text in labels:
            return text
        folded = [label for label in labels if label.casefold() == text.casefold()]
        if len(folded) == 1:
            return folded[0]
        raise TaskError(Reason("value_not_a_label", value=short_text(text), task=task.name, labels=", ".join(labels)))
    number = _as_number(value)
    if number is None:
        raise TaskError(Reason("value_not_a_number", task=task.name, value=short_text(str(value))))
    low, high = task.scale_min, task.scale_max
    if (low is not None and number < low) or (high is not None and number > high):
        raise TaskError(Reason("value_outside_scale", value=short_text(format_number(number), 24), task=task.name,
                                   low=format_number(low), high=format_number(high)))
    if abs(number) > MAX_MAGNITUDE:  # a task without a scale: squares and sums must stay finite (docs/security.md)
        raise TaskError(Reason("value_beyond_magnitude", value=number, task=task.name, limit=MAX_MAGNITUDE))
    return format_number(number)


def negative_label(task: Task) -> str | None:
    """Return the label that marks a target as an error (None: the task has none)."""
    return NEGATIVE_LABEL if NEGATIVE_LABEL in (task.labels or []) else None


def canonical_error_type(task: Task, value: str, error_type: str | None) -> str | None:
    """Return the error type a label of `value` stores (None: none given), or raise TaskError saying why it cannot.

    Empty (or None) is none given. An error type must be one of the task's (Task.error_types) and is
    given only with the task's negative label: a label that says nothing was wrong names no error.
    """
    given = (error_type or "").strip()
    if not given:
        return None
    types = task.error_types or []
    if not types:
        raise TaskError(Reason("error_type_no_types", task=task.name))
    if given not in types:
        raise TaskError(Reason("error_type_unknown", error_type=short_text(given), task=task.name, listed=", ".join(types)))
    negative = negative_label(task)
    if value != negative:
        raise TaskError(Reason("error_type_not_negative", value=short_text(value), negative=negative or NEGATIVE_LABEL))
    return given


def canonical_claims(value: object) -> str:
    """Return a claim list in its stored form (a JSON list of stripped, non-empty strings), or raise TaskError.

    `value` is a list of strings or the JSON text of one; an empty list, a claim that is not a
    string or is blank, more than MAX_CLAIMS claims or a claim longer than MAX_CLAIM_CHARS is refused.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise TaskError(Reason("extraction_not_json")) from None
    if not isinstance(value, list):
        raise TaskError(Reason("extraction_not_list", name=type(value).__name__))
    if not value:
        raise TaskError(Reason("extraction_empty"))
    if len(value) > MAX_CLAIMS:
        raise TaskError(Reason("extraction_too_many", count=len(value), max_claims=MAX_CLAIMS))
    claims = []
    for index, claim in enumerate(value):
        if not isinstance(claim, str) or not claim.strip():
            raise TaskError(Reason("extraction_claim_empty", index=index, value=short_text(json.dumps(claim, ensure_ascii=False))))
        if len(claim) > MAX_CLAIM_CHARS:
            raise TaskError(Reason("extraction_claim_too_long", index=index, count=len(claim), max_claim_chars=MAX_CLAIM_CHARS))
        claims.append(claim.strip())
    return json.dumps(claims, ensure_ascii=False)


def decimal_number(raw: str) -> float:
    """Return a number typed in either notation: "0.75", or "0,75" as a reader whose language writes a decimal comma
    types it (one comma and no point: a lone comma is a decimal sign, not a thousands separator). Raise ValueError
    otherwise. The one rule of every form and import that reads a typed number."""
    text = raw.strip()
    if text.count(",") == 1 and "." not in text:
        text = text.replace(",", ".")
    return float(text)


def _as_number(value: object) -> float | None:
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = decimal_number(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def pairwise_value(task: Task, value: object, response_ids: list[str] | tuple[str, ...] | None) -> str:
    """Return a pairwise task's value in stored form: one of the sample's response ids, or tie if the task has it.

    Raise TaskError naming the sample's responses when the value is neither (a sample with no
    responses cannot take a pairwise value at all).
    """
    canonical = canonical_value(task, value)
    ids = list(response_ids or [])
    if not ids:
        raise TaskError(Reason("pairwise_no_responses", task=task.name))
    if canonical == models.TIE or canonical in ids:
        return canonical
    folded = [i for i in ids if i.casefold() == canonical.casefold()]
    if len(folded) == 1:
        return folded[0]
    choices = ", ".join(ids) + (f"; or {models.TIE}" if models.TIE in (task.labels or []) else "")
    raise TaskError(Reason("value_not_a_response", canonical=short_text(canonical), choices=choices))


def short_text(text: str, limit: int = 60) -> str:
    """Return a text as a message quotes it, cut at `limit` characters."""
    return text if len(text) <= limit else text[:limit] + "…"
