"""`calibrate report`, `gate`, `compare` and `ab`: the calibration report and what is built on it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from sqlmodel import Session

from calibrate import calibration, lazy
from calibrate.calibration import Options
from calibrate.cli.common import EXIT_FAILED, EXIT_OK, BadInput, Settings, db_option, ready_engine, write_output

# Loaded when a command runs, not for its --help (they bring pandas, SciPy and scikit-learn);
# calibration's names load the same way, through its package API.
alt_test_report = lazy.module("calibrate.reports.alt_test_report")
loop = lazy.module("calibrate.loop.dashboard")
reports = lazy.module("calibrate.reports")
ab_report = lazy.module("calibrate.reports.ab_report")
compare_report = lazy.module("calibrate.reports.compare_report")
gate = lazy.module("calibrate.cli.gate")
golden_sets = lazy.module("calibrate.loop.golden")


ORDER_RULE = click.option(
    "--order-rule", type=click.Choice(["consistent", "original"]), default="consistent", show_default=True,
    help="Pairwise tasks: a judge's verdict from its two presentation orders: consistent (both agree, else tie or a "
         "miss) or original (the original order's).")

# The language of an HTML or Markdown report's words, numbers and dates (docs/i18n.md); JSON and CSV are the
# same in every locale. calibrate.i18n.LOCALES, written out so that --help loads no catalog.
MIN_SHARED = click.option(
    "--min-shared", "min_shared", type=click.IntRange(min=1), default=10, show_default=True,
    help="List a pair of annotators in the human agreement only when they share this many targets (the rest are counted).")
GOLDEN = click.option(
    "--golden", metavar="NAME[@V]",
    help="Only the members of this golden set's version (default its latest); every decision cites the version and its hash.")
LEVEL = click.option(
    "--level", type=click.Choice(["answers", "claims", "contexts", "steps"]),
    help="What the share is of: answers (default wherever the task has it: for a claim task, the share of answers whose "
         "every counted claim has the label), claims, contexts or steps (every target).")
LOCALE = click.option(
    "--locale", type=click.Choice(["en", "es"]), default="en", show_default=True,
    help="Language of an HTML or Markdown report: en (English) or es (Spanish). JSON and CSV do not change.")


def golden_scope(settings: Settings, dataset: str, golden: str | None) -> tuple[frozenset[int] | None, dict | None]:
    """Return `--golden NAME[@V]`'s member samples and its citation (None, None without the option)."""
    if golden is None:
        return None, None
    with Session(ready_engine(settings)) as session:
        return golden_sets.golden_scope(session, dataset, golden)


def report_options(settings: Settings, *, threshold: float | None = None, ci_lower: bool = False, group_by: str | None = None,
                   bootstrap: int | None = None, k: int = 10, ci_method: str = "percentile", split: str | None = None,
                   budget: float = 0.05, order_rule: str = "consistent", min_shared: int = 10,
                   dataset: str | None = None, golden: str | None = None) -> Options:
    """Return the report's options: the command's, else the settings' defaults (`golden`: resolved on `dataset`)."""
    sample_ids, cited = golden_scope(settings, dataset, golden) if golden else (None, None)
    return Options(split=split, budget_half_width=budget, order_rule=order_rule, min_shared=min_shared,
                   sample_ids=sample_ids, golden=cited,
                   threshold=settings["THRESHOLD"] if threshold is None else threshold,
                   ci_lower=ci_lower or bool(settings.get("CI_LOWER", False)), group_by=group_by,
                   bootstrap=settings["BOOTSTRAP"] if bootstrap is None else bootstrap,
                   confidence=settings["CONFIDENCE"], seed=settings["SEED"], ci_method=ci_method, k=k)


def _build(settings: Settings, dataset: str, judge: str | None, options: Options, tasks: list[str] | None = None) -> calibration.Report:
    with Session(ready_engine(settings)) as session:
        return calibration.build_report(session, dataset, judge, options=options, tasks=tasks)


