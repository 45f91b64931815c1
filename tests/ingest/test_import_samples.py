"""Importing samples: formats, aliases, claims, idempotency, --update and its stale labels."""

from __future__ import annotations

import json

import pytest
from ingest_helpers import GOOD, dump, run_import, write_jsonl
from sqlmodel import Session, select

from calibrate.ingest import ImportRejected, import_file
from calibrate.models import Claim, Context, Dataset, Label, LabelRevision, Sample
from calibrate.text.sentences import segment

# Every test runs twice: imports in one transaction, and in chunks (an import batch).
pytestmark = pytest.mark.usefixtures("import_mode")


def good_rows() -> list[dict]:
    return [json.loads(line) for line in (GOOD / "samples.jsonl").read_text(encoding="utf-8").splitlines()]


def dataset_rows(engine, name: str) -> list[tuple]:
    """Everything stored for a dataset's samples, without ids and timestamps."""
    with Session(engine) as session:
        ds = session.exec(select(Dataset).where(Dataset.name == name)).one()
        out = []
        for s in session.exec(select(Sample).where(Sample.dataset_id == ds.id).order_by(Sample.external_id)):
            contexts = session.exec(select(Context).where(Context.sample_id == s.id).order_by(Context.id)).all()
            claims = session.exec(select(Claim).where(Claim.sample_id == s.id).order_by(Claim.id)).all()
            out.append((s.external_id, s.question, s.answer, s.ground_truth, s.meta, s.feedback, s.retrieved_ids,
                        s.relevant_ids, s.content_hash, s.segmenter,
                        [(c.rank, c.text, c.doc_id, c.active) for c in contexts],
                        [(c.index, c.text, c.start, c.end, c.active) for c in claims]))
        return out


def test_every_format_and_the_ragas_names_give_the_same_rows(engine):
    files = {"jsonl": "samples.jsonl", "json": "samples.json", "csv": "samples.csv", "ragas": "samples_ragas.jsonl"}
    for name, file in files.items():
        summary = run_import(engine, "samples", GOOD / file, dataset=name)
        assert (summary.added, summary.updated, summary.unchanged) == (3, 0, 0)
    reference = dataset_rows(engine, "jsonl")
    assert len(reference) == 3
    for name in ("json", "csv", "ragas"):
        assert dataset_rows(engine, name) == reference, name


def test_samples_are_stored_as_given_in_a_new_dataset(engine):
    summary = run_import(engine, "samples", GOOD / "samples.jsonl", description="Pharmacy answers, week 12")
    assert summary.line() == "samples → d: 3 added, 0 updated, 0 unchanged, 0 rejected"
    with Session(engine) as session:
        ds = session.exec(select(Dataset)).one()
        assert (ds.name, ds.source, ds.description, ds.is_demo) == ("d", "samples.jsonl", "Pharmacy answers, week 12", False)
        by_id = {s.external_id: s for s in session.exec(select(Sample))}
        assert sorted(by_id) == ["2", "s1", "s3"]  # an integer id is stored as its text
        s1 = by_id["s1"]
        assert s1.ground_truth == "4 g in 24 hours."
        assert s1.meta == {"topic": "dosing", "model": "a"}
        assert (s1.feedback, s1.retrieved_ids, s1.relevant_ids) == (1, ["leaflet-3", "leaflet-12"], ["leaflet-3"])
        assert len(s1.content_hash) == 64 and s1.split is None
        contexts = session.exec(select(Context).where(Context.sample_id == s1.id).order_by(Context.rank)).all()
        assert [(c.rank, c.doc_id, c.active) for c in contexts] == [(0, None, True), (1, "leaflet-12", True)]
        assert contexts[1].text == "Leave at least 4 hours between doses."
        assert (by_id["2"].ground_truth, by_id["2"].retrieved_ids, by_id["s3"].feedback) == (None, None, 0)
        assert session.exec(select(Context).where(Context.sample_id == by_id["s3"].id)).all() == []


