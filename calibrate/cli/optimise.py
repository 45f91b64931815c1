"""`calibrate optimise`: propose judge versions from the train split, select on dev, confirm on test once.

Exit codes: 0 when it ran to a stop (whatever the stop: the output says which, and the decision),
1 when interrupted (Ctrl+C: the same command continues it), 2 for a refusal (nothing called) or a
backend that refuses for good.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from calibrate import lazy
from calibrate.cli.common import EXIT_FAILED, BadInput, Settings, db_option, ready_engine, write_output

# Loaded when the command runs, not for its --help (the optimiser brings the runner, pandas and SciPy).
optimiser = lazy.module("calibrate.loop.optimise")
optimise_report = lazy.module("calibrate.reports.optimise_report")
prices = lazy.module("calibrate.judges.prices")
sandbox = lazy.module("calibrate.judges.sandbox")
judge_errors = lazy.module("calibrate.judges.errors")


def _strategies(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in value.split(",") if part.strip())
    wrong = [name for name in names if name not in ("fewshot", "rewrite")]
    if wrong or not names:
        raise click.BadParameter(f"one or more of fewshot, rewrite (comma-separated), not {value!r}")
    return names


@click.command("optimise")
@click.option("--dataset", required=True, help="Dataset with train and dev splits (and test, to confirm).")
@click.option("--task", default="claim_support", show_default=True, help="Task whose judge is optimised.")
@click.option("--from", "start", required=True, metavar="NAME@V", help="Prompt version to start from (a candidate itself).")
@click.option("--backend", type=click.Choice(["openai", "anthropic"]), default="openai", show_default=True)
@click.option("--model", help="Model, when the version names none.")
@click.option("--base-url", help="API base URL (default: OpenAI's or Anthropic's; e.g. http://localhost:11434/v1 for Ollama).")
@click.option("--api-key-env", metavar="VAR",
              help="Environment variable holding the API key (default OPENAI_API_KEY or ANTHROPIC_API_KEY; '' for none).")
@click.option("--concurrency", type=click.IntRange(min=1, max=512), default=8, show_default=True, help="Calls in flight at most.")
@click.option("--samples", "n_samples", type=click.IntRange(1, 20), default=1, show_default=True, metavar="K",
              help="Self-consistency: K calls per target in every run (sample 0 is the verdict scored).")
@click.option("--orders", type=click.Choice(["original", "swapped", "both"]), help="Pairwise tasks: the presentation orders.")
@click.option("--target", type=float, default=0.75, show_default=True,
              help="What the chosen version's lower bound must reach: the task's metric (κ, or ρ for scores), in (0, 1].")
@click.option("--max-candidates", type=int, default=12, show_default=True, help="Versions proposed at most (the start included).")
@click.option("--max-calls", type=click.IntRange(min=1), help="Stop once this many HTTP calls were made (retries count).")
@click.option("--max-cost", type=click.FloatRange(min=0, min_open=True), metavar="USD", help="Stop once this much was spent.")
@click.option("--patience", type=int, default=2, show_default=True, help="Stop after this many rounds without a gain.")
@click.option("--strategies", default="fewshot,rewrite", show_default=True, callback=_strategies,
              help="How candidates are made: fewshot, rewrite, or both (and both together).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the choices among train items.")
@click.option("--reuse-test", is_flag=True, help="Confirm on a test split already looked at for the task (the look is counted).")
@click.option("--rewriter", metavar="NAME@V", help="instruction_rewrite prompt version (default: instruction-rewrite, made on first use).")
@click.option("--adjustment", type=click.Choice(["max_statistic", "bonferroni"]), default="max_statistic", show_default=True,
              help="How lower_adjusted accounts for the looks on dev.")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=120.0, show_default=True, help="Read timeout of one call, seconds.")
@click.option("--max-attempts", type=click.IntRange(1, 10), default=5, show_default=True, help="Attempts per call.")
@click.option("--format", "fmt", type=click.Choice(["json", "md", "html"]), default="json", show_default=True)
@click.option("--locale", default="en", show_default=True, help="Language of the Markdown and HTML output (en, es).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to a file instead of standard output.")
@db_option
def optimise_command(settings: Settings, dataset: str, task: str, start: str, backend: str, model: str | None,
                     base_url: str | None, api_key_env: str | None, concurrency: int, n_samples: int, orders: str | None,
                     target: float, max_candidates: int, max_calls: int | None, max_cost: float | None, patience: int,
                     strategies: tuple[str, ...], seed: int, reuse_test: bool, rewriter: str | None, adjustment: str,
                     timeout: float, max_attempts: int, fmt: str, locale: str, output: Path | None) -> None:
    """Propose judge versions from the train split, select on dev with a bound that knows how many were tried, confirm on test once."""
    spec = optimiser.OptimiseSpec(
        dataset=dataset, task=task, start=start, backend=backend, model=model, base_url=base_url, api_key_env=api_key_env,
        concurrency=concurrency, samples=n_samples, orders=orders, target=target, max_candidates=max_candidates,
        max_calls=max_calls, max_cost=max_cost, patience=patience, strategies=strategies, seed=seed, reuse_test=reuse_test,
        rewriter=rewriter, adjustment=adjustment, timeout=timeout, max_attempts=max_attempts,
        bootstrap=int(settings["BOOTSTRAP"]), confidence=float(settings["CONFIDENCE"]), score_seed=int(settings["SEED"]))
    engine = ready_engine(settings)
    table = prices.load_prices(settings["INSTANCE_PATH"])
    opt_id = optimiser.prepare_optimisation(engine, spec, prices=table)
    try:
        result = optimiser.execute_optimisation(engine, opt_id, prices=table, limits=sandbox.Limits.from_settings(settings),
                                                progress=lambda line: click.echo(line, err=True))
    except KeyboardInterrupt:
        click.echo(f"interrupted: optimisation {opt_id} keeps its candidates and runs; run the same command again to continue "
                   "(answered calls come from the cache)", err=True)
        sys.exit(EXIT_FAILED)
    except judge_errors.JudgeError as exc:
        raise BadInput(str(exc)) from exc
    write_output(optimise_report.render_optimise(result, fmt, locale), output, f"{fmt} optimisation")
