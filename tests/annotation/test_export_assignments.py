"""`calibrate export assignments`: who was given which sample in which stream, with the audit's probability and
whether the expert has labelled it — JSONL and CSV read back, the stream filter, `labelled` following the labels,
the order across chunks, an empty dataset and the refusals."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

import pytest
from sqlmodel import select

from calibrate.annotation import export
from calibrate.annotation.labels import resolve_target, save_label
from calibrate.ingest.readers import ESCAPE_COLUMN, unescape_cell
from calibrate.models import Assignment, Label

WHEN = datetime(2026, 11, 10, 8, 30, tzinfo=UTC)


@pytest.fixture
def queues(work, session):
    """s1: ana and ben in the audit (π 0.25); =cmd: ben in triage; s3: ana by `calibrate sample` and an open slot;
    s4: nobody. Returns (work, {name: sample}, {name: user})."""
    users = {name: work.user(name) for name in ("ben", "ana")}
    samples = {name: work.sample(name) for name in ("s1", "=cmd", "s3", "s4")}
    rows = [("s1", "ben", "audit", 0.25), ("s1", "ana", "audit", 0.25), ("=cmd", "ben", "triage", None),
            ("s3", None, None, None), ("s3", "ana", None, None)]
    for i, (sample, user, stream, prob) in enumerate(rows):
        session.add(Assignment(sample_id=samples[sample].id, user_id=users[user].id if user else None, stream=stream,
                               audit_prob=prob, status="pending", created_at=WHEN.replace(minute=30 + i)))
    session.commit()
    return work, samples, users


def _export(runner, *args):
    out = runner.invoke(["export", "assignments", "--dataset", "d", *args])
    assert out.exit_code == 0, out.output
    return out


def _jsonl(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _csv(text):
    """Return the CSV's rows as the JSONL gives them: the ' taken off where csv_escape says, types read back."""
    rows = []
    for row in csv.DictReader(io.StringIO(text)):
        escaped = row.pop(ESCAPE_COLUMN) == "'"
        cells = {name: unescape_cell(cell) if escaped else cell for name, cell in row.items()}
        rows.append({"sample_id": cells["sample_id"], "annotator": cells["annotator"] or None,
                     "task": json.loads(cells["task"]), "stream": cells["stream"] or None,
                     "audit_prob": float(cells["audit_prob"]) if cells["audit_prob"] else None,
                     "status": cells["status"], "created_at": cells["created_at"],
                     "labelled": {"true": True, "false": False}[cells["labelled"]]})
    return rows


def _label(work, session, sample, user, assignment_user=None):
    assignment = session.exec(select(Assignment).where(Assignment.sample_id == sample.id,
                                                       Assignment.user_id == (assignment_user or user).id)).one()
    claim = work.claims(sample)[0]
    return save_label(session, assignment, user, resolve_target(session, assignment, "claim_support", f"claim:{claim.id}"),
                      value="supported")


def test_jsonl_has_one_row_per_assignment_in_a_stated_order(queues, runner):
    out = _export(runner)
    rows = _jsonl(out.output)
    assert [(r["sample_id"], r["annotator"], r["stream"]) for r in rows] == [
        ("s1", "ana", "audit"), ("s1", "ben", "audit"), ("=cmd", "ben", "triage"), ("s3", "ana", None), ("s3", None, None)]
    assert list(rows[0]) == list(export.ASSIGNMENT_FIELDS)
    assert rows[0] == {"sample_id": "s1", "annotator": "ana", "task": [], "stream": "audit", "audit_prob": 0.25,
                       "status": "pending", "created_at": "2026-11-10T08:31:00+00:00", "labelled": False}
    assert [r["audit_prob"] for r in rows] == [0.25, 0.25, None, None, None]
    assert all(datetime.fromisoformat(r["created_at"]).utcoffset().total_seconds() == 0 for r in rows)
    assert "exported 5 assignments of d (2 audit, 1 triage, 2 none; 0 labelled)" in out.output


def test_csv_reads_back_as_the_jsonl_and_a_formula_like_id_is_escaped(queues, runner, tmp_path):
    as_jsonl = _jsonl(_export(runner).output)
    written = tmp_path / "assignments.csv"  # the format from the extension
    out = _export(runner, "-o", str(written))
    assert f"wrote 5 assignments to {written}" in out.output and not list(tmp_path.glob("*.part"))
    text = written.read_text(encoding="utf-8")
    assert text.splitlines()[0] == ",".join((*export.ASSIGNMENT_FIELDS, ESCAPE_COLUMN))
    assert "\n'=cmd,ben,[],triage,," in text  # a spreadsheet shows the id as text
    assert _csv(text) == as_jsonl
    assert _csv(_export(runner, "--format", "csv").output.split("exported")[0]) == as_jsonl


def test_the_stream_filter(queues, runner):
    audit = _jsonl(_export(runner, "--stream", "audit").output)
    assert [(r["sample_id"], r["annotator"]) for r in audit] == [("s1", "ana"), ("s1", "ben")]
    triage = _export(runner, "--stream", "triage")
    assert [r["sample_id"] for r in _jsonl(triage.output)] == ["=cmd"]
    assert "exported 1 assignments of d in the triage stream (1 triage; 0 labelled)" in triage.output


def test_labelled_flips_when_the_expert_saves_a_label_and_only_for_her(queues, session, runner):
    work, samples, users = queues
    _label(work, session, samples["s1"], users["ana"])
    session.commit()
    rows = {(r["sample_id"], r["annotator"]): r for r in _jsonl(_export(runner).output)}
    assert rows[("s1", "ana")]["labelled"] is True and rows[("s1", "ana")]["task"] == ["claim_support"]
    assert rows[("s1", "ben")]["labelled"] is False and rows[("s1", "ben")]["task"] == []
    assert rows[("s3", None)]["labelled"] is False  # an open slot has no expert to have labelled


def test_stale_and_adjudicated_labels_do_not_count_as_labelled(queues, session, runner):
    work, samples, users = queues
    label = session.get(Label, _label(work, session, samples["s1"], users["ben"]).id)
    label.stale = True  # its claim changed under it
    decided = Label(task_id=label.task_id, sample_id=label.sample_id, claim_id=label.claim_id, target_key=label.target_key,
                    annotator_id=users["ana"].id, value="unsupported", adjudicated=True, source="ui")
    session.add_all([label, decided])
    session.commit()
    rows = {(r["sample_id"], r["annotator"]): r["labelled"] for r in _jsonl(_export(runner).output)}
    assert rows[("s1", "ben")] is False and rows[("s1", "ana")] is False


def test_the_rows_are_the_same_read_one_sample_at_a_time(queues, session, monkeypatch):
    whole = list(export.export_assignments(session, "d").rows())
    monkeypatch.setattr(export, "SAMPLES_PER_CHUNK", 1)
    result = export.export_assignments(session, "d")
    rows = result.rows()
    assert next(rows) == whole[0] and result.n_rows == 1  # a generator: read as it is asked for
    assert [whole[0], *rows] == whole and result.n_rows == 5


def test_an_empty_dataset_writes_no_rows_and_csv_only_its_header(work, runner):
    work.sample("s1")
    assert _jsonl(_export(runner).output) == []
    assert "exported 0 assignments of d" in _export(runner).output
    header = _export(runner, "--format", "csv").output.splitlines()[0]
    assert header == ",".join((*export.ASSIGNMENT_FIELDS, ESCAPE_COLUMN))


@pytest.mark.parametrize(("args", "message"), [
    (["--dataset", "nope"], "error: unknown dataset 'nope' (datasets: d)"),
    (["--dataset", "d", "--stream", "audits"], "error: unknown stream 'audits' (streams: audit, triage)"),
    (["--dataset", "d", "--format", "jsonl", "-o", "x.csv"], "--format jsonl contradicts the extension of 'x.csv'"),
])
def test_refusals_are_one_line_and_exit_2(work, runner, args, message):
    work.sample("s1")
    out = runner.invoke(["export", "assignments", *args])
    assert out.exit_code == 2 and message in out.output
    if message.startswith("error:"):
        assert out.output.strip().splitlines() == [message]


def test_an_unwritable_output_is_one_line_and_leaves_nothing(queues, runner, tmp_path):
    out = runner.invoke(["export", "assignments", "--dataset", "d", "-o", str(tmp_path / "missing" / "a.jsonl")])
    assert out.exit_code == 2 and out.output.startswith("error: cannot write") and len(out.output.strip().splitlines()) == 1
    assert not list(tmp_path.rglob("*.part"))
