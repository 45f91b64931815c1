"""`calibrate golden`: golden sets — create, list, show, status, drift against production, refresh (docs/loop.md)."""

from __future__ import annotations

import json

import click
from sqlmodel import Session

from calibrate import lazy
from calibrate.cli.common import WHERE_HELP, WHERE_TERMS, BadInput, Settings, db_option, ready_engine
from calibrate.db import write_session

# Loaded when a command runs, not for its --help (it brings pandas, SciPy and scikit-learn).
golden = lazy.module("calibrate.loop.golden")

DATASET = click.option("--dataset", required=True, help="The dataset the golden set belongs to (names are per dataset).")
JSON = click.option("--json", "as_json", is_flag=True, help="Write JSON instead of text.")


def _echo(data, as_json: bool, text: str) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False) if as_json else text)


@click.group("golden")
def golden_group() -> None:
    """Golden sets: versioned, hashed lists of expert-labelled samples that decisions are pinned to."""


@golden_group.command("create")
@click.argument("name")
@DATASET
@click.option("--split", help="The samples of this split (e.g. test).")
@click.option("--where", metavar="WHERE", help=WHERE_HELP)
@JSON
@db_option
def create_command(settings: Settings, name: str, dataset: str, split: str | None, where: str | None, as_json: bool) -> None:
    """Create golden set NAME, version 1, from a split or a WHERE."""
    with write_session(ready_engine(settings)) as session:
        made = golden.create_golden(session, dataset, name, split=split, where=where)
    _echo(made, as_json, f"golden set {made['name']}@{made['version']}: {made['n_items']} items, sha256 {made['hash']}")


@golden_group.command("list")
@DATASET
@JSON
@db_option
def list_command(settings: Settings, dataset: str, as_json: bool) -> None:
    """List the dataset's golden sets with their latest version and hash."""
    with Session(ready_engine(settings)) as session:
        found = golden.list_golden(session, dataset)
    lines = [f"{g['name']}@{g['version']}  {g['n_items']} items  {g['created_at']}  sha256 {g['hash']}" for g in found]
    _echo(found, as_json, "\n".join(lines) or f"no golden set on {dataset}")


@golden_group.command("show")
@click.argument("ref", metavar="NAME[@V]")
@DATASET
@JSON
@db_option
def show_command(settings: Settings, ref: str, dataset: str, as_json: bool) -> None:
    """Show a version of a golden set: its hash and every member, labelled or not."""
    with Session(ready_engine(settings)) as session:
        shown = golden.show_golden(session, dataset, ref)
    lines = [f"{shown['name']}@{shown['version']}: {shown['n_items']} items, sha256 {shown['hash']}"]
    for item in shown["items"]:
        flags = [f for f, on in (("anchor", item["anchor"]), ("labelled", item["labelled"])) if on]
        retired = f", retired in {item['retired_in']}" if item["retired_in"] else ""
        lines.append(f"  {item['sample_id']}  added in {item['added_in']}{retired}  {' '.join(flags)}")
    _echo(shown, as_json, "\n".join(lines))


@golden_group.command("status")
@click.argument("name")
@DATASET
@click.option("--max-age", "max_age", type=click.IntRange(min=1, max=36500), default=90, show_default=True,
              help="Days after which the golden set is stale.")
@click.option("--min-renewal", "min_renewal", type=click.FloatRange(0, 1), default=0.2, show_default=True,
              help="Share that must have been renewed within --max-age days.")
@click.option("--strata", metavar="metadata.FIELD", help="Count members per value of this field (default: the last refresh's).")
@JSON
@db_option
def status_command(settings: Settings, name: str, dataset: str, max_age: int, min_renewal: float, strata: str | None,
                   as_json: bool) -> None:
    """Say how old the golden set is, how much of it was renewed, and whether it is stale."""
    with Session(ready_engine(settings)) as session:
        status = golden.golden_status(session, dataset, name, max_age=max_age, min_renewal=min_renewal, strata=strata)
    text = (f"{name}@{status['version']}: {status['n_items']} items ({status['n_labelled']} labelled, {status['n_anchor']} "
            f"anchors), {status['age_days']:g} days old, {status['renewed_share_90d']:.0%} renewed in 90 days"
            + (": STALE" if status["stale"] else ""))
    _echo(status, as_json, text)


