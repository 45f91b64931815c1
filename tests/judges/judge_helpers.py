"""Helpers shared by the judge tests and bench/bench_judge.py (not a conftest: importable by name)."""

from __future__ import annotations

import json
from pathlib import Path

from calibrate.judges import RunOptions


def fast_options(**overrides) -> RunOptions:
    """Run options with tiny delays and short timeouts, for tests."""
    values = {"concurrency": 8, "backoff_base": 0.001, "backoff_max": 0.01, "read_timeout": 2.0,
              "connect_timeout": 1.0, "batch_size": 20, "flush_interval": 0.05}
    values.update(overrides)
    return RunOptions(**values)


def write_samples(path: Path, n_samples: int, claims_per_sample: int, *, start: int = 0) -> Path:
    """Write a samples JSONL of n_samples answers with claims_per_sample claims each."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(start, start + n_samples):
            claims = [f"Claim {j} of answer {i} says {i * 10 + j} mg." for j in range(claims_per_sample)]
            fh.write(json.dumps({
                "id": f"s{i:05d}", "question": f"Question {i}: how much?",
                "answer": " ".join(claims), "claims": claims,
                "contexts": [{"text": f"Passage for {i}: take {i * 10} mg a day.", "doc_id": f"d{i}"}],
            }) + "\n")
    return path
