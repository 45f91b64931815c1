"""Few-shot examples on steps (issue 33): a step task's version resolves "SAMPLE:N" to the sample's step N through the
step target kind (the path claims and contexts take), its system text shows each example as the judge sees a step (the
trajectory up to it, then the step), and the report and `compare` leave those steps out of the judge's figures."""

from __future__ import annotations

import pytest
from sqlmodel import select

from calibrate.calibration import Options, build_report
from calibrate.calibration.compare import compare_judges
from calibrate.judges import FewShotSpec, save_version
from calibrate.judges.errors import PromptError
from calibrate.judges.items import version_context
from calibrate.judges.render import Renderer
from calibrate.judges.versions import version_view
from calibrate.models import FewShot, Judge, Prompt
from calibrate.tasks import ensure_trajectory_tasks

OK, BAD = "correct", "incorrect"
SHOTS = [FewShotSpec("t0:2", "the dose tool failed"), FewShotSpec("t1:0")]


def _world(store, session, n=6):
    ensure_trajectory_tasks(session, store.dataset.id)
    for i in range(n):
        sid = f"t{i}"
        store.sample(sid, n_steps=4)
        for s in range(4):
            store.label("step_correctness", "ana", sid, BAD if (i + s) % 3 == 0 else OK, step=s)
    session.flush()


def _version(session, name="steps", shots=SHOTS):
    return save_version(session, name, task="step_correctness", few_shots=shots).version


def test_two_step_examples_render_as_the_judge_sees_a_step(store, session):
    _world(store, session)
    version = _version(session)
    rows = session.exec(select(FewShot).order_by(FewShot.order)).all()
    t0, t1 = store.steps[("t0", 2)], store.steps[("t1", 0)]
    assert [(r.target_key, r.step_id, r.claim_id, r.context_id, r.value) for r in rows] == \
        [(f"step:{t0.id}", t0.id, None, None, OK), (f"step:{t1.id}", t1.id, None, None, OK)]
    task = store.task("step_correctness")
    system = Renderer(version.system, version.template, version_context(session, version, task)).system
    first, second = system.split("Example 1", 1)[1].split("Example 2", 1)
    before, judged = first.split("Step to judge:", 1)
    assert "#1 llm step0" in before and "#2 tool step1" in before and "#3" not in before  # the trajectory up to it
    assert judged.strip().startswith("#3 llm step2") and "in2" in judged and "out2" in judged
    assert '"verdict": "correct", "reason": "the dose tool failed"' in judged
    assert "(none: it is the first step)" in second.split("Step to judge:", 1)[0]  # step 0 has nothing before it
    assert second.split("Step to judge:", 1)[1].strip().startswith("#1 llm step0")
    view = version_view(session, session.get(Prompt, version.prompt_id), version)
    assert [(e.ref, e.text.splitlines()[0]) for e in view.examples] == [("t0:2", "#3 llm step2"), ("t1:0", "#1 llm step0")]


def test_a_step_reference_is_refused_in_the_kinds_words(store, session):
    _world(store, session, n=2)
    with pytest.raises(PromptError, match="sample t0 has no step 9"):
        _version(session, shots=[FewShotSpec("t0:9")])
    with pytest.raises(PromptError, match="write SAMPLE:N with the 0-based step index"):
        _version(session, shots=[FewShotSpec("t0")])


def test_the_report_and_compare_leave_the_example_steps_out(store, session):
    _world(store, session)
    version = _version(session)
    other = _version(session, name="plain", shots=[])
    store.judges["steps@1"] = Judge(name="steps@1", kind="prompt", prompt_version_id=version.id)
    store.judges["plain@1"] = Judge(name="plain@1", kind="prompt", prompt_version_id=other.id)
    session.add_all(store.judges.values())
    session.flush()
    for i in range(6):
        for s in range(4):
            for judge in ("steps@1", "plain@1"):
                store.verdict(judge, "step_correctness", f"t{i}", OK, step=s)
    store.commit()
    section = build_report(session, "d", "steps@1", options=Options(bootstrap=100)).data["tasks"]["step_correctness"]
    assert (section["n"], section["n_fewshot"]) == (22, 2)
    shown = {f"step:{store.steps[k].id}" for k in (("t0", 2), ("t1", 0))}
    rows = build_report(session, "d", "steps@1", options=Options(bootstrap=100)).rows["step_correctness"]
    assert {r.target for r in rows if r.excluded == "fewshot"} == shown
    assert {(r.sample_id, r.step) for r in rows if r.excluded == "fewshot"} == {("t0", 2), ("t1", 0)}
    result = compare_judges(session, "d", "plain@1", "steps@1", options=Options(bootstrap=100))
    assert (result["common_n"], result["tasks"]["step_correctness"]["n_fewshot"]) == (22, 2)
