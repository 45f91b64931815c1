"""Settings without Flask: what `create_app` and the command line both read.

Each source overrides the one before: `calibrate/config.py` (the defaults), `instance/config.py`,
environment variables `CALIBRATE_<NAME>` (values parsed as JSON when they parse, as Flask's
`from_prefixed_env` does: `CALIBRATE_BOOTSTRAP=500` is a number; `CALIBRATE_A__B=1` sets key B
of dict A; SECRET_KEY and DATABASE_URL are always text), then the caller's overrides (tests, `--db`). The instance folder is `instance/`
beside the package, or `$CALIBRATE_INSTANCE`, or the override `INSTANCE_PATH`.

Commands that only read and write the database never build a Flask app: they take these
settings, so they start without importing Flask's request machinery or the views.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from calibrate import config, default_instance_path

PREFIX = "CALIBRATE_"
# Taken as they are, never parsed as JSON: a secret key of digits ("0123", "1e5") must stay that text.
TEXT_SETTINGS = frozenset({"SECRET_KEY", "DATABASE_URL"})


def _upper(namespace: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in namespace.items() if key.isupper()}


def instance_config(instance: Path) -> dict[str, Any]:
    """Return the settings of `instance/config.py` (none when there is no such file)."""
    path = instance / "config.py"
    if not path.is_file():
        return {}
    namespace: dict[str, Any] = {"__file__": str(path)}
    exec(compile(path.read_bytes(), str(path), "exec"), namespace)
    return _upper(namespace)


def environment(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Return the settings given as `CALIBRATE_*` variables (JSON values where they parse; `__` nests)."""
    environ = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for key in sorted(environ):
        if not key.startswith(PREFIX):
            continue
        raw = environ[key]
        key = key.removeprefix(PREFIX)
        try:
            value = raw if key in TEXT_SETTINGS else json.loads(raw)
        except ValueError:
            value = raw
        if "__" not in key:
            out[key] = value
            continue
        current = out
        *parents, last = key.split("__")
        for part in parents:
            current = current.setdefault(part, {})
        current[last] = value
    return out


def load_settings(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return the settings (see the module's docstring); `INSTANCE_PATH` and `DATABASE_URL` are always set."""
    overrides = overrides or {}
    instance = Path(overrides["INSTANCE_PATH"]) if overrides.get("INSTANCE_PATH") else default_instance_path()
    settings = _upper(vars(config))
    settings.update(instance_config(instance))
    settings.update(environment())
    settings.update(overrides)
    settings["INSTANCE_PATH"] = str(instance)
    if not settings.get("DATABASE_URL"):
        settings["DATABASE_URL"] = f"sqlite:///{instance / 'calibrate.sqlite'}"
    return settings


def ensure_instance_folder(instance: Path) -> None:
    """Create the instance folder (0700: the database and the secret key are the owner's only) unless it exists."""
    try:
        instance.mkdir(parents=True, mode=0o700)
        instance.chmod(0o700)  # whatever the umask
    except FileExistsError:
        pass  # an existing folder keeps the mode its owner gave it
