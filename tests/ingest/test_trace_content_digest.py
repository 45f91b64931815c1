"""`sample.content_sha256`: metadata.content_sha256 copied into an indexed column, so a traces batch costs the batch.

The traces import finds "the same content under another trace id" through the index
(dataset_id, content_sha256), and the samples import reads only the stored rows of the ids a
batch holds (`import_samples(ids=…)`): neither reads the whole dataset.
"""

from __future__ import annotations

import sqlite3

import pytest
from ingest_helpers import write_jsonl
from sqlalchemy import text
from sqlmodel import Session, select
from test_traces import T1, T2, _otlp_file, _rag

from calibrate.db import dispose_engine, get_engine
from calibrate.ingest.batches import InChunks
from calibrate.ingest.problems import ImportRejected
from calibrate.ingest.sample_records import content_digest
from calibrate.ingest.samples import import_samples
from calibrate.ingest.traces import import_traces
from calibrate.migrations import current_revision, head_revision, upgrade
from calibrate.models import Sample

DIGEST_A, DIGEST_B = "a" * 64, "b" * 64


def columns(engine) -> dict[str, tuple[str | None, str | None]]:
    """Return external id → (the column, metadata.content_sha256) of every sample."""
    with Session(engine) as session:
        return {s.external_id: (s.content_sha256, s.meta.get("content_sha256")) for s in session.exec(select(Sample))}


def test_the_column_is_the_metadata_digest_on_create_on_update_and_on_late_feedback(engine, tmp_path):
    import_traces(engine, [_otlp_file(tmp_path / "1.json", _rag(T1))], dataset="d")
    first = columns(engine)[T1]
    assert first[0] == first[1] and len(first[0]) == 64
    summary = import_traces(engine, [_otlp_file(tmp_path / "2.json", _rag(T1, answer="B."))], dataset="d")
    assert summary.updated == 1
    second = columns(engine)[T1]
    assert second[0] == second[1] != first[0]  # the update's new content, not the first one
    # Feedback that came later changes only the feedback: the digest stays.
    feedback = write_jsonl(tmp_path / "f.jsonl", [{"trace_id": T1, "value": "down"}])
    summary = import_traces(engine, [_otlp_file(tmp_path / "2.json", _rag(T1, answer="B."))], dataset="d",
                            feedback=feedback)
    assert summary.updated == 1 and columns(engine)[T1] == second
    # The old content under another trace id is new content now (the stored sample moved on); the new one is a copy.
    summary = import_traces(engine, [_otlp_file(tmp_path / "3.json", _rag(T2) + _rag("4" * 32, answer="B."))],
                            dataset="d")
    assert (summary.created, summary.duplicate_content) == (1, 1)
    assert columns(engine)[T2] == (first[0], first[0])


def test_a_samples_file_sets_the_column_only_for_a_64_character_string_and_an_update_keeps_it_right(engine, tmp_path):
    def record(sample_id, metadata):
        return {"id": sample_id, "question": "Q?", "answer": "A.", "contexts": ["C."], "metadata": metadata}

    first = write_jsonl(tmp_path / "1.jsonl", [record("s1", {"content_sha256": DIGEST_A}), record("s2", {"content_sha256": 7}),
                                               record("s3", {"content_sha256": "short"}), record("s4", {})])
    import_samples(InChunks(engine), first, "jsonl", dataset="d")
    assert columns(engine) == {"s1": (DIGEST_A, DIGEST_A), "s2": (None, 7), "s3": (None, "short"), "s4": (None, None)}
    second = write_jsonl(tmp_path / "2.jsonl", [record("s1", {}), record("s2", {"content_sha256": DIGEST_B}),
                                                record("s3", {"content_sha256": "short"}), record("s4", {})])
    summary = import_samples(InChunks(engine), second, "jsonl", dataset="d", update=True)
    assert (summary.added, summary.updated) == (0, 2)
    assert columns(engine) == {"s1": (None, None), "s2": (DIGEST_B, DIGEST_B), "s3": (None, "short"), "s4": (None, None)}
    assert content_digest({"content_sha256": DIGEST_A}) == DIGEST_A and content_digest([DIGEST_A]) is None


