"""Engine and sessions.

SQLite gets, on every connection: WAL journal (readers never block the writer),
synchronous=NORMAL (durable at checkpoints, safe with WAL), a busy timeout, and foreign keys.
A database file is created 0600 (its -wal and -shm files take its mode): owner only.
pysqlite's own transaction handling is turned off so that SQLAlchemy emits BEGIN itself:
a write transaction that reads first must start with BEGIN IMMEDIATE, or two concurrent
writers that both read first deadlock into "database is locked" despite the busy timeout.
`write_session()` is the one way to write (below); plain `Session(engine)` reads with a
deferred BEGIN and never commits.

PostgreSQL has no BEGIN IMMEDIATE: there a write session's transaction first takes one
transaction-level advisory lock, so writers that read first take turns as on SQLite (the
domain code counts on it: read, decide, write) while readers never wait.

This module is the one home of SQL that skips SQLAlchemy's per-row work, for the two paths
where it was measured to matter: `Statement` (the keystroke path: a label save runs eight)
and `read_frame` (a report reads 10^5–10^6 rows into a pandas frame). Everything else uses
SQLModel/SQLAlchemy queries; ingest/bulk.py adds prepared multi-row INSERTs for imports. No
Flask here: the request's session is views/session.py's; the writer lock (`writer_lock`) is
here, since every write session on a SQLite file takes it: the web's, the commands', the judge
runs' writers, the watchers' and the traces settler's.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections import namedtuple
from collections.abc import Iterator
from datetime import datetime
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import JSON, Connection, Engine, bindparam, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

if TYPE_CHECKING:
    from sqlmodel import Session

try:
    import fcntl
except ImportError:  # Windows: no flock; the writer lock is this process's alone
    fcntl = None

_engines: dict[str, Engine] = {}
_immediate_engines: dict[Engine, Engine] = {}
_lock = threading.Lock()
# The key of the advisory lock PostgreSQL write sessions take (any fixed number; this is "cali").
PG_WRITE_LOCK = 0x63616C69


def sqlite_path(url: str) -> Path | None:
    """Return the file of a SQLite URL (None for another database, in-memory or a file: URI)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:" \
            or parsed.database.startswith("file:"):
        return None
    return Path(parsed.database)


def create_private_file(path: Path) -> None:
    """Create an empty file readable and writable by its owner only (0600), unless it exists.

    SQLite would create the database with 0644 (less the umask): every local user could read
    the clinical text. It opens an existing empty file as a new database, and gives its -wal
    and -shm files the database file's mode.
    """
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    else:
        os.chmod(path, 0o600)  # whatever the umask


def _install_sqlite_hooks(engine: Engine, busy_timeout: float, path: Path | None) -> None:
    if path is not None:
        @event.listens_for(engine, "do_connect")
        def _create_privately(_dialect, _record, _cargs, _cparams):
            if not path.exists():
                create_private_file(path)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):
        dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself (below)
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


def _install_postgres_hooks(engine: Engine) -> None:
    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        if conn.get_execution_options().get("write_lock"):
            # Released by the transaction's COMMIT or ROLLBACK, never held across them.
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_WRITE_LOCK})")


def write_engine(engine: Engine) -> Engine:
    """Return the engine whose transactions take the write lock first (made once per engine).

    SQLite: BEGIN IMMEDIATE. PostgreSQL: the advisory lock `PG_WRITE_LOCK`. Other databases:
    the engine itself.
    """
    if engine.dialect.name not in ("sqlite", "postgresql"):
        return engine
    immediate = _immediate_engines.get(engine)
    if immediate is None:
        options = {"sqlite_begin": "IMMEDIATE"} if is_sqlite(engine) else {"write_lock": True}
        immediate = _immediate_engines[engine] = engine.execution_options(**options)
    return immediate


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
                _install_sqlite_hooks(engine, busy_timeout, sqlite_path(url))
            elif parsed.get_backend_name() == "postgresql":
                _install_postgres_hooks(engine)
            _engines[url] = engine
        return engine