def test_explicit_claims_are_located_and_missing_claims_are_segmented(engine, tmp_path):
    rows = good_rows() + [{"id": "none", "question": "Hello?", "answer": "Hello!", "contexts": [], "claims": []}]
    run_import(engine, "samples", write_jsonl(tmp_path / "s.jsonl", rows))
    with Session(engine) as session:
        by_id = {s.external_id: s for s in session.exec(select(Sample))}

        def claims(external_id):
            return session.exec(select(Claim).where(Claim.sample_id == by_id[external_id].id).order_by(Claim.index)).all()

        given = by_id["2"]
        assert given.segmenter == "given"
        assert [(c.index, c.text, c.start, c.end) for c in claims("2")] == [
            (0, "Ibuprofen is safe throughout pregnancy.", 0, 39),
            (1, "Consult a midwife.", -1, -1),  # not a substring of the answer
        ]
        s1 = by_id["s1"]
        assert s1.segmenter == "sentence-v1"
        expected = segment(s1.answer)
        assert len(expected) == 2
        assert [(c.text, c.start, c.end) for c in claims("s1")] == [(e.text, e.start, e.end) for e in expected]
        assert all(s1.answer[c.start:c.end] == c.text for c in claims("s1"))
        assert (by_id["none"].segmenter, claims("none")) == ("given", [])


def test_reimporting_the_same_file_writes_nothing(engine, db_url):
    run_import(engine, "samples", GOOD / "samples.jsonl")
    before = dump(db_url)
    for file in ("samples.jsonl", "samples.csv", "samples.json"):
        summary = run_import(engine, "samples", GOOD / file)
        assert (summary.added, summary.updated, summary.unchanged) == (0, 0, 3)
        assert summary.line() == "samples → d: nothing changed: every record was already imported (3 records)"
    assert dump(db_url) == before


def test_a_changed_sample_is_refused_without_update_naming_what_changed(engine, db_url, tmp_path):
    run_import(engine, "samples", GOOD / "samples.jsonl")
    before = dump(db_url)
    rows = good_rows()
    rows[0]["question"] = "What is the highest daily dose of paracetamol?"
    rows[0]["contexts"] = rows[0]["contexts"][:1]
    rows.append({"id": "new", "question": "Q?", "answer": "A.", "contexts": []})
    with pytest.raises(ImportRejected) as info:
        run_import(engine, "samples", write_jsonl(tmp_path / "changed.jsonl", rows))
    assert [str(p) for p in info.value.problems] == [
        "line 1, field 'id': sample 's1' changed since it was imported (question, contexts); use --update to replace it"]
    assert dump(db_url) == before  # not even the new sample


def _label_everything(engine):
    run_import(engine, "samples", GOOD / "samples.jsonl")
    run_import(engine, "labels", GOOD / "labels.jsonl")


