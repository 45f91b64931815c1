"""Backends over httpx.MockTransport: wire formats, error classes, Retry-After, the client factory,
and the runner's retry policy (with a recorded sleep, so nothing waits)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest
from judge_helpers import fast_options

from calibrate.judges import RunSpec, run_judge
from calibrate.judges.backends import (
    AnthropicBackend,
    Endpoint,
    OpenAIBackend,
    Redactor,
    build_client,
    retry_after,
)
from calibrate.judges.errors import FatalBackendError, RateLimited, RequestRejected, RetryableError, Unreachable
from calibrate.judges.execution import run_coroutine
from calibrate.judges.render import Rendered

OPENAI = Endpoint("openai", "http://llm.test/v1", "m", "KEY")
ANTHROPIC = Endpoint("anthropic", "http://llm.test", "claude-x", "KEY")
MESSAGES = Rendered("You judge.", "Claim: x")


def ok_openai(content='{"verdict": "supported"}'):
    return httpx.Response(200, json={"choices": [{"message": {"content": content}}],
                                     "usage": {"prompt_tokens": 12, "completion_tokens": 3,
                                               "prompt_tokens_details": {"cached_tokens": 8}}})


def complete(backend, handler, endpoint=OPENAI, key="sk-secret"):
    async def go():
        async with build_client(endpoint, api_key=key, transport=httpx.MockTransport(handler)) as client:
            return await backend.complete(client, MESSAGES)

    return run_coroutine(go())


def test_the_client_has_explicit_timeouts_and_auth_headers():
    client = build_client(OPENAI, api_key="sk-1")
    assert client.timeout.connect == 5.0 and client.timeout.read == 120.0
    assert client.headers["authorization"] == "Bearer sk-1"
    run_coroutine(client.aclose())
    client = build_client(ANTHROPIC, api_key="sk-2", read_timeout=30, connect_timeout=2)
    assert client.timeout.read == 30 and client.timeout.connect == 2
    assert client.headers["x-api-key"] == "sk-2" and client.headers["anthropic-version"] == "2023-06-01"
    run_coroutine(client.aclose())


def test_openai_request_and_answer():
    seen = {}

    def handler(request):
        seen["url"] = str(request.url)
        seen["body"] = json.loads(request.content)
        return ok_openai()

    completion = complete(OpenAIBackend(OPENAI, {"temperature": 0, "baseline.entities": True, "json_mode": True}), handler)
    assert seen["url"] == "http://llm.test/v1/chat/completions"
    assert seen["body"]["messages"] == [{"role": "system", "content": "You judge."}, {"role": "user", "content": "Claim: x"}]
    assert seen["body"]["temperature"] == 0 and seen["body"]["response_format"] == {"type": "json_object"}
    assert "baseline.entities" not in seen["body"] and "json_mode" not in seen["body"]
    assert (completion.text, completion.input_tokens, completion.output_tokens, completion.cached_input_tokens) == \
        ('{"verdict": "supported"}', 12, 3, 8)


def test_json_mode_is_dropped_when_the_server_refuses_it():
    bodies = []

    def handler(request):
        body = json.loads(request.content)
        bodies.append(body)
        if "response_format" in body:
            return httpx.Response(400, json={"error": {"message": "Unrecognized request argument: response_format"}})
        return ok_openai()

    backend = OpenAIBackend(OPENAI, {})
    complete(backend, handler)
    complete(backend, handler)
    assert ["response_format" in b for b in bodies] == [True, False, False]


def test_anthropic_request_marks_the_prefix_for_caching():
    seen = {}

    def handler(request):
        seen["url"], seen["body"] = str(request.url), json.loads(request.content)
        return httpx.Response(200, json={"content": [{"type": "text", "text": '{"verdict": "unsupported"}'}],
                                         "usage": {"input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 4}})

    completion = complete(AnthropicBackend(ANTHROPIC, {"temperature": 0}), handler, ANTHROPIC)
    assert seen["url"] == "http://llm.test/v1/messages"
    assert seen["body"]["system"] == [{"type": "text", "text": "You judge.", "cache_control": {"type": "ephemeral"}}]
    assert seen["body"]["messages"] == [{"role": "user", "content": "Claim: x"}] and seen["body"]["max_tokens"] == 1024
    assert (completion.input_tokens, completion.cached_input_tokens, completion.output_tokens) == (105, 100, 4)


@pytest.mark.parametrize(
    ("response", "error", "fragment"),
    [
        (httpx.Response(401, json={"error": {"message": "Incorrect API key provided: sk-secret"}}), FatalBackendError, "HTTP 401"),
        (httpx.Response(403, json={"error": {"message": "forbidden"}}), FatalBackendError, "HTTP 403"),
        (httpx.Response(404, json={"error": {"message": "The model `m` does not exist"}}), FatalBackendError, "not found"),
        (httpx.Response(400, json={"error": {"message": "bad"}}), RequestRejected, "HTTP 400"),
        (httpx.Response(422, json={"error": {"message": "bad"}}), RequestRejected, "HTTP 422"),
        (httpx.Response(429, headers={"retry-after": "7"}, json={}), RateLimited, "HTTP 429"),
        (httpx.Response(500, json={}), RetryableError, "HTTP 500"),
        (httpx.Response(503, text="busy"), RetryableError, "HTTP 503"),
        (httpx.Response(408, json={}), RetryableError, "HTTP 408"),
        (httpx.Response(409, json={}), RetryableError, "HTTP 409"),
        (httpx.Response(200, text='{"choices": ['), RetryableError, "not JSON"),
        (httpx.Response(200, json={"result": 1}), RetryableError, "chat-completions format"),
    ],
)
def test_http_errors_are_classified(response, error, fragment):
    with pytest.raises(error, match=fragment) as caught:
        complete(OpenAIBackend(OPENAI, {}, redact=Redactor("sk-secret")), lambda request: response)
    assert "sk-secret" not in str(caught.value)
    if isinstance(caught.value, RateLimited):
        assert caught.value.retry_after == 7


@pytest.mark.parametrize(
    ("exception", "error"),
    [
        (httpx.ConnectError("connection refused"), Unreachable),
        (httpx.ConnectTimeout("slow"), Unreachable),
        (httpx.ReadTimeout("slow"), RetryableError),
        (httpx.RemoteProtocolError("Server disconnected without sending a response."), RetryableError),
    ],
)
def test_transport_failures_are_classified(exception, error):
    def handler(request):
        raise exception

    with pytest.raises(error):
        complete(OpenAIBackend(OPENAI, {}), handler)


def test_retry_after_in_seconds_milliseconds_and_dates():
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert retry_after(httpx.Headers({"retry-after": "2.5"})) == 2.5
    assert retry_after(httpx.Headers({"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    assert retry_after(httpx.Headers({"retry-after": later}), now=now.timestamp()) == pytest.approx(30)
    assert retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert retry_after(httpx.Headers({})) is None


# --------------------------------------------------------------------------- the runner's retry policy


class Recorder:
    def __init__(self):
        self.delays = []

    async def __call__(self, seconds):
        self.delays.append(seconds)


def run_with(engine, claims_dataset, claims_prompt, handler, *, n=1, **options):
    claims_dataset(n_samples=1, claims_per_sample=n)
    sleep = Recorder()
    spec = RunSpec(dataset="many", prompt=claims_prompt(), backend="openai", base_url="http://llm.test/v1", api_key_env="",
                   options=fast_options(**options))
    summary = run_judge(engine, spec, transport=httpx.MockTransport(handler), sleep=sleep, seed=1)
    return summary, sleep.delays


def scripted(*responses):
    queue = list(responses)

    def handler(request):
        item = queue.pop(0) if queue else ok_openai()
        if isinstance(item, Exception):
            raise item
        return item

    return handler


def test_retry_after_is_honoured_in_seconds_and_milliseconds(engine, claims_dataset, claims_prompt):
    handler = scripted(httpx.Response(429, headers={"retry-after": "3"}), httpx.Response(503, headers={"retry-after-ms": "1500"}))
    summary, delays = run_with(engine, claims_dataset, claims_prompt, handler, backoff_base=0.5)
    assert delays == [3.0, 1.5] and summary.n_ok == 1 and summary.retries == 2


def test_backoff_is_exponential_with_jitter_and_stops_after_five_attempts(engine, claims_dataset, claims_prompt):
    handler = scripted(*[httpx.Response(500, json={})] * 5)
    summary, delays = run_with(engine, claims_dataset, claims_prompt, handler, backoff_base=1.0, backoff_max=100)
    assert len(delays) == 4 and summary.n_errors == 1 and summary.calls == 5
    for attempt, delay in enumerate(delays, start=1):
        cap = 2 ** (attempt - 1)
        assert cap / 2 <= delay <= cap
    assert len(set(delays)) == 4


@pytest.mark.parametrize("status", [400, 422])
def test_client_errors_are_never_retried(engine, claims_dataset, claims_prompt, status, session):
    from sqlmodel import select

    from calibrate.models import ResponseCache, Verdict

    summary, delays = run_with(engine, claims_dataset, claims_prompt, scripted(httpx.Response(status, json={"error": {"message": "no"}})))
    assert delays == [] and summary.calls == 1 and summary.n_errors == 1
    verdict = session.exec(select(Verdict)).one()
    assert verdict.status == "error" and f"HTTP {status}" in verdict.error and verdict.value is None
    assert session.exec(select(ResponseCache)).all() == []  # errors are never cached


def test_a_retry_after_beyond_the_limit_gives_up_on_the_item(engine, claims_dataset, claims_prompt):
    handler = scripted(httpx.Response(429, headers={"retry-after": "3600"}))
    summary, delays = run_with(engine, claims_dataset, claims_prompt, handler, max_retry_after=60)
    assert delays == [] and summary.n_errors == 1


def test_timeouts_and_dropped_connections_are_retried(engine, claims_dataset, claims_prompt):
    handler = scripted(ok_openai(), httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("dropped"))
    summary, delays = run_with(engine, claims_dataset, claims_prompt, handler, n=2, concurrency=1)
    assert summary.n_ok == 2 and len(delays) == 2
