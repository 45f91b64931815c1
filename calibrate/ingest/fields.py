"""Field rules shared by the samples, labels and verdicts imports.

A `RecordCheck` validates the fields of one record and files every problem under the record's
line and the field's name as the file spells it (an alias keeps its own name). The same rules
apply to every format; CSV cells arrive as text, so `cells=True` lets numbers be written as
digits and lists or objects as JSON text in the cell.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from calibrate.ingest.problems import Problems, reject
from calibrate.text.json_values import NestingTooDeep, load_json

_INT_TEXT = re.compile(r"\s*[+-]?\d+(?:\.0*)?\s*")
MAX_ID_CHARS = 500  # Sample.external_id, Context.doc_id
# A dataset's name is in URLs (/datasets/NAME), file names people derive from it and messages:
# letters and digits of any script, then also `_`, `-`, `.` and single inner spaces; 1 to 100
# characters (docs/formats.md, "Dataset names"). No `/`, `\\`, quotes or `..` path tricks.
MAX_DATASET_NAME_CHARS = 100
DATASET_NAME = re.compile(r"[^\W_](?:[\w.\-]| (?! ))*(?<! )")


def check_dataset_name(name: str) -> str:
    """Return `name` if it is a valid dataset name, else raise the import's one-line refusal (field `dataset`)."""
    if not name or len(name) > MAX_DATASET_NAME_CHARS or not DATASET_NAME.fullmatch(name):
        shown = name if len(name) <= 60 else name[:57] + "..."
        raise reject(f"invalid dataset name {shown!r}: use 1 to {MAX_DATASET_NAME_CHARS} letters, digits, '_', '-', "
                     f"'.' and single spaces, starting with a letter or digit", field="dataset")
    return name


def kind_of(value: object) -> str:
    """Name the JSON type of a value for a message ("a number", "a list")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _bad_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def plain_text(value: object, limit: int) -> bool:
    """Whether a value is ordinary text within `limit` that needs no message (the fast path)."""
    return (type(value) is str and 0 < len(value) <= limit and not value.isspace()
            and (value.isascii() or not _bad_surrogate(value)))


def as_int(value: object, *, cells: bool) -> int | None:
    """Return an integer written as one (3, 3.0, or "3" in a CSV cell), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if cells and isinstance(value, str) and _INT_TEXT.fullmatch(value):
        return int(float(value))
    return None


