"""The Flask application: `create_app(test_config=None)` (import it from `calibrate`, which loads this lazily).

Settings come from calibrate/settings.py (the same the command line reads); this adds what only
a web app needs: the secret key (generated once per install into the instance folder), the
request's database session, the blueprints, the error handling, and the CLI commands under
`flask --app calibrate <command>`.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

from calibrate import PROJECT_ROOT, cli, views
from calibrate.settings import ensure_instance_folder, load_settings
from calibrate.views import session


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


def create_app(test_config: dict | None = None, *, role: str = "all") -> Flask:
    """Create and configure the calibrate Flask app; `role` is `calibrate serve --role` (views.init_app)."""
    settings = load_settings(test_config)
    instance = Path(settings["INSTANCE_PATH"])
    ensure_instance_folder(instance)
    app = Flask(
        "calibrate",
        instance_path=str(instance),
        instance_relative_config=True,
        template_folder=str(PROJECT_ROOT / "templates"),
        static_folder=str(PROJECT_ROOT / "static"),
    )
    app.config.update(settings)
    if not app.config.get("SECRET_KEY"):  # CALIBRATE_SECRET_KEY gives one (the same on every machine of a deployment)
        app.config["SECRET_KEY"] = _secret_key(instance)
    hops = int(app.config.get("TRUSTED_PROXY_HOPS") or 0)
    if hops > 0:
        # The client address (login throttling, the logs) and the scheme (the cookie's Secure flag)
        # from the last `hops` proxies' X-Forwarded-For and X-Forwarded-Proto; nothing else.
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=0, x_port=0, x_prefix=0)
    session.init_app(app)
    views.init_app(app, role)
    cli.register_flask_commands(app)
    return app
