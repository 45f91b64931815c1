"""Hostile LLM endpoints (issue 14, findings 5–7): answers that are not the shape the API promises
are a per-item error (retried, never cached) and never crash a run or its rerun; an endpoint that
echoes the API key gets it stored nowhere; deeply nested JSON answers are unparsed verdicts."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import httpx
import pytest
from judge_helpers import fast_options
from sqlmodel import func, select

from calibrate.judges import RunSpec, run_judge
from calibrate.judges.backends import AnthropicBackend, Endpoint, OpenAIBackend, Redactor, build_client
from calibrate.judges.errors import MalformedResponse
from calibrate.judges.execution import run_coroutine
from calibrate.judges.parsing import parse_verdict
from calibrate.judges.render import Rendered
from calibrate.models import ResponseCache, Task, Verdict

OPENAI = Endpoint("openai", "http://llm.test/v1", "m", "KEY")
ANTHROPIC = Endpoint("anthropic", "http://llm.test", "claude-x", "KEY")
VERDICT = '{"verdict": "supported", "reason": "ok"}'


def answer(backend, body):
    """Return the Completion a backend makes of a 200 with `body` (a JSON value, or bytes sent as they are)."""
    endpoint = OPENAI if backend is OpenAIBackend else ANTHROPIC

    def handler(request):
        return httpx.Response(200, content=body) if isinstance(body, bytes) else httpx.Response(200, json=body)

    async def go():
        async with build_client(endpoint, api_key="sk-secret-123", transport=httpx.MockTransport(handler)) as client:
            return await backend(endpoint, {}, redact=Redactor("sk-secret-123")).complete(client, Rendered("s", "u"))

    return run_coroutine(go())


def openai(content=VERDICT, usage=None, **extra):
    body = {"choices": [{"message": {"role": "assistant", "content": content}}], **extra}
    if usage is not None:
        body["usage"] = usage
    return body


def anthropic(content=None, usage=None):
    body = {"content": [{"type": "text", "text": VERDICT}] if content is None else content}
    if usage is not None:
        body["usage"] = usage
    return body


# --------------------------------------------------------------------------- the wire formats (MockTransport)


@pytest.mark.parametrize(("body", "message"), [
    (openai(usage="12 tokens"), "usage is a string, expected an object"),
    (openai(content=7), "choices[0].message.content is a number, expected a string or null"),
    (openai(content={"text": VERDICT}), "choices[0].message.content is an object"),
    (openai(content=[{"type": "text", "text": 7}]), "choices[0].message.content[0].text is a number"),
    (openai(content=["a"]), "choices[0].message.content[0] is a string, expected an object"),
    (openai(usage={"prompt_tokens": "12"}), "usage.prompt_tokens is a string, expected a whole number of 0 or more"),
    (openai(usage={"completion_tokens": -3}), "usage.completion_tokens is -3"),
    (openai(usage={"prompt_tokens": 1.5}), "usage.prompt_tokens is a number"),
    (openai(usage={"prompt_tokens": True}), "usage.prompt_tokens is true/false"),
    (openai(usage={"prompt_tokens_details": []}), "usage.prompt_tokens_details is a list, expected an object"),
    (openai(usage={"prompt_tokens_details": {"cached_tokens": "all"}}), "usage.prompt_tokens_details.cached_tokens is a string"),
    ({"choices": []}, "no choices"),
    ({"id": "x"}, "no choices"),
    ({"choices": "x"}, "choices is a string"),
    ({"choices": [7]}, "no choices[0].message object"),
    ({"choices": [{"message": "hi"}]}, "no choices[0].message object"),
    ([openai()], "the body is a list, not an object"),
    ("supported", "the body is a string, not an object"),
    (b"[" * 100_000 + b"]" * 100_000, "nests deeper than 64 levels"),
    (b'{"choices": [', "is not JSON"),
    (b"\xff\xfe not text", "is not JSON"),
])
def test_an_openai_answer_that_breaks_the_promised_shape_is_malformed(body, message):
    with pytest.raises(MalformedResponse, match=message.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")) as caught:
        answer(OpenAIBackend, body)
    assert str(caught.value).startswith("the answer from http://llm.test/v1/chat/completions ")


@pytest.mark.parametrize(("body", "message"), [
    (anthropic(content=7), "content is a number, expected a list of blocks"),
    (anthropic(content="supported"), "content is a string"),
    ({"id": "x"}, "no content list"),
    (anthropic(content=[7]), r"content\[0\] is a number, expected an object"),
    (anthropic(content=[{"type": "text", "text": ["a"]}]), r"content\[0\]\.text is a list, expected a string"),
    (anthropic(content=[{"type": "text"}]), r"content\[0\]\.text is null"),
    (anthropic(usage="12 tokens"), "usage is a string, expected an object"),
    (anthropic(usage={"input_tokens": "12"}), r"usage\.input_tokens is a string"),
    (anthropic(usage={"cache_read_input_tokens": -1}), r"usage\.cache_read_input_tokens is -1"),
    ([anthropic()], "the body is a list, not an object"),
    (b"[" * 100_000 + b"]" * 100_000, "nests deeper than 64 levels"),
])
def test_an_anthropic_answer_that_breaks_the_promised_shape_is_malformed(body, message):
    with pytest.raises(MalformedResponse, match=message) as caught:
        answer(AnthropicBackend, body)
    assert str(caught.value).startswith("the answer from http://llm.test/v1/messages ")


@pytest.mark.parametrize(("backend", "body", "text", "tokens"), [
    (OpenAIBackend, openai(), VERDICT, (None, None, 0)),
    (OpenAIBackend, openai(content=None, usage=None), "", (None, None, 0)),
    (OpenAIBackend, openai(usage={"prompt_tokens": 12.0, "completion_tokens": 3, "prompt_tokens_details": None}), VERDICT, (12, 3, 0)),
    (OpenAIBackend, openai(content=[{"type": "text", "text": "a"}, {"type": "image_url"}, {"text": "b"}]), "ab", (None, None, 0)),
    (OpenAIBackend, openai(usage={"prompt_tokens": 9, "completion_tokens": None,
                                  "prompt_tokens_details": {"cached_tokens": 4}}), VERDICT, (9, None, 4)),
    (AnthropicBackend, anthropic(content=[{"type": "thinking", "thinking": 7}, {"type": "text", "text": "x"}]), "x", (None, None, 0)),
    (AnthropicBackend, anthropic(usage={"input_tokens": 5, "output_tokens": 2, "cache_read_input_tokens": 10,
                                        "cache_creation_input_tokens": None}), VERDICT, (15, 2, 10)),
])
def test_answers_within_the_promised_shape_are_read(backend, body, text, tokens):
    completion = answer(backend, body)
    assert completion.text == text
    assert (completion.input_tokens, completion.output_tokens, completion.cached_input_tokens) == tokens


def test_a_deeply_nested_json_verdict_is_unparsed_not_a_crash():
    task = Task(name="claim_support", kind="categorical", target="claim", labels=["supported", "unsupported"])
    for raw in ["[" * 100_000 + "]" * 100_000, "Here: " + '{"a": ' * 100_000 + "1" + "}" * 100_000,
                '{"verdict": "supported", "why": ' + "[" * 70 + "]" * 70 + "}"]:
        parsed = parse_verdict(task, raw)
        assert (parsed.status, parsed.value, parsed.error) == ("unparsed", None, "JSON nested deeper than 64 levels")
    assert parse_verdict(task, '{"verdict": "supported", "why": ' + "[" * 60 + "]" * 60 + "}").value == "supported"


# --------------------------------------------------------------------------- runs against the fake server


def spec(server, prompt, backend="openai", **options):
    base = server.openai_base if backend == "openai" else server.anthropic_base
    return RunSpec(dataset="many", prompt=prompt, backend=backend, base_url=base, api_key_env=options.pop("api_key_env", ""),
                   options=fast_options(**options))


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
@pytest.mark.parametrize("fault", ["usage_string", "content_number", "json_array", "deep_json"])
def test_malformed_answers_are_item_errors_never_cached_and_a_rerun_does_not_crash(engine, session, fake_llm, claims_dataset,
                                                                                   claims_prompt, backend, fault):
    claims_dataset(n_samples=3, claims_per_sample=2)
    prompt = claims_prompt()
    fake_llm.faults = {fault: 1.0}
    first = run_judge(engine, spec(fake_llm, prompt, backend, max_attempts=2))
    assert first.status == "done" and first.n_done == 6 and first.n_errors == 6 and first.calls == 12
    errors = session.exec(select(Verdict.error)).all()
    assert len(errors) == 6 and all("does not follow" in e or "nests deeper" in e for e in errors)
    assert all(e.endswith("(gave up after 2 attempts)") for e in errors)
    assert session.exec(select(func.count()).select_from(ResponseCache)).one() == 0
    again = run_judge(engine, spec(fake_llm, prompt, backend, max_attempts=2))  # the server still answers so
    assert again.status == "done" and again.calls == 12
    session.rollback()
    assert session.exec(select(Verdict.status)).all() == ["error"] * 6
    assert session.exec(select(func.count()).select_from(ResponseCache)).one() == 0
    fake_llm.faults = {}
    healed = run_judge(engine, spec(fake_llm, prompt, backend, max_attempts=2))
    assert healed.status == "done" and healed.n_ok == 6  # (its n_errors is the negative count of issue 14, item 10)
    session.rollback()
    statuses = session.exec(select(Verdict.status)).all()
    assert statuses == ["ok"] * 6
    cached = session.exec(select(ResponseCache.response)).all()
    assert len(cached) == 6 and all(json.loads(text)["verdict"] in ("supported", "unsupported") for text in cached)


def test_a_mix_of_malformed_answers_is_retried_to_verdicts(engine, session, fake_llm, claims_dataset, claims_prompt):
    fake_llm.faults = {"usage_string": 0.15, "content_number": 0.15, "json_array": 0.1, "deep_json": 0.05}
    claims_dataset(n_samples=20, claims_per_sample=5)
    summary = run_judge(engine, spec(fake_llm, claims_prompt(), concurrency=16, max_attempts=10))
    assert summary.status == "done" and summary.n_done == 100 and summary.retries > 0
    assert summary.n_ok + summary.n_errors + summary.n_unparsed == 100 and summary.n_ok >= 95


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_an_endpoint_that_echoes_the_api_key_gets_it_stored_nowhere(engine, db_url, session, fake_llm, claims_dataset,
                                                                    claims_prompt, monkeypatch, caplog, backend):
    secret = "sk-echo-" + "5b2e" * 10
    monkeypatch.setenv("CALIBRATE_TEST_KEY", secret)
    caplog.set_level(logging.DEBUG)
    fake_llm.echo_key = True
    fake_llm.script = ["500", "500"]  # the first item (it goes alone) ends as an error whose message echoes the key too
    claims_dataset(n_samples=10, claims_per_sample=2)
    summary = run_judge(engine, spec(fake_llm, claims_prompt(), backend, api_key_env="CALIBRATE_TEST_KEY", max_attempts=2))
    assert summary.status == "done" and summary.n_ok == 19 and summary.n_errors == 1
    sent = fake_llm.requests[0]["headers"]["authorization" if backend == "openai" else "x-api-key"]
    assert sent == (f"Bearer {secret}" if backend == "openai" else secret)  # it was sent, and echoed…
    verdicts = session.exec(select(Verdict)).all()
    ok = [v for v in verdicts if v.status == "ok"]
    assert ok and all("(you sent " in v.raw and "***" in v.raw and "***" in v.reason for v in ok)  # …and redacted
    assert all("***" in v.error for v in verdicts if v.status == "error")
    cached = session.exec(select(ResponseCache.response)).all()
    assert cached and all("***" in text for text in cached)
    fake_llm.api_key = "another-key-entirely"  # a 401 that echoes it stops the run: its error is redacted too
    failed = run_judge(engine, spec(fake_llm, claims_prompt("other", model="fake-model-2"), backend,
                                    api_key_env="CALIBRATE_TEST_KEY"))
    assert failed.status == "failed" and "***" in failed.error and secret not in failed.error
    engine.dispose()
    path = Path(db_url.removeprefix("sqlite:///"))
    blob = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    dump = "\n".join(sqlite3.connect(path).iterdump())
    assert secret.encode() not in blob and secret not in dump and secret not in caplog.text


def test_the_redactor_covers_escaped_spellings_and_leaves_placeholder_keys_alone():
    redact = Redactor("sk-a/b+c=d-0123")
    assert redact("x sk-a/b+c=d-0123 y") == "x *** y"
    assert redact("q=sk-a%2Fb%2Bc%3Dd-0123") == "q=***"
    echoed = {"sk-a/b+c=d-0123": ["Bearer sk-a/b+c=d-0123", 1, {"k": "sk-a\\/b"}]}
    assert redact.data(echoed) == {"***": ["Bearer ***", 1, {"k": "sk-a\\/b"}]}
    assert Redactor("x")("context") == "context" and Redactor("EMPTY")("EMPTY answer") == "EMPTY answer"
    assert Redactor(None)("anything") == "anything"
