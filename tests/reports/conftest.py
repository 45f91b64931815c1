"""Fixtures for the report renderers: reports built from labels and verdicts stored directly."""

from __future__ import annotations

import pytest
from labelstore import Store
from report_helpers import fill

from calibrate.calibration import Options, build_report


@pytest.fixture
def store(session):
    return Store(session)


@pytest.fixture
def report_of(session, store):
    """Return a function that commits the store and builds its dataset's report (fast bootstrap)."""

    def build(judge="j", **options):
        session.commit()
        return build_report(session, store.dataset.name, judge, options=Options(bootstrap=200, **options))

    return build


@pytest.fixture
def full_report(store, report_of):
    """A report on three tasks, grouped by metadata.topic."""
    store.dataset.description = "Answers of a RAG assistant, labelled by two experts."
    fill(store)
    return report_of(group_by="metadata.topic")
