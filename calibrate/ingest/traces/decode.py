"""Read trace files into spans: OTLP/JSON, OTLP/JSONL, OTLP protobuf and Langfuse's trace export.

Every OTLP encoding goes through one function, `spans_of_traces_data(data, where=…)`, on the
`TracesData` / `ExportTraceServiceRequest` as a JSON-shaped dict: a JSON file is parsed with
the standard library, a protobuf body is decoded with `opentelemetry-proto` and turned into
the same dict (`google.protobuf.json_format`), so a request body of the OTLP/HTTP receiver
decodes through exactly what a file does. Ids are lowercase hex (the OTLP/JSON rule); the
base64 that protobuf's own JSON mapping writes for bytes is accepted too (told apart by length:
a trace id is 32 hex characters or 24 base64 ones). A Langfuse trace becomes one `LangfuseTrace`.

Bounded: the file's size, the nesting of attribute values, the attributes of a span, the
observations of a trace. Anything malformed raises ImportRejected naming where (the line of a
JSONL file, the byte offset of a JSON syntax error, and the field path); nothing is returned
in part.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calibrate.ingest.problems import ImportRejected, reject

FORMATS = ("otlp-json", "otlp-jsonl", "otlp-proto", "langfuse")
MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_ATTRIBUTES = 1000  # per span or resource (the SDK's default limit is 128)
MAX_VALUE_DEPTH = 8  # nesting of array/kvlist attribute values
MAX_OBSERVATIONS = 10_000  # per Langfuse trace
HEX32 = re.compile(r"[0-9a-f]{32}")
HEX16 = re.compile(r"[0-9a-f]{16}")
# Characters of a span's tracestate kept (a W3C tracestate is at most 512: a longer one reads as malformed, upstream.py).
TRACESTATE_KEPT = 513
STATUS_CODE_ERROR = 2  # OTLP's Status.code ERROR
ERROR = "error"


@dataclass(frozen=True)
class Span:
    """One span, its attributes as plain values (str, int, float, bool, list, dict)."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start_ns: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    # The span's W3C tracestate as sent (upstream.py reads the sampling threshold `ot=th:…` from it); "" when none.
    trace_state: str = ""
    # When it ended (Unix nanoseconds; 0 unset) and whether it failed ("error": status code ERROR; "" otherwise): a
    # step's duration and status (mapping.py).
    end_ns: int = 0
    status: str = ""


@dataclass
class LangfuseTrace:
    """One trace of Langfuse's export: the trace's fields as exported, with its observations and scores."""

    trace_id: str  # 32 lowercase hex (see langfuse_trace_id)
    source_id: str  # the id as Langfuse wrote it
    data: dict[str, Any]
    observations: list[dict[str, Any]] = field(default_factory=list)
    scores: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Decoded:
    """What one or more files held: spans (OTLP) and Langfuse traces, in file order."""

    spans: list[Span] = field(default_factory=list)
    langfuse: list[LangfuseTrace] = field(default_factory=list)


class Where:
    """Where a value is, for error messages: the line of a file and a field path."""

    def __init__(self, line: int | None = None) -> None:
        self.line = line

    def fail(self, path: str, message: str) -> ImportRejected:
        return reject(message, line=self.line, field=path)


# --------------------------------------------------------------------------- files


