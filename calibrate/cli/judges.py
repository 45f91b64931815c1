"""`calibrate prompt new|list|show|diff` and `calibrate judge run`.

Exit code 2 with a one-line `error:` for bad input, a missing API-key variable, bad
credentials, an unknown model or an unreachable base URL. Ctrl+C during a run says what was
saved and that the same command continues it (exit code 1).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from sqlmodel import Session

from calibrate import lazy, lookup
from calibrate.cli.common import EXIT_FAILED, BadInput, Settings, db_option, ready_engine
from calibrate.db import write_session
from calibrate.errors import NotFound
from calibrate.judges.errors import NothingToDo, PromptError
from calibrate.models import JudgeRun

# Loaded when a command runs, not for its --help (runs bring httpx and the metric judges' numpy,
# versions the gold rule's pandas).
judges = lazy.module("calibrate.judges")
prices = lazy.module("calibrate.judges.prices")
sandbox = lazy.module("calibrate.judges.sandbox")
versions = lazy.module("calibrate.judges.versions")


def _read(path: Path | None, what: str) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{what} {path}: {exc}") from exc


@click.group("prompt")
def prompt_group() -> None:
    """Manage judge prompts and their immutable versions."""


@prompt_group.command("new")
@click.argument("name")
@click.option("--task", help="Task the prompt judges (needed for a new prompt).")
@click.option("--template", "template_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Jinja2 template of the item message (default: the task's built-in one, or the previous version's).")
@click.option("--system", "system_file", type=click.Path(dir_okay=False, path_type=Path),
              help="File with the system text (instructions, rubric, examples: the same for every item).")
@click.option("--model", help="Model the version is meant for.")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="A model parameter (repeatable), e.g. temperature=0.")
@click.option("--few-shot", "few_shots", multiple=True, metavar="SAMPLE[:N]",
              help="A human-labelled target shown as an example (repeatable): SAMPLE for answer tasks, SAMPLE:N for claim/context N.")
@click.option("--no-few-shots", is_flag=True, help="Drop the previous version's examples.")
@click.option("--dataset", "datasets", multiple=True, metavar="NAME",
              help="A new prompt: scope it to this dataset (repeatable; other datasets' dashboards do not list it and it "
                   "runs only on its datasets). Its few-shot samples are looked up there (name one when an id exists in "
                   "several). An existing prompt: the dataset of the few-shot samples, one of its datasets if it is scoped.")
@click.option("--note", default="", help="What changed and why.")
@db_option
def prompt_new_command(settings: Settings, name: str, task: str | None, template_file: Path | None, system_file: Path | None,
                       model: str | None, params: tuple[str, ...], few_shots: tuple[str, ...], no_few_shots: bool,
                       datasets: tuple[str, ...], note: str) -> None:
    """Save a version of a prompt (a new prompt gets version 1, global or scoped to --dataset); print NAME@N."""
    if few_shots and no_few_shots:
        raise click.UsageError("--few-shot and --no-few-shots exclude each other")
    template, system = _read(template_file, "--template"), _read(system_file, "--system")
    parsed = versions.parse_params(params) if params else None
    specs = [judges.FewShotSpec(ref) for ref in few_shots] if few_shots else ([] if no_few_shots else None)
    engine = ready_engine(settings)
    fields = {"task": task, "template": template, "system": system, "model": model, "few_shots": specs,
              "dataset": datasets[0] if len(set(datasets)) == 1 else None, "datasets": datasets,
              "limits": sandbox.Limits.from_settings(settings)}
    # Checked first, outside the write lock: the templates' trial render may take PROMPT_RENDER_SECONDS.
    with Session(engine) as session:
        checked = versions.check_version(session, name, params=_with_previous_params(session, name, parsed), **fields)
    with write_session(engine) as session:
        result = judges.save_version(session, name, params=_with_previous_params(session, name, parsed), note=note,
                                     checked=checked, **fields)
        line = result.line(name)
    click.echo(line)


def _with_previous_params(session: Session, name: str, parsed: dict | None) -> dict | None:
    """Return --param values over the latest version's parameters (None: keep them as they are)."""
    if parsed is None:
        return None
    try:
        previous = versions.latest_version(session, lookup.prompt(session, name))
    except NotFound:
        previous = None
    return {**(previous.params if previous else versions.DEFAULT_PARAMS), **parsed}


