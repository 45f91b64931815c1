"""Helpers of the `calibrate optimise` tests: a dataset of the prompt world (tests/judges/prompt_world.py) in the test
database, a start version, and the command's arguments against the fake LLM server."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judges"))

from fakellm import FakeLLM
from prompt_world import PromptWorld

from calibrate.db import write_session
from calibrate.ingest import import_file
from calibrate.judges import save_version

DATASET = "world"


@contextmanager
def served_world(size: int = 16) -> Iterator[FakeLLM]:
    """The fake LLM server answering as a prompt world of `size` targets a split whose judge gets better with few-shots
    and rewrites (its `world` attribute is that world): what the Optimise page's tests optimise against."""
    world = PromptWorld.make(n_train=size, n_dev=size, n_test=size, hard={"dosage"})
    server = FakeLLM().start()
    server.responder = world
    server.world = world
    try:
        yield server
    finally:
        server.stop()


def load_world(engine, folder: Path, world: PromptWorld, *, dataset: str = DATASET, prompt: str = "claims") -> str:
    """Import the world's samples and labels, give each sample its split, save `claims@1`; return `claims@1`."""
    samples, labels = world.write(folder)
    with write_session(engine) as session:
        import_file(session, "samples", samples, dataset=dataset)
        import_file(session, "labels", labels, dataset=dataset)
        session.execute(text("UPDATE sample SET split = json_extract(metadata, '$.split') WHERE dataset_id = "
                             "(SELECT id FROM dataset WHERE name = :name)"), {"name": dataset})
        save_version(session, prompt, task="claim_support", model="fake-model")
    return f"{prompt}@1"


def optimise_args(server, start: str, *extra: str, dataset: str = DATASET) -> list[str]:
    """Return `calibrate optimise` arguments against the fake server (no key)."""
    return ["optimise", "--dataset", dataset, "--from", start, "--base-url", server.openai_base, "--api-key-env", "",
            "--concurrency", "2", *extra]
