"""`POST /v1/traces`: the OTLP/HTTP receiver (what the SDKs' exporters and a Collector's `otlphttp` exporter send);
`POST /v1/feedback`: thumbs up/down for its traces, with the same token and the same checks.

No login session and no CSRF token (security.py exempts this blueprint): a bearer token made by
`calibrate traces token`, which may only stage spans and feedback for its dataset. A request is
checked in this order, and nothing is written unless it passes every check: 401 without a live
token, 415 for a body neither `application/x-protobuf` nor `application/json` (or an encoding
other than gzip), 503 with Retry-After when this process holds TRACES_MAX_CONCURRENT export
requests already (decoding, waiting for their write, being written: the queue is full; the
exporter retries), 413 over TRACES_MAX_BODY bytes on the wire or once gunzipped (read at most that much +1, so a gzip
bomb is never inflated; every gzip member is read, and bytes after the last one refuse the
body) or a JSON body over TRACES_MAX_JSON_BODY (parsed whole), 400 when it does not parse, 413 over TRACES_MAX_SPANS spans (TRACES_MAX_FEEDBACK feedback
records), counted before any is decoded. Then its spans are decoded and staged chunk by chunk
(ingest/traces/staging.py `stage_request`: STAGE_CHUNK spans at a time, one chunk of decoded spans
in memory). The chunks of concurrent requests are written together (`GroupCommit`): one thread
takes the writer lock for every chunk waiting at that moment (up to COALESCE_CHUNKS), stages them
in one transaction and commits, and each request goes on once its chunk is committed; the
writer lock is given back between two such transactions. The answer, only once every chunk of
the request is committed (a 200 means stored: nothing acknowledged is lost in a crash), is an
ExportTraceServiceResponse in the request's content type, with `partialSuccess {rejectedSpans,
errorMessage}` when spans were refused one by one (a bad id, too many attributes, a start time
out of range, text that is not valid Unicode). Errors are a `google.rpc.Status` {code, message},
also in the request's content type; a database that refuses the write (a full disk, a lock held
too long) is a 503 with Retry-After in that shape, never an HTML page, and `/health` says the
write failed. docs/formats.md has the whole contract.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, current_app, request
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlmodel import Session

from calibrate.ingest.problems import ImportRejected
from calibrate.ingest.traces.decode import LazyRequest, Where, check_traces_data, iter_traces_data_spans, parse_json
from calibrate.ingest.traces.staging import TooManyRecords, parse_feedback, stage_feedback_request, stage_request, token_for
from calibrate.views.session import get_session, write

bp = Blueprint("otlp", __name__)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
JSON_LINES = ("application/x-ndjson", "application/jsonl")  # /v1/feedback only
READ_CHUNK = 1024 * 1024
# google.rpc.Code values of the error answers (OTLP/HTTP puts a Status in the body of a failure).
CODES = {400: 3, 401: 16, 413: 8, 415: 3, 500: 13, 503: 14}
DATABASE_RETRY_AFTER = 30  # seconds an exporter waits before it sends again a request the database refused
# Chunks (of STAGE_CHUNK spans) of several requests written in one transaction at most (`GroupCommit`): a label save
# waits for one such transaction at most. Four: four exporters' chunks at once (bench/results/receiver.md).
COALESCE_CHUNKS = 4


class TooLarge(Exception):
    """The body (on the wire or unpacked) is over TRACES_MAX_BODY."""


def status_protobuf(code: int, message: str) -> bytes:
    """Return a google.rpc.Status {code, message} in protobuf: field 1 varint, field 2 string (no details)."""
    text = message.encode("utf-8")
    return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _answer(status: int, kind: str, message: str) -> Response:
    """An error answer: a Status in the request's content type (JSON when it named neither)."""
    code = CODES.get(status, 2)
    if kind == PROTOBUF:
        body, mimetype = status_protobuf(code, message), PROTOBUF
    else:
        body, mimetype = json.dumps({"code": code, "message": message}), JSON
    response = Response(body, status=status, mimetype=mimetype)
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="calibrate traces"'
    return response


