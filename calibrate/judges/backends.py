"""Judge backends over httpx: OpenAI-compatible chat completions and Anthropic Messages.

`build_client` is the one function that makes the `httpx.AsyncClient` (explicit timeouts:
connect 5 s, read 120 s by default — httpx's own 5 s read timeout kills most LLM calls — and
the auth headers); backends receive it and never build their own. Tests pass a
`transport` (an `httpx.MockTransport`) to the same function.

A backend turns the rendered messages into one HTTP request and the response into a
`Completion`, or raises an error from `calibrate.judges.errors` (see the tree there):
401/403 and 404 stop the run, 400/413/422 are the item's error, 408/409/429/5xx, timeouts and
dropped connections are retried by the runner.

Every 200 is checked against the shape the API promises (`OpenAIBackend.completion`,
`AnthropicBackend.completion`): anything else — not JSON, nested deeper than 64 levels, a JSON
array, no `choices`, `content` a number, `usage` a string, a negative token count — raises
`MalformedResponse`, which the runner retries like a 5xx and then records as the item's error;
it never reaches the response cache.

The API key is read from the environment variable the user names and sent only in headers.
Whatever leaves a backend passes through its `Redactor` first: every error message, and every
string of every answer (so `verdict.raw`, `verdict.reason`, the response cache and the run's
error never hold it, even from an endpoint that echoes the key or the `Authorization` header).
"""

from __future__ import annotations

import json
import os
import ssl
import time
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

import httpx

from calibrate.ingest.fields import kind_of
from calibrate.judges.errors import (
    BackendError,
    FatalBackendError,
    MalformedResponse,
    RateLimited,
    RequestRejected,
    RetryableError,
    RunSetupError,
    Unreachable,
)
from calibrate.judges.render import Rendered
from calibrate.judges.sandbox import DEFAULT_MAX_ANSWER_BYTES
from calibrate.judges.transport import WIRE_FACTOR, AnswerTooLarge, H11Transport, too_large
from calibrate.reasons import Reason
from calibrate.text.json_values import MAX_NESTING, NestingTooDeep, load_json

BACKENDS = ("openai", "anthropic", "baseline")
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
ANTHROPIC_VERSION = "2023-06-01"
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 120.0
RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 521, 522, 524, 529})
# Keys of a version's params that configure calibrate, not the model: never sent.
LOCAL_PARAMS = ("json_mode",)


@dataclass(frozen=True)
class Endpoint:
    """Where a run sends its calls; holds the *name* of the key variable, never the key."""

    backend: str
    base_url: str = ""
    model: str = ""
    api_key_env: str | None = None

    @property
    def needs_key(self) -> bool:
        return self.backend in ("openai", "anthropic") and bool(self.api_key_env)


@dataclass
class Completion:
    """A judge's answer: its text and what it cost."""

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int = 0
    latency_ms: float | None = None


def read_api_key(endpoint: Endpoint) -> str | None:
    """Return the API key from the environment variable the endpoint names (RunSetupError if unset)."""
    if not endpoint.needs_key:
        return None
    key = os.environ.get(endpoint.api_key_env or "", "")
    if not key.strip():
        raise RunSetupError(Reason("api_key_missing", api_key_env=endpoint.api_key_env))
    return key.strip()