def test_update_replaces_changed_targets_and_flags_their_labels_without_deleting_any(engine, tmp_path):
    _label_everything(engine)
    with Session(engine) as session:
        old_claims = {(c.sample_id, c.index): c.id for c in session.exec(select(Claim))}
    rows = good_rows()
    rows[0]["answer"] = "The maximum dose for adults is 4 g per day. Doses should be spaced at least 6 hours apart."
    rows[0]["contexts"] = rows[0]["contexts"][:1]  # drops the context ben labelled
    rows[1]["metadata"] = {"topic": "pregnancy", "model": "c"}  # sample 2: only metadata
    path = write_jsonl(tmp_path / "v2.jsonl", rows)
    summary = run_import(engine, "samples", path, update=True)
    assert (summary.added, summary.updated, summary.unchanged, summary.flagged) == (0, 2, 1, 3)
    assert summary.line() == "samples → d: 0 added, 2 updated, 1 unchanged, 0 rejected, 3 labels flagged stale"
    with Session(engine) as session:
        s1 = session.exec(select(Sample).where(Sample.external_id == "s1")).one()
        assert s1.answer.endswith("6 hours apart.")
        claims = session.exec(select(Claim).where(Claim.sample_id == s1.id).order_by(Claim.id)).all()
        assert [(c.index, c.active) for c in claims] == [(0, True), (1, False), (1, True)]
        assert claims[0].id == old_claims[(s1.id, 0)]  # unchanged text: the same row, its labels stay valid
        assert claims[2].text == "Doses should be spaced at least 6 hours apart."
        contexts = session.exec(select(Context).where(Context.sample_id == s1.id).order_by(Context.rank)).all()
        assert [(c.rank, c.active) for c in contexts] == [(0, True), (1, False)]
        labels = session.exec(select(Label).order_by(Label.id)).all()
        assert len(labels) == 7  # none deleted
        stale = {(label.target_key.split(":")[0], label.value): label.stale_reason for label in labels if label.stale}
        assert stale == {
            ("claim", "supported"): "claim 1 of sample 's1' changed in an --update import",
            ("context", "relevant"): "context at rank 1 of sample 's1' was removed by an --update import",
            ("sample", "5"): "sample 's1' changed in an --update import (answer, contexts)",
        }
        revisions = session.exec(select(LabelRevision).where(LabelRevision.action == "stale")).all()
        assert sorted((r.label_id, r.value) for r in revisions) == sorted(
            (label.id, label.value) for label in labels if label.stale)
        assert all(r.changed_by_id is None for r in revisions)
    # The updated file is now the stored state: importing it again changes nothing.
    again = run_import(engine, "samples", path, update=True)
    assert (again.updated, again.unchanged, again.flagged) == (0, 3, 0)


def test_labels_import_onto_the_claims_an_update_added(engine, tmp_path):
    _label_everything(engine)
    rows = good_rows()
    rows[0]["answer"] = "The maximum dose for adults is 4 g per day. Doses should be spaced at least 6 hours apart."
    run_import(engine, "samples", write_jsonl(tmp_path / "v2.jsonl", rows), update=True)
    labels = write_jsonl(tmp_path / "l.jsonl", [
        {"sample_id": "s1", "annotator": "ana", "task": "claim_support", "claim": 1, "value": "unsupported"}])
    summary = run_import(engine, "labels", labels)
    assert summary.added == 1  # a label on the new claim 1, beside the stale one on the retired claim
    with Session(engine) as session:
        new = session.exec(select(Label).where(Label.value == "unsupported", Label.sample_id == 1)).one()
        claim = session.get(Claim, new.claim_id)
        assert claim.active and claim.text.endswith("6 hours apart.")


def test_ragas_name_and_its_alias_together_are_a_problem(engine, tmp_path):
    row = {"id": "a", "question": "Q?", "user_input": "Q2?", "answer": "A.", "contexts": []}
    with pytest.raises(ImportRejected) as info:
        run_import(engine, "samples", write_jsonl(tmp_path / "a.jsonl", [row]))
    assert str(info.value.problems[0]) == "line 1, field 'user_input': both 'question' and its alias 'user_input' are given: keep one"


def test_an_alias_is_named_as_the_file_spells_it(engine, tmp_path):
    row = {"id": "a", "user_input": "Q?", "response": "", "retrieved_contexts": []}
    with pytest.raises(ImportRejected) as info:
        run_import(engine, "samples", write_jsonl(tmp_path / "a.jsonl", [row]))
    assert str(info.value.problems[0]) == "line 1, field 'response': must not be empty"


OK = {"id": "a", "question": "Q?", "answer": "A.", "contexts": []}


