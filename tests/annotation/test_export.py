"""`calibrate export labels`: the labels import format out again (a round trip), the archive
form with evidence and flags, spreadsheet-safe CSV, and bad input."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from hostile import XSS_ANSWER
from sqlmodel import select

from calibrate.models import Claim, Dataset, Label, Sample, User

GOOD = Path(__file__).resolve().parent.parent / "data" / "good"


def _load(runner, dataset="d"):
    for kind, name in (("samples", "samples.jsonl"), ("labels", "labels.jsonl")):
        out = runner.invoke(["import", kind, str(GOOD / name), "--dataset", dataset])
        assert out.exit_code == 0, out.output


def _export(runner, *args):
    out = runner.invoke(["export", "labels", *args])
    assert out.exit_code == 0, out.output
    return out


def _lines(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_export_then_import_elsewhere_gives_the_same_labels(runner, tmp_path):
    _load(runner)
    exported = tmp_path / "labels.jsonl"
    _export(runner, "--dataset", "d", "-o", str(exported))
    rows = _lines(exported.read_text(encoding="utf-8"))
    assert len(rows) == 7 and set(rows[0]) <= {"sample_id", "annotator", "task", "value", "claim", "context", "rationale"}
    # The same samples in a second dataset, then the exported file: exactly the same labels again.
    assert runner.invoke(["import", "samples", str(GOOD / "samples.jsonl"), "--dataset", "e"]).exit_code == 0
    out = runner.invoke(["import", "labels", str(exported), "--dataset", "e"])
    assert out.exit_code == 0 and "7 added" in out.output, out.output
    again = tmp_path / "again.jsonl"
    _export(runner, "--dataset", "e", "-o", str(again))
    assert again.read_text(encoding="utf-8") == exported.read_text(encoding="utf-8")
    # Importing the export into its own dataset changes nothing: the labels are identical.
    assert "nothing changed" in runner.invoke(["import", "labels", str(exported), "--dataset", "d"]).output


def test_values_are_canonical_and_targets_are_positions(runner):
    _load(runner)
    rows = _lines(_export(runner, "--dataset", "d").output)
    first = rows[0]
    assert first == {"sample_id": "s1", "annotator": "ana", "task": "claim_support", "value": "supported", "claim": 0}
    assert rows[1]["value"] == "supported" and rows[1]["rationale"] == "Leaflet says at least 4 hours."  # "Supported" stored canonical
    assert {r["task"] for r in _lines(_export(runner, "--dataset", "d", "--task", "answer_quality").output)} == {"answer_quality"}


def test_full_adds_evidence_and_flags_and_keeps_gold_and_stale(runner, session):
    _load(runner)
    session.rollback()
    label = session.exec(select(Label).where(Label.claim_id.is_not(None)).order_by(Label.id)).first()
    label.evidence = [0, {"context": 0, "sentence": 1, "start": 10, "end": 30, "text": "Una frase."}]
    decider = session.exec(select(User).where(User.username == "ana")).one()
    session.add(Label(task_id=label.task_id, sample_id=label.sample_id, claim_id=label.claim_id, target_key=label.target_key,
                      annotator_id=decider.id, value="unsupported", adjudicated=True, source="ui"))
    stale = session.exec(select(Label).where(Label.id != label.id).order_by(Label.id)).first()
    stale.stale = True
    session.commit()

    default = _export(runner, "--dataset", "d")
    assert len(_lines(default.output)) == 6
    assert "left out: 1 stale, 1 adjudicated; --full includes them" in default.output
    full = _lines(_export(runner, "--dataset", "d", "--full").output)
    assert len(full) == 8
    marked = [r for r in full if r["evidence"]]
    assert marked and marked[0]["evidence"][1]["text"] == "Una frase." and marked[0]["guideline_version"] is not None
    assert sum(r["adjudicated"] for r in full) == 1 and sum(r["stale"] for r in full) == 1
    assert all(r["created_at"] and r["source"] in ("import", "ui") for r in full)


def test_csv_is_spreadsheet_safe_and_jsonl_keeps_text_verbatim(runner, session):
    _load(runner)
    session.rollback()
    label = session.exec(select(Label).order_by(Label.id)).first()
    label.rationale = "=HYPERLINK(\"http://x\")" + XSS_ANSWER
    session.commit()
    table = list(csv.DictReader(io.StringIO(_export(runner, "--dataset", "d", "--format", "csv").output.split("exported")[0])))
    assert table[0]["rationale"].startswith("'=HYPERLINK") and table[0]["csv_escape"] == "'"
    assert _lines(_export(runner, "--dataset", "d").output)[0]["rationale"] == label.rationale  # data, not a page


def test_a_csv_export_round_trips_values_that_look_like_formulas(runner, session, tmp_path):
    """`= + - @` and a leading ' survive export and import exactly, while a spreadsheet sees text (issue 14, point 10)."""
    _load(runner)
    session.rollback()
    texts = ["=SUM(A1:A3)", "+44 20 7946 0000", "-2 doses", "@ana said so", "'quoted", "''twice", "-3"]
    labels = session.exec(select(Label).order_by(Label.id)).all()
    for label, text in zip(labels, texts, strict=False):
        label.rationale = text
    session.commit()
    exported = tmp_path / "labels.csv"
    _export(runner, "--dataset", "d", "--format", "csv", "-o", str(exported))
    table = list(csv.DictReader(io.StringIO(exported.read_text(encoding="utf-8"))))
    escaped = ["'=SUM(A1:A3)", "'+44 20 7946 0000", "'-2 doses", "'@ana said so", "''quoted", "'" + "''twice", "-3"]
    assert sorted(row["rationale"] for row in table) == sorted(escaped)
    assert {row["csv_escape"] for row in table} == {"'"}
    # Into another dataset with the same samples: the very same labels.
    assert runner.invoke(["import", "samples", str(GOOD / "samples.jsonl"), "--dataset", "e"]).exit_code == 0
    out = runner.invoke(["import", "labels", str(exported), "--dataset", "e"])
    assert out.exit_code == 0 and "7 added" in out.output, out.output
    session.rollback()
    e = session.exec(select(Dataset).where(Dataset.name == "e")).one()
    imported = session.exec(select(Label.rationale).join(Sample, Sample.id == Label.sample_id)
                            .where(Sample.dataset_id == e.id).order_by(Label.id)).all()
    assert sorted(imported) == sorted(texts)
    # And into its own dataset: nothing changed.
    assert "nothing changed" in runner.invoke(["import", "labels", str(exported), "--dataset", "d"]).output


