"""The `calibrate` command line (also `flask --app calibrate <command>`).

Commands are thin: parse, call one domain function inside one transaction, print. Each
command group lives in its own module, registered here by name (`COMMANDS`) and imported only
when that command runs, so `calibrate --help` and `calibrate task list` never load what
`calibrate report` needs (pandas, SciPy, scikit-learn) or the web app (Flask's views).
Every command takes `--db URL`; exit codes: 0 ok, 1 a check failed (`gate`) or a run was
interrupted, 2 bad usage or bad input (common.py catches every refusal in one place).

To add a command: write it in a module here, add it to `COMMANDS` with its one-line help
(a test checks the line against the command's docstring), and document it in docs/cli.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import Any

import click

# name → (module under calibrate.cli, the command or group in it, its help line for `calibrate --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "ab": ("reports", "ab_command", "Compare two systems on one metric, paired by question (t-test, Wilcoxon, bootstrap CI)."),
    "alt-test": ("reports", "alt_test_command", "Could the judge replace one of the experts? The Alternative Annotator Test (Calderon et al., 2025)."),
    "check": ("database", "check_command", "Check every page of the database now (the start-up check reads its header and schema only)."),
    "claims": ("claims", "claims_group", "Extract the answers' claims with an LLM (claim_extraction prompts)."),
    "cleanup": ("imports", "cleanup_command",
                "Remove what unfinished imports left (killed or crashed: never visible); list imports still running."),
    "compare": ("reports", "compare_command", "Compare two judges on the same targets: paired bootstrap, McNemar or t/Wilcoxon, flips."),
    "demo": ("demo", "demo_command", "Load the bundled demo (samples, experts' labels, logins) and serve it."),
    "estimate": ("estimate", "estimate_command",
                 "Estimate the task's mean over the live system from verdicts and labels (PPI++, PPI, classical, Rogan-Gladen)."),
    "export": ("export", "export_group", "Write labels, verdicts, samples or the experts' assignments to a file."),
    "gate": ("reports", "gate_command", "Exit 0 when the judge is calibrated on every checked task, 1 when not (for CI/CD)."),
    "golden": ("golden", "golden_group", "Golden sets: versioned, hashed lists of expert-labelled samples that decisions are pinned to."),
    "import": ("imports", "import_command",
               "Import samples, labels or verdicts (JSONL, JSON, CSV), or a TREC run or qrels file (all or nothing)."),
    "init": ("database", "init_command", "Create the database, or upgrade it to the current schema (labels are never dropped)."),
    "judge": ("judges", "judge_group", "Run judges over a dataset."),
    "monitor": ("production", "monitor_command",
                "Watch the calibrated judge on production: per window, the metric from audit labels, agreement and a status."),
    "optimise": ("optimise", "optimise_command",
                 "Propose judge versions from the train split, select on dev with a bound that knows how many were tried, "
                 "confirm on test once."),
    "prompt": ("judges", "prompt_group", "Manage judge prompts and their immutable versions."),
    "queue": ("sampling", "queue_group", "The order annotators get a dataset's pending items in."),
    "report": ("reports", "report_command", "Write the calibration report of a judge on a dataset (JSON, HTML, Markdown or CSV)."),
    "sample": ("sampling", "sample_command", "Choose the samples experts should label and queue them (seeded, reproducible)."),
    "serve": ("serve", "serve_command", "Serve the workbench with a production WSGI server (waitress; gunicorn for --workers N)."),
    "task": ("tasks", "task_group", "Manage tasks (what is labelled, on which target, with which values)."),
    "traces": ("traces", "traces_group", "Import production traces (OpenTelemetry/OpenInference, GenAI, Langfuse) as sampled samples."),
    "users": ("accounts", "users_group", "Manage accounts."),
    "watch": ("watch", "watch_command",
              "Judge every target of a dataset that has no verdict of the version, pass after pass (watchers share the work)."),
}


def load_command(name: str) -> click.Command:
    """Import the module of a registered command and return the command."""
    module, attribute, _ = COMMANDS[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), attribute)


class LazyCommands(MutableMapping):
    """The group's commands: every name known from `COMMANDS`, each imported on first access."""

    def __init__(self) -> None:
        self.loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self.loaded:
            if name not in COMMANDS:
                raise KeyError(name)
            self.loaded[name] = load_command(name)
        return self.loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self.loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted({*COMMANDS, *self.loaded}))

    def __len__(self) -> int:
        return len({*COMMANDS, *self.loaded})


class LazyGroup(click.Group):
    """A group whose commands load when run; its help lists them from `COMMANDS` without loading any."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands()

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        # A bare Command shortens the registered line exactly as the real one shortens its help.
        rows = [(name, click.Command(name, help=COMMANDS[name][2]).get_short_help_str(limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="calibrate")
def cli() -> None:
    """calibrate: calibrate LLM judges against domain experts."""


def register_flask_commands(app: Any) -> None:
    """Expose the same commands under `flask --app calibrate <command>`."""
    for name in COMMANDS:
        app.cli.add_command(load_command(name), name)


def main() -> None:
    """Run the console script."""
    cli(prog_name="calibrate")
