"""Alembic environment: runs revisions against the engine handed over by calibrate.migrations."""

from alembic import context
from sqlalchemy import create_engine
from sqlmodel import SQLModel

import calibrate.models  # noqa: F401  (registers the tables on SQLModel.metadata)

config = context.config
target_metadata = SQLModel.metadata


def run_migrations_online() -> None:
    engine = config.attributes.get("engine")
    if engine is None:  # the alembic command line: take the URL from its ini file

        engine = create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            # SQLite cannot ALTER most things: batch mode copies the table instead.
            render_as_batch=True,
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()


run_migrations_online()