def dispose_engine(url: str) -> None:
    """Close and forget the engine of a URL, and what `check_database` found (tests, and before replacing a database file)."""
    with _lock:
        engine = _engines.pop(url, None)
    if engine is not None:
        _immediate_engines.pop(engine, None)
        _checked.pop(str(engine.url), None)
        _fully_checked.discard(str(engine.url))
        engine.dispose()
    close_writer_lock(url)


class WriterLock:
    """One writer at a time among a server's threads and, on a SQLite file, among the server processes on it.

    SQLite has one writer at a time, and a writer that finds the file locked waits in SQLite's
    busy handler, which sleeps in growing steps (up to 100 ms) and wakes at random: a label save
    in one process waited through seconds of another process's trace writes (a `serve --role
    traces` beside a `--role web` one; bench/results/receiver.md). Threads of this process wait
    on a lock of this process first; then, for a SQLite file, on an exclusive `flock` of the file
    `<database>-writer` beside it, which the kernel hands over the moment its holder lets go.

    People first: `with lock:` (the workbench's writes) holds a shared flock of
    `<database>-writer-wait` while it waits, and counts itself among this process's waiting
    foreground writers; `with lock.background:` (staging and settling traces) first waits until
    no foreground writer of this process waits and no other process's writer is waiting there,
    so a label save waits for one trace transaction at most, never for a queue of them.

    Held only around one write transaction; a process that dies lets go with it. Opened once
    per process (a forked worker opens its own: a shared open file would share the lock).
    Without flock (Windows) or when the files cannot be made, only the process lock is taken.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.threads = threading.Lock()
        self._fds: tuple[int, int] | None = None
        self._pid: int | None = None
        self._owner: int | None = None  # the thread holding it
        self._people = 0  # foreground writers of this process waiting for `threads`
        self._quiet = threading.Condition()  # notified when the last of them got it

    def waiting(self) -> int:
        """Return how many foreground writers of this process wait for the lock now."""
        with self._quiet:
            return self._people

    def held_here(self) -> bool:
        """Return whether the calling thread holds this lock (either way it was taken)."""
        return self._owner == threading.get_ident()

    def _files(self) -> tuple[int, int] | None:
        """Return this process's (lock, wait) file descriptors, opening them once per process; None without flock."""
        if self.path is None or fcntl is None:
            return None
        if self._pid != os.getpid():
            self._pid = os.getpid()
            try:
                self._fds = tuple(os.open(f"{self.path}{suffix}", os.O_RDWR | os.O_CREAT, 0o600)
                                  for suffix in ("-writer", "-writer-wait"))
            except OSError:  # a read-only folder: writes will be refused anyway
                self._fds = None
        return self._fds

    def __enter__(self) -> WriterLock:
        with self._quiet:
            self._people += 1
        try:
            self.threads.acquire()
        finally:
            with self._quiet:
                self._people -= 1
                if not self._people:
                    self._quiet.notify_all()
        try:
            fds = self._files()
            if fds is not None:
                main, wait = fds
                fcntl.flock(wait, fcntl.LOCK_SH)  # "a person's write is waiting": background writers hold back
                try:
                    fcntl.flock(main, fcntl.LOCK_EX)
                finally:
                    fcntl.flock(wait, fcntl.LOCK_UN)
        except BaseException:
            self.threads.release()
            raise
        self._owner = threading.get_ident()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()

    @property
    def background(self) -> BackgroundWriter:
        """This lock for background writes (reusable: `with lock.background:` around each transaction)."""
        return BackgroundWriter(self)

    def enter_background(self) -> None:
        """Take the lock for a background write, once no foreground writer (of this process or another) waits for it."""
        while True:
            with self._quiet:
                self._quiet.wait_for(lambda: not self._people)
            self.threads.acquire()
            with self._quiet:
                if not self._people:
                    break
            self.threads.release()  # a person came meanwhile: after them
        try:
            fds = self._files()
            if fds is not None:
                main, wait = fds
                fcntl.flock(wait, fcntl.LOCK_EX)  # granted only while nobody holds it shared (nobody waits)
                fcntl.flock(wait, fcntl.LOCK_UN)
                fcntl.flock(main, fcntl.LOCK_EX)
        except BaseException:
            self.threads.release()
            raise
        self._owner = threading.get_ident()

    def close(self) -> None:
        """Close this process's lock files (the database is being let go: `dispose_engine`); a later use opens them again."""
        with self.threads:
            fds, self._fds, self._pid = self._fds, None, None
            if fds is not None:
                for fd in fds:
                    os.close(fd)

    def release(self) -> None:
        """Let go of the lock (either way it was taken)."""
        self._owner = None
        try:
            if self._fds is not None and self._pid == os.getpid():
                fcntl.flock(self._fds[0], fcntl.LOCK_UN)
        finally:
            self.threads.release()


