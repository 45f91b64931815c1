"""Importing labels and verdicts: targets, upserts with revision history, null verdicts, judges, users."""

from __future__ import annotations

import json

import pytest
from ingest_helpers import GOOD, dump, run_import, write_jsonl
from sqlmodel import Session, select

from calibrate.db import write_session
from calibrate.ingest import ImportRejected
from calibrate.models import Claim, Context, Judge, Label, LabelRevision, Sample, Task, User, Verdict
from calibrate.tasks import add_task

# Every test runs twice: imports in one transaction, and in chunks (an import batch).
pytestmark = pytest.mark.usefixtures("import_mode")


@pytest.fixture
def dataset(engine):
    """Dataset "d" with the three good samples."""
    run_import(engine, "samples", GOOD / "samples.jsonl")
    return engine


def rejected(engine, kind, path, **kwargs) -> list[str]:
    with pytest.raises(ImportRejected) as info:
        run_import(engine, kind, path, **kwargs)
    return [str(p) for p in info.value.problems]


def test_labels_land_on_their_targets_with_a_create_revision(dataset):
    summary = run_import(dataset, "labels", GOOD / "labels.jsonl")
    assert summary.line() == "labels → d: 7 added, 0 updated, 0 unchanged, 0 rejected"
    with Session(dataset) as session:
        samples = {s.external_id: s.id for s in session.exec(select(Sample))}
        users = {u.id: u.username for u in session.exec(select(User))}
        tasks = {t.id: t.name for t in session.exec(select(Task))}
        labels = session.exec(select(Label).order_by(Label.id)).all()
        first = labels[0]
        claim = session.get(Claim, first.claim_id)
        assert (claim.sample_id, claim.index) == (samples["s1"], 0)
        assert first.target_key == f"claim:{claim.id}" and first.sample_id == samples["s1"]
        assert (first.context_id, first.source, first.adjudicated, first.stale) == (None, "import", False, False)
        assert first.guideline_version == 1  # the built-in task's current guideline
        assert labels[1].value == "supported"  # "Supported" in the file: the canonical label
        assert labels[1].rationale == "Leaflet says at least 4 hours."
        quality = [(users[label.annotator_id], label.value, label.target_key) for label in labels if tasks[label.task_id] == "answer_quality"]
        assert quality == [("ana", "5", f"sample:{samples['s1']}"), ("ana", "1", f"sample:{samples['2']}")]
        relevance = [label for label in labels if tasks[label.task_id] == "context_relevance"][0]
        context = session.get(Context, relevance.context_id)
        assert (context.sample_id, context.rank, relevance.claim_id) == (samples["s1"], 1, None)
        assert relevance.target_key == f"context:{context.id}"
        revisions = session.exec(select(LabelRevision).order_by(LabelRevision.id)).all()
        assert [(r.label_id, r.action, r.value, r.changed_by_id) for r in revisions] == [
            (label.id, "create", label.value, label.annotator_id) for label in labels]


def test_annotators_named_by_an_import_are_created_without_a_password(dataset):
    assert run_import(dataset, "labels", GOOD / "labels.jsonl").created_accounts == ["ana", "ben"]
    with Session(dataset) as session:
        users = session.exec(select(User).order_by(User.username)).all()
        assert [(u.username, u.role, u.password_hash, u.active) for u in users] == [
            ("ana", "annotator", None, True), ("ben", "annotator", None, True)]


def test_csv_labels_are_the_same_labels(dataset, db_url):
    run_import(dataset, "labels", GOOD / "labels.jsonl")
    before = dump(db_url)
    summary = run_import(dataset, "labels", GOOD / "labels.csv")
    assert (summary.added, summary.updated, summary.unchanged) == (0, 0, 7)
    assert summary.line() == "labels → d: nothing changed: every record was already imported (7 records)"
    assert dump(db_url) == before