@prompt_group.command("list")
@click.option("--dataset", help="Only the prompts shown on this dataset: the global ones and those scoped to it.")
@db_option
def prompt_list_command(settings: Settings, dataset: str | None) -> None:
    """List prompts: name, task, versions, latest version, runs, and the datasets of a scoped prompt."""
    with Session(ready_engine(settings)) as session:
        if dataset:
            lookup.dataset(session, dataset)  # an unknown name is refused, naming the datasets
        for row in versions.list_prompts(session, dataset=dataset):
            scope = f"\tdatasets {','.join(row.scope)}" if row.scope else ""
            click.echo(f"{row.prompt.name}\t{row.task}\t{row.versions} versions\tlatest {row.prompt.name}@{row.latest}\t"
                       f"{row.runs} runs{scope}")


@prompt_group.command("show")
@click.argument("ref", metavar="NAME@N")
@db_option
def prompt_show_command(settings: Settings, ref: str) -> None:
    """Show a version: model, parameters, few-shot examples, system text and template."""
    with Session(ready_engine(settings)) as session:
        prompt, version = versions.resolve_version(session, ref)
        view = versions.version_view(session, prompt, version)
    v = view.version
    click.echo(f"{view.ref}  task {view.task.name}  hash {v.content_hash[:12]}  created {v.created_at:%Y-%m-%d %H:%M}"
               + (f"  by {view.author}" if view.author else "") + (f"  from @{view.parent}" if view.parent else ""))
    if v.note:
        click.echo(f"note: {v.note}")
    if v.optimisation_id:
        click.echo(f"origin: proposed by optimisation {v.optimisation_id} (calibrate optimise)")
    click.echo(f"model: {v.model or '(none: give --model to judge run)'}")
    click.echo("params: " + (versions.format_params(v.params).replace("\n", ", ") or "(none)"))
    click.echo(f"few-shots: {len(view.examples)}")
    for e in view.examples:
        click.echo(f"  {e.ref} = {e.value}" + (f" | {e.rationale}" if e.rationale else ""))
    click.echo("--- system")
    click.echo(v.system)
    click.echo("--- template")
    click.echo(v.template)


@prompt_group.command("diff")
@click.argument("a", metavar="NAME@A")
@click.argument("b", metavar="NAME@B")
@db_option
def prompt_diff_command(settings: Settings, a: str, b: str) -> None:
    """Print a unified diff of two versions (template, system, model, params, few-shots)."""
    with Session(ready_engine(settings)) as session:
        prompt_a, version_a = versions.resolve_version(session, a)
        prompt_b, version_b = versions.resolve_version(session, b)
        if prompt_a.id != prompt_b.id:
            raise PromptError(f"{a} and {b} are versions of different prompts")
        text = versions.unified_diff(session, prompt_a, version_a, version_b)
    click.echo(text)


ENDPOINT_OPTIONS = (
    click.option("--backend", type=click.Choice(["openai", "anthropic", "baseline"]), default="baseline", show_default=True),
    click.option("--model", help="Model, when the version names none."),
    click.option("--base-url", help="API base URL (default: OpenAI's or Anthropic's; e.g. http://localhost:11434/v1 for Ollama)."),
    click.option("--api-key-env", metavar="VAR",
                 help="Environment variable holding the API key (default OPENAI_API_KEY or ANTHROPIC_API_KEY; '' for none)."),
    click.option("--concurrency", type=click.IntRange(min=1, max=512), default=8, show_default=True, help="Calls in flight at most."),
    click.option("--max-calls", type=click.IntRange(min=1), help="Stop cleanly after this many HTTP calls (retries count)."),
    click.option("--max-tokens", type=click.IntRange(min=1), help="Stop cleanly once this many tokens (input + output) are used."),
    click.option("--timeout", type=click.FloatRange(min=0.1), default=120.0, show_default=True, help="Read timeout of one call, seconds."),
    click.option("--max-attempts", type=click.IntRange(1, 10), default=5, show_default=True, help="Attempts per item."),
)


