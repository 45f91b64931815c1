"""The `calibrate` command line (also `flask --app calibrate <command>`).

Commands are thin: parse, call one domain function inside one transaction, print.
Exit codes: 0 ok, 1 a check failed (for example `gate`), 2 bad usage or bad input.
Every command takes `--db URL` (default: the SQLite file in the instance folder).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import click
from flask import Flask

from calibrate import create_app

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(click.ClickException):
    """A one-line error about the user's input; exits with code 2."""

    exit_code = EXIT_BAD_INPUT

    def show(self, file=None) -> None:  # noqa: ANN001
        click.echo(f"error: {self.format_message()}", err=True)


def db_option(func):
    """Add `--db URL` to a command and pass it the app (created for that database)."""

    @click.option("--db", "db_url", metavar="URL", envvar="CALIBRATE_DATABASE_URL",
                  help="Database URL (default: sqlite file in the instance folder).")
    @functools.wraps(func)
    def wrapper(*args, db_url: str | None = None, **kwargs):
        ctx = click.get_current_context()
        app = _app_for(ctx, db_url)
        with app.app_context():
            return func(app, *args, **kwargs)

    return wrapper


def _app_for(ctx: click.Context, db_url: str | None) -> Flask:
    root = ctx.find_root()
    app = root.obj if isinstance(root.obj, Flask) else None
    if app is None:
        try:  # under `flask --app calibrate …` the ScriptInfo knows the app
            from flask.cli import ScriptInfo

            info = ctx.find_object(ScriptInfo)
            app = info.load_app() if info else None
        except Exception:  # noqa: BLE001 - fall back to our own app
            app = None
    if app is None or (db_url and db_url != app.config["DATABASE_URL"]):
        config = {"DATABASE_URL": db_url} if db_url else {}
        if app is not None:
            config.update({k: app.config[k] for k in ("TESTING", "SECRET_KEY") if k in app.config})
            config["INSTANCE_PATH"] = app.instance_path
        app = create_app(config or None)
    return app


def engine_of(app: Flask):
    """Return the engine of the app's database."""
    from calibrate.db import get_engine

    return get_engine(app.config["DATABASE_URL"], busy_timeout=app.config["SQLITE_BUSY_TIMEOUT"])


def ready_engine(app: Flask):
    """Return the engine after checking the database exists and is at the current schema."""
    from calibrate.migrations import current_revision, head_revision

    engine = engine_of(app)
    revision = current_revision(engine)
    if revision is None:
        raise BadInput(f"the database {_safe_url(app)} is empty: run `calibrate init` first")
    if revision != head_revision():
        raise BadInput(f"the database schema is at {revision}, this calibrate needs {head_revision()}: run `calibrate init` to upgrade")
    return engine


def _safe_url(app: Flask) -> str:
    from sqlalchemy.engine import make_url

    return make_url(app.config["DATABASE_URL"]).render_as_string(hide_password=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="calibrate")
def cli() -> None:
    """calibrate: calibrate LLM judges against domain experts."""


# --------------------------------------------------------------------------- init / serve


def init_database(app: Flask) -> str:
    """Create or upgrade the schema and the built-in tasks; return a one-line description."""
    from calibrate.db import write_session
    from calibrate.migrations import current_revision, head_revision, upgrade
    from calibrate.tasks import ensure_builtin_tasks

    engine = engine_of(app)
    before = current_revision(engine)
    upgrade(engine)
    with write_session(engine) as session:
        ensure_builtin_tasks(session)
    head = head_revision()
    if before is None:
        return f"created database {_safe_url(app)} (schema {head})"
    if before != head:
        return f"upgraded database {_safe_url(app)} from schema {before} to {head}"
    return f"database {_safe_url(app)} is up to date (schema {head})"


@cli.command("init")
@db_option
def init_command(app: Flask) -> None:
    """Create the database, or upgrade it to the current schema (labels are never dropped)."""
    click.echo(init_database(app))


DEFAULT_THREADS = 4  # measured best for one process: bench/results/annotate.md


