"""What production data may say about itself (issue 30, findings 5 and 9): an inclusion probability the estimates can
trust, a start time their windows can hold. Refused at `import samples`, `traces import` and the receiver's tokens,
naming the field; calibrate.bounds is the one rule."""

from __future__ import annotations

import json

import pytest
from ingest_helpers import dump, write_jsonl
from sqlmodel import Session, select
from trace_helpers import synthetic_request

from calibrate.bounds import EARLIEST, LATEST, MIN_INCLUSION_PROB, inclusion_prob_problem, started_at_problem
from calibrate.ingest import ImportRejected, import_in_chunks
from calibrate.ingest.traces import import_traces
from calibrate.models import Dataset


def sample(n: int, **metadata) -> dict:
    return {"id": f"s{n}", "question": f"Q{n}?", "answer": f"A{n}.", "contexts": [f"C{n}."], "metadata": metadata}


def test_the_bounds():
    assert MIN_INCLUSION_PROB == 1e-6
    for good in (1e-6, 0.2, 1, 1.0):
        assert inclusion_prob_problem(good) is None
    for bad in (1e-300, 1e-7, 0, -0.5, 1.5, float("nan"), float("inf"), "0.5", True, None):
        assert inclusion_prob_problem(bad) is not None, bad
    for good in ("2025-11-24T16:00:00Z", "2025-11-24T16:00:00.123456+01:00", "2025-11-24", "1970-01-01T00:00:00Z",
                 "2199-12-31T23:59:59Z", "2026-11-23T9:00:00Z"):  # a one-digit hour: pandas reads it, so it is taken
        assert started_at_problem(good) is None, good
    for bad in ("9999-12-31T00:00:00Z", "0001-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "2200-01-01T00:00:00Z",
                "9999-12-31T23:59:59-14:00", "9999-12-31T9:00:00Z", "+318857-01-01T00:00:00Z", "yesterday", "", 1764000000,
                None):
        assert started_at_problem(bad) is not None, bad
    assert (EARLIEST.year, LATEST.year) == (1970, 2200)


@pytest.mark.parametrize("metadata, field, says", [
    ({"inclusion_prob": 1e-300}, "metadata.inclusion_prob", "must be a number in [1e-06, 1]"),
    ({"inclusion_prob": 1e-8}, "metadata.inclusion_prob", "found 1e-08"),
    ({"inclusion_prob": 0}, "metadata.inclusion_prob", "found 0"),
    ({"inclusion_prob": "0.5"}, "metadata.inclusion_prob", "found '0.5'"),
    ({"started_at": "9999-12-31T00:00:00Z"}, "metadata.started_at", "out of range"),
    ({"started_at": "0001-01-01T00:00:00Z"}, "metadata.started_at", "out of range"),
    ({"started_at": "next tuesday"}, "metadata.started_at", "must be an ISO 8601 time"),
])
def test_import_samples_refuses_metadata_the_estimates_cannot_use_naming_line_and_field(runner, engine, db_url, tmp_path,
                                                                                         metadata, field, says):
    rows = [sample(0, inclusion_prob=0.2, started_at="2026-03-02T10:00:00Z"), sample(1, **metadata)]
    path = write_jsonl(tmp_path / "samples.jsonl", rows)
    before = dump(db_url)
    with pytest.raises(ImportRejected) as refused:
        import_in_chunks(engine, "samples", path, dataset="d", chunk_size=1)
    problem = refused.value.problems[0]
    assert (problem.line, problem.field) == (2, field) and says in problem.message
    assert dump(db_url) == before
    result = runner.invoke(["import", "samples", str(path), "--dataset", "d"])  # the command line: one line, exit 2
    assert result.exit_code == 2 and f"line 2, field '{field}'" in result.output


def test_a_csv_file_and_good_values_go_through(runner, engine, tmp_path):
    csv = tmp_path / "samples.csv"
    csv.write_text('id,question,answer,contexts,metadata\ns0,Q?,A.,"[""C.""]","{""inclusion_prob"": 1e-7}"\n',
                   encoding="utf-8")
    result = runner.invoke(["import", "samples", str(csv), "--dataset", "d"])
    assert result.exit_code == 2 and "line 2, field 'metadata.inclusion_prob'" in result.output
    good = write_jsonl(tmp_path / "good.jsonl", [sample(0, inclusion_prob=1e-6, started_at="2199-12-31T23:59:59Z"),
                                                 sample(1, inclusion_prob=1, started_at="1970-01-01")])
    assert runner.invoke(["import", "samples", str(good), "--dataset", "d"]).exit_code == 0


def test_a_rate_under_the_floor_is_refused_by_traces_import_and_by_the_token(runner, engine, tmp_path):
    path = tmp_path / "traces.pb"
    path.write_bytes(synthetic_request(2, repeat_every=0).SerializeToString())
    for rate in ("0", "1e-7"):
        for command in (["traces", "import", str(path), "--dataset", "t"], ["traces", "token", "--dataset", "t"]):
            result = runner.invoke([*command, "--rate", rate])
            assert result.exit_code == 2 and "'--rate'" in result.output and "1e-06<=x<=1.0" in result.output
    with pytest.raises(ImportRejected, match="field 'rate': the rate must be between 1e-06 and 1"):
        import_traces(engine, [path], dataset="t", rate=0.0)
    with Session(engine) as session:
        assert session.exec(select(Dataset).where(Dataset.name == "t")).first() is None
    done = json.loads(runner.invoke(["traces", "import", str(path), "--dataset", "t", "--rate", "1e-6", "--json"]).stdout)
    assert done["traces"] == 2
