"""A RAG app traced for calibrate (docs/production.md): one trace per question, thumbs sent to /v1/feedback.

    export CALIBRATE_URL=http://localhost:5000 CALIBRATE_TOKEN=calt_…        # calibrate traces token --dataset prod-rag
    export OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=$CALIBRATE_URL/v1/traces      # or your Collector's
    export OTEL_EXPORTER_OTLP_TRACES_HEADERS="Authorization=Bearer $CALIBRATE_TOKEN" OPENAI_API_KEY=sk-…
    python examples/rag_app.py          # type a question a line; "-" or "+" rates the last answer
"""
import json
import os
import sys
import urllib.request

from openai import OpenAI
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

provider = TracerProvider(resource=Resource.create({"service.name": "rag-app"}))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # endpoint and token from OTEL_EXPORTER_OTLP_*
OpenAIInstrumentor().instrument(tracer_provider=provider)  # the LLM span, under the CHAIN root
tracer, llm = provider.get_tracer("rag-app"), OpenAI()  # OPENAI_API_KEY, OPENAI_BASE_URL
DOCS = [("iron", "d1", "Iron carries oxygen in the blood; 27 mg a day in pregnancy."),
        ("zinc", "d2", "Zinc supports the immune system; 11 mg a day in pregnancy.")]


def answer(question: str) -> tuple[str, str]:
    """Answer a question; return the answer and its trace id (what thumbs name)."""
    with tracer.start_as_current_span("rag") as root:  # the CHAIN root: question, answer, the app's metadata
        found = [doc for doc in DOCS if doc[0] in question.lower()] or DOCS
        root.set_attributes({"openinference.span.kind": "CHAIN", "input.value": question,
                             "metadata": json.dumps({"topic": found[0][0]})})
        with tracer.start_as_current_span("retrieve") as span:  # the RETRIEVER: the contexts the answer may use
            span.set_attributes({"openinference.span.kind": "RETRIEVER", "input.value": question})
            for i, (_, doc_id, text) in enumerate(found):
                span.set_attributes({f"retrieval.documents.{i}.document.id": doc_id,
                                     f"retrieval.documents.{i}.document.content": text})
        context = "\n".join(text for _, _, text in found)
        reply = llm.chat.completions.create(model=os.environ.get("RAG_MODEL", "gpt-4o-mini"), messages=[
            {"role": "user", "content": f"Answer from the context only.\nContext:\n{context}\nQuestion: {question}"}])
        text = reply.choices[0].message.content
        root.set_attribute("output.value", text)
        return text, format(root.get_span_context().trace_id, "032x")


def thumbs(trace_id: str, value: str) -> None:
    """Send the user's thumbs ("up" or "down") for a trace to calibrate."""
    body = json.dumps({"trace_id": trace_id, "value": value}).encode()
    urllib.request.urlopen(urllib.request.Request(os.environ["CALIBRATE_URL"] + "/v1/feedback", data=body, headers={
        "Content-Type": "application/json", "Authorization": "Bearer " + os.environ["CALIBRATE_TOKEN"]}), timeout=10)


if __name__ == "__main__":
    last = None
    for line in map(str.strip, sys.stdin):
        if line in ("-", "+") and last:
            thumbs(last, "down" if line == "-" else "up")
        elif line:
            text, last = answer(line)
            print(f"{last} {text}", flush=True)
    provider.shutdown()  # sends the spans still batched