def serve_app(app: Flask, host: str, port: int, threads: int = DEFAULT_THREADS, workers: int = 1) -> None:
    """Serve the app until interrupted: waitress in this process, or gunicorn with `workers` processes.

    One CPython process runs Python on one core at a time; waitress cannot fork, so several
    processes on one port are gunicorn's (threaded workers sharing the listening socket).
    """
    click.echo(f"calibrate is serving on http://{host}:{port}/  (Ctrl+C to stop)")
    if workers <= 1:
        import waitress

        waitress.serve(app, host=host, port=port, threads=threads, ident="calibrate")
        return
    try:
        from calibrate.server import serve_processes
    except ImportError as exc:  # gunicorn is not installed on Windows
        raise click.UsageError(f"--workers {workers} needs gunicorn, which runs on Unix only ({exc})") from exc
    serve_processes(app, host=host, port=port, threads=threads, workers=workers)


@cli.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=5000, show_default=True, type=int, help="Port to listen on.")
@click.option("--threads", default=DEFAULT_THREADS, show_default=True, type=int,
              help="Request threads per process (4 measured best: bench/results/annotate.md).")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Server processes on the port: 1 is waitress in this process, more is gunicorn (Unix).")
@db_option
def serve_command(app: Flask, host: str, port: int, threads: int, workers: int) -> None:
    """Serve the workbench with a production WSGI server (waitress; gunicorn for --workers N)."""
    ready_engine(app)
    serve_app(app, host, port, threads, workers)


# --------------------------------------------------------------------------- users / tasks


@cli.group("users")
def users_group() -> None:
    """Manage accounts."""


@users_group.command("add")
@click.argument("username")
@click.option("--role", type=click.Choice(["annotator", "engineer", "admin"]), default="annotator", show_default=True)
@click.option("--display-name", default="", help="Name shown in the UI.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input (one line).")
@click.option("--no-password", is_flag=True, help="Create the account without a password (cannot log in yet).")
@db_option
def users_add_command(app: Flask, username: str, role: str, display_name: str, password_stdin: bool, no_password: bool) -> None:
    """Add a user (the password is asked for, or read with --password-stdin)."""
    from calibrate.accounts import AccountError, add_user
    from calibrate.db import write_session

    if password_stdin and no_password:
        raise click.UsageError("--password-stdin and --no-password exclude each other")
    if no_password:
        password = None
    elif password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    try:
        with write_session(ready_engine(app)) as session:
            user = add_user(session, username, role=role, password=password, display_name=display_name)
            line = f"added {user.role} {user.username}" + ("" if password else " (no password: cannot log in until one is set)")
    except AccountError as exc:
        raise BadInput(str(exc)) from exc
    click.echo(line)


@users_group.command("list")
@db_option
def users_list_command(app: Flask) -> None:
    """List accounts."""
    from sqlmodel import Session, select

    from calibrate.models import User

    with Session(ready_engine(app)) as session:
        for user in session.exec(select(User).order_by(User.username)):
            state = "active" if user.active else "inactive"
            login = "password set" if user.password_hash else "no password"
            click.echo(f"{user.username}\t{user.role}\t{state}\t{login}")


@cli.group("task")
def task_group() -> None:
    """Manage tasks (what is labelled, on which target, with which values)."""


@task_group.command("add")
@click.argument("name")
@click.option("--target", type=click.Choice(["sample", "claim", "context"]), required=True)
@click.option("--kind", type=click.Choice(["categorical", "ordinal", "continuous"]), required=True)
@click.option("--labels", help="Comma-separated labels of a categorical task, e.g. A,B,tie.")
@click.option("--scale", help="Range of an ordinal or continuous task, e.g. 1-5.")
@click.option("--description", default="", help="One line shown to annotators.")
@db_option
def task_add_command(app: Flask, name: str, target: str, kind: str, labels: str | None, scale: str | None, description: str) -> None:
    """Add a custom task."""
    from calibrate.db import write_session
    from calibrate.tasks import TaskError, add_task, parse_scale

    try:
        parsed_scale = parse_scale(scale) if scale else None
        with write_session(ready_engine(app)) as session:
            task = add_task(session, name, target=target, kind=kind,
                            labels=labels.split(",") if labels else None, scale=parsed_scale, description=description)
            detail = ", ".join(task.labels) if task.labels else f"{task.scale_min:g}–{task.scale_max:g}" if task.scale_min is not None else "any number"
            line = f"added task {task.name}: {task.kind} on {task.target} ({detail})"
    except TaskError as exc:
        raise BadInput(str(exc)) from exc
    click.echo(line)


