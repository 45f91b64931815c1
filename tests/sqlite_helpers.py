"""Helpers for tests that watch SQLite's locks from outside the code under test."""

from __future__ import annotations

import sqlite3


def write_lock_is_free(db_url: str) -> bool:
    """Return whether another connection could take SQLite's write lock right now (BEGIN IMMEDIATE, no waiting)."""
    connection = sqlite3.connect(db_url.removeprefix("sqlite:///"), timeout=0, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        connection.close()
