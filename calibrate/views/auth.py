"""Log in and out; the decorators that guard every other view."""

from __future__ import annotations

import functools
from urllib.parse import urlsplit

from flask import Blueprint, abort, flash, g, redirect, render_template, request, session, url_for

from calibrate.accounts import authenticate
from calibrate.db import get_session

bp = Blueprint("auth", __name__)


def _safe_next(target: str | None) -> str | None:
    """Return `target` if it is a path on this site (no open redirects), else None."""
    if not target:
        return None
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return None
    return target


def login_required(view):
    """Send anonymous visitors to the login page, then back."""

    @functools.wraps(view)
    def wrapped(**kwargs):
        if g.user is None:
            return redirect(url_for("auth.login", next=request.full_path.rstrip("?")))
        return view(**kwargs)

    return wrapped


def role_required(*roles: str):
    """Allow only users with one of `roles` (403 for the others)."""

    def decorator(view):
        @functools.wraps(view)
        def wrapped(**kwargs):
            if g.user is None:
                return redirect(url_for("auth.login", next=request.full_path.rstrip("?")))
            if g.user.role not in roles:
                abort(403)
            return view(**kwargs)

        return wrapped

    return decorator


@bp.route("/login", methods=("GET", "POST"))
def login():
    """Show the login form; log in."""
    next_url = _safe_next(request.values.get("next"))
    if request.method == "POST":
        user = authenticate(get_session(), request.form.get("username", "").strip(), request.form.get("password", ""))
        if user is None:
            flash("Unknown user or wrong password.", "error")
            return render_template("auth/login.html", next=next_url), 401
        session.clear()
        session.permanent = True
        session["user_id"] = user.id
        # Changing the password (or an admin resetting it) logs out every other session.
        session["pw"] = user.password_hash[-16:]
        return redirect(next_url or url_for("datasets.index"), code=303)
    if g.user is not None:
        return redirect(next_url or url_for("datasets.index"))
    return render_template("auth/login.html", next=next_url)


@bp.route("/logout", methods=("POST",))
def logout():
    """Log out."""
    session.clear()
    return redirect(url_for("auth.login"), code=303)