def read_bytes(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """Return a file's bytes, refusing one over `max_bytes`."""
    path = Path(path)
    if not path.is_file():
        raise reject(f"{path}: no such file")
    size = path.stat().st_size
    if size > max_bytes:
        raise reject(f"{path}: {size:,} bytes, the limit is {max_bytes:,}")
    return path.read_bytes()


def detect_format(raw: bytes) -> str:
    """Return the format of a trace file from its content (see docs/formats.md, "Traces")."""
    text = raw.lstrip()
    if not text:
        raise reject("the file is empty")
    if text[:1] not in (b"{", b"["):
        if raw[:1] == b"\x0a":  # field 1 (resource_spans), length-delimited: a protobuf request
            return "otlp-proto"
        raise reject("cannot tell the format (not JSON, not an OTLP protobuf request): give --format")
    if text[:1] == b"[":
        return "langfuse"
    first = text.split(b"\n", 1)[0]
    try:
        head = json.loads(first)
        whole_is_first = first.strip() == text.strip()
    except (ValueError, RecursionError):
        head, whole_is_first = None, False
    if head is None:  # a pretty-printed JSON document
        try:
            head = json.loads(text)
        except (ValueError, RecursionError):
            # Broken JSON: tell the format from its opening so the error says where the JSON breaks.
            opening = text[:4096]
            if b'"resourceSpans"' in opening or b'"resource_spans"' in opening:
                return "otlp-json"
            if b'"observations"' in opening or b'"data"' in opening:
                return "langfuse"
            raise reject("cannot tell the format: not JSON, and its first line is not a JSON object; give --format") from None
        whole_is_first = True
    if not isinstance(head, dict):
        raise reject("cannot tell the format: give --format")
    otlp = "resourceSpans" in head or "resource_spans" in head
    if otlp:
        return "otlp-json" if whole_is_first else "otlp-jsonl"
    if "data" in head or "observations" in head or ("id" in head and ("input" in head or "output" in head)):
        return "langfuse"
    raise reject("cannot tell the format: a JSON object with neither resourceSpans (OTLP) nor a Langfuse trace's "
                 "id, input, output or observations; give --format")


def decode(raw: bytes, fmt: str, *, into: Decoded | None = None) -> Decoded:
    """Decode one file's bytes in format `fmt` (one of FORMATS) into `into` (a new Decoded if None)."""
    out = Decoded() if into is None else into
    if fmt == "otlp-proto":
        out.spans.extend(spans_of_protobuf(raw))
    elif fmt == "otlp-json":
        out.spans.extend(spans_of_traces_data(parse_json(raw), Where()))
    elif fmt == "otlp-jsonl":
        for line, data in json_lines(raw):
            out.spans.extend(spans_of_traces_data(data, Where(line)))
    elif fmt == "langfuse":
        out.langfuse.extend(langfuse_traces(raw))
    else:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    return out


def parse_json(raw: bytes, *, line: int | None = None) -> Any:
    """Parse a JSON document; a syntax error names its line or byte offset."""
    try:
        return json.loads(raw)
    except UnicodeDecodeError as exc:
        raise reject(f"not UTF-8 text (byte offset {exc.start})", line=line) from None
    except RecursionError:
        raise reject("JSON nested too deeply", line=line) from None
    except ValueError as exc:
        where = "" if line is not None else f" (line {exc.lineno}, column {exc.colno}, byte offset {exc.pos})"
        raise reject(f"not valid JSON: {exc.msg}{where}", line=line) from None


def json_lines(raw: bytes) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed JSON) for every non-blank line."""
    for number, text in enumerate(raw.split(b"\n"), start=1):
        if text.strip():
            yield number, parse_json(text, line=number)


# --------------------------------------------------------------------------- OTLP


def spans_of_protobuf(raw: bytes, *, rejected: list[str] | None = None) -> list[Span]:
    """Decode a binary ExportTraceServiceRequest (the same message as TracesData) into spans.

    `rejected`: as in spans_of_traces_data (the receiver's per-span refusals).
    """
    return spans_of_message(request_of_protobuf(raw), Where(), rejected=rejected)


def request_of_protobuf(raw: bytes) -> Any:
    """Parse a binary ExportTraceServiceRequest; ImportRejected when it is not one."""
    # Loaded here: protobuf is only needed for this format.
    from google.protobuf.message import DecodeError  # noqa: PLC0415 (optional heavy import: protobuf)
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: PLC0415 (as above)
        ExportTraceServiceRequest,
    )

    try:
        return ExportTraceServiceRequest.FromString(raw)
    except (DecodeError, RecursionError) as exc:
        raise reject(f"not a valid OTLP protobuf ExportTraceServiceRequest: {exc}") from None


class LazyRequest:
    """A binary ExportTraceServiceRequest read one span at a time, for the receiver.

    Parsing the whole request (`request_of_protobuf`) is one call into protobuf's C extension,
    which holds the interpreter's lock while it runs: 1 s for a 137 MB body, during which every
    other thread of the server (a person's label save) waits, and the parsed message holds every
    span at once. This walks the wire format instead, in Python (other threads run in between):
    the request's `resource_spans` (field 1), their `resource` (1) and `scope_spans` (2), and
    these's `spans` (2), by tag and length, keeping offsets only; `spans()` then parses each
    span's bytes when it is asked for. Bytes that are not such a message are refused whole, before
    any span is decoded (ImportRejected); a span whose own bytes do not parse is refused alone.
    The spans, values and refusals are `iter_message_spans`' (a test compares them).
    """

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        # For each resource_spans: the byte ranges of its `resource` fields, and per scope_spans its spans' ranges.
        self.parts: list[tuple[list[tuple[int, int]], list[list[tuple[int, int]]]]] = []
        try:
            for number, wire, start, end in _wire_fields(raw, 0, len(raw)):
                if number != 1:
                    continue
                _length_delimited(wire, "resourceSpans")
                resources: list[tuple[int, int]] = []
                scopes: list[list[tuple[int, int]]] = []
                for inner, inner_wire, a, b in _wire_fields(raw, start, end):
                    if inner == 1:
                        _length_delimited(inner_wire, "resource")
                        resources.append((a, b))
                    elif inner == 2:
                        _length_delimited(inner_wire, "scopeSpans")
                        scopes.append([(c, d) for field_number, span_wire, c, d in _wire_fields(raw, a, b)
                                       if field_number == 2 and _length_delimited(span_wire, "spans")])
                self.parts.append((resources, scopes))
        except ValueError as exc:
            raise reject(f"not a valid OTLP protobuf ExportTraceServiceRequest: {exc}") from None

    def count(self) -> int:
        """Return how many spans the request holds (none decoded)."""
        return sum(len(spans) for _, scopes in self.parts for spans in scopes)

    def spans(self, where: Where, *, rejected: list[str]) -> Iterator[Span]:
        """Yield the request's spans, each parsed and decoded when asked for; a refused one is told in `rejected`."""
        from google.protobuf.message import DecodeError  # noqa: PLC0415 (optional heavy import: protobuf)
        from opentelemetry.proto.resource.v1.resource_pb2 import Resource  # noqa: PLC0415 (as above)
        from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan  # noqa: PLC0415 (as above)

        raw = self.raw
        for r, (resources, scopes) in enumerate(self.parts):
            path = f"resourceSpans[{r}]"
            # A field given twice is merged, as a parser does: the resource is its fields' bytes one after the other.
            resource_message = Resource.FromString(b"".join(raw[a:b] for a, b in resources))
            resource = _pb_attributes(resource_message.attributes, f"{path}.resource.attributes", where)
            for s, spans in enumerate(scopes):
                for n, (a, b) in enumerate(spans):
                    span_path = f"{path}.scopeSpans[{s}].spans[{n}]"
                    try:
                        yield _pb_span(PbSpan.FromString(raw[a:b]), span_path, resource, where)
                    except ImportRejected as exc:
                        rejected.append(str(exc.problems[0]) if exc.problems else str(exc))
                    except (DecodeError, RecursionError) as exc:
                        rejected.append(str(where.fail(span_path, f"not a valid protobuf Span: {exc}").problems[0]))


def _wire_fields(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """Yield (field number, wire type, value start, value end) of the protobuf fields in data[start:end]."""
    pos = start
    while pos < end:
        key, pos = _wire_varint(data, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError(f"field number 0 at byte {pos}")
        if wire == 0:
            _, after = _wire_varint(data, pos, end)
        elif wire == 1:
            after = pos + 8
        elif wire == 2:
            length, pos = _wire_varint(data, pos, end)
            after = pos + length
        elif wire == 5:
            after = pos + 4
        else:
            raise ValueError(f"wire type {wire} at byte {pos}")
        if after > end:
            raise ValueError(f"a field runs past the end of its message (byte {pos})")
        yield number, wire, pos, after
        pos = after


def _wire_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise ValueError(f"a truncated or overlong varint at byte {pos}")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _length_delimited(wire: int, name: str) -> bool:
    if wire != 2:
        raise ValueError(f"{name} must be a message (wire type 2), found wire type {wire}")
    return True


def spans_of_message(message: Any, where: Where, *, rejected: list[str] | None = None) -> list[Span]:
    """Return the spans of a decoded ExportTraceServiceRequest (or TracesData) message (`iter_message_spans`, listed)."""
    return list(iter_message_spans(message, where, rejected=rejected))


def iter_message_spans(message: Any, where: Where, *, rejected: list[str] | None = None) -> Iterator[Span]:
    """Yield the spans of a decoded ExportTraceServiceRequest (or TracesData) message, decoding each as it is asked for.

    The same spans, values and refusals as `spans_of_traces_data(json_format.MessageToDict(message))`
    (ids as lowercase hex, 64-bit integers as int, bytes as base64 text, NaN and infinities as
    None, an unset value as None), read from the message's fields directly: turning every span
    into a dict first cost three quarters of a request's time in the receiver. The tests compare
    the two on the same traces (every encoding gives the same samples). One at a time: the
    receiver stages a large request chunk by chunk without holding all its spans decoded.
    """
    for r, resource_spans in enumerate(message.resource_spans):
        path = f"resourceSpans[{r}]"
        resource = _pb_attributes(resource_spans.resource.attributes, f"{path}.resource.attributes", where)
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            for n, span in enumerate(scope_spans.spans):
                span_path = f"{path}.scopeSpans[{s}].spans[{n}]"
                if rejected is None:
                    yield _pb_span(span, span_path, resource, where)
                    continue
                try:
                    decoded = _pb_span(span, span_path, resource, where)
                except ImportRejected as exc:
                    rejected.append(str(exc.problems[0]) if exc.problems else str(exc))
                    continue
                yield decoded


def _pb_id(value: bytes, size: int, path: str, where: Where) -> str:
    if len(value) != size:
        if not value:
            raise where.fail(path, f"must be a string of {size * 2} hex digits, found null")
        raise where.fail(path, f"must be {size * 2} hex digits (or {size} bytes in base64), found "
                               f"{base64.b64encode(value).decode()[:60]!r}")
    if not any(value):
        raise where.fail(path, "is all zeros (an invalid id)")
    return value.hex()


def _pb_span(span: Any, path: str, resource: dict[str, Any], where: Where) -> Span:
    trace_id = _pb_id(span.trace_id, 16, f"{path}.traceId", where)
    span_id = _pb_id(span.span_id, 8, f"{path}.spanId", where)
    parent_id = _pb_id(span.parent_span_id, 8, f"{path}.parentSpanId", where) if span.parent_span_id else ""
    return Span(trace_id, span_id, parent_id, span.name, span.start_time_unix_nano,
                _pb_attributes(span.attributes, f"{path}.attributes", where), resource, span.trace_state[:TRACESTATE_KEPT],
                span.end_time_unix_nano, ERROR if span.status.code == STATUS_CODE_ERROR else "")


def _pb_attributes(items: Any, path: str, where: Where) -> dict[str, Any]:
    if len(items) > MAX_ATTRIBUTES:
        raise where.fail(path, f"{len(items):,} attributes, the limit is {MAX_ATTRIBUTES:,}")
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        try:
            out[item.key] = _pb_value(item.value, 0)
        except BadValue as exc:  # the path is written only for a refusal (it cost more than the value)
            raise where.fail(f"{path}[{i}].value{exc.suffix}", exc.message) from None
    return out


class BadValue(Exception):
    """An attribute value refused, with where inside the value (`suffix`) and why."""

    def __init__(self, suffix: str, message: str) -> None:
        super().__init__(message)
        self.suffix, self.message = suffix, message


def _pb_value(value: Any, depth: int) -> Any:
    if depth > MAX_VALUE_DEPTH:
        raise BadValue("", f"attribute values nested deeper than {MAX_VALUE_DEPTH}")
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind is None:
        return None
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        number = value.double_value
        return number if math.isfinite(number) else None
    if kind == "bool_value":
        return value.bool_value
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    if kind == "array_value":
        out: list[Any] = []
        for i, item in enumerate(value.array_value.values):
            try:
                out.append(_pb_value(item, depth + 1))
            except BadValue as exc:
                raise BadValue(f".arrayValue.values[{i}]{exc.suffix}", exc.message) from None
        return out
    if kind == "kvlist_value":
        pairs: dict[str, Any] = {}
        for i, item in enumerate(value.kvlist_value.values):
            try:
                pairs[item.key] = _pb_value(item.value, depth + 1)
            except BadValue as exc:
                raise BadValue(f".kvlistValue.values[{i}].value{exc.suffix}", exc.message) from None
        return pairs
    raise BadValue("", f"unknown AnyValue member {kind!r}")


def spans_of_traces_data(data: Any, where: Where, *, rejected: list[str] | None = None) -> list[Span]:
    """Return the spans of one TracesData (or ExportTraceServiceRequest) as a JSON-shaped dict.

    A malformed span raises ImportRejected (a file is all or nothing), unless `rejected` is a
    list: then the span is left out and why is appended to it (the OTLP/HTTP receiver answers
    those with partialSuccess). A malformed structure around the spans always raises.
    """
    return list(iter_traces_data_spans(data, where, rejected=rejected))


def check_traces_data(data: Any, where: Where) -> int:
    """Check the structure around the spans of a TracesData dict (what raises whatever `rejected` says) and return how
    many spans it holds, decoding none: the receiver refuses a malformed or too large request before staging any span."""
    return sum(len(spans) for _, _, spans in _scopes(data, where))


def iter_traces_data_spans(data: Any, where: Where, *, rejected: list[str] | None = None) -> Iterator[Span]:
    """Yield the spans of a TracesData dict one at a time (as `spans_of_traces_data`; its structure is checked as it goes)."""
    for scope_path, resource_attributes, spans in _scopes(data, where):
        for n, span in enumerate(spans):
            if rejected is None:
                yield _span(span, f"{scope_path}.spans[{n}]", resource_attributes, where)
                continue
            try:
                decoded = _span(span, f"{scope_path}.spans[{n}]", resource_attributes, where)
            except ImportRejected as exc:
                rejected.append(str(exc.problems[0]) if exc.problems else str(exc))
                continue
            yield decoded


def _scopes(data: Any, where: Where) -> Iterator[tuple[str, dict[str, Any], list[Any]]]:
    """Yield (path, resource attributes, spans list) for each scopeSpans of a TracesData dict, checking the structure."""
    if not isinstance(data, dict):
        raise where.fail("", f"must be a TracesData object, found {_kind(data)}")
    for r, resource_spans in enumerate(_list(data, ("resourceSpans", "resource_spans"), "resourceSpans", where)):
        path = f"resourceSpans[{r}]"
        _object(resource_spans, path, where)
        resource = resource_spans.get("resource") or {}
        _object(resource, f"{path}.resource", where)
        resource_attributes = attributes(resource.get("attributes"), f"{path}.resource.attributes", where)
        for s, scope_spans in enumerate(_list(resource_spans, ("scopeSpans", "scope_spans"), f"{path}.scopeSpans", where)):
            scope_path = f"{path}.scopeSpans[{s}]"
            _object(scope_spans, scope_path, where)
            yield scope_path, resource_attributes, _list(scope_spans, ("spans",), f"{scope_path}.spans", where)


def _span(span: Any, path: str, resource: dict[str, Any], where: Where) -> Span:
    _object(span, path, where)
    trace_id = otlp_id(span.get("traceId", span.get("trace_id")), 16, f"{path}.traceId", where)
    span_id = otlp_id(span.get("spanId", span.get("span_id")), 8, f"{path}.spanId", where)
    parent = span.get("parentSpanId", span.get("parent_span_id"))
    parent_id = "" if parent in (None, "") else otlp_id(parent, 8, f"{path}.parentSpanId", where)
    name = span.get("name", "")
    if not isinstance(name, str):
        raise where.fail(f"{path}.name", f"must be a string, found {_kind(name)}")
    start = _integer(span.get("startTimeUnixNano", span.get("start_time_unix_nano", 0)), f"{path}.startTimeUnixNano", where)
    state = span.get("traceState", span.get("trace_state")) or ""
    if not isinstance(state, str):
        raise where.fail(f"{path}.traceState", f"must be a string, found {_kind(state)}")
    end = span.get("endTimeUnixNano", span.get("end_time_unix_nano", 0))
    end = _integer(end, f"{path}.endTimeUnixNano", where) if end is not None else 0
    return Span(trace_id, span_id, parent_id, name, start, attributes(span.get("attributes"), f"{path}.attributes", where),
                resource, state[:TRACESTATE_KEPT], end, _status(span.get("status")))


def _status(value: Any) -> str:
    """Return "error" for a span status whose code is ERROR (2, or "STATUS_CODE_ERROR" in OTLP/JSON), else ""."""
    code = value.get("code") if isinstance(value, dict) else None
    return ERROR if code in (STATUS_CODE_ERROR, "STATUS_CODE_ERROR") else ""


def otlp_id(value: Any, size: int, path: str, where: Where) -> str:
    """Return a trace (16 bytes) or span (8 bytes) id as lowercase hex, from hex or base64; refuse all-zero ids."""
    if not isinstance(value, str):
        raise where.fail(path, f"must be a string of {size * 2} hex digits, found {_kind(value)}")
    text = value.lower()
    if len(value) == size * 2 and (HEX32 if size == 16 else HEX16).fullmatch(text):
        hex_id = text
    else:
        try:
            decoded = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            decoded = b""
        if len(decoded) != size:
            raise where.fail(path, f"must be {size * 2} hex digits (or {size} bytes in base64), found {value[:60]!r}")
        hex_id = decoded.hex()
    if hex_id == "0" * (size * 2):
        raise where.fail(path, "is all zeros (an invalid id)")
    return hex_id


def attributes(value: Any, path: str, where: Where) -> dict[str, Any]:
    """Return OTLP KeyValue attributes as {key: plain value}; bounded in number and depth."""
    if value is None:
        return {}
    if not isinstance(value, list):
        raise where.fail(path, f"must be a list of {{key, value}} objects, found {_kind(value)}")
    if len(value) > MAX_ATTRIBUTES:
        raise where.fail(path, f"{len(value):,} attributes, the limit is {MAX_ATTRIBUTES:,}")
    out: dict[str, Any] = {}
    for i, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise where.fail(f"{path}[{i}]", "must be a {key, value} object with a string key")
        out[item["key"]] = any_value(item.get("value"), f"{path}[{i}].value", where, 0)
    return out


def any_value(value: Any, path: str, where: Where, depth: int) -> Any:
    """Return an OTLP AnyValue as a plain value (bytes as base64 text)."""
    if depth > MAX_VALUE_DEPTH:
        raise where.fail(path, f"attribute values nested deeper than {MAX_VALUE_DEPTH}")
    if value is None or value == {}:
        return None
    if not isinstance(value, dict) or len(value) != 1:
        raise where.fail(path, "must be an AnyValue object with one typed member (stringValue, intValue, …)")
    (kind, inner), = value.items()
    if kind in ("stringValue", "string_value"):
        if not isinstance(inner, str):
            raise where.fail(path, f"stringValue must be a string, found {_kind(inner)}")
        return inner
    if kind in ("boolValue", "bool_value"):
        if not isinstance(inner, bool):
            raise where.fail(path, f"boolValue must be true or false, found {_kind(inner)}")
        return inner
    if kind in ("intValue", "int_value"):
        return _integer(inner, f"{path}.intValue", where)
    if kind in ("doubleValue", "double_value"):
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            return float(inner)
        if inner in ("NaN", "Infinity", "-Infinity"):
            return None  # not a usable score; JSON has no such number
        raise where.fail(path, f"doubleValue must be a number, found {_kind(inner)}")
    if kind in ("bytesValue", "bytes_value"):
        if not isinstance(inner, str):
            raise where.fail(path, "bytesValue must be base64 text")
        return inner
    if kind in ("arrayValue", "array_value"):
        items = (inner or {}).get("values") or [] if isinstance(inner, dict) else None
        if not isinstance(items, list):
            raise where.fail(path, "arrayValue must be {values: [...]}")
        return [any_value(item, f"{path}.arrayValue.values[{i}]", where, depth + 1) for i, item in enumerate(items)]
    if kind in ("kvlistValue", "kvlist_value"):
        items = (inner or {}).get("values") or [] if isinstance(inner, dict) else None
        if not isinstance(items, list):
            raise where.fail(path, "kvlistValue must be {values: [{key, value}, ...]}")
        out = {}
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("key"), str):
                raise where.fail(f"{path}.kvlistValue.values[{i}]", "must be a {key, value} object")
            out[item["key"]] = any_value(item.get("value"), f"{path}.kvlistValue.values[{i}].value", where, depth + 1)
        return out
    raise where.fail(path, f"unknown AnyValue member {kind!r}")


def _integer(value: Any, path: str, where: Where) -> int:
    # OTLP/JSON writes 64-bit integers as decimal strings; some exporters write numbers.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit() and len(value) <= 20:
        return int(value)
    raise where.fail(path, f"must be an integer (or its decimal string), found {_kind(value)}")


def _list(data: dict[str, Any], names: tuple[str, ...], path: str, where: Where) -> list[Any]:
    for name in names:
        if name in data:
            value = data[name]
            if value is None:
                return []
            if not isinstance(value, list):
                raise where.fail(path, f"must be a list, found {_kind(value)}")
            return value
    return []


def _object(value: Any, path: str, where: Where) -> None:
    if not isinstance(value, dict):
        raise where.fail(path, f"must be an object, found {_kind(value)}")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)


# --------------------------------------------------------------------------- Langfuse


def langfuse_trace_id(value: str) -> str:
    """Return a Langfuse trace id as 32 lowercase hex: itself, a UUID without dashes, or the first half of its sha256."""
    text = value.strip().lower().replace("-", "")
    if HEX32.fullmatch(text):
        return text
    return hashlib.sha256(value.encode()).hexdigest()[:32]


def langfuse_traces(raw: bytes) -> list[LangfuseTrace]:
    """Read Langfuse's export: a JSON array of traces, {"data": [...]}, one trace, or one trace per line."""
    try:
        items = [(None, parse_json(raw))]
    except ImportRejected:
        items = list(json_lines(raw))  # a JSONL export: one trace per line (the first bad line is the error)
        if len(items) < 2:
            raise
    traces: list[LangfuseTrace] = []
    for line, data in items:
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            data = data["data"]
        for i, trace in enumerate(data if isinstance(data, list) else [data]):
            traces.append(_langfuse_trace(trace, f"[{i}]" if isinstance(data, list) else "", Where(line)))
    return traces


def _langfuse_trace(trace: Any, path: str, where: Where) -> LangfuseTrace:
    _object(trace, path or "trace", where)
    source_id = trace.get("id")
    if not isinstance(source_id, str) or not source_id.strip() or len(source_id) > 200:
        raise where.fail(f"{path}.id", "a Langfuse trace needs an 'id' string (1 to 200 characters)")
    observations = trace.get("observations") or []
    scores = trace.get("scores") or []
    for name, value in (("observations", observations), ("scores", scores)):
        if not isinstance(value, list):
            raise where.fail(f"{path}.{name}", f"must be a list, found {_kind(value)}")
        if len(value) > MAX_OBSERVATIONS:
            raise where.fail(f"{path}.{name}", f"{len(value):,} items, the limit is {MAX_OBSERVATIONS:,}")
        for i, item in enumerate(value):
            # An API export may list observations by id only: those carry nothing to map.
            if not isinstance(item, (dict, str)):
                raise where.fail(f"{path}.{name}[{i}]", f"must be an object, found {_kind(item)}")
    return LangfuseTrace(langfuse_trace_id(source_id), source_id, trace,
                         [o for o in observations if isinstance(o, dict)], [s for s in scores if isinstance(s, dict)])
