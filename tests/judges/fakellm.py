"""A real local LLM server for tests and benchmarks: OpenAI chat completions and Anthropic
Messages on loopback, with injectable latency and faults.

    server = FakeLLM(latency=0.05, faults={"429": 0.2, "500": 0.1}).start()
    server.openai_base     # http://127.0.0.1:PORT/v1
    server.anthropic_base  # http://127.0.0.1:PORT
    server.stats()         # requests, statuses, faults, calls and answers per item
    server.stop()

`POST /v1/embeddings` answers OpenAI-style embeddings: per input text a deterministic
hashed bag of words (dimension 64, lower-cased words, raw counts, not normalised), so
texts sharing words have a higher cosine; `data` is listed in reverse order (each item with
its `index`, so a client must order by it) and `usage.prompt_tokens` is the number of words.
It honours `api_key`, `models`, latency and the faults below (for embeddings "garbage" is a
well-formed answer with one vector too few) and counts under "embeddings" in `stats()`;
`embeddings_script` is a list of faults consumed first by embeddings requests only (so a test
can fault the embeddings call of a run whose chat and embeddings requests interleave).

With `questions=True` the server also answers the answer-relevancy step: a chat request whose
system or user text asks for `"questions"` (the reply shape of the built-in answer_relevancy
template) gets `{"questions": questions_for(answer, n), "noncommittal": 0|1}`, where the answer
is the text after the last "Answer:" of the user message and n the N of "Write N questions"
(default 3); it is noncommittal (no questions) when the answer contains `noncommittal` (a
case-insensitive marker, default "I don't know"). Off by default: other tests rely on every
chat answer being a verdict.

With `claims=True` the server also answers claim extraction: a chat request whose system or user
text asks for `"claims"` (the reply shape of the built-in claim_extraction template) gets
`{"claims": claims_for(answer)}`, the answer (after the last "Answer:") cut at sentence ends and
at " y " / " and ", every claim verbatim; `claims_replies` maps a text found in the answer to
the exact reply to send instead (not JSON, an empty list, rewritten claims…).

Faults (probabilities per request, or `script`, a list consumed first, one fault per request):
"429" (with Retry-After / retry-after-ms), "500", "timeout" (answers after `hang` seconds),
"drop" (closes the connection without answering), "invalid_json" (a 200 whose body is cut
short), "wrong_schema" (a 200 without choices/content), "garbage" (a well-formed answer whose
text is no verdict), "ok". Hostile 200s, each a verdict in every other respect: "usage_string"
(`usage` a string), "content_number" (the answer text a number), "json_array" (a JSON array
as the body), "deep_json" (100,000 nested lists as the body), "huge" (an answer of
`huge_bytes`, 3 MiB by default, with no Content-Length: the connection's end delimits it),
"gzip_bomb" (about 1 MB of gzip that inflates to 1 GiB). Checks: `api_key` (401
otherwise, echoing the key sent — the client must redact it), `models` (404 for others),
`json_mode=False` (400 on response_format). With `echo_key=True` every answer and error
message repeats the credentials header the client sent ("authorization: Bearer KEY" or
"x-api-key: KEY"), in the body and in an `x-echo` response header.

`responder` (None by default): a function of a chat request's body returning the answer text, or None to answer as
usual; a test or benchmark makes the judge depend on its prompt with it (tests/judges/prompt_world.py).

`gate` (a threading.Event, None by default): while it is unset, every chat and embeddings request
waits after being counted, so a test can hold calls in flight and release them.

Also a script: `python tests/judges/fakellm.py --port 0 --latency 0.05` prints the port and
serves until killed; GET /_stats and POST /_reset work across processes.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import random
import re
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away (timeouts, kill -9) is part of the tests, not an error


class FakeLLM:
    """A threaded HTTP server speaking the OpenAI and Anthropic wire formats."""

    def __init__(self, *, latency: float = 0.0, faults: dict[str, float] | None = None, script: list[str] | None = None,
                 labels: list[Any] | None = None, api_key: str | None = None, models: list[str] | None = None,
                 json_mode: bool = True, retry_after: str | None = "0", retry_after_ms: str | None = None,
                 hang: float = 1.0, seed: int = 0, port: int = 0, questions: bool = False,
                 noncommittal: str = "I don't know", embeddings_script: list[str] | None = None,
                 claims: bool = False, claims_replies: dict[str, str] | None = None,
                 echo_key: bool = False, vary: bool = False) -> None:
        self.latency = latency
        # Self-consistency tests: with `vary`, half the items (by their text's digest) get the next label on each
        # call of the same text (a counter per text); the other half always the same one.
        self.vary = vary
        self.seen: Counter[str] = Counter()
        self.faults = dict(faults or {})
        self.script = list(script or [])
        self.embeddings_script = list(embeddings_script or [])
        self.questions = questions
        self.noncommittal = noncommittal
        self.claims = claims
        self.claims_replies = dict(claims_replies or {})
        self.echo_key = echo_key
        self.responder: Any = None
        self.huge_bytes = 3 * 1024 * 1024  # the size of the "huge" fault's answer text
        # Closed (an unset Event): every chat or embeddings request waits for it after being counted,
        # so a test can hold calls in flight (at most `gate_timeout` seconds, a hang guard).
        self.gate: threading.Event | None = None
        self.gate_timeout = 60.0
        self.labels = list(labels or ["supported", "unsupported"])
        self.api_key = api_key
        self.models = models
        self.json_mode = json_mode
        self.retry_after = retry_after
        self.retry_after_ms = retry_after_ms
        self.hang = hang
        self.rng = random.Random(seed)
        self.port = port
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.keep_requests = True
        self.reset()
        self.httpd: _Server | None = None
        self.thread: threading.Thread | None = None

    # ---- lifecycle
    def start(self) -> FakeLLM:
        handler = type("Handler", (_Handler,), {"fake": self})
        self.httpd = _Server(("127.0.0.1", self.port), handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_base(self) -> str:
        return self.url

    # ---- bookkeeping
    def reset(self) -> None:
        with self.lock:
            self.counts: Counter[str] = Counter()
            self.calls: Counter[str] = Counter()
            self.answers: Counter[str] = Counter()
            self.requests = []

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {"requests": self.counts["requests"], "counts": dict(self.counts), "calls": dict(self.calls),
                    "answers": dict(self.answers)}

    def next_fault(self, *, embeddings: bool = False) -> str:
        with self.lock:
            if embeddings and self.embeddings_script:
                return self.embeddings_script.pop(0)
            if self.script:
                return self.script.pop(0)
            draw = self.rng.random()
        total = 0.0
        for name, probability in self.faults.items():
            total += probability
            if draw < total:
                return name
        return "ok"

    def verdict_for(self, item_text: str) -> Any:
        digest = int(hashlib.sha256(item_text.encode("utf-8")).hexdigest(), 16)
        if self.vary and self.varies(item_text):
            with self.lock:
                nth = self.seen[item_text]
                self.seen[item_text] += 1
            return self.labels[(digest + nth) % len(self.labels)]
        return self.labels[digest % len(self.labels)]

    @staticmethod
    def varies(item_text: str) -> bool:
        """Return whether `vary` changes this item's answers from call to call (half of the items)."""
        return int(hashlib.sha256(item_text.encode("utf-8")).hexdigest(), 16) // 7 % 2 == 1

    def answer_text(self, body: dict, user: Any) -> str | None:
        """Return the responder's answer, or the question-generation (or claim-extraction) answer when on and asked
        for, else None."""
        if self.responder is not None:
            text = self.responder(body)
            if text is not None:
                return text
        if not (self.questions or self.claims) or not isinstance(user, str):
            return None
        parts = [body.get("system")] + [m.get("content") for m in body.get("messages") or [] if isinstance(m, dict)]
        # A part is a string, or (Anthropic) a list of content blocks with their "text".
        texts = [t for part in parts for t in (part if isinstance(part, list) else [part])]
        texts = [t.get("text") if isinstance(t, dict) else t for t in texts]
        if self.claims and any(isinstance(t, str) and '"claims"' in t for t in texts):
            answer = user.rsplit("Answer:", 1)[-1].strip()
            reply = next((text for key, text in self.claims_replies.items() if key in answer), None)
            return reply if reply is not None else json.dumps({"claims": claims_for(answer)}, ensure_ascii=False)
        if not self.questions or not any(isinstance(t, str) and '"questions"' in t for t in texts):
            return None
        answer = user.rsplit("Answer:", 1)[-1].strip()
        wanted = re.search(r"Write (\d+) questions", user)
        if self.noncommittal.lower() in answer.lower():
            return json.dumps({"questions": [], "noncommittal": 1, "reason": "fake judge: noncommittal"})
        return json.dumps({"questions": questions_for(answer, int(wanted.group(1)) if wanted else 3), "noncommittal": 0,
                           "reason": "fake judge"})


