"""Request hooks that every page gets: CSRF on unsafe methods, security headers, the user on g.

The user comes from the session the cookie names (calibrate.logins: server-side, revocable);
every response but a static file says `Cache-Control: no-store`; the cookie's `Secure` flag
follows SESSION_COOKIE_SECURE (None: whenever the request came over HTTPS).

CSRF: one random token per session, sent back in a form field `csrf_token` or, for htmx and
scripts, in the `X-CSRFToken` header (base.html sets it for every htmx request).
"""

from __future__ import annotations

import hmac
import secrets

from flask import Flask, abort, current_app, g, request, session
from flask.sessions import SecureCookieSessionInterface
from sqlalchemy.orm import make_transient_to_detached

from calibrate.logins import SessionPolicy, load_session, touch
from calibrate.models import User
from calibrate.views.auth import login_needed
from calibrate.views.session import get_session, writing

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Blueprints that no browser session reaches: a bearer token authenticates each request (no cookie is
# read or set), so a cross-site form cannot ride on a session there and there is no CSRF to check.
CSRF_EXEMPT = frozenset({"otlp"})

CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ]
)


def csrf_token() -> str:
    """Return the session's CSRF token, creating it on first use."""
    token = session.get("csrf_token")
    if not token:
        token = session["csrf_token"] = secrets.token_urlsafe(32)
    return token


def _check_csrf():
    if request.method not in UNSAFE_METHODS or request.blueprint in CSRF_EXEMPT:
        return None
    if request.routing_exception is not None:
        # No route (404) or not this method (405): say that, not "token expired" (no view runs either way;
        # a `web` server's POST /v1/traces is a 404 for the exporter).
        return None
    expected = session.get("csrf_token")
    sent = request.headers.get("X-CSRFToken") or request.form.get("csrf_token", "")
    if not expected or not sent or not hmac.compare_digest(expected, sent):
        if session.get("sid") is None and request.headers.get("HX-Request") == "true":
            # A script whose session ended (the cookie expired): ask for a login, so the
            # workbench keeps the action and applies it afterwards. Nothing runs either way.

            return login_needed()
        abort(400, description="The form's security token is missing or expired. Reload the page and try again.")
    return None


def _load_user() -> None:
    """Put the session's user on g (None when the cookie names no valid session: logged out, revoked, expired).

    One query on the keystroke path: the session row and its user by primary key
    (calibrate.logins). The User is built detached: no view changes g.user, and a session it
    is added to takes it as the existing row. The last use is written at most every
    logins.TOUCH_SECONDS, in a transaction of its own.
    """
    g.user = None
    token = session.get("sid")
    if not token:
        return
    active = load_session(get_session(), token, SessionPolicy.from_settings(current_app.config))
    if active is None:
        session.pop("sid", None)
        return
    g.user = User(**active.user)
    make_transient_to_detached(g.user)
    if active.touch:
        with writing() as db:
            touch(db, active)


def _security_headers(response):
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    if request.endpoint != "static":
        # Pages, fragments and downloads carry clinical text: no browser or proxy keeps a copy
        # (the back button after logout, a shared machine). Static files may be cached.
        response.headers["Cache-Control"] = "no-store"
        response.headers.pop("Expires", None)
    return response


class SessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie session, with `Secure` decided per request when SESSION_COOKIE_SECURE is None.

    None (the default): the cookie is `Secure` on every response to a request that came over
    HTTPS (`request.is_secure`: TLS to calibrate itself, or X-Forwarded-Proto from a proxy
    trusted with TRUSTED_PROXY_HOPS). true or false: always, or never.
    """

    def get_cookie_secure(self, app: Flask) -> bool:
        configured = app.config.get("SESSION_COOKIE_SECURE")
        if configured is None:
            return request.is_secure
        return bool(configured)


def init_app(app: Flask) -> None:
    """Install the hooks and the session interface."""
    app.session_interface = SessionInterface()
    app.before_request(_check_csrf)
    app.before_request(_load_user)
    app.after_request(_security_headers)
    app.jinja_env.globals["csrf_token"] = csrf_token
