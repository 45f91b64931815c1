"""Alembic migrations: `calibrate init` creates the database or upgrades it to the latest schema.

The environment lives in this package (no alembic.ini needed at run time), so an installed
calibrate can migrate its own database. Schema changes are written as Alembic revisions in
`versions/`; a revision may add, rename or reshape, but never drops a label (tests check it).
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

HERE = Path(__file__).resolve().parent


def alembic_config(engine: Engine) -> Config:
    """Return an Alembic config bound to an engine."""
    cfg = Config()
    cfg.set_main_option("script_location", str(HERE))
    cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Create or upgrade the schema of the database behind `engine` to `revision`."""
    command.upgrade(alembic_config(engine), revision)


def current_revision(engine: Engine) -> str | None:
    """Return the schema revision of the database, or None for an empty database."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str:
    """Return the newest revision this version of calibrate knows."""
    return ScriptDirectory(str(HERE)).get_current_head()
