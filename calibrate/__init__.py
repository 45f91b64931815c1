"""calibrate: a human–judge calibration and annotation workbench.

`create_app(test_config=None)` assembles the Flask app: settings (defaults, then
`instance/config.py`, then `CALIBRATE_*` environment variables, then the test override),
the database engine, the blueprints and the CLI commands.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from flask import Flask

__version__ = "0.1.0"

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def default_instance_path() -> Path:
    """Return the instance folder: $CALIBRATE_INSTANCE, else `instance/` beside the package."""
    env = os.environ.get("CALIBRATE_INSTANCE")
    return Path(env).resolve() if env else PROJECT_ROOT / "instance"


def _secret_key(instance: Path) -> str:
    """Return this install's secret key, generating it into the instance folder on first use."""
    path = instance / "secret_key"
    if not path.exists():
        # O_EXCL: two processes starting at once must not end up with different keys.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(32))
    return path.read_text().strip()


def create_app(test_config: dict | None = None) -> Flask:
    """Create and configure the calibrate Flask app."""
    instance = Path(test_config.get("INSTANCE_PATH")) if test_config and test_config.get("INSTANCE_PATH") else default_instance_path()
    instance.mkdir(parents=True, exist_ok=True)
    app = Flask(
        __name__,
        instance_path=str(instance),
        instance_relative_config=True,
        template_folder=str(PROJECT_ROOT / "templates"),
        static_folder=str(PROJECT_ROOT / "static"),
    )
    app.config.from_object("calibrate.config")
    app.config.from_pyfile("config.py", silent=True)
    app.config.from_prefixed_env("CALIBRATE")
    if test_config:
        app.config.update(test_config)
    if not app.config.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = _secret_key(instance)
    if not app.config.get("DATABASE_URL"):
        app.config["DATABASE_URL"] = f"sqlite:///{instance / 'calibrate.sqlite'}"

    from calibrate import db, views

    db.init_app(app)
    views.init_app(app)

    from calibrate.cli import register_flask_commands

    register_flask_commands(app)
    return app