@task_group.command("list")
@db_option
def task_list_command(app: Flask) -> None:
    """List tasks."""
    from sqlmodel import Session, select

    from calibrate.models import Task

    with Session(ready_engine(app)) as session:
        for task in session.exec(select(Task).order_by(Task.id)):
            values = ",".join(task.labels) if task.labels else f"{task.scale_min:g}-{task.scale_max:g}" if task.scale_min is not None else "any"
            click.echo(f"{task.name}\t{task.target}\t{task.kind}\t{values}")


# --------------------------------------------------------------------------- import


@cli.command("import")
@click.argument("kind", type=click.Choice(["samples", "labels", "verdicts", "run", "qrels"]))
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--dataset", required=True, help="Dataset name (created by a samples import).")
@click.option("--judge", help="Judge name for verdicts (else each line's `judge`).")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "json", "csv"]), help="File format (default: from the extension).")
@click.option("--update", is_flag=True, help="Samples: replace changed samples with the same id (labels kept, flagged).")
@click.option("--description", default="", help="Samples: description of a new dataset.")
@click.option("--where", metavar="metadata.FIELD=VALUE", help="Run, qrels: only the samples with this metadata value (e.g. one system's).")
@db_option
def import_command(app: Flask, kind: str, file: Path, dataset: str, judge: str | None, fmt: str | None, update: bool,
                   description: str, where: str | None) -> None:
    """Import samples, labels or verdicts (JSONL, JSON, CSV), or a TREC run or qrels file (all or nothing)."""
    from calibrate.db import write_session
    from calibrate.ingest import ImportRejected, import_file

    if kind != "verdicts" and judge:
        raise click.UsageError("--judge is for verdicts")
    if kind != "samples" and update:
        raise click.UsageError("--update is for samples")
    if kind in ("run", "qrels") and fmt:
        raise click.UsageError("--format is for samples, labels and verdicts: TREC files have one format")
    if kind not in ("run", "qrels") and where:
        raise click.UsageError("--where is for run and qrels files")
    if not file.exists():
        raise BadInput(f"{file}: no such file")
    engine = ready_engine(app)
    with _progress(f"importing {kind}") as progress:
        try:
            with write_session(engine) as session:
                summary = import_file(
                    session, kind, file, dataset=dataset, judge=judge, fmt=fmt, update=update,
                    description=description, progress=progress,
                    max_errors=app.config["IMPORT_MAX_ERRORS"], max_field_chars=app.config["IMPORT_MAX_FIELD_CHARS"],
                    where=where,
                )
        except ImportRejected as exc:
            for problem in exc.problems:
                click.echo(f"{file}: {problem}", err=True)
            if exc.truncated:
                click.echo(f"{file}: … stopped after {len(exc.problems)} problems", err=True)
            raise BadInput(f"{file}: rejected, nothing imported ({exc.summary()})") from exc
    click.echo(summary.line())


class _progress:
    """A tqdm bar on an interactive terminal, silent otherwise (logs, CI, pipes)."""

    def __init__(self, desc: str) -> None:
        self.desc = desc
        self.bar = None

    def __enter__(self):
        if sys.stderr.isatty():
            from tqdm import tqdm

            # An import reads the file twice (validate everything, then write): the bar counts both passes.
            self.bar = tqdm(desc=f"{self.desc} (validate, then write)", unit=" rows", file=sys.stderr, mininterval=0.5)
            return self.bar.update
        return None

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()


# --------------------------------------------------------------------------- sample


