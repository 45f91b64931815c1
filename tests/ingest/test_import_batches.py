"""Imports written as batches of short transactions: web writes go on between the chunks, nothing is
visible before the publish, a killed import leaves nothing visible and is cleaned up (issue 14, point 4)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner
from ingest_helpers import GOOD, write_jsonl
from sqlite_helpers import write_lock_is_free
from sqlmodel import Session, func, select

from calibrate import lookup
from calibrate.accounts import get_user
from calibrate.cli import cli
from calibrate.errors import NotFound
from calibrate.ingest import batches, import_in_chunks
from calibrate.models import (
    Assignment,
    Claim,
    Context,
    Dataset,
    ImportBatch,
    ImportStep,
    Label,
    Sample,
    StagedLabel,
    Verdict,
)

ROOT = Path(__file__).resolve().parents[2]


def write_samples(path: Path, n: int, *, prefix: str = "s") -> Path:
    rows = []
    for i in range(n):
        claims = [f"Claim {j} of answer {i} says {i * 10 + j} mg." for j in range(3)]
        rows.append({"id": f"{prefix}{i:05d}", "question": f"Question {i}?", "answer": " ".join(claims), "claims": claims,
                     "contexts": [f"Passage {i}: take {i * 10} mg a day.", f"Another passage {i}."]})
    return write_jsonl(path, rows)


def _count(engine, model, *where) -> int:
    with Session(engine) as session:
        return session.exec(select(func.count()).select_from(model).where(*where)).one()


@pytest.fixture
def chunk_commits(monkeypatch):
    """Call the functions appended to the returned list after every committed chunk of a chunked import."""
    hooks: list = []
    real = batches.InChunks.chunk

    @contextlib.contextmanager
    def chunk(self):
        with real(self) as session:
            yield session
        for hook in hooks:
            hook()

    monkeypatch.setattr(batches.InChunks, "chunk", chunk)
    return hooks


@pytest.fixture
def annotator(client, session, make_sample, login):
    """Ana logged in to the web app, with one item of dataset "work" to label."""
    token = login("ana")
    sample = make_sample(dataset="work")
    assignment = Assignment(sample_id=sample.id, user_id=get_user(session, "ana").id)
    session.add(assignment)
    session.commit()
    claim = session.exec(select(Claim).where(Claim.sample_id == sample.id)).first()
    return {"token": token, "url": f"/annotate/{assignment.id}/label", "target": f"claim:{claim.id}"}


def test_a_large_import_is_written_in_many_short_transactions_while_labels_are_saved_between_them(
        engine, db_url, client, annotator, chunk_commits, tmp_path):
    path = write_samples(tmp_path / "big.jsonl", 60)
    seen = []

    def between_chunks():
        free = write_lock_is_free(db_url)
        value = ("supported", "unsupported")[len(seen) % 2]
        saved = client.post(annotator["url"], data={"task": "claim_support", "target": annotator["target"], "value": value},
                            headers={"HX-Request": "true", "X-CSRFToken": annotator["token"]})
        listed = BeautifulSoup(client.get("/datasets").data, "html.parser").get_text()
        seen.append((free, saved.status_code, "big" in listed.split(), _count(engine, Sample) - 1))

    chunk_commits.append(between_chunks)
    summary = import_in_chunks(engine, "samples", path, dataset="big", chunk_size=5)
    assert summary.added == 60
    # The batch start, twelve chunks of five samples and the publish: each a transaction of its own.
    assert len(seen) >= 13
    assert all(free for free, *_ in seen), "the import held the write lock between two chunks"
    assert {status for _, status, *_ in seen} == {200}  # every label save landed (no "database is locked")
    assert not any(listed for _, _, listed, _ in seen[:-1])  # the dataset shows only once published
    assert [stored for *_, stored in seen][-2] == 60  # all written (hidden) before the publish
    with Session(engine) as session:
        lookup.dataset(session, "big")  # visible now
        assert session.exec(select(func.count()).select_from(Sample).join(Dataset).where(Dataset.name == "big")).one() == 60
        assert session.exec(select(ImportBatch)).all() == []  # and its bookkeeping is gone
    assert _count(engine, Label) == 1


def test_nothing_of_an_unfinished_import_is_visible(engine, tmp_path, chunk_commits):
    """Stopped after some chunks (here by an exception; a kill is tested below): no dataset, no sample shows."""
    path = write_samples(tmp_path / "big.jsonl", 30)

    class Killed(Exception):
        pass

    def stop_after_three():
        if len(calls) == 3:
            raise Killed
        calls.append(1)

    calls: list[int] = []
    chunk_commits.append(stop_after_three)
    with pytest.raises(Killed):
        import_in_chunks(engine, "samples", path, dataset="big", chunk_size=4)
    with Session(engine) as session:
        with pytest.raises(NotFound):
            lookup.dataset(session, "big")
        assert session.exec(select(func.count()).select_from(Sample)).one() == 0  # removed at once on failure
        assert session.exec(select(ImportBatch)).all() == []


def _run_cli(db_url, tmp_path, *args, chunk_size=20):
    env = dict(os.environ, CALIBRATE_INSTANCE=str(tmp_path / "instance"), CALIBRATE_IMPORT_CHUNK_SIZE=str(chunk_size))
    return [sys.executable, "-m", "calibrate", *args, "--db", db_url], env


def _kill_mid_import(db_url, tmp_path, args, staged_query):
    """Start `calibrate import …` in a subprocess, SIGKILL it once a chunk is committed, return the rows it had staged."""
    command, env = _run_cli(db_url, tmp_path, *args)
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = db_url.removeprefix("sqlite:///")
    deadline = time.monotonic() + 60
    staged = 0
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            connection = sqlite3.connect(path, timeout=10)
            try:
                staged = connection.execute(staged_query).fetchone()[0]
            finally:
                connection.close()
            if staged:
                break
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the import finished before the kill: make the file bigger"
    return staged


def test_a_samples_import_killed_with_sigkill_leaves_nothing_visible_and_is_cleaned_up(engine, db_url, tmp_path):
    path = write_samples(tmp_path / "big.jsonl", 3000)
    staged = _kill_mid_import(db_url, tmp_path, ["import", "samples", str(path), "--dataset", "big"],
                              "SELECT count(*) FROM sample JOIN dataset ON dataset.id = sample.dataset_id "
                              "WHERE dataset.import_batch_id IS NOT NULL")
    assert 0 < staged < 3000, "the kill must land mid-import"
    with Session(engine) as session:
        with pytest.raises(NotFound):
            lookup.dataset(session, "big")
        visible = session.exec(select(func.count()).select_from(Sample).join(Dataset)
                               .where(Dataset.import_batch_id.is_(None))).one()
        assert visible == 0
        assert len(session.exec(select(ImportBatch)).all()) == 1  # what the dead import left, invisible
    result = CliRunner().invoke(cli, ["cleanup", "--db", db_url], env={"CALIBRATE_INSTANCE": str(tmp_path / "instance")})
    assert result.exit_code == 0 and "removed 1 unfinished import" in result.output, result.output
    for model in (Sample, Context, Claim, Dataset, ImportBatch):
        assert _count(engine, model) == 0, model
    # The same command again imports the whole file.
    command, env = _run_cli(db_url, tmp_path, "import", "samples", str(path), "--dataset", "big")
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "3,000 added" in done.stdout
    assert _count(engine, Sample) == 3000 and _count(engine, ImportBatch) == 0


def test_a_labels_import_killed_with_sigkill_leaves_no_label_and_the_next_import_cleans_up(engine, db_url, tmp_path):
    samples = write_samples(tmp_path / "samples.jsonl", 200)
    command, env = _run_cli(db_url, tmp_path, "import", "samples", str(samples), "--dataset", "d")
    assert subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=120).returncode == 0
    rows = [{"sample_id": f"s{i:05d}", "annotator": f"expert{k}", "task": "claim_support", "claim": j, "value": "supported"}
            for i in range(200) for j in range(3) for k in range(5)]
    labels = write_jsonl(tmp_path / "labels.jsonl", rows)
    staged = _kill_mid_import(db_url, tmp_path, ["import", "labels", str(labels), "--dataset", "d"],
                              "SELECT count(*) FROM stagedlabel")
    assert 0 < staged < len(rows)
    assert _count(engine, Label) == 0
    command, env = _run_cli(db_url, tmp_path, "import", "labels", str(labels), "--dataset", "d")
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"{len(rows):,} added" in done.stdout
    assert _count(engine, Label) == len(rows) and _count(engine, StagedLabel) == 0 and _count(engine, ImportBatch) == 0


def _dead_batch(engine, *, owner: str, heartbeat_age: int = 0, dataset: str = "ghost") -> int:
    """Store what a killed samples import leaves: a batch, its hidden dataset, a sample with rows."""
    now = batches.now_seconds()
    with Session(engine) as session:
        batch = ImportBatch(kind="samples", dataset=dataset, owner=owner, started=now, heartbeat=now - heartbeat_age)
        session.add(batch)
        session.flush()
        hidden = Dataset(name=dataset, import_batch_id=batch.id)
        session.add(hidden)
        session.flush()
        sample = Sample(dataset_id=hidden.id, external_id="x", question="q", answer="a.", content_hash="h")
        session.add(sample)
        session.flush()
        session.add(Claim(sample_id=sample.id, index=0, text="a.", start=0, end=2))
        session.commit()
        return batch.id


def test_init_removes_the_batches_of_dead_importers_and_leaves_running_ones(engine, db_url, tmp_path):
    host = batches.socket.gethostname()
    gone = _dead_batch(engine, owner=f"{host}:{2**22 + 12345}", dataset="gone")  # no such process
    running = _dead_batch(engine, owner=f"{host}:{os.getpid()}", dataset="running")  # this test: alive
    silent = _dead_batch(engine, owner="elsewhere:1", heartbeat_age=3600, dataset="silent")  # another machine, silent
    recent = _dead_batch(engine, owner="elsewhere:2", heartbeat_age=10, dataset="recent")  # another machine, writing
    result = CliRunner().invoke(cli, ["init", "--db", db_url], env={"CALIBRATE_INSTANCE": str(tmp_path / "instance")})
    assert result.exit_code == 0, result.output
    with Session(engine) as session:
        left = {b.id for b in session.exec(select(ImportBatch)).all()}
        names = set(session.exec(select(Dataset.name)).all())
    assert left == {running, recent} and gone not in left and silent not in left
    assert names == {"running", "recent"}
    assert _count(engine, Sample) == 2 and _count(engine, Claim) == 2


def test_a_second_import_into_a_dataset_being_imported_is_refused(engine, db_url, tmp_path):
    CliRunner().invoke(cli, ["import", "samples", str(GOOD / "samples.jsonl"), "--dataset", "d", "--db", db_url],
                       env={"CALIBRATE_INSTANCE": str(tmp_path / "instance")})
    now = batches.now_seconds()
    with Session(engine) as session:
        session.add(ImportBatch(kind="labels", dataset="d", owner=f"{batches.socket.gethostname()}:{os.getpid()}",
                                started=now, heartbeat=now))
        session.commit()
    result = CliRunner().invoke(cli, ["import", "labels", str(GOOD / "labels.jsonl"), "--dataset", "d", "--db", db_url],
                                env={"CALIBRATE_INSTANCE": str(tmp_path / "instance")})
    assert result.exit_code == 2
    assert "dataset 'd' is being imported by another import" in result.output
    assert _count(engine, Label) == 0


def test_importing_the_same_file_again_in_chunks_changes_nothing_and_leaves_no_batch(engine, db_url, tmp_path):
    samples = write_samples(tmp_path / "s.jsonl", 25)
    verdicts = write_jsonl(tmp_path / "v.jsonl", [{"sample_id": f"s{i:05d}", "judge": "ext", "task": "claim_support",
                                                  "claim": 0, "value": "supported"} for i in range(25)])
    first = [import_in_chunks(engine, "samples", samples, dataset="d", chunk_size=3),
             import_in_chunks(engine, "verdicts", verdicts, dataset="d", chunk_size=3)]
    assert [s.added for s in first] == [25, 25]
    with Session(engine) as session:
        before = json.dumps([sorted(map(str, session.exec(select(model)).all())) for model in (Sample, Claim, Context, Verdict)])
    again = [import_in_chunks(engine, "samples", samples, dataset="d", chunk_size=3),
             import_in_chunks(engine, "verdicts", verdicts, dataset="d", chunk_size=3)]
    assert all("nothing changed" in s.line() for s in again)
    with Session(engine) as session:
        after = json.dumps([sorted(map(str, session.exec(select(model)).all())) for model in (Sample, Claim, Context, Verdict)])
        assert session.exec(select(ImportBatch)).all() == [] and session.exec(select(ImportStep)).all() == []
    assert after == before


def _pairwise_flow(run, engine, tmp_path):
    """Import pairwise samples, labels with orders, verdicts in both orders, then change them all; return each summary."""
    from calibrate.db import write_session
    from calibrate.tasks import add_task

    rows = [{"id": f"p{i}", "question": f"Q{i}?", "responses": [{"id": "A", "text": f"a{i}"}, {"id": "B", "text": f"b{i}"}]}
            for i in range(7)]
    summaries = [run("samples", write_jsonl(tmp_path / "s.jsonl", rows))]
    with write_session(engine) as session:
        add_task(session, "pref", target="sample", kind="pairwise", labels=["A", "B", "tie"])
    labels = [{"sample_id": f"p{i}", "annotator": "ana", "task": "pref", "value": "A", "order": ["B", "A"]} for i in range(7)]
    summaries.append(run("labels", write_jsonl(tmp_path / "l.jsonl", labels)))
    verdicts = [{"sample_id": f"p{i}", "judge": "ext", "task": "pref", "value_original": "A", "value_swapped": "B"}
                for i in range(7)]
    summaries.append(run("verdicts", write_jsonl(tmp_path / "v.jsonl", verdicts)))
    # Again, unchanged; then changed: a label without order keeps its order, verdicts flip, responses change.
    summaries += [run("labels", tmp_path / "l.jsonl"), run("verdicts", tmp_path / "v.jsonl")]
    relabel = [{**row, "value": "tie"} for row in labels[:3]]
    for row in relabel:
        del row["order"]
    summaries.append(run("labels", write_jsonl(tmp_path / "l2.jsonl", relabel)))
    summaries.append(run("verdicts", write_jsonl(tmp_path / "v2.jsonl", [{**row, "value_swapped": "A"} for row in verdicts])))
    changed = [{**row, "responses": [{"id": "A", "text": "new"}, {"id": "B", "text": row["responses"][1]["text"]}]}
               if row["id"] in ("p0", "p1") else row for row in rows]
    summaries.append(run("samples", write_jsonl(tmp_path / "s2.jsonl", changed), update=True))
    return [(s.added, s.updated, s.unchanged, s.flagged) for s in summaries]


def _contents(engine) -> list:
    """Return what the imports stored, without row ids or times."""
    with Session(engine) as session:
        def rows(sql):
            return sorted(map(tuple, session.connection().exec_driver_sql(sql).fetchall()))
        return [
            rows("SELECT s.external_id, r.position, r.key, r.text FROM response r JOIN sample s ON s.id = r.sample_id"),
            rows('SELECT s.external_id, l.value, l."order", l.stale, l.stale_reason FROM label l JOIN sample s ON s.id = l.sample_id'),
            rows("SELECT action, value, \"order\" FROM labelrevision"),
            rows('SELECT s.external_id, v.order_key, v.value, v."order" FROM verdict v JOIN sample s ON s.id = v.sample_id'),
            rows("SELECT s.external_id, v.order_key, v.value, v.stale_reason FROM staleverdict v "
                 "JOIN sample s ON s.id = v.sample_id"),
        ]


def test_pairwise_imports_in_one_record_chunks_store_exactly_what_one_transaction_stores(template_db, tmp_path):
    """Responses, labels with their order, verdicts in both orders, updates of each: the same rows either way."""
    import shutil

    from calibrate.db import dispose_engine, get_engine, write_session
    from calibrate.ingest import import_file

    results = []
    for mode in ("transaction", "chunks"):
        path = tmp_path / f"{mode}.sqlite"
        shutil.copyfile(template_db, path)
        url = f"sqlite:///{path}"
        engine = get_engine(url)
        folder = tmp_path / mode
        folder.mkdir()

        def run(kind, file, engine=engine, mode=mode, **kwargs):
            if mode == "chunks":
                return import_in_chunks(engine, kind, file, dataset="d", chunk_size=1, **kwargs)
            with write_session(engine) as session:
                return import_file(session, kind, file, dataset="d", **kwargs)

        try:
            summaries = _pairwise_flow(run, engine, folder)
            results.append((summaries, _contents(engine)))
            assert _count(engine, ImportBatch) == 0 and _count(engine, StagedLabel) == 0
        finally:
            dispose_engine(url)
    assert results[0] == results[1]
    summaries, (responses, labels, _revisions, verdicts, stale) = results[1]
    assert summaries[3][:3] == (0, 0, 7) and summaries[4][:3] == (0, 0, 14)  # the same files again: nothing changed
    assert summaries[5][:2] == (0, 3) and summaries[6][:2] == (0, 7) and summaries[7][1] == 2
    assert ("p0", 0, "A", "new") in responses and ("p2", 0, "A", "a2") in responses
    assert [row for row in labels if row[1] == "tie"][0][2] == '["B", "A"]'  # a line without order kept the order
    # p0's and p1's responses changed: their verdicts (both orders) judged other text, set aside as stale.
    assert len(verdicts) == 10 and sorted(row[:2] for row in stale) == [("p0", "0,1"), ("p0", "1,0"), ("p1", "0,1"), ("p1", "1,0")]
    assert all("changed in an --update import (responses)" in row[3] for row in stale)
