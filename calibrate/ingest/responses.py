"""The responses of a pairwise sample: read from `responses` or from `response_<id>` fields, checked.

Two spellings, one result (docs/formats.md, "Pairwise samples"):

- `responses`: a list of `{id, text, model?, metadata?}` objects (JSON text in a CSV cell);
- one field per response, as CSV columns are: `response_<id>` holds the text, with optional
  `response_<id>_model` and `response_<id>_metadata` (a JSON object). The id is the suffix
  verbatim (`response_a` → `a`, `response_A` → `A`, `response_1` → `1`); the responses come in
  the order of the fields (the header's columns).

A sample has two to `MAX_RESPONSES` responses; ids are 1–64 characters without surrounding
spaces, unique within the sample ignoring case (values are matched ignoring case), and never
`tie`, the value that prefers no response. A response's text must be given, and may be empty
(`""`): a system that answered nothing is a real candidate, and public pairwise sets have such
items, labelled by their annotators (PandaLM: 54 of 999). In a CSV cell an empty text cannot be
told from an absent response, so there it is absent. Every problem names the field as the file spells it:
`responses[1].id` or `response_b`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from calibrate.ingest.fields import RecordCheck, invalid, kind_of
from calibrate.models import MAX_RESPONSE_ID_CHARS, MAX_RESPONSES, TIE

FIELD = "responses"
PREFIX = "response_"
_COLUMN = re.compile(r"^response_(.+?)(?:_(model|metadata))?$")
_KEYS = frozenset({"id", "text", "model", "metadata"})
_SHAPE = "a list of {id, text, model?, metadata?} objects"
MAX_MODEL_CHARS = 200


def response_column(name: str) -> tuple[str, str] | None:
    """Return (response id, part) of a `response_<id>[_model|_metadata]` field name, part "text" for the text; else None."""
    if not name.startswith(PREFIX):
        return None
    match = _COLUMN.match(name)
    if match is None:
        return None
    return match.group(1), match.group(2) or "text"


def check_response_columns(columns: list[str]) -> list[tuple[str | None, str]]:
    """Return the problems of a header's response columns: a `_model`/`_metadata` column without its response."""
    texts = {parts[0] for name in columns if (parts := response_column(name)) and parts[1] == "text"}
    problems: list[tuple[str | None, str]] = []
    for name in columns:
        parts = response_column(name)
        if parts and parts[1] != "text" and parts[0] not in texts:
            problems.append((name, f"names the {parts[1]} of response {parts[0]!r}, but no column {PREFIX}{parts[0]} "
                                   "holds its text"))
    return problems


def has_response_fields(data: dict[str, Any]) -> bool:
    """Whether a record gives responses (either spelling)."""
    return FIELD in data or any(name.startswith(PREFIX) for name in data)


def responses_of(data: dict[str, Any], check: RecordCheck) -> list[dict[str, Any]] | None:
    """Take the record's responses out of `data` (so its other fields can be checked); return them, or None if it has none.

    Each response comes back as {"id", "text", "model", "metadata"} (model and metadata None
    when not given). Problems are filed on `check`; the result is then None too.
    """
    columns = [name for name in data if name.startswith(PREFIX) and response_column(name)]
    listed = FIELD in data
    if not listed and not columns:
        return None
    if listed and columns:
        check.bad(columns[0], f"give the responses either as '{FIELD}' or as {PREFIX}<id> fields, not both")
        for name in columns:
            data.pop(name)
        data.pop(FIELD)
        return None
    out = _from_list(data, check) if listed else _from_columns(data, columns, check)
    if out is None:
        return None
    if len(out) < 2:
        where = FIELD if listed else (columns[0] if columns else FIELD)
        check.bad(where, f"a sample with responses needs at least two, found {len(out)}")
        return None
    if len(out) > MAX_RESPONSES:
        check.bad(FIELD if listed else columns[0], f"{len(out)} responses, the limit is {MAX_RESPONSES} (one key each in the workbench)")
        return None
    return out


