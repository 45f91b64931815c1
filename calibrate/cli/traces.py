"""`calibrate traces …`: production traces in. `import` reads trace files (OTLP, Langfuse); `token`, `tokens` and
`revoke` manage the bearer tokens of the OTLP/HTTP receiver (`POST /v1/traces` on `calibrate serve`); `flush`
settles a dataset's staged traces now; `purge` deletes samples older than a window that nobody's work keeps, and
`retention` saves that window for the traces server to apply daily."""

from __future__ import annotations

import json
from pathlib import Path

import click

from calibrate import lazy
from calibrate.cli.common import BadInput, Settings, db_option, ready_engine
from calibrate.db import write_session

# Loaded when the command runs, not for its --help.
traces = lazy.module("calibrate.ingest.traces")
staging = lazy.module("calibrate.ingest.traces.staging")
retention = lazy.module("calibrate.ingest.traces.retention")
lookup = lazy.module("calibrate.lookup")


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
@click.option("--rate", type=click.FloatRange(1e-6, 1.0), default=1.0, show_default=True,
              help="Share of traces without thumbs-down to take, 1e-06 to 1 (thumbs-down are always taken).")
@click.option("--salt", help="Salt of the deterministic sampling (default: the dataset's name).")
@click.option("--max", "max_samples", type=click.IntRange(min=0), help="Take at most N traces (thumbs-down first, then by draw).")
@click.option("--sessions", is_flag=True,
              help="Traces sharing session.id / gen_ai.conversation.id become one sample, session:<id>, each trace a turn.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@db_option
def import_command(settings: Settings, files: tuple[Path, ...], dataset: str, fmt: str, feedback: Path | None, rate: float,
                   salt: str | None, max_samples: int | None, sessions: bool, as_json: bool) -> None:
    """Import trace files: sample them (thumbs-down first) and store them as samples (all or nothing)."""
    for file in (*files, *([feedback] if feedback else [])):
        if not file.exists():
            raise BadInput(f"{file}: no such file")
    engine = ready_engine(settings)
    summary = traces.import_traces(
        engine, files, dataset=dataset, fmt=fmt, feedback=feedback, rate=rate, salt=salt, max_samples=max_samples,
        max_field_chars=settings["IMPORT_MAX_FIELD_CHARS"], chunk_size=settings["IMPORT_CHUNK_SIZE"],
        stale_seconds=settings["IMPORT_STALE_SECONDS"], sessions=sessions,
    )
    if as_json:
        click.echo(json.dumps(summary.as_dict(), sort_keys=False))
    else:
        for line in summary.lines():
            click.echo(line)


@traces_group.command("token")
@click.option("--dataset", required=True, help="Dataset the token's traces become samples of (created if missing).")
@click.option("--rate", type=click.FloatRange(1e-6, 1.0), default=1.0, show_default=True,
              help="Share of traces without thumbs-down to take, 1e-06 to 1 (thumbs-down are always taken).")
@click.option("--salt", help="Salt of the deterministic sampling (default: a random one, stored with the token).")
@click.option("--sessions", is_flag=True,
              help="The token's traces sharing a session id settle as one sample (a conversation) once all are quiet.")
@db_option
def token_command(settings: Settings, dataset: str, rate: float, salt: str | None, sessions: bool) -> None:
    """Create a bearer token for POST /v1/traces, bound to DATASET and its sampling; print it once."""
    with write_session(ready_engine(settings)) as session:
        row, token = staging.new_token(session, dataset, rate=rate, salt=salt, sessions=sessions)
        token_id, bound = row.id, row.salt
    click.echo(token)
    conversations = ", conversations as one sample each" if sessions else ""
    click.echo(f"token {token_id} → dataset {dataset.strip()} (rate {rate:g}, salt {bound!r}{conversations}); it is shown "
               "only now, keep it secret", err=True)


@traces_group.command("tokens")
@click.option("--json", "as_json", is_flag=True, help="Print the tokens as a JSON list.")
@db_option
def tokens_command(settings: Settings, as_json: bool) -> None:
    """List the ingest tokens: id, dataset, rate, salt, sessions, created, last used, revoked (never the token)."""
    with write_session(ready_engine(settings)) as session:
        rows = staging.list_tokens(session)
    if as_json:
        click.echo(json.dumps(rows))
        return
    click.echo("id\tdataset\trate\tsalt\tsessions\tcreated\tlast_used\trevoked")
    for row in rows:
        click.echo("\t".join(str(row[key] if row[key] is not None else "-") for key in
                             ("id", "dataset", "rate", "salt", "sessions", "created", "last_used", "revoked")))


@traces_group.command("revoke")
@click.argument("token_id", type=click.IntRange(min=1))
@db_option
def revoke_command(settings: Settings, token_id: int) -> None:
    """Revoke the ingest token TOKEN_ID: its requests get 401 from now on (spans already staged still settle)."""
    with write_session(ready_engine(settings)) as session:
        staging.revoke_token(session, token_id)
    click.echo(f"token {token_id} revoked")


@traces_group.command("flush")
@click.option("--dataset", required=True, help="Dataset whose staged traces to settle now.")
@click.option("--json", "as_json", is_flag=True, help="Print what was settled as JSON on stdout.")
@db_option
def flush_command(settings: Settings, dataset: str, as_json: bool) -> None:
    """Settle DATASET's staged traces now (every one whose root span arrived), without waiting TRACES_SETTLE_S."""
    engine = ready_engine(settings)
    with write_session(engine) as session:
        lookup.dataset(session, dataset)  # an unknown name is refused, naming the datasets
    done = staging.settle(engine, settle_s=0, dataset=dataset, max_field_chars=settings["IMPORT_MAX_FIELD_CHARS"])
    dropped = staging.drop_rootless(engine, dataset=dataset)
    done.dropped_traces, done.dropped_spans = dropped.dropped_traces, dropped.dropped_spans
    done.dropped_feedback = dropped.dropped_feedback
    if as_json:
        click.echo(json.dumps(done.as_dict(traces.SETTLED_KEYS)))
        return
    click.echo(f"traces → {dataset}: {done.traces:,} settled, {done.sampled:,} sampled ({done.sampled_down:,} thumbs-down), "
               f"{done.created:,} created, {done.updated:,} updated, {done.unchanged:,} unchanged, "
               f"{done.duplicate_content:,} duplicate content, {sum(done.skipped.values()):,} skipped; "
               f"{done.dropped_traces:,} rootless traces dropped, {done.dropped_feedback:,} feedback records dropped")
    for line in done.notes():  # the commonest skip reasons with what to add, the upstream sampling, the metadata
        click.echo(line)
    for trace_id, why in sorted(done.unmappable.items())[:20]:
        click.echo(f"quarantined trace {trace_id}: {why}")
    if len(done.unmappable) > 20:
        click.echo(f"(and {len(done.unmappable) - 20:,} more quarantined traces: the dataset page counts them)")


@traces_group.command("purge")
@click.option("--dataset", required=True, help="Dataset whose old samples to delete.")
@click.option("--older-than", "older_than", required=True, metavar="Nd",
              help="Delete samples whose metadata.started_at (else creation time) is older than N days, e.g. 90d.")
@click.option("--dry-run", "dry_run", is_flag=True, help="Say what would be removed and kept; remove nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@db_option
def purge_command(settings: Settings, dataset: str, older_than: str, dry_run: bool, as_json: bool) -> None:
    """Delete DATASET's samples older than the window, keeping every sample with a label, few-shot use or golden membership."""
    days = retention.parse_older_than(older_than)
    engine = ready_engine(settings)
    done = retention.purge(engine, dataset, older_than_days=days, dry_run=dry_run)
    if dry_run:
        staged = staging.stale_staged(engine, dataset=dataset)
    else:
        dropped = staging.drop_rootless(engine, dataset=dataset)
        staged = {"traces": dropped.dropped_traces, "spans": dropped.dropped_spans, "feedback": dropped.dropped_feedback}
    done["staged"] = staged
    if as_json:
        click.echo(json.dumps(done))
        return
    for line in retention.purge_lines(done):
        click.echo(line)


@traces_group.command("retention")
@click.option("--dataset", required=True, help="Dataset whose retention to show or set.")
@click.option("--older-than", "older_than", metavar="Nd", help="Keep N days: the traces server purges older samples daily.")
@click.option("--off", is_flag=True, help="Remove the dataset's retention setting (nothing is purged automatically).")
@click.option("--json", "as_json", is_flag=True, help="Print the setting as JSON on stdout.")
@db_option
def retention_command(settings: Settings, dataset: str, older_than: str | None, off: bool, as_json: bool) -> None:
    """Show or set DATASET's retention, which every traces server's settler applies once a day (as `traces purge`)."""
    if off and older_than:
        raise BadInput("give --older-than or --off, not both")
    with write_session(ready_engine(settings)) as session:
        if off or older_than:
            shown = retention.set_retention(session, dataset, None if off else retention.parse_older_than(older_than))
        else:
            shown = retention.retention_of(session, lookup.dataset(session, dataset))
    if as_json:
        click.echo(json.dumps(shown, default=str))
        return
    if shown is None:
        click.echo(f"{dataset.strip()}: no retention (samples are kept until `calibrate traces purge`)")
        return
    last = shown["last_result"]
    click.echo(f"{shown['dataset']}: samples older than {shown['older_than_days']}d are purged daily by the traces server"
               + (f"; last applied {shown['applied_at']:%Y-%m-%d %H:%M} UTC: {last['removed']['samples']:,} removed, "
                  f"{sum(last['kept'].values()):,} kept" if shown["applied_at"] and last else "; not applied yet"))
