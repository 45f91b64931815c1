"""Bulk INSERT of many rows of one table as tuples, through the DB-API's executemany.

`session.execute(insert(table), [dict, ...])` builds and processes one parameter dict per row
in Python; at a million rows (a 100,000-sample import with its contexts and claims) that
costs more than SQLite's own inserting. `BulkInsert` compiles the statement once for the
session's dialect and sends plain tuples; the caller converts the few values that need it
with `bind(column)`, the column type's own bind processor, so JSON and datetimes are stored
exactly as SQLAlchemy would store them. `in_parts` splits the ids of a query into IN lists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sqlalchemy import Table, bindparam, func, insert, select, text
from sqlmodel import Session

IN_LIST = 500  # values per IN (…) list: well under SQLite's limit of bound parameters


def in_parts(items: Sequence[Any], size: int = IN_LIST) -> Iterator[Sequence[Any]]:
    """Yield `items` in slices of at most `size` (the values of one IN (…) list, or one transaction's share)."""
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _identity(value: Any) -> Any:
    return value


class BulkInsert:
    """Collect rows of `table` (tuples in `columns` order) and insert them on `flush`."""

    def __init__(self, session: Session, table: Table, columns: Sequence[str]) -> None:
        self.session = session
        self.table = table
        self.columns = tuple(columns)
        self.dialect = session.get_bind().dialect
        compiled = insert(table).values({name: bindparam(name) for name in self.columns}).compile(dialect=self.dialect)
        self.sql = str(compiled)
        order = list(compiled.positiontup) if compiled.positional else None
        # Positional paramstyles (SQLite's "?") take tuples in the compiled order, named ones dicts.
        self.reorder = None if order is None or order == list(self.columns) else [self.columns.index(n) for n in order]
        self.named = order is None
        self.rows: list[tuple] = []

    def bind(self, column: str) -> Callable[[Any], Any]:
        """Return the function that turns a Python value into what the driver gets for `column`."""
        processor = self.table.c[column].type.dialect_impl(self.dialect).bind_processor(self.dialect)
        return processor or _identity

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, row: tuple) -> None:
        """Queue one row (the caller flushes, parents before children)."""
        self.rows.append(row)

    def extend(self, rows: Sequence[tuple]) -> None:
        """Queue rows (the caller flushes, parents before children)."""
        self.rows.extend(rows)

    def flush(self) -> None:
        """Insert the queued rows."""
        if not self.rows:
            return
        rows, self.rows = self.rows, []
        if self.named:
            params: list = [dict(zip(self.columns, row, strict=True)) for row in rows]
        elif self.reorder is not None:
            params = [tuple(row[i] for i in self.reorder) for row in rows]
        else:
            params = rows
        self.session.connection().exec_driver_sql(self.sql, params)


def first_free_id(session: Session, table: Table) -> int:
    """Return the id after the largest one in `table`, for rows the import numbers itself.

    Safe because the caller holds the write lock: on SQLite the transaction began IMMEDIATE;
    on PostgreSQL the table is locked here against concurrent inserts until commit.
    """

    if session.get_bind().dialect.name == "postgresql":
        session.execute(text(f'LOCK TABLE "{table.name}" IN SHARE ROW EXCLUSIVE MODE'))
    return (session.execute(select(func.max(table.c.id))).scalar() or 0) + 1


def sync_id_sequence(session: Session, table: Table) -> None:
    """After explicit ids were inserted, move PostgreSQL's id sequence past them (SQLite needs nothing)."""

    if session.get_bind().dialect.name == "postgresql":
        session.execute(text(
            f"SELECT setval(pg_get_serial_sequence('\"{table.name}\"', 'id'), "
            f'COALESCE((SELECT MAX(id) FROM "{table.name}"), 0) + 1, false)'
        ))
