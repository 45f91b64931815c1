"""Helpers of the `calibrate optimise` tests: a dataset of the prompt world (tests/judges/prompt_world.py) in the test
database, a start version, and the command's arguments against the fake LLM server."""

from __future__ import annotations

import sys
from pathlib import Path

from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judges"))

from prompt_world import PromptWorld

from calibrate.db import write_session
from calibrate.ingest import import_file
from calibrate.judges import save_version

DATASET = "world"


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
