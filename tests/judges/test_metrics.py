"""Metric judges (faithfulness, answer relevancy, context precision, context recall): the pure
scoring on hand-computed examples, template checks, and runs on the baseline, the real fake
LLM server and httpx.MockTransport."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from judge_helpers import fast_options
from sqlmodel import func, select

from calibrate.db import write_session
from calibrate.judges import PromptError, RunSetupError, RunSpec, metrics, run_judge, save_version
from calibrate.judges.embeddings import TfidfEmbedder
from calibrate.models import ResponseCache, Sample, Task, Verdict

# --------------------------------------------------------------------------- pure scoring


def step(verdict, name="s"):
    return metrics.StepResult(name, verdict, error="" if verdict else "no JSON")


def test_faithfulness_divides_by_the_claims_with_the_unparsed_step_counted():
    # 5 claims: 3 supported, 1 unsupported, 1 unparsable answer → 3 / 5, not 3 / 4.
    score = metrics.score_steps("faithfulness", [step("supported"), step("unsupported"), step("supported"), step(None),
                                                 step("supported")])
    assert score.value == pytest.approx(3 / 5)
    assert score.text == "0.6"
    assert score.reason == "3 of 5 claims supported; 1 unparsed step counted as not supported"
    assert [s["verdict"] for s in score.steps] == ["supported", "unsupported", "supported", None, "supported"]


def test_faithfulness_leaves_not_applicable_claims_out_of_both_sides():
    score = metrics.score_steps("faithfulness", [step("supported"), step("not_applicable"), step("unsupported")])
    assert score.value == pytest.approx(1 / 2)
    assert "1 claim not_applicable left out" in score.reason
    undefined = metrics.score_steps("faithfulness", [step("not_applicable"), step("not_applicable")])
    assert undefined.value is None and undefined.text is None and "nothing to measure" in undefined.reason


def test_context_precision_worked_example_in_rank_order():
    # relevance [1, 0, 1], R = 2: (1/2)(1/1 + 2/3) = 5/6.
    score = metrics.score_steps("context_precision", [step("relevant"), step("not_relevant"), step("relevant")])
    assert score.value == pytest.approx((1 + 2 / 3) / 2)
    # An unparsable verdict is not relevant at its rank: [1, ?, 1] scores as [1, 0, 1].
    assert metrics.score_steps("context_precision", [step("relevant"), step(None), step("relevant")]).value == pytest.approx(5 / 6)
    # Rank matters: [0, 1, 1] → (1/2)(1/2 + 2/3).
    assert metrics.score_steps("context_precision", [step("not_relevant"), step("relevant"), step("relevant")]).value == \
        pytest.approx((1 / 2 + 2 / 3) / 2)
    assert metrics.score_steps("context_precision", [step("not_relevant")]).value == 0.0


def test_context_recall_two_of_three_statements_attributed():
    score = metrics.score_steps("context_recall", [step("attributed"), step("not_attributed"), step("attributed")])
    assert score.value == pytest.approx(2 / 3)
    assert score.reason == "2 of 3 statements attributed to the contexts"


def test_answer_relevancy_is_the_mean_cosine_and_zero_when_noncommittal():
    question = np.array([1.0, 0.0])
    generated = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])  # cosines 1, 0, 0.6
    questions = metrics.Questions(["a?", "b?", "c?"])
    assert metrics.relevancy(question, generated, questions).value == pytest.approx((1 + 0 + 0.6) / 3)
    assert metrics.relevancy(question, -generated, questions).value == 0.0  # clipped at the bottom of the 0–1 range
    noncommittal = metrics.Questions(["a?"], noncommittal=True)
    assert metrics.relevancy(question, generated[:1], noncommittal).value == 0.0


@pytest.mark.parametrize("raw, questions, noncommittal, error", [
    ('{"questions": ["What dose?", " ", "When?"], "noncommittal": 0}', ["What dose?", "When?"], False, ""),
    ('Sure: ```json\n{"questions": ["What?"], "noncommittal": true}\n```', ["What?"], True, ""),
    ('{"questions": [], "noncommittal": 1}', [], True, ""),
    ('{"questions": [], "noncommittal": 0}', [], False, "no question in the answer"),
    ('{"questions": "What?"}', [], False, "JSON without a list of questions"),
    ('{"questions": ["What?"], "noncommittal": "maybe"}', [], False, "noncommittal must be 0 or 1"),
    ("I cannot help with that.", [], False, "no JSON object in the answer"),
])
def test_reading_the_question_step(raw, questions, noncommittal, error):
    read = metrics.read_questions(raw)
    assert read.questions == questions and read.noncommittal == noncommittal
    assert read.error.startswith(error) and bool(read.error) == bool(error)


def test_steps_and_skips_per_metric():
    item = {"question": "How much?", "answer": "Take 10 mg. Rest.", "ground_truth": "Take 10 mg a day. Avoid alcohol.",
            "claims": [{"index": 0, "text": "Take 10 mg."}], "contexts": [{"rank": 0, "text": "10 mg", "doc_id": ""}]}
    assert [s.name for s in metrics.steps_for("context_recall", item, {})] == ["statement 0", "statement 1"]
    assert metrics.steps_for("context_recall", item, {})[1].fields["statement"]["text"] == "Avoid alcohol."
    assert metrics.steps_for("answer_relevancy", item, {"n_questions": 5})[0].fields == {"n_questions": 5}
    assert metrics.skip_reason("faithfulness", {**item, "claims": []}) == "no claims"
    assert metrics.skip_reason("context_precision", {**item, "contexts": []}) == "no contexts"
    assert metrics.skip_reason("context_recall", {**item, "ground_truth": "  "}) == "no ground truth"
    assert metrics.skip_reason("answer_relevancy", {**item, "question": ""}) == "no question"
    assert all(metrics.skip_reason(m, item) is None for m in ("faithfulness", "context_precision", "context_recall",
                                                                 "answer_relevancy"))
    with pytest.raises(RunSetupError, match="n_questions"):
        metrics.steps_for("answer_relevancy", item, {"n_questions": 0})


# --------------------------------------------------------------------------- prompt versions


def test_metric_prompts_get_step_templates_and_their_fields_are_checked(engine, session):
    with write_session(engine) as s:
        for name in ("faithfulness", "answer_relevancy", "context_precision", "context_recall"):
            version = save_version(s, f"m-{name}", task=name).version
            assert version.template and version.system
        assert "{{ statement.text }}" in save_version(s, "m-context_recall", task="context_recall").version.template
        assert save_version(s, "recall2", task="context_recall", template="{{ statement.text }} {{ contexts[0].text }}").created
        with pytest.raises(PromptError, match="unknown field 'statement'"):
            save_version(s, "faith2", task="faithfulness", template="{{ statement.text }}")
        with pytest.raises(PromptError, match="'claim' is an item field"):
            save_version(s, "faith3", task="faithfulness", system="{{ claim.text }}", template="{{ claim.text }}")


def test_few_shots_are_refused_for_metric_tasks(engine, make_sample):
    from calibrate.judges import FewShotSpec

    make_sample(external_id="s1")
    with write_session(engine) as s, pytest.raises(PromptError, match="few-shot examples are not supported for the metric task"):
        save_version(s, "faith", task="faithfulness", few_shots=[FewShotSpec("s1")])


# --------------------------------------------------------------------------- runs


def metric_samples(make_sample):
    """Three samples: two measurable (hostile markup included), one with nothing to measure."""
    make_sample(external_id="s1", answer="Tome 0,4 mg al día. Tome 4 mg al día.",
                contexts=("Tome 0,4 mg al día de ácido fólico.", "Otra cosa sin relación."),
                claims=["Tome 0,4 mg al día.", "Tome 4 mg al día."], ground_truth="Tome 0,4 mg al día. Evite el alcohol.")
    make_sample(external_id="s2", ground_truth="Se recomienda 0,4 mg diarios.")  # tests/hostile.py texts
    make_sample(external_id="s3", claims=[], contexts=())


def new_prompt(engine, name, task, **fields):
    with write_session(engine) as s:
        version = save_version(s, name, task=task, **fields).version
        return f"{name}@{version.number}"


def verdicts_of(session, task):
    session.rollback()  # end the read transaction: see what the runs committed since
    task_id = session.exec(select(Task.id).where(Task.name == task)).one()
    return {v.target_key: v for v in session.exec(select(Verdict).where(Verdict.task_id == task_id)).all()}


@pytest.mark.parametrize("metric", ["faithfulness", "context_precision", "context_recall", "answer_relevancy"])
def test_baseline_metric_runs_are_deterministic_and_skip_what_has_nothing_to_measure(engine, session, make_sample, metric):
    metric_samples(make_sample)
    prompt = new_prompt(engine, "m", metric)
    first = run_judge(engine, RunSpec(dataset="d", prompt=prompt, backend="baseline"))
    values = {k: (v.value, v.reason, v.raw) for k, v in verdicts_of(session, metric).items()}
    again = run_judge(engine, RunSpec(dataset="d", prompt=prompt, backend="baseline", rerun=True))
    assert {k: (v.value, v.reason, v.raw) for k, v in verdicts_of(session, metric).items()} == values
    expected_skips = {"faithfulness": {"no claims": 1}, "context_precision": {"no contexts": 1},
                      "context_recall": {"no ground truth": 1}, "answer_relevancy": {}}[metric]
    assert first.skipped == again.skipped == expected_skips
    assert len(values) == 3 - sum(expected_skips.values())  # one verdict per measurable sample, none for the skipped
    if expected_skips:
        assert any(line.startswith("  skipped 1 samples with nothing to measure") for line in first.lines())
    for value, _reason, raw in values.values():
        assert 0 <= float(value) <= 1
        assert json.loads(raw)["metric"] == metric


def test_baseline_metric_values_on_a_hand_checked_sample(engine, session, make_sample):
    metric_samples(make_sample)
    for metric in ("faithfulness", "context_recall", "context_precision"):
        run_judge(engine, RunSpec(dataset="d", prompt=new_prompt(engine, metric, metric), backend="baseline"))
    s1 = "sample:1"
    # "Tome 4 mg al día." names a number the contexts lack: 1 of 2 claims supported.
    assert verdicts_of(session, "faithfulness")[s1].value == "0.5"
    assert verdicts_of(session, "faithfulness")[s1].reason == "1 of 2 claims supported"
    # "Evite el alcohol." is nowhere in the contexts: 1 of 2 statements attributed.
    assert verdicts_of(session, "context_recall")[s1].value == "0.5"
    # The relevant passage ranks first: [1, 0] → 1.
    assert verdicts_of(session, "context_precision")[s1].value == "1"


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_a_metric_run_on_the_fake_server_stores_one_verdict_per_sample_and_reruns_from_the_cache(
        engine, session, make_sample, fake_llm, backend):
    metric_samples(make_sample)
    prompt = new_prompt(engine, "faith", "faithfulness", model="fake-model")
    base = fake_llm.openai_base if backend == "openai" else fake_llm.anthropic_base

    def spec(**kwargs):
        return RunSpec(dataset="d", prompt=prompt, backend=backend, base_url=base, api_key_env="", options=fast_options(), **kwargs)

    summary = run_judge(engine, spec())
    assert summary.status == "done" and summary.n_ok == 2 and summary.skipped == {"no claims": 1}
    # One call per claim: s1 has 2, s2 (hostile texts) has 2.
    assert fake_llm.stats()["counts"][backend] == summary.calls == 4
    verdicts = verdicts_of(session, "faithfulness")
    assert set(verdicts) == {"sample:1", "sample:2"}
    for verdict in verdicts.values():
        steps = json.loads(verdict.raw)["steps"]
        supported = sum(s["verdict"] == "supported" for s in steps)
        assert float(verdict.value) == pytest.approx(supported / len(steps))
        assert verdict.reason.startswith(f"{supported} of {len(steps)} claims supported")
        assert verdict.input_tokens > 0 and verdict.cached is False
    # Hostile markup goes to the model as text (this is not HTML) and nothing is escaped or lost.
    users = [r["body"]["messages"][-1]["content"] for r in fake_llm.requests]
    assert any("<img src=x onerror=alert(1)>" in u for u in users)
    assert any("Claim to check: <script>alert('a')</script> Consulte" in u for u in users)
    assert len(session.exec(select(ResponseCache)).all()) == 4

    fake_llm.reset()
    again = run_judge(engine, spec(rerun=True))
    assert fake_llm.stats()["requests"] == 0 and again.calls == 0 and again.n_cached == 2
    assert {k: v.value for k, v in verdicts_of(session, "faithfulness").items()} == {k: v.value for k, v in verdicts.items()}


def test_a_budget_stop_mid_sample_keeps_the_paid_steps_for_the_next_run(engine, session, make_sample, fake_llm):
    metric_samples(make_sample)
    prompt = new_prompt(engine, "faith", "faithfulness", model="fake-model")

    def spec(**options):
        return RunSpec(dataset="d", prompt=prompt, backend="openai", base_url=fake_llm.openai_base, api_key_env="",
                       options=fast_options(concurrency=1, **options))

    first = run_judge(engine, spec(max_calls=3))  # s1's 2 claims, then 1 of s2's 2
    assert first.status == "stopped" and first.calls == 3 and first.n_done == 1
    assert len(session.exec(select(ResponseCache)).all()) == 3  # the unfinished sample's paid step is cached too
    second = run_judge(engine, spec())
    assert second.status == "done" and second.calls == 1
    assert set(fake_llm.stats()["calls"].values()) == {1}  # no step was ever asked twice


def mock_chat(handler_verdict):
    """A MockTransport answering chat completions with handler_verdict(user text) (a verdict, or an int status)."""
    seen = []

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        user = body["messages"][-1]["content"]
        seen.append(user)
        verdict = handler_verdict(user)
        if isinstance(verdict, int):
            return httpx.Response(verdict, json={"error": {"message": "bad request"}})
        content = json.dumps(verdict if isinstance(verdict, dict) else {"verdict": verdict, "reason": "mock"})
        return httpx.Response(200, json={"choices": [{"message": {"content": content}}],
                                         "usage": {"prompt_tokens": 10, "completion_tokens": 2}})

    return httpx.MockTransport(handle), seen


def test_a_step_rejected_for_good_makes_the_sample_an_error_and_the_next_run_retries_it(engine, session, make_sample):
    metric_samples(make_sample)
    prompt = new_prompt(engine, "faith", "faithfulness", model="m")
    spec = RunSpec(dataset="d", prompt=prompt, backend="openai", base_url="http://judge.test/v1", api_key_env="",
                   options=fast_options(concurrency=2))
    transport, seen = mock_chat(lambda user: 400 if "Tome 4 mg" in user else "supported")
    summary = run_judge(engine, spec, transport=transport)
    verdicts = verdicts_of(session, "faithfulness")
    assert verdicts["sample:1"].status == "error" and verdicts["sample:1"].value is None
    assert verdicts["sample:1"].error.startswith("claim 1: HTTP 400")
    assert verdicts["sample:2"].status == "ok" and verdicts["sample:2"].value == "1"
    assert summary.n_errors == 1 and summary.n_ok == 1
    # The next run judges only the failed sample, and its claim that was answered comes from the cache.
    transport, seen = mock_chat(lambda user: "unsupported")
    run_judge(engine, spec, transport=transport)
    assert len(seen) == 1 and "Tome 4 mg" in seen[0]
    verdict = verdicts_of(session, "faithfulness")["sample:1"]
    assert verdict.status == "ok" and verdict.value == "0.5" and verdict.reason == "1 of 2 claims supported"


def test_unparsable_step_answers_count_against_the_score_and_are_named(engine, session, make_sample):
    metric_samples(make_sample)
    prompt = new_prompt(engine, "recall", "context_recall", model="m")
    transport, _ = mock_chat(lambda user: "attributed" if "0,4 mg al día." in user else {"answer": "maybe"})
    run_judge(engine, RunSpec(dataset="d", prompt=prompt, backend="openai", base_url="http://judge.test/v1", api_key_env="",
                              options=fast_options()), transport=transport)
    verdict = verdicts_of(session, "context_recall")["sample:1"]
    assert verdict.value == "0.5"
    assert verdict.reason == "1 of 2 statements attributed to the contexts; 1 unparsed step counted as not attributed"
    assert json.loads(verdict.raw)["steps"][1]["unparsed"].startswith("JSON without a verdict")


def test_answer_relevancy_over_http_embeds_the_question_and_generated_questions(engine, session, make_sample):
    metric_samples(make_sample)
    calls = {"chat": 0, "embeddings": 0}
    question_vec, generated = [1.0, 0.0, 0.0], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.6, 0.8, 0.0]]

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path.endswith("/embeddings"):
            calls["embeddings"] += 1
            assert body["model"] == "emb-1" and len(body["input"]) == 4
            vectors = [question_vec, *generated]
            return httpx.Response(200, json={"data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)],
                                             "usage": {"prompt_tokens": 7}})
        calls["chat"] += 1
        assert "n_questions" not in body and "embedding_model" not in body  # metric params are never sent
        assert "Write 3 questions" in body["messages"][-1]["content"]
        content = json.dumps({"questions": ["q1?", "q2?", "q3?"], "noncommittal": 0})
        return httpx.Response(200, json={"choices": [{"message": {"content": content}}],
                                         "usage": {"prompt_tokens": 10, "completion_tokens": 5}})

    prompt = new_prompt(engine, "rel", "answer_relevancy", model="m", params={"temperature": 0, "embedding_model": "emb-1"})
    spec = RunSpec(dataset="d", prompt=prompt, backend="openai", base_url="http://judge.test/v1", api_key_env="",
                   options=fast_options())
    summary = run_judge(engine, spec, transport=httpx.MockTransport(handle))
    assert summary.n_ok == 3 and calls == {"chat": 3, "embeddings": 3}
    verdict = verdicts_of(session, "answer_relevancy")["sample:1"]
    assert float(verdict.value) == pytest.approx((1 + 0 + 0.6) / 3, abs=1e-6)
    assert verdict.input_tokens == 17  # chat 10 + embeddings 7
    assert json.loads(verdict.raw)["steps"][0]["questions"] == ["q1?", "q2?", "q3?"]
    again = run_judge(engine, RunSpec(**{**spec.__dict__, "rerun": True}), transport=httpx.MockTransport(handle))
    assert again.calls == 0 and calls == {"chat": 3, "embeddings": 3}


def test_answer_relevancy_setup_needs_an_embedding_model_or_the_offline_embedder(engine, session, make_sample, fake_llm):
    metric_samples(make_sample)
    spec = dict(dataset="d", backend="openai", base_url=fake_llm.openai_base, api_key_env="", options=fast_options())
    with pytest.raises(RunSetupError, match=r"needs embedding_model=NAME"):
        run_judge(engine, RunSpec(prompt=new_prompt(engine, "rel", "answer_relevancy", model="fake-model"), **spec))
    anthropic = dict(spec, backend="anthropic", base_url=fake_llm.anthropic_base)
    with pytest.raises(RunSetupError, match="the anthropic backend has no embeddings endpoint"):
        run_judge(engine, RunSpec(prompt=new_prompt(engine, "rel3", "answer_relevancy", model="fake-model",
                                                     params={"embedding_model": "e"}), **anthropic))
    assert fake_llm.stats()["requests"] == 0
    # embedder=tfidf: the offline embedder; the fake server's answer is no question list, so the sample is unparsed.
    prompt = new_prompt(engine, "rel2", "answer_relevancy", model="fake-model", params={"embedder": "tfidf"})
    summary = run_judge(engine, RunSpec(prompt=prompt, **spec))
    assert summary.n_unparsed == 3 and fake_llm.stats()["requests"] == 3
    verdict = verdicts_of(session, "answer_relevancy")["sample:1"]
    assert verdict.status == "unparsed" and verdict.error.startswith("the question-generation answer could not be read")


def test_the_tfidf_embedder_scores_a_relevant_answer_above_an_unrelated_one():
    embedder = TfidfEmbedder(["How much folic acid a day?", "Take folic acid daily.", "The train leaves at noon."])
    vectors = embedder.embed(["How much folic acid a day?", "How much folic acid should I take?", "When does the train leave?"])
    near = metrics.relevancy(vectors[0], vectors[1:2], metrics.Questions(["a"])).value
    far = metrics.relevancy(vectors[0], vectors[2:3], metrics.Questions(["b"])).value
    assert near > 0.3 and far == 0.0


def test_metric_runs_through_the_cli(runner, make_sample, session):
    metric_samples(make_sample)
    assert runner.invoke(["prompt", "new", "faith", "--task", "faithfulness"]).output.strip() == "faith@1"
    result = runner.invoke(["judge", "run", "--dataset", "d", "--prompt", "faith@1"])
    assert result.exit_code == 0, result.output
    assert "faith@1: run 1 done — 2/2 targets judged (2 verdicts" in result.output
    assert "skipped 1 samples with nothing to measure (no verdict): 1 no claims" in result.output
    report = runner.invoke(["report", "--dataset", "d", "--judge", "faith@1", "--task", "faithfulness", "--format", "json"])
    data = json.loads(report.output)
    assert list(data["tasks"]) == ["faithfulness"]
    assert data["tasks"]["faithfulness"]["spearman_rho"]["note"].startswith("no human gold for faithfulness")


def test_the_run_page_shows_the_skipped_samples(client, login, engine, make_sample):
    from bs4 import BeautifulSoup

    metric_samples(make_sample)
    summary = run_judge(engine, RunSpec(dataset="d", prompt=new_prompt(engine, "faith", "faithfulness"), backend="baseline"))
    login("eng", "engineer")
    page = BeautifulSoup(client.get(f"/runs/{summary.run_id}").data, "html.parser")
    assert page.select_one("#run-skipped").get_text() == "1 samples with nothing to measure (no verdict): 1 no claims"
    assert page.select_one("#run-count").get_text() == "2/2"


def test_killed_with_sigkill_a_metric_run_resumes_without_asking_a_cached_step_again(
        db_url, engine, session, fake_llm, claims_dataset, tmp_path):
    fake_llm.latency = 0.03
    fake_llm.keep_requests = False
    claims_dataset(n_samples=60, claims_per_sample=5)
    prompt = new_prompt(engine, "faith", "faithfulness", model="fake-model")
    command = [sys.executable, "-m", "calibrate", "judge", "run", "--db", db_url, "--dataset", "many", "--prompt", prompt,
               "--backend", "openai", "--base-url", fake_llm.openai_base, "--api-key-env", "", "--concurrency", "2"]
    env = dict(os.environ, CALIBRATE_INSTANCE=str(tmp_path / "instance"))
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = db_url.removeprefix("sqlite:///")
    deadline = time.monotonic() + 30
    committed = 0
    while time.monotonic() < deadline and committed < 10:
        conn = sqlite3.connect(path, timeout=10)
        try:
            committed = conn.execute("select count(*) from verdict").fetchone()[0]
        finally:
            conn.close()
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    conn = sqlite3.connect(path, timeout=10)
    try:
        committed = conn.execute("select count(*) from verdict").fetchone()[0]
        cached = conn.execute("select count(*) from responsecache").fetchone()[0]
    finally:
        conn.close()
    assert 10 <= committed < 60, "the kill must land mid-run"
    assert cached == 5 * committed  # every committed sample's step answers are in the cache
    before = fake_llm.stats()["requests"]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "60/60" in done.stdout
    assert fake_llm.stats()["requests"] - before == 300 - cached  # only the steps not in the cache are asked
    counts = dict(session.exec(select(Verdict.target_key, func.count()).group_by(Verdict.target_key)).all())
    assert len(counts) == 60 and set(counts.values()) == {1}


def test_cli_report_of_a_metric_judge_matches_scipy_spearman_on_the_per_sample_values(runner, make_sample, session, tmp_path):
    from scipy import stats as sps

    contexts = ("Tome 0,4 mg al día de ácido fólico. Evite el alcohol.",)
    claims = {"a": ["Tome 0,4 mg al día.", "Evite el alcohol."], "b": ["Tome 0,4 mg al día.", "Tome 4 mg al día."],
              "c": ["Tome 5 mg al día.", "Tome 4 mg al día."], "d": ["Tome 0,4 mg al día.", "Evite el alcohol.", "Tome 9 mg."]}
    gold = {"a": ["supported", "supported"], "b": ["supported", "unsupported"], "c": ["unsupported", "supported"],
            "d": ["supported", "unsupported", "unsupported"]}
    for sid, texts in claims.items():
        make_sample(external_id=sid, question="¿Cuánto ácido fólico?", answer=" ".join(texts), contexts=contexts, claims=texts)
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"sample_id": sid, "annotator": "ann", "task": "claim_support", "value": v, "claim": i}) + "\n"
                              for sid, values in gold.items() for i, v in enumerate(values)))
    assert runner.invoke(["import", "labels", str(labels), "--dataset", "d"]).exit_code == 0
    runner.invoke(["prompt", "new", "faith", "--task", "faithfulness"])
    assert runner.invoke(["judge", "run", "--dataset", "d", "--prompt", "faith@1"]).exit_code == 0
    result = runner.invoke(["report", "--dataset", "d", "--judge", "faith@1", "--task", "faithfulness", "--format", "json",
                            "--bootstrap", "200"])
    section = json.loads(result.output)["tasks"]["faithfulness"]
    judge = {v.sample_id: float(v.value) for v in verdicts_of(session, "faithfulness").values()}
    assert judge == pytest.approx({1: 1.0, 2: 0.5, 3: 0.0, 4: 2 / 3})  # the baseline's number and name rules
    derived = {1: 1.0, 2: 0.5, 3: 0.5, 4: 1 / 3}
    assert section["n"] == 4
    assert section["alignment"]["value"] == pytest.approx(sps.spearmanr([derived[i] for i in range(1, 5)],
                                                                        [judge[i] for i in range(1, 5)]).statistic)


def test_a_metric_prompt_from_the_web_form_and_its_run_button(app, client, login, engine, session, make_sample):
    from bs4 import BeautifulSoup

    metric_samples(make_sample)
    token = login("eng", "engineer")
    created = client.post("/prompts", data={"name": "recall", "task": "context_recall", "csrf_token": token})
    assert created.status_code == 303 and created.headers["Location"].endswith("/prompts/recall/1")
    page = BeautifulSoup(client.get("/prompts/recall/1").data, "html.parser")
    assert "Statement to attribute: {{ statement.text }}" in page.select_one("#template pre").get_text()
    response = client.post("/prompts/recall/1/run", data={"dataset": "d", "backend": "baseline", "csrf_token": token})
    run_id = int(response.headers["Location"].rsplit("/", 1)[1])
    app.extensions["judge_threads"][run_id].join(30)
    status = BeautifulSoup(client.get(f"/runs/{run_id}/status").data, "html.parser")
    assert status.select_one("#run-status")["data-status"] == "done"
    assert status.select_one("#run-count").get_text() == "2/2"
    assert status.select_one("#run-skipped").get_text().endswith("1 no ground truth")
    assert set(verdicts_of(session, "context_recall")) == {"sample:1", "sample:2"}


def test_answer_relevancy_on_the_fake_server_is_the_mean_cosine_of_its_own_embeddings(engine, session, make_sample):
    from fakellm import FakeLLM, embedding_of, questions_for

    make_sample(external_id="s1", question="How much folic acid a day?",
                answer="Take 0.4 mg of folic acid a day. Avoid alcohol during pregnancy.")
    make_sample(external_id="s2")  # tests/hostile.py markup in the question and the answer
    make_sample(external_id="s3", question="Is it safe?", answer="I don't know, it depends.")
    # The first embeddings call is refused with 429 + Retry-After: 2 (the chat calls are not faulted).
    server = FakeLLM(questions=True, embeddings_script=["429"], retry_after="2").start()
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    try:
        prompt = new_prompt(engine, "rel", "answer_relevancy", model="fake-model", params={"embedding_model": "fake-embed"})
        spec = RunSpec(dataset="d", prompt=prompt, backend="openai", base_url=server.openai_base, api_key_env="",
                       options=fast_options())
        summary = run_judge(engine, spec, sleep=sleep)
        assert summary.status == "done" and summary.n_ok == 3 and summary.retries == 1 and 2.0 in delays
        counts = server.stats()["counts"]
        # One chat call per sample; embeddings only for the two committal answers, one of them twice (the 429).
        assert (counts["openai"], counts["embeddings"], counts["429"]) == (3, 3, 1)
        embedded = [r["body"] for r in server.requests if r["path"].endswith("/embeddings")]
        assert all(body["model"] == "fake-embed" for body in embedded)
        verdicts = verdicts_of(session, "answer_relevancy")
        assert len(verdicts) == 3  # one verdict per sample
        for sample in session.exec(select(Sample)).all():
            verdict = verdicts[f"sample:{sample.id}"]
            steps = json.loads(verdict.raw)["steps"]
            if sample.external_id == "s3":
                assert verdict.value == "0" and steps[0]["noncommittal"] == 1
                assert verdict.reason == "the answer is noncommittal: relevancy 0"
                continue
            generated = questions_for(sample.answer, 3)
            assert steps[0]["questions"] == generated and steps[0]["noncommittal"] == 0
            question = np.asarray(embedding_of(sample.question))
            rows = np.asarray([embedding_of(text) for text in generated])
            cosines = rows @ question / (np.linalg.norm(rows, axis=1) * np.linalg.norm(question))
            assert float(verdict.value) == pytest.approx(max(0.0, float(cosines.mean())), abs=1e-6)
            assert steps[0]["cosines"] == pytest.approx(cosines.tolist(), abs=1e-6)
        assert 0 < float(verdicts["sample:1"].value) < 1  # the answer shares words with the question, not all

        server.reset()
        again = run_judge(engine, RunSpec(**{**spec.__dict__, "rerun": True}))
        assert server.stats()["requests"] == 0 and again.calls == 0 and again.n_cached == 3
        assert {k: v.value for k, v in verdicts_of(session, "answer_relevancy").items()} == \
            {k: v.value for k, v in verdicts.items()}
    finally:
        server.stop()


def test_the_fake_server_writes_questions_only_for_the_question_step():
    from fakellm import FakeLLM, questions_for

    server = FakeLLM(questions=True).start()
    system = 'Reply with one JSON object: {"questions": ["…"], "noncommittal": 0 or 1}'
    try:
        def ask(path, body):
            return httpx.post(server.url + path, json={"model": "m", **body}, timeout=5).json()

        verdict = ask("/v1/chat/completions", {"messages": [{"role": "user", "content": "Claim to check: x"}]})
        assert json.loads(verdict["choices"][0]["message"]["content"])["verdict"] in ("supported", "unsupported")
        openai = ask("/v1/chat/completions", {"messages": [{"role": "system", "content": system},
                                                           {"role": "user", "content": "Write 2 questions.\n\nAnswer: a b c"}]})
        assert json.loads(openai["choices"][0]["message"]["content"])["questions"] == questions_for("a b c", 2) == \
            ["What about a c?", "What about b?"]
        anthropic = ask("/v1/messages", {"system": [{"type": "text", "text": system}],
                                         "messages": [{"role": "user", "content": "Answer: I DON'T KNOW, sorry."}]})
        assert json.loads(anthropic["content"][0]["text"]) == {"questions": [], "noncommittal": 1,
                                                               "reason": "fake judge: noncommittal"}
    finally:
        server.stop()