@click.command("report")
@click.option("--dataset", required=True, help="Dataset to report on.")
@click.option("--judge", help="Judge to calibrate (a prompt run is PROMPT@VERSION); without it, the human-only parts.")
@click.option("--group-by", "group_by", metavar="FIELD", help="Also compute within groups, e.g. metadata.topic.")
@click.option("--threshold", type=click.FloatRange(-1, 1), help="Alignment a task must reach (default 0.75).")
@click.option("--ci-lower", is_flag=True, help="Require the CI lower bound, not the estimate, to reach the threshold.")
@click.option("--bootstrap", type=click.IntRange(min=100), help="Bootstrap resamples (default 2000).")
@click.option("--ci-method", type=click.Choice(["percentile", "bca"]), default="percentile", show_default=True)
@click.option("--k", type=click.IntRange(min=1), default=10, show_default=True, help="K of the retrieval metrics.")
@click.option("--split", help="Only the samples of this split (e.g. dev); default every sample.")
@click.option("--task", "tasks", multiple=True, help="Report only these tasks (repeatable; default every task with data).")
@click.option("--versions", "with_versions", is_flag=True,
              help="Add the versions section: every version of the judge's prompt, and the latest two compared.")
@click.option("--budget-half-width", "budget", type=click.FloatRange(min=0.001, max=1), default=0.05, show_default=True,
              help="CI half-width the label budget aims at.")
@ORDER_RULE
@MIN_SHARED
@GOLDEN
@click.option("--format", "fmt", type=click.Choice(["json", "html", "md", "csv"]), default="json", show_default=True)
@LOCALE
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to a file instead of standard output.")
@db_option
def report_command(settings: Settings, dataset: str, judge: str | None, group_by: str | None, threshold: float | None,
                   ci_lower: bool, bootstrap: int | None, ci_method: str, k: int, split: str | None, tasks: tuple[str, ...],
                   with_versions: bool, budget: float, order_rule: str, min_shared: int, golden: str | None, fmt: str,
                   locale: str, output: Path | None) -> None:
    """Write the calibration report of a judge on a dataset (JSON, HTML, Markdown or CSV)."""
    common = {"threshold": threshold, "ci_lower": ci_lower, "bootstrap": bootstrap, "k": k, "ci_method": ci_method,
              "split": split, "budget": budget, "order_rule": order_rule, "min_shared": min_shared,
              "dataset": dataset, "golden": golden}
    built = _build(settings, dataset, judge, report_options(settings, group_by=group_by, **common), tasks=list(tasks) or None)
    cited = built.data.get("golden")
    if cited and judge and cited["version"] > 1:  # after a refresh: the judge's kappa on the new members vs the retained
        with Session(ready_engine(settings)) as session:
            cited["retained_vs_new"] = golden_sets.retained_vs_new(session, dataset, f"{cited['name']}@{cited['version']}",
                                                                   judge=judge, seed=settings["SEED"])
    if with_versions:
        if not judge:
            raise BadInput("--versions needs --judge (a prompt version, PROMPT@N)")
        with Session(ready_engine(settings)) as session:
            section = loop.versions_section(session, dataset, judge, options=report_options(settings, **common))
        if section is None:
            raise BadInput(f"--versions: {judge} is an imported judge, not a prompt version")
        built.data["versions"] = section
    write_output(reports.render(built, fmt, locale), output, f"{fmt} report")


@click.command("gate")
@click.option("--dataset", required=True, help="Dataset to check.")
@click.option("--judge", required=True, help="Judge to check (a prompt run is PROMPT@VERSION).")
@click.option("--task", "tasks", multiple=True, help="Check only these tasks (repeatable; default every task with data).")
@click.option("--min-kappa", type=click.FloatRange(-1, 1), help="Threshold for categorical tasks (default 0.75).")
@click.option("--min-rho", type=click.FloatRange(-1, 1), help="Threshold for ordinal and continuous tasks (default 0.75).")
@click.option("--ci-lower", is_flag=True, help="Require the CI lower bound to reach the threshold (rule ci_lower).")
@click.option("--bootstrap", type=click.IntRange(min=100), help="Bootstrap resamples (default 2000).")
@click.option("--split", help="Only the samples of this split (e.g. test); default every sample.")
@ORDER_RULE
@MIN_SHARED
@GOLDEN
@click.option("--production", is_flag=True,
              help="Check production instead: the latest ended window of `calibrate monitor` (exit 0 when its whole CI clears "
                   "--min, 1 alert, 3 undecided or not complete, 2 no data or too few labels); needs --min.")
@click.option("--min", "min_value", type=float, help="--production: the metric's threshold (its CI must lie above it).")
@click.option("--min-agreement", "min_agreement", type=click.FloatRange(0, 1), default=0.75, show_default=True,
              help="--production: the judge's agreement on new audit labels that raises an alert when its CI lies below.")
@click.option("--by-window", "by_window", type=click.Choice(["day", "week", "month"]), default="week", show_default=True,
              help="--production: the windows.")
