"""calibrate: a human–judge calibration and annotation workbench.

This package's face is thin on purpose: importing `calibrate` (or `calibrate.stats`) loads
neither Flask nor the database layer. `create_app` builds the web app (calibrate/app.py) on
first call; the command line is calibrate/cli/.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flask import Flask

__version__ = "0.1.0"

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def default_instance_path() -> Path:
    """Return the instance folder: $CALIBRATE_INSTANCE, else `instance/` beside the package."""
    env = os.environ.get("CALIBRATE_INSTANCE")
    return Path(env).resolve() if env else PROJECT_ROOT / "instance"


def create_app(test_config: dict | None = None, *, role: str = "all") -> Flask:
    """Create and configure the calibrate Flask app (calibrate/app.py); `role`: `calibrate serve --role`."""
    from calibrate.app import create_app as build  # noqa: PLC0415 - Flask loads only when a web app is built

    return build(test_config, role=role)
