"""Turn a trace (its spans, or a Langfuse trace) into a RAG sample record, or a reason to skip it.

The conventions are tried in order and the first that applies wins (docs/formats.md,
"Traces", has the table): OpenInference (`openinference.span.kind` on a span), then the
OpenTelemetry GenAI conventions (`gen_ai.*` attributes), then Langfuse (its own export).
A trace that cannot make a sample returns a `Skip` with a reason key; `HINTS` says what to
enable in the exporter for each. A trace whose spans cannot be mapped at all (its root's start
time outside the years calibrate takes, calibrate.bounds: a trace file may hold one; the receiver
refuses such spans, but one staged before it did may still settle) raises `Unmappable`: the
importer names the trace and goes on, settling quarantines it (staging.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from calibrate.bounds import start_ns_problem, started_at_problem
from calibrate.ingest.sample_records import canonical_json
from calibrate.ingest.step_records import StepsInvalid, check_steps
from calibrate.ingest.traces.decode import LangfuseTrace, Span
from calibrate.ingest.traces.trajectory import ns_iso, session_of, step_content, trace_steps
from calibrate.ingest.traces.upstream import WITH_THRESHOLD, trace_upstream
from calibrate.reasons import Reason

OPENINFERENCE, GENAI, LANGFUSE = "openinference", "gen_ai", "langfuse"
KIND = "openinference.span.kind"
DOCUMENTS = "retrieval.documents."
# The application's own metadata (the root span's OpenInference `metadata` JSON and `metadata.<key>` attributes,
# Langfuse's trace `metadata`) becomes sample.metadata.<key> within these bounds; what is left out is counted.
APP_METADATA = "metadata"
APP_MAX_KEYS = 50
APP_KEY = re.compile(r"[A-Za-z0-9_]{1,64}")  # a key every --where, --strata, --fields and --group-by can name
APP_TEXT_MAX = 200
# Keys calibrate writes itself: the application's metadata never overwrites them (docs/formats.md, "Traces").
RESERVED = frozenset({"trace_id", "root_span_id", "convention", "content_sha256", "inclusion_prob", "upstream_prob",
                      "service_name", "started_at", "session_id", "prompt_version", "model", "retrieval_scores",
                      "langfuse_trace_id", "release", "turns", "trace_ids", "late_turn"})
# What to add or enable when traces are skipped for a reason: the reason code `trace_skip_<reason>` (worded in the
# reader's language on the dataset page; `traces import` and `traces flush` print the commonest in English).
SKIP_REASONS = ("no_root_span", "unknown_convention", "content_not_captured", "no_question", "no_answer", "no_contexts",
                "over_max", "invalid", "too_long", "unmappable", "quarantined", "inclusion_prob_below_min")
HINTS = {reason: str(Reason(f"trace_skip_{reason}")) for reason in SKIP_REASONS}


class Unmappable(ValueError):
    """A trace whose spans cannot be mapped (the message says why); the import names it and goes on."""


@dataclass(frozen=True)
class Skip:
    """Why a trace made no sample (a key of HINTS)."""

    reason: str


def started_at(start_ns: int) -> str | None:
    """Return a span's start (Unix nanoseconds) as ISO 8601 UTC with microseconds, or None when unset (0).

    Unmappable outside the years calibrate takes (calibrate.bounds): 1e22 ns is year 318857, which no
    date type holds and no window could show.
    """
    if start_ns == 0:
        return None
    problem = start_ns_problem(start_ns)
    if problem is not None:
        raise Unmappable(f"the root span's startTimeUnixNano {problem}")
    return ns_iso(start_ns)


def content_sha256(question: str, answer: str, contexts: list[dict[str, Any]], steps: list[dict[str, Any]] | None = None) -> str:
    """Return the hash of what a sample says (question, answer, contexts; an agent's steps, `trajectory.step_content`):
    the same content under two trace ids is one. Without steps (a RAG trace) it is what it was before steps were kept."""
    content: dict[str, Any] = {"question": question, "answer": answer, "contexts": contexts}
    if steps:
        content["steps"] = step_content(steps)
    return hashlib.sha256(canonical_json(content).encode()).hexdigest()


def is_trajectory(steps: list[dict[str, Any]]) -> bool:
    """Whether a trace is an agent's trajectory (an agent or a tool step): it needs no contexts, its steps are content."""
    return any(step["kind"] in ("agent", "tool") for step in steps)


def root_of(spans: list[Span]) -> Span | None:
    """Return the trace's root: the earliest span without a parent in the trace."""
    ids = {span.span_id for span in spans}
    roots = [span for span in spans if not span.parent_id or span.parent_id not in ids]
    roots = [span for span in roots if not span.parent_id] or roots
    return min(roots, key=lambda s: (s.start_ns, s.span_id)) if roots else None


def map_spans(spans: list[Span], *, max_chars: int, turn: bool = False) -> dict[str, Any] | Skip:
    """Return the sample record of one trace's spans (unique by span id), or why it makes none.

    The record carries the trace's `steps` (trajectory.py), bounded, with what the bounds cut as
    `steps_cut` and `step_texts_cut` (the importer counts and removes them). `turn`: the trace is a
    turn of a conversation (merged with the others by the importer), so it needs no contexts of its own.
    """
    root = root_of(spans)
    if root is None or root.parent_id:
        return Skip("no_root_span")
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.span_id))
    if any(KIND in span.attributes for span in ordered):
        mapped = _openinference(root, ordered)
        convention = OPENINFERENCE
    elif any(key.startswith("gen_ai.") for span in ordered for key in span.attributes):
        mapped = _genai(root, ordered)
        convention = GENAI
    else:
        return Skip("unknown_convention")
    if isinstance(mapped, Skip):
        return mapped
    question, answer, contexts, extra = mapped
    try:
        steps = check_steps(trace_steps(spans, convention))
    except StepsInvalid:  # text that is not text (a lone surrogate), spans no real exporter sends: as the samples import
        return Skip("invalid")
    trajectory = is_trajectory(steps.steps)
    metadata = {"trace_id": root.trace_id, "root_span_id": root.span_id, "convention": convention}
    service = root.resource.get("service.name")
    if isinstance(service, str):
        metadata["service_name"] = service
    when = started_at(root.start_ns)
    if when:
        metadata["started_at"] = when
    session = session_of(ordered, root)
    if session is not None:
        metadata["session_id"] = session
    version = _first(ordered, root, ("llm.prompt_template.version", "gen_ai.prompt.version", "prompt.version"))
    if version is not None:
        metadata["prompt_version"] = str(version)
    metadata.update(extra)
    app, dropped = app_metadata(_app_sources(root.attributes))
    upstream, mixed = trace_upstream(root.trace_state, root.trace_id, [span.trace_state for span in spans if span is not root])
    if upstream.kind == WITH_THRESHOLD:
        metadata["upstream_prob"] = upstream.probability
    made = record(root.trace_id, question, answer, contexts, {**app, **metadata}, max_chars=max_chars,
                  needs_contexts=not (trajectory or turn), steps=steps.steps if trajectory else None)
    if not isinstance(made, Skip):
        made.update(upstream=(upstream.kind, mixed), metadata_dropped=dropped, steps=steps.steps,
                    steps_cut=steps.steps_cut, step_texts_cut=steps.texts_cut)
    return made