def _from_list(data: dict[str, Any], check: RecordCheck) -> list[dict[str, Any]] | None:
    value = check.structured(data, FIELD, _SHAPE)
    data.pop(FIELD)
    if invalid(value):
        return None
    if not isinstance(value, list):
        check.bad(FIELD, f"must be {_SHAPE}, found {kind_of(value)}")
        return None
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(value):
        where = f"{FIELD}[{index}]"
        if not isinstance(item, dict):
            check.bad(where, f"must be an object {{id, text, model?, metadata?}}, found {kind_of(item)}")
            return None
        extra = sorted(set(item) - _KEYS)
        if extra:
            check.bad(f"{where}.{extra[0]}", "unknown key (keys: id, text, model, metadata)")
            return None
        response_id = _id(item.get("id"), f"{where}.id", check, seen, index)
        text = _text(item.get("text"), f"{where}.text", check)
        model = _model(item.get("model"), f"{where}.model", check)
        metadata = _metadata(item.get("metadata"), f"{where}.metadata", check, cells=False)
        if not check.ok:
            return None
        out.append({"id": response_id, "text": text, "model": model, "metadata": metadata})
    return out


def _from_columns(data: dict[str, Any], columns: list[str], check: RecordCheck) -> list[dict[str, Any]] | None:
    parts: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    names: dict[str, str] = {}
    for name in columns:
        response_id, part = response_column(name)
        if part == "text":
            order.append(response_id)
            names[response_id] = name
        parts.setdefault(response_id, {})[part] = (name, data.pop(name))
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for index, response_id in enumerate(order):
        name = names[response_id]
        given = parts[response_id]
        checked_id = _id(response_id, name, check, seen, index, column=True)
        text = _text(given["text"][1], name, check)
        model = _model(given["model"][1], given["model"][0], check) if "model" in given else None
        metadata = (_metadata(given["metadata"][1], given["metadata"][0], check, cells=check.cells)
                    if "metadata" in given else None)
        if not check.ok:
            return None
        out.append({"id": checked_id, "text": text, "model": model, "metadata": metadata})
    for response_id, given in parts.items():
        if response_id not in names:
            field, _ = next(iter(given.values()))
            check.bad(field, f"names a part of response {response_id!r}, but the record has no {PREFIX}{response_id} "
                             "with its text")
            return None
    return out


def _id(value: object, field: str, check: RecordCheck, seen: dict[str, int], index: int, *,
        column: bool = False) -> str | None:
    if value is None:
        check.bad(field, "is missing: every response needs an id (A, B, 1, 2, a model name…)")
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        check.bad(field, f"must be a string or an integer, found {kind_of(value)}")
        return None
    what = f"response id {value!r}" if column else "the id"
    if not value or value.isspace():
        check.bad(field, "must not be empty")
        return None
    if value != value.strip():
        check.bad(field, f"{what} starts or ends with spaces")
        return None
    if len(value) > MAX_RESPONSE_ID_CHARS:
        check.bad(field, f"{what} is {len(value)} characters, the limit is {MAX_RESPONSE_ID_CHARS}")
        return None
    if value.casefold() == TIE:
        check.bad(field, f"{value!r} cannot be a response id: it is the value that prefers no response")
        return None
    folded = value.casefold()
    if folded in seen:
        check.bad(field, f"duplicate id {value!r}: response {seen[folded]} has it too (ids are compared ignoring case)")
        return None
    seen[folded] = index
    return value


def _text(value: object, field: str, check: RecordCheck) -> str | None:
    if value is None:
        check.bad(field, "the response's text is missing")
        return None
    if not isinstance(value, str):
        check.bad(field, f"the response's text must be a string, found {kind_of(value)}")
        return None
    return check.check_text(field, value, what="the response's text", empty_ok=True)


def _model(value: object, field: str, check: RecordCheck) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        check.bad(field, f"must be a string, found {kind_of(value)}")
        return None
    return check.check_text(field, value, required=False, max_chars=MAX_MODEL_CHARS)


def _metadata(value: object, field: str, check: RecordCheck, *, cells: bool) -> dict[str, Any] | None:
    if value is None:
        return None
    if cells and isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            check.bad(field, f"must be an object written as JSON in the cell ({exc.msg})")
            return None
    if not isinstance(value, dict):
        check.bad(field, f"must be an object ({{...}}), found {kind_of(value)}")
        return None
    return value
