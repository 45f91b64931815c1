"""TREC run and qrels import: ranking order, relevance, query-id mapping, counts, and all-or-nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ingest_helpers import dump, run_import
from sqlmodel import Session, select

from calibrate.ingest import ImportRejected
from calibrate.models import Sample

SAMPLES = [
    {"id": "s1", "question": "Folic acid?", "answer": "0.4 mg.", "contexts": [], "metadata": {"query_id": "q1", "system": "a"}},
    {"id": "s2", "question": "Folic acid?", "answer": "4 mg.", "contexts": [], "metadata": {"query_id": "q1", "system": "b"}},
    {"id": "s3", "question": "Iron?", "answer": "Only if anaemic.", "contexts": [], "metadata": {"query_id": 2, "system": "a"}},
    {"id": "s4", "question": "Caffeine?", "answer": "Under 200 mg.", "contexts": [], "metadata": {"system": "a"}},
]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def stored(engine, column):
    with Session(engine) as session:
        return {s.external_id: getattr(s, column) for s in session.exec(select(Sample))}


@pytest.fixture
def dataset(engine, tmp_path):
    path = write(tmp_path / "samples.jsonl", "".join(json.dumps(s) + "\n" for s in SAMPLES))
    run_import(engine, "samples", path)
    return engine


RUN = """q1 Q0 d7 3 0.2 bm25
q1 Q0 d3 1 0.9 bm25
q1 Q0 d5 2 0.5 bm25
q1 Q0 d9 2 0.7 bm25
2 Q0 x1 1 1.0 bm25
s4\tQ0\tc1\t1\t3.5\tbm25

