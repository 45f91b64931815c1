"""Fixtures for judge tests: the fake LLM server, datasets of many claims, quick run options."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakellm import FakeLLM
from judge_helpers import fast_options, write_samples  # noqa: F401

from calibrate.db import write_session


@pytest.fixture
def fake_llm():
    """A fresh fake LLM server on a random loopback port (stopped after the test)."""
    server = FakeLLM().start()
    yield server
    server.stop()


@pytest.fixture
def claims_dataset(engine, tmp_path):
    """Return a function that imports a dataset of n_samples × claims_per_sample claims."""
    from calibrate.ingest import import_file

    def make(name: str = "many", n_samples: int = 20, claims_per_sample: int = 5) -> str:
        path = write_samples(tmp_path / f"{name}.jsonl", n_samples, claims_per_sample)
        with write_session(engine) as session:
            import_file(session, "samples", path, dataset=name)
        return name

    return make


@pytest.fixture
def claims_prompt(engine):
    """Return a function that saves a claim-support prompt version and returns NAME@N."""
    from calibrate.judges import save_version

    def make(name: str = "claims", model: str = "fake-model", **fields) -> str:
        with write_session(engine) as session:
            result = save_version(session, name, task="claim_support", model=model, **fields)
            return f"{name}@{result.version.number}"

    return make
