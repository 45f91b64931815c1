"""Fixtures of the import tests."""

from __future__ import annotations

import ingest_helpers
import pytest


@pytest.fixture(params=["transaction", "chunks"])
def import_mode(request):
    """Run the test with imports in the caller's one transaction, then as batches of two-record chunks."""
    ingest_helpers.MODE["name"] = request.param
    yield request.param
    ingest_helpers.MODE["name"] = "transaction"
