"""The request's database session and the process's writer lock (Flask glue kept out of calibrate/db.py).

    get_session()          the request's session (one per request on `g`, closed at teardown)
    get_write_session()    a session whose transaction takes the write lock first (db.write_engine)
    close_session()        close it now (later reads get an ordinary session)
    write(action)          run `action(session)` in a write transaction behind WRITER, commit

SQLite has one writer at a time. Threads of this process that wait for it inside SQLite's busy
handler sleep in growing steps (up to 100 ms) and wake at random; waiting on `WRITER`, a
lock of this process, hands the database over as soon as it is free. Other processes still
wait in SQLite (BEGIN IMMEDIATE with its busy timeout), or on PostgreSQL's advisory lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from flask import Flask, current_app, g
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from calibrate.db import get_engine, write_engine

T = TypeVar("T")
WRITER = threading.Lock()


def app_engine() -> Engine:
    """Return the engine of the current Flask app."""
    return get_engine(current_app.config["DATABASE_URL"], busy_timeout=current_app.config["SQLITE_BUSY_TIMEOUT"])


def get_session() -> Session:
    """Return the request's session (one per request, closed at teardown)."""
    if "db_session" not in g:
        g.db_session = Session(app_engine(), expire_on_commit=False)
    return g.db_session


def get_write_session() -> Session:
    """Return the request's session for a write that reads first (it takes the write lock: see `db.write_engine`)."""
    if "db_session" in g:
        g.db_session.close()
    g.db_session = Session(write_engine(app_engine()), expire_on_commit=False)
    return g.db_session


def close_session(_exc: BaseException | None = None) -> None:
    """Close the request's session, rolling back whatever was not committed."""
    session = g.pop("db_session", None)
    if session is not None:
        session.close()


def write(action: Callable[[Session], T]) -> T:
    """Run `action(session)` in a write transaction behind WRITER and commit; retry once on a unique-key race."""
    with WRITER:
        try:
            for attempt in (1, 2):
                db = get_write_session()
                try:
                    result = action(db)
                    db.commit()
                    return result
                except IntegrityError:
                    db.rollback()
                    if attempt == 2:
                        raise
        finally:
            # Later reads of this request get an ordinary session: a read on the write session
            # would BEGIN IMMEDIATE again, outside the lock, and hold SQLite's write lock to the end.
            close_session()
    raise AssertionError("unreachable")  # pragma: no cover


def init_app(app: Flask) -> None:
    """Register the teardown that closes each request's session."""
    app.teardown_appcontext(close_session)