def test_import_by_ids_counts_as_the_scan_does_and_refuses_a_record_outside_them(engine, tmp_path):
    def record(sample_id, answer="A."):
        return {"id": sample_id, "question": "Q?", "answer": answer, "contexts": ["C."]}

    import_samples(InChunks(engine), write_jsonl(tmp_path / "0.jsonl", [record(f"s{i}") for i in range(1200)]), "jsonl",
                   dataset="d")
    # More ids than one IN list holds, some stored (one changed), some new.
    rows = [record(f"s{i}", answer="B." if i == 4 else "A.") for i in range(0, 1200, 2)] + [record("n1"), record("n2")]
    path = write_jsonl(tmp_path / "1.jsonl", rows)
    by_ids = import_samples(InChunks(engine), path, "jsonl", dataset="d", update=True, ids=[r["id"] for r in rows])
    assert (by_ids.added, by_ids.updated, by_ids.unchanged) == (2, 1, 599)
    again = import_samples(InChunks(engine), path, "jsonl", dataset="d", update=True)  # the scan: all known now
    assert (again.added, again.updated, again.unchanged) == (0, 0, 602)
    changed = write_jsonl(tmp_path / "2.jsonl", [record("s4", answer="B."), record("s5", answer="B.")])
    by_ids = import_samples(InChunks(engine), changed, "jsonl", dataset="d", update=True, ids=["s4", "s5", "s7"])
    assert (by_ids.added, by_ids.updated, by_ids.unchanged) == (0, 1, 1)
    with pytest.raises(ImportRejected, match="'s9' is not one of the ids the import was given"):
        import_samples(InChunks(engine), write_jsonl(tmp_path / "3.jsonl", [record("s9", answer="C.")]), "jsonl",
                       dataset="d", update=True, ids=["s3"])


def test_the_duplicate_content_lookup_goes_through_the_index(engine):
    with engine.connect() as conn:
        plan = " ".join(row[-1] for row in conn.execute(text(
            "EXPLAIN QUERY PLAN SELECT external_id, content_sha256 FROM sample "
            "WHERE dataset_id = 1 AND content_sha256 IN ('a', 'b')")))
    assert "USING COVERING INDEX ix_sample_dataset_content_sha256" in plan or \
        "USING INDEX ix_sample_dataset_content_sha256" in plan, plan


def test_the_revision_copies_the_digest_out_of_the_stored_metadata(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    engine = get_engine(url)
    try:
        upgrade(engine, "0017")
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO dataset (id, name, description, source, is_demo, created_at) VALUES "
                              "(1, 'd', '', '', 0, '2026-01-01')"))
            for pk, metadata in enumerate([f'{{"content_sha256": "{DIGEST_A}", "trace_id": "t"}}', '{"content_sha256": 7}',
                                           '{"content_sha256": "short"}', '{}', f'{{"x": {{"content_sha256": "{DIGEST_B}"}}}}',
                                           f'{{"content_sha256": "{DIGEST_B}"}}'], start=1):
                conn.execute(text("INSERT INTO sample (id, dataset_id, external_id, question, answer, metadata, content_hash, "
                                  "segmenter, claim_source, created_at, updated_at) VALUES (:id, 1, :ext, 'Q', 'A', :meta, "
                                  "'h', '', 'segmenter', '2026-01-01', '2026-01-01')"),
                             {"id": pk, "ext": f"s{pk}", "meta": metadata})
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        rows = sqlite3.connect(tmp_path / "old.sqlite").execute(
            "SELECT external_id, content_sha256 FROM sample ORDER BY id").fetchall()
        assert rows == [("s1", DIGEST_A), ("s2", None), ("s3", None), ("s4", None), ("s5", None), ("s6", DIGEST_B)]
    finally:
        dispose_engine(url)
