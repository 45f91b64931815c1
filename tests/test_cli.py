"""CLI: init, users, tasks; exit codes; help everywhere."""

from __future__ import annotations

import pytest
from sqlmodel import select

from calibrate.cli import cli
from calibrate.models import Task, User


def test_init_is_idempotent(runner):
    result = runner.invoke(["init"])
    assert result.exit_code == 0
    assert "up to date" in result.output


def test_init_creates_then_reports_up_to_date(tmp_path):
    from click.testing import CliRunner

    url = f"sqlite:///{tmp_path / 'new.sqlite'}"
    env = {"CALIBRATE_INSTANCE": str(tmp_path)}
    first = CliRunner().invoke(cli, ["init", "--db", url], env=env)
    assert first.exit_code == 0, first.output
    assert "created database" in first.output
    second = CliRunner().invoke(cli, ["init", "--db", url], env=env)
    assert "up to date" in second.output


def test_commands_refuse_an_uninitialised_database(tmp_path):
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["task", "list", "--db", f"sqlite:///{tmp_path / 'none.sqlite'}"], env={"CALIBRATE_INSTANCE": str(tmp_path)})
    assert result.exit_code == 2
    assert "calibrate init" in result.output


def test_users_add_with_password_stdin(runner, session):
    result = runner.invoke(["users", "add", "ana", "--role", "engineer", "--password-stdin"], input="s3cret-pass\n")
    assert result.exit_code == 0, result.output
    user = session.exec(select(User).where(User.username == "ana")).one()
    assert user.role == "engineer"
    assert user.password_hash and "s3cret-pass" not in user.password_hash


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["users", "add", "bob", "--password-stdin"], "short\n", "at least 8"),
        (["users", "add", "bad name", "--no-password"], None, "not valid"),
        (["users", "add", "x", "--role", "boss", "--no-password"], None, "Invalid value for '--role'"),
    ],
)
def test_users_add_rejects_bad_input(runner, args, stdin, message):
    result = runner.invoke(args, input=stdin)
    assert result.exit_code == 2
    assert message in result.output


def test_users_add_duplicate(runner):
    assert runner.invoke(["users", "add", "eve", "--no-password"]).exit_code == 0
    result = runner.invoke(["users", "add", "eve", "--no-password"])
    assert result.exit_code == 2 and "already exists" in result.output


def test_task_add_custom(runner, session):
    result = runner.invoke(["task", "add", "preference", "--target", "sample", "--kind", "categorical", "--labels", "A,B,tie"])
    assert result.exit_code == 0, result.output
    task = session.exec(select(Task).where(Task.name == "preference")).one()
    assert task.labels == ["A", "B", "tie"] and task.target == "sample" and not task.builtin
    listing = runner.invoke(["task", "list"]).output
    assert "preference\tsample\tcategorical\tA,B,tie" in listing
    assert "claim_support\tclaim\tcategorical" in listing


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["task", "add", "p", "--target", "sample", "--kind", "categorical"], "at least two labels"),
        (["task", "add", "p", "--target", "sample", "--kind", "ordinal"], "needs --scale"),
        (["task", "add", "p", "--target", "sample", "--kind", "ordinal", "--scale", "5-1"], "from low to high"),
        (["task", "add", "p", "--target", "sample", "--kind", "ordinal", "--labels", "a,b"], "--labels is for categorical"),
        (["task", "add", "Bad-Name", "--target", "sample", "--kind", "continuous"], "task name must be"),
        (["task", "add", "claim_support", "--target", "claim", "--kind", "categorical", "--labels", "a,b"], "already exists"),
        (["task", "add", "p", "--target", "page", "--kind", "ordinal"], "Invalid value for '--target'"),
    ],
)
def test_task_add_rejects_bad_definitions(runner, args, message):
    result = runner.invoke(args)
    assert result.exit_code == 2
    assert message in result.output


def _all_commands(group, prefix=()):
    import click

    for name, command in group.commands.items():
        yield (*prefix, name)
        if isinstance(command, click.Group):
            yield from _all_commands(command, (*prefix, name))


