"""Trace files for the traces import tests: a RAG program instrumented with the OpenTelemetry SDK, and volume built as protobuf.

The small program runs the real SDK (a TracerProvider, OpenInference attributes on a root
CHAIN span with RETRIEVER and LLM children) and encodes what it recorded with the SDK's own
OTLP encoder (`opentelemetry.exporter.otlp.proto.common`), as the OTLP/HTTP exporter sends
it. Volume (thousands of traces) is built as the same protobuf messages directly: the SDK
would spend the suite's time on its own bookkeeping.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

BASE_NS = 1_764_000_000_123_456_789  # 2025-11-24T16:00:00.123456Z


def rag_program(questions: list[str], *, processors=()) -> ExportTraceServiceRequest:
    """Run a RAG-shaped program under the SDK, one trace per question; return what the OTLP exporter would send.

    `processors`: more span processors (e.g. a BatchSpanProcessor with the OTLP/HTTP exporter), shut down at the end.
    """
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "rag-api"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for processor in processors:
        provider.add_span_processor(processor)
    tracer = provider.get_tracer("rag-app")
    for n, question in enumerate(questions):
        with tracer.start_as_current_span("rag") as root:
            root.set_attribute("openinference.span.kind", "CHAIN")
            root.set_attribute("input.value", question)
            root.set_attribute("session.id", f"session-{n % 3}")
            root.set_attribute("llm.prompt_template.version", "v7")
            with tracer.start_as_current_span("retrieve") as retriever:
                retriever.set_attribute("openinference.span.kind", "RETRIEVER")
                retriever.set_attribute("input.value", question)
                for rank in range(2):
                    retriever.set_attribute(f"retrieval.documents.{rank}.document.id", f"doc-{n}-{rank}")
                    retriever.set_attribute(f"retrieval.documents.{rank}.document.content", f"Passage {rank} about {question}")
                    retriever.set_attribute(f"retrieval.documents.{rank}.document.score", 0.9 - rank / 10)
            with tracer.start_as_current_span("generate") as llm:
                llm.set_attribute("openinference.span.kind", "LLM")
                llm.set_attribute("llm.model_name", "gpt-4o-mini")
                answer = f"The answer to {question} is in passage 0."
                llm.set_attribute("output.value", answer)
            root.set_attribute("output.value", answer)
    provider.shutdown()
    return encode_spans(exporter.get_finished_spans())


def _value(value) -> AnyValue:
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    return AnyValue(int_value=value)


def trace_id_of(n: int, seed: str = "t") -> str:
    """Return the hex trace id of synthetic trace `n`."""
    return hashlib.sha256(f"{seed}:{n}".encode()).hexdigest()[:32]


def synthetic_request(n_traces: int, *, repeat_every: int = 20, seed: str = "t") -> ExportTraceServiceRequest:
    """Return `n_traces` OpenInference RAG traces (root CHAIN, RETRIEVER, LLM) as protobuf; every `repeat_every`-th span sent twice."""
    spans: list[PbSpan] = []
    for n in range(n_traces):
        trace = bytes.fromhex(trace_id_of(n, seed))
        root_id, retriever_id, llm_id = (hashlib.sha256(f"{seed}:{n}:{k}".encode()).digest()[:8] for k in range(3))
        start = BASE_NS + n * 1_000_000

        def span(span_id, parent, name, attrs, offset, trace=trace, start=start):
            return PbSpan(trace_id=trace, span_id=span_id, parent_span_id=parent, name=name,
                          start_time_unix_nano=start + offset, end_time_unix_nano=start + offset + 500,
                          attributes=[KeyValue(key=k, value=_value(v)) for k, v in attrs.items()])

        question, answer = f"Question {n}?", f"Answer {n}."
        spans.append(span(root_id, b"", "rag", {"openinference.span.kind": "CHAIN", "input.value": question,
                                                "output.value": answer}, 0))
        spans.append(span(retriever_id, root_id, "retrieve", {
            "openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.content": f"Context of {n}.",
            "retrieval.documents.0.document.id": f"d{n}", "retrieval.documents.0.document.score": 0.5}, 10))
        spans.append(span(llm_id, root_id, "llm", {"openinference.span.kind": "LLM", "llm.model_name": "m1"}, 20))
    repeats = spans[::repeat_every] if repeat_every else []
    resource = [KeyValue(key="service.name", value=AnyValue(string_value="rag-api"))]
    request = ExportTraceServiceRequest()
    for group in (spans, repeats):
        if group:
            resource_spans = ResourceSpans(scope_spans=[ScopeSpans(spans=group)])
            resource_spans.resource.attributes.extend(resource)
            request.resource_spans.append(resource_spans)
    return request


def collector_json(request: ExportTraceServiceRequest) -> dict:
    """Return the request as OTLP/JSON the way the collector's file exporter writes it: hex ids (json_format writes base64)."""
    data = json_format.MessageToDict(request)
    for resource_spans in data.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return data


def write_encodings(folder: Path, request: ExportTraceServiceRequest, *, lines: int = 4) -> dict[str, Path]:
    """Write the request as OTLP protobuf, OTLP/JSON and OTLP/JSONL (split into `lines` TracesData); return format → path."""
    folder.mkdir(parents=True, exist_ok=True)
    proto = folder / "traces.pb"
    proto.write_bytes(request.SerializeToString())
    data = collector_json(request)
    whole = folder / "traces.json"
    whole.write_text(json.dumps(data, indent=1), encoding="utf-8")
    # JSONL: the spans split over several TracesData lines, as a collector flushes them.
    spans = [(rs.get("resource", {}), span) for rs in data["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]
    size = -(-len(spans) // lines)
    jsonl = folder / "traces.jsonl"
    with jsonl.open("w", encoding="utf-8") as handle:
        for start in range(0, len(spans), size):
            part = spans[start:start + size]
            handle.write(json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}
                                                       for resource, span in part]}) + "\n")
    return {"otlp-proto": proto, "otlp-json": whole, "otlp-jsonl": jsonl}
