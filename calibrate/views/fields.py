"""Integers from URLs and forms, bounded so that none reaches the database too large to store.

SQLite (and PostgreSQL's bigint) stores integers up to 2⁶³−1; a larger one in a query is an
OverflowError, which was a 500 on seven routes (`/runs/99999999999999999999999`). So:

- every `<int:…>` of every route is `BoundedInt` (registered once, as the `int` converter):
  a number beyond `models.MAX_ID` matches no route, a 404 like any other id that does not exist;
- every integer a form or a query string carries is read with `int_field`, which answers
  400 naming the field (`BadField`) for anything that is not a whole number in its range: a
  page gets the error page, a script (htmx, the workbench) the message as text with the
  field in `X-Invalid-Field`, so it does not take the 400 for a stale CSRF token and reload.

Integers inside other values (a target key `claim:ID`) are bounded where they are parsed
(`models.parse_target_key`).
"""

from __future__ import annotations

from collections.abc import Mapping

from flask import Flask, make_response, render_template
from werkzeug.exceptions import BadRequest
from werkzeug.routing import IntegerConverter

from calibrate.errors import TaskError
from calibrate.models import MAX_ID
from calibrate.reasons import Reason
from calibrate.reports.summary import reason_text
from calibrate.task_scopes import check_task_named_on_dataset
from calibrate.views.auth import is_script_request

# A page number of a paged list: far beyond any list, and page × size stays a storable offset.
MAX_PAGE = 10**9


class BoundedInt(IntegerConverter):
    """werkzeug's `int` converter with an upper bound of MAX_ID (beyond it: no route, 404)."""

    def __init__(self, map, fixed_digits: int = 0, min: int | None = None, max: int | None = None,
                 signed: bool = False) -> None:
        bound = MAX_ID if max is None or max > MAX_ID else max
        super().__init__(map, fixed_digits=fixed_digits, min=min, max=bound, signed=signed)


class BadField(BadRequest):
    """A form or query field that is not what it must be (400, naming the field).

    Raised with a `Reason`, the description is its English sentence and the answer words it in the reader's
    language; a string is a message already worded for the reader (a refusal's `refusal_text`).
    """

    def __init__(self, field: str, message: Reason | str) -> None:
        super().__init__(description=str(message))
        self.field = field
        self.reason = message if isinstance(message, Reason) else None

    def text(self) -> str:
        """Return the message in the reader's language."""
        return reason_text({"note": self.description, "reason": self.reason.to_dict() if self.reason else None})


def int_field(values: Mapping[str, str], name: str, *, default: int | None = None, minimum: int = 0,
              maximum: int = MAX_ID) -> int | None:
    """Return the whole number in field `name` of a form or query string (`default` when absent or empty).

    Raise BadField (400) naming the field when it is not a whole number from `minimum` to `maximum`.
    """
    raw = (values.get(name) or "").strip()
    if not raw:
        return default
    digits = raw[1:] if raw.startswith("-") else raw
    value = int(raw) if digits.isascii() and digits.isdigit() and len(digits) <= 25 else None
    if value is None or not minimum <= value <= maximum:
        raise BadField(name, Reason("field_whole_number", name=name, minimum=minimum, maximum=maximum, raw=raw[:40]))
    return value


def task_on_dataset(session, task_name: str | None, dataset_name: str | None) -> None:
    """Answer 400 naming the field `task` (BadField, worded from `task_not_on_dataset`) when a request names a task scoped
    to other datasets than the one it names: the workbench's rule (task_scopes.offered_on) on every page that takes both.
    Unknown names pass: the page's own lookup refuses them, naming what exists."""
    try:
        check_task_named_on_dataset(session, task_name, dataset_name)
    except TaskError as exc:
        raise BadField("task", exc.reason) from None


def bad_field(error: BadField):
    """Answer a BadField: the message as text for a script (with X-Invalid-Field), else the error page."""
    if is_script_request():
        response = make_response(error.text(), 400)
        response.mimetype = "text/plain"
        response.headers["X-Invalid-Field"] = error.field
        return response
    return render_template("error.html", error=error, refusal=error.text()), 400


def init_app(app: Flask) -> None:
    """Register the bounded `int` converter (before any route is added) and the BadField handler."""
    app.url_map.converters["int"] = BoundedInt
    app.register_error_handler(BadField, bad_field)
