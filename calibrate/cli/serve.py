"""`calibrate serve`: the workbench behind a production WSGI server (and `serve_app`, which `demo` uses too)."""

from __future__ import annotations

import logging

import click
from flask import Flask

from calibrate import create_app, lazy
from calibrate.cli.common import Settings, db_option, ready_engine

batches = lazy.module("calibrate.ingest.batches")
staging = lazy.module("calibrate.ingest.traces.staging")
db = lazy.module("calibrate.db")

DEFAULT_THREADS = 4  # measured best for one process: bench/results/annotate.md


ROLES = ("all", "web", "traces")  # views.ROLES, named here too so `--help` does not import the views


def web_app(settings: Settings, role: str = "all") -> Flask:
    """Return the Flask app to serve: the caller's (tests, `flask --app calibrate`) when it has this database and role, else a new one."""
    obj = click.get_current_context().find_root().obj
    if obj is not None and hasattr(obj, "load_app"):
        obj = obj.load_app()
    if (isinstance(obj, Flask) and obj.config["DATABASE_URL"] == settings["DATABASE_URL"]
            and obj.config.get("SERVE_ROLE", "all") == role):
        return obj
    return create_app(settings, role=role)


def log_to_stderr() -> None:
    """Send calibrate's log (logins, failed and throttled logins, failed runs) to standard error, with the time."""
    logger = logging.getLogger("calibrate")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


def serve_app(app: Flask, host: str, port: int, threads: int = DEFAULT_THREADS, workers: int = 1) -> None:
    """Serve the app until interrupted: waitress in this process, or gunicorn with `workers` processes.

    One CPython process runs Python on one core at a time; waitress cannot fork, so several
    processes on one port are gunicorn's (threaded workers sharing the listening socket).
    The app's role (`--role`) says whether each process runs the traces settler: not a `web` one.
    """
    log_to_stderr()
    role = app.config.get("SERVE_ROLE", "all")
    what = {"all": " (the workbench, and the trace receiver: POST /v1/traces and POST /v1/feedback)",
            "web": " (the workbench; no trace receiver)",
            "traces": " (the trace receiver only: POST /v1/traces and POST /v1/feedback)"}[role]
    click.echo(f"calibrate is serving{what} on http://{host}:{port}/  (Ctrl+C to stop)")

    def settler() -> None:
        if role == "web":
            return
        # The OTLP receiver's staged traces settle in a background thread of each server process
        # (docs/formats.md, "Receiving traces"): several are safe, each settling transaction takes the write lock.
        # Behind the web writes' writer lock (this process's, and the flock of the servers on this SQLite file):
        # a label save waits for one settling transaction at most (a background writer: waiting people go first).
        engine = db.get_engine(app.config["DATABASE_URL"], busy_timeout=app.config["SQLITE_BUSY_TIMEOUT"])
        staging.start_settler(engine, app.config)

    if workers <= 1:
        import waitress  # noqa: PLC0415 - one server or the other, whichever serves

        settler()
        waitress.serve(app, host=host, port=port, threads=threads, ident="calibrate")
        return
    try:
        from calibrate.server import serve_processes  # noqa: PLC0415 - gunicorn runs on Unix only
    except ImportError as exc:  # gunicorn is not installed on Windows
        raise click.UsageError(f"--workers {workers} needs gunicorn, which runs on Unix only ({exc})") from exc
    serve_processes(app, host=host, port=port, threads=threads, workers=workers, after_fork=settler)


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=5000, show_default=True, type=int, help="Port to listen on.")
@click.option("--threads", default=DEFAULT_THREADS, show_default=True, type=int,
              help="Request threads per process (4 measured best: bench/results/annotate.md).")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Server processes on the port: 1 is waitress in this process, more is gunicorn (Unix).")
@click.option("--role", type=click.Choice(ROLES), default="all", show_default=True,
              help="all: the workbench and POST /v1/traces, /v1/feedback with the settler; web: the workbench only; "
                   "traces: POST /v1/traces, /v1/feedback, /health and the settler only (run one of each on two ports, same database).")
@db_option
def serve_command(settings: Settings, host: str, port: int, threads: int, workers: int, role: str) -> None:
    """Serve the workbench with a production WSGI server (waitress; gunicorn for --workers N)."""
    engine = ready_engine(settings, full=True)  # every page scanned, unless the file is as the last scan left it
    batches.cleanup(engine, stale_seconds=settings["IMPORT_STALE_SECONDS"])  # what killed imports left (never visible)
    serve_app(web_app(settings, role), host, port, threads, workers)
