"""Import batches: a file written in short transactions, invisible until one small transaction publishes it.

One write transaction for a whole file held SQLite's write lock for as long as the import
took (a 200,000-sample import: annotators' saves failed after the 10 s busy timeout). Now an
import validates the whole file first, outside any write transaction, and then writes it as
an `ImportBatch` in chunks of `IMPORT_CHUNK_SIZE` records, each chunk its own short write
transaction, so a web write waits at most about one chunk. What a chunk writes is invisible:

- new samples go into a hidden dataset (`Dataset.import_batch_id` set): the dataset itself
  when it is new, else a staging dataset whose samples move into the real one at the end;
- an `--update`'s new contexts and claims are written inactive, its new sample fields into a
  hidden copy of the sample, and every change it will make is an `ImportStep`;
- labels and verdicts go into `StagedLabel` / `StagedVerdict` rows.

The last transaction publishes the batch: it unhides the new dataset (or moves the staged
samples, one UPDATE), applies the steps, or upserts the staged labels and verdicts with a few
set-based statements (no Python per row), and marks the batch published. The whole file lands
or nothing does: a failure, Ctrl+C or `kill -9` before that leaves only invisible rows, which
`cleanup` deletes (in chunks) at the start of the next import, by `calibrate init`, when
`calibrate serve` starts, and with `calibrate cleanup`. A batch is left alone while its owner
lives: same host and its process still running, or a heartbeat (every chunk) younger than
`IMPORT_STALE_SECONDS`.

`InTransaction` runs the same code inside the caller's one transaction (the demo, the tests,
`import_file(session, …)`): chunks are flushes and the publish happens before the caller commits.
`writes_to(target)` chooses between the two, for every import (files, traces, settled spans).
One batch per dataset at a time: a second import into a dataset that is being imported is refused.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Engine, delete, update
from sqlmodel import Session, col, select

from calibrate.db import write_session
from calibrate.ingest.problems import reject
from calibrate.models import (
    Claim,
    Context,
    Dataset,
    ImportBatch,
    ImportStep,
    Response,
    Sample,
    StagedLabel,
    StagedVerdict,
)

CHUNK_SIZE = 1000  # records per write transaction (IMPORT_CHUNK_SIZE)
STALE_SECONDS = 600  # a batch whose heartbeat is older belongs to nobody (IMPORT_STALE_SECONDS)
DELETE_CHUNK = 2000  # rows per transaction when an unfinished batch is cleaned up


def now_seconds() -> int:
    return int(time.time())


def this_owner() -> str:
    """Return "host:pid" of this process, as a batch records its owner."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Writes:
    """Where an import writes (see the module's docstring)."""

    chunk_size = CHUNK_SIZE
    batch: ImportBatch | None = None

    def read(self) -> contextlib.AbstractContextManager[Session]:
        raise NotImplementedError

    def chunk(self) -> contextlib.AbstractContextManager[Session]:
        raise NotImplementedError

    def end_read(self, session: Session) -> None:
        """End a read session's transaction (its snapshot), so a long validation holds none."""

    def open_batch(self, kind: str, dataset: str, source: str) -> ImportBatch:
        """Start this import's batch (refused while another import writes into `dataset`)."""
        with self.chunk() as session:
            self.batch = start_batch(session, kind, dataset, source)
        return self.batch

    def publish(self) -> contextlib.AbstractContextManager[Session]:
        """The transaction that makes the batch visible (the caller's, or one short one)."""
        return self.chunk()

    def abandon(self) -> None:
        """Remove what this import wrote (it failed before it was published)."""
        raise NotImplementedError

    def finish(self) -> None:
        """Delete the staging rows of the published batch (invisible already)."""
        raise NotImplementedError


