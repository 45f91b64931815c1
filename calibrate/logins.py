"""Login sessions and login throttling, kept in the database so every server process and machine shares them.

Sessions. A login stores a `LoginSession` row under the SHA-256 of a random token; the cookie
carries only the token (no user id, nothing derived from the password hash), so a stolen
database does not give working cookies either. `load` reads the row and its user in one
primary-key lookup (the label POST pays for nothing else). A session is valid while it is not
revoked, before its absolute end (`SESSION_ABSOLUTE_LIFETIME` after the login) and within the
idle time (`PERMANENT_SESSION_LIFETIME`) of its last use; the last use is written at most every
`TOUCH_SECONDS`, so the keystroke path does not write for it. Logout revokes the row, so every
copy of the cookie is refused from then on; a password change or a deactivation revokes every
session of the user (`revoke_all`). Rows are deleted once past their absolute end.

Throttling. Every failed login (unknown user or wrong password alike) counts against the
account name tried and against the client address (`LoginThrottle`, one row each). The count is
taken *before* the password is checked, in the same write transaction that reads the lock
(`begin_attempt`): concurrent attempts queue on the write lock, so a burst of 40 wrong logins
checks exactly `LOGIN_MAX_FAILURES` passwords, never more (a read, then a hash, then a count
raced: 17 of 40 were checked against a limit of 10). A login that succeeds gives its count back
(`attempt_succeeded`). A browser that logged in to the account before carries a device cookie
(`device_token`, an HMAC of the account's password hash under the app's secret, so a password
change voids it): its attempts count against that device (`dev:…`) instead of the account
name, so an attacker who locks the name does not lock its owner out; the address limit still
applies to everyone. Failures
count while each comes within `LOGIN_WINDOW` seconds of the one before; at the limit
(`LOGIN_MAX_FAILURES` for an account, `LOGIN_MAX_FAILURES_PER_ADDRESS` for an address) the key
is locked for `LOGIN_LOCKOUT` seconds, doubled by every further failure up to
`LOGIN_LOCKOUT_MAX`. `retry_after` is a read: a throttled attempt is refused before its
password is hashed (the hash is what made a login flood slow everyone's saves), and nothing
waits in a server thread. A login that succeeds clears its account's row, not the address's.
Rows idle for a window and not locked are deleted with every failure recorded, so the table
stays as small as the recent failures.

No Flask here: views/auth.py and views/security.py call these with the request's session.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, update
from sqlmodel import Session, col, select

from calibrate.db import Statement
from calibrate.models import LoginSession, LoginThrottle

TOUCH_SECONDS = 300  # how stale `last_seen` may get before a request writes it again
MAX_KEY_CHARS = 200


def now_seconds() -> int:
    """Return the current Unix time in whole seconds."""
    return int(time.time())


# --------------------------------------------------------------------------- sessions


@dataclass(frozen=True)
class SessionPolicy:
    """How long a session lives: `idle` seconds without a request, `absolute` seconds after its login."""

    idle: int = 8 * 3600
    absolute: int = 12 * 3600

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> SessionPolicy:
        """Return the policy of PERMANENT_SESSION_LIFETIME (idle) and SESSION_ABSOLUTE_LIFETIME."""
        idle = settings.get("PERMANENT_SESSION_LIFETIME", cls.idle)
        idle = idle.total_seconds() if hasattr(idle, "total_seconds") else idle  # Flask turns it into a timedelta
        return cls(int(idle), int(settings.get("SESSION_ABSOLUTE_LIFETIME", cls.absolute)))


def token_id(token: str) -> str:
    """Return the key a session token is stored under (its SHA-256, hex)."""
    return hashlib.sha256(token.encode()).hexdigest()


def start_session(session: Session, user_id: int, policy: SessionPolicy, *, address: str = "",
                  now: int | None = None) -> str:
    """Store a new session of `user_id` and return its token (for the cookie). The caller commits."""
    now = now_seconds() if now is None else now
    token = secrets.token_urlsafe(32)
    session.execute(delete(LoginSession).where(col(LoginSession.expires) < now))  # bounded: past their absolute end
    session.add(LoginSession(id=token_id(token), user_id=user_id, created=now, last_seen=now,
                             expires=now + policy.absolute, address=address[:64]))
    return token


@dataclass(frozen=True)
class Active:
    """A valid session and the columns of its user, as one query reads them."""

    id: str
    touch: bool  # last_seen is older than TOUCH_SECONDS: the caller writes it (`touch`)
    user: dict[str, Any]


_SESSION_SQL = Statement(
    'SELECT s.last_seen, s.expires, s.revoked, u.id, u.username, u.display_name, u.role, u.password_hash, u.active, '
    'u.created_at, u.locale FROM loginsession s JOIN "user" u ON u.id = s.user_id WHERE s.id = :id'
)
_TOUCH_SQL = Statement("UPDATE loginsession SET last_seen = :now WHERE id = :id")


def load_session(session: Session, token: str, policy: SessionPolicy, *, now: int | None = None) -> Active | None:
    """Return the session of a cookie's token if it is valid (see the module's docstring), else None."""
    if not token or len(token) > 100:
        return None
    now = now_seconds() if now is None else now
    key = token_id(token)
    row = _SESSION_SQL.first(session, {"id": key})
    if (row is None or row.revoked is not None or row.expires <= now or row.last_seen + policy.idle <= now
            or not row.active or not row.password_hash):
        return None
    created = row.created_at
    user = {"id": row.id, "username": row.username, "display_name": row.display_name, "role": row.role,
            "password_hash": row.password_hash, "active": bool(row.active),
            "created_at": datetime.fromisoformat(created) if isinstance(created, str) else created, "locale": row.locale}
    return Active(key, now - row.last_seen >= TOUCH_SECONDS, user)


def touch(session: Session, active: Active, *, now: int | None = None) -> None:
    """Write a session's last use (the caller commits)."""
    _TOUCH_SQL.execute(session, {"id": active.id, "now": now_seconds() if now is None else now})


