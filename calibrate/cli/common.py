"""What every command shares: `--db`, the settings, the one place errors become exit codes, output.

Exit codes: 0 ok, 1 a check failed (`gate`) or a run was interrupted, 2 bad usage or bad input.
Every `CalibrateError` a domain call raises is caught here, in `db_option`'s wrapper, and
printed as one `error: …` line with exit code 2 (after its `details()`: an import's problems).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import click
from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError

from calibrate.db import check_database, damaged_by, get_engine, sqlite_path
from calibrate.errors import CalibrateError
from calibrate.migrations import current_revision, head_revision
from calibrate.settings import load_settings

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
Settings = dict[str, Any]
# Every option that takes a WHERE (calibrate/where.py) says so with these words and points at the one description.
WHERE_TERMS = ("terms joined by &, e.g. metadata.topic=iron&labelled or stream=audit&started_at>=2026-12-01 "
               "(docs/cli.md, \"WHERE expressions\")")
WHERE_HELP = f"Only the samples matching WHERE: {WHERE_TERMS}."


class BadInput(click.ClickException):
    """A one-line error about the user's input; exits with code 2."""

    exit_code = EXIT_BAD_INPUT

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def settings_for(ctx: click.Context, db_url: str | None) -> Settings:
    """Return the settings a command runs with: the caller's app's (tests, `flask --app calibrate`), else calibrate's own."""
    obj = ctx.find_root().obj
    if obj is not None and hasattr(obj, "load_app"):  # flask.cli.ScriptInfo: `flask --app calibrate <command>`
        obj = obj.load_app()
    settings = dict(obj.config) if obj is not None and hasattr(obj, "config") else load_settings()
    if db_url:
        settings["DATABASE_URL"] = db_url
    return settings


def db_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add `--db URL` to a command, pass it the settings, and turn a refusal into `error: …` and exit code 2."""

    @click.option("--db", "db_url", metavar="URL", envvar="CALIBRATE_DATABASE_URL",
                  help="Database URL (default: sqlite file in the instance folder).")
    @functools.wraps(func)
    def wrapper(*args: Any, db_url: str | None = None, **kwargs: Any) -> Any:
        settings = settings_for(click.get_current_context(), db_url)
        try:
            return func(settings, *args, **kwargs)
        except CalibrateError as exc:
            for line in exc.details():  # an import's problems, one a line
                click.echo(line, err=True)
            raise BadInput(exc.headline()) from exc
        except ArgumentError as exc:  # a --db that is not a database URL
            raise BadInput(f"--db: {exc}") from exc
        except DBAPIError as exc:  # the database refused (read-only, damaged, unreachable): one line, no traceback
            damaged = damaged_by(engine_of(settings), exc)  # a damaged page the start-up check does not read
            if damaged is not None:
                raise BadInput(damaged.message) from exc
            reason = str(exc.orig).splitlines()[0] if exc.orig is not None else str(exc).splitlines()[0]
            raise BadInput(f"the database {safe_url(settings)} refused: {reason}") from exc

    return wrapper


def engine_of(settings: Settings) -> Engine:
    """Return the engine of the settings' database."""
    return get_engine(settings["DATABASE_URL"], busy_timeout=settings["SQLITE_BUSY_TIMEOUT"])


def safe_url(settings: Settings) -> str:
    """Return the database URL without its password."""
    return make_url(settings["DATABASE_URL"]).render_as_string(hide_password=True)


def sqlite_file(settings: Settings) -> Path | None:
    """Return the file of a SQLite database URL (None for another database or an in-memory one)."""
    return sqlite_path(settings["DATABASE_URL"])


def checked_engine(settings: Settings, *, full: bool = False) -> Engine:
    """Return the engine after `check_database` (`full`: the scan of every page too, once per change of the file):
    a damaged file is refused (one line naming it), a read-only one said on stderr."""
    engine = engine_of(settings)
    state = check_database(engine, full=full)
    if state.status == "damaged":
        raise BadInput(state.message)
    if state.status == "read-only":
        click.echo(f"warning: {state.message}", err=True)
    return engine


def ready_engine(settings: Settings, *, full: bool = False) -> Engine:
    """Return the engine after checking the database exists and is at the current schema (`full`: `checked_engine`'s).

    A SQLite file that does not exist is never created here (a mistyped `--db sqlite:///…`
    path would otherwise leave an empty database behind): only `calibrate init` creates one.
    """
    path = sqlite_file(settings)
    if path is not None and not path.exists():
        raise BadInput(f"no database at {path}: check --db, or run `calibrate init` to create it")
    engine = checked_engine(settings, full=full)
    revision = current_revision(engine)
    if revision is None:
        raise BadInput(f"the database {safe_url(settings)} is empty: run `calibrate init` first")
    if revision != head_revision():
        raise BadInput(f"the database schema is at {revision}, this calibrate needs {head_revision()}: run `calibrate init` to upgrade")
    return engine


def write_output(text: str, output: Path | None, what: str) -> None:
    """Write a rendered document to a file (saying so on stderr) or to standard output."""
    if output:
        output.write_text(text, encoding="utf-8")
        click.echo(f"wrote {what} to {output}", err=True)
    else:
        click.echo(text, nl=not text.endswith("\n"))


def write_stream(chunks: Iterable[str], output: Path | None) -> None:
    """Write text as it comes, to standard output or to a file (FILE.part, renamed to FILE once whole: never half a file).

    Chunks are gathered to about 64 kB per write, so a generator of 10^5 lines costs neither memory nor 10^5 writes.
    """
    def batches() -> Iterator[str]:
        held: list[str] = []
        size = 0
        for chunk in chunks:
            held.append(chunk)
            size += len(chunk)
            if size >= 1 << 16:
                yield "".join(held)
                held, size = [], 0
        if held:
            yield "".join(held)

    if output is None:
        for batch in batches():
            click.echo(batch, nl=False)
        return
    part = output.with_name(output.name + ".part")
    try:
        with part.open("w", encoding="utf-8", newline="") as handle:
            for batch in batches():
                handle.write(batch)
        os.replace(part, output)
    except OSError as exc:
        raise BadInput(f"cannot write {output}: {exc.strerror or exc}") from exc
    finally:
        part.unlink(missing_ok=True)


class progress_bar:
    """A tqdm bar on an interactive terminal, silent otherwise (logs, CI, pipes); yields its update function or None."""

    def __init__(self, desc: str, unit: str = " rows") -> None:
        self.desc = desc
        self.unit = unit
        self.bar = None

    def __enter__(self) -> Callable[..., Any] | None:
        if sys.stderr.isatty():
            from tqdm import tqdm  # noqa: PLC0415 - only an interactive terminal shows a bar

            self.bar = tqdm(desc=self.desc, unit=self.unit, file=sys.stderr, mininterval=0.5)
            return self.bar.update
        return None

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()
