"""The app factory: instance folder, settings precedence, secret key, CLI entry points."""

from __future__ import annotations

import subprocess
import sys

from calibrate import create_app


def test_instance_folder_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIBRATE_INSTANCE", str(tmp_path / "inst"))
    app = create_app()
    assert app.instance_path == str(tmp_path / "inst")
    assert app.config["DATABASE_URL"] == f"sqlite:///{tmp_path / 'inst' / 'calibrate.sqlite'}"


def test_secret_key_generated_once_per_install(tmp_path):
    first = create_app({"INSTANCE_PATH": str(tmp_path)}).config["SECRET_KEY"]
    second = create_app({"INSTANCE_PATH": str(tmp_path)}).config["SECRET_KEY"]
    other = create_app({"INSTANCE_PATH": str(tmp_path / "other")}).config["SECRET_KEY"]
    assert first == second and len(first) == 64
    assert other != first
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0


def test_settings_precedence(tmp_path, monkeypatch):
    (tmp_path / "config.py").write_text("THRESHOLD = 0.8\nBOOTSTRAP = 100\nSEED = 3\n")
    monkeypatch.setenv("CALIBRATE_BOOTSTRAP", "500")
    app = create_app({"INSTANCE_PATH": str(tmp_path), "SEED": 9})
    assert app.config["THRESHOLD"] == 0.8  # instance/config.py over the defaults
    assert app.config["BOOTSTRAP"] == 500  # environment over instance/config.py, parsed as JSON
    assert app.config["SEED"] == 9  # the test override over everything
    assert app.config["CONFIDENCE"] == 0.95  # untouched default


def test_database_url_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIBRATE_DATABASE_URL", f"sqlite:///{tmp_path}/x.sqlite")
    assert create_app({"INSTANCE_PATH": str(tmp_path)}).config["DATABASE_URL"] == f"sqlite:///{tmp_path}/x.sqlite"


def test_console_script_and_flask_cli_both_work(tmp_path):
    env = {"CALIBRATE_INSTANCE": str(tmp_path), "PATH": "/usr/bin:/bin"}
    bindir = __import__("pathlib").Path(sys.executable).parent
    out = subprocess.run([str(bindir / "calibrate"), "--help"], capture_output=True, text=True, env=env, check=True)
    assert "import" in out.stdout and "sample" in out.stdout
    out = subprocess.run([str(bindir / "flask"), "--app", "calibrate", "init"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "created database" in out.stdout
    assert (tmp_path / "calibrate.sqlite").exists()
