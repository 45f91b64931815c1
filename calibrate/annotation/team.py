"""The team, for the admin page: accounts (no self-signup) and assigning a dataset's items.

Accounts go through `calibrate.accounts` (the same rules as `calibrate users add`); assigning
work goes through `calibrate.ingest.sampling.sample_dataset` (the same as `calibrate sample`),
so the page and the command line can never disagree.
"""

from __future__ import annotations

from sqlmodel import Session, select

from calibrate.accounts import AccountError, add_user, set_password
from calibrate.annotation import AnnotationError, NotFound
from calibrate.annotation.queue import release_pending
from calibrate.ingest.sampling import SamplingError, SamplingSummary, sample_dataset
from calibrate.logins import revoke_all
from calibrate.models import User
from calibrate.reasons import Reason


def users(session: Session) -> list[User]:
    """Return every account: active first, then by role and name."""
    rows = session.exec(select(User)).all()
    order = {"admin": 0, "engineer": 1, "annotator": 2}
    return sorted(rows, key=lambda u: (not u.active, order.get(u.role, 3), u.username))


def annotators(session: Session) -> list[User]:
    """Return the active accounts that can be given work, annotators first."""
    return [u for u in users(session) if u.active]


def get_user_by_id(session: Session, user_id: int) -> User:
    user = session.get(User, user_id)
    if user is None:
        raise NotFound(Reason("no_such_user", user_id=user_id))
    return user


def create_user(session: Session, username: str, *, role: str, password: str, display_name: str = "") -> User:
    """Create an account that can log in at once."""
    try:
        return add_user(session, (username or "").strip(), role=role, password=password or "",
                        display_name=(display_name or "").strip())
    except AccountError as exc:
        raise AnnotationError.carrying(exc) from None


def reset_password(session: Session, user: User, password: str) -> None:
    """Set a new password (every session of the user ends)."""
    try:
        set_password(session, user, password or "")
    except AccountError as exc:
        raise AnnotationError.carrying(exc) from None


def set_active(session: Session, user: User, active: bool, *, acting: User, release: bool = True) -> int:
    """Activate or deactivate an account; deactivating ends its sessions and returns its pending items to the open pool.

    Return how many pending items were released. An admin cannot deactivate their own account
    (so there is always someone left to undo it).
    """
    if not active and user.id == acting.id:
        raise AnnotationError(Reason("own_account"))
    user.active = active
    session.add(user)
    if not active:
        revoke_all(session, user.id)
    released = release_pending(session, user) if not active and release else 0
    session.flush()
    return released


def assign(session: Session, dataset: str, *, n: int | None = None, fraction: float | None = None, seed: int = 0,
           overlap: int = 1, usernames: list[str] | None = None, negative_first: bool = False) -> SamplingSummary:
    """Queue a dataset's sampled items for the named annotators with overlap K (open slots if none are named)."""
    try:
        return sample_dataset(session, dataset, n=n, fraction=fraction, seed=seed, overlap=overlap,
                              assign=list(usernames or []) or None, negative_first=negative_first)
    except SamplingError as exc:
        raise AnnotationError.carrying(exc) from None

