"""JSON text parsed with a bound on nesting: imports and judges' answers read through the same function.

json.loads raises RecursionError at about 1,000 levels and accepts anything less, which later
code walking the value could not handle either; `load_json` refuses more than `MAX_NESTING`
levels (a record is level 1) with `NestingTooDeep`, naming the top-level field it is under.
It sits below every domain package (imports in ingest/, answers in judges/).
"""

from __future__ import annotations

import json
from typing import Any

MAX_NESTING = 64  # levels of lists and objects in one JSON value (docs/formats.md)


class NestingTooDeep(ValueError):
    """JSON nested deeper than the limit; `field` is the key of the top-level object it is under (None: unknown)."""

    def __init__(self, field: str | None, limit: int = MAX_NESTING) -> None:
        super().__init__(f"nesting deeper than {limit} levels")
        self.field = field


def load_json(text: str, *, limit: int = MAX_NESTING) -> Any:
    """Return `json.loads(text)`, raising NestingTooDeep for nesting deeper than `limit` levels.

    json.loads itself would raise RecursionError at about 1,000 levels and accept anything
    less, which later code walking the value could not handle either. JSONDecodeError is raised
    as by json.loads.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise NestingTooDeep(deep_field(text, limit), limit) from None
    if text.count("[") + text.count("{") > limit:  # else it cannot nest deeper: no walk
        check_nesting(value, limit)
    return value


def check_nesting(value: Any, limit: int = MAX_NESTING) -> None:
    """Raise NestingTooDeep if lists and objects nest deeper than `limit` levels in `value` (iteratively)."""
    stack: list[tuple[Any, int, str | None]] = [(value, 1, None)]
    while stack:
        item, depth, field = stack.pop()
        if isinstance(item, dict):
            inner = item.items()
        elif isinstance(item, list):
            inner = ((field, element) for element in item)
        else:
            continue
        if depth > limit:
            raise NestingTooDeep(field, limit)
        for key, element in inner:
            if isinstance(element, (dict, list)):
                stack.append((element, depth + 1, key if depth == 1 and isinstance(item, dict) else field))


def deep_field(text: str, limit: int) -> str | None:
    """Return the top-level key under which JSON `text` first nests deeper than `limit` (None if not in an object)."""
    depth, key, expect_key, i, n = 0, None, False, 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':
            end = i + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            if depth == 1 and expect_key:
                try:
                    key = json.loads(text[i:end + 1])
                except ValueError:
                    key = text[i + 1:end]
                expect_key = False
            i = end + 1
            continue
        if char in "[{":
            depth += 1
            if depth > limit:
                return key
            if depth == 1:
                expect_key = char == "{"
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 1:
            expect_key = text.lstrip()[:1] == "{"
        i += 1
    return key