def _app_sources(attributes: dict[str, Any]) -> list[Any]:
    """Return the root span's application metadata, weakest first: the `metadata` attribute (JSON text or a kvlist),
    then the `metadata.<key>` attributes."""
    whole = attributes.get(APP_METADATA)
    if isinstance(whole, str):
        try:
            whole = json.loads(whole)
        except (ValueError, RecursionError):
            pass  # not JSON: counted as one value left out
    dotted = {key[len(APP_METADATA) + 1:]: value for key, value in attributes.items() if key.startswith(APP_METADATA + ".")}
    return [source for source in (whole, dotted or None) if source is not None]


def app_metadata(sources: list[Any]) -> tuple[dict[str, Any], int]:
    """Return the application's metadata a sample keeps, and how many keys (or values) were left out.

    `sources`: objects of key → value, a later one winning for the same key (anything but an object
    is one value left out). Kept: a key of APP_KEY's shape that calibrate does not write itself
    (RESERVED), with a scalar value (a string of at most APP_TEXT_MAX characters, a finite number,
    true or false); at most APP_MAX_KEYS keys, by key order. Everything else is counted.
    """
    merged: dict[str, Any] = {}
    dropped = 0
    for source in sources:
        if not isinstance(source, dict):
            dropped += 1
            continue
        merged.update(source)
    kept: dict[str, Any] = {}
    for key in sorted(merged, key=str):
        value = merged[key]
        usable = isinstance(value, (bool, int)) or (isinstance(value, float) and math.isfinite(value)) or (
            isinstance(value, str) and len(value) <= APP_TEXT_MAX)
        if (not isinstance(key, str) or not APP_KEY.fullmatch(key) or key in RESERVED or not usable
                or len(kept) >= APP_MAX_KEYS):
            dropped += 1
            continue
        kept[key] = value
    return kept, dropped


