"""`calibrate export labels`, `calibrate export verdicts` and `calibrate export samples`: what the
experts and the judges made, and the samples with their current claims, each in the format its
import reads; `calibrate export assignments`: who was given which sample in which stream.

`-o FILE` without `--format` takes the format from the extension (.jsonl, .ndjson → jsonl,
.csv → csv); a `--format` that contradicts the extension is refused, so a `.csv` file never
holds JSONL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click
from sqlmodel import Session

from calibrate import lazy
from calibrate.cli.common import WHERE_HELP, Settings, db_option, ready_engine, write_output, write_stream

# Loaded when the command runs, not for its --help (the split check brings pandas).
export = lazy.module("calibrate.annotation.export")
samples_export = lazy.module("calibrate.ingest.samples_export")
readers = lazy.module("calibrate.ingest.readers")


@click.group("export")
def export_group() -> None:
    """Write labels, verdicts, samples or the experts' assignments to a file."""


def _text(fmt: str, fields: tuple[str, ...], rows: list[dict], cell) -> str:
    """Return the rows as JSONL, or as CSV with a header and `cell(row, name)` per column (`_lines`, joined)."""
    return "".join(_lines(fmt, fields, rows, cell))


def _lines(fmt: str, fields: tuple[str, ...], rows, cell) -> Iterator[str]:
    """Yield the rows (any iterable, read once) as JSONL lines, or as CSV lines after a header.

    CSV cells a spreadsheet would run as formulas (`=`, `+`, `-`, `@` …, also after a CR or LF
    inside the cell) get a leading ' and each row says so in a last column `csv_escape`, which
    `calibrate import` reads to take the ' off again; cells with a comma, quote, CR or LF are
    quoted: the file is safe to open and still imports back exactly (docs/formats.md).
    """
    if fmt == "jsonl":
        return (json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return readers.csv_lines(fields, ([cell(row, name) for name in fields] for row in rows))


FORMAT_OF_SUFFIX = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}


def output_format(fmt: str | None, output: Path | None) -> str:
    """Return the format to write: `--format`, else the output's extension, else jsonl; refuse a contradiction."""
    implied = FORMAT_OF_SUFFIX.get(output.suffix.lower()) if output is not None else None
    if fmt is None:
        return implied or "jsonl"
    if implied is not None and implied != fmt:
        raise click.UsageError(f"--format {fmt} contradicts the extension of {output.name!r} ({implied}): "
                               f"leave --format out, or name the file .{fmt}")
    return fmt


def _cell(value) -> str:
    """Return a field's CSV text: lists as JSON, true/false, nothing for None."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, list) else str(value)


FORMAT_OPTION = click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]),
                             help="jsonl or csv; default: from the extension of -o, else jsonl.")
WHERE_OPTION = click.option("--where", metavar="WHERE", help=WHERE_HELP)


@export_group.command("labels")
@click.option("--dataset", required=True, help="Dataset whose labels to write.")
@click.option("--task", "tasks", multiple=True, metavar="T", help="Only this task (repeatable); default every task.")
@click.option("--split", help="Only the samples of this split.")
@click.option("--full", is_flag=True,
              help="Add evidence, guideline version, flags, source and timestamps, and include adjudicated and stale "
                   "labels (an archive: the labels import does not read these fields).")
@WHERE_OPTION
@FORMAT_OPTION
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to a file instead of standard output.")
@db_option
def export_labels_command(settings: Settings, dataset: str, tasks: tuple[str, ...], split: str | None, full: bool,
                          where: str | None, fmt: str | None, output: Path | None) -> None:
    """Write a dataset's labels in the format `calibrate import labels` reads."""
    fmt = output_format(fmt, output)
    with Session(ready_engine(settings)) as session:
        result = export.export_labels(session, dataset, tasks=list(tasks) or None, split=split, full=full, where=where)
    text = _text(fmt, result.fields, result.rows, lambda row, name: _cell(row.get(name)))
    write_output(text, output, f"{len(result.rows)} labels")
    click.echo(result.summary(), err=True)


@export_group.command("verdicts")
@click.option("--dataset", required=True, help="Dataset whose verdicts to write.")
@click.option("--judge", help="Only this judge's verdicts; default every judge's.")
@click.option("--task", "tasks", multiple=True, metavar="T", help="Only this task (repeatable); default every task.")
@WHERE_OPTION
@FORMAT_OPTION
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to a file instead of standard output.")
@db_option
def export_verdicts_command(settings: Settings, dataset: str, judge: str | None, tasks: tuple[str, ...], where: str | None,
                            fmt: str | None, output: Path | None) -> None:
    """Write judges' verdicts on a dataset in the format `calibrate import verdicts` reads."""
    fmt = output_format(fmt, output)
    with Session(ready_engine(settings)) as session:
        result = export.export_verdicts(session, dataset, judge=judge, tasks=list(tasks) or None, where=where)
    text = _text(fmt, result.fields, result.rows, lambda row, name: _cell(row.get(name)))
    write_output(text, output, f"{len(result.rows)} verdicts")
    click.echo(result.summary(), err=True)


@export_group.command("samples")
@click.option("--dataset", required=True, help="Dataset whose samples to write.")
@click.option("--split", help="Only the samples of this split.")
@WHERE_OPTION
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path), help="File to write.")
@FORMAT_OPTION
@db_option
def export_samples_command(settings: Settings, dataset: str, split: str | None, where: str | None, output: Path,
                           fmt: str | None) -> None:
    """Write a dataset's samples with their current claims and claim source, in the format `calibrate import samples` reads."""
    fmt = output_format(fmt, output)
    with Session(ready_engine(settings)) as session:
        result = samples_export.export_samples(session, dataset, split=split, where=where)
    # JSON-valued fields are JSON text; `calibrate import samples` reads back exactly what was written.
    text = _text(fmt, result.fields, result.rows, lambda row, name: "" if name not in row else json.dumps(
        row[name], ensure_ascii=False) if name in samples_export.STRUCTURED else str(row[name]))
    write_output(text, output, f"{len(result.rows)} samples")
    click.echo(result.summary(), err=True)


@export_group.command("assignments")
@click.option("--dataset", required=True, help="Dataset whose assignments to write.")
@click.option("--stream", metavar="audit|triage", help="Only this production stream's assignments; default every assignment.")
@WHERE_OPTION
@FORMAT_OPTION
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to a file instead of standard output.")
@db_option
def export_assignments_command(settings: Settings, dataset: str, stream: str | None, where: str | None, fmt: str | None,
                               output: Path | None) -> None:
    """Write who was given which sample in which stream (audit, triage, none), with audit_prob and whether it is labelled."""
    fmt = output_format(fmt, output)
    with Session(ready_engine(settings)) as session:
        result = export.export_assignments(session, dataset, stream=stream, where=where)
        write_stream(_lines(fmt, result.fields, result.rows(), lambda row, name: _cell(row[name])), output)
    if output is not None:
        click.echo(f"wrote {result.n_rows} assignments to {output}", err=True)
    click.echo(result.summary(), err=True)
