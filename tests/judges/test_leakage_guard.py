"""context_recall's reference leakage guard: a statement the contexts do not support is not attributed without a call."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from calibrate.db import write_session
from calibrate.judges import RunSetupError, RunSpec, prepare_run, run_judge, save_version
from calibrate.judges.metrics import LeakageGuard
from calibrate.models import Task, Verdict

CONTEXTS = ("Se recomienda tomar 0,4 mg al día de ácido fólico desde antes de la concepción.",)
GROUND_TRUTH = "Tome 0,4 mg al día de ácido fólico. La vitamina D se toma en invierno."


@pytest.fixture
def recall_sample(make_sample):
    return make_sample(external_id="s1", question="¿Qué suplementos?", answer="Tome ácido fólico.", contexts=CONTEXTS,
                       claims=["Tome ácido fólico."], ground_truth=GROUND_TRUTH)


def recall_prompt(engine, name="recall", **params):
    with write_session(engine) as session:
        version = save_version(session, name, task="context_recall", model="fake-model",
                               params={"temperature": 0, **params}).version
    return f"{name}@{version.number}"


def verdict(session):
    session.rollback()
    task_id = session.exec(select(Task.id).where(Task.name == "context_recall")).one()
    return session.exec(select(Verdict).where(Verdict.task_id == task_id).order_by(Verdict.id.desc())).first()


def spec(fake, prompt):
    from judge_helpers import fast_options

    return RunSpec(dataset="d", prompt=prompt, backend="openai", base_url=fake.openai_base, api_key_env="",
                   options=fast_options())


@pytest.mark.parametrize("mode", ["lexical", "embedding"])
def test_a_statement_absent_from_the_contexts_gets_no_call_and_is_not_attributed(engine, session, fake_llm, recall_sample, mode):
    fake_llm.labels = ["attributed"]  # a model that "knows" the reference attributes everything
    guarded = run_judge(engine, spec(fake_llm, recall_prompt(engine, "guarded", leakage_guard=mode)))
    assert guarded.status == "done" and guarded.calls == 1 and fake_llm.stats()["requests"] == 1
    # The call that was made is the first statement's; the vitamin D statement never reached the model.
    asked = fake_llm.requests[0]["body"]["messages"][-1]["content"]
    assert "ácido fólico" in asked and "vitamina D" not in asked
    stored = verdict(session)
    assert stored.value == "0.5"
    steps = json.loads(stored.raw)["steps"]
    assert [s["verdict"] for s in steps] == ["attributed", "not_attributed"]
    assert steps[1]["reason"].startswith(f"leakage guard ({mode})") and "not asked" in steps[1]["reason"]
    # Without the guard the model is asked about both (the first answer comes from the cache: the
    # guard is not part of the request) and marks the missing fact as retrieved.
    unguarded = run_judge(engine, spec(fake_llm, recall_prompt(engine, "plain")))
    assert unguarded.calls == 1 and fake_llm.stats()["requests"] == 2 and verdict(session).value == "1"
    # The guard's parameters are not sent to the model.
    assert "leakage_guard" not in fake_llm.requests[0]["body"]


def test_the_offline_baseline_applies_the_guard_too(engine, session, recall_sample):
    summary = run_judge(engine, RunSpec(dataset="d", prompt=recall_prompt(engine, leakage_guard="lexical"), backend="baseline"))
    assert summary.status == "done"
    steps = json.loads(verdict(session).raw)["steps"]
    assert steps[1]["verdict"] == "not_attributed" and steps[1]["reason"].startswith("leakage guard (lexical)")


def test_the_lexical_check_counts_content_words_and_numbers():
    guard = LeakageGuard.from_params("context_recall", {"leakage_guard": "lexical"})
    assert guard.threshold == 0.5
    # Terms: content-word stems (accents folded, stop words out, 5 letters) and numbers (0,4 = 0.4).
    assert guard.check("Tome 0,4 mg al día.", CONTEXTS) is None  # día and 0.4 of {tome, dia, 0.4}: 67 %
    assert guard.check("Tome 4 mg al día de hierro.", CONTEXTS).startswith(
        "leakage guard (lexical): 1 of 4 terms of the statement in the contexts (25% < 50%)")
    assert "0 of 3 terms" in guard.check("La vitamina D se toma en invierno.", CONTEXTS)
    assert guard.check("Sí.", CONTEXTS) is None  # nothing to check lexically: the model decides
    strict = LeakageGuard.from_params("context_recall", {"leakage_guard": "lexical", "leakage_threshold": 1})
    assert "2 of 4 terms of the statement in the contexts (50% < 100%)" in strict.check("Tome 0,4 mg al día de hierro.", CONTEXTS)


@pytest.mark.parametrize(("params", "task", "message"), [
    ({"leakage_guard": "fuzzy"}, "context_recall", "leakage_guard must be one of off, lexical, embedding, got 'fuzzy'"),
    ({"leakage_guard": "lexical", "leakage_threshold": 2}, "context_recall", "leakage_threshold must be a number from 0 to 1"),
    ({"leakage_threshold": 0.3}, "context_recall", "leakage_threshold needs leakage_guard=lexical or embedding"),
    ({"leakage_guard": "lexical"}, "faithfulness", "leakage_guard is an option of context_recall, not of faithfulness"),
])
def test_a_bad_guard_is_refused_before_any_call(engine, make_sample, fake_llm, params, task, message):
    make_sample(external_id="s1", ground_truth=GROUND_TRUTH)
    with write_session(engine) as session:
        save_version(session, "m", task=task, model="fake-model", params=params)
    with pytest.raises(RunSetupError, match=message.replace("(", r"\(").replace(")", r"\)")):
        prepare_run(engine, spec(fake_llm, "m@1"))
    assert fake_llm.stats()["requests"] == 0
