"""Importers that turn external RAG samples, experts' labels, judges' verdicts and TREC runs and qrels into calibrate's data.

`import_file` is the one entry point (the CLI's `calibrate import` and the web import call it).
The caller owns the transaction (`with write_session(engine) as session:`) and commits after
it returns; the import itself also runs inside a SAVEPOINT that it rolls back before raising
ImportRejected, so nothing of a bad file is ever written even by a caller that commits anyway.
Formats and rules: docs/formats.md.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlmodel import Session

from calibrate.ingest.labels import import_labels, import_verdicts
from calibrate.ingest.problems import ImportProblem, ImportRejected, ImportSummary, reject
from calibrate.ingest.readers import FORMATS, detect_format
from calibrate.ingest.samples import import_samples
from calibrate.ingest.trec import TrecSummary, import_trec

__all__ = ["FORMATS", "KINDS", "ImportProblem", "ImportRejected", "ImportSummary", "TrecSummary", "import_file"]

KINDS = ("samples", "labels", "verdicts", "run", "qrels")
TREC_KINDS = ("run", "qrels")


def import_file(session: Session, kind: str, path: str | Path, **options: Any) -> ImportSummary | TrecSummary:
    """Import a samples, labels, verdicts, TREC run or TREC qrels file into `dataset`, all or nothing.

    Raise ImportRejected (listing up to `max_errors` problems, each with its line and field,
    and naming the file) if anything in the file is wrong; then nothing of it has been
    written. `progress`, if given, is called with numbers of rows processed (each row counts
    once per pass). `where` (`metadata.FIELD=VALUE`, run and qrels only) limits the samples a
    TREC file applies to. Options: those of `_import_file`.
    """
    try:
        return _import_file(session, kind, path, **options)
    except ImportRejected as exc:
        exc.source = str(path)
        raise


def _import_file(session: Session, kind: str, path: str | Path, *, dataset: str, judge: str | None = None,
                 fmt: str | None = None, update: bool = False, description: str = "",
                 progress: Callable[[int], object] | None = None, max_errors: int = 50,
                 max_field_chars: int = 1_000_000, where: str | None = None) -> ImportSummary | TrecSummary:
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
    if kind in TREC_KINDS:

        savepoint = session.begin_nested()
        try:
            summary = import_trec(session, path, kind, dataset=dataset, where=where, progress=progress, max_errors=max_errors)
        except BaseException:
            savepoint.rollback()
            raise
        savepoint.commit()
        return summary
    fmt = detect_format(path, fmt)
    limits = {"progress": progress, "max_errors": max_errors, "max_field_chars": max_field_chars}
    savepoint = session.begin_nested()
    try:
        if kind == "samples":

            summary = import_samples(session, path, fmt, dataset=dataset, update=update,
                                     description=description, **limits)
        elif kind == "labels":

            summary = import_labels(session, path, fmt, dataset=dataset, **limits)
        else:

            summary = import_verdicts(session, path, fmt, dataset=dataset, judge=judge, **limits)
    except BaseException:
        savepoint.rollback()
        raise
    savepoint.commit()
    return summary
