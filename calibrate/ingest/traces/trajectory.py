"""A trace's steps (its spans as an agent's trajectory), and a conversation's traces as one sample's turns.

`trace_steps` turns the spans of one trace into the samples format's `steps` (docs/formats.md,
"Steps"), by the convention the mapping chose: OpenInference (`openinference.span.kind`,
`input.value`, `output.value`, `tool.name`, `tool.parameters`) or the OpenTelemetry GenAI
conventions (`gen_ai.operation.name`: invoke_agent → agent, execute_tool → tool, chat → llm …;
`gen_ai.tool.name`, `gen_ai.tool.call.arguments` and `.result`, the input and output messages). A
span with neither is a step of kind `other`. Every span of the trace is a step, in start order:
by start time, and among steps started at the same time depth first (a parent before its
children, siblings by span id); a child whose clock says it started before its parent is placed
(and its start written) at its parent's start. A span's status is `error` when its OTLP status
code is ERROR (or it carries `error.type`), else `ok`. The bounds (calibrate.bounds) are applied
by the steps validator (ingest/step_records.py), which counts what it cuts.

`merge_turns` makes one sample of a conversation's traces (`traces import --sessions`, a
receiver token with sessions): each trace a turn, numbered from 0 by the turns' start; the
question is the first turn's, the answer the last turn's, the contexts every turn's in order, the
steps every turn's (each with its `turn`). docs/production.md, "Conversations".
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from calibrate.bounds import start_ns_problem
from calibrate.ingest.traces.decode import ERROR, Span
from calibrate.models import STEP_KINDS

KIND = "openinference.span.kind"
SESSION_KEYS = ("session.id", "gen_ai.conversation.id")
SESSION_PREFIX = "session:"
# gen_ai.operation.name → step kind (OpenTelemetry GenAI semantic conventions, 1.37).
GENAI_KINDS = {"invoke_agent": "agent", "create_agent": "agent", "execute_tool": "tool", "chat": "llm",
               "text_completion": "llm", "generate_content": "llm", "embeddings": "embedding", "retrieval": "retriever"}
_JSON = "application/json"


def trace_steps(spans: list[Span], convention: str) -> list[dict[str, Any]]:
    """Return the steps of one trace's spans (unique by span id), in start order, not yet bounded."""
    ordered = ordered_spans(spans)
    index = {span.span_id: n for n, (span, _) in enumerate(ordered)}
    out = []
    for span, start_ns in ordered:
        step = _genai_step(span) if convention == "gen_ai" else _openinference_step(span)
        parent = span.parent_id if span.parent_id in index else None
        duration = (span.end_ns - span.start_ns) / 1e6 if span.end_ns and span.start_ns and span.end_ns >= span.start_ns else None
        out.append({"id": span.span_id, "parent": parent, "name": span.name, "status": _status(span),
                    "started_at": _iso(start_ns), "duration_ms": duration, **step})
    return out


def ordered_spans(spans: list[Span]) -> list[tuple[Span, int]]:
    """Return the spans in start order with the start each is placed at (never before its parent's), depth first on ties."""
    by_id = {span.span_id: span for span in spans}
    children: dict[str, list[Span]] = {}
    roots = []
    for span in spans:
        if span.parent_id and span.parent_id in by_id and span.parent_id != span.span_id:
            children.setdefault(span.parent_id, []).append(span)
        else:
            roots.append(span)
    placed: list[tuple[int, int, Span]] = []  # (start placed at, depth-first position, span)
    seen: set[str] = set()
    stack = [(span, 0) for span in sorted(roots, key=lambda s: (s.start_ns, s.span_id), reverse=True)]
    while stack:
        span, floor = stack.pop()
        if span.span_id in seen:  # a cycle of parents in hostile data: each span once
            continue
        seen.add(span.span_id)
        start = max(span.start_ns, floor)
        placed.append((start, len(placed), span))
        stack.extend((child, start) for child in sorted(children.get(span.span_id, []),
                                                         key=lambda s: (s.start_ns, s.span_id), reverse=True))
    for span in spans:  # spans only a cycle reaches: after the rest, by their own start
        if span.span_id not in seen:
            seen.add(span.span_id)
            placed.append((span.start_ns, len(placed), span))
    placed.sort(key=lambda item: (item[0], item[1]))
    return [(span, start) for start, _, span in placed]


def session_of(spans: list[Span], root: Span | None) -> str | None:
    """Return the conversation a trace belongs to: `session.id` or `gen_ai.conversation.id`, the root's first."""
    for span in ([root] if root is not None else []) + sorted(spans, key=lambda s: (s.start_ns, s.span_id)):
        for key in SESSION_KEYS:
            value = span.attributes.get(key)
            if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
                return str(value).strip()[:400]
    return None