def test_a_changed_label_is_updated_and_its_old_value_kept_in_the_history(dataset, tmp_path):
    run_import(dataset, "labels", GOOD / "labels.jsonl")
    rows = [
        {"sample_id": "s1", "annotator": "ana", "task": "claim_support", "claim": 0, "value": "unsupported",
         "rationale": "On second reading: 4 g is per 24 hours, not per day."},
        {"sample_id": "s1", "annotator": "ana", "task": "answer_quality", "value": 5},  # unchanged
        {"sample_id": "s3", "annotator": "cleo", "task": "answer_quality", "value": 4},  # new
    ]
    summary = run_import(dataset, "labels", write_jsonl(tmp_path / "l2.jsonl", rows))
    assert (summary.added, summary.updated, summary.unchanged) == (1, 1, 1)
    with Session(dataset) as session:
        label = session.exec(select(Label).order_by(Label.id)).first()
        assert (label.value, label.rationale) == ("unsupported", rows[0]["rationale"])
        history = session.exec(select(LabelRevision).where(LabelRevision.label_id == label.id)
                               .order_by(LabelRevision.id)).all()
        assert [(r.action, r.value, r.rationale) for r in history] == [
            ("create", "supported", ""), ("update", "supported", "")]  # an update keeps the OLD value
        assert len(session.exec(select(Label)).all()) == 8


def test_a_rationale_change_alone_is_an_update(dataset, tmp_path):
    row = {"sample_id": "s1", "annotator": "ana", "task": "answer_quality", "value": 4}
    run_import(dataset, "labels", write_jsonl(tmp_path / "a.jsonl", [row]))
    summary = run_import(dataset, "labels", write_jsonl(tmp_path / "b.jsonl", [row | {"rationale": "complete"}]))
    assert (summary.added, summary.updated) == (0, 1)


@pytest.mark.parametrize(("value", "stored"), [(4, "4"), ("4", "4"), (4.0, "4"), (3.5, "3.5"), ("3,5", "3.5")])
def test_ordinal_values_are_numbers_and_fractions_are_kept(dataset, tmp_path, value, stored):
    row = {"sample_id": "s1", "annotator": "ana", "task": "answer_quality", "value": value}
    run_import(dataset, "labels", write_jsonl(tmp_path / "a.jsonl", [row]))
    with Session(dataset) as session:
        assert session.exec(select(Label.value)).one() == stored


def test_categorical_values_may_be_numbers_compared_as_labels(dataset, tmp_path):
    with write_session(dataset) as session:
        add_task(session, "grade", target="sample", kind="categorical", labels=["0", "1", "2.5"])
    rows = [{"sample_id": sid, "annotator": "ana", "task": "grade", "value": value}
            for sid, value in (("s1", 1), ("2", "2.5"), ("s3", 0.0))]
    run_import(dataset, "labels", write_jsonl(tmp_path / "a.jsonl", rows))
    with Session(dataset) as session:
        assert session.exec(select(Label.value).order_by(Label.id)).all() == ["1", "2.5", "0"]
    bad = write_jsonl(tmp_path / "b.jsonl", [rows[0] | {"value": 3}])
    assert rejected(dataset, "labels", bad) == ["line 1, field 'value': value '3' is not a label of task grade (0, 1, 2.5)"]


@pytest.mark.parametrize(("row", "expected"), [
    ({"task": "answer_quality", "claim": 0, "value": 3},
     "field 'claim': is not allowed: task answer_quality judges the whole sample"),
    ({"task": "answer_quality", "context": 1, "value": 3},
     "field 'context': is not allowed: task answer_quality judges the whole sample"),
    ({"task": "claim_support", "value": "supported"},
     "field 'claim': is missing: task claim_support judges each claim, give its claim index (0-based, among the sample's claims)"),
    ({"task": "claim_support", "claim": 0, "context": 0, "value": "supported"},
     "field 'context': is not allowed: task claim_support judges claims"),
    ({"task": "context_relevance", "value": "relevant"}, "field 'context': is missing: task context_relevance judges each context"),
    ({"task": "claim_support", "claim": -1, "value": "supported"}, "field 'claim': must be a claim index (0, 1, 2, …), found -1"),
    ({"task": "claim_support", "claim": "first", "value": "supported"}, "field 'claim': must be a claim index (0, 1, 2, …), found a string"),
    ({"task": "answer_quality", "value": 9}, "field 'value': value 9 is outside the scale of task answer_quality (1–5)"),
    ({"task": "answer_quality", "value": "good"}, "field 'value': value must be a number for task answer_quality, got 'good'"),
    ({"task": "answer_quality", "value": None}, "field 'value': is missing"),
    ({"task": "answer_quality", "value": True}, "field 'value': value must be a number, got True"),
    ({"task": "answer_quality", "value": 3, "annotator": "a b"}, "field 'annotator': username 'a b' is not valid"),
    ({"task": "answer_quality", "value": 3, "annotator": None}, "field 'annotator': is missing"),
    ({"task": "answer_quality", "value": 3, "sample_id": "nope"}, "field 'sample_id': no sample 'nope' in dataset 'd'"),
    ({"task": "answer_quality", "value": 3, "judge": "x"}, "field 'judge': unknown field"),
])
def test_each_wrong_label_field_is_named_with_its_line(dataset, tmp_path, row, expected):
    base = {"sample_id": "s1", "annotator": "ana"}
    path = write_jsonl(tmp_path / "l.jsonl", [{**base, "task": "answer_quality", "value": 3}, {**base, **row}])
    problems = rejected(dataset, "labels", path)
    assert len(problems) == 1 and problems[0].startswith(f"line 2, {expected}"), problems