class BackgroundWriter:
    """A WriterLock taken for background writes (`WriterLock.background`): yields to waiting foreground writers."""

    def __init__(self, lock: WriterLock) -> None:
        self.lock = lock

    def __enter__(self) -> WriterLock:
        self.lock.enter_background()
        return self.lock

    def __exit__(self, *_exc: object) -> None:
        self.lock.release()


_writer_locks: dict[Path | str, WriterLock] = {}


def writer_lock(url: str) -> WriterLock:
    """Return the writer lock of a SQLite database for this process (one per file; a file-less one per URL)."""
    key = _writer_lock_key(url)
    with _lock:
        found = _writer_locks.get(key)
        if found is None:
            found = _writer_locks[key] = WriterLock(key if isinstance(key, Path) else None)
        return found


def _writer_lock_key(url: str) -> Path | str:
    """Return what names a URL's writer lock: its file's resolved path, or the URL itself for a database without a file."""
    path = sqlite_path(url)
    return path.resolve() if path is not None else url


def close_writer_lock(url: str) -> None:
    """Forget the writer lock of a URL's file and close its files (each held two descriptors for the process's life)."""
    with _lock:
        found = _writer_locks.pop(_writer_lock_key(url), None)
    if found is not None:
        found.close()


def forget_connections_after_fork() -> None:
    """Drop (without closing) the pooled connections a forked server process inherited.

    A SQLite connection must not be used across fork(); closing it in the child would also
    disturb the parent's, so the child only forgets it and opens its own.
    """
    with _lock:
        engines = list(_engines.values())
    for engine in engines:
        engine.dispose(close=False)


class DatabaseState(NamedTuple):
    """What `check_database` found: status "ok", "read-only" or "damaged", and a one-line message for people."""

    status: str
    message: str


_checked: dict[str, DatabaseState] = {}  # per URL: the cheap check's state, or the full check's once it ran
_fully_checked: set[str] = set()
CHECKED_SUFFIX = "-checked"  # beside the database: the file state the last full check passed on (`record_check`)


def check_database(engine: Engine, *, full: bool = False) -> DatabaseState:
    """Check a SQLite database the first time this process opens it; with `full`, also scan it once per change of the file.

    Every time (cheap, whatever the file's size): the header and the schema, which SQLite reads
    and checks when the connection's first statement runs (the connect pragmas, then a count of
    `sqlite_master`: a file that is not a database, a bad header or a damaged schema page fail
    there), and whether it takes writes: `user_version` set to itself inside a transaction that
    is rolled back, which a file opened read-only (a `mode=ro` URI, a read-only mount, a file
    without write permission) refuses; nothing is written otherwise.

    `full` (`serve` and `init` at start, `/health`): also `PRAGMA quick_check`, a pass over every
    page, unless the file is as the last full check that passed left it (`fingerprint`, recorded
    beside the database by `record_check`): on a 486 MB database the scan took 1.86 s, which
    every command paid before. `calibrate check` scans whatever the record says (`full_check`).

    The result is remembered per URL (a second call is free). Another database is "ok": its
    server checks itself.
    """
    if engine.dialect.name != "sqlite":
        return DatabaseState("ok", "")
    key = str(engine.url)
    state = _checked.get(key)
    if state is not None and (not full or key in _fully_checked or state.status == "damaged"):
        return state
    path = sqlite_path(key)
    before = fingerprint(path) if full and path is not None else None
    if full and (before is None or recorded_check(path) != before):
        return _scan(engine, before)
    state = _checked[key] = _check(engine, scan=False)
    if full:  # as the last scan that passed left it
        _fully_checked.add(key)
    return state


