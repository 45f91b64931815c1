"""Helpers shared by the browser tests (a module, not a conftest: importable by name)."""

from __future__ import annotations

import time


def eventually(check, timeout: float = 30.0):
    """Return `check()` once it is truthy, or its last value after `timeout` seconds (the app saves asynchronously).

    `check` must not raise while the save is still on its way (read with `.get`, not `[]`): an exception ends the wait
    at once. The timeout is generous because a busy CI machine can take seconds to commit; a passing check returns at
    its first truthy value, so it costs nothing there."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.05)
