"""`calibrate monitor`: the calibrated judge on production, per window, from the audit labels (docs/production.md)."""

from __future__ import annotations

from pathlib import Path

import click
from sqlmodel import Session

from calibrate import lazy
from calibrate.cli.common import Settings, db_option, ready_engine, write_output
from calibrate.cli.reports import LEVEL, LOCALE

# Loaded when the command runs, not for its --help (they bring pandas and SciPy).
production = lazy.module("calibrate.calibration")  # its public API (monitor), never one of its modules
production_report = lazy.module("calibrate.reports.production_report")


@click.command("monitor")
@click.option("--dataset", required=True, help="The production dataset (traces imported as samples).")
@click.option("--judge", required=True, help="The calibrated judge (a prompt run is PROMPT@VERSION).")
@click.option("--task", help="The task (default the only task the judge has verdicts for on the dataset).")
@click.option("--by-window", "by_window", type=click.Choice(["day", "week", "month"]), default="week", show_default=True,
              help="Windows of metadata.started_at (else the sample's creation time), in UTC.")
@click.option("--min", "min_value", type=float, help="The team's threshold: a window whose metric CI lies below it is an alert.")
@click.option("--min-agreement", "min_agreement", type=click.FloatRange(0, 1), default=0.75, show_default=True,
              help="The judge's agreement gate: a window whose agreement CI on audit labels lies below it is an alert.")
@click.option("--positive", metavar="LABEL", help="Tasks with labels: the label whose share is the metric (default the first declared).")
@LEVEL
@click.option("--format", "fmt", type=click.Choice(["json", "md", "html"]), default="json", show_default=True)
@LOCALE
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to a file instead of standard output.")
@db_option
def monitor_command(settings: Settings, dataset: str, judge: str, task: str | None, by_window: str, min_value: float | None,
                    min_agreement: float, positive: str | None, level: str | None, fmt: str, locale: str,
                    output: Path | None) -> None:
    """Watch the calibrated judge on production: per window, the metric from audit labels, agreement and a status."""
    with Session(ready_engine(settings)) as session:
        result = production.monitor(session, dataset, judge, task=task, by_window=by_window, min_value=min_value,
                                    min_agreement=min_agreement, positive=positive, level=level, alpha=1 - settings["CONFIDENCE"])
    write_output(production_report.render_monitor(result, fmt, locale), output, f"{fmt} monitor")