def read_body(limit: int) -> bytes:
    """Return the request body, gunzipped if it says so; TooLarge past `limit` bytes either way; ValueError for bad gzip."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise TooLarge
    stream = request.stream
    raw = bytearray()
    while True:
        chunk = stream.read(min(READ_CHUNK, limit + 1 - len(raw)))
        if not chunk:
            break
        raw += chunk
        if len(raw) > limit:
            raise TooLarge
    encoding = (request.headers.get("Content-Encoding") or "identity").strip().lower()
    if encoding == "identity":
        return bytes(raw)
    return gunzip(bytes(raw), limit)


def gunzip(data: bytes, limit: int) -> bytes:
    """Return every member of a gzip body, unpacked (RFC 1952: a gzip file is a series of members); TooLarge past `limit`
    bytes; ValueError for bad gzip, a body that ends early, or bytes after the last member that are not one."""
    out = bytearray()
    while True:
        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out += decoder.decompress(data, limit + 1 - len(out))
            if len(out) > limit or decoder.unconsumed_tail:
                raise TooLarge
            out += decoder.flush()
        except zlib.error as exc:
            raise ValueError(f"not valid gzip: {exc}") from None
        if len(out) > limit:
            raise TooLarge
        if not decoder.eof:
            raise ValueError("not valid gzip: the stream ends early")
        data = decoder.unused_data
        if not data:
            return bytes(out)
        if not data.startswith(b"\x1f\x8b"):
            raise ValueError(f"not valid gzip: {len(data):,} bytes after the end of the compressed data")


@bp.route("/v1/traces", methods=["POST"])
def receive():
    """Stage the spans of one OTLP/HTTP export request (module docstring)."""
    return _guarded((PROTOBUF, JSON), _stage)


@bp.route("/v1/feedback", methods=["POST"])
def feedback():
    """Stage feedback {trace_id, value} for the token's dataset: one object, a JSON array of them, or JSON lines.

    The same token, checks and error answers as `/v1/traces` (module docstring); a body in JSON
    (`application/json`, or JSON lines as `application/x-ndjson` / `application/jsonl`). The records
    follow the `traces import --feedback` file's rules; the first bad one refuses the request
    (400 naming its line or item and field), nothing stored. The answer: {"feedback": n,
    "staged": n, "late": n} (late: its trace is a sample already; docs/formats.md).
    """
    return _guarded((JSON, *JSON_LINES), _stage_feedback)


def _guarded(kinds: tuple[str, ...], handler) -> Response:
    """Check the token, the content type and encoding, take a slot of TRACES_MAX_CONCURRENT, then `handler(kind, token)`."""
    kind = request.mimetype
    answer_kind = PROTOBUF if kind == PROTOBUF and PROTOBUF in kinds else JSON
    header = request.headers.get("Authorization", "")
    scheme, _, bearer = header.partition(" ")
    token = token_for(get_session(), bearer.strip()) if scheme.lower() == "bearer" else None
    if token is None:
        return _answer(401, answer_kind, "a valid ingest token is needed: Authorization: Bearer <token> "
                                         "(calibrate traces token --dataset NAME)")
    if kind not in kinds:
        return _answer(415, answer_kind, f"Content-Type must be {' or '.join(kinds)}, not {kind or 'none'!r}")
    encoding = (request.headers.get("Content-Encoding") or "identity").strip().lower()
    if encoding not in ("identity", "gzip"):
        return _answer(415, answer_kind, f"Content-Encoding must be gzip or none, not {encoding!r}")
    slots = _slots()
    if not slots.acquire(blocking=False):
        # The queue is full: back-pressure, the exporter retries (OTLP: 503 is retryable, after Retry-After).
        response = _answer(503, answer_kind, f"{current_app.config['TRACES_MAX_CONCURRENT']} export requests are being "
                                             "stored or waiting to be already; retry")
        response.headers["Retry-After"] = "1"
        return response
    try:
        limit = int(current_app.config["TRACES_MAX_BODY"])
        try:
            body = read_body(limit)
        except TooLarge:
            return _answer(413, answer_kind, f"the request body is over TRACES_MAX_BODY ({limit:,} bytes)")
        except ValueError as exc:
            return _answer(400, answer_kind, str(exc))
        json_limit = int(current_app.config["TRACES_MAX_JSON_BODY"])
        if kind != PROTOBUF and len(body) > json_limit:
            # JSON is parsed whole, in one call that holds the interpreter (~15–50 ms a MB): the server's other
            # threads would wait that long. Protobuf is walked one span at a time (decode.LazyRequest).
            return _answer(413, answer_kind, f"a JSON body is over TRACES_MAX_JSON_BODY ({json_limit:,} bytes unpacked): "
                                             "send protobuf (application/x-protobuf) or smaller batches")
        try:
            return handler(kind, body, token)
        except TooManyRecords as exc:
            return _answer(413, answer_kind, str(exc))
        except ImportRejected as exc:
            return _answer(400, answer_kind, str(exc.problems[0]) if exc.problems else str(exc))
        except DBAPIError as exc:
            # The database refused (a full disk, a lock held too long, a read-only file): an OTLP Status, never an
            # HTML page, and 503 (retryable) so the exporter keeps the spans and sends them again; /health says so.
            reason = str(exc.orig).splitlines()[0][:200] if exc.orig is not None else type(exc).__name__
            if not isinstance(exc, OperationalError):
                return _answer(500, answer_kind, f"the database refused the write: {reason}")
            response = _answer(503, answer_kind, f"the database refused the write ({reason}); retry")
            response.headers["Retry-After"] = str(DATABASE_RETRY_AFTER)
            return response
    finally:
        slots.release()


def _slots() -> threading.BoundedSemaphore:
    """Return this app's semaphore of TRACES_MAX_CONCURRENT export requests in this process."""
    slots = current_app.extensions.get("calibrate.otlp.slots")
    if slots is None:
        slots = current_app.extensions.setdefault("calibrate.otlp.slots",
                                                  threading.BoundedSemaphore(max(1, int(current_app.config["TRACES_MAX_CONCURRENT"]))))
    return slots


