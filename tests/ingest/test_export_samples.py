"""`calibrate export samples`: the samples with their current claims and claim source, importable again unchanged."""

from __future__ import annotations

import json

import pytest
from hostile import XSS_ANSWER, XSS_QUESTION
from sqlmodel import select

from calibrate.accounts import add_user
from calibrate.annotation.claim_edits import split_claim
from calibrate.claimsets import replace_claims, verbatim_spans
from calibrate.models import Claim, Sample

RECORDS = [
    {"id": "plain", "question": "¿Ácido fólico?", "answer": "Tome 0,4 mg al día. Consulte a su médico.",
     "contexts": ["Se recomiendan 0,4 mg.", {"text": "Desde antes de la concepción.", "doc_id": "guia-7"}],
     "ground_truth": "0,4 mg al día.", "metadata": {"system": "A", "n": 3}, "feedback": -1,
     "retrieved_ids": ["guia-7", "x"], "relevant_ids": ["guia-7"]},
    {"id": "given", "question": "Q, \"quoted\"", "answer": "Uno.  Dos,\nen dos líneas.", "contexts": [],
     "claims": ["Uno.", "Dos, en dos líneas.", "No está en la respuesta."]},
    {"id": "=HYPERLINK(\"x\")", "question": XSS_QUESTION, "answer": XSS_ANSWER, "contexts": ["- lista", "@a"]},
    {"id": "empty", "question": "?", "answer": "…", "contexts": [], "claims": []},
]


@pytest.fixture
def source(tmp_path, runner, session):
    """Dataset `src`: imported, then one answer re-extracted (NAME@V) and one claim split by an expert."""
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in RECORDS), encoding="utf-8")
    assert runner.invoke(["import", "samples", str(path), "--dataset", "src"]).exit_code == 0
    plain = session.exec(select(Sample).where(Sample.external_id == "plain")).one()
    replace_claims(session, plain, verbatim_spans(plain.answer, ["Tome 0,4 mg al día.", "Consulte a su médico", "Reescrita."]),
                   source="ex@2", origin="ex@2", reason="test")
    given = session.exec(select(Sample).where(Sample.external_id == "given")).one()
    first = session.exec(select(Claim).where(Claim.sample_id == given.id, Claim.index == 0, Claim.active)).one()
    split_claim(session, given, add_user(session, "ana", password="password-123"), first.id, 2)
    session.commit()
    return "src"


def _state(session, dataset):
    """Return each sample's claim source and claims (index, text, start, end), by sample id."""
    session.commit()
    session.expire_all()
    out = {}
    from calibrate.models import Dataset

    ds = session.exec(select(Dataset).where(Dataset.name == dataset)).one()
    for sample in session.exec(select(Sample).where(Sample.dataset_id == ds.id)):
        claims = session.exec(select(Claim).where(Claim.sample_id == sample.id, Claim.active).order_by(Claim.index)).all()
        out[sample.external_id] = (sample.claim_source, [(c.index, c.text, c.start, c.end) for c in claims],
                                   sample.question, sample.answer, sample.meta, sample.feedback, sample.retrieved_ids)
    return out


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_export_import_export_gives_the_same_file_and_the_same_claims(runner, session, source, tmp_path, fmt):
    first, second = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
    result = runner.invoke(["export", "samples", "--dataset", "src", "-o", str(first), "--format", fmt])
    assert result.exit_code == 0, result.output
    assert "exported 4 samples of src with 8 claims (2 not found verbatim in their answer)" in result.stderr
    imported = runner.invoke(["import", "samples", str(first), "--dataset", "copy"])
    assert imported.exit_code == 0, imported.output
    assert runner.invoke(["export", "samples", "--dataset", "copy", "-o", str(second), "--format", fmt]).exit_code == 0
    assert second.read_bytes() == first.read_bytes()
    assert _state(session, "copy") == _state(session, "src")
    assert _state(session, "copy")["plain"][0] == "ex@2" and _state(session, "copy")["given"][0] == "import+edited"
    # Imported again into the dataset it came from, the file changes nothing.
    again = runner.invoke(["import", "samples", str(first), "--dataset", "src"])
    assert again.exit_code == 0 and "nothing changed" in again.output


