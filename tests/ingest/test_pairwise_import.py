"""Pairwise samples, labels and verdicts: responses in both spellings, round trips, values checked per sample."""

from __future__ import annotations

import json

import pytest
from sqlmodel import Session, select

from calibrate.annotation.export import export_labels
from calibrate.db import write_session
from calibrate.ingest import ImportRejected, import_file
from calibrate.ingest.samples_export import export_samples
from calibrate.models import Dataset, Label, LabelRevision, Response, Sample, Verdict
from calibrate.tasks import add_task

RESPONSES = [
    {"id": "s1", "question": "¿Cuánto ácido fólico?", "responses": [
        {"id": "A", "text": "0,4 mg al día.", "model": "gpt-4o-mini", "metadata": {"system": "rag-v2"}},
        {"id": "B", "text": "4 mg al día."}]},
    {"id": "s2", "question": "¿Y el yodo?", "answer": "200 µg.", "contexts": ["Yoduro potásico 200 µg."], "responses": [
        {"id": 1, "text": "200 µg al día."}, {"id": 2, "text": "No hace falta."}, {"id": 3, "text": "<script>x</script>"}]},
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def stored(session, dataset="d"):
    """Return external id → [(key, text, model, metadata)] of a dataset's stored responses, in position order."""
    rows = session.exec(select(Sample.external_id, Response).join(Response, Response.sample_id == Sample.id)
                        .join(Dataset, Dataset.id == Sample.dataset_id).where(Dataset.name == dataset)
                        .order_by(Sample.external_id, Response.position)).all()
    out: dict[str, list] = {}
    for external_id, r in rows:
        out.setdefault(external_id, []).append((r.key, r.text, r.model, r.meta))
    return out


def test_jsonl_responses_are_stored_in_order_and_a_reimport_changes_nothing(engine, tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", RESPONSES)
    with write_session(engine) as session:
        assert import_file(session, "samples", path, dataset="d").added == 2
    with Session(engine) as session:
        got = stored(session)
        assert got["s1"] == [("A", "0,4 mg al día.", "gpt-4o-mini", {"system": "rag-v2"}), ("B", "4 mg al día.", "", None)]
        assert [key for key, *_ in got["s2"]] == ["1", "2", "3"]  # integer ids stored as their text
        s1 = session.exec(select(Sample).where(Sample.external_id == "s1")).one()
        assert s1.answer == ""  # answer and contexts are optional beside responses
    with write_session(engine) as session:
        summary = import_file(session, "samples", path, dataset="d")
    assert (summary.added, summary.updated, summary.unchanged) == (0, 0, 2)


def test_csv_response_columns_take_the_suffix_as_the_id(engine, tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("id,question,response_1,response_2,response_1_model,response_2_metadata\n"
                    'c1,Q?,uno,dos,m1,"{""k"": 2}"\n'
                    "c2,Q2?,x,y,,\n", encoding="utf-8")
    with write_session(engine) as session:
        import_file(session, "samples", path, dataset="d")
    with Session(engine) as session:
        got = stored(session)
    assert got["c1"] == [("1", "uno", "m1", None), ("2", "dos", "", {"k": 2})]
    assert got["c2"] == [("1", "x", "", None), ("2", "y", "", None)]


def test_export_samples_carries_responses_and_imports_again_as_the_same_samples(engine, tmp_path):
    with write_session(engine) as session:
        import_file(session, "samples", write_jsonl(tmp_path / "s.jsonl", RESPONSES), dataset="d")
    with Session(engine) as session:
        exported = export_samples(session, "d")
    first = exported.rows[0]
    assert "answer" not in first  # a pairwise sample without an answer has none in the file
    assert first["responses"] == [{"id": "A", "text": "0,4 mg al día.", "model": "gpt-4o-mini", "metadata": {"system": "rag-v2"}},
                                  {"id": "B", "text": "4 mg al día."}]
    with write_session(engine) as session:  # the export imports into the same dataset as nothing new
        summary = import_file(session, "samples", write_jsonl(tmp_path / "out.jsonl", exported.rows), dataset="d")
        assert (summary.added, summary.updated) == (0, 0)
        summary = import_file(session, "samples", tmp_path / "out.jsonl", dataset="copy")
    assert summary.added == 2
    with Session(engine) as session:
        assert stored(session, "copy") == stored(session, "d") and len(stored(session, "d")["s2"]) == 3
        again = export_samples(session, "copy")
    assert again.rows == exported.rows  # exporting the copy gives the same file


def test_an_update_that_changes_responses_replaces_them_and_flags_the_labels_stale(engine, tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", RESPONSES)
    with write_session(engine) as session:
        import_file(session, "samples", path, dataset="d")
        add_task(session, "pref", target="sample", kind="pairwise", labels=["A", "B", "tie"])
    labels = write_jsonl(tmp_path / "l.jsonl", [{"sample_id": "s1", "annotator": "ann", "task": "pref", "value": "A"}])
    with write_session(engine) as session:
        import_file(session, "labels", labels, dataset="d")
    changed = [dict(RESPONSES[0], responses=[{"id": "A", "text": "0,4 mg."}, {"id": "B", "text": "4 mg."}]), RESPONSES[1]]
    with write_session(engine) as session, pytest.raises(ImportRejected, match="responses"):
        import_file(session, "samples", write_jsonl(tmp_path / "c.jsonl", changed), dataset="d")
    with write_session(engine) as session:
        summary = import_file(session, "samples", tmp_path / "c.jsonl", dataset="d", update=True)
    assert (summary.updated, summary.flagged) == (1, 1)
    with Session(engine) as session:
        assert stored(session)["s1"] == [("A", "0,4 mg.", "", None), ("B", "4 mg.", "", None)]
        label = session.exec(select(Label)).one()
        assert label.stale and "responses" in label.stale_reason
        assert session.exec(select(LabelRevision).where(LabelRevision.action == "stale")).one().value == "A"


BAD_SAMPLES = [
    ({"id": "b", "question": "Q", "responses": [{"id": "A", "text": "x"}, {"id": "a", "text": "y"}]},
     "line 1, field 'responses[1].id': duplicate id 'a'"),
    ({"id": "b", "question": "Q", "responses": [{"id": "A", "text": "x"}]},
     "line 1, field 'responses': a sample with responses needs at least two, found 1"),
    ({"id": "b", "question": "Q", "responses": [{"id": "A", "text": "x"}, {"id": "B"}]},
     "line 1, field 'responses[1].text': the response's text is missing"),
    ({"id": "b", "question": "Q", "responses": [{"id": "A", "text": "x"}, {"id": "B", "text": 3}]},
     "line 1, field 'responses[1].text': the response's text must be a string, found a number"),
    ({"id": "b", "question": "Q", "responses": [{"id": "Tie", "text": "x"}, {"id": "B", "text": "y"}]},
     "line 1, field 'responses[0].id': 'Tie' cannot be a response id"),
    ({"id": "b", "question": "Q", "responses": [{"id": " A", "text": "x"}, {"id": "B", "text": "y"}]},
     "line 1, field 'responses[0].id': the id starts or ends with spaces"),
    ({"id": "b", "question": "Q", "responses": [{"id": "A" * 65, "text": "x"}, {"id": "B", "text": "y"}]},
     "line 1, field 'responses[0].id': the id is 65 characters, the limit is 64"),
    ({"id": "b", "question": "Q", "responses": [{"id": "A", "text": "x", "score": 1}, {"id": "B", "text": "y"}]},
     "line 1, field 'responses[0].score': unknown key (keys: id, text, model, metadata)"),
    ({"id": "b", "question": "Q", "responses": [{"id": str(i), "text": "x"} for i in range(10)]},
     "line 1, field 'responses': 10 responses, the limit is 9"),
    ({"id": "b", "question": "Q", "response_a": "x", "response_b": "y", "responses": []},
     "line 1, field 'response_a': give the responses either as 'responses' or as response_<id> fields, not both"),
    ({"id": "b", "question": "Q", "response_a": "x", "response_b_model": "m"},
     "line 1, field 'response_b_model': names a part of response 'b'"),
    ({"id": "b", "question": "Q"}, "line 1, field 'answer': is missing"),
]


@pytest.mark.parametrize(("record", "message"), BAD_SAMPLES, ids=[m.split(": ", 1)[1][:40] for _, m in BAD_SAMPLES])
def test_bad_responses_reject_the_file_naming_line_and_field(engine, tmp_path, record, message):
    path = write_jsonl(tmp_path / "bad.jsonl", [record])
    with write_session(engine) as session, pytest.raises(ImportRejected) as info:
        import_file(session, "samples", path, dataset="d")
    assert any(str(p).startswith(message) for p in info.value.problems), info.value.details()
    with Session(engine) as session:
        assert session.exec(select(Response)).all() == [] and session.exec(select(Sample)).all() == []


def test_an_empty_response_is_kept_when_given_as_text(engine, tmp_path):
    """A system that answered nothing is a real candidate (PandaLM has 54 such items): "" is its text."""
    path = write_jsonl(tmp_path / "e.jsonl", [{"id": "e", "question": "Q", "response_1": "", "response_2": "y"}])
    with write_session(engine) as session:
        import_file(session, "samples", path, dataset="d")
    with Session(engine) as session:
        assert stored(session)["e"] == [("1", "", "", None), ("2", "y", "", None)]


def test_a_csv_header_with_a_model_column_but_no_response_is_refused(engine, tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("id,question,response_a,response_b,response_c_model\nc1,Q,x,y,m\n", encoding="utf-8")
    with write_session(engine) as session, pytest.raises(ImportRejected) as info:
        import_file(session, "samples", path, dataset="d")
    assert str(info.value.problems[0]) == ("line 1, field 'response_c_model': names the model of response 'c', but no column "
                                           "response_c holds its text")


@pytest.fixture
def pairwise(engine, tmp_path):
    with write_session(engine) as session:
        import_file(session, "samples", write_jsonl(tmp_path / "s.jsonl", RESPONSES), dataset="d")
        add_task(session, "pref", target="sample", kind="pairwise", labels=["A", "B", "1", "2", "3", "tie"])
    return tmp_path


def test_labels_with_orders_round_trip_through_export_and_import(engine, pairwise):
    rows = [{"sample_id": "s1", "annotator": "ann", "task": "pref", "value": "B", "order": ["B", "A"], "rationale": "r"},
            {"sample_id": "s2", "annotator": "ann", "task": "pref", "value": "tie", "order": "swapped"},
            {"sample_id": "s2", "annotator": "bob", "task": "pref", "value": "2"}]
    with write_session(engine) as session:
        import_file(session, "labels", write_jsonl(pairwise / "l.jsonl", rows), dataset="d")
    with Session(engine) as session:
        exported = export_labels(session, "d")
    assert exported.rows == [
        {"sample_id": "s1", "annotator": "ann", "task": "pref", "value": "B", "rationale": "r", "order": ["B", "A"]},
        {"sample_id": "s2", "annotator": "ann", "task": "pref", "value": "tie", "order": ["3", "2", "1"]},
        {"sample_id": "s2", "annotator": "bob", "task": "pref", "value": "2"},
    ]
    # Importing the export again changes nothing: the order is part of what a label is.
    with write_session(engine) as session:
        summary = import_file(session, "labels", write_jsonl(pairwise / "again.jsonl", exported.rows), dataset="d")
    assert (summary.added, summary.updated, summary.unchanged) == (0, 0, 3)


@pytest.mark.parametrize(("kind", "row", "message"), [
    ("labels", {"sample_id": "s1", "annotator": "ann", "task": "pref", "value": "1"},
     "line 1, field 'value': value '1' is not a response of this sample (responses: A, B; or tie)"),
    ("labels", {"sample_id": "s1", "annotator": "ann", "task": "pref", "value": "C"},
     "line 1, field 'value': value 'C' is not a label of task pref"),
    ("labels", {"sample_id": "s1", "annotator": "ann", "task": "pref", "value": "A", "order": ["A", "C"]},
     "line 1, field 'order': 'C' is not a response of this sample (responses: A, B)"),
    ("labels", {"sample_id": "s1", "annotator": "ann", "task": "pref", "value": "A", "order": ["A", "A"]},
     "line 1, field 'order': must list each of the sample's 2 responses once"),
    ("labels", {"sample_id": "s1", "annotator": "ann", "task": "answer_quality", "value": 3, "order": ["A", "B"]},
     "line 1, field 'order': is for pairwise tasks"),
    ("verdicts", {"sample_id": "s2", "judge": "j", "task": "pref", "value": "A"},
     "line 1, field 'value': value 'A' is not a response of this sample (responses: 1, 2, 3; or tie)"),
    ("verdicts", {"sample_id": "s1", "judge": "j", "task": "pref", "value_original": "A", "value_swapped": "2"},
     "line 1, field 'value_swapped': value '2' is not a response of this sample"),
    ("verdicts", {"sample_id": "s1", "judge": "j", "task": "pref", "value": "A", "value_original": "A"},
     "line 1, field 'value': give either 'value' (with 'order') or 'value_original', not both"),
])
def test_a_value_naming_a_response_the_sample_does_not_have_rejects_the_file(engine, pairwise, kind, row, message):
    good = ({"sample_id": "s1", "annotator": "ok", "task": "pref", "value": "A"} if kind == "labels"
            else {"sample_id": "s1", "judge": "j", "task": "pref", "value": "A"})
    path = write_jsonl(pairwise / "bad.jsonl", [row, good])
    with write_session(engine) as session, pytest.raises(ImportRejected) as info:
        import_file(session, kind, path, dataset="d")
    assert any(str(p).startswith(message) for p in info.value.problems), info.value.details()
    with Session(engine) as session:  # the whole file is rejected: its good line is not written either
        assert session.exec(select(Label)).all() == [] and session.exec(select(Verdict)).all() == []


def test_verdicts_in_both_orders_one_line_each_or_one_line_for_both(engine, pairwise):
    rows = [{"sample_id": "s1", "judge": "j", "task": "pref", "value": "A", "order": ["B", "A"], "reason": "first"},
            {"sample_id": "s1", "judge": "j", "task": "pref", "value": "B"},  # no order: the original one
            {"sample_id": "s2", "judge": "k", "task": "pref", "value_original": "1", "value_swapped": None}]
    with write_session(engine) as session:
        summary = import_file(session, "verdicts", write_jsonl(pairwise / "v.jsonl", rows), dataset="d")
    assert (summary.added, summary.no_value) == (4, 1)
    with Session(engine) as session:
        got = sorted(((v.target_key, v.value, v.order, v.order_key, v.status) for v in session.exec(select(Verdict))),
                     key=lambda row: (row[0], row[3]))
    s1, s2 = "sample:1", "sample:2"
    assert got == [(s1, "B", ["A", "B"], "0,1", "ok"), (s1, "A", ["B", "A"], "1,0", "ok"),
                   (s2, "1", ["1", "2", "3"], "0,1,2", "ok"), (s2, None, ["3", "2", "1"], "2,1,0", "unparsed")]
    # CSV: the same two-order columns; an empty cell is a verdict that gave nothing usable
    path = pairwise / "v.csv"
    path.write_text("sample_id,judge,task,value_original,value_swapped\ns1,c,pref,A,\n", encoding="utf-8")
    with write_session(engine) as session:
        assert import_file(session, "verdicts", path, dataset="d").no_value == 1


def test_the_same_order_twice_is_a_duplicate(engine, pairwise):
    rows = [{"sample_id": "s1", "judge": "j", "task": "pref", "value": "A", "order": "original"},
            {"sample_id": "s1", "judge": "j", "task": "pref", "value": "B", "order": ["A", "B"]}]
    with write_session(engine) as session, pytest.raises(ImportRejected) as info:
        import_file(session, "verdicts", write_jsonl(pairwise / "v.jsonl", rows), dataset="d")
    assert str(info.value.problems[0]).startswith("line 2, field 'sample_id': duplicate: line 1 already gives")


def test_a_csv_export_of_pairwise_samples_imports_again(runner, engine, tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("id,question,response_a,response_b,response_a_model\n"
                    'c1,"Q, quoted?","uno, dos","tres ""cuatro""",m1\n', encoding="utf-8")
    assert runner.invoke(["import", "samples", str(path), "--dataset", "d"]).exit_code == 0
    out = tmp_path / "out.csv"
    result = runner.invoke(["export", "samples", "--dataset", "d", "--format", "csv", "-o", str(out)])
    assert result.exit_code == 0, result.output
    again = runner.invoke(["import", "samples", str(out), "--dataset", "copy"])
    assert again.exit_code == 0 and "1 added" in again.output, again.output
    with Session(engine) as session:
        assert stored(session, "copy") == stored(session, "d") == {
            "c1": [("a", "uno, dos", "m1", None), ("b", 'tres "cuatro"', "", None)]}