def record(trace_id: str, question: Any, answer: Any, contexts: list[dict[str, Any]], metadata: dict[str, Any], *,
           max_chars: int, needs_contexts: bool = True, steps: list[dict[str, Any]] | None = None) -> dict[str, Any] | Skip:
    """Return a samples-import record, or a Skip when a field is missing or too long.

    `needs_contexts`: False for an agent's trajectory (or a conversation's turn), which may have retrieved nothing;
    `steps`: a trajectory's steps, part of its content digest.
    """
    if not isinstance(question, str) or not question.strip():
        return Skip("no_question")
    if not isinstance(answer, str) or not answer.strip():
        return Skip("no_answer")
    if not contexts and needs_contexts:
        return Skip("no_contexts")
    if max(len(question), len(answer), *(len(c["text"]) for c in contexts)) > max_chars:
        return Skip("too_long")
    metadata = {**metadata, "content_sha256": content_sha256(question, answer, contexts, steps)}
    return {"id": trace_id, "question": question, "answer": answer, "contexts": contexts, "metadata": metadata}


def _first(ordered: list[Span], root: Span, keys: tuple[str, ...]) -> Any:
    for span in (root, *ordered):
        for key in keys:
            value = span.attributes.get(key)
            if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
                return value
    return None


# --------------------------------------------------------------------------- OpenInference


def _openinference(root: Span, ordered: list[Span]) -> tuple | Skip:
    chains = [span for span in ordered if span.attributes.get(KIND) in ("CHAIN", "AGENT")]
    top = root if root.attributes.get(KIND) in ("CHAIN", "AGENT") else (chains[0] if chains else root)
    question = _text_value(top.attributes.get("input.value"), top.attributes.get("input.mime_type"))
    answer = _text_value(top.attributes.get("output.value"), top.attributes.get("output.mime_type"))
    contexts, scores = [], []
    for span in ordered:
        if span.attributes.get(KIND) != "RETRIEVER":
            continue
        for _, fields in sorted(_documents(span.attributes).items()):
            text = fields.get("content")
            if isinstance(text, str) and text.strip():
                doc_id = fields.get("id")
                contexts.append({"text": text, "doc_id": None if doc_id is None else str(doc_id)})
                score = fields.get("score")
                scores.append(score if isinstance(score, (int, float)) and not isinstance(score, bool) else None)
    extra: dict[str, Any] = {}
    models = [span.attributes.get("llm.model_name") for span in ordered if span.attributes.get(KIND) == "LLM"]
    model = next((m for m in models if isinstance(m, str) and m), None)
    if model:
        extra["model"] = model
    if any(score is not None for score in scores):
        extra["retrieval_scores"] = scores
    return question, answer, contexts, extra


