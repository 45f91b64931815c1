"""Fixtures that store labels and verdicts directly, so calibration tests need no import code."""

from __future__ import annotations

import pytest
from labelstore import Store


@pytest.fixture
def store(session):
    return Store(session)
