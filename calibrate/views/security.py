"""Request hooks that every page gets: CSRF on unsafe methods, security headers, the user on g.

CSRF: one random token per session, sent back in a form field `csrf_token` or, for htmx and
scripts, in the `X-CSRFToken` header (base.html sets it for every htmx request).
"""

from __future__ import annotations

import hmac
import secrets
from datetime import datetime

from flask import Flask, abort, g, request, session
from sqlalchemy.orm import make_transient_to_detached

from calibrate.db import Statement
from calibrate.models import User
from calibrate.views.auth import login_needed
from calibrate.views.session import get_session

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

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
    if request.method not in UNSAFE_METHODS:
        return None
    expected = session.get("csrf_token")
    sent = request.headers.get("X-CSRFToken") or request.form.get("csrf_token", "")
    if not expected or not sent or not hmac.compare_digest(expected, sent):
        if session.get("user_id") is None and request.headers.get("HX-Request") == "true":
            # A script whose session ended (the cookie expired): ask for a login, so the
            # workbench keeps the action and applies it afterwards. Nothing runs either way.

            return login_needed()
        abort(400, description="The form's security token is missing or expired. Reload the page and try again.")
    return None


# Every request of a logged-in user reads their row: one plain statement (an ORM get cost a
# tenth of a label POST). The User is built detached: no view changes g.user, and a session
# it is added to takes it as the existing row.
_USER_SQL = Statement('SELECT id, username, display_name, role, password_hash, active, created_at FROM "user" WHERE id = :id')


def _load_user() -> None:
    g.user = None
    user_id = session.get("user_id")
    if user_id is not None:
        row = _USER_SQL.first(get_session(), {"id": user_id})
        if row is not None and row.active and row.password_hash and session.get("pw") == row.password_hash[-16:]:
            created = row.created_at
            g.user = User(id=row.id, username=row.username, display_name=row.display_name, role=row.role,
                          password_hash=row.password_hash, active=bool(row.active),
                          created_at=datetime.fromisoformat(created) if isinstance(created, str) else created)
            make_transient_to_detached(g.user)
        else:
            session.pop("user_id", None)


def _security_headers(response):
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    return response


def init_app(app: Flask) -> None:
    """Install the hooks."""
    app.before_request(_check_csrf)
    app.before_request(_load_user)
    app.after_request(_security_headers)
    app.jinja_env.globals["csrf_token"] = csrf_token