def _group_commit() -> GroupCommit:
    """Return this app's GroupCommit (one per app: its requests' chunks are written together)."""
    found = current_app.extensions.get("calibrate.otlp.commit")
    if found is None:
        found = current_app.extensions.setdefault("calibrate.otlp.commit", GroupCommit(COALESCE_CHUNKS))
    return found


class _Chunk:
    """One request's chunk waiting in a GroupCommit: its action, then its result or its error."""

    __slots__ = ("action", "done", "result", "error")

    def __init__(self, action: Callable[[Session], Any]) -> None:
        self.action = action
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None


class GroupCommit:
    """The chunks of concurrent requests, written in one transaction: a group commit.

    `run(write, action)` queues the action and blocks until a transaction that ran it has
    committed (its result), or failed (its exception). No thread of its own: the first waiting
    request thread leads; it takes the chunks queued at that moment (in arrival order, at most
    `max_chunks`), runs their actions one after the other in one `write` transaction and commits;
    then the next waiting thread leads with what queued meanwhile. With four exporters sending at
    once, four chunks cost one lock turn and one commit instead of four. A transaction that fails
    with several chunks is run again one chunk a transaction, so one request's failure is its own.
    Nothing is answered before its commit: a crash loses only requests not answered yet, which
    their exporters send again.
    """

    def __init__(self, max_chunks: int) -> None:
        self.max_chunks = max_chunks
        self._queue: list[_Chunk] = []
        self._leading = False
        self._changed = threading.Condition()

    def state(self) -> tuple[bool, int]:
        """Return (whether a thread leads: a transaction is being written or waits for the lock, chunks queued)."""
        with self._changed:
            return self._leading, len(self._queue)

    def run(self, write: Callable[[Callable[[Session], Any]], Any], action: Callable[[Session], Any]) -> Any:
        """Run `action(session)` in a write transaction, possibly with other requests' actions; return its result."""
        mine = _Chunk(action)
        with self._changed:
            self._queue.append(mine)
            while not mine.done and self._leading:
                self._changed.wait()
            leads = not mine.done
            if leads:
                self._leading = True
        if leads:
            try:
                while not mine.done:  # this thread leads until its own chunk is written
                    with self._changed:
                        group = self._queue[:self.max_chunks]
                        del self._queue[:self.max_chunks]
                    self._write(write, group)
                    with self._changed:
                        self._changed.notify_all()  # the group's threads go on
            finally:
                with self._changed:
                    self._leading = False
                    self._changed.notify_all()  # the next waiting thread leads
        if mine.error is not None:
            raise mine.error
        return mine.result

    @staticmethod
    def _write(write: Callable[[Callable[[Session], Any]], Any], group: list[_Chunk]) -> None:
        """Write a group's actions in one transaction; a failure goes to each chunk (alone: to it), never lost."""
        try:
            results = write(lambda session: [chunk.action(session) for chunk in group])
        except Exception as exc:  # handed to the chunks' own threads, which raise it
            if len(group) > 1:
                for chunk in group:  # one a transaction: a chunk's failure is its own request's
                    GroupCommit._write(write, [chunk])
                return
            group[0].error, group[0].done = exc, True
            return
        except BaseException as exc:  # the leader is stopping: every chunk it took fails with it rather than wait forever
            for chunk in group:
                chunk.error, chunk.done = exc, True
            raise
        for chunk, result in zip(group, results, strict=True):
            chunk.result, chunk.done = result, True