def _documents(attributes: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Return retrieval.documents.<i>.document.{content,id,score} by index i."""
    docs: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if not key.startswith(DOCUMENTS):
            continue
        index, _, rest = key[len(DOCUMENTS):].partition(".document.")
        if index.isdigit() and rest in ("content", "id", "score"):
            docs.setdefault(int(index), {})[rest] = value
    return docs


def _text_value(value: Any, mime: Any) -> str | None:
    """Return a text attribute; a JSON input/output (mime application/json) gives its question/answer-like member."""
    if not isinstance(value, str):
        return None
    if mime == "application/json":
        try:
            data = json.loads(value)
        except ValueError:
            return value
        return _text_of(data) or value
    return value


def _text_of(data: Any) -> str | None:
    if isinstance(data, str):
        return data
    if isinstance(data, dict):
        for key in ("question", "query", "input", "answer", "output", "content", "text", "result"):
            if isinstance(data.get(key), str):
                return data[key]
    return None


# --------------------------------------------------------------------------- OpenTelemetry GenAI


def _genai(root: Span, ordered: list[Span]) -> tuple | Skip:
    question = answer = None
    captured = False
    for span in (root, *ordered):
        attrs = span.attributes
        if question is None:
            question = _message_text(attrs.get("gen_ai.input.messages"), "user") or attrs.get("gen_ai.prompt.0.content")
        if answer is None:
            answer = _message_text(attrs.get("gen_ai.output.messages"), "assistant") or attrs.get("gen_ai.completion.0.content")
        captured = captured or any(key in attrs for key in ("gen_ai.input.messages", "gen_ai.output.messages",
                                                            "gen_ai.prompt.0.content", "gen_ai.retrieval.documents"))
    if not captured:
        return Skip("content_not_captured")
    contexts, scores = [], []
    for span in ordered:
        docs = span.attributes.get("gen_ai.retrieval.documents")
        if isinstance(docs, str):
            try:
                docs = json.loads(docs)
            except ValueError:
                docs = None
        for doc in docs if isinstance(docs, list) else []:
            if isinstance(doc, dict) and isinstance(doc.get("content"), str) and doc["content"].strip():
                doc_id = doc.get("id", doc.get("source_id"))
                contexts.append({"text": doc["content"], "doc_id": None if doc_id is None else str(doc_id)})
                score = doc.get("score")
                scores.append(score if isinstance(score, (int, float)) and not isinstance(score, bool) else None)
    extra: dict[str, Any] = {}
    model = _first(ordered, root, ("gen_ai.response.model", "gen_ai.request.model"))
    if model is not None:
        extra["model"] = str(model)
    if any(score is not None for score in scores):
        extra["retrieval_scores"] = scores
    return question, answer, contexts, extra


def _message_text(value: Any, role: str) -> str | None:
    """Return the text of the last message of `role` in gen_ai.{input,output}.messages (JSON text or a list)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, list):
        return None
    for message in reversed(value):
        if isinstance(message, dict) and message.get("role") == role:
            parts = message.get("parts")
            texts = [p.get("content") for p in parts if isinstance(p, dict) and p.get("type") == "text"] \
                if isinstance(parts, list) else [message.get("content")]
            texts = [t for t in texts if isinstance(t, str)]
            if texts:
                return "\n".join(texts)
    return None


# --------------------------------------------------------------------------- Langfuse