class RecordCheck:
    """Validate the fields of one record; `ok` turns False at the first problem."""

    __slots__ = ("line", "cells", "problems", "limit", "names", "ok", "cuts")

    def __init__(self, line: int | None, *, cells: bool, problems: Problems, limit: int) -> None:
        self.line = line
        self.cells = cells
        self.problems = problems
        self.limit = limit
        self.names: dict[str, str] = {}  # canonical field -> name used in the file
        self.ok = True
        self.cuts: dict[str, int] = {}  # what a bound cut rather than refused (a trajectory's steps, docs/formats.md)

    def bad(self, field: str | None, message: str) -> None:
        """File a problem for `field` (named as in the file)."""
        self.ok = False
        self.problems.add(self.line, self.names.get(field, field) if field else None, message)

    # ---------------------------------------------------------------- shape of the record

    def aliases(self, data: dict[str, Any], aliases: dict[str, str]) -> None:
        """Move alias fields to their canonical names; both given is a problem."""
        if data.keys().isdisjoint(aliases):
            return
        for alias, name in aliases.items():
            if data.get(alias) is None:
                data.pop(alias, None)
                continue
            if data.get(name) is not None:
                self.bad(alias, f"both {name!r} and its alias {alias!r} are given: keep one")
                data.pop(alias)
                continue
            data[name] = data.pop(alias)
            self.names[name] = alias

    def unknown(self, data: dict[str, Any], known: frozenset[str], hint: str = "") -> None:
        """File a problem for each field that is not in `known` (a set or a dict's keys)."""
        if data.keys() <= known:
            return
        for name in data:
            if name not in known:
                self.bad(name, f"unknown field (fields: {', '.join(sorted(known))}){hint}")

    # ---------------------------------------------------------------- values

    def text(self, data: dict[str, Any], field: str, *, required: bool, max_chars: int | None = None,
             empty_ok: bool = False) -> str | None:
        """Return a string field; None if absent and optional (an empty optional one too)."""
        value = data.get(field)
        if value is None:
            if required:
                self.bad(field, "is missing")
            return None
        if not isinstance(value, str):
            self.bad(field, f"must be a string, found {kind_of(value)}")
            return None
        return self.check_text(field, value, required=required, max_chars=max_chars, empty_ok=empty_ok)

    def check_text(self, field: str, value: str, *, required: bool = True, max_chars: int | None = None,
                   empty_ok: bool = False, what: str = "") -> str | None:
        """Check a string's content: not blank (when required), not too long, encodable."""
        limit = self.limit if max_chars is None else max_chars
        if plain_text(value, limit):
            return value  # the common case, decided without building any message
        prefix = f"{what}: " if what else ""
        if not value or value.isspace():
            if empty_ok:
                return value
            if required:
                self.bad(field, f"{what} must not be empty" if what else "must not be empty")
            return None
        if len(value) > limit:
            self.bad(field, f"{prefix}{len(value):,} characters, the limit is {limit:,}")
            return None
        if _bad_surrogate(value):
            self.bad(field, f"{prefix}contains an unpaired surrogate escape (\\ud800–\\udfff), which is not text")
            return None
        return value

    def identifier(self, data: dict[str, Any], field: str) -> str | None:
        """Return a required id: a string, or an integer stored as its decimal text."""
        value = data.get(field)
        if value is None:
            self.bad(field, "is missing")
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str):
            self.bad(field, f"must be a string or an integer, found {kind_of(value)}")
            return None
        return self.check_text(field, value, max_chars=MAX_ID_CHARS)

    def integer(self, data: dict[str, Any], field: str, *, minimum: int | None = None,
                choices: tuple[int, ...] | None = None, what: str = "an integer") -> int | None:
        """Return an optional integer field (None if absent)."""
        value = data.get(field)
        if value is None:
            return None
        number = as_int(value, cells=self.cells)
        if number is None:
            self.bad(field, f"must be {what}, found {kind_of(value) if not self.cells else repr(value)}")
            return None
        if choices is not None and number not in choices:
            self.bad(field, f"must be one of {', '.join(str(c) for c in choices)}, found {number}")
            return None
        if minimum is not None and number < minimum:
            self.bad(field, f"must be {what}, found {number}")
            return None
        return number

    def number(self, data: dict[str, Any], field: str) -> float | None:
        """Return an optional non-negative number (None if absent)."""
        value = data.get(field)
        if value is None:
            return None
        if self.cells and isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                self.bad(field, f"must be a number, found {value!r}")
                return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            self.bad(field, f"must be a number of 0 or more, found {value!r}")
            return None
        return float(value)

    def structured(self, data: dict[str, Any], field: str, expected: str) -> Any:
        """Return a list/object field; in a CSV cell it is JSON text, decoded here."""
        value = data.get(field)
        if self.cells and isinstance(value, str):
            try:
                value = load_json(value)
            except NestingTooDeep as exc:
                self.bad(field, f"{exc} in the cell's JSON")
                return _INVALID
            except json.JSONDecodeError as exc:
                self.bad(field, f"must be {expected} written as JSON in the cell ({exc.msg})")
                return _INVALID
        return value

    def id_list(self, data: dict[str, Any], field: str) -> list[str] | None:
        """Return an optional list of ids (strings or integers, stored as strings)."""
        value = self.structured(data, field, "a list of strings")
        if value is None or value is _INVALID:
            return None
        if not isinstance(value, list):
            self.bad(field, f"must be a list of strings, found {kind_of(value)}")
            return None
        out = []
        for position, item in enumerate(value):
            if isinstance(item, int) and not isinstance(item, bool):
                item = str(item)
            elif not isinstance(item, str):
                self.bad(field, f"must be a list of strings; item {position} is {kind_of(item)}")
                return None
            elif self.check_text(field, item, max_chars=MAX_ID_CHARS, what=f"item {position}") is None:
                return None
            out.append(item)
        return out


_INVALID = object()


def invalid(value: object) -> bool:
    """Return whether `RecordCheck.structured` reported the value as bad JSON text."""
    return value is _INVALID
