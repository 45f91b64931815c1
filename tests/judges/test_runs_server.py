"""End-to-end runs against the real local fake LLM server: wire formats, faults, fail-fast, secrets, resume."""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from judge_helpers import fast_options
from sqlmodel import func, select

from calibrate.judges import NothingToDo, RunSetupError, RunSpec, prepare_run, run_judge
from calibrate.models import JudgeRun, ResponseCache, Verdict

ROOT = Path(__file__).resolve().parents[2]


def spec(server, prompt, *, backend="openai", **kwargs):
    options = kwargs.pop("options", None) or fast_options()
    base = server.openai_base if backend == "openai" else server.anthropic_base
    return RunSpec(dataset=kwargs.pop("dataset", "many"), prompt=prompt, backend=backend, base_url=base,
                   api_key_env=kwargs.pop("api_key_env", ""), options=options, **kwargs)


def verdict_counts(session):
    rows = session.exec(select(Verdict.target_key, func.count()).group_by(Verdict.target_key)).all()
    return dict(rows)


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_a_run_stores_one_verdict_per_claim_over_each_wire_format(engine, session, fake_llm, claims_dataset, claims_prompt, backend):
    claims_dataset(n_samples=6, claims_per_sample=5)
    prompt = claims_prompt()
    summary = run_judge(engine, spec(fake_llm, prompt, backend=backend))
    assert summary.status == "done" and summary.n_done == summary.n_total == 30
    counts = verdict_counts(session)
    assert len(counts) == 30 and set(counts.values()) == {1}
    values = {v.value for v in session.exec(select(Verdict)).all()}
    assert values <= {"supported", "unsupported"} and values
    assert fake_llm.stats()["counts"][backend] == 30
    request = fake_llm.requests[0]
    if backend == "anthropic":
        assert request["path"] == "/v1/messages"
        system = request["body"]["system"]
        assert system[0]["cache_control"] == {"type": "ephemeral"}
        assert "Claim to check" in request["body"]["messages"][-1]["content"]
    else:
        assert request["path"] == "/v1/chat/completions"
        roles = [m["role"] for m in request["body"]["messages"]]
        assert roles == ["system", "user"]
        assert request["body"]["response_format"] == {"type": "json_object"}
    # The shared prefix is identical for every item; only the last message changes.
    systems = {str(r["body"].get("system") or r["body"]["messages"][0]["content"]) for r in fake_llm.requests}
    assert len(systems) == 1
    run = session.exec(select(JudgeRun)).one()
    assert run.input_tokens > 0 and run.output_tokens > 0


def test_fault_mix_over_a_thousand_items_ends_with_each_item_judged_or_errored_once(engine, session, fake_llm, claims_dataset, claims_prompt):
    fake_llm.faults = {"429": 0.20, "500": 0.10, "timeout": 0.05, "invalid_json": 0.10}
    fake_llm.hang = 0.4
    fake_llm.keep_requests = False
    claims_dataset(n_samples=200, claims_per_sample=5)
    prompt = claims_prompt()
    summary = run_judge(engine, spec(fake_llm, prompt, options=fast_options(concurrency=32, read_timeout=0.15)))
    counts = verdict_counts(session)
    assert len(counts) == 1000 and set(counts.values()) == {1}
    statuses = dict(session.exec(select(Verdict.status, func.count()).group_by(Verdict.status)).all())
    assert statuses.get("ok", 0) + statuses.get("error", 0) + statuses.get("unparsed", 0) == 1000
    assert statuses.get("error", 0) > 0 and statuses["ok"] > 900  # 0.45^5 ≈ 2 % give up after five attempts
    errors = session.exec(select(Verdict).where(Verdict.status == "error")).all()
    assert all(v.value is None and v.error for v in errors)
    assert summary.retries > 0 and summary.status == "done"
    stats = fake_llm.stats()["counts"]
    assert stats["429"] and stats["500"] and stats["timeout"] and stats["invalid_json"]
    # Errors are never cached: a second run retries exactly the errored items, and only those.
    cached = session.exec(select(func.count()).select_from(ResponseCache)).one()
    assert cached == statuses["ok"]
    fake_llm.faults = {}
    fake_llm.reset()
    again = run_judge(engine, spec(fake_llm, prompt))
    assert fake_llm.stats()["counts"]["ok"] == statuses["error"]
    assert again.n_done == 1000
    session.rollback()  # end the test session's read snapshot
    assert session.exec(select(func.count()).select_from(Verdict).where(Verdict.status == "error")).one() == 0