def map_langfuse(trace: LangfuseTrace, *, max_chars: int) -> dict[str, Any] | Skip:
    """Return the sample record of a Langfuse trace (input → question, output → answer, retrieval output → contexts)."""
    data = trace.data
    question, answer = _langfuse_text(data.get("input"), "user"), _langfuse_text(data.get("output"), "assistant")
    observations = sorted(trace.observations, key=lambda o: str(o.get("startTime") or ""))
    contexts: list[dict[str, Any]] = []
    for observation in observations:
        if observation.get("type") == "RETRIEVER" or "retriev" in str(observation.get("name") or "").lower():
            contexts.extend(_langfuse_documents(observation.get("output")))
    metadata: dict[str, Any] = {"trace_id": trace.trace_id, "root_span_id": "", "convention": LANGFUSE}
    if trace.source_id != trace.trace_id:
        metadata["langfuse_trace_id"] = trace.source_id
    for key, name in (("timestamp", "started_at"), ("sessionId", "session_id"), ("release", "release"),
                      ("version", "prompt_version")):
        if isinstance(data.get(key), (str, int)) and not isinstance(data.get(key), bool):
            metadata[name] = str(data[key])
    if "started_at" in metadata and started_at_problem(metadata["started_at"]) is not None:
        del metadata["started_at"]  # not a time the windows can read: the sample's creation time stands in, as before
    model = next((o.get("model") for o in observations if o.get("type") == "GENERATION" and isinstance(o.get("model"), str)),
                 None)
    if model:
        metadata["model"] = model
    prompt_version = next((o.get("promptVersion") for o in observations if isinstance(o.get("promptVersion"), (int, str))),
                          None)
    if prompt_version is not None and "prompt_version" not in metadata:
        metadata["prompt_version"] = str(prompt_version)
    app, dropped = app_metadata([] if data.get("metadata") is None else [data["metadata"]])
    made = record(trace.trace_id, question, answer, contexts, {**app, **metadata}, max_chars=max_chars)
    if not isinstance(made, Skip):
        made["metadata_dropped"] = dropped
    return made


def langfuse_feedback(trace: LangfuseTrace) -> int | None:
    """Return the trace's user feedback from its scores (-1, 0, 1), or None: a score named like feedback or thumbs."""
    for score in trace.scores:
        name = str(score.get("name") or "").lower()
        if not any(word in name for word in ("feedback", "thumb", "user")):
            continue
        value = score.get("stringValue", score.get("value"))
        if score.get("dataType") == "BOOLEAN" and isinstance(value, (int, float)):
            return 1 if value >= 1 else -1
        parsed = feedback_value(value)
        if parsed is not None:
            return parsed
    return None


def feedback_value(value: Any) -> int | None:
    """Return -1/0/1 from "down"/"up" (and thumbs_down, 👎 …) or a number's sign; None if not feedback."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):  # NaN and 1e999 (infinity, once parsed) say nothing
            return None
        return (value > 0) - (value < 0)
    if isinstance(value, str):
        text = value.strip().lower().replace("-", "_").replace(" ", "_")
        if text in ("down", "thumbs_down", "thumbsdown", "negative", "bad", "👎"):
            return -1
        if text in ("up", "thumbs_up", "thumbsup", "positive", "good", "👍"):
            return 1
    return None


def _langfuse_text(value: Any, role: str) -> str | None:
    if isinstance(value, list):  # chat messages
        for message in reversed(value):
            if isinstance(message, dict) and message.get("role") == role and isinstance(message.get("content"), str):
                return message["content"]
        return None
    if isinstance(value, dict):
        return _text_of(value)
    return value if isinstance(value, str) else None


def _langfuse_documents(output: Any) -> list[dict[str, Any]]:
    if isinstance(output, dict):
        output = next((output[key] for key in ("documents", "docs", "results", "contexts") if isinstance(output.get(key), list)),
                      None)
    out = []
    for doc in output if isinstance(output, list) else []:
        if isinstance(doc, str) and doc.strip():
            out.append({"text": doc, "doc_id": None})
        elif isinstance(doc, dict):
            text = next((doc[key] for key in ("content", "page_content", "pageContent", "text") if isinstance(doc.get(key), str)),
                        None)
            meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
            doc_id = doc.get("id", meta.get("id"))
            if text and text.strip():
                out.append({"text": text, "doc_id": None if doc_id is None else str(doc_id)})
    return out
