"""The `steps` format's validator (calibrate/ingest/step_records.py): canonical form, refusals naming the field, bounds."""

from __future__ import annotations

import json

import pytest

from calibrate.bounds import MAX_STEP_NAME, MAX_STEP_TEXT, MAX_STEPS
from calibrate.ingest.step_records import CUT, StepsInvalid, check_steps
from calibrate.models import STEP_KINDS, TARGETS, parse_target_key, target_key

AGENT = {"id": "a", "kind": "AGENT", "name": "prenatal-agent", "input": "How far along am I?", "output": "About 12 weeks.",
         "started_at": "2026-12-03T16:00:00Z", "duration_ms": 1200}
TOOL = {"id": "t", "parent": "a", "kind": "tool", "name": "gestational_age", "status": "ok",
        "started_at": "2026-12-03T17:00:00.250+01:00", "duration_ms": 3.5,
        "tool": {"name": "gestational_age", "arguments": {"lmp": "2026-09-10"}, "result": {"weeks": 12, "days": 1}}}


def _refusal(steps) -> tuple[str, str]:
    with pytest.raises(StepsInvalid) as caught:
        check_steps(steps)
    return caught.value.field, caught.value.message


def test_canonical_form_of_a_trajectory():
    checked = check_steps([AGENT, TOOL, {"id": 7, "parent": "a", "kind": "llm", "status": "ERROR", "turn": 0}])
    agent, tool, llm = checked.steps
    assert agent == {"id": "a", "parent": None, "kind": "agent", "name": "prenatal-agent", "input": "How far along am I?",
                     "output": "About 12 weeks.", "status": "ok", "started_at": "2026-12-03T16:00:00.000000Z",
                     "duration_ms": 1200.0, "tool": None, "turn": None}
    assert tool["started_at"] == "2026-12-03T16:00:00.250000Z"  # +01:00 read and written in UTC
    assert tool["tool"] == {"name": "gestational_age", "arguments": {"lmp": "2026-09-10"}, "result": {"weeks": 12, "days": 1}}
    assert (llm["id"], llm["name"], llm["status"], llm["turn"], llm["started_at"]) == ("7", "", "error", 0, None)
    assert (checked.steps_cut, checked.texts_cut) == (0, 0)
    assert check_steps([]).steps == []
    # The canonical form is a fixed point: what is exported imports to itself.
    assert check_steps(json.loads(json.dumps(checked.steps))).steps == checked.steps


@pytest.mark.parametrize(("steps", "field", "words"), [
    ({"id": "a"}, "steps", "must be a list"),
    (["a"], "steps[0]", "step object"),
    ([{"kind": "llm"}], "steps[0].id", "is missing"),
    ([{"id": "", "kind": "llm"}], "steps[0].id", "must not be empty"),
    ([{"id": True, "kind": "llm"}], "steps[0].id", "string or an integer"),
    ([{"id": "x" * 201, "kind": "llm"}], "steps[0].id", "the limit is 200"),
    ([{"id": "a"}], "steps[0].kind", "is missing"),
    ([{"id": "a", "kind": "planner"}], "steps[0].kind", "must be one of agent"),
    ([{"id": "a", "kind": "llm", "colour": 1}], "steps[0].colour", "unknown key"),
    ([AGENT, {"id": "a", "kind": "llm"}], "steps[1].id", "also step 0's id"),
    ([{"id": "b", "parent": "a", "kind": "llm"}, AGENT], "steps[0].parent", "not the id of an earlier step"),
    ([AGENT, {"id": "b", "kind": "llm", "status": "failed"}], "steps[1].status", "ok, error"),
    ([AGENT, {"id": "b", "kind": "llm", "input": {"q": 1}}], "steps[1].input", "string or null"),
    ([AGENT, {"id": "b", "kind": "llm", "output": "\ud800"}], "steps[1].output", "surrogate"),
    ([AGENT, {"id": "b", "kind": "llm", "started_at": "yesterday"}], "steps[1].started_at", "ISO 8601"),
    ([AGENT, {"id": "b", "kind": "llm", "started_at": "2300-01-01T00:00:00Z"}], "steps[1].started_at", "out of range"),
    ([AGENT, {"id": "b", "kind": "llm", "started_at": "2026-12-03T15:59:59Z"}], "steps[1].started_at", "start order"),
    ([AGENT, {"id": "b", "kind": "llm", "duration_ms": -1}], "steps[1].duration_ms", "0 or more"),
    ([AGENT, {"id": "b", "kind": "llm", "duration_ms": "3"}], "steps[1].duration_ms", "0 or more"),
    ([AGENT, {"id": "b", "kind": "llm", "turn": -1}], "steps[1].turn", "whole number"),
    ([AGENT, {"id": "b", "kind": "llm", "turn": 1.5}], "steps[1].turn", "whole number"),
    ([AGENT, {"id": "b", "kind": "tool", "tool": "dose_check"}], "steps[1].tool", "{name, arguments, result}"),
    ([AGENT, {"id": "b", "kind": "tool", "tool": {"arguments": {}}}], "steps[1].tool.name", "tool's name"),
    ([AGENT, {"id": "b", "kind": "tool", "tool": {"name": "x", "args": {}}}], "steps[1].tool.args", "unknown key"),
    ([AGENT, {"id": "b", "kind": "tool", "tool": {"name": "x", "result": float("nan")}}], "steps[1].tool.result", "NaN"),
    ([AGENT, {"id": "b", "kind": "tool", "tool": {"name": "x", "arguments": {"k": "\udfff"}}}],
     "steps[1].tool.arguments", "surrogate"),
])
def test_bad_steps_are_refused_naming_the_field(steps, field, words):
    found_field, message = _refusal(steps)
    assert found_field == field
    assert words in message


def test_steps_past_the_bound_are_left_out_and_counted():
    steps = [{"id": str(i), "kind": "llm"} for i in range(MAX_STEPS + 3)]
    steps[-1] = {"id": "bad", "kind": "nonsense"}  # past the bound: not read
    checked = check_steps(steps)
    assert len(checked.steps) == MAX_STEPS
    assert checked.steps_cut == 3
    assert checked.steps[-1]["id"] == str(MAX_STEPS - 1)


def test_long_texts_are_cut_and_counted():
    long = "x" * (MAX_STEP_TEXT + 10)
    big = {"rows": ["y" * 100] * (MAX_STEP_TEXT // 100)}
    checked = check_steps([{"id": "a", "kind": "tool", "name": "n" * (MAX_STEP_NAME + 1), "input": long,
                            "output": "x" * MAX_STEP_TEXT, "tool": {"name": "search", "arguments": big, "result": long}}])
    step = checked.steps[0]
    assert len(step["name"]) == MAX_STEP_NAME and step["name"].endswith(CUT)
    assert len(step["input"]) == MAX_STEP_TEXT and step["input"].endswith(CUT)
    assert step["output"] == "x" * MAX_STEP_TEXT  # at the bound: kept whole
    arguments = step["tool"]["arguments"]
    assert isinstance(arguments, str) and len(arguments) == MAX_STEP_TEXT and arguments.startswith('{"rows":["yyy')
    assert len(step["tool"]["result"]) == MAX_STEP_TEXT
    assert checked.texts_cut == 4  # name, input, arguments, result


def test_step_is_a_target_kind():
    assert "step" in TARGETS
    assert set(STEP_KINDS) >= {"agent", "llm", "tool", "retriever", "other"}
    assert parse_target_key(target_key("step", 42)) == ("step", 42)
    assert parse_target_key("step:x") is None
