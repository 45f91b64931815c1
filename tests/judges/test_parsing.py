"""Reading verdicts out of answers: JSON first, a tolerant fallback, never a guess."""

from __future__ import annotations

import pytest
from sqlmodel import select

from calibrate.judges.parsing import parse_verdict
from calibrate.models import Task


@pytest.fixture
def tasks(session):
    return {t.name: t for t in session.exec(select(Task)).all()}


@pytest.mark.parametrize(
    ("task", "raw", "value"),
    [
        ("claim_support", '{"verdict": "supported", "reason": "ok"}', "supported"),
        ("claim_support", '{"verdict": "Unsupported"}', "unsupported"),
        ("claim_support", '```json\n{"verdict": "unsupported", "reason": "4 mg"}\n```', "unsupported"),
        ("claim_support", 'Sure! Here it is: {"verdict": "supported", "reason": "x"} Hope it helps.', "supported"),
        ("claim_support", "Verdict: unsupported. The dose differs.", "unsupported"),
        ("claim_support", "The claim is unsupported by the passages.", "unsupported"),
        ("claim_support", '{"label": "not_applicable"}', "not_applicable"),
        ("context_relevance", "This passage is not relevant.", "not_relevant"),
        ("context_relevance", '{"verdict": "relevant"}', "relevant"),
        ("answer_quality", '{"verdict": 4, "reason": "good"}', "4"),
        ("answer_quality", '{"score": "3"}', "3"),
        ("answer_quality", "Score: 5", "5"),
        ("answer_quality", "I would give it a 2.", "2"),
    ],
)
def test_verdicts_are_read(tasks, task, raw, value):
    parsed = parse_verdict(tasks[task], raw)
    assert (parsed.status, parsed.value) == ("ok", value)


@pytest.mark.parametrize(
    ("task", "raw", "why"),
    [
        ("claim_support", "", "empty"),
        ("claim_support", "   \n", "empty"),
        ("claim_support", '{"verdict": "maybe"}', "not a label"),
        ("claim_support", '{"answer": "supported"}', "without a verdict"),
        ("claim_support", "It is supported in part and unsupported in part.", "several labels"),
        ("claim_support", "The claim is not supported.", "negated"),
        ("claim_support", "I cannot tell.", "no label"),
        ("claim_support", '{"verdict": true}', "must be"),
        ("answer_quality", '{"verdict": 7}', "outside the scale"),
        ("answer_quality", '{"verdict": "NaN"}', "must be a number"),
        ("answer_quality", "Between 3 and 4.", "2 numbers"),
        ("answer_quality", "Good answer.", "no number"),
    ],
)
def test_unusable_answers_are_unparsed_never_guessed(tasks, task, raw, why):
    parsed = parse_verdict(tasks[task], raw)
    assert parsed.status == "unparsed" and parsed.value is None
    assert why in parsed.error


def test_the_reason_is_kept(tasks):
    assert parse_verdict(tasks["claim_support"], '{"verdict": "supported", "reason": "dose matches"}').reason == "dose matches"
