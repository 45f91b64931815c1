"""Judges on steps (issue 33): `judge run` and `calibrate watch` judge every step of a trajectory through the step
target kind's one registration, against the real local HTTP judge server; a step's judge sees the trajectory up to it,
cut by one rule that keeps the judged step whole and says how much was cut."""

from __future__ import annotations

import json
import threading

from judge_helpers import fast_options
from sqlmodel import Session, select

from calibrate.db import write_session
from calibrate.ingest import import_file
from calibrate.judges import RunSpec, run_judge, save_version
from calibrate.judges.watch import Watcher, WatchSpec
from calibrate.models import Dataset, Step, Verdict
from calibrate.tasks import ensure_trajectory_tasks
from calibrate.trajectories import fit, step_entry, step_fields

STEPS = [
    {"id": "root", "kind": "agent", "name": "prenatal-agent", "input": "12 weeks: ibuprofen?", "output": "Avoid it."},
    {"id": "plan", "parent": "root", "kind": "llm", "name": "plan", "input": "plan", "output": "call dose_check"},
    {"id": "dose", "parent": "root", "kind": "tool", "name": "dose_check", "status": "error",
     "tool": {"name": "dose_check", "arguments": {"drug": "ibuprofen", "weeks": 12}, "result": {"safe": False}}},
    {"id": "answer", "parent": "root", "kind": "llm", "name": "answer", "input": "write", "output": "Avoid ibuprofen."},
]


def _agent_dataset(engine, tmp_path, name="agent", n=3):
    path = tmp_path / f"{name}.jsonl"
    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"t{i}", "question": f"Question {i}: ibuprofen at 12 weeks?",
                                 "answer": "Avoid ibuprofen.", "contexts": [], "steps": STEPS}) + "\n")
    with write_session(engine) as session:
        import_file(session, "samples", path, dataset=name)
        ensure_trajectory_tasks(session, session.exec(select(Dataset.id).where(Dataset.name == name)).one())
    return name


def _judge_steps(fake_llm, seen):
    """Answer `incorrect` for the dose_check step, `correct` for every other; keep each user message."""
    def respond(body):
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        seen.append(user)
        judged = user.split("Step to judge:", 1)[1]
        return json.dumps({"verdict": "incorrect" if "tool dose_check" in judged else "correct", "reason": "fake"})
    fake_llm.responder = respond


def _verdicts(engine, judge_name_prefix):
    with Session(engine) as session:
        rows = session.exec(select(Verdict.target_key, Verdict.step_id, Verdict.value, Verdict.status)).all()
        steps = {s.id: s.index for s in session.exec(select(Step)).all()}
    return rows, steps


def test_judge_run_judges_every_step_with_the_trajectory_up_to_it(engine, fake_llm, tmp_path):
    _agent_dataset(engine, tmp_path)
    seen: list[str] = []
    _judge_steps(fake_llm, seen)
    with write_session(engine) as session:
        version = save_version(session, "steps", task="step_correctness", model="fake-model").version
    summary = run_judge(engine, RunSpec(dataset="agent", prompt=f"steps@{version.number}", backend="openai",
                                        base_url=fake_llm.openai_base, api_key_env="", options=fast_options()))
    assert (summary.status, summary.n_total, summary.n_ok) == ("done", 12, 12)
    rows, steps = _verdicts(engine, "steps")
    assert all(key == f"step:{step_id}" and status == "ok" for key, step_id, _, status in rows)  # attached by step_id
    assert sorted(steps[step_id] for _, step_id, value, _ in rows if value == "incorrect") == [2, 2, 2]
    first = next(u for u in seen if "Step to judge:\n#1 agent" in u)
    assert "(none: it is the first step)" in first
    third = next(u for u in seen if "Step to judge:\n#3 tool dose_check (error)" in u)
    before, judged = third.split("Step to judge:", 1)
    assert "#1 agent prenatal-agent" in before and "#2 llm plan" in before and "#4" not in third
    assert '"drug": "ibuprofen"' in judged and '"safe": false' in judged and "were cut" not in third


def test_the_watcher_judges_the_same_step_jobs_as_judge_run(engine, fake_llm, tmp_path):
    _agent_dataset(engine, tmp_path, n=2)
    _judge_steps(fake_llm, [])
    with write_session(engine) as session:
        ran = save_version(session, "ran", task="step_correctness", model="fake-model").version
        watched = save_version(session, "watched", task="step_correctness", model="fake-model").version
    run_judge(engine, RunSpec(dataset="agent", prompt=f"ran@{ran.number}", backend="openai",
                              base_url=fake_llm.openai_base, api_key_env="", options=fast_options()))
    watcher = Watcher(engine, WatchSpec(dataset="agent", prompt=f"watched@{watched.number}", backend="openai",
                                        base_url=fake_llm.openai_base, api_key_env="", options=fast_options(), once=True))
    passes = list(watcher.passes(threading.Event()))
    assert passes[0].runs and passes[0].runs[0].n_ok == 8
    with Session(engine) as session:
        by_judge = {}
        for judge_id, key, value, step_id in session.exec(select(Verdict.judge_id, Verdict.target_key, Verdict.value,
                                                                 Verdict.step_id)).all():
            by_judge.setdefault(judge_id, set()).add((key, value, step_id))
    assert len(by_judge) == 2 and len({frozenset(v) for v in by_judge.values()}) == 1


def _entry(index, text_chars):
    return step_entry(index, "llm", f"s{index}", "ok", "x" * text_chars, "")


def test_the_truncation_keeps_the_first_and_the_nearest_steps_whole_and_counts_the_cut():
    steps = [_entry(i, 90) for i in range(10)]  # each block ~110 characters
    size = len(steps[0]["text"]) + 1
    shown, cut = fit(steps, budget=4 * size + 5)  # (step 10's number has one more digit)
    assert [s["index"] for s in shown] == [0, 7, 8, 9]
    assert cut == {"steps": 6, "chars": sum(len(steps[i]["text"]) for i in range(1, 7))}
    assert fit(steps[:3], budget=10_000) == (steps[:3], {"steps": 0, "chars": 0})


def test_a_huge_judged_step_is_kept_whole_and_the_steps_before_it_are_cut():
    steps = [_entry(i, 50) for i in range(5)] + [_entry(5, 100_000)]
    fields = step_fields(steps[5], steps, budget=2 * (len(steps[0]["text"]) + 1))
    assert fields["step"]["text"].count("x") == 100_000  # the judged step, whole
    assert [s["index"] for s in fields["trajectory"]] == [0, 4]
    assert fields["trajectory_cut"]["steps"] == 3


def test_a_trajectory_judge_sees_every_step_then_the_answer(engine, fake_llm, tmp_path):
    _agent_dataset(engine, tmp_path, n=1)
    seen: list[str] = []

    def respond(body):
        seen.append(next(m["content"] for m in body["messages"] if m["role"] == "user"))
        return json.dumps({"verdict": "failure", "reason": "fake"})
    fake_llm.responder = respond
    with write_session(engine) as session:
        version = save_version(session, "whole", task="trajectory_success", model="fake-model").version
    summary = run_judge(engine, RunSpec(dataset="agent", prompt=f"whole@{version.number}", backend="openai",
                                        base_url=fake_llm.openai_base, api_key_env="", options=fast_options()))
    assert (summary.n_total, summary.n_ok) == (1, 1)
    (user,) = seen
    steps = [user.index(f"#{n} ") for n in range(1, 5)]
    assert steps == sorted(steps) and user.index("Final answer: Avoid ibuprofen.") > steps[-1] and "were cut" not in user
