"""Fixtures of the calibration-loop tests: the bundled demo (two prompt versions that ran) and a parsed page."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from labelstore import Store

from calibrate.demo import DATASET


@pytest.fixture
def demo(demo_engine):
    """Load the demo (a copy of the session's demo database); return its dataset's name."""
    return DATASET


@pytest.fixture
def soup():
    """Return a function that parses a response's HTML."""
    return lambda response: BeautifulSoup(response.data, "html.parser")


@pytest.fixture
def store(session):
    """A dataset whose labels and verdicts are stored directly (tests/labelstore.py)."""
    return Store(session)