class InTransaction(Writes):
    """Every chunk and the publish in the caller's transaction (rolled back by the caller's savepoint on failure)."""

    def __init__(self, session: Session, *, chunk_size: int = CHUNK_SIZE) -> None:
        self.session = session
        self.chunk_size = chunk_size

    @contextlib.contextmanager
    def read(self) -> Iterator[Session]:
        yield self.session

    @contextlib.contextmanager
    def chunk(self) -> Iterator[Session]:
        yield self.session
        self.session.flush()

    def abandon(self) -> None:
        pass  # import_file rolls the savepoint back

    def finish(self) -> None:
        if self.batch is not None:
            delete_batch_rows(self.session, self.batch.id, limit=None)


class InChunks(Writes):
    """Each chunk its own short write transaction on `engine`; reads in short read transactions."""

    def __init__(self, engine: Engine, *, chunk_size: int = CHUNK_SIZE) -> None:
        self.engine = engine
        self.chunk_size = max(1, int(chunk_size))

    @contextlib.contextmanager
    def read(self) -> Iterator[Session]:
        with Session(self.engine) as session:
            yield session

    def end_read(self, session: Session) -> None:
        session.rollback()

    @contextlib.contextmanager
    def chunk(self) -> Iterator[Session]:
        with write_session(self.engine) as session:
            yield session
            if self.batch is not None and self.batch.id is not None:
                session.execute(update(ImportBatch).where(col(ImportBatch.id) == self.batch.id)
                                .values(heartbeat=now_seconds()))

    def abandon(self) -> None:
        if self.batch is not None:
            remove_batch(self.engine, self.batch.id)

    def finish(self) -> None:
        if self.batch is not None:
            remove_batch(self.engine, self.batch.id)


@contextlib.contextmanager
def writes_to(target: Engine | Session, *, chunk_size: int = CHUNK_SIZE, stale_seconds: int = STALE_SECONDS) -> Iterator[Writes]:
    """Yield where an import into `target` writes: the one choice between a caller's transaction and short ones.

    A Session: everything in its transaction (`InTransaction`), inside a savepoint that an error
    rolls back, so nothing of a refused file is written even by a caller that commits anyway.
    An Engine: short write transactions of the import's own (`InChunks`), after what dead imports
    left is cleaned up.
    """
    if isinstance(target, Session):
        with target.begin_nested():
            yield InTransaction(target, chunk_size=chunk_size)
        return
    cleanup(target, stale_seconds=stale_seconds)
    yield InChunks(target, chunk_size=chunk_size)


# --------------------------------------------------------------------------- batches


def start_batch(session: Session, kind: str, dataset: str, source: str) -> ImportBatch:
    """Insert a batch for an import into `dataset`; refuse while another live batch writes into it."""
    other = session.exec(select(ImportBatch).where(col(ImportBatch.dataset) == dataset,
                                                   col(ImportBatch.state) == "writing")).first()
    if other is not None:
        raise reject(f"dataset {dataset!r} is being imported by another import (batch {other.id}, a {other.kind} "
                     f"import by {other.owner}): wait for it to finish; if it was killed, `calibrate cleanup` "
                     "removes what it left", field="dataset")
    now = now_seconds()
    batch = ImportBatch(kind=kind, dataset=dataset, source=str(source)[:1000], owner=this_owner()[:300], started=now,
                        heartbeat=now)
    session.add(batch)
    session.flush()
    return batch


def hidden_dataset(session: Session, batch: ImportBatch, name: str, *, source: str, description: str) -> Dataset:
    """Create the hidden dataset a samples batch writes into: the dataset itself when it is new, else a staging one."""
    existing = session.exec(select(Dataset).where(col(Dataset.name) == name)).first()
    # A name no import accepts (it starts with a control character), unique to the batch.
    staging_name = name if existing is None else f"\x1f{batch.id} {name}"[:200]
    dataset = Dataset(name=staging_name, source=source, description=description, import_batch_id=batch.id)
    session.add(dataset)
    session.flush()
    return dataset