@cli.command("sample")
@click.option("--dataset", required=True, help="Dataset to sample from.")
@click.option("--n", "n", type=click.IntRange(min=1), help="How many samples to take.")
@click.option("--fraction", type=click.FloatRange(0, 1, min_open=True), help="Fraction of the dataset to take, e.g. 0.02.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed: the same seed takes the same samples.")
@click.option("--stratify-by", "stratify_by", metavar="FIELD", help="Stratify by a field, e.g. metadata.topic (proportional allocation).")
@click.option("--negative-first", is_flag=True, help="Take samples with feedback −1 before the rest.")
@click.option("--overlap", type=click.IntRange(min=1), default=1, show_default=True, help="How many annotators label each sample.")
@click.option("--assign", "assign", multiple=True, metavar="USER", help="Annotators to assign round-robin (repeatable).")
@click.option("--split", "split", metavar="SPEC", help="Assign splits to the taken samples, e.g. train=0.2,dev=0.4,test=0.4.")
@db_option
def sample_command(app: Flask, dataset: str, n: int | None, fraction: float | None, seed: int, stratify_by: str | None,
                   negative_first: bool, overlap: int, assign: tuple[str, ...], split: str | None) -> None:
    """Choose the samples experts should label and queue them (seeded, reproducible)."""
    from calibrate.db import write_session
    from calibrate.ingest.sampling import SamplingError, parse_split_spec, sample_dataset

    if (n is None) == (fraction is None):
        raise click.UsageError("give exactly one of --n or --fraction")
    try:
        split_spec = parse_split_spec(split) if split else None
        with write_session(ready_engine(app)) as session:
            summary = sample_dataset(
                session, dataset, n=n, fraction=fraction, seed=seed, stratify_by=stratify_by,
                negative_first=negative_first, overlap=overlap, assign=list(assign), split=split_spec,
            )
    except SamplingError as exc:
        raise BadInput(str(exc)) from exc
    click.echo(summary.line())


@cli.group("queue")
def queue_group() -> None:
    """The order annotators get a dataset's pending items in."""


@queue_group.command("order")
@click.option("--dataset", required=True, help="Dataset whose pending items are reordered.")
@click.option("--mode", type=click.Choice(["uncertain", "sampled"]), required=True,
              help="uncertain: where the judges disagree or are least sure first; sampled: back to the order of `calibrate sample`.")
@click.option("--task", default="claim_support", show_default=True, help="Task whose verdicts measure the uncertainty.")
@click.option("--judge", "judges", multiple=True, metavar="NAME", help="A judge of the committee (repeatable; default every judge with verdicts).")
@db_option
def queue_order_command(app: Flask, dataset: str, mode: str, task: str, judges: tuple[str, ...]) -> None:
    """Put a dataset's pending items in uncertain-first order, or back in the sampled order."""
    from calibrate.annotation import AnnotationError
    from calibrate.annotation.uncertainty import order_queue
    from calibrate.db import write_session

    try:
        with write_session(ready_engine(app)) as session:
            result = order_queue(session, dataset, mode=mode, task=task, judges=list(judges))
    except AnnotationError as exc:
        raise BadInput(str(exc)) from exc
    click.echo(result.line())


# --------------------------------------------------------------------------- export


@cli.group("export")
def export_group() -> None:
    """Write what the experts made to a file."""


@export_group.command("labels")
@click.option("--dataset", required=True, help="Dataset whose labels to write.")
@click.option("--task", "tasks", multiple=True, metavar="T", help="Only this task (repeatable); default every task.")
@click.option("--split", help="Only the samples of this split.")
@click.option("--full", is_flag=True,
              help="Add evidence, guideline version, flags, source and timestamps, and include adjudicated and stale "
                   "labels (an archive: the labels import does not read these fields).")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to a file instead of standard output.")
@db_option
def export_labels_command(app: Flask, dataset: str, tasks: tuple[str, ...], split: str | None, full: bool, fmt: str,
                          output: Path | None) -> None:
    """Write a dataset's labels in the format `calibrate import labels` reads."""
    import csv
    import io
    import json

    from sqlmodel import Session

    from calibrate.annotation.export import export_labels
    from calibrate.calibration import CalibrationError
    from calibrate.reports.csv_report import neutralise
    from calibrate.tasks import TaskError

    try:
        with Session(ready_engine(app)) as session:
            result = export_labels(session, dataset, tasks=list(tasks) or None, split=split, full=full)
    except (CalibrationError, TaskError) as exc:
        raise BadInput(str(exc)) from exc
    if fmt == "jsonl":
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in result.rows)
    else:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(result.fields)
        for row in result.rows:
            writer.writerow([neutralise(json.dumps(row[name]) if isinstance(row.get(name), list) else row.get(name))
                             for name in result.fields])
        text = buffer.getvalue()
    write_output(text, output, f"{len(result.rows)} labels")
    click.echo(result.summary(), err=True)


# --------------------------------------------------------------------------- report / gate