@pytest.mark.parametrize("path", list(_all_commands(cli)), ids=" ".join)
def test_every_command_has_help(path):
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0
    assert "Usage:" in result.output


@pytest.mark.parametrize("path", list(_all_commands(cli)), ids=" ".join)
def test_every_command_is_documented(path):
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    assert f"calibrate {' '.join(path)}" in doc


def test_a_mistyped_database_path_leaves_no_file_behind(tmp_path):
    from click.testing import CliRunner

    missing = tmp_path / "typo.sqlite"
    result = CliRunner().invoke(cli, ["report", "--dataset", "d", "--db", f"sqlite:///{missing}"],
                                env={"CALIBRATE_INSTANCE": str(tmp_path)})
    assert result.exit_code == 2
    assert result.output == f"error: no database at {missing}: check --db, or run `calibrate init` to create it\n"
    assert not missing.exists() and not list(tmp_path.glob("typo.sqlite*"))


def test_init_makes_a_missing_instance_folder_for_the_default_database(tmp_path):
    from click.testing import CliRunner

    instance = tmp_path / "not" / "yet"
    result = CliRunner().invoke(cli, ["init"], env={"CALIBRATE_INSTANCE": str(instance), "CALIBRATE_DATABASE_URL": None})
    assert result.exit_code == 0, result.output
    assert "created database" in result.output
    assert (instance / "calibrate.sqlite").is_file()
    assert instance.stat().st_mode & 0o777 == 0o700


def test_init_refuses_a_database_in_a_folder_that_does_not_exist(tmp_path):
    from click.testing import CliRunner

    target = tmp_path / "nodir" / "x.sqlite"
    result = CliRunner().invoke(cli, ["init", "--db", f"sqlite:///{target}"], env={"CALIBRATE_INSTANCE": str(tmp_path)})
    assert result.exit_code == 2
    assert result.output == f"error: no folder {target.parent} for the database: create it first, or check --db\n"
    assert not target.parent.exists()


def test_users_password_sets_an_imported_annotators_password_and_ends_their_sessions(runner, session):
    from calibrate import accounts, logins
    from calibrate.models import LoginSession

    assert runner.invoke(["users", "add", "worker7", "--no-password"]).exit_code == 0
    assert "users password worker7" in runner.invoke(["users", "add", "worker7", "--no-password"]).output
    user = session.exec(select(User).where(User.username == "worker7")).one()
    logins.start_session(session, user.id, logins.SessionPolicy())
    session.commit()
    result = runner.invoke(["users", "password", "worker7", "--password-stdin"], input="new-pass-123\n")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "password set for worker7; 1 session(s) ended"
    session.rollback()  # a new read transaction, and no stale objects: see what the command wrote
    session.expire_all()
    assert accounts.authenticate(session, "worker7", "new-pass-123") is not None
    assert all(row.revoked is not None for row in session.exec(select(LoginSession)))
    prompted = runner.invoke(["users", "password", "worker7"], input="other-pass-1\nother-pass-1\n")
    assert prompted.exit_code == 0 and prompted.output.strip().endswith("password set for worker7")
    session.rollback()  # a new read transaction, and no stale objects: see what the command wrote
    session.expire_all()
    assert accounts.authenticate(session, "worker7", "other-pass-1") is not None


@pytest.mark.parametrize(("name", "stdin", "message"), [("ghost", "long-enough-1\n", "unknown user 'ghost'"),
                                                        ("worker8", "short\n", "at least 8")])
def test_users_password_refuses_unknown_users_and_short_passwords(runner, session, name, stdin, message):
    assert runner.invoke(["users", "add", "worker8", "--no-password"]).exit_code == 0
    result = runner.invoke(["users", "password", name, "--password-stdin"], input=stdin)
    assert result.exit_code == 2 and message in result.output
    assert session.exec(select(User).where(User.username == "worker8")).one().password_hash is None