@golden_group.command("drift")
@click.argument("ref", metavar="NAME[@V]")
@DATASET
@click.option("--against", required=True, metavar="WHERE", help=f"Production's samples, a WHERE: {WHERE_TERMS}.")
@click.option("--fields", metavar="metadata.F,…", default="", help="Categorical fields to compare, comma-separated.")
@click.option("--judge", help="Also the judge's drift: kappa on production's labelled samples minus on the golden set.")
@click.option("--task", help="The categorical task of the judge's drift (default claim_support).")
@click.option("--seed", type=int, default=0, show_default=True)
@JSON
@db_option
def drift_command(settings: Settings, ref: str, dataset: str, against: str, fields: str, judge: str | None,
                  task: str | None, seed: int, as_json: bool) -> None:
    """Compare a golden version with production: per field a test, PSI, Holm-adjusted p and mde."""
    names = [f.strip() for f in fields.split(",") if f.strip()]
    if len(names) > 50:
        raise BadInput("--fields: at most 50 fields")
    with Session(ready_engine(settings)) as session:
        found = golden.golden_drift(session, dataset, ref, against=against, fields=names, judge=judge, task=task, seed=seed)
    lines = [f"{found['golden']['name']}@{found['golden']['version']} (sha256 {found['golden']['hash']}) "
             f"vs {against}: {found['n_golden']} golden, {found['n_production']} production"]
    for field, res in found["fields"].items():
        p = res.get("p_holm")
        lines.append(f"  {field} ({res['kind']}): value {res['value'] if res['value'] is None else round(res['value'], 4)}"
                     f", p_holm {'-' if p is None else f'{p:.4f}'}" + (f", mde {res['mde']}" if "mde" in res else ""))
    if "judge" in found:
        lines.append(judge_line(found["judge"]))
    _echo(found, as_json, "\n".join(lines))


def judge_line(judge: dict) -> str:
    """Return the judge's drift as one line: kappa production − golden, its CI, whose labels, and what was left out."""
    kappa = judge["kappa"]

    def num(value) -> str:
        return "-" if value is None else f"{value:.3f}"

    figure = (f"kappa production − golden {num(kappa['value'])} [{num(kappa['ci'][0])}, {num(kappa['ci'][1])}] "
              f"(production {num(kappa.get('audit'))} on {kappa['n_audit']} pairs, golden {num(kappa.get('golden'))} on "
              f"{kappa['n_golden']})" if kappa["value"] is not None else f"kappa undefined: {kappa['note']}")
    labels = "audit labels only" if judge["labels"] == "audit" else "all labels (no production queues)"
    left, shown = judge["n_excluded"], judge["n_fewshot"]
    return (f"  judge {judge['judge']} on {judge['task']}: {figure}; {labels}, unweighted"
            + (f"; {left} pair{'' if left == 1 else 's'} with an excluded label left out" if left else "")
            + (f"; {shown} few-shot example{'' if shown == 1 else 's'} of the judge left out" if shown else ""))


@golden_group.command("refresh")
@click.argument("name")
@DATASET
@click.option("--from", "source", required=True, metavar="WHERE", help=f"Production's samples to draw from, a WHERE: {WHERE_TERMS}.")
@click.option("--renew", type=click.FloatRange(0, 1, min_open=True), default=0.2, show_default=True,
              help="Share of the members to retire and replace.")
@click.option("--anchor-share", "anchor_share", type=click.FloatRange(0, 1, max_open=True), default=0.5, show_default=True,
              help="Share of the members kept as anchors (never retired).")
@click.option("--strata", metavar="metadata.FIELD", help="Stratify retirements and additions by this field.")
@click.option("--seed", type=int, default=0, show_default=True, help="The same seed gives the same version and hash.")
@JSON
@db_option
def refresh_command(settings: Settings, name: str, dataset: str, source: str, renew: float, anchor_share: float,
                    strata: str | None, seed: int, as_json: bool) -> None:
    """Make the next version: keep the anchors, retire the oldest of over-represented strata, draw production."""
    with write_session(ready_engine(settings)) as session:
        made = golden.refresh_golden(session, dataset, name, source=source, renew=renew, anchor_share=anchor_share,
                                     strata=strata, seed=seed)
    text = (f"golden set {made['name']}@{made['version']}: {made['retired']} retired, {made['added']} added, "
            f"{made['anchors']} anchors, sha256 {made['hash']}")
    _echo(made, as_json, "\n".join([text, *made["queue_notes"], *made["notes"]]))
