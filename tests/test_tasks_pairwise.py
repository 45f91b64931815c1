"""Pairwise tasks: `task add --kind pairwise`, their labels, and values checked against a sample's own responses."""

from __future__ import annotations

import pytest

from calibrate.models import Task
from calibrate.task_values import pairwise_value
from calibrate.tasks import TaskError


def test_task_add_pairwise_stores_the_ids_then_tie(runner):
    result = runner.invoke(["task", "add", "pref", "--target", "sample", "--kind", "pairwise", "--labels", "A, B ,Tie"])
    assert result.exit_code == 0 and result.output == "added task pref: pairwise on sample (A, B, tie)\n"
    listed = runner.invoke(["task", "list"]).output
    assert "pref\tsample\tpairwise\tA,B,tie" in listed.splitlines()
    edited = runner.invoke(["task", "edit", "pref", "--add-labels", "C"])
    assert edited.exit_code == 0 and "labels now A, B, tie, C" in edited.output


@pytest.mark.parametrize(("args", "message"), [
    (["--target", "claim", "--labels", "A,B"], "a pairwise task compares a sample's responses: --target sample, not claim"),
    (["--target", "sample", "--labels", "A,tie"], "a pairwise task needs --labels with the response ids (two or more)"),
    (["--target", "sample", "--labels", "A," + "x" * 65], "is longer than 64 characters"),
    (["--target", "sample", "--labels", "A,B", "--scale", "1-5"], "--scale is for ordinal and continuous tasks, not pairwise ones"),
])
def test_task_add_pairwise_refusals_are_one_line(runner, args, message):
    result = runner.invoke(["task", "add", "pref", "--kind", "pairwise", *args])
    assert result.exit_code == 2 and message in result.output and result.output.count("\n") == 1


def test_a_pairwise_value_must_be_one_of_the_samples_responses_or_tie():
    task = Task(name="pref", target="sample", kind="pairwise", labels=["A", "B", "C", "tie"])
    assert pairwise_value(task, " b", ["A", "B"]) == "B"  # a label of the task, matched ignoring case and spaces
    assert pairwise_value(task, "TIE", ["A", "B"]) == "tie"
    with pytest.raises(TaskError, match=r"value 'C' is not a response of this sample \(responses: A, B; or tie\)"):
        pairwise_value(task, "C", ["A", "B"])
    with pytest.raises(TaskError, match="is not a label of task pref"):
        pairwise_value(task, "D", ["A", "B", "D"])  # a response the task does not declare
    with pytest.raises(TaskError, match="this sample has none"):
        pairwise_value(task, "A", [])
    no_tie = Task(name="strict", target="sample", kind="pairwise", labels=["A", "B"])
    with pytest.raises(TaskError, match="is not a label of task strict"):
        pairwise_value(no_tie, "tie", ["A", "B"])
