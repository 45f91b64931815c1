"""Alembic migrations: `calibrate init` creates the database or upgrades it to the latest schema.

The environment lives in this package (no alembic.ini needed at run time), so an installed
calibrate can migrate its own database. Schema changes are written as Alembic revisions in
`versions/`, one file each, named `NNNN_what.py` with `revision = 'NNNN'` and
`down_revision` the one before; a revision may add, rename or reshape, but never drops a
label (tests check it).

Every command checks the database's revision before it runs; that check must not cost the
import of Alembic (a few hundred milliseconds), so `head_revision` reads the file names of
`versions/` and `current_revision` reads `alembic_version` with plain SQL. A test checks
that both agree with Alembic's own answers. Only `upgrade` imports Alembic.
"""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy import Engine, inspect, text

HERE = Path(__file__).resolve().parent
REVISION_FILE = re.compile(r"^(\d{4})_\w+\.py$")


def alembic_config(engine: Engine):
    """Return an Alembic config bound to an engine."""
    from alembic.config import Config  # noqa: PLC0415 - Alembic loads for `calibrate init` only

    cfg = Config()
    cfg.set_main_option("script_location", str(HERE))
    cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Create or upgrade the schema of the database behind `engine` to `revision`."""
    from alembic import command  # noqa: PLC0415 - Alembic loads for `calibrate init` only

    command.upgrade(alembic_config(engine), revision)


def current_revision(engine: Engine) -> str | None:
    """Return the schema revision of the database, or None for an empty database."""
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def head_revision() -> str:
    """Return the newest revision this version of calibrate knows (the highest NNNN of versions/)."""
    numbers = [match.group(1) for path in (HERE / "versions").iterdir() if (match := REVISION_FILE.match(path.name))]
    return max(numbers)
