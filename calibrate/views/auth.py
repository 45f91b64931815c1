"""Log in and out; the decorators that guard every other view."""

from __future__ import annotations

import functools
import logging
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    g,
    jsonify,
    make_response,
    redirect,
    render_template,
    request,
    session,
    url_for,
)

from calibrate.accounts import authenticate, get_user
from calibrate.db import check_database, last_write_failure
from calibrate.i18n import _, ngettext
from calibrate.logins import (
    SessionPolicy,
    Throttle,
    attempt_succeeded,
    begin_attempt,
    device_key,
    device_token,
    end_session,
    start_session,
)
from calibrate.views.session import app_engine, get_session, write

bp = Blueprint("auth", __name__)
# Logins, failures and throttled attempts (account name tried, client address; never a password).
log = logging.getLogger("calibrate.security")
# A browser that logged in before: exempt from its account's login lock (calibrate.logins, docs/security.md).
DEVICE_COOKIE = "calibrate_device"


def safe_next(target: str | None) -> str | None:
    """Return `target` if it is a path on this site (no open redirects), else None."""
    if not target:
        return None
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return None
    return target


def is_script_request() -> bool:
    """Return whether the request comes from htmx or the workbench script (not a page load)."""
    return request.headers.get("HX-Request") == "true" and request.headers.get("HX-History-Restore-Request") != "true"


def login_page_for_request() -> str:
    """Return the login URL that comes back to the page the visitor is on."""
    if is_script_request():
        # The page is where the script runs, not the fragment URL it called.
        current = urlsplit(request.headers.get("HX-Current-URL", ""))
        back = safe_next(current.path + (f"?{current.query}" if current.query else "")) if current.path else None
        return url_for("auth.login", next=back) if back else url_for("auth.login")
    return url_for("auth.login", next=request.full_path.rstrip("?"))


def login_needed():
    """Answer a visitor who is not logged in: a redirect for a page, 401 for a script.

    A script (htmx, the workbench) gets 401 with `HX-Redirect` to the login page, so it can
    keep the action it was sending and apply it after the login (nothing is lost when a
    session expires mid-item).
    """
    if is_script_request():
        response = make_response("Your session has ended: log in again; your last action will be applied then.", 401)
        response.headers["HX-Redirect"] = login_page_for_request()
        response.mimetype = "text/plain"
        return response
    return redirect(login_page_for_request())


def landing_page(user) -> str:
    """Return where a user lands after logging in: annotators on their queue, others on the datasets."""
    return url_for("annotate.queue") if user.role == "annotator" else url_for("datasets.index")


def login_required(view):
    """Send anonymous visitors to the login page, then back."""

    @functools.wraps(view)
    def wrapped(**kwargs):
        if g.user is None:
            return login_needed()
        return view(**kwargs)

    return wrapped


def role_required(*roles: str):
    """Allow only users with one of `roles` (403 for the others)."""

    def decorator(view):
        @functools.wraps(view)
        def wrapped(**kwargs):
            if g.user is None:
                return login_needed()
            if g.user.role not in roles:
                abort(403)
            return view(**kwargs)

        return wrapped

    return decorator


@bp.route("/login", methods=("GET", "POST"))
def login():
    """Show the login form; log in (throttled: see calibrate.logins)."""
    next_url = safe_next(request.values.get("next"))
    if request.method == "POST":
        username = request.form.get("username", "").strip()
        address = request.remote_addr or ""
        throttle = Throttle.from_settings(current_app.config)
        secret = current_app.config["SECRET_KEY"]
        known = get_user(get_session(), username)
        # A browser that logged in to this account before is not held by the account's lock.
        device = device_key(secret, request.cookies.get(DEVICE_COOKIE), username, known.password_hash if known else None)
        # Checked and counted in one write transaction, before the password is hashed: no race
        # between the check and the count; a throttled attempt is answered at once, nothing sleeps.
        attempt = write(lambda db: begin_attempt(db, username, address, throttle, device=device))
        if attempt.wait > 0:
            log.warning("login throttled: user %r from %s, %d s left", username, address, attempt.wait)
            return _throttled(next_url, attempt.wait)
        user = authenticate(get_session(), username, request.form.get("password", ""))
        if user is None:
            log.warning("login failed: user %r from %s%s", username, address,
                        f"; locked for {attempt.lock_if_failed} s" if attempt.lock_if_failed else "")
            flash(_("Unknown user or wrong password."), "error")
            return render_template("auth/login.html", next=next_url), 401

        def begin(db):
            attempt_succeeded(db, attempt, throttle)
            return start_session(db, user.id, SessionPolicy.from_settings(current_app.config), address=address)

        token = write(begin)
        session.clear()
        session.permanent = True
        session["sid"] = token  # a random id: the session itself is in the database, nothing of the password here
        log.info("login: user %r from %s", username, address)
        response = redirect(next_url or landing_page(user), code=303)
        if device is None:
            response.set_cookie(DEVICE_COOKIE, device_token(secret, username, user.password_hash),
                                max_age=int(current_app.config.get("LOGIN_DEVICE_DAYS", 180)) * 86400, httponly=True,
                                samesite="Lax", secure=current_app.session_interface.get_cookie_secure(current_app),
                                path=current_app.config.get("APPLICATION_ROOT") or "/")
        return response
    if g.user is not None:
        return redirect(next_url or landing_page(g.user))
    return render_template("auth/login.html", next=next_url)


def _throttled(next_url: str | None, wait: int):
    """Answer a throttled login: 429 with Retry-After, the same for every account name."""
    minutes = max(1, -(-wait // 60))
    flash(ngettext("Too many failed logins: try again in %(num)s minute.", "Too many failed logins: try again in %(num)s minutes.", minutes),
          "error")
    response = make_response(render_template("auth/login.html", next=next_url), 429)
    response.headers["Retry-After"] = str(wait)
    return response


@bp.route("/health")
def health():
    """Say whether the database can be read and written: 200 "ok", else 503 with "read-only" or "damaged" (no login),
    or "write-failed" when this process's last write failed (a full disk): the database checked out, the disk did not."""
    engine = app_engine()
    state = check_database(engine, full=True)  # once per process (and per change of the file: db.check_database)
    body = {"status": state.status, "database": state.status, "message": state.message}
    failed = last_write_failure(engine) if state.status == "ok" else None
    if failed is not None:
        when, why = failed
        body = {**body, "status": "write-failed", "write_failed_at": when.isoformat(timespec="seconds"),
                "message": f"the last write failed: {why}"}
    return jsonify(body), 200 if body["status"] == "ok" else 503


@bp.route("/logout", methods=("POST",))
def logout():
    """Log out: the session ends for every copy of its cookie."""
    token = session.get("sid")
    if token:
        write(lambda db: end_session(db, token))
    session.clear()
    return redirect(url_for("auth.login"), code=303)
