"""expert_changes read as counts (issue 34): the same figures as the per-sample read it replaced, on a random world."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select as sa_select
from sqlmodel import Session, select

from calibrate.claimsets import EDITED, base_source, expert_changes, source_counts
from calibrate.models import Claim, ClaimEdit, Dataset, Sample

NOW = "2026-01-01 00:00:00"
SOURCES = ("segmenter", "segmenter+edited", "ex@1", "ex@1+edited", "import", "ex@2", "odd+edited+edited")


def reference_expert_changes(session: Session, dataset: Dataset, *, sample_ids: set[int] | None = None) -> dict:
    """The previous expert_changes (one row per sample and per sample × origin read back), kept as the reference."""
    samples = session.execute(sa_select(Sample.id, Sample.claim_source).where(Sample.dataset_id == dataset.id)).all()
    method_of = {sid: base_source(source) for sid, source in samples if sample_ids is None or sid in sample_ids}
    out: dict[str, dict[str, Any]] = {}
    for sid, source in samples:
        if sid not in method_of:
            continue
        row = out.setdefault(method_of[sid], {"n_answers": 0, "n_answers_edited": 0, "n_claims": 0, "n_changed": 0,
                                              "changed_share": None, "split": 0, "merged": 0, "edited": 0})
        row["n_answers"] += 1
        row["n_answers_edited"] += source.endswith(EDITED)
    changed_by: dict[int, str] = {}
    edits = session.execute(sa_select(ClaimEdit.action, ClaimEdit.before).join(Sample, Sample.id == ClaimEdit.sample_id)
                            .where(Sample.dataset_id == dataset.id, ClaimEdit.undone_at.is_(None))).all()
    for action, before in edits:
        for claim in before or []:
            changed_by[int(claim["id"])] = action
    claims = session.execute(sa_select(Claim.id, Claim.sample_id, Claim.origin, Claim.active)
                             .join(Sample, Sample.id == Claim.sample_id).where(Sample.dataset_id == dataset.id)).all()
    words = {"split": "split", "merge": "merged", "edit": "edited"}
    for claim_id, sid, origin, is_active in claims:
        if method_of.get(sid) != origin:
            continue
        if is_active:
            out[origin]["n_claims"] += 1
        elif claim_id in changed_by:
            row = out[origin]
            row["n_claims"] += 1
            row["n_changed"] += 1
            row[words.get(changed_by[claim_id], "edited")] += 1
    for row in out.values():
        row["changed_share"] = row["n_changed"] / row["n_claims"] if row["n_claims"] else None
    return dict(sorted(out.items()))


def fill_claim_sets(path: str, seed: int) -> None:
    """Two datasets of samples from several claim sources, claims of several origins (some retired), expert edits
    (some undone, some naming active claims or claims of another dataset)."""
    rng = np.random.default_rng(seed)
    con = sqlite3.connect(path)
    con.execute("INSERT INTO user (username, display_name, role, active, created_at) VALUES ('ana', '', 'annotator', 1, ?)",
                (NOW,))
    user = con.execute("SELECT id FROM user WHERE username = 'ana'").fetchone()[0]
    claim_id = 0
    for name in ("one", "two"):
        con.execute("INSERT INTO dataset (name, description, source, is_demo, created_at) VALUES (?, '', 'x', 0, ?)",
                    (name, NOW))
        dataset = con.execute("SELECT id FROM dataset WHERE name = ?", (name,)).fetchone()[0]
        for i in range(60):
            source = SOURCES[rng.integers(len(SOURCES))]
            cur = con.execute("INSERT INTO sample (dataset_id, external_id, question, answer, metadata, content_hash, segmenter, "
                              "claim_source, created_at, updated_at) VALUES (?, ?, 'q', 'a', '{}', 'h', 'x', ?, ?, ?)",
                              (dataset, f"s{i}", source, NOW, NOW))
            sample = cur.lastrowid
            claims = []
            for index in range(int(rng.integers(0, 7))):
                origin = (base_source(source), "expert", "ex@2", "segmenter", "odd+edited")[rng.choice(5, p=[0.6, 0.1, 0.1, 0.1, 0.1])]
                active = bool(rng.random() < 0.75)
                claim_id += 1
                con.execute("INSERT INTO claim (id, sample_id, \"index\", text, start, \"end\", active, origin) "
                            "VALUES (?, ?, ?, 'c', -1, -1, ?, ?)", (claim_id, sample, index, int(active), origin))
                claims.append(claim_id)
            for _ in range(int(rng.integers(0, 3))):
                named = [c for c in claims if rng.random() < 0.5] + ([claim_id + 10_000] if rng.random() < 0.1 else [])
                action = ("split", "merge", "edit", "rewrite")[rng.integers(4)]
                undone = NOW if rng.random() < 0.2 else None
                con.execute("INSERT INTO claimedit (sample_id, user_id, action, \"before\", \"after\", source_before, source_after, "
                            "stale_labels, undone_at, created_at) VALUES (?, ?, ?, ?, '[]', '', '', '[]', ?, ?)",
                            (sample, user, action, json.dumps([{"id": c, "index": 0, "text": "c"} for c in named]), undone,
                             NOW))
    con.commit()
    con.close()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_expert_changes_counts_as_the_per_sample_read_did(db_url, engine, seed, monkeypatch):
    fill_claim_sets(db_url.removeprefix("sqlite:///"), seed)
    monkeypatch.setattr("calibrate.claimsets.CHUNK", 7)  # the chunked reads of a subset of samples: many chunks
    rng = np.random.default_rng(seed)
    with Session(engine) as session:
        for dataset in session.exec(select(Dataset).order_by(Dataset.id)).all():
            ids = [s.id for s in session.exec(select(Sample).where(Sample.dataset_id == dataset.id)).all()]
            found = expert_changes(session, dataset)
            assert found == reference_expert_changes(session, dataset)
            assert list(found) == sorted(found) and len(found) >= 3
            assert any(row["n_changed"] for row in found.values())
            assert all(list(row) == ["n_answers", "n_answers_edited", "n_claims", "n_changed", "changed_share", "split",
                                     "merged", "edited"] for row in found.values())
            subset = set(rng.choice(ids, size=len(ids) // 3, replace=False).tolist())
            assert expert_changes(session, dataset, sample_ids=subset) == reference_expert_changes(session, dataset,
                                                                                                  sample_ids=subset)
            assert expert_changes(session, dataset, sample_ids=set()) == {}


def test_source_counts_of_a_whole_id_range_are_counted_by_the_database(db_url, engine):
    """A report's samples are often every id of a range: counted by one GROUP BY, the same counts as reading them."""
    fill_claim_sets(db_url.removeprefix("sqlite:///"), 4)
    with Session(engine) as session:
        rows = session.execute(sa_select(Sample.id, Sample.claim_source).order_by(Sample.id)).all()
        ids = [sid for sid, _ in rows]
        for chosen in (set(ids[10:50]), set(ids[:1]), set(ids), set(ids[10:50]) - {ids[20]}, {ids[0], ids[-1]}):
            expected: dict[str, int] = {}
            for sid, source in rows:
                if sid in chosen:
                    expected[source] = expected.get(source, 0) + 1
            found = source_counts(session, chosen)
            assert found == dict(sorted(expected.items())) and list(found) == sorted(found)
            assert all(type(n) is int for n in found.values())
