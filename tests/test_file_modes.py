"""Database files and the instance folder are the owner's only (issue 14, point 10)."""

from __future__ import annotations

import os
import stat

import pytest
from click.testing import CliRunner

from calibrate import create_app
from calibrate.cli import cli
from calibrate.db import dispose_engine, get_engine, write_session
from calibrate.tasks import ensure_builtin_tasks


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture(params=[0o022, 0o000])
def umask(request):
    """Run under a usual umask and under none at all: the modes must not depend on it."""
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def test_calibrate_init_creates_the_database_and_its_wal_files_0600(tmp_path, monkeypatch, umask):
    monkeypatch.setenv("CALIBRATE_INSTANCE", str(tmp_path / "instance"))
    path = tmp_path / "new.sqlite"
    url = f"sqlite:///{path}"
    try:
        result = CliRunner().invoke(cli, ["init", "--db", url])
        assert result.exit_code == 0, result.output
        engine = get_engine(url)
        with write_session(engine) as session:  # a write while the connection is open: the -wal and -shm exist
            ensure_builtin_tasks(session)
            session.flush()
            files = {name: _mode(tmp_path / name) for name in ("new.sqlite", "new.sqlite-wal", "new.sqlite-shm")}
        assert files == {"new.sqlite": 0o600, "new.sqlite-wal": 0o600, "new.sqlite-shm": 0o600}
    finally:
        dispose_engine(url)


def test_the_instance_folder_is_created_0700(tmp_path, umask):
    instance = tmp_path / "fresh" / "instance"
    app = create_app({"TESTING": True, "INSTANCE_PATH": str(instance)})
    assert _mode(instance) == 0o700
    assert _mode(instance / "secret_key") == 0o600
    assert app.config["SECRET_KEY"]