@pytest.mark.parametrize(("change", "expected"), [
    ({"id": True}, "field 'id': must be a string or an integer, found true/false"),
    ({"id": "  "}, "field 'id': must not be empty"),
    ({"question": 3}, "field 'question': must be a string, found a number"),
    ({"question": None}, "field 'question': is missing"),
    ({"answer": " \n"}, "field 'answer': must not be empty"),
    ({"contexts": None}, "field 'contexts': is missing (a list of strings or of {text, doc_id} objects; [] for none)"),
    ({"contexts": ["ok", 1]}, "field 'contexts': must be a list of strings or of {text, doc_id} objects; context at rank 1 is a number"),
    ({"contexts": [{"text": "t", "url": "u"}]}, "field 'contexts': context at rank 0 has unknown key 'url' (keys: text, doc_id)"),
    ({"contexts": [{"doc_id": "d"}]}, "field 'contexts': context at rank 0 has no 'text'"),
    ({"contexts": [{"text": "t", "doc_id": []}]}, "field 'contexts': context at rank 0: doc_id must be a string, found a list"),
    ({"contexts": ["", "b"]}, "field 'contexts': context at rank 0 must not be empty"),
    ({"claims": "one claim"}, "field 'claims': must be a list of strings or of {text, start, end} objects, found a string"),
    ({"claims": ["a", None]}, "field 'claims': must be a list of strings or of {text, start, end} objects, not a mix; "
                              "claim 1 is null"),
    ({"claims": [{"text": "A", "start": 0, "end": 1}, "b"]}, "field 'claims': must be a list of strings or of "
                                                             "{text, start, end} objects, not a mix; claim 1 is a string"),
    ({"claims": [{"text": "A", "span": 1}]}, "field 'claims': claim 0 has unknown key 'span' (keys: text, start, end)"),
    ({"claims": [{"start": 0, "end": 1}]}, "field 'claims': claim 0 needs a 'text' string, found null"),
    ({"claims": [{"text": "A", "start": "0", "end": 1}]},
     "field 'claims': claim 0: start and end must be whole numbers (-1 for a claim not in the answer)"),
    ({"claims": [{"text": "A", "start": 0, "end": 999}]}, "field 'claims': claim 0: span [0, 999) is outside the answer"),
    ({"claims": [{"text": "Zz", "start": 0, "end": 2}]},
     "field 'claims': claim 0: the answer's characters 0–2 are not the claim's text"),
    ({"claim_source": ["x"]}, "field 'claim_source': must be a string, found a list"),
    ({"metadata": ["x"]}, "field 'metadata': must be an object ({...}), found a list"),
    ({"feedback": 2}, "field 'feedback': must be one of -1, 0, 1, found 2"),
    ({"feedback": "bad"}, "field 'feedback': must be -1, 0 or 1, found a string"),
    ({"retrieved_ids": [1.5]}, "field 'retrieved_ids': must be a list of strings; item 0 is a number"),
    ({"relevant_ids": "doc-1"}, "field 'relevant_ids': must be a list of strings, found a string"),
    ({"ground_truth": ["x"]}, "field 'ground_truth': must be a string, found a list"),
    ({"answer": "A \ud800"}, "field 'answer': contains an unpaired surrogate escape"),
    ({"score": 0.9}, "field 'score': unknown field (fields: answer, claim_source, claims, contexts, feedback, ground_truth, id, "
                     "metadata, question, relevant_ids, responses, retrieved_ids, steps); put other data under 'metadata'"),
])
def test_each_wrong_field_is_named_with_its_line(engine, tmp_path, change, expected):
    path = write_jsonl(tmp_path / "s.jsonl", [OK | {"id": "first"}, OK | change])
    with pytest.raises(ImportRejected) as info:
        run_import(engine, "samples", path)
    assert len(info.value.problems) == 1
    assert str(info.value.problems[0]).startswith(f"line 2, {expected}")


def test_fields_over_the_limit_are_named_with_their_size(engine, tmp_path):
    rows = [OK | {"answer": "a" * 61}, OK | {"id": "b", "contexts": ["c" * 51]}]
    with pytest.raises(ImportRejected) as info:
        run_import(engine, "samples", write_jsonl(tmp_path / "s.jsonl", rows), max_field_chars=50)
    assert [str(p) for p in info.value.problems] == [
        "line 1, field 'answer': 61 characters, the limit is 50",
        "line 2, field 'contexts': context at rank 0: 51 characters, the limit is 50",
    ]


def test_problems_stop_at_max_errors(engine, tmp_path):
    rows = [{"id": str(i), "question": "Q?", "contexts": []} for i in range(30)]
    with pytest.raises(ImportRejected) as info:
        run_import(engine, "samples", write_jsonl(tmp_path / "s.jsonl", rows), max_errors=5)
    assert [p.line for p in info.value.problems] == [1, 2, 3, 4, 5]
    assert info.value.truncated
    assert info.value.summary() == "more than 5 problems in 5 of the first 6 records"


