"""Accounts: users, roles and passwords (werkzeug's salted hashes; no plain text anywhere)."""

from __future__ import annotations

import functools
import re

from sqlmodel import Session, select
from werkzeug.security import check_password_hash, generate_password_hash

from calibrate import i18n
from calibrate.errors import AccountError
from calibrate.logins import clear_account, revoke_all
from calibrate.models import ROLES, User
from calibrate.reasons import Reason

USERNAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,99}$")
MIN_PASSWORD = 8


def validate_username(username: str) -> str:
    """Return the username if it is acceptable, else raise AccountError."""
    if not USERNAME_RE.match(username or ""):
        raise AccountError(Reason("username_invalid", username=username))
    return username


def validate_password(password: str) -> str:
    """Return the password if it is long enough, else raise AccountError."""
    if len(password) < MIN_PASSWORD:
        raise AccountError(Reason("password_too_short", limit=MIN_PASSWORD))
    return password


def get_user(session: Session, username: str) -> User | None:
    """Return the user with this username, or None."""
    return session.exec(select(User).where(User.username == username)).first()


def add_user(session: Session, username: str, *, role: str = "annotator", password: str | None = None,
             display_name: str = "") -> User:
    """Create a user; without a password the account exists but cannot log in."""
    validate_username(username)
    if role not in ROLES:
        raise AccountError(Reason("role_unknown", roles=", ".join(ROLES), role=role))
    if get_user(session, username) is not None:
        raise AccountError(Reason("user_exists", username=username))
    user = User(username=username, role=role, display_name=display_name or username,
                password_hash=generate_password_hash(validate_password(password)) if password is not None else None)
    session.add(user)
    session.flush()
    return user


def ensure_annotator(session: Session, username: str) -> User:
    """Return the user named by an import, creating it without a password if needed."""
    user = get_user(session, username)
    if user is None:
        user = User(username=validate_username(username), role="annotator", display_name=username)
        session.add(user)
        session.flush()
    return user


def set_password(session: Session, user: User, password: str) -> int:
    """Set (or reset) a user's password: every session of the user ends, and its failed logins are forgotten.

    Return how many live sessions were ended.
    """
    user.password_hash = generate_password_hash(validate_password(password))
    session.add(user)
    if user.id is None:
        return 0
    ended = revoke_all(session, user.id)
    clear_account(session, user.username)
    return ended


def set_locale(session: Session, user: User, locale: str | None) -> User:
    """Set the interface language of a user ("en", "es"; None or "": follow the browser's). The caller commits."""
    chosen = (locale or "").strip() or None
    if chosen is not None and chosen not in i18n.LOCALES:
        raise AccountError(Reason("language_unknown", locales=", ".join(i18n.LOCALES)))
    user.locale = chosen
    session.add(user)
    session.flush()
    return user


def authenticate(session: Session, username: str, password: str) -> User | None:
    """Return the active user whose password matches, else None (same answer for every failure)."""
    dummy = _dummy_hash()  # made before looking the user up: the first login of a process costs the same either way
    user = get_user(session, username)
    if user is None or not user.active or not user.password_hash:
        # Spend the same time as a real check so usernames cannot be probed by timing.
        check_password_hash(dummy, password)
        return None
    return user if check_password_hash(user.password_hash, password) else None


@functools.cache
def _dummy_hash() -> str:
    """Return the hash a failed login is checked against: made on first use, since hashing takes a few hundred
    milliseconds and every command importing this module (reports, through the imports) would pay it."""
    return generate_password_hash("not-a-real-password")
