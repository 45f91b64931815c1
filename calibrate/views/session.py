"""The request's database sessions (Flask glue kept out of calibrate/db.py).

    get_session()          the request's read session (one per request on `g`, closed at teardown)
    close_session()        close it now (later reads get a new one)
    writing()              the request's write transaction: db.write_session on the app's engine,
                           the request's read session given back before it waits for the lock
    write(action)          run `action(session)` in `writing()` and return its result; run it
                           once more on a unique-key race
    app_engine()           the app's engine

Every write of a view goes through `writing()` (db.write_session: the writer lock of a SQLite
file, BEGIN IMMEDIATE, one retry on a busy database, commit at the end of the block), so a
label save, an admin's form and the traces receiver take turns with each other, with the
commands and with the workers on the same file (docs/architecture.md, "Database").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TypeVar

from flask import Flask, current_app, g
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from calibrate.db import get_engine, write_session

T = TypeVar("T")


def app_engine() -> Engine:
    """Return the engine of the current Flask app."""
    return get_engine(current_app.config["DATABASE_URL"], busy_timeout=current_app.config["SQLITE_BUSY_TIMEOUT"])


def get_session() -> Session:
    """Return the request's read session (one per request, closed at teardown)."""
    if "db_session" not in g:
        g.db_session = Session(app_engine(), expire_on_commit=False)
    return g.db_session


def close_session(_exc: BaseException | None = None) -> None:
    """Close the request's read session, giving its connection back (the next read opens a new one)."""
    session = g.pop("db_session", None)
    if session is not None:
        session.close()


@contextlib.contextmanager
def writing(*, background: bool = False) -> Iterator[Session]:
    """Yield the request's write transaction (db.write_session), committed when the block ends.

    The request's read session is given back first: a thread that waited for the lock holding a
    pooled connection could leave the lock's holder none (a burst of logins did, on a busy machine).
    Its objects stay readable (loaded, detached); later reads open a new read session, never
    this transaction again. `background`: a write no person waits for (staging traces), which
    lets other processes' waiting writes go first.
    """
    with write_session(app_engine(), background=background, give_back=g.pop("db_session", None)) as session:
        yield session


def write(action: Callable[[Session], T], *, background: bool = False) -> T:
    """Run `action(session)` in `writing()` and return what it returns; on a unique-key race, run it once more."""
    for attempt in (1, 2):
        try:
            with writing(background=background) as session:
                return action(session)
        except IntegrityError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def init_app(app: Flask) -> None:
    """Register the teardown that closes each request's session."""
    app.teardown_appcontext(close_session)
