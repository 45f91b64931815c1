"""`calibrate demo`: load the bundled demo and serve it."""

from __future__ import annotations

import click

from calibrate import lazy
from calibrate.cli.common import Settings, db_option, engine_of
from calibrate.cli.database import init_database
from calibrate.cli.serve import serve_app, web_app

# Loaded when the command runs, not for its --help (the demo runs judges: httpx, numpy, pandas).
demo = lazy.module("calibrate.demo")


@click.command("demo")
@click.option("--no-serve", is_flag=True, help="Load the demo and exit without serving.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@db_option
def demo_command(settings: Settings, no_serve: bool, host: str, port: int) -> None:
    """Load the bundled demo (samples, experts' labels, logins) and serve it."""
    click.echo(init_database(settings))
    result = demo.load_demo(engine_of(settings))
    for line in result.lines():
        click.echo(line)
    if not no_serve:
        click.echo("")
        serve_app(web_app(settings), host, port)
