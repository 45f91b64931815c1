"""`calibrate traces import FILE… --dataset D`: production traces (OTLP, Langfuse) in, sampled, as samples."""

from __future__ import annotations

import json
from pathlib import Path

import click

from calibrate import lazy
from calibrate.cli.common import BadInput, Settings, db_option, ready_engine

# Loaded when the command runs, not for its --help.
traces = lazy.module("calibrate.ingest.traces")


@click.group("traces")
def traces_group() -> None:
    """Import production traces (OpenTelemetry/OpenInference, GenAI, Langfuse) as sampled samples."""


@traces_group.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--dataset", required=True, help="Dataset the sampled traces become samples of (created if missing).")
@click.option("--format", "fmt", default="auto", show_default=True,
              type=click.Choice(["auto", "otlp-json", "otlp-jsonl", "otlp-proto", "langfuse"]),
              help="Trace file format (auto: by content).")
@click.option("--feedback", type=click.Path(dir_okay=False, path_type=Path),
              help="JSONL of {trace_id, value} (down, up or a number); wins over feedback inside traces.")
@click.option("--rate", type=click.FloatRange(0.0, 1.0), default=1.0, show_default=True,
              help="Share of traces without thumbs-down to take (thumbs-down are always taken).")
@click.option("--salt", help="Salt of the deterministic sampling (default: the dataset's name).")
@click.option("--max", "max_samples", type=click.IntRange(min=0), help="Take at most N traces (thumbs-down first, then by draw).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@db_option
def import_command(settings: Settings, files: tuple[Path, ...], dataset: str, fmt: str, feedback: Path | None, rate: float,
                   salt: str | None, max_samples: int | None, as_json: bool) -> None:
    """Import trace files: sample them (thumbs-down first) and store them as samples (all or nothing)."""
    for file in (*files, *([feedback] if feedback else [])):
        if not file.exists():
            raise BadInput(f"{file}: no such file")
    engine = ready_engine(settings)
    summary = traces.import_traces(
        engine, files, dataset=dataset, fmt=fmt, feedback=feedback, rate=rate, salt=salt, max_samples=max_samples,
        max_field_chars=settings["IMPORT_MAX_FIELD_CHARS"], chunk_size=settings["IMPORT_CHUNK_SIZE"],
        stale_seconds=settings["IMPORT_STALE_SECONDS"],
    )
    if as_json:
        click.echo(json.dumps(summary.as_dict(), sort_keys=False))
    else:
        for line in summary.lines():
            click.echo(line)