def full_check(engine: Engine, *, thorough: bool = False) -> DatabaseState:
    """Check a SQLite database now, every page (`calibrate check`), whatever was recorded; record the file's state when it passes.

    `thorough`: `PRAGMA integrity_check` (also that every index matches its table) instead of
    `quick_check`. The result replaces what this process remembered of the URL.
    """
    if engine.dialect.name != "sqlite":
        return DatabaseState("ok", "")
    path = sqlite_path(str(engine.url))
    return _scan(engine, fingerprint(path) if path is not None else None, "integrity_check" if thorough else "quick_check")


def _scan(engine: Engine, before: dict[str, int] | None, pragma: str = "quick_check") -> DatabaseState:
    """Check every page; remember the state, and record `before` (the file's state when the scan began) when it passed."""
    key = str(engine.url)
    state = _checked[key] = _check(engine, scan=True, pragma=pragma)
    _fully_checked.add(key)
    path = sqlite_path(key)
    if state.status != "damaged" and before is not None and path is not None:
        record_check(path, before)  # a write during the scan changed the file: the next start scans again
    return state


def damaged_by(engine: Engine, exc: BaseException) -> DatabaseState | None:
    """Return the "damaged" state when a statement failed because the SQLite file is damaged (SQLITE_CORRUPT, SQLITE_NOTADB).

    The start-up check reads the header and the schema, not every page (`check_database`): a
    damaged page elsewhere is found by the statement that reads it, and said as the check says it.
    """
    orig = getattr(exc, "orig", None) or exc
    code = getattr(orig, "sqlite_errorcode", None)
    if engine.dialect.name != "sqlite" or code is None or code & 0xFF not in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return None
    state = _damaged(engine.url.database or str(engine.url), orig)
    _checked[str(engine.url)] = state
    return state


def _check(engine: Engine, *, scan: bool, pragma: str = "quick_check") -> DatabaseState:
    where = engine.url.database or str(engine.url)
    try:
        raw = engine.raw_connection()
    except (DBAPIError, sqlite3.DatabaseError) as exc:  # the connect pragmas (journal_mode=WAL) read the file first
        return _damaged(where, exc)
    try:
        return _check_connection(raw.driver_connection, where, scan=scan, pragma=pragma)
    finally:
        raw.close()


def fingerprint(path: Path) -> dict[str, int] | None:
    """Return what says a SQLite file changed: its inode, size and modification time, and its -wal file's size and time."""
    try:
        stat = path.stat()
    except OSError:
        return None
    found = {"ino": stat.st_ino, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "wal_size": 0, "wal_mtime_ns": 0}
    with contextlib.suppress(OSError):
        wal = Path(f"{path}-wal").stat()
        if wal.st_size:  # an empty -wal file is none: SQLite makes one when it opens the file and removes it at the end
            found.update(wal_size=wal.st_size, wal_mtime_ns=wal.st_mtime_ns)
    return found


