"""The request's database session and the process's writer lock (Flask glue kept out of calibrate/db.py).

    get_session()          the request's session (one per request on `g`, closed at teardown)
    get_write_session()    a session whose transaction takes the write lock first (db.write_engine)
    close_session()        close it now (later reads get an ordinary session)
    write(action)          run `action(session)` in a write transaction behind the writer lock, commit
    app_writer()           the app's writer lock (db.writer_lock of its database)

SQLite has one writer at a time. Threads that wait for it inside SQLite's busy handler sleep
in growing steps (up to 100 ms) and wake at random; waiting on the writer lock (a lock of
this process, then a flock shared by the server processes on the same SQLite file) hands
the database over as soon as it is free. On PostgreSQL, other processes wait on its
advisory lock; other commands (imports) wait in SQLite's busy handler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from flask import Flask, current_app, g
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlmodel import Session

from calibrate.db import WriterLock, get_engine, note_write, write_engine, writer_lock

T = TypeVar("T")


def app_writer() -> WriterLock:
    """Return the current app's writer lock (db.writer_lock: one per SQLite file in this process)."""
    return writer_lock(current_app.config["DATABASE_URL"])


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


def write(action: Callable[[Session], T], *, background: bool = False) -> T:
    """Run `action(session)` in a write transaction behind the writer lock and commit; retry once on a unique-key race.

    `background`: a write no person waits for (staging traces), which lets other processes' waiting writes go first.
    """
    lock = app_writer()
    # Give the request's read connection back before waiting for the lock: threads that wait holding one could
    # take the whole pool while the lock's holder waits for a connection (a burst of logins did, on a busy machine).
    close_session()
    with lock.background if background else lock:
        try:
            for attempt in (1, 2):
                db = get_write_session()
                try:
                    result = action(db)
                    db.commit()
                    note_write(app_engine(), None)
                    return result
                except IntegrityError:
                    db.rollback()
                    if attempt == 2:
                        raise
                except DBAPIError as exc:  # a full disk, a damaged file: `/health` says the last write failed
                    note_write(app_engine(), exc)
                    raise
        finally:
            # Later reads of this request get an ordinary session: a read on the write session
            # would BEGIN IMMEDIATE again, outside the lock, and hold SQLite's write lock to the end.
            close_session()
    raise AssertionError("unreachable")  # pragma: no cover


def init_app(app: Flask) -> None:
    """Register the teardown that closes each request's session."""
    app.teardown_appcontext(close_session)
