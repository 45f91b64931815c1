"""Engine and sessions.

SQLite gets, on every connection: WAL journal (readers never block the writer),
synchronous=NORMAL (durable at checkpoints, safe with WAL), a busy timeout, and foreign keys.
pysqlite's own transaction handling is turned off so that SQLAlchemy emits BEGIN itself:
a write transaction that reads first must start with BEGIN IMMEDIATE, or two concurrent
writers that both read first deadlock into "database is locked" despite the busy timeout.
`write_session()` gives such a session; plain `Session(engine)` reads with a deferred BEGIN.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from flask import current_app, g
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlmodel import Session

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def _install_sqlite_hooks(engine: Engine, busy_timeout: float) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):  # noqa: ANN001
        dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself (below)
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):  # noqa: ANN001
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


def get_engine(url: str, *, busy_timeout: float = 10) -> Engine:
    """Return the process-wide engine for a database URL (created once)."""
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            parsed = make_url(url)
            kwargs: dict = {}
            if parsed.get_backend_name() == "sqlite":
                kwargs["connect_args"] = {"check_same_thread": False, "timeout": busy_timeout}
            engine = create_engine(url, **kwargs)
            if parsed.get_backend_name() == "sqlite":
                _install_sqlite_hooks(engine, busy_timeout)
            _engines[url] = engine
        return engine


def dispose_engine(url: str) -> None:
    """Close and forget the engine of a URL (tests, and before replacing a database file)."""
    with _lock:
        engine = _engines.pop(url, None)
    if engine is not None:
        engine.dispose()


def is_sqlite(engine: Engine) -> bool:
    """Return whether the engine talks to SQLite."""
    return engine.dialect.name == "sqlite"


@contextlib.contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """Yield a session whose transaction starts with BEGIN IMMEDIATE on SQLite; commit on success.

    On other databases it is an ordinary session. The caller's block is one transaction:
    an exception rolls everything back.
    """
    bind = engine.execution_options(sqlite_begin="IMMEDIATE") if is_sqlite(engine) else engine
    with Session(bind, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def app_engine() -> Engine:
    """Return the engine of the current Flask app."""
    return get_engine(current_app.config["DATABASE_URL"], busy_timeout=current_app.config["SQLITE_BUSY_TIMEOUT"])


def get_session() -> Session:
    """Return the request's session (one per request, closed at teardown)."""
    if "db_session" not in g:
        g.db_session = Session(app_engine(), expire_on_commit=False)
    return g.db_session


def get_write_session() -> Session:
    """Return the request's session for a write that reads first (BEGIN IMMEDIATE on SQLite)."""
    if "db_session" in g:
        g.db_session.close()
    engine = app_engine()
    bind = engine.execution_options(sqlite_begin="IMMEDIATE") if is_sqlite(engine) else engine
    g.db_session = Session(bind, expire_on_commit=False)
    return g.db_session


def close_session(_exc: BaseException | None = None) -> None:
    """Close the request's session, rolling back whatever was not committed."""
    session = g.pop("db_session", None)
    if session is not None:
        session.close()


def init_app(app) -> None:  # noqa: ANN001
    """Register the teardown that closes each request's session."""
    app.teardown_appcontext(close_session)
