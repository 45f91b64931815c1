"""Pairwise judge runs: both presentation orders, positions mapped back to response ids, resume per (target, order)."""

from __future__ import annotations

import json

import pytest
from fakellm import FakeLLM
from judge_helpers import fast_options
from sqlmodel import Session, select

from calibrate.calibration import Options, build_report
from calibrate.db import write_session
from calibrate.ingest import import_file
from calibrate.judges import RunSetupError, RunSpec, run_judge, save_version
from calibrate.judges.parsing import parse_verdict
from calibrate.models import ResponseCache, Sample, Task, Verdict
from calibrate.tasks import add_task


def write_pairs(path, n: int, *, third: bool = False):
    """Write n pairwise samples whose responses are A and B (and C when `third`)."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            responses = [{"id": "A", "text": f"Answer A{i}: folic acid, {i} mg daily."}, {"id": "B", "text": f"Answer B{i}: rest."}]
            if third and i == 0:
                responses.append({"id": "C", "text": "Answer C0."})
            fh.write(json.dumps({"id": f"p{i:02d}", "question": f"Question {i}?", "contexts": [f"Folic acid: {i} mg daily."],
                                 "responses": responses}) + "\n")
    return path


@pytest.fixture
def pairs(engine, tmp_path):
    """A dataset of 6 pairwise samples, the task pref (A, B, tie), gold A on every sample, and prompt pref@1."""
    with write_session(engine) as session:
        import_file(session, "samples", write_pairs(tmp_path / "p.jsonl", 6), dataset="pairs")
        add_task(session, "pref", target="sample", kind="pairwise", labels=["A", "B", "C", "tie"])
        save_version(session, "pref", task="pref", model="fake-model")
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps({"sample_id": f"p{i:02d}", "annotator": "ann", "task": "pref",
                                        "value": "A" if i % 3 else "B"}) + "\n" for i in range(6)), encoding="utf-8")
    with write_session(engine) as session:
        import_file(session, "labels", gold, dataset="pairs")
    return "pref@1"


def run(server, prompt, **kwargs):
    return run_judge(kwargs.pop("engine"), RunSpec(
        dataset=kwargs.pop("dataset", "pairs"), prompt=prompt, backend="openai", base_url=server.openai_base,
        api_key_env="", options=kwargs.pop("options", None) or fast_options(), **kwargs))


@pytest.mark.parametrize("answer", ["1", "first"])
def test_a_judge_that_always_answers_first_names_the_first_shown_response_in_each_order(engine, pairs, answer):
    server = FakeLLM(labels=[answer]).start()
    try:
        summary = run(server, pairs, engine=engine)
    finally:
        server.stop()
    assert summary.status == "done" and summary.n_total == summary.n_done == 12 and summary.n_ok == 12
    assert summary.orders == "both" and any("both presentation orders" in line for line in summary.lines())
    with Session(engine) as session:
        verdicts = session.exec(select(Verdict).order_by(Verdict.target_key, Verdict.order_key)).all()
        assert len({v.target_key for v in verdicts}) == 6
        for v in verdicts:
            # the original order shows A first, so "first" is A; the swapped order shows B first
            assert (v.order, v.value) == ((["A", "B"], "A") if v.order_key == "0,1" else (["B", "A"], "B"))
        report = build_report(session, "pairs", pairs, options=Options(bootstrap=200))
    position = report.data["tasks"]["pref"]["position"]
    assert position["first_position_rate"] == 1.0 and position["agreement"] == 0.0
    assert (position["n_pairs"], position["n_first_both"], position["n_second_both"]) == (6, 6, 0)
    assert position["position_p_value"] == pytest.approx(2 * 0.5 ** 6)
    # every pair conflicts and the task has a tie: under the consistent rule each verdict is a tie
    assert report.data["tasks"]["pref"]["confusion"]["matrix"][0][-1] == 4  # gold A, judge tie
    # the rendered prompts differ by order: one cache entry per (target, order), both with the responses by position
    with Session(engine) as session:
        assert len(session.exec(select(ResponseCache)).all()) == 12


def test_the_prompts_show_the_responses_in_the_order_of_the_call(engine, pairs):
    server = FakeLLM(labels=["2"]).start()
    try:
        run(server, pairs, engine=engine, limit=1)
        users = [r["body"]["messages"][-1]["content"] for r in server.requests]
    finally:
        server.stop()
    assert len(users) == 2
    original, swapped = sorted(users, key=lambda text: text.index("Answer A0"))
    assert original.index("Response 1:\nAnswer A0") < original.index("Response 2:\nAnswer B0")
    assert swapped.index("Response 1:\nAnswer B0") < swapped.index("Response 2:\nAnswer A0")
    assert '"winner"' in server.requests[0]["body"]["messages"][0]["content"]


def test_orders_original_judges_once_per_target_and_a_later_both_run_adds_only_the_swapped(engine, pairs):
    server = FakeLLM(labels=["1"]).start()
    try:
        first = run(server, pairs, engine=engine, orders="original")
        assert (first.n_total, first.n_done) == (6, 6)
        with Session(engine) as session:
            assert {v.order_key for v in session.exec(select(Verdict))} == {"0,1"}
            single = build_report(session, "pairs", pairs, options=Options(bootstrap=200))
        section = single.data["tasks"]["pref"]
        assert section["position"]["orders"] == ["original"] and section["position"]["status"] == "undefined"
        assert section["n"] == 6  # one order: used under the consistent rule too
        calls = server.stats()["requests"]
        second = run(server, pairs, engine=engine, orders="both")
        assert server.stats()["requests"] - calls == 6  # the original order is done: only the swapped one is called
        assert (second.n_total, second.n_done) == (12, 12)
    finally:
        server.stop()


def test_an_interrupted_run_resumes_per_target_and_order_without_duplicates(engine, pairs):
    server = FakeLLM(labels=["1"]).start()
    try:
        stopped = run(server, pairs, engine=engine, options=fast_options(max_calls=5, concurrency=1))
        assert stopped.status == "stopped" and stopped.n_done == 5
        finished = run(server, pairs, engine=engine)
        assert finished.status == "done" and finished.n_done == 12
        assert server.stats()["requests"] == 12  # nothing judged twice
    finally:
        server.stop()
    with Session(engine) as session:
        keys = [(v.target_key, v.order_key) for v in session.exec(select(Verdict))]
    assert len(keys) == len(set(keys)) == 12


def test_a_sample_with_three_responses_is_swapped_by_reversing(engine, tmp_path):
    with write_session(engine) as session:
        import_file(session, "samples", write_pairs(tmp_path / "p.jsonl", 2, third=True), dataset="three")
        add_task(session, "pref", target="sample", kind="pairwise", labels=["A", "B", "C", "tie"])
        save_version(session, "pref", task="pref")
    summary = run_judge(engine, RunSpec(dataset="three", prompt="pref@1", backend="baseline"))
    assert summary.n_total == 4
    with Session(engine) as session:
        orders = sorted(tuple(v.order) for v in session.exec(select(Verdict).join(Sample).where(Sample.external_id == "p00")))
    assert orders == [("A", "B", "C"), ("C", "B", "A")]


def test_orders_is_refused_for_other_tasks_and_a_sample_without_responses_is_skipped(engine, pairs, claims_dataset,
                                                                                   claims_prompt):
    claims_dataset(name="claims", n_samples=2, claims_per_sample=1)
    with pytest.raises(RunSetupError, match="--orders is for pairwise tasks; claim_support is categorical"):
        run_judge(engine, RunSpec(dataset="claims", prompt=claims_prompt(), backend="baseline", orders="both"))
    with pytest.raises(RunSetupError, match="no sample of claims has two or more responses"):
        run_judge(engine, RunSpec(dataset="claims", prompt=pairs, backend="baseline"))
    with pytest.raises(RunSetupError, match="--orders must be one of original, swapped, both"):
        run_judge(engine, RunSpec(dataset="pairs", prompt=pairs, backend="baseline", orders="reversed"))


def test_the_baseline_prefers_the_response_closer_to_the_contexts_in_both_orders(engine, pairs):
    summary = run_judge(engine, RunSpec(dataset="pairs", prompt=pairs, backend="baseline"))
    assert summary.n_done == 12 and summary.n_ok == 12
    with Session(engine) as session:
        values = {(v.target_key, v.order_key): v.value for v in session.exec(select(Verdict))}
    # "Answer A{i}: folic acid, {i} mg daily." shares three content words with the context; B none
    assert set(values.values()) == {"A"}


def test_parse_maps_positions_ids_and_tie_for_the_order_shown():
    task = Task(name="pref", target="sample", kind="pairwise", labels=["A", "B", "tie"])
    shown = ("B", "A")
    cases = {'{"winner": "1", "reason": "r"}': ("B", "ok"), '{"winner": 2}': ("A", "ok"), "first": ("B", "ok"),
             "Response 2 is better.": ("A", "ok"), '{"winner": "A"}': ("A", "ok"), '{"verdict": "tie"}': ("tie", "ok"),
             '{"winner": "3"}': (None, "unparsed"), "Response 1 and Response 2 are both fine": (None, "unparsed"),
             '{"winner": "C"}': (None, "unparsed"), "": (None, "unparsed")}
    for raw, expected in cases.items():
        parsed = parse_verdict(task, raw, shown)
        assert (parsed.value, parsed.status) == expected, raw
    numeric = Task(name="pref", target="sample", kind="pairwise", labels=["1", "2"])
    # a number is a position, even when the ids are numbers: "1" in the order (2, 1) is response 2
    assert parse_verdict(numeric, '{"winner": "1"}', ("2", "1")).value == "2"
    assert parse_verdict(numeric, "tie", ("2", "1")).status == "unparsed"  # the task has no tie


def test_a_few_shot_example_shows_the_experts_choice_by_its_position(engine, pairs):
    with write_session(engine) as session:
        from calibrate.judges import FewShotSpec

        save_version(session, "pref", few_shots=[FewShotSpec("p00")], dataset="pairs")  # gold B: shown second
    server = FakeLLM(labels=["1"]).start()
    try:
        run(server, "pref@2", engine=engine, limit=1)
        system = server.requests[0]["body"]["messages"][0]["content"]
    finally:
        server.stop()
    assert "Response 1: Answer A0: folic acid, 0 mg daily.\nResponse 2: Answer B0: rest." in system
    # the imported label has no rationale: the example's reply has no "reason" (never "reason": "")
    assert system.endswith('Reply: {"winner": "2"}') and '"reason": ""' not in system


def test_answer_tasks_skip_pairwise_samples_that_have_no_answer(engine, tmp_path):
    rows = [{"id": "rag", "question": "Q?", "answer": "Take 0.4 mg.", "contexts": ["0.4 mg a day."]},
            {"id": "pair", "question": "Q?", "responses": [{"id": "A", "text": "a"}, {"id": "B", "text": "b"}]}]
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with write_session(engine) as session:
        import_file(session, "samples", path, dataset="mixed")
        save_version(session, "quality", task="answer_quality")
    summary = run_judge(engine, RunSpec(dataset="mixed", prompt="quality@1", backend="baseline"))
    assert summary.n_total == 1
    with Session(engine) as session:
        assert list(session.exec(select(Sample.external_id).join(Verdict, Verdict.sample_id == Sample.id))) == ["rag"]
