"""Several server processes on one port: gunicorn with threaded workers (`calibrate serve --workers N`).

Why: one CPython process runs Python on one core at a time, so one process writes about as many
labels a second as one core allows (docs/annotation.md#performance). waitress, the default
server, cannot fork; gunicorn forks N workers that share the listening socket, and each runs
`threads` request threads (its `gthread` worker). The app is created once, before the fork;
each worker then drops the database connections it inherited and opens its own. Writers in
different processes queue for SQLite's write lock in its busy handler (`SQLITE_BUSY_TIMEOUT`).
gunicorn runs on Unix only; on other systems serve one process per port behind a proxy.
"""

from __future__ import annotations

from collections.abc import Callable

from gunicorn.app.base import BaseApplication

from calibrate.db import forget_connections_after_fork


class _Server(BaseApplication):
    """gunicorn serving an app object that already exists (no module path to import)."""

    def __init__(self, app: Callable, options: dict) -> None:
        self._app = app
        self._options = options
        super().__init__()

    def load_config(self) -> None:
        for name, value in self._options.items():
            self.cfg.set(name, value)

    def load(self) -> Callable:
        return self._app


def _post_fork(_server, _worker) -> None:
    forget_connections_after_fork()


def gunicorn_options(*, host: str, port: int, threads: int, workers: int, after_fork: Callable[[], None] | None = None) -> dict:
    """Return the gunicorn settings `calibrate serve --workers N` runs with.

    `after_fork`: called in each worker once it dropped the inherited connections (the traces settler).
    """
    post_fork = _post_fork
    if after_fork is not None:
        def post_fork(server, worker) -> None:
            _post_fork(server, worker)
            after_fork()

        post_fork.__name__ = "_post_fork"
    return {
        "bind": f"{host}:{port}",
        "workers": workers,
        "worker_class": "gthread",
        "threads": threads,
        "post_fork": post_fork,
        # Annotators' browsers keep connections open between keystrokes.
        "keepalive": 75,
        "accesslog": None,
        "proc_name": "calibrate",
        # gunicorn 27's control socket lives at one path per user: two servers would clash, and nothing uses it.
        "control_socket_disable": True,
    }


def serve_processes(app: Callable, *, host: str, port: int, threads: int, workers: int,
                    after_fork: Callable[[], None] | None = None) -> None:
    """Serve `app` with `workers` gunicorn processes of `threads` threads each until interrupted."""
    _Server(app, gunicorn_options(host=host, port=port, threads=threads, workers=workers, after_fork=after_fork)).run()