def is_alive(batch: ImportBatch, *, now: int | None = None, stale_seconds: int = STALE_SECONDS) -> bool:
    """Return whether a batch's importing process may still be running (see the module's docstring)."""
    now = now_seconds() if now is None else now
    host, _, pid = batch.owner.rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # another user's process: alive
        except OverflowError:
            return False
    return now - batch.heartbeat <= stale_seconds


def cleanup(engine: Engine, *, stale_seconds: int = STALE_SECONDS) -> list[int]:
    """Remove every batch left unfinished by a process that is gone; return their ids.

    Published batches whose staging rows were not deleted yet are finished too. Each chunk of
    deleted rows is its own short write transaction.
    """
    with Session(engine) as session:
        batches = list(session.exec(select(ImportBatch)).all())
    removed = []
    for batch in batches:
        if batch.state == "writing" and is_alive(batch, stale_seconds=stale_seconds):
            continue
        remove_batch(engine, batch.id)
        removed.append(batch.id)
    return removed


def remove_batch(engine: Engine, batch_id: int) -> None:
    """Delete what a batch wrote that is not published (everything, when it is not), chunk by chunk, then the batch."""
    while True:
        with write_session(engine) as session:
            if delete_batch_rows(session, batch_id, limit=DELETE_CHUNK) == 0:
                break


def delete_batch_rows(session: Session, batch_id: int, *, limit: int | None) -> int:
    """Delete up to `limit` rows of a batch's staging (None: all); delete the batch when nothing is left. Return how many."""
    batch = session.get(ImportBatch, batch_id)
    if batch is None:
        return 0
    done = 0
    for model in (StagedLabel, StagedVerdict):
        done += _delete_some(session, model, col(model.batch_id) == batch_id, limit)
        if limit is not None and done >= limit:
            return done
    if batch.state == "writing":
        # Inactive rows an --update wrote, and the hidden datasets' samples with their rows.
        for target, model in (("context", Context), ("claim", Claim)):
            ids = select(ImportStep.row_id).where(col(ImportStep.batch_id) == batch_id, col(ImportStep.action) == "activate",
                                                   col(ImportStep.target) == target)
            done += _delete_some(session, model, col(model.id).in_(ids) & col(model.active).is_(False), limit)
            if limit is not None and done >= limit:
                return done
        for dataset_id in session.exec(select(Dataset.id).where(col(Dataset.import_batch_id) == batch_id)).all():
            done += _delete_samples(session, dataset_id, limit)
            if limit is not None and done >= limit:
                return done
        done += session.execute(delete(Dataset).where(col(Dataset.import_batch_id) == batch_id)).rowcount
    done += _delete_some(session, ImportStep, col(ImportStep.batch_id) == batch_id, limit)
    if limit is not None and done >= limit:
        return done
    session.execute(delete(ImportBatch).where(col(ImportBatch.id) == batch_id))
    return done + 1


def _delete_some(session: Session, model: Any, condition: Any, limit: int | None) -> int:
    if limit is None:
        return session.execute(delete(model).where(condition)).rowcount
    ids = select(model.id).where(condition).limit(limit)
    return session.execute(delete(model).where(col(model.id).in_(ids))).rowcount


def _delete_samples(session: Session, dataset_id: int, limit: int | None) -> int:
    """Delete up to `limit` samples of a hidden dataset, with their contexts, claims and responses."""
    query = select(Sample.id).where(col(Sample.dataset_id) == dataset_id).order_by(Sample.id)
    ids = list(session.exec(query if limit is None else query.limit(max(1, limit // 12))).all())
    if not ids:
        return 0
    done = 0
    for model in (Context, Claim, Response):
        done += session.execute(delete(model).where(col(model.sample_id).in_(ids))).rowcount
    done += session.execute(delete(Sample).where(col(Sample.id).in_(ids))).rowcount
    return done


def unfinished(session: Session) -> list[ImportBatch]:
    """Return the batches not yet cleaned up (for `calibrate cleanup`)."""
    return list(session.exec(select(ImportBatch).order_by(ImportBatch.id)).all())