def test_labels_into_a_dataset_that_does_not_exist_name_the_ones_that_do(dataset):
    assert rejected(dataset, "labels", GOOD / "labels.jsonl", dataset="dd") == [
        "unknown dataset 'dd' (datasets: d): import its samples first"]


def test_claim_indices_count_the_samples_claims(dataset, tmp_path):
    rows = [{"sample_id": "2", "annotator": "ana", "task": "claim_support", "claim": i, "value": "supported"}
            for i in (0, 1, 2, 3)]
    assert rejected(dataset, "labels", write_jsonl(tmp_path / "l.jsonl", rows)) == [
        "line 3, field 'claim': claim index 2 is out of range: sample '2' has 2 claims (0–1)",
        "line 4, field 'claim': claim index 3 is out of range: sample '2' has 2 claims (0–1)",
    ]


def test_problems_of_both_passes_are_listed_in_line_order(dataset, tmp_path):
    rows = [
        {"sample_id": "s1", "annotator": "ana", "task": "claim_support", "claim": 5, "value": "supported"},
        {"sample_id": "s1", "annotator": "ana", "task": "claim_support", "claim": 0, "value": "perhaps"},
    ]
    assert [p[:25] for p in rejected(dataset, "labels", write_jsonl(tmp_path / "l.jsonl", rows))] == [
        "line 1, field 'claim': cl", "line 2, field 'value': va"]


# --------------------------------------------------------------------------- verdicts


def test_verdicts_record_values_and_calls_without_a_usable_verdict(dataset):
    summary = run_import(dataset, "verdicts", GOOD / "verdicts.jsonl", judge="gpt-4o-mini")
    assert (summary.kind, summary.added) == ("verdicts", 4)
    with Session(dataset) as session:
        judge = session.exec(select(Judge)).one()
        assert (judge.name, judge.kind, judge.prompt_version_id) == ("gpt-4o-mini", "imported", None)
        verdicts = session.exec(select(Verdict).order_by(Verdict.id)).all()
        assert [(v.value, v.status, v.reason, v.error) for v in verdicts] == [
            ("supported", "ok", "Context 0 gives 4 g.", ""),
            (None, "unparsed", "", ""),
            (None, "error", "", "HTTP 429 after 5 retries"),
            ("2.5", "ok", "", ""),  # a fractional score is kept
        ]
        assert all(v.judge_id == judge.id and v.source == "import" and v.run_id is None for v in verdicts)
        claim = session.get(Claim, verdicts[0].claim_id)
        assert verdicts[0].target_key == f"claim:{claim.id}" and claim.index == 0


def test_the_verdict_summary_says_how_many_values_were_null(dataset, runner):
    assert run_import(dataset, "verdicts", GOOD / "verdicts.jsonl", judge="gpt").line() == (
        "verdicts → d: 4 added, 0 updated, 0 unchanged, 0 rejected; 2 of the file's verdicts have no value "
        "(1 unparsed, 1 error): counted in reports as n_unparsed, never scored")
    result = runner.invoke(["import", "verdicts", str(GOOD / "verdicts.jsonl"), "--dataset", "d", "--judge", "other"])
    assert result.exit_code == 0 and "2 of the file's verdicts have no value (1 unparsed, 1 error)" in result.output


