"""`calibrate init`: create the database, or upgrade its schema; `calibrate check`: scan every page of it."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from calibrate import lazy
from calibrate.cli.common import (
    EXIT_FAILED,
    BadInput,
    Settings,
    checked_engine,
    db_option,
    engine_of,
    safe_url,
    sqlite_file,
)
from calibrate.db import full_check, write_session
from calibrate.migrations import current_revision, head_revision, upgrade
from calibrate.settings import ensure_instance_folder
from calibrate.tasks import ensure_builtin_tasks

batches = lazy.module("calibrate.ingest.batches")


def init_database(settings: Settings) -> str:
    """Create or upgrade the schema and the built-in tasks; return a one-line description."""
    path = sqlite_file(settings)
    if path is not None:
        instance = Path(settings["INSTANCE_PATH"])
        if path.parent.resolve() == instance.resolve():
            ensure_instance_folder(instance)  # the default database: its folder is calibrate's to make
        elif not path.parent.is_dir():
            raise BadInput(f"no folder {path.parent} for the database: create it first, or check --db")
    engine = checked_engine(settings, full=True) if path is None or path.exists() else engine_of(settings)
    before = current_revision(engine)
    upgrade(engine)
    with write_session(engine) as session:
        ensure_builtin_tasks(session)
    batches.cleanup(engine, stale_seconds=settings["IMPORT_STALE_SECONDS"])  # what killed imports left (never visible)
    head = head_revision()
    if before is None:
        return f"created database {safe_url(settings)} (schema {head})"
    if before != head:
        return f"upgraded database {safe_url(settings)} from schema {before} to {head}"
    return f"database {safe_url(settings)} is up to date (schema {head})"


@click.command("init")
@db_option
def init_command(settings: Settings) -> None:
    """Create the database, or upgrade it to the current schema (labels are never dropped)."""
    click.echo(init_database(settings))


@click.command("check")
@click.option("--thorough", is_flag=True,
              help="PRAGMA integrity_check (also that every index matches its table, slower) instead of quick_check.")
@db_option
def check_command(settings: Settings, thorough: bool) -> None:
    """Check every page of the database now (the start-up check reads its header and schema only)."""
    path = sqlite_file(settings)
    if path is None:
        engine = engine_of(settings)
        if engine.dialect.name != "sqlite":
            click.echo(f"the database {safe_url(settings)} is {engine.dialect.name}: its server checks its own pages; "
                       f"schema {current_revision(engine) or 'none (run calibrate init)'}")
            return
        raise BadInput(f"the database {safe_url(settings)} has no file to check (an in-memory or file: URI database)")
    if not path.exists():
        raise BadInput(f"no database at {path}: check --db, or run `calibrate init` to create it")
    started = time.perf_counter()
    state = full_check(engine_of(settings), thorough=thorough)
    if state.status == "damaged":
        click.echo(f"error: {state.message}", err=True)
        sys.exit(EXIT_FAILED)
    seconds = time.perf_counter() - started
    if state.status == "read-only":
        click.echo(f"warning: {state.message}", err=True)
    revision = current_revision(engine_of(settings))
    schema = ("none (run calibrate init)" if revision is None else
              f"{revision}, current" if revision == head_revision() else f"{revision}, not {head_revision()}: run calibrate init")
    click.echo(f"the database {path} is ok: {'integrity_check' if thorough else 'quick_check'} read "
               f"{path.stat().st_size / 1e6:,.1f} MB in {seconds:.2f} s; schema {schema}")