def end_session(session: Session, token: str, *, now: int | None = None) -> None:
    """Revoke the session of a token (logout): every copy of its cookie is refused from now on."""
    if token:
        session.execute(update(LoginSession).where(col(LoginSession.id) == token_id(token), col(LoginSession.revoked).is_(None))
                        .values(revoked=now_seconds() if now is None else now))


def revoke_all(session: Session, user_id: int, *, now: int | None = None) -> int:
    """Revoke every session of a user (password change, deactivation); return how many were live."""
    result = session.execute(update(LoginSession).where(col(LoginSession.user_id) == user_id, col(LoginSession.revoked).is_(None))
                             .values(revoked=now_seconds() if now is None else now))
    return result.rowcount


# --------------------------------------------------------------------------- throttling


@dataclass(frozen=True)
class Throttle:
    """The login-throttling settings (see the module's docstring)."""

    max_failures: int = 10
    max_failures_per_address: int = 30
    window: int = 15 * 60
    lockout: int = 60
    lockout_max: int = 900

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Throttle:
        """Return the throttle of the LOGIN_* settings."""
        d = cls()
        return cls(int(settings.get("LOGIN_MAX_FAILURES", d.max_failures)),
                   int(settings.get("LOGIN_MAX_FAILURES_PER_ADDRESS", d.max_failures_per_address)),
                   int(settings.get("LOGIN_WINDOW", d.window)), int(settings.get("LOGIN_LOCKOUT", d.lockout)),
                   int(settings.get("LOGIN_LOCKOUT_MAX", d.lockout_max)))

    def lockout_after(self, failures: int, limit: int) -> int:
        """Return the seconds a key is locked after its `failures`-th failure (0: not locked)."""
        if failures < limit:
            return 0
        return min(self.lockout * 2 ** min(failures - limit, 30), self.lockout_max)


def throttle_keys(username: str, address: str) -> tuple[str, str]:
    """Return the throttle keys of an account name and a client address."""
    return f"user:{username}"[:MAX_KEY_CHARS], f"addr:{address}"[:MAX_KEY_CHARS]


def retry_after(session: Session, username: str, address: str, *, now: int | None = None) -> int:
    """Return how many seconds the account or the address is still locked for (0: not throttled). Reads only."""
    now = now_seconds() if now is None else now
    keys = throttle_keys(username, address)
    locked = session.exec(select(LoginThrottle.locked_until).where(col(LoginThrottle.key).in_(keys))).all()
    return max([until - now for until in locked] + [0])


def record_failure(session: Session, username: str, address: str, throttle: Throttle, *,
                   now: int | None = None) -> int:
    """Count a failed login against the account name and the address; return the lockout it starts (0: none).

    Run in a write transaction (the caller commits). Also deletes the rows whose failures are
    older than the window and which are not locked.
    """
    now = now_seconds() if now is None else now
    user_key, address_key = throttle_keys(username, address)
    counted = ((user_key, throttle.max_failures), (address_key, throttle.max_failures_per_address))
    return _count_failure(session, [(session.get(LoginThrottle, key), key, limit) for key, limit in counted], throttle, now)


