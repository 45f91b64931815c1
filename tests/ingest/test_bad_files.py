"""The bad-input corpus through the CLI: exit code 2, the line and field named, the database untouched."""

from __future__ import annotations

import json

import pytest
from ingest_helpers import BAD, GOOD, dump
from sqlmodel import Session, select

from calibrate.models import Context, Sample


@pytest.fixture
def loaded(runner):
    """A database that already holds dataset "d" (samples and labels), so "unchanged" means something."""
    for kind, file in (("samples", "samples.jsonl"), ("labels", "labels.jsonl")):
        result = runner.invoke(["import", kind, str(GOOD / file), "--dataset", "d"])
        assert result.exit_code == 0, result.output
    return runner


CASES = [
    # file, kind, extra arguments, what the output must say
    ("broken_json_line.jsonl", "samples", [], ["line 2: not valid JSON: Expecting ',' delimiter"]),
    ("missing_field.jsonl", "samples", [], ["line 2, field 'answer': is missing"]),
    ("wrong_types.jsonl", "samples", [],
     ["line 1, field 'contexts': must be a list of strings or of {text, doc_id} objects, found a string"]),
    ("unknown_task.jsonl", "labels", [],
     ["line 2, field 'task': unknown task 'helpfulness' (tasks: answer_quality, answer_relevancy, claim_support, "
      "context_precision, context_recall, context_relevance, faithfulness)"]),
    ("judge_only_tasks.jsonl", "labels", [],  # neither the extraction nor the instruction rewrite is labelled
     ["line 1, field 'task': task claim_extraction is an extraction: it has no labels",
      "line 2, field 'task': task instruction_rewrite is the instruction rewrite: it has no labels (`calibrate optimise` "
      "runs it; tasks: answer_quality,", "(2 problems in 2 of 2 records)"]),
    ("label_outside.jsonl", "labels", [],
     ["line 1, field 'value': value 'maybe' is not a label of task claim_support (supported, unsupported, not_applicable)"]),
    ("claim_out_of_range.jsonl", "labels", [],
     ["line 2, field 'claim': claim index 7 is out of range: sample 's1' has 2 claims (0–1)"]),
    ("context_out_of_range.jsonl", "labels", [],
     ["line 1, field 'context': context rank 0 is out of range: sample 's3' has no contexts"]),
    ("duplicate_ids.jsonl", "samples", [], ["line 3, field 'id': duplicate id 'd1': line 1 has it too"]),
    ("non_utf8.jsonl", "samples", [], ["line 2: not valid UTF-8 (byte 0xbf at byte 27 of the line)"]),
    ("empty.jsonl", "samples", [], ["file is empty: no records", "(1 problem)"]),
    ("missing_column.csv", "samples", [],
     ["line 1, field 'answer': the header has no column 'answer' (or its alias 'response')"]),
    ("not_a_list.json", "samples", [], ["line 1: the file must hold a JSON list of objects ([{...}, {...}]), found an object"]),
    ("broken_json_list.json", "samples", [], ["line 6: not valid JSON: Expecting value"]),
    ("bad_csv_row.csv", "samples", [], ["line 4: the row has 5 cells, the header has 4 columns"]),
    ("semicolons.csv", "samples", [],  # one hint, not a missing-column problem per column
     ["line 1: the header is one column, 'id;question;answer;contexts': the file looks separated by semicolons, "
      "and calibrate reads comma-separated CSV; save it with commas", "(1 problem)"]),
    ("unknown_field.jsonl", "samples", [], ["line 1, field 'faithfulness': unknown field (fields: answer, claim_source, "
      "claims, contexts, feedback, ground_truth, id, "
      "metadata, question, relevant_ids, responses, retrieved_ids, steps); put other data under 'metadata'"]),
    ("changed_sample.jsonl", "samples", [],
     ["line 2, field 'id': sample 's1' changed since it was imported (question, contexts); use --update to replace it"]),
    ("wrong_target.jsonl", "labels", [],
     ["line 1, field 'claim': is not allowed: task answer_quality judges the whole sample",
      "line 2, field 'claim': is missing: task claim_support judges each claim", "(2 problems in 2 of 2 records)"]),
    ("duplicate_labels.jsonl", "labels", [],
     ["line 2, field 'claim': duplicate: line 1 already gives a claim_support label on claim 0 of sample 's1' by annotator 'ana'"]),
    ("unknown_sample.jsonl", "labels", [], ["line 2, field 'sample_id': no sample 's99' in dataset 'd'"]),
    ("verdict_outside.jsonl", "verdicts", ["--judge", "gpt"],
     ["line 1, field 'value': value 'mostly supported' is not a label of task claim_support"]),
    ("judge_mismatch.jsonl", "verdicts", ["--judge", "gpt"], ["line 2, field 'judge': is 'claude' but --judge names 'gpt'"]),
    ("labels.jsonl", "labels", ["--dataset", "nope"], ["unknown dataset 'nope' (datasets: d): import its samples first"]),
]


