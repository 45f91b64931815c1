"""Bounds on imported names and numbers (issue 20, findings 10 and 12): dataset names from a documented
character set on every path that creates a dataset, and values that would overflow the statistics refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlmodel import select

from calibrate.demo import AB_DATASET, DATASET
from calibrate.ingest.fields import check_dataset_name
from calibrate.models import Dataset, Label

GOOD = Path(__file__).resolve().parent.parent / "data" / "good"


@pytest.mark.parametrize("name", ["../../etc/passwd", "a/b", 'say "hi"', "o'clock", "back\\slash", " lead", "trail ",
                                  "two  spaces", "_hidden", ".dot", "tab\there", "x" * 101, "", "%2e%2e"])
def test_a_dataset_name_outside_the_character_set_is_refused_and_nothing_is_created(runner, session, name):
    out = runner.invoke(["import", "samples", str(GOOD / "samples.jsonl"), "--dataset", name])
    assert out.exit_code == 2 and "field 'dataset'" in out.output and "nothing imported" in out.output, out.output
    assert len(out.output.strip().splitlines()) == 2  # the problem, then the one `error:` line: no traceback
    session.rollback()
    assert session.exec(select(Dataset)).all() == []


@pytest.mark.parametrize("name", ["d", "Ácido fólico 2", "run-2026.12_v3", "二号"])
def test_names_in_the_documented_set_import_and_are_reachable_on_the_web(runner, client, login, name):
    out = runner.invoke(["import", "samples", str(GOOD / "samples.jsonl"), "--dataset", name])
    assert out.exit_code == 0, out.output
    login("eng", "engineer")
    assert client.get(f"/datasets/{name}").status_code == 200


def test_the_demo_names_are_valid():
    assert check_dataset_name(DATASET) == DATASET and check_dataset_name(AB_DATASET) == AB_DATASET


@pytest.mark.parametrize(("value", "message"), [
    (1e308, "value 1e+308 of task score is beyond ±1e+12"),
    (-2e13, "value -2e+13 of task score is beyond ±1e+12"),
    ("1e308", "value 1e+308 of task score is beyond ±1e+12"),
    ("1e999", "value must be a number for task score"),  # inf: not a number the statistics can use
    ("nan", "value must be a number for task score"),
])
def test_values_that_would_overflow_are_refused_at_import(runner, session, tmp_path, value, message):
    assert runner.invoke(["import", "samples", str(GOOD / "samples.jsonl"), "--dataset", "d"]).exit_code == 0
    assert runner.invoke(["task", "add", "score", "--target", "sample", "--kind", "continuous"]).exit_code == 0
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({"sample_id": "s1", "annotator": "ana", "task": "score", "value": value}) + "\n")
    out = runner.invoke(["import", "labels", str(path), "--dataset", "d"])
    assert out.exit_code == 2 and f"line 1, field 'value': {message}" in out.output, out.output
    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text(json.dumps({"sample_id": "s1", "task": "score", "value": value}) + "\n")
    out = runner.invoke(["import", "verdicts", str(verdicts), "--dataset", "d", "--judge", "j"])
    assert out.exit_code == 2 and f"line 1, field 'value': {message}" in out.output, out.output
    session.rollback()
    assert session.exec(select(Label)).all() == []
    refused = runner.invoke(["task", "add", "wide", "--target", "sample", "--kind", "continuous", "--scale", "0-1e308"])
    assert refused.exit_code == 2
    refused = runner.invoke(["task", "add", "wide", "--target", "sample", "--kind", "continuous", "--scale", "0-10000000000000"])
    assert refused.exit_code == 2 and "scale must stay within ±1e+12" in refused.output
