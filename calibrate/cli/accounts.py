"""`calibrate users add|password|list`: accounts."""

from __future__ import annotations

import sys

import click
from sqlmodel import Session, select

from calibrate import lazy
from calibrate.cli.common import BadInput, Settings, db_option, ready_engine
from calibrate.db import write_session
from calibrate.models import User

# Loaded when a command runs, not for its --help (password hashing).
accounts = lazy.module("calibrate.accounts")


@click.group("users")
def users_group() -> None:
    """Manage accounts."""


@users_group.command("add")
@click.argument("username")
@click.option("--role", type=click.Choice(["annotator", "engineer", "admin"]), default="annotator", show_default=True)
@click.option("--display-name", default="", help="Name shown in the UI.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input (one line).")
@click.option("--no-password", is_flag=True, help="Create the account without a password (cannot log in yet).")
@db_option
def users_add_command(settings: Settings, username: str, role: str, display_name: str, password_stdin: bool,
                      no_password: bool) -> None:
    """Add a user (the password is asked for, or read with --password-stdin)."""
    if password_stdin and no_password:
        raise click.UsageError("--password-stdin and --no-password exclude each other")
    if no_password:
        password = None
    elif password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    with write_session(ready_engine(settings)) as session:
        user = accounts.add_user(session, username, role=role, password=password, display_name=display_name)
        line = f"added {user.role} {user.username}" + ("" if password else " (no password: cannot log in until one is set)")
    click.echo(line)


@users_group.command("password")
@click.argument("username")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input (one line).")
@db_option
def users_password_command(settings: Settings, username: str, password_stdin: bool) -> None:
    """Set or reset a user's password (e.g. an annotator created by a labels import); ends their sessions."""
    engine = ready_engine(settings)
    with Session(engine) as session:
        known = accounts.get_user(session, username) is not None
    if not known:
        raise BadInput(f"unknown user {username!r} (add one with `calibrate users add {username}`)")
    # Asked before the write transaction opens: a prompt must not hold the write lock.
    password = sys.stdin.readline().rstrip("\r\n") if password_stdin else click.prompt(
        "Password", hide_input=True, confirmation_prompt=True)
    with write_session(engine) as session:
        user = accounts.get_user(session, username)
        if user is None:
            raise BadInput(f"unknown user {username!r}")
        ended = accounts.set_password(session, user, password)
    click.echo(f"password set for {username}" + (f"; {ended} session(s) ended" if ended else ""))


@users_group.command("list")
@db_option
def users_list_command(settings: Settings) -> None:
    """List accounts."""
    with Session(ready_engine(settings)) as session:
        for user in session.exec(select(User).order_by(User.username)):
            state = "active" if user.active else "inactive"
            login = "password set" if user.password_hash else "no password"
            click.echo(f"{user.username}\t{user.role}\t{state}\t{login}")
