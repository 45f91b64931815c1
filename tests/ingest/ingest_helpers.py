"""Helpers shared by the import tests: run an import in a write transaction, dump the database."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from calibrate.db import write_session
from calibrate.ingest import import_file, import_in_chunks

DATA = Path(__file__).resolve().parent.parent / "data"
BAD, GOOD = DATA / "bad", DATA / "good"
# How run_import writes: "transaction" (the caller's one transaction, as the demo does) or
# "chunks" (an import batch of two records a transaction, as the CLI does); the `import_mode`
# fixture (tests/ingest/conftest.py) runs a test module in both.
MODE = {"name": "transaction"}


def run_import(engine, kind, path, dataset="d", **kwargs):
    """Import `path` as `kind` into `dataset`: in one write transaction, or in chunks of two records (MODE)."""
    if MODE["name"] == "chunks":
        return import_in_chunks(engine, kind, path, dataset=dataset, chunk_size=2, **kwargs)
    with write_session(engine) as session:
        return import_file(session, kind, path, dataset=dataset, **kwargs)


def dump(db_url: str) -> str:
    """Return the SQL dump of a SQLite database: equal dumps mean nothing changed."""
    con = sqlite3.connect(db_url.removeprefix("sqlite:///"))
    try:
        return "\n".join(con.iterdump())
    finally:
        con.close()


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path