def _report_options(app: Flask, threshold, ci_lower, group_by, bootstrap, k, ci_method, split=None, budget=0.05):  # noqa: ANN001
    from calibrate.calibration import Options

    return Options(split=split, budget_half_width=budget,
        threshold=app.config["THRESHOLD"] if threshold is None else threshold,
        ci_lower=ci_lower, group_by=group_by,
        bootstrap=app.config["BOOTSTRAP"] if bootstrap is None else bootstrap,
        confidence=app.config["CONFIDENCE"], seed=app.config["SEED"], ci_method=ci_method, k=k,
    )


def _build(app: Flask, dataset: str, judge: str | None, options, tasks=None):  # noqa: ANN001, ANN202
    from sqlmodel import Session

    from calibrate.calibration import CalibrationError, build_report

    try:
        with Session(ready_engine(app)) as session:
            return build_report(session, dataset, judge, options=options, tasks=tasks)
    except CalibrationError as exc:
        raise BadInput(str(exc)) from exc


def _versions(app: Flask, dataset: str, judge: str, options):  # noqa: ANN001, ANN202
    from sqlmodel import Session

    from calibrate.calibration import CalibrationError
    from calibrate.loop import versions_section

    try:
        with Session(ready_engine(app)) as session:
            section = versions_section(session, dataset, judge, options=options)
    except CalibrationError as exc:
        raise BadInput(str(exc)) from exc
    if section is None:
        raise BadInput(f"--versions: {judge} is an imported judge, not a prompt version")
    return section