def questions_for(answer: str, n: int) -> list[str]:
    """Return the questions the fake server generates for an answer: its words dealt into n groups."""
    words = re.findall(r"\w+", answer)
    questions = [f"What about {' '.join(words[i::n])}?" for i in range(n) if words[i::n]]
    return questions or ["What is this about?"]


def claims_for(answer: str) -> list[str]:
    """Return the claims the fake server extracts: the answer cut at sentence ends and at " y " / " and " (verbatim)."""
    pieces = re.split(r"(?<=[.;!?])\s+|\s+(?:y|and)\s+", answer)
    return [piece.strip() for piece in pieces if piece.strip()]


def item_id(text: str) -> str:
    """Return the id the server files an item's calls under (hash of the last user message)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    fake: FakeLLM

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionError, TimeoutError, OSError):
            self.close_connection = True

    def _send(self, status: int, body: bytes | dict | list, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self) -> None:
        if self.path == "/_stats":
            self._send(200, self.fake.stats())
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        call = self._read_call()
        if call is None or self._refused(call):
            return
        fake = self.fake
        fault = fake.next_fault(embeddings=call.embeddings)
        self._count(fault)
        if fake.latency:
            time.sleep(fake.latency)
        if fault == "garbage" and call.embeddings:
            answer = _embeddings(call.body)
            self._send(200, {**answer, "data": answer["data"][1:]})
        elif fault in _FAULTS:
            _FAULTS[fault](self, call, fault)
        else:
            text = fake.answer_text(call.body, call.user)
            if call.echo and text is None and not call.embeddings:
                text = json.dumps({"verdict": fake.verdict_for(call.user), "reason": f"fake judge{call.said}"})
            self._send(200, _embeddings(call.body) if call.embeddings
                       else _answer(call.anthropic, call.body, fake.verdict_for(call.user), text=text),
                       {"x-echo": call.echo} if call.echo else None)
            self._count_answer(call.key)

    def _read_call(self) -> _Call | None:
        """Read a POST and count it; answer a reset, an unknown route or a body that is not JSON (then None)."""
        fake = self.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path == "/_reset":
            fake.reset()
            self._send(200, {"ok": True})
            return None
        anthropic = self.path.rstrip("/").endswith("/v1/messages")
        embeddings = self.path.rstrip("/").endswith("/embeddings")
        if not (anthropic or embeddings) and not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return None
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send(400, {"error": {"message": "request body is not JSON"}})
            return None
        messages = body.get("messages") or []
        user = messages[-1].get("content", "") if messages else ""
        if embeddings:
            user = body.get("input", "")
        key = item_id(user if isinstance(user, str) else json.dumps(user))
        with fake.lock:
            fake.counts["requests"] += 1
            fake.counts["anthropic" if anthropic else "embeddings" if embeddings else "openai"] += 1
            fake.calls[key] += 1
            if fake.keep_requests:
                fake.requests.append({"path": self.path, "body": body,
                                      "headers": {k.lower(): v for k, v in self.headers.items()}})
        if fake.gate is not None:
            fake.gate.wait(fake.gate_timeout)
        sent_key = self.headers.get("x-api-key") if anthropic else (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        echo = (f"x-api-key: {sent_key}" if anthropic else f"authorization: {self.headers.get('Authorization')}") if fake.echo_key else ""
        return _Call(body, user, key, anthropic, embeddings, sent_key, echo)

    def _refused(self, call: _Call) -> bool:
        """Answer a wrong key, an unknown model or a response_format the server does not take; return whether it did."""
        fake = self.fake
        if fake.api_key is not None and call.sent_key != fake.api_key:
            self._count("401")
            self._send(401, _error(call.anthropic, "authentication_error", f"Incorrect API key provided: {call.sent_key}"))
        elif fake.models is not None and call.body.get("model") not in fake.models:
            self._count("404")
            self._send(404, _error(call.anthropic, "not_found_error", f"The model `{call.body.get('model')}` does not exist"))
        elif not call.anthropic and not fake.json_mode and "response_format" in call.body:
            self._count("400")
            self._send(400, _error(False, "invalid_request_error", "response_format is not supported by this server"))
        else:
            return False
        return True

    def _count(self, name: str) -> None:
        with self.fake.lock:
            self.fake.counts[name] += 1

    def _count_answer(self, key: str) -> None:
        with self.fake.lock:
            self.fake.answers[key] += 1


@dataclass
class _Call:
    """One POSTed call: its body, the user message (or embedding input) and its item key, which API, the key sent."""

    body: dict
    user: Any
    key: str
    anthropic: bool
    embeddings: bool
    sent_key: str | None
    echo: str  # what the server says back of the key it got (echo_key), else ""

    @property
    def said(self) -> str:
        return f" (you sent {self.echo})" if self.echo else ""


def _rate_limited(handler: _Handler, call: _Call, fault: str) -> None:
    fake = handler.fake
    headers = {"x-echo": call.echo} if call.echo else {}
    if fake.retry_after is not None:
        headers["Retry-After"] = fake.retry_after
    if fake.retry_after_ms is not None:
        headers["retry-after-ms"] = fake.retry_after_ms
    handler._send(429, _error(call.anthropic, "rate_limit_error", "Rate limit reached" + call.said), headers)


def _hang(handler: _Handler, call: _Call, fault: str) -> None:
    fake = handler.fake
    time.sleep(fake.hang)
    handler._send(200, _embeddings(call.body) if call.embeddings
                  else _answer(call.anthropic, call.body, fake.verdict_for(call.user), text=fake.answer_text(call.body, call.user)))


def _drop(handler: _Handler, call: _Call, fault: str) -> None:
    handler.close_connection = True


def _odd_types(handler: _Handler, call: _Call, fault: str) -> None:
    answer = _answer(call.anthropic, call.body, handler.fake.verdict_for(call.user))
    if fault == "usage_string":
        answer["usage"] = "12 tokens"
    elif call.anthropic:
        answer["content"] = 7
    else:
        answer["choices"][0]["message"]["content"] = 7
    handler._send(200, answer)


def _huge(handler: _Handler, call: _Call, fault: str) -> None:
    """A valid answer of fake.huge_bytes, delimited by closing the connection (no length)."""
    answer = _answer(call.anthropic, call.body, handler.fake.verdict_for(call.user), text="x" * handler.fake.huge_bytes)
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.close_connection = True
    try:
        handler.wfile.write(json.dumps(answer).encode("utf-8"))
    except (BrokenPipeError, ConnectionResetError):
        pass


def _garbage(handler: _Handler, call: _Call, fault: str) -> None:
    handler._send(200, _answer(call.anthropic, call.body, None, text="I would rather not say."))
    handler._count_answer(call.key)


# The scripted faults (FakeLLM.faults / script): what the server answers instead of a verdict.
_FAULTS: dict[str, Callable[[_Handler, _Call, str], None]] = {
    "429": _rate_limited,
    "500": lambda h, c, f: h._send(500, _error(c.anthropic, "api_error", "Internal server error" + c.said)),
    "timeout": _hang,
    "drop": _drop,
    "invalid_json": lambda h, c, f: h._send(200, b'{"id": "x", "choices": [{"message": {"content": "{\\"verdict'),
    "wrong_schema": lambda h, c, f: h._send(200, {"id": "x", "result": {"text": "supported"}}),
    "usage_string": _odd_types,
    "content_number": _odd_types,
    "json_array": lambda h, c, f: h._send(200, [_answer(c.anthropic, c.body, h.fake.verdict_for(c.user))]),
    "huge": _huge,
    "gzip_bomb": lambda h, c, f: h._send(200, gzip_bomb(), {"Content-Encoding": "gzip"}),  # ~1 MB sent, 1 GiB inflated
    "deep_json": lambda h, c, f: h._send(200, b"[" * 100_000 + b"]" * 100_000),
    "garbage": _garbage,
}


@functools.lru_cache(maxsize=1)
def gzip_bomb(size: int = 1024 ** 3) -> bytes:
    """Return gzip data that inflates to `size` zero bytes (1 GiB: about 1 MB), made once per process."""
    block = bytes(16 * 1024 * 1024)
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)  # raw deflate
    # After a full flush the compressor starts afresh, so every block of zeros compresses to the same bytes.
    piece = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(size // len(block)):
        crc = zlib.crc32(block, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    trailer = crc.to_bytes(4, "little") + (size % 2**32).to_bytes(4, "little")
    return header + piece * (size // len(block)) + packer.flush() + trailer


def _error(anthropic: bool, kind: str, message: str) -> dict:
    if anthropic:
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "code": None}}


def _answer(anthropic: bool, body: dict, verdict: Any, *, text: str | None = None) -> dict:
    content = text if text is not None else json.dumps({"verdict": verdict, "reason": "fake judge"})
    prompt_chars = len(json.dumps(body.get("messages", ""))) + len(json.dumps(body.get("system", "")))
    tokens_in, tokens_out = max(1, prompt_chars // 4), max(1, len(content) // 4)
    if anthropic:
        return {"id": "msg_fake", "type": "message", "role": "assistant", "model": body.get("model"),
                "content": [{"type": "text", "text": content}], "stop_reason": "end_turn",
                "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out, "cache_read_input_tokens": 0}}
    return {"id": "chatcmpl-fake", "object": "chat.completion", "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out, "total_tokens": tokens_in + tokens_out}}


def embedding_of(text: str, dimension: int = 64) -> list[float]:
    """Return the fake server's vector for a text: its words hashed into `dimension` counts."""
    vector = [0.0] * dimension
    for word in re.findall(r"\w+", text.lower()):
        vector[int(hashlib.sha256(word.encode("utf-8")).hexdigest(), 16) % dimension] += 1.0
    return vector


def _embeddings(body: dict) -> dict:
    texts = body.get("input", "")
    texts = [t if isinstance(t, str) else json.dumps(t) for t in (texts if isinstance(texts, list) else [texts])]
    data = [{"object": "embedding", "index": i, "embedding": embedding_of(text)} for i, text in enumerate(texts)]
    words = sum(len(re.findall(r"\w+", text)) for text in texts)
    return {"object": "list", "model": body.get("model"), "data": data[::-1],
            "usage": {"prompt_tokens": words, "total_tokens": words}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--labels", default="supported,unsupported")
    parser.add_argument("--claims", action="store_true", help="also answer claim extraction requests")
    args = parser.parse_args()
    server = FakeLLM(latency=args.latency, port=args.port, labels=args.labels.split(","), claims=args.claims)
    server.keep_requests = False
    server.start()
    print(server.port, flush=True)
    try:
        server.thread.join()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
