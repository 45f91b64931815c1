"""The committed ruff configuration (pyproject.toml) holds: lint regressions fail the suite, not a later review."""

from __future__ import annotations

import subprocess
import sys

from calibrate import PROJECT_ROOT


def test_ruff_passes_on_the_code_the_tests_and_the_benchmarks():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "calibrate", "tests", "bench"],
                          cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