def test_verdicts_are_upserted_per_judge_task_and_target(dataset, db_url, tmp_path):
    run_import(dataset, "verdicts", GOOD / "verdicts.jsonl", judge="gpt")
    before = dump(db_url)
    assert run_import(dataset, "verdicts", GOOD / "verdicts.jsonl", judge="gpt").unchanged == 4
    assert dump(db_url) == before
    rows = [{"sample_id": "s1", "task": "claim_support", "claim": 1, "value": "unsupported", "latency_ms": 812.5,
             "input_tokens": 900, "output_tokens": 12, "raw": '{"verdict": "unsupported"}'}]
    summary = run_import(dataset, "verdicts", write_jsonl(tmp_path / "v.jsonl", rows), judge="gpt")
    assert (summary.added, summary.updated) == (0, 1)
    other = run_import(dataset, "verdicts", write_jsonl(tmp_path / "w.jsonl", [rows[0] | {"judge": "claude"}]))
    assert other.added == 1  # another judge: another verdict on the same target
    with Session(dataset) as session:
        updated = session.exec(select(Verdict).where(Verdict.value == "unsupported").order_by(Verdict.id)).first()
        assert (updated.status, updated.latency_ms, updated.input_tokens, updated.raw) == (
            "ok", 812.5, 900, '{"verdict": "unsupported"}')
        assert len(session.exec(select(Verdict)).all()) == 5
        assert sorted(session.exec(select(Judge.name)).all()) == ["claude", "gpt"]


def test_verdict_csv_with_an_empty_value_cell_is_an_unparsed_verdict(dataset, tmp_path):
    path = tmp_path / "v.csv"
    path.write_text("sample_id,task,value,reason,judge\ns1,answer_quality,,model said 'great',gpt\n2,answer_quality,4.5,,gpt\n")
    run_import(dataset, "verdicts", path)
    with Session(dataset) as session:
        verdicts = session.exec(select(Verdict).order_by(Verdict.id)).all()
        assert [(v.value, v.status, v.reason) for v in verdicts] == [(None, "unparsed", "model said 'great'"),
                                                                     ("4.5", "ok", "")]


@pytest.mark.parametrize(("row", "judge", "expected"), [
    ({"value": "mostly"}, "gpt", "line 1, field 'value': value 'mostly' is not a label of task claim_support "
                                 "(supported, unsupported, not_applicable) (a verdict with no usable value is written \"value\": null)"),
    ({"judge": "claude"}, "gpt", "line 1, field 'judge': is 'claude' but --judge names 'gpt'"),
    ({}, None, "line 1, field 'judge': is missing (or give --judge NAME for the whole file)"),
    ({"value": "supported", "error": "timeout"}, "gpt", "line 1, field 'error': is only for a verdict whose value is null"),
    ({"latency_ms": -3}, "gpt", "line 1, field 'latency_ms': must be a number of 0 or more, found -3"),
    ({"annotator": "ana"}, "gpt", "line 1, field 'annotator': unknown field"),
])
def test_each_wrong_verdict_field_is_named(dataset, tmp_path, row, judge, expected):
    base = {"sample_id": "s1", "task": "claim_support", "claim": 0, "value": None}
    problems = rejected(dataset, "verdicts", write_jsonl(tmp_path / "v.jsonl", [base | row]), judge=judge)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_a_verdict_line_without_value_is_a_problem_null_is_how_to_say_no_verdict(dataset, tmp_path):
    row = {"sample_id": "s1", "task": "answer_quality", "judge": "gpt"}
    assert rejected(dataset, "verdicts", write_jsonl(tmp_path / "v.jsonl", [row])) == [
        "line 1, field 'value': is missing (null records a judge call that gave no usable verdict)"]


def test_verdicts_cannot_be_imported_into_a_prompt_versions_judge(dataset, tmp_path):
    with write_session(dataset) as session:
        session.add(Judge(name="faithful@3", kind="prompt"))
    row = {"sample_id": "s1", "task": "answer_quality", "value": 3}
    problems = rejected(dataset, "verdicts", write_jsonl(tmp_path / "v.jsonl", [row]), judge="faithful@3")
    assert problems[0].startswith("line 1, field 'judge': 'faithful@3' is the judge of a prompt version")


def test_an_empty_judge_name_is_refused(dataset):
    assert rejected(dataset, "verdicts", GOOD / "verdicts.jsonl", judge=" ") == [
        "field 'judge': --judge must be a name of 1 to 200 characters"]


