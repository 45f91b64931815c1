"""`calibrate init`: create the database, or upgrade its schema."""

from __future__ import annotations

from pathlib import Path

import click

from calibrate import lazy
from calibrate.cli.common import BadInput, Settings, checked_engine, db_option, engine_of, safe_url, sqlite_file
from calibrate.db import write_session
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
    engine = checked_engine(settings) if path is None or path.exists() else engine_of(settings)
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