@pytest.mark.parametrize("fault", ["drop", "wrong_schema", "500"])
def test_transient_faults_are_retried(engine, session, fake_llm, claims_dataset, claims_prompt, fault):
    fake_llm.script = [fault, fault]
    claims_dataset(n_samples=1, claims_per_sample=2)
    summary = run_judge(engine, spec(fake_llm, claims_prompt()))
    assert summary.n_ok == 2 and summary.retries == 2


def test_a_garbage_answer_is_unparsed_with_its_raw_text(engine, session, fake_llm, claims_dataset, claims_prompt):
    fake_llm.script = ["garbage"]
    claims_dataset(n_samples=1, claims_per_sample=1)
    summary = run_judge(engine, spec(fake_llm, claims_prompt()))
    verdict = session.exec(select(Verdict)).one()
    assert (verdict.status, verdict.value, verdict.raw) == ("unparsed", None, "I would rather not say.")
    assert summary.n_unparsed == 1


def test_429_lowers_the_concurrency(engine, fake_llm, claims_dataset, claims_prompt):
    from calibrate.judges import execution

    seen = []
    original = execution.AdaptiveLimit.rate_limited

    def spy(self):
        original(self)
        seen.append(self.limit)

    fake_llm.faults = {"429": 0.5}
    claims_dataset(n_samples=10, claims_per_sample=5)
    execution.AdaptiveLimit.rate_limited = spy
    try:
        run_judge(engine, spec(fake_llm, claims_prompt(), options=fast_options(concurrency=16, max_attempts=8)))
    finally:
        execution.AdaptiveLimit.rate_limited = original
    assert seen and min(seen) < 16


# --------------------------------------------------------------------------- fail fast


def test_a_missing_key_variable_stops_before_any_call(engine, fake_llm, claims_dataset, claims_prompt, monkeypatch):
    monkeypatch.delenv("CALIBRATE_TEST_KEY", raising=False)
    claims_dataset(n_samples=2)
    with pytest.raises(RunSetupError, match="CALIBRATE_TEST_KEY"):
        prepare_run(engine, spec(fake_llm, claims_prompt(), api_key_env="CALIBRATE_TEST_KEY"))
    assert fake_llm.stats()["requests"] == 0


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ({"api_key": "right-key"}, "refused the credentials (HTTP 401)"),
        ({"models": ["other-model"]}, "not found (HTTP 404)"),
    ],
)
def test_bad_credentials_or_model_stop_the_run_at_the_first_call(engine, session, fake_llm, claims_dataset, claims_prompt,
                                                                 monkeypatch, setup, message):
    for name, value in setup.items():
        setattr(fake_llm, name, value)
    monkeypatch.setenv("CALIBRATE_TEST_KEY", "wrong-key-123")
    claims_dataset(n_samples=20, claims_per_sample=5)
    summary = run_judge(engine, spec(fake_llm, claims_prompt(), api_key_env="CALIBRATE_TEST_KEY",
                                     options=fast_options(concurrency=16)))
    assert summary.status == "failed" and message in summary.error
    assert "\n" not in summary.error and "wrong-key-123" not in summary.error
    assert fake_llm.stats()["requests"] == 1
    assert session.exec(select(func.count()).select_from(Verdict)).one() == 0


def test_an_unreachable_base_url_stops_the_run_at_once(engine, claims_dataset, claims_prompt):
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    claims_dataset(n_samples=20, claims_per_sample=5)
    run = RunSpec(dataset="many", prompt=claims_prompt(), backend="openai", base_url=f"http://127.0.0.1:{port}/v1",
                  api_key_env="", options=fast_options())
    summary = run_judge(engine, run)
    assert summary.status == "failed" and "cannot reach" in summary.error
    # "At once": one call, no retry or backoff, nothing written (no clock: bench/bench_judge.py times runs).
    assert summary.calls == 1 and summary.retries == 0 and summary.n_done == 0