def merge_turns(session_id: str, turns: list[dict[str, Any]]) -> dict[str, Any]:
    """Return one sample record of a conversation's turns (mapped records, in start order): see the module docstring.

    The metadata is the first turn's, with `trace_id` the first trace's, `trace_ids` every turn's
    and `turns` their number; `content_sha256` is left for the caller to compute over the merged content.
    """
    first, last = turns[0], turns[-1]
    steps = []
    for turn, record in enumerate(turns):
        steps.extend({**step, "turn": turn} for step in record.get("steps") or [])
    metadata = {**first["metadata"], "session_id": session_id, "turns": len(turns),
                "trace_ids": [record["metadata"]["trace_id"] for record in turns]}
    metadata.pop("content_sha256", None)
    return {"id": SESSION_PREFIX + session_id, "question": first["question"], "answer": last["answer"],
            "contexts": [context for record in turns for context in record["contexts"]], "metadata": metadata,
            "steps": steps}


def step_content(steps: list[dict[str, Any]]) -> list[list[Any]]:
    """Return what a trajectory says, for the content digest: each step's place, kind, name, texts, tool and turn (not its
    ids or times: the same conversation replayed under new ids is the same content)."""
    index = {step["id"]: n for n, step in enumerate(steps)}
    return [[index.get(step.get("parent")), step["kind"], step.get("name"), step.get("input"), step.get("output"),
             step.get("status"), step.get("tool"), step.get("turn")] for step in steps]


def _openinference_step(span: Span) -> dict[str, Any]:
    attrs = span.attributes
    raw_kind = attrs.get(KIND)
    kind = raw_kind.strip().lower() if isinstance(raw_kind, str) else "other"
    kind = kind if kind in STEP_KINDS else "other"
    step: dict[str, Any] = {"kind": kind, "input": _text(attrs.get("input.value")), "output": _text(attrs.get("output.value"))}
    if kind == "retriever" and step["output"] is None:
        docs = _documents(attrs)
        if docs:
            step["output"] = json.dumps(docs, ensure_ascii=False)
    name = attrs.get("tool.name")
    if kind == "tool" or isinstance(name, str):
        tool_name = name if isinstance(name, str) and name.strip() else span.name
        result = attrs.get("output.value")
        step["tool"] = {"name": tool_name or "tool", "arguments": _json_or_text(attrs.get("tool.parameters",
                                                                                          attrs.get("input.value"))),
                        "result": _json_or_text(result) if attrs.get("output.mime_type") == _JSON else _text(result)}
    return step


def _genai_step(span: Span) -> dict[str, Any]:
    attrs = span.attributes
    operation = attrs.get("gen_ai.operation.name")
    kind = GENAI_KINDS.get(operation.strip().lower(), "other") if isinstance(operation, str) else "other"
    step: dict[str, Any] = {"kind": kind, "input": _text(attrs.get("gen_ai.input.messages", attrs.get("gen_ai.prompt"))),
                            "output": _text(attrs.get("gen_ai.output.messages", attrs.get("gen_ai.completion")))}
    name = attrs.get("gen_ai.tool.name")
    if kind == "tool" or isinstance(name, str):
        step["tool"] = {"name": name if isinstance(name, str) and name.strip() else (span.name or "tool"),
                        "arguments": _json_or_text(attrs.get("gen_ai.tool.call.arguments")),
                        "result": _json_or_text(attrs.get("gen_ai.tool.call.result"))}
    if kind == "retriever" and step["output"] is None:
        step["output"] = _text(attrs.get("gen_ai.retrieval.documents"))
    return step


def _documents(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """Return an OpenInference retriever span's documents as [{id, content, score}] (what it retrieved, in rank order)."""
    docs: dict[int, dict[str, Any]] = {}
    prefix = "retrieval.documents."
    for key, value in attrs.items():
        if key.startswith(prefix):
            rank, _, rest = key[len(prefix):].partition(".document.")
            if rank.isdigit() and rest in ("id", "content", "score"):
                docs.setdefault(int(rank), {})[rest] = value
    return [docs[rank] for rank in sorted(docs)]


def _status(span: Span) -> str:
    return "error" if span.status == ERROR or span.attributes.get("error.type") not in (None, "") else "ok"


def _text(value: Any) -> str | None:
    """Return an attribute as a step's text: a string as it is, a list or object as its JSON text, else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _json_or_text(value: Any) -> Any:
    """Return tool arguments or a result: JSON text that holds an object or a list is decoded, anything else kept as text."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                return json.loads(stripped)
            except (ValueError, RecursionError):
                return value
        return value
    return value if isinstance(value, (list, dict, int, float, bool)) or value is None else str(value)


def _iso(start_ns: int) -> str | None:
    """Return a step's start (Unix nanoseconds) as the steps format writes it; None when unset or out of range."""
    return None if not start_ns or start_ns_problem(start_ns) else ns_iso(start_ns)


def ns_iso(start_ns: int) -> str:
    """Return a time in Unix nanoseconds (in calibrate.bounds' range) as ISO 8601 UTC with microseconds."""
    seconds, nanos = divmod(start_ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=nanos // 1000).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