def test_the_jsonl_record_carries_claims_with_spans_and_their_source(runner, source, tmp_path):
    path = tmp_path / "out.jsonl"
    runner.invoke(["export", "samples", "--dataset", "src", "-o", str(path)])
    rows = {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}
    assert rows["plain"]["claims"] == [{"text": "Tome 0,4 mg al día.", "start": 0, "end": 19},
                                       {"text": "Consulte a su médico", "start": 20, "end": 40},
                                       {"text": "Reescrita.", "start": -1, "end": -1}]
    assert rows["plain"]["claim_source"] == "ex@2" and rows["plain"]["feedback"] == -1
    assert rows["plain"]["contexts"] == ["Se recomiendan 0,4 mg.", {"text": "Desde antes de la concepción.", "doc_id": "guia-7"}]
    assert list(rows["plain"]) == ["id", "question", "answer", "contexts", "ground_truth", "claims", "claim_source", "metadata",
                                   "feedback", "retrieved_ids", "relevant_ids"]
    assert list(rows["empty"]) == ["id", "question", "answer", "contexts", "claims", "claim_source"]
    assert rows["empty"]["claims"] == [] and rows["given"]["claims"][0] == {"text": "Un", "start": 0, "end": 2}


def test_split_filters_and_bad_input_is_one_line(runner, session, source, tmp_path):
    plain = session.exec(select(Sample).where(Sample.external_id == "plain")).one()
    plain.split = "dev"
    session.add(plain)
    session.commit()
    path = tmp_path / "dev.jsonl"
    assert runner.invoke(["export", "samples", "--dataset", "src", "--split", "dev", "-o", str(path)]).exit_code == 0
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == ["plain"]
    for args, line in ((["--dataset", "nope"], "error: unknown dataset 'nope' (datasets: src)"),
                       (["--dataset", "src", "--split", "test"], "error: no sample of src is in split 'test' (splits: dev)")):
        result = runner.invoke(["export", "samples", *args, "-o", str(tmp_path / "x.jsonl")])
        assert result.exit_code == 2 and result.stderr.strip() == line, result.stderr
    assert not (tmp_path / "x.jsonl").exists()


def test_a_span_that_does_not_mark_the_claim_is_exported_without_one(runner, session, source, tmp_path):
    claim = session.exec(select(Claim).join(Sample).where(Sample.external_id == "plain", Claim.index == 0, Claim.active)).one()
    claim.start, claim.end = 3, 9  # written by hand: not the claim's text
    session.add(claim)
    session.commit()
    path = tmp_path / "out.jsonl"
    runner.invoke(["export", "samples", "--dataset", "src", "-o", str(path)])
    rows = {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}
    assert rows["plain"]["claims"][0] == {"text": "Tome 0,4 mg al día.", "start": -1, "end": -1}
    assert runner.invoke(["import", "samples", str(path), "--dataset", "copy"]).exit_code == 0


def test_an_update_keeps_an_extractions_claims_unless_the_answer_changed(runner, session, source, tmp_path):
    before = _state(session, "src")["plain"]
    changed = [dict(RECORDS[0], metadata={"system": "B"})]
    path = tmp_path / "meta.jsonl"
    path.write_text(json.dumps(changed[0], ensure_ascii=False) + "\n", encoding="utf-8")
    assert runner.invoke(["import", "samples", str(path), "--dataset", "src", "--update"]).exit_code == 0
    after = _state(session, "src")["plain"]
    assert after[:2] == before[:2] and after[4] == {"system": "B"}  # ex@2's claims stay
    path.write_text(json.dumps(dict(RECORDS[0], answer="Tome 0,4 mg. Otra frase."), ensure_ascii=False) + "\n", encoding="utf-8")
    assert runner.invoke(["import", "samples", str(path), "--dataset", "src", "--update"]).exit_code == 0
    source_now, claims = _state(session, "src")["plain"][:2]
    assert source_now == "segmenter" and [c[1] for c in claims] == ["Tome 0,4 mg.", "Otra frase."]
