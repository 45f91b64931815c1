"""Importers that turn external RAG samples, experts' labels, judges' verdicts and TREC runs and qrels into calibrate's data.

Two entry points, one code path:

- `import_in_chunks(engine, …)` (the CLI's `calibrate import`): validates first, outside any
  write transaction, then writes the file as an import batch in short transactions of its
  own, invisible until its last small transaction publishes it (calibrate/ingest/batches.py),
  so web writes never wait long; a failure or a kill leaves nothing visible, and what it
  left is cleaned up. Unfinished batches of dead importers are removed before it starts.
- `import_file(session, …)`: everything inside the caller's one transaction (the demo,
  the tests); the caller commits after it returns. The import runs inside a SAVEPOINT that
  it rolls back before raising ImportRejected, so nothing of a bad file is ever written even
  by a caller that commits anyway.

TREC run and qrels files change id lists of existing samples and are small: one transaction.
Production traces (`import_traces`, calibrate/ingest/traces/) are sampled and mapped to samples,
then written by the samples import.
Formats and rules: docs/formats.md.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from calibrate.ingest.batches import CHUNK_SIZE, STALE_SECONDS, Writes, writes_to
from calibrate.ingest.labels import import_labels, import_verdicts
from calibrate.ingest.problems import ImportProblem, ImportRejected, ImportSummary, reject
from calibrate.ingest.readers import FORMATS, detect_format
from calibrate.ingest.samples import import_samples
from calibrate.ingest.traces import TracesSummary, import_traces
from calibrate.ingest.trec import TrecSummary, import_trec

__all__ = ["FORMATS", "KINDS", "ImportProblem", "ImportRejected", "ImportSummary", "TracesSummary", "TrecSummary",
           "import_file", "import_in_chunks", "import_traces"]

KINDS = ("samples", "labels", "verdicts", "run", "qrels")
TREC_KINDS = ("run", "qrels")


def import_file(session: Session, kind: str, path: str | Path, **options: Any) -> ImportSummary | TrecSummary:
    """Import a samples, labels, verdicts, TREC run or TREC qrels file into `dataset`, all or nothing, in `session`'s transaction.

    Raise ImportRejected (listing up to `max_errors` problems, each with its line and field,
    and naming the file) if anything in the file is wrong; then nothing of it has been
    written. `progress`, if given, is called with numbers of rows processed (each row counts
    once per pass). `where` (`metadata.FIELD=VALUE`, run and qrels only) limits the samples a
    TREC file applies to. Options: those of `_import_file`, and `chunk_size`.
    """
    return _import(session, kind, path, **options)


def import_in_chunks(engine: Engine, kind: str, path: str | Path, *, chunk_size: int = CHUNK_SIZE,
                     stale_seconds: int = STALE_SECONDS, **options: Any) -> ImportSummary | TrecSummary:
    """Import a file as `import_file` does, but in short write transactions of its own (see the module's docstring).

    `chunk_size`: records per write transaction (IMPORT_CHUNK_SIZE); `stale_seconds`: how long
    an unfinished batch's heartbeat may be silent before it counts as abandoned (IMPORT_STALE_SECONDS).
    """
    return _import(engine, kind, path, chunk_size=chunk_size, stale_seconds=stale_seconds, **options)


def _import(target: Engine | Session, kind: str, path: str | Path, *, chunk_size: int = CHUNK_SIZE,
            stale_seconds: int = STALE_SECONDS, **options: Any) -> ImportSummary | TrecSummary:
    try:
        _check(kind, path, **options)
        with writes_to(target, chunk_size=chunk_size, stale_seconds=stale_seconds) as writes:
            if kind in TREC_KINDS:  # a few id lists: one transaction
                with writes.chunk() as session:
                    return _import_trec(session, kind, path, **options)
            return _import_file(writes, kind, path, **options)
    except ImportRejected as exc:
        exc.source = str(path)
        raise


def _check(kind: str, path: str | Path, *, judge: str | None = None, fmt: str | None = None, update: bool = False,
           where: str | None = None, **_options: Any) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if kind != "verdicts" and judge is not None:
        raise ValueError("judge is for verdicts")
    if kind != "samples" and update:
        raise ValueError("update is for samples")
    if kind in TREC_KINDS and fmt is not None:
        raise ValueError("TREC run and qrels files have one format (whitespace-separated columns)")
    if kind not in TREC_KINDS and where is not None:
        raise ValueError("where is for TREC run and qrels files")
    if not Path(path).is_file():
        raise reject(f"{path}: no such file")


def _import_trec(session: Session, kind: str, path: str | Path, *, dataset: str, where: str | None = None,
                 progress: Callable[[int], object] | None = None, max_errors: int = 50, **_options: Any) -> TrecSummary:
    return import_trec(session, path, kind, dataset=dataset, where=where, progress=progress, max_errors=max_errors)


def _import_file(writes: Writes, kind: str, path: str | Path, *, dataset: str, judge: str | None = None,
                 fmt: str | None = None, update: bool = False, description: str = "",
                 progress: Callable[[int], object] | None = None, max_errors: int = 50,
                 max_field_chars: int = 1_000_000, where: str | None = None) -> ImportSummary:
    fmt = detect_format(path, fmt)
    limits = {"progress": progress, "max_errors": max_errors, "max_field_chars": max_field_chars}
    if kind == "samples":
        return import_samples(writes, path, fmt, dataset=dataset, update=update, description=description, **limits)
    if kind == "labels":
        return import_labels(writes, path, fmt, dataset=dataset, **limits)
    return import_verdicts(writes, path, fmt, dataset=dataset, judge=judge, **limits)