def test_the_api_key_is_never_stored_or_logged(engine, db_url, fake_llm, claims_dataset, claims_prompt, monkeypatch, caplog):
    secret = "sk-test-" + "7f3a9c" * 6
    monkeypatch.setenv("CALIBRATE_TEST_KEY", secret)
    caplog.set_level(logging.DEBUG)
    claims_dataset(n_samples=4, claims_per_sample=5)
    prompt = claims_prompt()
    ok = run_judge(engine, spec(fake_llm, prompt, api_key_env="CALIBRATE_TEST_KEY"))
    assert ok.status == "done"
    assert fake_llm.requests[0]["headers"]["authorization"] == f"Bearer {secret}"  # it was sent…
    fake_llm.api_key = "another"  # …and a server that echoes it in a 401 gets it redacted
    failed = run_judge(engine, spec(fake_llm, claims_prompt("other", model="fake-model-2"), api_key_env="CALIBRATE_TEST_KEY"))
    assert failed.status == "failed" and "***" in failed.error
    engine.dispose()
    path = Path(db_url.removeprefix("sqlite:///"))
    blob = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    dump = "\n".join(sqlite3.connect(path).iterdump())
    assert secret.encode() not in blob and secret not in dump
    assert secret not in caplog.text and "CALIBRATE_TEST_KEY" in dump  # the variable's name is kept, not its value


# --------------------------------------------------------------------------- cache, budget, resume


def test_a_rerun_is_answered_from_the_cache_with_no_call(engine, session, fake_llm, claims_dataset, claims_prompt):
    claims_dataset(n_samples=10, claims_per_sample=5)
    prompt = claims_prompt()
    first = run_judge(engine, spec(fake_llm, prompt))
    assert first.calls == 50
    with pytest.raises(NothingToDo):
        prepare_run(engine, spec(fake_llm, prompt))
    fake_llm.reset()
    second = run_judge(engine, spec(fake_llm, prompt, rerun=True))
    assert fake_llm.stats()["requests"] == 0
    assert second.n_cached == 50 and second.calls == 0 and second.n_done == 50
    assert verdict_counts(session) and set(verdict_counts(session).values()) == {1}


def test_a_budget_stops_cleanly_and_a_second_run_continues(engine, session, fake_llm, claims_dataset, claims_prompt):
    claims_dataset(n_samples=10, claims_per_sample=5)
    prompt = claims_prompt()
    first = run_judge(engine, spec(fake_llm, prompt, options=fast_options(max_calls=20)))
    assert first.status == "stopped" and "--max-calls" in first.error
    assert first.calls == 20 and first.n_done == 20
    second = run_judge(engine, spec(fake_llm, prompt))
    assert second.status == "done" and second.n_done == 50 and second.calls == 30
    assert second.run_id == first.run_id  # the interrupted run was taken up
    assert set(verdict_counts(session).values()) == {1}
    assert fake_llm.stats()["requests"] == 50


def test_a_resumed_run_counts_no_negative_errors(engine, session, fake_llm, claims_dataset, claims_prompt):
    claims_dataset(n_samples=10, claims_per_sample=5)
    prompt = claims_prompt()
    fake_llm.script = ["500"] * 14  # the first 14 calls fail, once each: 14 errors
    first = run_judge(engine, spec(fake_llm, prompt, options=fast_options(concurrency=1, max_attempts=1)))
    assert (first.n_done, first.n_ok, first.n_errors) == (50, 36, 14)
    second = run_judge(engine, spec(fake_llm, prompt))  # the 14 errors are judged again, and succeed
    assert second.calls == 14
    assert (second.n_done, second.n_ok, second.n_unparsed, second.n_errors) == (50, 14, 0, 0)
    assert second.lines()[0] == (f"{prompt}: run {second.run_id} done — 50/50 targets judged (14 verdicts, 0 unparsed, "
                                 "0 errors, 0 from the cache; 36 judged before, 14 earlier errors judged again)")
    run = session.get(JudgeRun, second.run_id)
    assert (run.n_done, run.n_errors) == (50, 0)


