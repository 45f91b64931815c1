"""`calibrate estimate`: the task's mean over the live system from the judge's verdicts and the experts' labels."""

from __future__ import annotations

from pathlib import Path

import click
from sqlmodel import Session

from calibrate import lazy
from calibrate.cli.common import WHERE_HELP, BadInput, Settings, db_option, ready_engine, write_output
from calibrate.cli.reports import GOLDEN, LEVEL, LOCALE, ORDER_RULE, golden_scope
from calibrate.errors import CalibrationError
from calibrate.reasons import Reason

# Loaded when the command runs, not for its --help (they bring pandas and SciPy).
estimate = lazy.module("calibrate.calibration")  # its public API (run_estimate), never one of its modules
estimate_report = lazy.module("calibrate.reports.estimate_report")


def _fraction(name: str, raw: str, *, upper_inclusive: bool = False) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise BadInput(f"--{name} must be a number, not {raw!r}") from None
    if not (0 < value <= 1 if upper_inclusive else 0 < value < 1):  # also refuses nan
        raise BadInput(f"--{name} must lie in (0, 1{']' if upper_inclusive else ')'}, not {raw}")
    return value


@click.command("estimate")
@click.option("--dataset", required=True, help="Dataset whose targets the estimate is about.")
@click.option("--judge", required=True, help="Judge whose verdicts are used (a prompt run is PROMPT@VERSION).")
@click.option("--task", required=True, help="Task whose gold value is averaged.")
@click.option("--method", type=click.Choice(["ppi++", "ppi", "classical", "rogan-gladen"]), default="ppi++", show_default=True,
              help="ppi++ (verdicts weighed by the tuned lambda), ppi (lambda 1), classical (labels alone) or rogan-gladen "
                   "(binary tasks: the verdicts' share corrected by sensitivity and specificity).")
@click.option("--alpha", default="0.05", show_default=True, metavar="A", help="Error level: the interval covers 1 - A.")
@click.option("--split", help="Only the samples of this split (e.g. test); default every sample.")
@click.option("--where", metavar="WHERE", help=WHERE_HELP + " Its labelled: a label of --task.")
@click.option("--positive", metavar="LABEL", help="Tasks with labels: the label whose share is estimated (default the first declared).")
@LEVEL
@click.option("--by-window", "by_window", type=click.Choice(["day", "week", "month"]),
              help="Also estimate per window of metadata.started_at (else the sample's creation time).")
@click.option("--target-width", "target_width", default="0.05", show_default=True, metavar="W",
              help="The interval half-width labels_needed is computed for.")
@ORDER_RULE
@GOLDEN
@click.option("--format", "fmt", type=click.Choice(["json", "md", "html"]), default="json", show_default=True)
@LOCALE
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to a file instead of standard output.")
@db_option
def estimate_command(settings: Settings, dataset: str, judge: str, task: str, method: str, alpha: str, split: str | None,
                     where: str | None, positive: str | None, level: str | None, by_window: str | None, target_width: str,
                     order_rule: str, golden: str | None, fmt: str, locale: str, output: Path | None) -> None:
    """Estimate the task's mean over the live system from verdicts and labels (PPI++, PPI, classical, Rogan-Gladen)."""
    error_level = _fraction("alpha", alpha)
    width = _fraction("target-width", target_width, upper_inclusive=True)
    samples, cited = golden_scope(settings, dataset, golden)
    with Session(ready_engine(settings)) as session:
        result = estimate.run_estimate(session, dataset, task, judge, method=method, alpha=error_level, split=split, where=where,
                                       positive=positive, level=level, by_window=by_window, target_width=width,
                                       order_rule=order_rule, samples=samples, golden=cited)
    if result["status"] != "ok":
        why = result["reason"]
        raise CalibrationError(Reason("estimate_refused", method=method, task=task, dataset=dataset, judge=judge,
                                      reason=Reason(why["code"], **{k: v for k, v in why.items() if k != "code"}),
                                      refusal=why["code"], labelled=result["n_labelled"],
                                      unlabelled=result["n_unlabelled"], fewshot=result.get("n_fewshot_excluded", 0)))
    write_output(estimate_report.render_estimate(result, fmt, locale), output, f"{fmt} estimate")
