"""Helpers shared by the browser tests (a module, not a conftest: importable by name)."""

from __future__ import annotations

import time


def eventually(check, timeout: float = 5.0):
    """Return `check()` once it is truthy, or its last value after `timeout` seconds (the app saves asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.05)