def test_the_summary_counts_problems_and_the_records_they_are_in(engine, tmp_path):
    rows = [OK | {"id": "a", "question": 1, "answer": 2}, OK | {"id": "b"}, OK | {"id": "c", "feedback": 9}]
    with pytest.raises(ImportRejected) as info:
        run_import(engine, "samples", write_jsonl(tmp_path / "s.jsonl", rows))
    assert info.value.summary() == "3 problems in 2 of 3 records"
    assert not info.value.truncated


def test_progress_is_called_with_the_rows_processed(engine, tmp_path):
    rows = [OK | {"id": str(i)} for i in range(2500)]
    calls = []
    run_import(engine, "samples", write_jsonl(tmp_path / "s.jsonl", rows), progress=calls.append)
    assert sum(calls) == 5000 and max(calls) <= 1000  # each row once per pass, in steps


def test_a_rejected_import_leaves_nothing_even_when_the_caller_commits(engine, db_url, tmp_path):
    run_import(engine, "samples", GOOD / "samples.jsonl")
    before = dump(db_url)
    # More rows than one write batch, so some were written before the bad last line is reached.
    rows = [{"sample_id": sample, "annotator": f"new{i}", "task": "answer_quality", "value": 3}
            for i in range(700) for sample in ("s1", "2", "s3")]
    rows.append({"sample_id": "s1", "annotator": "late", "task": "claim_support", "claim": 9, "value": "supported"})
    with Session(engine) as session:
        with pytest.raises(ImportRejected, match="claim index 9 is out of range"):
            import_file(session, "labels", write_jsonl(tmp_path / "l.jsonl", rows), dataset="d")
        session.commit()  # a careless caller: the import's own savepoint was rolled back already
    assert dump(db_url) == before


def test_a_bom_and_crlf_file_from_windows_imports(engine, tmp_path):
    path = tmp_path / "s.csv"
    path.write_bytes(b"\xef\xbb\xbfid,question,answer,contexts\r\n1,\xc2\xbfQu\xc3\xa9?,S\xc3\xad.,[]\r\n")
    assert run_import(engine, "samples", path).added == 1
    with Session(engine) as session:
        assert session.exec(select(Sample.question)).one() == "¿Qué?"


def test_a_missing_file_or_an_unknown_extension_is_refused(engine, tmp_path):
    with pytest.raises(ImportRejected, match="no such file"):
        run_import(engine, "samples", tmp_path / "nope.jsonl")
    (tmp_path / "s.txt").write_text(json.dumps(OK) + "\n")
    with pytest.raises(ImportRejected, match="cannot tell the format of 's.txt'"):
        run_import(engine, "samples", tmp_path / "s.txt")
    assert run_import(engine, "samples", tmp_path / "s.txt", fmt="jsonl").added == 1


def test_the_import_holds_one_record_at_a_time(engine, tmp_path, monkeypatch):
    """Neither pass keeps the records it has read: at most the current and the previous are alive."""
    import weakref

    from calibrate.ingest import samples as samples_module
    from calibrate.ingest.readers import read_records

    class Fields(dict):
        """A dict that can be weakly referenced."""

    alive: list[weakref.ref] = []
    most = 0

    def tracked(*args, **kwargs):
        nonlocal alive, most
        for record in read_records(*args, **kwargs):
            record.fields = Fields(record.fields)
            alive = [ref for ref in alive if ref() is not None] + [weakref.ref(record.fields)]
            most = max(most, len(alive))
            yield record

    monkeypatch.setattr(samples_module, "read_records", tracked)
    rows = [OK | {"id": str(i), "contexts": ["c"] * 5} for i in range(3000)]
    summary = run_import(engine, "samples", write_jsonl(tmp_path / "s.jsonl", rows))
    assert summary.added == 3000
    assert most <= 2