def _stage(kind: str, body: bytes, token) -> Response:
    """Count, decode and stage one request's spans (every check before this one passed)."""
    rejected: list[str] = []
    if kind == PROTOBUF:  # walked, not parsed whole: the parse would hold the interpreter for ~8 ms a MB
        lazy = LazyRequest(body)
        count, spans = lazy.count(), lazy.spans(Where(), rejected=rejected)
    else:
        data = parse_json(body)
        count, spans = check_traces_data(data, Where()), iter_traces_data_spans(data, Where(), rejected=rejected)
    limit = int(current_app.config["TRACES_MAX_SPANS"])
    if count > limit:
        return _answer(413, kind, f"{count:,} spans, the limit is {limit:,} per request (TRACES_MAX_SPANS): export in "
                                  "smaller batches (a Collector: send_batch_max_size)")
    # Chunks of STAGE_CHUNK spans written with other requests' chunks (GroupCommit) behind the writer lock, taking
    # turns with label saves and the settler; background writes: a label save waiting (in another process too) goes first.
    commit = _group_commit()
    stage_request(lambda action: commit.run(lambda group: write(group, background=True), action), token, spans, rejected)
    return _success(kind, rejected)


def _stage_feedback(kind: str, body: bytes, token) -> Response:
    """Check and stage one request's feedback records (every check before this one passed)."""
    given = parse_feedback(body, max_records=int(current_app.config["TRACES_MAX_FEEDBACK"]))
    done = stage_feedback_request(lambda action: write(action, background=True), token, given)
    return Response(json.dumps({"feedback": len(given), "staged": done.staged, "late": done.late}), status=200,
                    mimetype=JSON)


def _success(kind: str, rejected: list[str]) -> Response:
    """Return the ExportTraceServiceResponse: empty when every span was taken, else partialSuccess."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: PLC0415 (optional heavy import: protobuf)
        ExportTraceServiceResponse,
    )

    message = ExportTraceServiceResponse()
    if rejected:
        message.partial_success.rejected_spans = len(rejected)
        more = f" (and {len(rejected) - 1:,} more)" if len(rejected) > 1 else ""
        message.partial_success.error_message = f"{len(rejected):,} spans refused: {rejected[0]}{more}"
    if kind == PROTOBUF:
        return Response(message.SerializeToString(), status=200, mimetype=PROTOBUF)
    from google.protobuf import json_format  # noqa: PLC0415 (optional heavy import: protobuf)

    return Response(json_format.MessageToJson(message, indent=None), status=200, mimetype=JSON)
