"""`calibrate claims extract`: an LLM splits each answer into claims, through the judge runner.

Exit codes: 0 every answer in scope carries the extraction's claims (or kept its labelled
ones), 1 an answer could not be extracted (unparsed, empty, a failed call) or the run stopped
before the end, 2 bad input (a prompt that is not a claim_extraction one, an unknown dataset,
prompt or backend, a missing API-key variable, bad credentials: one `error:` line).
"""

from __future__ import annotations

import sys

import click
from sqlmodel import Session

from calibrate import lazy
from calibrate.cli.common import EXIT_FAILED, BadInput, Settings, db_option, ready_engine
from calibrate.cli.judges import interrupted_line
from calibrate.judges.errors import NothingToDo

# Loaded when the command runs, not for its --help (runs bring httpx and numpy).
judges = lazy.module("calibrate.judges")
extraction = lazy.module("calibrate.judges.extraction")
prices = lazy.module("calibrate.judges.prices")


@click.group("claims")
def claims_group() -> None:
    """Extract the answers' claims with an LLM (claim_extraction prompts)."""


@claims_group.command("extract")
@click.option("--dataset", required=True, help="Dataset whose answers to split into claims.")
@click.option("--prompt", "prompt_ref", required=True, metavar="NAME@V", help="A prompt version of task claim_extraction.")
@click.option("--backend", required=True, metavar="openai|anthropic|baseline",
              help="Where the calls go (baseline: the sentence segmenter's claims, offline).")
@click.option("--base-url", help="API base URL (default: OpenAI's or Anthropic's; e.g. http://localhost:11434/v1 for Ollama).")
@click.option("--model", help="Model, when the version names none.")
@click.option("--api-key-env", metavar="VAR", help="Environment variable holding the API key (default OPENAI_API_KEY or ANTHROPIC_API_KEY; '' for none).")
@click.option("--concurrency", type=click.IntRange(min=1, max=512), default=8, show_default=True, help="Calls in flight at most.")
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N answers.")
@click.option("--force", is_flag=True,
              help="Also re-extract answers whose claims carry expert labels or corrections (those labels are flagged stale).")
@db_option
def claims_extract_command(settings: Settings, dataset: str, prompt_ref: str, backend: str, base_url: str | None,
                           model: str | None, api_key_env: str | None, concurrency: int, limit: int | None,
                           force: bool) -> None:
    """Replace each answer's claims with those a claim_extraction prompt version extracts (one call per answer)."""
    spec = judges.RunSpec(dataset=dataset, prompt=prompt_ref, backend=backend, model=model, base_url=base_url,
                          api_key_env=api_key_env, limit=limit, extraction=True, force=force,
                          options=judges.RunOptions(concurrency=concurrency))
    engine = ready_engine(settings)
    price_table = prices.load_prices(settings["INSTANCE_PATH"])
    status = "done"
    try:
        run_id = judges.prepare_run(engine, spec)
    except NothingToDo as exc:  # every answer carries this version's claims already: no call at all
        click.echo(str(exc))
    else:
        try:
            summary = judges.execute_run(engine, run_id, prices=price_table)
        except KeyboardInterrupt:
            click.echo(interrupted_line(engine, run_id, prompt_ref, dataset, command="claims extract"), err=True)
            sys.exit(EXIT_FAILED)
        for line in summary.lines():
            click.echo(line)
        if summary.status == "failed":
            raise BadInput(summary.error)
        status = summary.status
    with Session(engine) as session:
        report = extraction.report_for(session, dataset, prompt_ref, limit=limit, force=force)
    for line in report.lines():
        click.echo(line)
    if report.n_failed or report.not_done or status != "done":
        sys.exit(EXIT_FAILED)