@pytest.mark.parametrize(("file", "kind", "extra", "expected"), CASES, ids=[case[0] + ":" + case[1] for case in CASES])
def test_a_bad_file_is_rejected_whole_naming_line_and_field(loaded, db_url, file, kind, extra, expected):
    path = (GOOD if file == "labels.jsonl" else BAD) / file
    before = dump(db_url)
    args = ["import", kind, str(path), "--dataset", "d", *extra]
    result = loaded.invoke(args)
    assert result.exit_code == 2, result.output
    for text in expected:
        # A problem is printed as "FILE: line N, field 'F': message"; a summary ends the error line.
        shown = text if text.startswith("(") else f"{path}: {text}"
        assert shown in result.output, (shown, result.output)
    assert f"error: {path}: rejected, nothing imported (" in result.output
    assert dump(db_url) == before


def test_every_file_of_the_bad_corpus_is_in_the_table():
    tested = {case[0] for case in CASES} | {"formula_cells.csv"}
    assert {path.name for path in BAD.iterdir()} == tested - {"labels.jsonl"}


def test_a_ten_megabyte_field_is_rejected_with_its_size(loaded, db_url, tmp_path):
    path = tmp_path / "big.jsonl"
    rows = [{"id": "ok", "question": "Q?", "answer": "A.", "contexts": []},
            {"id": "big", "question": "Q?", "answer": "x" * 10_485_760, "contexts": []}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    before = dump(db_url)
    result = loaded.invoke(["import", "samples", str(path), "--dataset", "d"])
    assert result.exit_code == 2
    assert "line 2, field 'answer': 10,485,760 characters, the limit is 1,000,000" in result.output
    assert dump(db_url) == before


def test_formula_like_csv_cells_are_imported_as_plain_text(loaded, engine):
    result = loaded.invoke(["import", "samples", str(BAD / "formula_cells.csv"), "--dataset", "d"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "samples → d: 2 added, 0 updated, 0 unchanged, 0 rejected"
    with Session(engine) as session:
        f1 = session.exec(select(Sample).where(Sample.external_id == "f1")).one()
        assert f1.question == '=HYPERLINK("http://example.com/x","click")'
        assert f1.answer == "=1+1 is two, @SUM(A1:A3) is a sum"
        contexts = session.exec(select(Context.text).where(Context.sample_id == f1.id).order_by(Context.rank)).all()
        assert contexts == ["+44 20 7946 0000 is the helpline", "-5 °C is the storage limit"]
        f2 = session.exec(select(Sample).where(Sample.external_id == "f2")).one()
        assert (f2.question, f2.answer) == ("@mention the pharmacist?", "-2 doses a day, then stop.")


def test_reimport_through_the_cli_says_nothing_changed(loaded, db_url):
    before = dump(db_url)
    result = loaded.invoke(["import", "samples", str(GOOD / "samples.csv"), "--dataset", "d"])
    assert result.exit_code == 0
    assert result.output.strip() == "samples → d: nothing changed: every record was already imported (3 records)"
    assert dump(db_url) == before


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("levels", [100_000, 70])  # 100,000: json.loads raises RecursionError; 70: it parses
@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv"])
def test_deeply_nested_json_is_a_problem_of_its_line_and_field(loaded, db_url, tmp_path, fmt, levels):
    deep = '{"x": ' + _nested(levels) + "}"
    if fmt == "jsonl":
        path = tmp_path / "deep.jsonl"
        path.write_text('{"id": "n1", "question": "Q?", "answer": "A.", "contexts": []}\n'
                        '{"id": "n2", "question": "Q?", "answer": "A.", "contexts": [], "metadata": ' + deep + "}\n")
        line = 2
    elif fmt == "json":
        path = tmp_path / "deep.json"
        path.write_text('[\n{"id": "n1", "question": "Q?", "answer": "A.", "contexts": []},\n'
                        '{"id": "n2", "question": "Q?", "answer": "A.", "contexts": [], "metadata": ' + deep + "}\n]\n")
        line = 3
    else:
        path = tmp_path / "deep.csv"
        cell = deep.replace('"', '""')
        path.write_text(f'id,question,answer,contexts,metadata\nn1,Q?,A.,[],\nn2,Q?,A.,[],"{cell}"\n')
        line = 3
    before = dump(db_url)
    result = loaded.invoke(["import", "samples", str(path), "--dataset", "d"])
    assert result.exit_code == 2, result.output
    assert f"{path}: line {line}, field 'metadata': nesting deeper than 64 levels" in result.output
    assert "Traceback" not in result.output and "RecursionError" not in result.output
    assert dump(db_url) == before


def test_nesting_up_to_the_limit_is_imported(loaded, tmp_path):
    # The record is level 1, metadata level 2, its list levels 3 to 64.
    path = tmp_path / "nested.jsonl"
    path.write_text('{"id": "n1", "question": "Q?", "answer": "A.", "contexts": [], "metadata": {"x": ' + _nested(62) + "}}\n")
    result = loaded.invoke(["import", "samples", str(path), "--dataset", "d"])
    assert result.exit_code == 0, result.output
