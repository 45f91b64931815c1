"""A seeded synthetic world of claims for the report: samples, claims, experts' labels and one judge's verdicts.

Written with bulk SQL into a migrated SQLite file (fast, and independent of the import code, so the
same world serves the report's golden test at a few hundred claims and bench/bench_report_floor.py at
10^5 and 10^6). Task `claim_support` (supported / unsupported / not_applicable, the last excluded
from statistics); samples carry `metadata.topic` (7 topics) for `--group-by`.

- experts `ann1` and `ann2` label every claim, each right with probability `accuracy`; `ann3` labels
  a fraction `third` of the claims;
- `adjudicated`: a fraction of claims also gets an adjudication by `lead` (the true label);
- `stale`: a fraction of ann2's labels is stale (left out of every statistic);
- the judge `synthetic-judge` gives a verdict on every claim, right with probability `judge_accuracy`;
  a fraction `unparsed` has no value (status unparsed) and a fraction `abstain` says not_applicable;
- `not_applicable`: a fraction of the true labels is not_applicable.

With every fraction 0 and `binary` (the benchmark's world: a wrong label is the other of supported and unsupported)
the gold is the two experts' agreed label, no gold on a tie.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np

LABELS = ("supported", "unsupported", "not_applicable")
JUDGE = "synthetic-judge"
DATASET = "synthetic"
NOW = "2026-01-01 00:00:00"


def fill_world(path: Path, n_samples: int, n_claims: int, *, seed: int = 0, accuracy: float = 0.9,
               judge_accuracy: float = 0.85, third: float = 0.0, adjudicated: float = 0.0, stale: float = 0.0,
               unparsed: float = 0.0, abstain: float = 0.0, not_applicable: float = 0.0, binary: bool = False) -> None:
    """Write the world into the migrated database at `path` (its built-in tasks already made)."""
    rng = np.random.default_rng(seed)
    con = sqlite3.connect(path)
    con.execute("INSERT INTO dataset (name, description, source, is_demo, created_at) VALUES (?, '', 'synthetic', 0, ?)",
                (DATASET, NOW))
    dataset = con.execute("SELECT id FROM dataset WHERE name = ?", (DATASET,)).fetchone()[0]
    users = {}
    for name in ("ann1", "ann2", "ann3", "lead"):
        con.execute("INSERT INTO user (username, display_name, role, active, created_at) VALUES (?, '', 'annotator', 1, ?)",
                    (name, NOW))
        users[name] = con.execute("SELECT id FROM user WHERE username = ?", (name,)).fetchone()[0]
    con.execute("INSERT INTO judge (name, kind, description, created_at) VALUES (?, 'imported', '', ?)", (JUDGE, NOW))
    judge = con.execute("SELECT id FROM judge WHERE name = ?", (JUDGE,)).fetchone()[0]
    task = con.execute("SELECT id FROM task WHERE name = 'claim_support'").fetchone()[0]
    first_sample = (con.execute("SELECT MAX(id) FROM sample").fetchone()[0] or 0) + 1
    first_claim = (con.execute("SELECT MAX(id) FROM claim").fetchone()[0] or 0) + 1
    con.executemany(
        "INSERT INTO sample (id, dataset_id, external_id, question, answer, metadata, content_hash, segmenter, created_at, "
        "updated_at) VALUES (?, ?, ?, 'q', 'a', ?, 'h', 'given', ?, ?)",
        ((first_sample + i, dataset, f"s{i}", json.dumps({"topic": f"t{i % 7}"}), NOW, NOW) for i in range(n_samples)))
    n = n_samples * n_claims
    sample_of = (first_sample + np.repeat(np.arange(n_samples), n_claims)).tolist()
    claim_ids = (first_claim + np.arange(n)).tolist()
    con.executemany("INSERT INTO claim (id, sample_id, \"index\", text, start, \"end\", active) VALUES (?, ?, ?, 'c', -1, -1, 1)",
                    ((claim_ids[i], sample_of[i], i % n_claims) for i in range(n)))
    truth = np.where(rng.random(n) < 0.65, 0, 1)
    truth[rng.random(n) < not_applicable] = 2

    def rater(p: float) -> np.ndarray:  # right with probability p, else one of the other two labels (binary: the other)
        wrong = 1 - truth if binary else (truth + rng.integers(1, 3, n)) % 3
        return np.where(rng.random(n) < p, truth, wrong)

    a1, a2, a3, verdict = rater(accuracy), rater(accuracy), rater(accuracy), rater(judge_accuracy)
    has3, adj, is_stale = rng.random(n) < third, rng.random(n) < adjudicated, rng.random(n) < stale
    verdict[rng.random(n) < abstain] = 2
    status = np.where(rng.random(n) < unparsed, "unparsed", "ok")
    keys = [f"claim:{c}" for c in claim_ids]
    insert = ("INSERT INTO label (task_id, sample_id, claim_id, target_key, annotator_id, value, rationale, adjudicated, "
              "stale, stale_reason, source, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, '', ?, ?, '', 'import', ?, ?)")
    for name, values, keep, flag_stale, adjudication in (
            ("ann1", a1, None, None, 0), ("ann2", a2, None, is_stale, 0), ("ann3", a3, has3, None, 0),
            ("lead", truth, adj, None, 1)):
        user, labels = users[name], values.tolist()
        rows = range(n) if keep is None else np.flatnonzero(keep).tolist()
        stale_of = [False] * n if flag_stale is None else flag_stale.tolist()
        con.executemany(insert, ((task, sample_of[i], claim_ids[i], keys[i], user, LABELS[labels[i]], adjudication,
                                  int(stale_of[i]), NOW, f"2026-01-01 00:{i % 60:02d}:00") for i in rows))
    values, states = verdict.tolist(), status.tolist()
    con.executemany(
        "INSERT INTO verdict (judge_id, task_id, sample_id, claim_id, target_key, value, status, reason, raw, error, cached, "
        "source, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, '', '', '', 0, 'import', ?)",
        ((judge, task, sample_of[i], claim_ids[i], keys[i], LABELS[values[i]] if states[i] == "ok" else None, states[i], NOW)
         for i in range(n)))
    con.commit()
    con.close()