@click.option("--positive", help="--production: the label whose share is the metric (default the task's first label).")
@LEVEL
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="--production: lines, or the JSON of the check.")
@db_option
def gate_command(settings: Settings, dataset: str, judge: str, tasks: tuple[str, ...], min_kappa: float | None,
                 min_rho: float | None, ci_lower: bool, bootstrap: int | None, split: str | None, order_rule: str,
                 min_shared: int, golden: str | None, production: bool, min_value: float | None, min_agreement: float,
                 by_window: str, positive: str | None, level: str | None, fmt: str) -> None:
    """Exit 0 when the judge is calibrated on every checked task, 1 when not (for CI/CD)."""
    if production:
        if golden:
            raise BadInput("gate --production checks the latest window of production, not a golden set: drop --golden")
        if min_value is None:
            raise BadInput("gate --production needs --min M (the metric's threshold)")
        if len(tasks) > 1:
            raise BadInput("gate --production checks one task: give --task at most once")
        with Session(ready_engine(settings)) as session:
            result = calibration.monitor(session, dataset, judge, task=tasks[0] if tasks else None, by_window=by_window,
                                         min_value=min_value, min_agreement=min_agreement, positive=positive, level=level,
                                         alpha=1 - settings["CONFIDENCE"])
        checked = calibration.production_gate(result)
        if fmt == "json":
            click.echo(json.dumps(gate.production_json(result, checked), indent=2, ensure_ascii=False))
        else:
            for line in gate.production_lines(result, checked):
                click.echo(line)
        sys.exit(checked["exit"])
    default = settings["THRESHOLD"]
    options = report_options(settings, threshold=default, ci_lower=ci_lower, bootstrap=bootstrap, split=split,
                             order_rule=order_rule, min_shared=min_shared, dataset=dataset, golden=golden)
    options.decision_only = True  # the gate's lines need each task's alignment and decision only
    built = _build(settings, dataset, judge, options, tasks=list(tasks) or None)
    ok, lines = gate.gate_lines(built, min_kappa=default if min_kappa is None else min_kappa,
                                min_rho=default if min_rho is None else min_rho, ci_lower=options.ci_lower,
                                required=list(tasks) or None)
    for line in lines:
        click.echo(line)
    sys.exit(EXIT_OK if ok else EXIT_FAILED)


def _unit_number(name: str, raw: str) -> float:
    """Return `--NAME` as a number strictly between 0 and 1, or a one-line error (click's own is three lines)."""
    try:
        value = float(raw)
    except ValueError:
        raise BadInput(f"--{name} must be a number in (0, 1), not {raw!r}") from None
    if not 0 < value < 1:  # also refuses nan
        hint = ("; the paper suggests 0.2 for experts, 0.15 for skilled annotators, 0.1 for crowd workers"
                if name == "epsilon" else "")
        raise BadInput(f"--{name} must lie strictly between 0 and 1, not {raw}{hint}")
    return value


@click.command("alt-test")
@click.option("--dataset", required=True, help="Dataset to test on.")
@click.option("--task", required=True, help="Task whose expert labels the judge is tested against.")
@click.option("--judge", required=True, help="Judge to test (a prompt run is PROMPT@VERSION).")
@click.option("--epsilon", default="0.2", show_default=True, metavar="E",
              help="Cost-benefit margin ε in (0, 1): the paper suggests 0.2 for experts, 0.15 for skilled annotators "
                   "and 0.1 for crowd workers.")
@click.option("--alpha", default="0.05", show_default=True, metavar="A", help="FDR level of the Benjamini–Yekutieli procedure, in (0, 1).")
@click.option("--scoring", type=click.Choice(["accuracy", "neg_rmse"]),
              help="How an annotator and the judge are scored against the others: accuracy (default for categorical "
                   "and pairwise tasks) or neg_rmse (default for ordinal and continuous ones).")
@click.option("--min-items", "min_items", default="30", show_default=True, metavar="N",
              help="Fewest kept items an annotator must have labelled to be tested.")