class Redactor:
    """Replace the API key in any text that could reach the database, a log or a report.

    Besides the key itself, the spellings an echo may use: JSON-escaped and URL-encoded. A
    "key" shorter than `MIN_SECRET` characters is a placeholder for a server without keys
    (`EMPTY`, `ollama`, `x`) and is left alone: replacing every "x" would corrupt answers.
    """

    MIN_SECRET = 8

    def __init__(self, secret: str | None) -> None:
        self.secret = secret if secret and len(secret) >= self.MIN_SECRET else None
        spellings = {self.secret, json.dumps(self.secret)[1:-1], quote(self.secret, safe="")} if self.secret else set()
        self.spellings = sorted(spellings, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for spelling in self.spellings:
            if spelling in text:
                text = text.replace(spelling, "***")
        return text

    def data(self, value: Any) -> Any:
        """Return a parsed JSON answer with the key redacted from every string in it (keys of objects too)."""
        if not self.spellings:
            return value
        if isinstance(value, str):
            return self(value)
        if isinstance(value, list):
            return [self.data(item) for item in value]
        if isinstance(value, dict):
            return {self(key): self.data(item) for key, item in value.items()}
        return value


class ShardedTransport(httpx.AsyncBaseTransport):
    """Spread requests over several small connection pools.

    httpcore's pool scans all of its connections for every request it assigns, so its CPU
    cost per request grows with the pool: measured on this project's benchmark machine,
    2,000 calls over one pool of 64 connections took 17 s of CPU, over sixteen pools of four
    1.6 s (bench/results/judge.md). Each request goes to the least busy pool.
    """

    PER_POOL = 4

    def __init__(self, max_connections: int, max_answer_bytes: int | None = None, **kwargs: Any) -> None:
        self.max_answer_bytes = max_answer_bytes
        shards = max(1, -(-max_connections // self.PER_POOL))
        per_pool = -(-max_connections // shards)
        limits = httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool)
        # One TLS context for all pools: loading the CA bundle costs ~20 ms each time.
        kwargs.setdefault("verify", ssl.create_default_context())
        self.pools = [httpx.AsyncHTTPTransport(limits=limits, **kwargs) for _ in range(shards)]
        self.load = [0] * shards

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        index = min(range(len(self.pools)), key=self.load.__getitem__)
        self.load[index] += 1
        try:
            response = await self.pools[index].handle_async_request(request)
            raw = bytearray()
            try:  # read (undecoded, capped) to release the connection before the slot
                async for chunk in response.aiter_raw():
                    raw += chunk
                    if self.max_answer_bytes is not None and len(raw) > WIRE_FACTOR * self.max_answer_bytes:
                        raise too_large(WIRE_FACTOR * self.max_answer_bytes, self.max_answer_bytes, wire=True)
            finally:
                await response.aclose()
        finally:
            self.load[index] -= 1
        return httpx.Response(response.status_code, headers=response.headers, stream=httpx.ByteStream(bytes(raw)),
                              extensions=response.extensions)

    async def aclose(self) -> None:
        for pool in self.pools:
            await pool.aclose()


def build_client(
    endpoint: Endpoint,
    *,
    api_key: str | None = None,
    connect_timeout: float = CONNECT_TIMEOUT,
    read_timeout: float = READ_TIMEOUT,
    max_connections: int = 8,
    transport: httpx.AsyncBaseTransport | None = None,
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
) -> httpx.AsyncClient:
    """Return the AsyncClient a run uses: explicit timeouts, auth headers, enough connections.

    Plain-http endpoints go through `transport.H11Transport` (far less CPU per call: see its
    docstring), https ones through httpx's default transport in a `ShardedTransport`; both stop
    reading an answer at WIRE_FACTOR × `max_answer_bytes` on the wire (AnswerTooLarge), and
    `read_capped` caps the decoded size.
    """
    headers = {"user-agent": "calibrate-judge", "accept-encoding": "gzip, deflate"}  # what read_capped decodes
    if endpoint.backend == "openai" and api_key:
        headers["authorization"] = f"Bearer {api_key}"
    elif endpoint.backend == "anthropic":
        headers["anthropic-version"] = ANTHROPIC_VERSION
        if api_key:
            headers["x-api-key"] = api_key
    timeout = httpx.Timeout(read_timeout, connect=connect_timeout, write=max(read_timeout, 30.0), pool=None)
    if transport is None:
        plain = bool(endpoint.base_url) and httpx.URL(endpoint.base_url).scheme == "http"
        transport = (H11Transport(max_connections, max_answer_bytes) if plain
                     else ShardedTransport(max_connections, max_answer_bytes))
    return httpx.AsyncClient(headers=headers, timeout=timeout, transport=transport, follow_redirects=False,
                             trust_env=False)


# --------------------------------------------------------------------------- retry hints


def retry_after(headers: httpx.Headers, *, now: float | None = None) -> float | None:
    """Return the delay the server asks for: `retry-after-ms`, else `Retry-After` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            value = float(millis) / 1000
            if value >= 0:
                return value
        except ValueError:
            pass
    text = headers.get("retry-after")
    if not text:
        return None
    text = text.strip()
    try:
        value = float(text)
        return value if value >= 0 else None
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = datetime.fromtimestamp(now if now is not None else time.time(), UTC)
    return max(0.0, (when - current).total_seconds())


# --------------------------------------------------------------------------- HTTP


def _decoder(encoding: str) -> Any:
    """Return a zlib decompressor for a Content-Encoding (None for identity); MalformedResponse for others."""
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    raise MalformedResponse(f"the answer is encoded as {encoding!r}; calibrate reads gzip, deflate or plain answers")


async def read_capped(response: httpx.Response, limit: int) -> bytes:
    """Return the answer's body decoded, refusing (AnswerTooLarge) one of more than `limit` bytes.

    Reads and decompresses as it goes, at most `limit` + 1 bytes out of the decompressor, so a
    gzip bomb (1 MB on the wire, 1 GiB unpacked) stops at the cap without being inflated.
    """
    try:
        body = response.content  # already read and decoded (httpx.MockTransport reads what it returns)
    except httpx.ResponseNotRead:
        pass
    else:
        if len(body) > limit:
            raise too_large(len(body), limit)
        return body
    encoding = response.headers.get("content-encoding", "").strip().lower()
    declared = response.headers.get("content-length", "")
    if not encoding and declared.isdigit() and int(declared) > limit:
        raise too_large(int(declared), limit, declared=True)
    decoder = _decoder(encoding)
    out = bytearray()
    async for chunk in response.aiter_raw():
        if decoder is None:
            out += chunk
        else:
            out += decoder.decompress(chunk, limit + 1 - len(out))
        if len(out) > limit:
            raise too_large(limit, limit, decoded=decoder is not None)
    if decoder is not None:
        out += decoder.flush(limit + 1 - len(out)) if len(out) <= limit else b""
        if len(out) > limit:
            raise too_large(limit, limit, decoded=True)
    return bytes(out)


def _text(response: httpx.Response, body: bytes) -> str:
    return body.decode(response.charset_encoding or "utf-8", errors="replace")


def _server_message(text: str) -> str:
    try:
        body = load_json(text)
    except ValueError:  # not JSON, or nested too deeply (NestingTooDeep)
        return text[:200].strip()
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
        if isinstance(error, str):
            return error[:300]
        if body.get("message"):
            return str(body["message"])[:300]
    return ""


class HTTPBackend:
    """What OpenAI-compatible and Anthropic backends share: one POST, errors classified."""

    name = "http"
    path = ""

    def __init__(self, endpoint: Endpoint, params: dict[str, Any], *, redact: Redactor | None = None,
                 max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES) -> None:
        self.endpoint = endpoint
        self.max_answer_bytes = max_answer_bytes
        self.model = endpoint.model
        self.url = endpoint.base_url.rstrip("/") + self.path
        self.target = httpx.URL(self.url)  # parsed once, not per call (~3 % of a call's CPU on loopback)
        self.params = {k: v for k, v in params.items() if not k.startswith("baseline.") and k not in LOCAL_PARAMS}
        self.redact = redact or Redactor(None)

    def body(self, rendered: Rendered) -> dict[str, Any]:
        raise NotImplementedError

    def completion(self, data: Any) -> Completion:
        raise NotImplementedError

    async def complete(self, client: httpx.AsyncClient, rendered: Rendered) -> Completion:
        """Send one judge call and return the answer, or raise a BackendError."""
        started = time.perf_counter()
        data = await self.post(client, self.body(rendered))
        try:
            completion = self.completion(data)
        except MalformedResponse as exc:
            raise MalformedResponse(self.redact(f"the answer from {self.url} {exc}"), status=200) from None
        completion.latency_ms = (time.perf_counter() - started) * 1000
        return completion

    async def post(self, client: httpx.AsyncClient, body: dict[str, Any]) -> Any:
        """Send one request; return its JSON answer with the API key redacted, or raise a BackendError (redacted too)."""
        try:
            return await self._post(client, body)
        except BackendError as exc:
            if self.redact.spellings:
                exc.args = (self.redact(str(exc)),)
            raise

    async def _post(self, client: httpx.AsyncClient, body: dict[str, Any]) -> Any:
        where = self.url
        try:
            async with client.stream("POST", self.target, json=body) as response:
                raw = await read_capped(response, self.max_answer_bytes)
        except AnswerTooLarge as exc:  # the item's error, not retried: the same call would answer the same
            raise RequestRejected(f"the answer from {where} was refused: {exc}", status=200) from None
        except httpx.ConnectTimeout as exc:
            raise Unreachable(f"cannot reach {where}: connect timeout") from exc
        except httpx.TimeoutException as exc:
            raise RetryableError(f"no answer from {where} in time ({type(exc).__name__})") from exc
        except httpx.ConnectError as exc:
            raise Unreachable(f"cannot reach {where}: {exc or 'connection failed'}") from exc
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.NetworkError) as exc:
            raise RetryableError(f"connection to {where} dropped ({type(exc).__name__})") from exc
        except httpx.HTTPError as exc:
            raise RetryableError(f"request to {where} failed ({type(exc).__name__})") from exc
        status = response.status_code
        if 200 <= status < 300:
            try:
                text = _text(response, raw)
                data = load_json(text)
            except NestingTooDeep:
                raise MalformedResponse(f"the answer from {where} nests deeper than {MAX_NESTING} levels (HTTP {status})",
                                        status=status) from None
            except ValueError as exc:  # not JSON, or not text
                raise MalformedResponse(f"the answer from {where} is not JSON (HTTP {status})", status=status) from exc
            # A \uXXXX escape could spell the key where the raw text does not: then check the parsed strings.
            if any(s in text for s in self.redact.spellings) or (self.redact.spellings and "\\u" in text):
                data = self.redact.data(data)
            return data
        message = _server_message(_text(response, raw))
        detail = f": {message}" if message else ""
        if status in (401, 403):
            key = f" (check ${self.endpoint.api_key_env})" if self.endpoint.api_key_env else ""
            raise FatalBackendError(f"{where} refused the credentials (HTTP {status}){key}{detail}", status=status)
        if status == 404:
            raise FatalBackendError(f"model {self.model!r} or URL {where} not found (HTTP 404){detail}", status=status)
        if status in RETRY_STATUSES or status >= 500:
            cls = RateLimited if status == 429 else RetryableError
            raise cls(f"HTTP {status} from {where}{detail}", status=status, retry_after=retry_after(response.headers))
        raise RequestRejected(f"HTTP {status} from {where}{detail}", status=status)


class OpenAIBackend(HTTPBackend):
    """OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp server, LM Studio…)."""

    name = "openai"
    path = "/chat/completions"

    def __init__(self, endpoint: Endpoint, params: dict[str, Any], **options: Any) -> None:
        super().__init__(endpoint, params, **options)
        # JSON mode unless the version says json_mode=false; dropped for good if the server refuses it.
        self.json_mode = bool(params.get("json_mode", True)) and "response_format" not in self.params

    def body(self, rendered: Rendered) -> dict[str, Any]:
        messages = []
        if rendered.system:
            messages.append({"role": "system", "content": rendered.system})
        messages.append({"role": "user", "content": rendered.user})
        body: dict[str, Any] = {"model": self.model, "messages": messages, **self.params}
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        return body

    async def complete(self, client: httpx.AsyncClient, rendered: Rendered) -> Completion:
        try:
            return await super().complete(client, rendered)
        except RequestRejected as exc:
            if self.json_mode and "response_format" in str(exc):
                self.json_mode = False  # this server has no JSON mode: ask in the prompt only
                return await super().complete(client, rendered)
            raise

    def completion(self, data: Any) -> Completion:
        """Return the answer of a chat completion, or raise MalformedResponse saying what is not as promised.

        Promised: an object; `choices` a non-empty list whose first item has a `message` object;
        `message.content` a string, null (an empty answer) or a list of text parts (some servers);
        `usage`, if present, an object whose token counts are whole numbers ≥ 0 or null.
        """
        fmt = "chat-completions"
        if not isinstance(data, dict):
            raise _malformed(fmt, f"the body is {kind_of(data)}, not an object")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise _malformed(fmt, "no choices" if choices is None or choices == [] else f"choices is {kind_of(choices)}")
        message = choices[0].get("message") if isinstance(choices[0], dict) else None
        if not isinstance(message, dict):
            raise _malformed(fmt, "no choices[0].message object")
        content = message.get("content")
        if isinstance(content, list):  # some servers send content parts
            content = _text_parts(fmt, content, "choices[0].message.content", text_only=False)
        elif content is not None and not isinstance(content, str):
            raise _malformed(fmt, f"choices[0].message.content is {kind_of(content)}, expected a string or null")
        usage = _object(fmt, data, "usage")
        details = _object(fmt, usage, "prompt_tokens_details", "usage.")
        return Completion(content or "", _count(fmt, usage, "prompt_tokens", "usage."),
                          _count(fmt, usage, "completion_tokens", "usage."),
                          _count(fmt, details, "cached_tokens", "usage.prompt_tokens_details.") or 0)


class AnthropicBackend(HTTPBackend):
    """Anthropic Messages, with the shared prefix (system) marked for prompt caching."""

    name = "anthropic"

    def __init__(self, endpoint: Endpoint, params: dict[str, Any], **options: Any) -> None:
        base = endpoint.base_url.rstrip("/")
        self.path = "/messages" if base.endswith("/v1") else "/v1/messages"
        super().__init__(endpoint, params, **options)

    def body(self, rendered: Rendered) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "max_tokens": 1024, **self.params,
                                "messages": [{"role": "user", "content": rendered.user}]}
        if rendered.system:
            body["system"] = [{"type": "text", "text": rendered.system, "cache_control": {"type": "ephemeral"}}]
        return body

    def completion(self, data: Any) -> Completion:
        """Return the answer of a Messages call, or raise MalformedResponse saying what is not as promised.

        Promised: an object; `content` a list of blocks (objects), each text block's `text` a
        string (other blocks — thinking, tool use — are skipped); `usage`, if present, an object
        whose token counts are whole numbers ≥ 0 or null.
        """
        fmt = "Messages"
        if not isinstance(data, dict):
            raise _malformed(fmt, f"the body is {kind_of(data)}, not an object")
        content = data.get("content")
        if not isinstance(content, list):
            raise _malformed(fmt, "no content list" if content is None else f"content is {kind_of(content)}, expected a list of blocks")
        text = _text_parts(fmt, content, "content", text_only=True)
        usage = _object(fmt, data, "usage")
        cache_read = _count(fmt, usage, "cache_read_input_tokens", "usage.") or 0
        cache_write = _count(fmt, usage, "cache_creation_input_tokens", "usage.") or 0
        fresh = _count(fmt, usage, "input_tokens", "usage.")
        total_in = None if fresh is None else fresh + cache_read + cache_write
        return Completion(text, total_in, _count(fmt, usage, "output_tokens", "usage."), cache_read)


def _malformed(fmt: str, detail: str) -> MalformedResponse:
    return MalformedResponse(f"does not follow the {fmt} format: {detail}")


def _object(fmt: str, parent: dict[str, Any], key: str, prefix: str = "") -> dict[str, Any]:
    """Return an optional object field ({} when absent or null)."""
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _malformed(fmt, f"{prefix}{key} is {kind_of(value)}, expected an object")
    return value


def _count(fmt: str, parent: dict[str, Any], key: str, prefix: str = "") -> int | None:
    """Return an optional token count: a whole number ≥ 0 (12.0 is 12), or None when absent or null."""
    value = parent.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        shown = value if isinstance(value, int) and not isinstance(value, bool) else kind_of(value)
        raise _malformed(fmt, f"{prefix}{key} is {shown}, "
                              "expected a whole number of 0 or more")
    return value


def _text_parts(fmt: str, parts: list[Any], where: str, *, text_only: bool) -> str:
    """Join the text of content blocks; a block that is not an object, or whose text is not a string, is malformed."""
    texts = []
    for position, part in enumerate(parts):
        if not isinstance(part, dict):
            raise _malformed(fmt, f"{where}[{position}] is {kind_of(part)}, expected an object")
        if text_only and part.get("type") != "text":
            continue
        text = part.get("text")
        if text is None and not text_only:
            continue
        if not isinstance(text, str):
            raise _malformed(fmt, f"{where}[{position}].text is {kind_of(text)}, expected a string")
        texts.append(text)
    return "".join(texts)


def token_count(value: Any) -> int | None:
    """Return a usage count from an API's JSON (an int, or a float such as 12.0), else None."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def make_backend(endpoint: Endpoint, params: dict[str, Any], *, redact: Redactor | None = None,
                 max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES) -> HTTPBackend:
    """Return the HTTP backend for an endpoint (answers read up to `max_answer_bytes`, decoded)."""
    if endpoint.backend == "openai":
        return OpenAIBackend(endpoint, params, redact=redact, max_answer_bytes=max_answer_bytes)
    if endpoint.backend == "anthropic":
        return AnthropicBackend(endpoint, params, redact=redact, max_answer_bytes=max_answer_bytes)
    raise RunSetupError(Reason("backend_unknown", backends=', '.join(BACKENDS), backend=endpoint.backend))


__all__ = ["AnthropicBackend", "Completion", "Endpoint", "OpenAIBackend", "Redactor", "build_client",
           "make_backend", "read_api_key", "read_capped", "retry_after"]