def test_without_the_escape_column_a_csv_cell_is_read_as_it_is(runner, session, tmp_path):
    _load(runner)
    path = tmp_path / "hand.csv"
    path.write_text("sample_id,annotator,task,value,claim,rationale\ns1,zoe,claim_support,supported,0,'=kept as typed\n",
                    encoding="utf-8")
    assert runner.invoke(["import", "labels", str(path), "--dataset", "d"]).exit_code == 0
    session.rollback()
    assert session.exec(select(Label.rationale).join(User, User.id == Label.annotator_id)
                        .where(User.username == "zoe")).one() == "'=kept as typed"
    path.write_text("sample_id,annotator,task,value,claim,csv_escape\ns1,zoe,claim_support,supported,0,yes\n", encoding="utf-8")
    out = runner.invoke(["import", "labels", str(path), "--dataset", "d"])
    assert out.exit_code == 2 and "line 2, field 'csv_escape': must be ' or empty, got 'yes'" in out.output, out.output


def test_split_filter_and_bad_input(runner, session):
    _load(runner)
    session.rollback()
    s1 = session.exec(select(Sample).where(Sample.external_id == "s1")).one()
    s1.split = "dev"
    session.commit()
    rows = _lines(_export(runner, "--dataset", "d", "--split", "dev").output)
    assert rows and {r["sample_id"] for r in rows} == {"s1"}
    for args, message in ((["--dataset", "nope"], "unknown dataset 'nope' (datasets: d)"),
                          (["--dataset", "d", "--task", "helpfulness"], "unknown task 'helpfulness'"),
                          (["--dataset", "d", "--split", "test"], "no sample of d is in split 'test' (splits: dev)")):
        out = runner.invoke(["export", "labels", *args])
        assert out.exit_code == 2 and message in out.output, out.output
    assert session.exec(select(Dataset)).all() and session.exec(select(Claim)).all()
