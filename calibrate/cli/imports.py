"""`calibrate import samples|labels|verdicts|run|qrels FILE`: all or nothing; `calibrate cleanup`."""

from __future__ import annotations

from pathlib import Path

import click
from sqlmodel import Session

from calibrate import lazy
from calibrate.cli.common import WHERE_HELP, BadInput, Settings, db_option, progress_bar, ready_engine

# Loaded when the command runs, not for its --help.
ingest = lazy.module("calibrate.ingest")
batches = lazy.module("calibrate.ingest.batches")


@click.command("import")
@click.argument("kind", type=click.Choice(["samples", "labels", "verdicts", "run", "qrels"]))
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--dataset", required=True, help="Dataset name (created by a samples import).")
@click.option("--judge", help="Judge name for verdicts (else each line's `judge`).")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "json", "csv"]), help="File format (default: from the extension).")
@click.option("--update", is_flag=True, help="Samples: replace changed samples with the same id (labels kept, flagged).")
@click.option("--description", default="", help="Samples: description of a new dataset.")
@click.option("--where", metavar="WHERE", help="Run, qrels: " + WHERE_HELP)
@db_option
def import_command(settings: Settings, kind: str, file: Path, dataset: str, judge: str | None, fmt: str | None, update: bool,
                   description: str, where: str | None) -> None:
    """Import samples, labels or verdicts (JSONL, JSON, CSV), or a TREC run or qrels file (all or nothing)."""
    if kind != "verdicts" and judge:
        raise click.UsageError("--judge is for verdicts")
    if kind != "samples" and update:
        raise click.UsageError("--update is for samples")
    if kind in ("run", "qrels") and fmt:
        raise click.UsageError("--format is for samples, labels and verdicts: TREC files have one format")
    if kind not in ("run", "qrels") and where:
        raise click.UsageError("--where is for run and qrels files")
    if not file.exists():
        raise BadInput(f"{file}: no such file")
    engine = ready_engine(settings)
    # An import reads the file twice (validate everything, then write): the bar counts both passes.
    # It writes in short transactions of IMPORT_CHUNK_SIZE records, published at the end.
    with progress_bar(f"importing {kind} (validate, then write)") as progress:
        summary = ingest.import_in_chunks(
            engine, kind, file, dataset=dataset, judge=judge, fmt=fmt, update=update,
            description=description, progress=progress,
            max_errors=settings["IMPORT_MAX_ERRORS"], max_field_chars=settings["IMPORT_MAX_FIELD_CHARS"],
            where=where, chunk_size=settings["IMPORT_CHUNK_SIZE"], stale_seconds=settings["IMPORT_STALE_SECONDS"],
        )
    click.echo(summary.line())
    created = getattr(summary, "created_accounts", [])
    if created:
        click.echo(created_accounts_line(created))


def created_accounts_line(names: list[str], *, shown: int = 10) -> str:
    """Name the annotator accounts an import created (the first `shown`), and how to give one a password."""
    listed = ", ".join(names[:shown]) + (f", … ({len(names) - shown:,} more)" if len(names) > shown else "")
    noun = "account" if len(names) == 1 else "accounts"
    return (f"created {len(names):,} annotator {noun} without passwords: {listed} "
            f"(set one with `calibrate users password NAME`)")


@click.command("cleanup")
@db_option
def cleanup_command(settings: Settings) -> None:
    """Remove what unfinished imports left (killed or crashed: never visible); list imports still running."""
    engine = ready_engine(settings)
    removed = batches.cleanup(engine, stale_seconds=settings["IMPORT_STALE_SECONDS"])
    with Session(engine) as session:
        running = batches.unfinished(session)
    for batch in running:
        click.echo(f"import {batch.id} of {batch.kind} into {batch.dataset!r} is running ({batch.owner}); left alone")
    click.echo(f"removed {len(removed)} unfinished import{'' if len(removed) == 1 else 's'}"
               + (f" ({', '.join(map(str, removed))})" if removed else ""))
