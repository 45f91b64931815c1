"""Settings without Flask, and the schema check without Alembic: the same answers as Flask's and Alembic's."""

from __future__ import annotations

import pytest
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from flask import Flask

from calibrate.db import dispose_engine, get_engine
from calibrate.migrations import HERE, current_revision, head_revision, upgrade
from calibrate.settings import load_settings


def test_settings_read_like_flask(tmp_path, monkeypatch):
    (tmp_path / "config.py").write_text("THRESHOLD = 0.8\nBOOTSTRAP = 999\nlowercase_ignored = 1\n")
    for key, value in {"CALIBRATE_BOOTSTRAP": "500", "CALIBRATE_JUDGE_BACKENDS__local__model": "m",
                       "CALIBRATE_SEED": "not json", "CALIBRATE_SESSION_COOKIE_SECURE": "true"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("CALIBRATE_INSTANCE", str(tmp_path))
    flask = Flask("calibrate", instance_path=str(tmp_path), instance_relative_config=True)
    flask.config.from_object("calibrate.config")
    flask.config.from_pyfile("config.py", silent=True)
    flask.config.from_prefixed_env("CALIBRATE")
    flask.config.update({"CONFIDENCE": 0.9})
    ours = load_settings({"CONFIDENCE": 0.9})
    for key in ("THRESHOLD", "BOOTSTRAP", "SEED", "CONFIDENCE", "SESSION_COOKIE_SECURE", "JUDGE_BACKENDS", "SQLITE_BUSY_TIMEOUT"):
        assert ours[key] == flask.config[key], key
    assert (ours["THRESHOLD"], ours["BOOTSTRAP"], ours["SEED"]) == (0.8, 500, "not json")
    assert ours["JUDGE_BACKENDS"] == {"local": {"model": "m"}}
    assert "lowercase_ignored" not in ours
    assert ours["INSTANCE_PATH"] == str(tmp_path.resolve())
    assert ours["DATABASE_URL"] == f"sqlite:///{tmp_path.resolve() / 'calibrate.sqlite'}"


def test_head_revision_is_alembics():
    assert head_revision() == ScriptDirectory(str(HERE)).get_current_head()


@pytest.mark.parametrize("revision", [None, "0001", "head"])
def test_current_revision_reads_what_alembic_reads(tmp_path, revision):
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    engine = get_engine(url)
    try:
        if revision:
            upgrade(engine, revision)
        with engine.connect() as conn:
            expected = MigrationContext.configure(conn).get_current_revision()
        assert current_revision(engine) == expected
        assert expected == {None: None, "0001": "0001", "head": head_revision()}[revision]
    finally:
        dispose_engine(url)


def test_a_secret_key_from_the_environment_stays_the_text_given(monkeypatch, tmp_path):
    monkeypatch.setenv("CALIBRATE_INSTANCE", str(tmp_path))
    for key in ("0123456789", "1e5", "true"):
        monkeypatch.setenv("CALIBRATE_SECRET_KEY", key)
        assert load_settings()["SECRET_KEY"] == key