def endpoint_options(func):
    """Add the options of a judge run's calls — where they go, how many at once, their budgets, timeout and
    attempts — to a command (`judge run`, `watch`): one definition, the same names and defaults in both."""
    for option in reversed(ENDPOINT_OPTIONS):
        func = option(func)
    return func


def run_options(concurrency: int, max_calls: int | None, max_tokens: int | None, timeout: float, max_attempts: int):
    """Return the RunOptions of `endpoint_options`' values."""
    return judges.RunOptions(concurrency=concurrency, max_calls=max_calls, max_tokens=max_tokens,
                             read_timeout=timeout, max_attempts=max_attempts)


@click.group("judge")
def judge_group() -> None:
    """Run judges over a dataset."""


@judge_group.command("run")
@click.option("--dataset", required=True, help="Dataset to judge.")
@click.option("--prompt", "prompt_ref", required=True, metavar="NAME@N", help="Prompt version to run (its judge is NAME@N).")
@endpoint_options
@click.option("--split", type=click.Choice(["train", "dev", "test"]), help="Only samples of this split.")
@click.option("--labelled-only", is_flag=True, help="Only targets that carry a human label.")
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N targets.")
@click.option("--rerun", is_flag=True, help="Judge targets that already have a verdict again (answers come from the cache).")
@click.option("--orders", type=click.Choice(["original", "swapped", "both"]),
              help="Pairwise tasks: the presentation orders to judge each target in (default both; swapped shows the "
                   "responses in reverse order).")
@click.option("--samples", "n_samples", type=click.IntRange(1, 20), default=1, show_default=True, metavar="K",
              help="Self-consistency: call K times per target (the version's temperature; K cache entries, K verdicts; "
                   "sample 0 is the target's verdict everywhere else).")
@db_option
def judge_run_command(settings: Settings, dataset: str, prompt_ref: str, backend: str, model: str | None, base_url: str | None,
                      api_key_env: str | None, concurrency: int, max_calls: int | None, max_tokens: int | None,
                      split: str | None, labelled_only: bool, limit: int | None, rerun: bool, orders: str | None,
                      n_samples: int, timeout: float, max_attempts: int) -> None:
    """Run a prompt version over a dataset and store one verdict per target (resumable)."""
    spec = judges.RunSpec(dataset=dataset, prompt=prompt_ref, backend=backend, model=model, base_url=base_url,
                   api_key_env=api_key_env, split=split, labelled_only=labelled_only, limit=limit, rerun=rerun, orders=orders,
                   samples=n_samples, options=run_options(concurrency, max_calls, max_tokens, timeout, max_attempts))
    engine = ready_engine(settings)
    price_table = prices.load_prices(settings["INSTANCE_PATH"])
    try:
        run_id = judges.prepare_run(engine, spec)
    except NothingToDo as exc:  # not a refusal: every target is judged already
        click.echo(str(exc))
        return
    bar = None
    progress = None
    if sys.stderr.isatty():
        from tqdm import tqdm  # noqa: PLC0415 - only an interactive terminal shows a bar

        bar = tqdm(desc=f"judging with {prompt_ref}", unit=" targets", file=sys.stderr, mininterval=0.3)

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()
    try:
        summary = judges.execute_run(engine, run_id, prices=price_table, progress=progress,
                                     limits=sandbox.Limits.from_settings(settings))
    except KeyboardInterrupt:  # execute_run has marked the run stopped; say what that means
        click.echo(interrupted_line(engine, run_id, prompt_ref, dataset), err=True)
        sys.exit(EXIT_FAILED)
    finally:
        if bar is not None:
            bar.close()
    for line in summary.lines():
        click.echo(line)
    if summary.status == "failed":
        raise BadInput(summary.error)


def interrupted_line(engine, run_id: int, prompt_ref: str, dataset: str, *, command: str = "judge run") -> str:
    """Return what Ctrl+C on a run prints: what is saved, and that the same command continues."""
    with Session(engine) as session:
        run = session.get(JudgeRun, run_id)
        done, total = (run.n_done, run.n_total) if run else (0, 0)
    return (f"interrupted: run {run_id} stopped with {done} of {total} targets judged and saved; "
            f"run `calibrate {command} --dataset {dataset} --prompt {prompt_ref}` again to continue "
            f"(answered calls come from the cache, nothing is judged twice)")
