"""`calibrate sample` (choose what experts label) and `calibrate queue order` (the order they get it in)."""

from __future__ import annotations

import click

from calibrate import lazy
from calibrate.cli.common import WHERE_HELP, Settings, db_option, ready_engine
from calibrate.db import write_session

# Loaded when a command runs, not for its --help (numpy; the queue order brings pandas).
sampling = lazy.module("calibrate.ingest.sampling")
uncertainty = lazy.module("calibrate.annotation.uncertainty")
auto_queue = lazy.module("calibrate.annotation.auto_queue")


@click.command("sample")
@click.option("--dataset", required=True, help="Dataset to sample from.")
@click.option("--n", "n", type=click.IntRange(min=1), help="How many samples to take.")
@click.option("--fraction", type=click.FloatRange(0, 1, min_open=True), help="Fraction of the dataset to take, e.g. 0.02.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed: the same seed takes the same samples.")
@click.option("--stratify-by", "stratify_by", metavar="FIELD", help="Stratify by a field, e.g. metadata.topic (proportional allocation).")
@click.option("--negative-first", is_flag=True, help="Take samples with feedback −1 before the rest.")
@click.option("--overlap", type=click.IntRange(min=1), default=1, show_default=True, help="How many annotators label each sample.")
@click.option("--assign", "assign", multiple=True, metavar="USER", help="Annotators to assign round-robin (repeatable).")
@click.option("--split", "split", metavar="SPEC", help="Assign splits to the taken samples, e.g. train=0.2,dev=0.4,test=0.4.")
@click.option("--where", metavar="WHERE", help=WHERE_HELP)
@db_option
def sample_command(settings: Settings, dataset: str, n: int | None, fraction: float | None, seed: int, stratify_by: str | None,
                   negative_first: bool, overlap: int, assign: tuple[str, ...], split: str | None, where: str | None) -> None:
    """Choose the samples experts should label and queue them (seeded, reproducible)."""
    if (n is None) == (fraction is None):
        raise click.UsageError("give exactly one of --n or --fraction")
    split_spec = sampling.parse_split_spec(split) if split else None
    with write_session(ready_engine(settings)) as session:
        summary = sampling.sample_dataset(
            session, dataset, n=n, fraction=fraction, seed=seed, stratify_by=stratify_by,
            negative_first=negative_first, overlap=overlap, assign=list(assign), split=split_spec, where=where,
        )
    click.echo(summary.line())
    if summary.warning():
        click.echo(summary.warning(), err=True)


@click.group("queue")
def queue_group() -> None:
    """The order annotators get a dataset's pending items in."""


@queue_group.command("order")
@click.option("--dataset", required=True, help="Dataset whose pending items are reordered.")
@click.option("--mode", type=click.Choice(["uncertain", "sampled"]), required=True,
              help="uncertain: where the judges disagree or are least sure first; sampled: back to the order of `calibrate sample`.")
@click.option("--task", default="claim_support", show_default=True, help="Task whose verdicts measure the uncertainty.")
@click.option("--judge", "judges", multiple=True, metavar="NAME", help="A judge of the committee (repeatable; default every judge with verdicts).")
@db_option
def queue_order_command(settings: Settings, dataset: str, mode: str, task: str, judges: tuple[str, ...]) -> None:
    """Put a dataset's pending items in uncertain-first order, or back in the sampled order."""
    with write_session(ready_engine(settings)) as session:
        result = uncertainty.order_queue(session, dataset, mode=mode, task=task, judges=list(judges))
    click.echo(result.line())


@queue_group.command("auto")
@click.option("--dataset", required=True, help="Dataset whose experts' queues fill themselves.")
@click.option("--daily", type=click.IntRange(min=1), required=True, help="Assignments per UTC day, both streams together.")
@click.option("--assign", "assign", multiple=True, required=True, metavar="USER", help="An expert to assign round-robin (repeatable).")
@click.option("--overlap", type=click.IntRange(min=1), default=1, show_default=True, help="Experts on an item that overlaps.")
@click.option("--overlap-share", "overlap_share", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Share of the items that get --overlap experts.")
@click.option("--audit-share", "audit_share", type=click.FloatRange(0, 1), default=0.5, show_default=True,
              help="Share of the daily budget for the audit stream (a uniform random draw; the only labels estimates use).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed of the draws.")
@db_option
def queue_auto_command(settings: Settings, dataset: str, daily: int, assign: tuple[str, ...], overlap: int, overlap_share: float,
                       audit_share: float, seed: int) -> None:
    """Save the dataset's queue policy (triage and audit streams, a daily budget) and apply it now."""
    with write_session(ready_engine(settings)) as session:
        summary = auto_queue.queue_auto(session, dataset, daily=daily, assign=list(assign), overlap=overlap,
                                        overlap_share=overlap_share, audit_share=audit_share, seed=seed)
    click.echo(auto_queue.summary_line(summary))