def recorded_check(path: Path) -> dict[str, int] | None:
    """Return the file state recorded when a full check of the database last passed (`record_check`), or None."""
    try:
        return json.loads(Path(f"{path}{CHECKED_SUFFIX}").read_text(encoding="utf-8"))["file"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def record_check(path: Path, found: dict[str, int]) -> None:
    """Record beside the database (`<database>-checked`, 0600) the file state a full check passed on.

    Not recorded where the folder takes no writes: the next `serve` scans again, as before.
    """
    record = Path(f"{path}{CHECKED_SUFFIX}")
    with contextlib.suppress(OSError):
        create_private_file(record)
        record.write_text(json.dumps({"file": found, "checked_at": datetime.now().astimezone().isoformat(timespec="seconds")}),
                          encoding="utf-8")


def _check_connection(connection, where: str, *, scan: bool = True, pragma: str = "quick_check") -> DatabaseState:
    try:
        cursor = connection.cursor()
        cursor.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the header and the schema: a few pages
        if scan:
            rows = [row[0] for row in cursor.execute(f"PRAGMA {pragma}").fetchall()]
            if rows != ["ok"]:
                found = [row for row in rows if not str(row).startswith("***")]  # "*** in database main ***" is a heading
                return _damaged(where, found[0] if found else rows[0] if rows else "no answer")
        version = cursor.execute("PRAGMA user_version").fetchone()[0]
        try:
            cursor.execute("BEGIN IMMEDIATE")
            cursor.execute(f"PRAGMA user_version = {int(version)}")
        except sqlite3.OperationalError as exc:
            if "readonly" in str(exc) or "read-only" in str(exc):
                return DatabaseState("read-only", f"the database {where} is read-only ({exc}): pages can be read but "
                                                  "nothing can be saved; make the file (and its folder) writable, or "
                                                  "open a writable copy")
            if "locked" not in str(exc):  # busy: another process is writing, so the file takes writes
                raise
        finally:
            if connection.in_transaction:
                cursor.execute("ROLLBACK")
    except sqlite3.DatabaseError as exc:
        return _damaged(where, exc)
    return DatabaseState("ok", "")


def _damaged(where: str, why: object) -> DatabaseState:
    reason = str(getattr(why, "orig", None) or why).splitlines()[0][:200]
    return DatabaseState("damaged", f"the database {where} is damaged ({reason}): stop using it, and restore it from "
                                    f"a backup (`sqlite3 {where} .recover` may save what is left)")


def is_sqlite(engine: Engine) -> bool:
    """Return whether the engine talks to SQLite."""
    return engine.dialect.name == "sqlite"


def dialect_insert(bind: Engine | Connection, table: Any) -> Any:
    """Return an INSERT of `table` in the bind's dialect, SQLite's or PostgreSQL's: the one with ON CONFLICT
    (`on_conflict_do_nothing` / `on_conflict_do_update`), which both databases take."""
    from sqlalchemy.dialects import postgresql, sqlite  # noqa: PLC0415 - only the writers that upsert need them

    return (postgresql if bind.dialect.name == "postgresql" else sqlite).insert(table)


_write_failures: dict[str, tuple[datetime, str]] = {}


def note_write(engine: Engine, failure: DBAPIError | None) -> None:
    """Remember whether this process's last write to the engine's database failed (None: it succeeded), for `/health`."""
    key = str(engine.url)
    if failure is None:
        if key in _write_failures:
            with _lock:
                _write_failures.pop(key, None)
        return
    reason = str(failure.orig if failure.orig is not None else failure).splitlines()[0][:200]
    with _lock:
        _write_failures[key] = (datetime.now().astimezone(), reason)


def last_write_failure(engine: Engine) -> tuple[datetime, str] | None:
    """Return (when, why) this process's last write to the database failed, or None when it succeeded (or none was made)."""
    return _write_failures.get(str(engine.url))


def _is_busy(exc: OperationalError) -> bool:
    """Return whether SQLite refused a transaction because another connection holds the database."""
    text = str(exc.orig).lower()
    return "database is locked" in text or "database is busy" in text


@contextlib.contextmanager
def write_session(engine: Engine, *, background: bool = False, give_back: Session | None = None) -> Iterator[Session]:
    """Yield the session of one write transaction; commit it when the block ends, roll it back on an exception.

    The one way to write, for the web, the commands and the workers (docs/architecture.md,
    "Database"; tests/test_write_path.py refuses any other):

    1. `give_back`: a read session the caller holds is closed first, so its pooled connection is
       back in the pool before this thread waits (threads that wait holding one could take the
       whole pool while the lock's holder waits for a connection).
    2. On SQLite, the writer lock of the database (`writer_lock`: this process's threads, then the
       flock every process on the file takes) is taken, as a background writer with `background`
       (waiting people's writes go first: the traces receiver and settler). A thread holding it
       already does not take it again. PostgreSQL: no lock here; the transaction's advisory lock
       makes writers take turns (`write_engine`).
    3. The transaction begins now with the write lock (`write_engine`: BEGIN IMMEDIATE, or
       PostgreSQL's advisory lock), so the block's reads and writes are one turn. Should SQLite
       still answer "database is locked" after its busy timeout (a writer outside the lock: the
       sqlite3 shell, a migration), it is tried once more before the error goes up.

    A write that fails on the database (not a race on a unique key, which is the caller's to
    retry) is remembered for `/health` (`note_write`); the next that succeeds clears it.
    """
    if give_back is not None:
        give_back.close()
    lock = writer_lock(engine.url.render_as_string(hide_password=False)) if is_sqlite(engine) else None
    if lock is None or lock.held_here():
        held: contextlib.AbstractContextManager = contextlib.nullcontext()
    else:
        held = lock.background if background else lock
    with held:
        try:
            session = _begun(engine)
        except DBAPIError as exc:
            note_write(engine, exc)
            raise
        with session:
            try:
                yield session
                session.commit()
            except DBAPIError as exc:
                session.rollback()
                if not isinstance(exc, IntegrityError):  # a race on a unique key is the caller's to retry, not the disk's
                    note_write(engine, exc)
                raise
            except BaseException:
                session.rollback()
                raise
        note_write(engine, None)


def _begun(engine: Engine) -> Session:
    """Return a session whose write transaction has begun (the lock taken); retry once on a busy SQLite database."""
    from sqlmodel import Session  # noqa: PLC0415 - SQLModel and the ORM load with the first write, not with every command

    for attempt in (1, 2):
        session = Session(write_engine(engine), expire_on_commit=False)
        try:
            session.connection()  # BEGIN IMMEDIATE (SQLite) or the advisory lock (PostgreSQL), now
            return session
        except OperationalError as exc:
            session.close()
            if not _is_busy(exc) or attempt == 2:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


class Statement:
    """A statement of the keystroke path, written once as text with `:name` parameters.

    On SQLite it runs on the driver's connection, inside the session's transaction: SQLAlchemy's
    own work per execution (cache lookup, result metadata, type processing) cost up to ten times
    the query (measured: an item's labels 100 µs against 8 µs; a label POST runs eight such
    statements). Elsewhere it runs through SQLAlchemy `text()` with the same parameters. Rows
    have the columns as attributes either way. `json_fields`: the columns read and the
    parameters written as JSON; datetime parameters are stored as SQLAlchemy stores them on SQLite.
    """

    def __init__(self, sql: str, *, json_fields: tuple[str, ...] = ()) -> None:
        self.sql = sql
        self.json_fields = frozenset(json_fields)
        clause = text(sql)
        params = [bindparam(name, type_=JSON) for name in json_fields if f":{name}" in sql]
        if params:
            clause = clause.bindparams(*params)
        if json_fields and sql.lstrip().upper().startswith("SELECT"):
            clause = clause.columns(**dict.fromkeys(json_fields, JSON))
        self.clause = clause
        self._row_types: dict[tuple[str, ...], type] = {}

    def _driver_params(self, params: dict) -> dict:
        out = {}
        for name, value in params.items():
            if isinstance(value, datetime):
                value = value.strftime("%Y-%m-%d %H:%M:%S.%f")
            elif name in self.json_fields and value is not None:
                value = json.dumps(value)
            out[name] = value
        return out

    def _row(self, cursor, values: tuple):
        names = tuple(column[0] for column in cursor.description)
        row_type = self._row_types.get(names)
        if row_type is None:
            row_type = self._row_types[names] = namedtuple("Row", names)
        if self.json_fields:
            values = tuple(json.loads(v) if v is not None and n in self.json_fields else v for n, v in zip(names, values, strict=True))
        return row_type(*values)

    def _run(self, session: Session, params: dict):
        connection = session.connection()
        if connection.dialect.name != "sqlite":
            return None, connection.execute(self.clause, params)
        cursor = connection.connection.driver_connection.cursor()
        cursor.row_factory = self._row
        cursor.execute(self.sql, self._driver_params(params))
        return cursor, None

    def all(self, session: Session, params: dict) -> list:
        """Return every row."""
        cursor, result = self._run(session, params)
        return result.all() if result is not None else cursor.fetchall()

    def first(self, session: Session, params: dict):
        """Return the first row, or None."""
        rows = self.all(session, params)
        return rows[0] if rows else None

    def scalar(self, session: Session, params: dict):
        """Return the first column of the first row (an INSERT's RETURNING id)."""
        row = self.first(session, params)
        return row[0] if row is not None else None

    def execute(self, session: Session, params: dict) -> None:
        """Run a statement that returns no rows."""
        cursor, _result = self._run(session, params)
        if cursor is not None:
            cursor.close()


READ_CHUNK_ROWS = 100_000  # at most this many rows a chunked read holds as Python objects at once
READ_CHUNK_BYTES = 48 * 2**20  # and about this much memory: a chunk of a wide read has fewer rows
ROW_BYTES, VALUE_BYTES = 56, 48  # a fetched row's tuple, and each of its values (an int or a short string object)


def chunk_rows(n_columns: int) -> int:
    """Return the rows a chunked read of `n_columns` columns fetches at once: sized by memory, not by count."""
    return max(1, min(READ_CHUNK_ROWS, READ_CHUNK_BYTES // (ROW_BYTES + VALUE_BYTES * n_columns)))


def _cursor_of(session: Session, query):
    """Return a DB-API cursor on which the Core `query` has run, on the session's connection (inside its transaction)."""
    conn = session.connection()
    compiled = query.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})  # IN lists expanded
    params = compiled.construct_params()
    if compiled.positional:
        params = tuple(params[name] for name in compiled.positiontup)
    cursor = conn.connection.dbapi_connection.cursor()
    cursor.execute(str(compiled), params)
    return cursor


def read_frame(session: Session, query, columns: list[str]):
    """Return a Core query's rows as a pandas DataFrame, read straight through the DB-API cursor.

    Reports read hundreds of thousands of rows; SQLAlchemy's per-row Result processing costs
    about ten times the query itself, and these columns need none of it. The statement runs on
    the session's connection, inside its transaction. JSON columns come back as the driver
    gives them (text on SQLite, parsed on PostgreSQL). 10^6 rows: `read_columns`.
    """
    import pandas as pd  # noqa: PLC0415 - a heavy library, loaded by the commands that read frames only

    cursor = _cursor_of(session, query)
    try:
        return pd.DataFrame(cursor.fetchall(), columns=columns)
    finally:
        cursor.close()


# The kinds of column `read_columns` builds (what it knows of a column saves pandas guessing it row by row).
INT = "int"  # never NULL, an integer: an int64 array
BOOL = "bool"  # never NULL, a boolean (0 or 1 on SQLite): a bool array
CATEGORY = "category"  # text of few distinct values (a label, a status; NULL allowed): a pandas Categorical
SHARED_TEXT = "shared_text"  # the same, handed back as text whose rows point at one string per distinct value
INFERRED = "inferred"  # anything else: typed as pandas types a DataFrame's column of those values


def read_columns(session: Session, query, columns: dict[str, str]):
    """Return a Core query's rows as a DataFrame built column by column: the report's read of 10^6 labels.

    `columns`: name → kind (INT, BOOL, CATEGORY, SHARED_TEXT, INFERRED) in the query's order. Rows are fetched
    `chunk_rows` at a time (about READ_CHUNK_BYTES of Python objects) and each chunk is turned into arrays before the
    next is fetched: an INT column straight into int64 (BOOL: bool; no object column to convert), a CATEGORY or
    SHARED_TEXT column into integer codes by one dict lookup per row (one table for the whole read, so no chunk's
    categories are united later), an INFERRED column as pandas would type it. 10^6 rows never hold millions of Python
    objects at once (peak memory grows with one chunk, not with the table), and the frame is the one `read_frame`
    would give with the categories sorted (SHARED_TEXT: text again, as read_frame's but without a string of its own
    per row).
    """
    import numpy as np  # noqa: PLC0415 - as read_frame
    import pandas as pd  # noqa: PLC0415

    numpy_types = {INT: np.int64, BOOL: np.bool_}  # the kinds fromiter reads straight
    names, kinds = list(columns), list(columns.values())
    getters = [itemgetter(i) for i in range(len(names))]
    parts: list[list] = [[] for _ in names]
    tables: list[dict] = [{} for _ in names]  # a coded column's value → its code, in the order first seen
    cursor = _cursor_of(session, query)
    try:
        while rows := cursor.fetchmany(chunk_rows(len(names))):
            n = len(rows)
            for kind, get, part, table in zip(kinds, getters, parts, tables, strict=True):
                if kind in numpy_types:
                    part.append(np.fromiter(map(get, rows), dtype=numpy_types[kind], count=n))
                elif kind == INFERRED:
                    part.append(pd.Series(list(map(get, rows))))
                else:
                    values = list(map(get, rows))
                    if values.count(None) == n:  # a column NULL on every row of the chunk (a key_text): no look-ups
                        part.append(np.full(n, table.setdefault(None, len(table)), dtype=np.int64))
                        continue
                    for value in set(values).difference(table):
                        table[value] = len(table)
                    part.append(np.fromiter(map(table.__getitem__, values), dtype=np.int64, count=n))
            del rows
    finally:
        cursor.close()
    if not parts[0]:
        return pd.DataFrame([], columns=names)
    data = {}
    for name, kind, part, table in zip(names, kinds, parts, tables, strict=True):
        if kind in numpy_types:
            data[name] = np.concatenate(part)
        elif kind == INFERRED:
            data[name] = pd.concat(part, ignore_index=True)
        else:
            data[name] = _decoded(np.concatenate(part), table, kind)
        part.clear()  # each column's chunks go as soon as it is whole: the read never holds the table twice
    return pd.DataFrame(data, copy=False)  # one block per column, none copied into a 2-D block


def _decoded(codes, table: dict, kind: str):
    """Return a coded column as a Categorical over its sorted values (NULL: missing), or, SHARED_TEXT, as text."""
    import numpy as np  # noqa: PLC0415 - as read_frame
    import pandas as pd  # noqa: PLC0415

    categories = sorted(value for value in table if value is not None)
    rank = {value: i for i, value in enumerate(categories)}
    recode = np.empty(len(table), dtype=np.int64)
    for value, code in table.items():
        recode[code] = rank.get(value, -1)
    codes = recode[codes]
    if kind == CATEGORY:
        return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(pd.Index(categories, dtype="str")))
    if not categories:  # a column of nothing but NULL: objects, as a plain read types it
        return pd.Series([None] * len(codes), dtype=object)
    text = np.array([*categories, None], dtype=object)  # code -1 (NULL) takes the last
    return pd.Series(text[codes])
