"""`calibrate watch`: judge a dataset's new targets pass after pass; several watchers share the work.

Exit codes: 0 when the watcher ends — `--once` after its pass, SIGTERM or Ctrl+C (the calls in
flight are finished and written first), or its budget spent; 2 for bad input (one `error:`
line: an unknown dataset or prompt, a metric version fitted on the samples judged together, a missing API-key variable), and with
`--once` when the pass's endpoint refused (bad credentials, an unknown model, unreachable).
Without `--once` a refused pass is said on stderr and the next pass tries again.
"""

from __future__ import annotations

import signal
import sys
import threading

import click

from calibrate import lazy
from calibrate.cli.common import BadInput, Settings, db_option, ready_engine
from calibrate.cli.judges import endpoint_options, run_options
from calibrate.db import write_session
from calibrate.errors import CalibrateError

# Loaded when the command runs, not for its --help (runs bring httpx and numpy).
watch = lazy.module("calibrate.judges.watch")
prices = lazy.module("calibrate.judges.prices")
sandbox = lazy.module("calibrate.judges.sandbox")
auto_queue = lazy.module("calibrate.annotation.auto_queue")


def fill_queues(engine, dataset: str) -> str | None:
    """Apply the dataset's saved `queue auto` policy after a pass; return its line (None: no policy saved).

    The policy's daily budgets make a second watcher's call the same day add only what is left, and its
    audit draws are made once per judged sample, so every watcher may call it. A refusal (say, an assignee
    removed since the policy was saved) is said, not fatal: judging goes on.
    """
    try:
        with write_session(engine) as session:
            summary = auto_queue.apply_saved_policy(session, dataset)
    except CalibrateError as exc:
        return f"queue auto: error: {exc}"
    return None if summary is None else "queue auto: " + auto_queue.summary_line(summary)


@click.command("watch")
@click.option("--dataset", required=True, help="Dataset to watch: every target without a verdict of the version is judged.")
@click.option("--prompt", "prompt_ref", required=True, metavar="NAME@N", help="Prompt version to run (its judge is NAME@N).")
@endpoint_options
@click.option("--extract", "extract_ref", metavar="NAME@V",
              help="claim_extraction version run first on answers imported without claims (their claims are then judged).")
@click.option("--every", type=click.FloatRange(min=0.1), default=30.0, show_default=True, help="Seconds between passes.")
@click.option("--once", is_flag=True, help="One pass, then exit 0.")
@click.option("--lease", type=click.FloatRange(min=1), default=60.0, show_default=True,
              help="Seconds a claimed job stays this watcher's without renewal (a killed watcher's jobs are taken over after it).")
@db_option
def watch_command(settings: Settings, dataset: str, prompt_ref: str, backend: str, model: str | None, base_url: str | None,
                  api_key_env: str | None, concurrency: int, max_calls: int | None, max_tokens: int | None, timeout: float,
                  max_attempts: int, extract_ref: str | None, every: float, once: bool, lease: float) -> None:
    """Judge every target of a dataset that has no verdict of the version, pass after pass (watchers share the work)."""
    spec = watch.WatchSpec(dataset=dataset, prompt=prompt_ref, backend=backend, model=model, base_url=base_url,
                           api_key_env=api_key_env, options=run_options(concurrency, max_calls, max_tokens, timeout, max_attempts),
                           extract=extract_ref, every=every, once=once, lease=lease)
    engine = ready_engine(settings)
    watcher = watch.Watcher(engine, spec, prices=prices.load_prices(settings["INSTANCE_PATH"]),
                            limits=sandbox.Limits.from_settings(settings))
    stop = threading.Event()

    def asked_to_stop(signum: int, _frame: object) -> None:
        stop.set()  # the pass finishes its calls in flight and writes them; no new call starts

    previous = {signum: signal.signal(signum, asked_to_stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    click.echo(f"watching {dataset} with {prompt_ref}" + (f" (extracting claims with {extract_ref})" if extract_ref else "")
               + ("" if once else f", a pass every {every:g} s"), err=True)
    try:
        for summary in watcher.passes(stop):
            for line in summary.lines():
                click.echo(line)
            sys.stdout.flush()
            if summary.failed:
                if once:
                    raise BadInput(summary.failed)
                click.echo(f"error: {summary.failed} (the next pass tries again)", err=True)
            if summary.stopped:
                click.echo(summary.stopped, err=True)
            elif not summary.failed and (line := fill_queues(engine, dataset)) is not None:
                click.echo(line)  # the experts' queues fill themselves from what this pass judged
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if stop.is_set():
        click.echo("stopped: calls in flight were written; run the same command to go on", err=True)