def test_a_token_budget_stops_the_run(engine, session, fake_llm, claims_dataset, claims_prompt):
    claims_dataset(n_samples=10, claims_per_sample=5)
    # The writer commits only at the end (a loaded machine at its slowest): the budget must not
    # wait for written results to see the tokens spent.
    options = fast_options(max_tokens=2000, concurrency=1, flush_interval=600, batch_size=10_000)
    summary = run_judge(engine, spec(fake_llm, claims_prompt(), options=options))
    assert summary.status == "stopped" and "--max-tokens" in summary.error
    spent = [v.input_tokens + v.output_tokens for v in session.exec(select(Verdict)).all()]
    assert len(spent) == summary.n_done == fake_llm.stats()["requests"] < 50
    # One call at a time: the run stops at the first call that reaches the budget, not later.
    assert sum(spent) - max(spent) < 2000 <= sum(spent)


def test_killed_with_sigkill_and_restarted_it_finishes_without_duplicates_or_repeated_calls(
        db_url, engine, session, fake_llm, claims_dataset, claims_prompt, tmp_path):
    fake_llm.latency = 0.02
    fake_llm.keep_requests = False
    claims_dataset(n_samples=60, claims_per_sample=5)
    prompt = claims_prompt()
    command = [sys.executable, "-m", "calibrate", "judge", "run", "--db", db_url, "--dataset", "many", "--prompt", prompt,
               "--backend", "openai", "--base-url", fake_llm.openai_base, "--api-key-env", "", "--concurrency", "4"]
    env = dict(os.environ, CALIBRATE_INSTANCE=str(tmp_path / "instance"))
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = db_url.removeprefix("sqlite:///")
    deadline = time.monotonic() + 30
    committed: set[str] = set()
    while time.monotonic() < deadline:
        conn = sqlite3.connect(path, timeout=10)
        try:
            committed = {row[0] for row in conn.execute("select target_key from verdict")}
        finally:
            conn.close()
        if len(committed) >= 60:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert 60 <= len(committed) < 300, "the kill must land mid-run"
    calls_before = fake_llm.stats()["requests"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "300/300" in done.stdout
    counts = verdict_counts(session)
    assert len(counts) == 300 and set(counts.values()) == {1}
    # Items answered before the kill were never called again; only those in flight or unwritten were.
    answers = fake_llm.stats()["answers"]
    assert sum(answers.values()) - 300 <= 4 + 25  # at most: calls in flight + one unwritten batch
    assert fake_llm.stats()["requests"] - calls_before <= 300 - len(committed) + 4
    run = session.exec(select(JudgeRun)).all()
    assert len(run) == 1 and run[0].status == "done" and run[0].params["attempts"] == 2


def test_tokens_latency_and_cost_are_accounted_from_an_editable_price_table(engine, session, fake_llm, claims_dataset,
                                                                            claims_prompt, tmp_path):
    from calibrate.judges.prices import load_prices

    (tmp_path / "prices.json").write_text('{"models": {"fake-model": {"input": 1.0, "output": 2.0}}}')
    prices = load_prices(tmp_path)
    assert prices["fake-model"].input == 1.0 and "gpt-4o-mini" in prices  # bundled entries stay
    claims_dataset(n_samples=2, claims_per_sample=5)
    summary = run_judge(engine, spec(fake_llm, claims_prompt()), prices=prices)
    verdicts = session.exec(select(Verdict)).all()
    assert all(v.latency_ms and v.latency_ms > 0 and v.input_tokens and v.output_tokens for v in verdicts)
    expected = sum(v.input_tokens * 1.0 + v.output_tokens * 2.0 for v in verdicts) / 1_000_000
    run = session.exec(select(JudgeRun)).one()
    assert run.cost == pytest.approx(expected) and summary.cost == pytest.approx(expected) and summary.priced
    assert run.input_tokens == sum(v.input_tokens for v in verdicts)
    unpriced = run_judge(engine, spec(fake_llm, claims_prompt("other", model="unknown-model")), prices=prices)
    assert not unpriced.priced and "cost unknown" in unpriced.lines()[1]