def _count_failure(session: Session, rows: list[tuple[LoginThrottle | None, str, int]], throttle: Throttle, now: int) -> int:
    """Count one failure against each (row, key, limit) (a key without a row, or whose window has passed, starts again);
    return the longest lockout it starts (0: none). Then delete the rows whose window and lock are both over."""
    lock = 0
    for row, key, limit in rows:
        if row is None:
            row = LoginThrottle(key=key, failures=0, first_failure=now, last_failure=now)
        elif now - row.last_failure > throttle.window:
            row.failures, row.first_failure = 0, now
        row.failures += 1
        row.last_failure = now
        seconds = throttle.lockout_after(row.failures, limit)
        if seconds:
            row.locked_until = now + seconds
            lock = max(lock, seconds)
        session.add(row)
    session.flush()
    session.execute(delete(LoginThrottle).where(col(LoginThrottle.last_failure) < now - throttle.window,
                                                col(LoginThrottle.locked_until) < now))
    return lock


DEVICE_PREFIX = "dev:"


def device_token(secret: str, username: str, password_hash: str) -> str:
    """Return a new device cookie value for an account: a random nonce and its HMAC (see the module's docstring)."""
    nonce = secrets.token_urlsafe(16)
    return f"{nonce}.{_device_mac(secret, nonce, username, password_hash)}"


def device_key(secret: str, token: str | None, username: str, password_hash: str | None) -> str | None:
    """Return the throttle key of a device cookie if it was issued for this account and its current password, else None."""
    if not token or not password_hash or len(token) > 200 or token.count(".") != 1:
        return None
    nonce, mac = token.split(".")
    if not hmac.compare_digest(mac, _device_mac(secret, nonce, username, password_hash)):
        return None
    return f"{DEVICE_PREFIX}{hashlib.sha256(nonce.encode()).hexdigest()[:40]}"


def _device_mac(secret: str, nonce: str, username: str, password_hash: str) -> str:
    message = f"device\x1f{nonce}\x1f{username}\x1f{password_hash}".encode()
    return hmac.new(str(secret).encode(), message, hashlib.sha256).hexdigest()[:40]


@dataclass(frozen=True)
class Attempt:
    """What `begin_attempt` decided: `wait` > 0 refuses it; else `lock_if_failed` is the lock its failure sets."""

    wait: int
    lock_if_failed: int
    keys: tuple[str, ...]


def begin_attempt(session: Session, username: str, address: str, throttle: Throttle, *, device: str | None = None,
                  now: int | None = None) -> Attempt:
    """Check the locks and count this attempt as a failure, atomically (the caller commits before checking the password).

    `device`: the throttle key of a valid device cookie (`device_key`); its attempts count
    against the device instead of the account name. A refused attempt (`wait` > 0) counts
    nothing. Run in a write transaction.
    """
    now = now_seconds() if now is None else now
    user_key, address_key = throttle_keys(username, address)
    counted = ((device, throttle.max_failures) if device else (user_key, throttle.max_failures),
               (address_key, throttle.max_failures_per_address))
    rows = [(session.get(LoginThrottle, key), key, limit) for key, limit in counted]
    wait = max([row.locked_until - now for row, _, _ in rows if row is not None] + [0])
    if wait > 0:
        return Attempt(wait, 0, ())
    return Attempt(0, _count_failure(session, rows, throttle, now), tuple(key for key, _ in counted))


def attempt_succeeded(session: Session, attempt: Attempt, throttle: Throttle) -> None:
    """Give back a successful attempt's count: forget the account's (or device's) failures, take one off the address's.

    A login through a device cookie leaves the account name's count alone: the owner logging in
    must not reset an attacker's lock (that would give the attacker fresh guesses).
    """
    for key in attempt.keys:
        row = session.get(LoginThrottle, key)
        if row is None:
            continue
        if not key.startswith("addr:"):
            session.delete(row)
            continue
        row.failures = max(row.failures - 1, 0)
        if row.failures < throttle.max_failures_per_address:
            row.locked_until = 0  # the lock this very attempt set, at the limit, is lifted with it
        session.add(row)


def clear_account(session: Session, username: str) -> None:
    """Forget an account's failed logins (a login that succeeded, or an admin's password reset)."""
    session.execute(delete(LoginThrottle).where(col(LoginThrottle.key) == throttle_keys(username, "")[0]))
