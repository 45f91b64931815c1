"""Samples with `steps` (an agent's trajectory): imported in order, refused naming line and field, exported the same,
replaced by an --update step by step (labels on a changed step flagged stale)."""

from __future__ import annotations

import json

import pytest
from ingest_helpers import run_import, write_jsonl
from sqlmodel import Session, select

from calibrate.accounts import add_user
from calibrate.bounds import MAX_STEP_TEXT
from calibrate.ingest import ImportRejected
from calibrate.ingest.samples_export import export_samples
from calibrate.models import Label, Sample, Step, Task, target_key

STEPS = [
    {"id": "root", "kind": "agent", "name": "prenatal-agent", "input": "I am 12 weeks, can I take ibuprofen?",
     "output": "Avoid ibuprofen; paracetamol is preferred.", "started_at": "2026-12-03T16:00:00Z", "duration_ms": 900},
    {"id": "llm-1", "parent": "root", "kind": "llm", "name": "plan", "input": "plan", "output": "call dose_check",
     "started_at": "2026-12-03T16:00:00.100Z"},
    {"id": "tool-1", "parent": "root", "kind": "tool", "name": "dose_check", "started_at": "2026-12-03T16:00:00.300Z",
     "tool": {"name": "dose_check", "arguments": {"drug": "ibuprofen", "weeks": 12}, "result": {"safe": False}},
     "status": "error"},
    {"id": "ret-1", "parent": "root", "kind": "retriever", "name": "guidelines", "output": "[...]",
     "started_at": "2026-12-03T16:00:00.500Z"},
]
RECORD = {"id": "s1", "question": "Can I take ibuprofen?", "answer": "Avoid ibuprofen.", "contexts": ["NSAIDs: avoid."],
          "steps": STEPS}


def _steps(engine, external_id="s1", active=True):
    with Session(engine) as session:
        sample = session.exec(select(Sample).where(Sample.external_id == external_id)).one()
        return list(session.exec(select(Step).where(Step.sample_id == sample.id, Step.active == active).order_by(Step.index)))


@pytest.mark.usefixtures("import_mode")
def test_steps_are_stored_in_order_and_exported_as_imported(engine, tmp_path):
    plain = {"id": "s2", "question": "Q?", "answer": "A.", "contexts": []}
    run_import(engine, "samples", write_jsonl(tmp_path / "in.jsonl", [RECORD, plain]))
    rows = _steps(engine)
    assert [(r.index, r.parent, r.kind, r.name, r.status) for r in rows] == [
        (0, None, "agent", "prenatal-agent", "ok"), (1, 0, "llm", "plan", "ok"), (2, 0, "tool", "dose_check", "error"),
        (3, 0, "retriever", "guidelines", "ok")]
    tool = rows[2]
    assert (tool.tool_name, tool.tool_arguments, tool.tool_result) == ("dose_check", {"drug": "ibuprofen", "weeks": 12},
                                                                      {"safe": False})
    assert rows[0].duration_ms == 900.0 and rows[1].turn is None
    with Session(engine) as session:
        exported = {row["id"]: row for row in export_samples(session, "d").rows}
    assert "steps" not in exported["s2"]
    assert [step["id"] for step in exported["s1"]["steps"]] == ["root", "llm-1", "tool-1", "ret-1"]
    assert exported["s1"]["steps"][2]["tool"]["arguments"] == {"drug": "ibuprofen", "weeks": 12}
    assert exported["s1"]["steps"][1]["started_at"] == "2026-12-03T16:00:00.100000Z"
    # Round trip: the exported file imports into another dataset as the same steps, and unchanged into this one.
    out = write_jsonl(tmp_path / "out.jsonl", list(exported.values()))
    again = run_import(engine, "samples", out)
    assert (again.added, again.updated, again.unchanged) == (0, 0, 2)
    run_import(engine, "samples", out, dataset="copy")
    with Session(engine) as session:
        assert {row["id"]: row for row in export_samples(session, "copy").rows} == exported


@pytest.mark.parametrize(("steps", "field"), [
    ([{"id": "a", "kind": "robot"}], "steps[0].kind"),
    ([{"id": "a", "kind": "llm"}, {"id": "b", "parent": "zzz", "kind": "tool"}], "steps[1].parent"),
    ([{"id": "a", "kind": "tool", "tool": {"arguments": {}}}], "steps[0].tool.name"),
    ("not a list", "steps"),
])
def test_a_bad_step_refuses_the_file_naming_line_and_field(engine, tmp_path, steps, field):
    path = write_jsonl(tmp_path / "bad.jsonl", [{**RECORD, "id": "ok"}, {**RECORD, "steps": steps}])
    with pytest.raises(ImportRejected) as caught:
        run_import(engine, "samples", path)
    problem = caught.value.problems[0]
    assert (problem.line, problem.field) == (2, field)
    with Session(engine) as session:
        assert session.exec(select(Sample)).first() is None and session.exec(select(Step)).first() is None


def test_steps_in_a_csv_cell_and_long_texts_cut_and_counted(engine, tmp_path):
    import csv

    long = dict(STEPS[1], output="x" * (MAX_STEP_TEXT + 5))
    path = tmp_path / "in.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "question", "answer", "contexts", "steps"])
        writer.writerow(["c1", "Q?", "A.", "[]", json.dumps([STEPS[0], long])])
    summary = run_import(engine, "samples", path)
    assert summary.cuts == {"step_texts_cut": 1}
    assert "1 step text cut to 10,000 characters" in summary.line()
    assert len(_steps(engine, "c1")[1].output) == MAX_STEP_TEXT


@pytest.mark.usefixtures("import_mode")
def test_an_update_retires_changed_steps_and_flags_their_labels(engine, tmp_path):
    run_import(engine, "samples", write_jsonl(tmp_path / "1.jsonl", [RECORD]))
    rows = _steps(engine)
    with Session(engine) as session:
        user = add_user(session, "ana", role="annotator", password="password-123")
        task = Task(name="step_ok", target="step", kind="categorical", labels=["correct", "incorrect"])
        session.add(task)
        session.flush()
        sample_id = rows[0].sample_id
        for row in rows[1:3]:
            session.add(Label(task_id=task.id, sample_id=sample_id, step_id=row.id, target_key=target_key("step", row.id),
                              annotator_id=user.id, value="correct"))
        session.commit()
    changed = [*STEPS[:2], dict(STEPS[2], tool={"name": "dose_check", "arguments": {"drug": "paracetamol"}, "result": 1})]
    summary = run_import(engine, "samples", write_jsonl(tmp_path / "2.jsonl", [{**RECORD, "steps": changed}]), update=True)
    assert summary.updated == 1
    active = _steps(engine)
    assert [r.id for r in active[:2]] == [r.id for r in rows[:2]]  # unchanged steps keep their rows (and labels)
    assert active[2].id != rows[2].id and active[2].tool_arguments == {"drug": "paracetamol"} and len(active) == 3
    assert {r.id for r in _steps(engine, active=False)} == {rows[2].id, rows[3].id}
    with Session(engine) as session:
        labels = {label.step_id: label for label in session.exec(select(Label))}
    assert not labels[rows[1].id].stale
    assert labels[rows[2].id].stale and "step 2 of sample 's1' changed" in labels[rows[2].id].stale_reason
