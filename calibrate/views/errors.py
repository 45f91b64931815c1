"""How every view answers a refusal: the one place that catches calibrate's errors (calibrate.errors).

A domain call that refuses raises a `CalibrateError`; views do not catch it (except a form that
shows the message beside what was typed). `init_app` registers one handler on the app:

The message is worded from the refusal's reason in the reader's language (`refusal_text`); a refusal
raised with a plain string is shown as it is (English: docs/i18n.md says which, and why).

- In the annotation area (blueprints that name their page with `refuse_back_to`): `NotFound`
  → a neutral 404 page (never a hint that the item exists for someone else); a script
  request (htmx, the workbench) → 422 with the message as plain text, which the page shows.
- A page (GET) elsewhere → the 404 page with the message: the name in the URL does not
  exist (the message lists what does), or the page cannot be built for these arguments.
- `Busy` (too much of this work at once: the prompt editor's trial renders) → the error page
  with the message, its status (429 or 503) and `Retry-After`, whatever the area.
- Otherwise (a form) → the message as a flash and a 303 back: to `g.refusal_back` when the
  view set one (`back_to(url)`), else to the page its blueprint names, else to the
  referring page on this site, else to the datasets.

The database session is rolled back at the request's teardown (views/session.py).
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from flask import Blueprint, Flask, flash, g, make_response, redirect, render_template, request, url_for
from werkzeug.exceptions import NotFound as HTTPNotFound
from werkzeug.exceptions import ServiceUnavailable, TooManyRequests

from calibrate.errors import Busy, CalibrateError, NotFound
from calibrate.i18n import N_
from calibrate.reports.summary import reason_text
from calibrate.views.auth import is_script_request, safe_next

# The names and default descriptions of the HTTP errors error.html shows (Werkzeug's English), marked so
# that the catalog has them: the template translates `error.name` and `error.description`.
HTTP_ERROR_TEXT = (
    N_("Bad Request"), N_("The browser (or proxy) sent a request that this server could not understand."),
    N_("Unauthorized"),
    N_("Forbidden"),
    N_("You don't have the permission to access the requested resource. It is either read-protected or not readable by the server."),
    N_("Not Found"),
    N_("The requested URL was not found on the server. If you entered the URL manually please check your spelling and try again."),
    N_("Method Not Allowed"), N_("The method is not allowed for the requested URL."),
    N_("Request Entity Too Large"), N_("The data value transmitted exceeds the capacity limit."),
    N_("Too Many Requests"), N_("This user has exceeded an allotted request count. Try again later."),
    N_("Service Unavailable"),
    N_("The server is temporarily unable to service your request due to maintenance downtime or capacity problems. Please try "
       "again later."),
    N_("Internal Server Error"),
    N_("The server encountered an internal error and was unable to complete your request. Either the server is overloaded or there "
       "is an error in the application."),
)

# Blueprint name → the page a refused form goes back to (the annotation area: annotate, adjudicate, admin, guidelines).
_BACK: dict[str, Callable[[], str]] = {}
_SCRIPT_AWARE: set[str] = set()


def refuse_back_to(bp: Blueprint, back: Callable[[], str], *, script_aware: bool = False, vary_on_htmx: bool = False) -> None:
    """Name the page a refused form of `bp` goes back to; `script_aware`: scripts get a 422 instead."""
    _BACK[bp.name] = back
    if script_aware:
        _SCRIPT_AWARE.add(bp.name)
    if vary_on_htmx:
        # One URL serves the page and its fragment: caches must key on HX-Request.
        @bp.after_request
        def _vary(response):
            response.vary.add("HX-Request")
            return response


def back_to(url: str) -> None:
    """Say where this request goes back to if the domain call it makes is refused."""
    g.refusal_back = url


def _back() -> str:
    if g.get("refusal_back"):
        return g.refusal_back
    if request.blueprint in _BACK:
        return _BACK[request.blueprint]()
    referrer = urlsplit(request.referrer or "")
    if referrer.path and (not referrer.netloc or referrer.netloc == request.host):
        return safe_next(referrer.path + (f"?{referrer.query}" if referrer.query else "")) or url_for("datasets.index")
    return url_for("datasets.index")


def refusal_text(exc: CalibrateError) -> str:
    """Return a refusal in the reader's language, worded from its reason's code; without a code, its English message."""
    return reason_text({"note": str(exc), "reason": exc.reason.to_dict() if exc.reason is not None else None})


def refused(exc: CalibrateError):
    """Answer a refused request (see the module's docstring)."""
    message = refusal_text(exc)
    if isinstance(exc, Busy):  # too much of this work at once: the status says whose, Retry-After when to come back
        error = TooManyRequests() if exc.status == 429 else ServiceUnavailable()
        response = make_response(render_template("error.html", error=error, refusal=message), exc.status)
        response.headers["Retry-After"] = str(exc.retry_after)
        return response
    annotation_area = request.blueprint in _BACK
    if annotation_area and isinstance(exc, NotFound):
        return render_template("error.html", error=HTTPNotFound()), 404
    if annotation_area and request.blueprint in _SCRIPT_AWARE and is_script_request():
        response = make_response(message, 422)
        response.mimetype = "text/plain"
        return response
    if request.method == "GET" and not annotation_area:
        return render_template("error.html", error=HTTPNotFound(), refusal=message), 404
    flash(message, "error")
    return redirect(_back(), code=303)


def init_app(app: Flask) -> None:
    """Register the one handler of every CalibrateError."""
    app.register_error_handler(CalibrateError, refused)