def test_the_cli_summary_names_the_accounts_it_created_and_how_to_set_a_password(dataset, runner, tmp_path):
    path = tmp_path / "crowd.jsonl"
    names = [f"worker{i:02d}" for i in range(12, 0, -1)] + ["ana"]  # ana exists: not created again
    assert runner.invoke(["users", "add", "ana", "--no-password"]).exit_code == 0
    path.write_text("\n".join(json.dumps({"sample_id": "s1", "annotator": name, "task": "claim_support", "claim": 0,
                                          "value": "supported"}) for name in names), encoding="utf-8")
    result = runner.invoke(["import", "labels", str(path), "--dataset", "d"])
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == (
        "created 12 annotator accounts without passwords: worker01, worker02, worker03, worker04, worker05, "
        "worker06, worker07, worker08, worker09, worker10, … (2 more) (set one with `calibrate users password NAME`)")
    again = runner.invoke(["import", "labels", str(path), "--dataset", "d"])
    assert again.exit_code == 0 and "created" not in again.output


def _queues(engine, rows):
    """Give (sample external id, annotator, stream) assignments on dataset d, the annotators created first."""
    from calibrate.accounts import ensure_annotator
    from calibrate.models import Assignment

    with write_session(engine) as session:
        samples = {s.external_id: s.id for s in session.exec(select(Sample))}
        for external, name, stream in rows:
            user = ensure_annotator(session, name)
            session.add(Assignment(sample_id=samples[external], user_id=user.id, stream=stream,
                                   audit_prob=0.5 if stream == "audit" else None))


def test_on_a_dataset_with_production_queues_the_summary_counts_the_labels_outside_the_audit(dataset):
    # ana is in the audit on s1 and ben in triage there; on sample 2 ben is in the audit and ana has no assignment:
    # ben's context label on s1 and ana's two labels on 2 are outside the audit (3 of the file's 7).
    _queues(dataset, [("s1", "ana", "audit"), ("s1", "ben", "triage"), ("2", "ben", "audit")])
    summary = run_import(dataset, "labels", GOOD / "labels.jsonl")
    assert summary.outside_audit == 3
    assert summary.line() == ("labels → d: 7 added, 0 updated, 0 unchanged, 0 rejected; 3 of the file's labels are outside "
                              "the audit stream (no audit assignment of their annotator on their sample): they never feed "
                              "an estimate")
    again = run_import(dataset, "labels", GOOD / "labels.jsonl")  # nothing changes, and the count still says where they are
    assert again.line().startswith("labels → d: nothing changed") and again.outside_audit == 3


def test_labels_all_in_the_audit_say_so_and_a_dataset_without_streams_says_nothing(dataset, tmp_path):
    _queues(dataset, [("s1", "ana", None)])  # `calibrate sample`'s assignment: no production queues yet
    first = run_import(dataset, "labels", write_jsonl(tmp_path / "one.jsonl", [
        {"sample_id": "s1", "annotator": "ana", "task": "answer_quality", "value": 4}]))
    assert first.outside_audit is None and first.line() == "labels → d: 1 added, 0 updated, 0 unchanged, 0 rejected"
    _queues(dataset, [("2", "ana", "audit")])
    second = run_import(dataset, "labels", write_jsonl(tmp_path / "two.jsonl", [
        {"sample_id": "2", "annotator": "ana", "task": "answer_quality", "value": 4}]))
    assert second.outside_audit == 0 and second.line().endswith("; every label is in the audit stream")
    third = run_import(dataset, "labels", write_jsonl(tmp_path / "three.jsonl", [
        {"sample_id": "s1", "annotator": "ana", "task": "answer_quality", "value": 3}]))
    assert third.outside_audit == 1 and "1 of the file's labels is outside the audit stream" in third.line()
    assert "it never feeds an estimate" in third.line()


def test_the_command_prints_the_labels_outside_the_audit(dataset, runner):
    _queues(dataset, [("s1", "ana", "audit")])
    out = runner.invoke(["import", "labels", str(GOOD / "labels.jsonl"), "--dataset", "d"])
    assert out.exit_code == 0, out.output
    assert "4 of the file's labels are outside the audit stream" in out.output