@click.option("--split", help="Only the samples of this split (e.g. dev); default every sample.")
@ORDER_RULE
@GOLDEN
@click.option("--format", "fmt", type=click.Choice(["json", "md", "html"]), default="json", show_default=True)
@LOCALE
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to a file instead of standard output.")
@db_option
def alt_test_command(settings: Settings, dataset: str, task: str, judge: str, epsilon: str, alpha: str, scoring: str | None,
                     min_items: str, split: str | None, order_rule: str, golden: str | None, fmt: str, locale: str,
                     output: Path | None) -> None:
    """Could the judge replace one of the experts? The Alternative Annotator Test (Calderon et al., 2025)."""
    eps, level = _unit_number("epsilon", epsilon), _unit_number("alpha", alpha)
    if not (min_items.strip().isascii() and min_items.strip().isdigit()) or int(min_items) < 1:
        raise BadInput(f"--min-items must be a positive whole number, not {min_items!r}")
    samples, cited = golden_scope(settings, dataset, golden)
    with Session(ready_engine(settings)) as session:
        result = calibration.run_alt_test(session, dataset, task, judge, epsilon=eps, alpha=level, scoring=scoring,
                                      min_items=int(min_items), split=split, order_rule=order_rule, samples=samples,
                                      golden=cited)
    if result["status"] != "ok":
        raise BadInput(f"the alt-test cannot be run on {task} of {dataset} with {judge}: {result['note']}")
    write_output(alt_test_report.render_alt_test(result, fmt, locale), output, f"{fmt} alt-test")


@click.command("compare")
@click.option("--dataset", required=True, help="Dataset both judges ran on.")
@click.option("--judge", "judges", multiple=True, required=True, metavar="NAME",
              help="Give twice: --judge A --judge B (B is compared against A).")
@click.option("--task", help="Compare on this task only (default: every task both judged).")
@click.option("--bootstrap", type=click.IntRange(min=100), help="Paired bootstrap resamples (default 2000).")
@click.option("--ci-method", type=click.Choice(["percentile", "bca"]), default="percentile", show_default=True)
@click.option("--split", help="Only the samples of this split (e.g. dev); default every sample.")
@ORDER_RULE
@GOLDEN
@click.option("--format", "fmt", type=click.Choice(["json", "html", "md"]), default="json", show_default=True)
@LOCALE
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to a file instead of standard output.")
@db_option
def compare_command(settings: Settings, dataset: str, judges: tuple[str, ...], task: str | None, bootstrap: int | None,
                    ci_method: str, split: str | None, order_rule: str, golden: str | None, fmt: str, locale: str,
                    output: Path | None) -> None:
    """Compare two judges on the same targets: paired bootstrap, McNemar or t/Wilcoxon, flips."""
    if len(judges) != 2:
        raise click.UsageError("give exactly two judges: --judge A --judge B")
    options = report_options(settings, bootstrap=bootstrap, ci_method=ci_method, split=split, order_rule=order_rule,
                             dataset=dataset, golden=golden)
    with Session(ready_engine(settings)) as session:
        result = calibration.compare_judges(session, dataset, judges[0], judges[1], task=task, options=options)
    write_output(compare_report.render_compare(result, fmt, locale), output, f"{fmt} comparison")


@click.command("ab")
@click.option("--dataset", required=True, help="Dataset holding both systems' samples.")
@click.option("--by", "by", required=True, metavar="FIELD", help="Field that names the system, e.g. metadata.system.")
@click.option("--a", "system_a", required=True, metavar="VALUE", help="System A, the baseline (a value of --by).")
@click.option("--b", "system_b", required=True, metavar="VALUE", help="System B, compared with A (a value of --by).")
@click.option("--metric", required=True,
              help="faithfulness, context_precision, ndcg@K, recall@K, precision@K, f1@K, mrr, or a score task such as answer_quality.")
@click.option("--source", default="human", show_default=True, metavar="human|JUDGE",
              help="Measure from the experts' gold (and the samples' id lists), or from the named judge's verdicts.")
@click.option("--bootstrap", type=click.IntRange(min=100), help="Bootstrap resamples of the paired difference (default 2000).")
@click.option("--ci-method", type=click.Choice(["percentile", "bca"]), default="percentile", show_default=True)
@click.option("--format", "fmt", type=click.Choice(["json", "html", "md"]), default="json", show_default=True)
@LOCALE
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to a file instead of standard output.")
@db_option
def ab_command(settings: Settings, dataset: str, by: str, system_a: str, system_b: str, metric: str, source: str,
               bootstrap: int | None, ci_method: str, fmt: str, locale: str, output: Path | None) -> None:
    """Compare two systems on one metric, paired by question (t-test, Wilcoxon, bootstrap CI)."""
    options = calibration.ABOptions(bootstrap=settings["BOOTSTRAP"] if bootstrap is None else bootstrap,
                        confidence=settings["CONFIDENCE"], seed=settings["SEED"], ci_method=ci_method)
    with Session(ready_engine(settings)) as session:
        result = calibration.compare_systems(session, dataset, by=by, a=system_a, b=system_b, metric=metric, source=source, options=options)
    write_output(ab_report.render_ab(result, fmt, locale), output, f"{fmt} A/B comparison")