@cli.command("report")
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
@click.option("--format", "fmt", type=click.Choice(["json", "html", "md", "csv"]), default="json", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to a file instead of standard output.")
@db_option
def report_command(app: Flask, dataset: str, judge: str | None, group_by: str | None, threshold: float | None, ci_lower: bool,
                   bootstrap: int | None, ci_method: str, k: int, split: str | None, tasks: tuple[str, ...], with_versions: bool,
                   budget: float, fmt: str, output: Path | None) -> None:
    """Write the calibration report of a judge on a dataset (JSON, HTML, Markdown or CSV)."""
    from calibrate.reports import render

    report = _build(app, dataset, judge, _report_options(app, threshold, ci_lower, group_by, bootstrap, k, ci_method, split, budget),
                    tasks=list(tasks) or None)
    if with_versions:
        if not judge:
            raise BadInput("--versions needs --judge (a prompt version, PROMPT@N)")
        report.data["versions"] = _versions(app, dataset, judge, _report_options(app, threshold, ci_lower, None, bootstrap, k,
                                                                                 ci_method, split, budget))
    write_output(render(report, fmt), output, f"{fmt} report")


@cli.command("gate")
@click.option("--dataset", required=True, help="Dataset to check.")
@click.option("--judge", required=True, help="Judge to check (a prompt run is PROMPT@VERSION).")
@click.option("--task", "tasks", multiple=True, help="Check only these tasks (repeatable; default every task with data).")
@click.option("--min-kappa", type=click.FloatRange(-1, 1), help="Threshold for categorical tasks (default 0.75).")
@click.option("--min-rho", type=click.FloatRange(-1, 1), help="Threshold for ordinal and continuous tasks (default 0.75).")
@click.option("--ci-lower", is_flag=True, help="Require the CI lower bound to reach the threshold.")
@click.option("--bootstrap", type=click.IntRange(min=100), help="Bootstrap resamples (default 2000).")
@db_option
def gate_command(app: Flask, dataset: str, judge: str, tasks: tuple[str, ...], min_kappa: float | None, min_rho: float | None,
                 ci_lower: bool, bootstrap: int | None) -> None:
    """Exit 0 when the judge is calibrated on every checked task, 1 when not (for CI/CD)."""
    from calibrate.calibration import gate_lines

    default = app.config["THRESHOLD"]
    options = _report_options(app, default, ci_lower, None, bootstrap, 10, "percentile")
    report = _build(app, dataset, judge, options, tasks=list(tasks) or None)
    ok, lines = gate_lines(report, min_kappa=default if min_kappa is None else min_kappa,
                           min_rho=default if min_rho is None else min_rho, ci_lower=ci_lower, required=list(tasks) or None)
    for line in lines:
        click.echo(line)
    sys.exit(EXIT_OK if ok else EXIT_FAILED)


# --------------------------------------------------------------------------- compare


@cli.command("compare")
@click.option("--dataset", required=True, help="Dataset both judges ran on.")
@click.option("--judge", "judges", multiple=True, required=True, metavar="NAME",
              help="Give twice: --judge A --judge B (B is compared against A).")
@click.option("--task", help="Compare on this task only (default: every task both judged).")
@click.option("--bootstrap", type=click.IntRange(min=100), help="Paired bootstrap resamples (default 2000).")
@click.option("--ci-method", type=click.Choice(["percentile", "bca"]), default="percentile", show_default=True)
@click.option("--split", help="Only the samples of this split (e.g. dev); default every sample.")
@click.option("--format", "fmt", type=click.Choice(["json", "html", "md"]), default="json", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to a file instead of standard output.")
@db_option
def compare_command(app: Flask, dataset: str, judges: tuple[str, ...], task: str | None, bootstrap: int | None,
                    ci_method: str, split: str | None, fmt: str, output: Path | None) -> None:
    """Compare two judges on the same targets: paired bootstrap, McNemar or t/Wilcoxon, flips."""
    from sqlmodel import Session

    from calibrate.calibration import CalibrationError
    from calibrate.compare import compare_judges
    from calibrate.reports.compare_report import render_compare

    if len(judges) != 2:
        raise click.UsageError("give exactly two judges: --judge A --judge B")
    options = _report_options(app, None, False, None, bootstrap, 10, ci_method, split)
    try:
        with Session(ready_engine(app)) as session:
            result = compare_judges(session, dataset, judges[0], judges[1], task=task, options=options)
    except CalibrationError as exc:
        raise BadInput(str(exc)) from exc
    write_output(render_compare(result, fmt), output, f"{fmt} comparison")


def write_output(text: str, output: Path | None, what: str) -> None:
    """Write a rendered document to a file (saying so on stderr) or to standard output."""
    if output:
        output.write_text(text, encoding="utf-8")
        click.echo(f"wrote {what} to {output}", err=True)
    else:
        click.echo(text, nl=not text.endswith("\n"))


# --------------------------------------------------------------------------- ab


@cli.command("ab")
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
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to a file instead of standard output.")
@db_option
def ab_command(app: Flask, dataset: str, by: str, system_a: str, system_b: str, metric: str, source: str,
               bootstrap: int | None, ci_method: str, fmt: str, output: Path | None) -> None:
    """Compare two systems on one metric, paired by question (t-test, Wilcoxon, bootstrap CI)."""
    from sqlmodel import Session

    from calibrate.ab import ABError, ABOptions, compare_systems
    from calibrate.calibration import CalibrationError
    from calibrate.reports.ab_report import render_ab

    options = ABOptions(bootstrap=app.config["BOOTSTRAP"] if bootstrap is None else bootstrap,
                        confidence=app.config["CONFIDENCE"], seed=app.config["SEED"], ci_method=ci_method)
    try:
        with Session(ready_engine(app)) as session:
            result = compare_systems(session, dataset, by=by, a=system_a, b=system_b, metric=metric, source=source,
                                     options=options)
    except (ABError, CalibrationError) as exc:
        raise BadInput(str(exc)) from exc
    write_output(render_ab(result, fmt), output, f"{fmt} A/B comparison")


# --------------------------------------------------------------------------- demo


@cli.command("demo")
@click.option("--no-serve", is_flag=True, help="Load the demo and exit without serving.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@db_option
def demo_command(app: Flask, no_serve: bool, host: str, port: int) -> None:
    """Load the bundled demo (samples, experts' labels, logins) and serve it."""
    from calibrate.demo import load_demo

    click.echo(init_database(app))
    result = load_demo(engine_of(app))
    for line in result.lines():
        click.echo(line)
    if not no_serve:
        click.echo("")
        serve_app(app, host, port)


def register_flask_commands(app: Flask) -> None:
    """Expose the same commands under `flask --app calibrate <command>`."""
    for name, command in cli.commands.items():
        app.cli.add_command(command, name)


def main() -> None:
    """Run the console script."""
    cli(prog_name="calibrate")
from calibrate import cli_judges  # noqa: E402,F401  (registers the prompt and judge commands)
