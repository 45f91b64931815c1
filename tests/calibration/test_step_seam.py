"""Modules that branched on target names now ask the registry (issue 33), and a step task gets what a claim task gets:
its disputes show the step, the live estimator finds the samples that have steps and offers the step level only, and the
report's rows name the step."""

from __future__ import annotations

import pytest

from calibrate.annotation.adjudication import disputes
from calibrate.calibration import Options, build_report
from calibrate.calibration.live import estimand_for, levels_of, samples_with_targets
from calibrate.errors import CalibrationError
from calibrate.judged import TARGET_KINDS
from calibrate.tasks import ensure_trajectory_tasks


@pytest.fixture
def steps(store, session):
    ensure_trajectory_tasks(session, store.dataset.id)
    store.sample("t0", n_steps=3)
    store.sample("t1", n_steps=2)
    store.sample("plain")  # no steps
    store.label("step_correctness", "ana", "t0", "correct", step=1)
    store.label("step_correctness", "ben", "t0", "incorrect", step=1)
    store.label("step_correctness", "ana", "t1", "correct", step=0)
    store.commit()
    return store


def test_a_step_dispute_shows_the_step_and_its_place(steps, session):
    page = disputes(session, steps.dataset, steps.task("step_correctness"))
    [dispute] = page.disputes
    assert dispute.target_key == f"step:{steps.steps[('t0', 1)].id}"
    assert dispute.where == "step 2" and dispute.target_text.startswith("#2 tool step1") and "in1" in dispute.target_text
    assert dispute.sample.external_id == "t0"


def test_the_live_estimator_reads_a_step_task_at_its_own_level(steps, session):
    task = steps.task("step_correctness")
    assert samples_with_targets(session, steps.dataset, task) == {steps.samples["t0"].id, steps.samples["t1"].id}
    assert levels_of("step") == ("steps",) and levels_of("claim") == ("answers", "claims") and levels_of("sample") == ("answers",)
    assert estimand_for(task).to_dict() == {"level": "steps", "positive": "correct", "metric": "share"}
    with pytest.raises(CalibrationError, match="answers"):
        estimand_for(task, level="answers")


def test_the_report_rows_name_the_step(steps, session):
    for sid, index in (("t0", 1), ("t1", 0)):
        steps.verdict("j", "step_correctness", sid, "correct", step=index)
    steps.commit()
    rows = build_report(session, "d", "j", options=Options(bootstrap=50)).rows["step_correctness"]
    assert sorted((r.sample_id, r.step, r.claim, r.context) for r in rows) == [("t0", 1, None, None), ("t1", 0, None, None)]


def test_what_the_part_kinds_declare():
    claim, context, step, sample = (TARGET_KINDS[n] for n in ("claim", "context", "step", "sample"))
    assert (claim.answers, context.answers, step.answers) == (True, False, False)
    assert claim.aggregates("answers") and not claim.aggregates("claims") and not sample.aggregates("answers")
    assert step.place(3) == {"claim": None, "context": None, "step": 3} and sample.place(None) == {"claim": None,
                                                                                                  "context": None, "step": None}
    assert (claim.fewshot_missing, context.fewshot_missing, step.fewshot_missing) == \
        ("fewshot_no_claim", "fewshot_no_context", "fewshot_no_step")