q404 Q0 z 1 1 bm25
"""


def test_run_sets_rankings_by_rank_then_score_and_counts_the_rest(dataset, tmp_path):
    summary = run_import(dataset, "run", write(tmp_path / "bm25.run", RUN))
    ids = stored(dataset, "retrieved_ids")
    assert ids["s1"] == ["d3", "d9", "d5", "d7"]  # rank 2 twice: the higher score first
    assert ids["s2"] == ids["s1"]                  # both systems' samples share q1
    assert ids["s3"] == ["x1"]                     # metadata.query_id 2 matches "2"
    assert ids["s4"] == ["c1"]                     # no query_id: named by the sample id
    assert (summary.changed, summary.unchanged, summary.unmatched, summary.n_shared) == (4, 0, ["q404"], 1)
    line = summary.line()
    assert line.startswith("run → d: 4 queries, 7 lines; rankings set on 4 samples (4 changed, 0 unchanged)")
    assert "1 query ids match no sample (q404)" in line and "1 query ids name several samples" in line
    again = run_import(dataset, "run", tmp_path / "bm25.run")
    assert (again.changed, again.unchanged) == (0, 4)


def test_where_keeps_one_systems_samples_and_counts_samples_without_ids(dataset, tmp_path):
    summary = run_import(dataset, "run", write(tmp_path / "a.run", "q1 Q0 d1 1 1 sys-a\n"), where="metadata.system=b")
    ids = stored(dataset, "retrieved_ids")
    assert ids["s2"] == ["d1"] and ids["s1"] is None
    assert summary.n_samples_without == 0 and summary.n_shared == 0
    summary = run_import(dataset, "run", tmp_path / "a.run", where="metadata.system=a")
    assert summary.n_samples_without == 2  # s3 and s4 are system a but not in the file
    assert "2 samples have no ranking in the file" in summary.line()
    with pytest.raises(ImportRejected, match="no sample of d has metadata.system=c"):
        run_import(dataset, "run", tmp_path / "a.run", where="metadata.system=c")
    with pytest.raises(ImportRejected, match="metadata.FIELD=VALUE"):
        run_import(dataset, "run", tmp_path / "a.run", where="system=a")


def test_qrels_keep_relevant_documents_in_file_order_and_collapse_grades(dataset, tmp_path):
    text = "q1 0 d3 2\nq1 0 d12 0\nq1 0 d7 1\n2 0 x1 0\n2 0 x2 -1\n"
    summary = run_import(dataset, "qrels", write(tmp_path / "qrels.txt", text))
    ids = stored(dataset, "relevant_ids")
    assert ids["s1"] == ["d3", "d7"] and ids["s2"] == ["d3", "d7"]
    assert ids["s3"] == []        # judged, nothing relevant: the report counts it in n_no_relevant
    assert ids["s4"] is None      # not in the file: left as it was
    assert summary.n_samples_without == 1 and "relevance judgments set on 3 samples" in summary.line()


@pytest.mark.parametrize(
    ("kind", "text", "problems"),
    [
        ("run", "q1 Q0 d1 1 0.5\n", ["line 1: expected 6 columns (qid Q0 docid rank score tag), found 5"]),
        ("run", "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 first 0.4 t\n", ["line 2, field 'rank': must be an integer, found 'first'"]),
        ("run", "q1 Q0 d1 1 high t\n", ["line 1, field 'score': must be a number, found 'high'"]),
        ("run", "q1 Q0 d1 1 nan t\n", ["line 1, field 'score': must be a finite number, found 'nan'"]),
        ("run", "q1 Q0 d1 1 1 t\nq2 Q0 d1 1 1 t\nq1 Q0 d1 2 1 t\n",
         ["line 3, field 'docid': document 'd1' is ranked twice for query 'q1' (first on line 1)"]),
        ("qrels", "q1 0 d1 1\nq1 0 d2 yes\n", ["line 2, field 'relevance': must be an integer (relevant when > 0), found 'yes'"]),
        ("qrels", "q1 0 d1 1\nq1 0 d1 0\n", ["line 2, field 'docid': document 'd1' is judged twice for query 'q1' (first on line 1)"]),
        ("qrels", "q1 d1 1\nq1 0 d2 1 extra\n", ["line 1: expected 4 columns (qid iteration docid relevance), found 3",
                                                 "line 2: expected 4 columns (qid iteration docid relevance), found 5"]),
        ("qrels", "\n\n", ["file is empty: no records"]),
    ],
)
def test_a_malformed_line_rejects_the_whole_file(dataset, db_url, tmp_path, kind, text, problems):
    before = dump(db_url)
    good = "s4 Q0 ok 1 1 t\n" if kind == "run" else "s4 0 ok 1\n"
    path = write(tmp_path / "file.txt", text + good if text.strip() else text)
    with pytest.raises(ImportRejected) as info:
        run_import(dataset, kind, path)
    assert [str(p) for p in info.value.problems] == problems
    assert dump(db_url) == before  # nothing written, not even the good last line


def test_bytes_that_are_not_utf8_name_their_line(dataset, tmp_path):
    path = tmp_path / "bad.run"
    path.write_bytes(b"q1 Q0 d1 1 1 t\nq1 Q0 d\xff 2 1 t\n")
    with pytest.raises(ImportRejected) as info:
        run_import(dataset, "run", path)
    assert str(info.value.problems[0]).startswith("line 2: not valid UTF-8 (byte 0xff")


def test_unknown_dataset_is_rejected(dataset, tmp_path):
    with pytest.raises(ImportRejected, match=r"unknown dataset 'x' \(datasets: d\): import its samples first"):
        run_import(dataset, "run", write(tmp_path / "r.run", "q1 Q0 d1 1 1 t\n"), dataset="x")


def test_importing_the_samples_again_keeps_the_run(dataset, tmp_path):
    run_import(dataset, "run", write(tmp_path / "bm25.run", RUN))
    path = write(tmp_path / "samples.jsonl", "".join(json.dumps(s) + "\n" for s in SAMPLES))
    summary = run_import(dataset, "samples", path)
    assert "nothing changed" in summary.line()
    assert stored(dataset, "retrieved_ids")["s1"] == ["d3", "d9", "d5", "d7"]


def test_cli_imports_a_run_and_qrels_and_the_report_uses_them(runner, dataset, tmp_path):
    result = runner.invoke(["import", "run", str(write(tmp_path / "bm25.run", RUN)), "--dataset", "d"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("run → d: 4 queries")
    qrels = write(tmp_path / "qrels", "q1 0 d3 1\nq1 0 d7 1\nq1 0 d12 1\n2 0 x9 1\ns4 0 c1 1\n")
    assert runner.invoke(["import", "qrels", str(qrels), "--dataset", "d"]).exit_code == 0
    report = json.loads(runner.invoke(["report", "--dataset", "d", "--k", "4", "--bootstrap", "100"]).output)
    section = report["retrieval"]
    assert section["source"] == "ids" and section["k"] == 4 and section["n"] == 4 and section["n_no_relevant"] == 0
    # s1, s2: [d3, d9, d5, d7] against {d3, d7, d12}: recall 2/3; s3: 0; s4: 1
    assert section["recall_at_k"] == pytest.approx((2 / 3 + 2 / 3 + 0 + 1) / 4)
    assert section["mrr"] == pytest.approx((1 + 1 + 0 + 1) / 4)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "csv"], "--format is for samples, labels and verdicts"),
        (["--judge", "j"], "--judge is for verdicts"),
    ],
)
def test_cli_refuses_options_of_other_kinds(runner, dataset, tmp_path, args, message):
    path = write(tmp_path / "r.run", "q1 Q0 d1 1 1 t\n")
    result = runner.invoke(["import", "run", str(path), "--dataset", "d", *args])
    assert result.exit_code == 2 and message in result.output
    result = runner.invoke(["import", "samples", str(path), "--dataset", "d", "--where", "metadata.system=a"])
    assert result.exit_code == 2 and "--where is for run and qrels files" in result.output


def test_cli_rejects_a_malformed_run_with_its_line(runner, dataset, tmp_path):
    path = write(tmp_path / "r.run", "q1 Q0 d1 1 1 t\nq1 Q0 d2 2\n")
    result = runner.invoke(["import", "run", str(path), "--dataset", "d"])
    assert result.exit_code == 2
    assert f"{path}: line 2: expected 6 columns" in result.output
    assert "rejected, nothing imported (1 problem in 1 of 2 records)" in result.output
