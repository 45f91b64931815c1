"""`calibrate traces import`: trace files → spans → sampled traces → samples, through the samples import.

Steps: decode every file (all or nothing: one bad file refuses the import, nothing written);
key spans by (trace_id, span_id), so a span seen twice counts once (`duplicate_spans`); group
them into traces; sample (deterministic and nested, `inclusion_u`; thumbs-down always); map
each sampled trace (mapping.py) or count why it was skipped; compare with what the dataset
holds (unchanged, updated, changed after labelling, duplicate content); and hand the new and
updated samples to the samples import (ingest/samples.py) as one JSONL file, so they get its
validation, its content hash and its batches: invisible until one small transaction publishes
them, and `--update`'s rules for a changed sample.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select
from sqlmodel import Session, col

from calibrate.bounds import MAX_STEP_TEXT, MAX_STEPS, MIN_INCLUSION_PROB, inclusion_prob_problem
from calibrate.ingest.batches import CHUNK_SIZE, STALE_SECONDS, Writes, writes_to
from calibrate.ingest.bulk import in_parts
from calibrate.ingest.fields import RecordCheck
from calibrate.ingest.problems import ImportRejected, Problems, TooManyProblems, reject
from calibrate.ingest.sample_records import content_digest, hash_checked, normalise_sample
from calibrate.ingest.samples import import_samples
from calibrate.ingest.step_records import StepsInvalid, check_steps
from calibrate.ingest.traces.decode import (
    FORMATS,
    MAX_FILE_BYTES,
    Decoded,
    Span,
    decode,
    detect_format,
    json_lines,
    langfuse_trace_id,
    read_bytes,
)
from calibrate.ingest.traces.mapping import (
    APP_MAX_KEYS,
    APP_TEXT_MAX,
    HINTS,
    Skip,
    Unmappable,
    feedback_value,
    is_trajectory,
    langfuse_feedback,
    map_langfuse,
    map_spans,
    record,
    root_of,
)
from calibrate.ingest.traces.trajectory import SESSION_PREFIX, merge_turns, session_of
from calibrate.ingest.traces.upstream import MIXED, UPSTREAM_WORDS
from calibrate.models import Dataset, Label, Sample

# A trace id POST /v1/feedback takes: what an OTLP span's can be (32 hex digits; a UUID's form too).
OTLP_TRACE_ID = re.compile(r"[0-9a-fA-F]{32}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
SUMMARY_KEYS = ("traces", "spans", "duplicate_spans", "sampled", "sampled_down", "created", "updated", "unchanged",
                "duplicate_content", "changed_after_labelling", "skipped", "unmappable", "upstream", "metadata_dropped",
                "conversations", "late_turns", "steps_cut", "step_texts_cut")
# What `calibrate traces flush --json` prints: settling's figures and what the drop of stale staged rows removed.
SETTLED_KEYS = ("traces", "sampled", "sampled_down", "created", "updated", "unchanged", "duplicate_content",
                "changed_after_labelling", "skipped", "quarantined", "unmappable", "upstream", "metadata_dropped",
                "dropped_traces", "dropped_spans", "dropped_feedback", "conversations", "late_turns", "steps_cut",
                "step_texts_cut")
_COUNTS = ("traces", "spans", "duplicate_spans", "sampled", "sampled_down", "created", "updated", "unchanged",
           "duplicate_content", "changed_after_labelling", "dropped_traces", "dropped_spans", "dropped_feedback",
           "quarantined", "metadata_dropped", "conversations", "late_turns", "steps_cut", "step_texts_cut")
DICTS = ("skipped", "unmappable", "upstream")


def inclusion_u(salt: str, trace_id: str) -> float:
    """Return the trace's uniform draw in [0, 1): the first 64 bits of sha256("salt:trace_id")."""
    return int(hashlib.sha256(f"{salt}:{trace_id}".encode()).hexdigest()[:16], 16) / 2**64


def check_rate(rate: float) -> float:
    """Return a sampling rate, refused (field `rate`) outside [MIN_INCLUSION_PROB, 1]: it becomes the samples'
    `metadata.inclusion_prob`, whose floor the estimates rely on (calibrate.bounds)."""
    if inclusion_prob_problem(rate) is not None:
        raise reject(f"the rate must be between {MIN_INCLUSION_PROB:g} and 1 (it becomes metadata.inclusion_prob), "
                     f"got {rate!r}", field="rate")
    return float(rate)


@dataclass
class TracesSummary:
    """What a traces import did (docs/cli.md, `calibrate traces import`), or what settling staged traces did.

    The one summary of spans becoming samples, for a file and for the receiver: settling
    (staging.py) adds up the summaries of its batches (`add`) and the drop of stale staged rows
    fills `dropped_*`; `as_dict(SETTLED_KEYS)` is `traces flush --json`.
    """

    dataset: str = ""
    traces: int = 0
    spans: int = 0
    duplicate_spans: int = 0
    sampled: int = 0
    sampled_down: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    duplicate_content: int = 0
    changed_after_labelling: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    dropped_traces: int = 0  # settling only: rootless traces dropped after ROOTLESS_MAX_AGE
    dropped_spans: int = 0
    dropped_feedback: int = 0  # staged feedback whose trace never became a sample
    # Traces whose spans could not be mapped (mapping.Unmappable, or any failure of the mapping): trace id → why.
    # The import names them and goes on (skipped "unmappable"); settling quarantines them instead (staging.py).
    unmappable: dict[str, str] = field(default_factory=dict)
    quarantined: int = 0  # settling only: traces set aside, this run, because they could not be mapped
    # How the sampled traces' upstream probability was read from their root's tracestate (upstream.py's kinds, and
    # `mixed_thresholds`: spans of one trace disagreeing with the root), {kind: n}.
    upstream: dict[str, int] = field(default_factory=dict)
    metadata_dropped: int = 0  # keys of the application's metadata left out (mapping.app_metadata)
    conversations: int = 0  # --sessions: the conversations (session ids) the traces belong to
    late_turns: int = 0  # --sessions: traces of a conversation that was a sample already, imported as samples of their own
    steps_cut: int = 0  # steps past calibrate.bounds.MAX_STEPS, left out
    step_texts_cut: int = 0  # a step's name, input, output, tool arguments or result cut to its bound

    def as_dict(self, keys: tuple[str, ...] = SUMMARY_KEYS) -> dict[str, Any]:
        """Return the summary's `keys` (SUMMARY_KEYS: the import's) and values, `skipped` as {reason: n}."""
        return {key: (dict(getattr(self, key)) if key in DICTS else getattr(self, key)) for key in keys}

    def add(self, other: TracesSummary) -> None:
        """Add another summary's counts to this one (skip reasons merged, the commonest first)."""
        for name in _COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        merged = Counter(self.skipped)
        merged.update(other.skipped)
        self.skipped = dict(merged.most_common())
        self.unmappable.update(other.unmappable)
        upstream = Counter(self.upstream)
        upstream.update(other.upstream)
        self.upstream = dict(sorted(upstream.items()))

    def notes(self, *, top: int = 3) -> list[str]:
        """Return the lines on what to change: the commonest skip reasons with the span or attribute to add, the upstream
        sampling read from the tracestate, the application metadata left out (`traces import` and `traces flush`)."""
        out = []
        for reason, n in Counter(self.skipped).most_common(top):
            hint = HINTS.get(reason)
            out.append(f"skipped {n:,}: {reason}" + (f" ({hint})" if hint else ""))
        if self.upstream:
            out.append("upstream sampling (tracestate ot=th): " + ", ".join(
                f"{n:,} {UPSTREAM_WORDS.get(kind, kind)}" for kind, n in self.upstream.items()))
        if self.conversations:
            out.append(f"{self.conversations:,} conversations (session ids); {self.late_turns:,} late turns (their "
                       "conversation was a sample already) kept as samples of their own")
        if self.steps_cut or self.step_texts_cut:
            out.append(f"trajectories cut: {self.steps_cut:,} steps past {MAX_STEPS:,} a sample left out, "
                       f"{self.step_texts_cut:,} step texts cut to {MAX_STEP_TEXT:,} characters")
        if self.metadata_dropped:
            out.append(f"{self.metadata_dropped:,} keys of the application's metadata left out (past {APP_MAX_KEYS} keys, "
                       f"a key calibrate writes, a name other than letters, digits and _, or a value not a number, true/false "
                       f"or text of at most {APP_TEXT_MAX} characters)")
        return out

    def lines(self, *, top: int = 3) -> list[str]:
        """Return the lines the CLI prints: the counts, then the commonest skip reasons and what to enable."""
        out = [f"traces → {self.dataset}: {self.traces:,} traces ({self.spans:,} spans, {self.duplicate_spans:,} "
               f"repeated), {self.sampled:,} sampled ({self.sampled_down:,} thumbs-down)",
               f"{self.created:,} created, {self.updated:,} updated, {self.unchanged:,} unchanged, "
               f"{self.duplicate_content:,} duplicate content, {self.changed_after_labelling:,} changed after labelling "
               f"(kept), {sum(self.skipped.values()):,} skipped", *self.notes(top=top)]
        for trace_id, why in sorted(self.unmappable.items())[:top * 5]:
            out.append(f"trace {trace_id} could not be mapped: {why}")
        if len(self.unmappable) > top * 5:
            out.append(f"(and {len(self.unmappable) - top * 5:,} more traces that could not be mapped)")
        if self.quarantined:
            out.append(f"{self.quarantined:,} traces quarantined (kept aside with their reason: the dataset page)")
        return out


@dataclass
class Trace:
    """One trace to sample: its spans (or its Langfuse export) and the feedback found in it; with --sessions, its
    conversation and whether it is a late turn of one that is a sample already."""

    trace_id: str
    spans: list[Span] = field(default_factory=list)
    langfuse: Any = None
    feedback: int | None = None
    session: str | None = None
    late_turn: bool = False


def read_files(paths: Iterable[str | Path], fmt: str = "auto", *, max_bytes: int = MAX_FILE_BYTES) -> Decoded:
    """Decode every file (auto: each by its content); the first bad file raises ImportRejected naming it."""
    if fmt != "auto" and fmt not in FORMATS:
        raise ValueError(f"format must be auto or one of {', '.join(FORMATS)}, got {fmt!r}")
    decoded = Decoded()
    for path in paths:
        try:
            raw = read_bytes(path, max_bytes=max_bytes)
            decode(raw, detect_format(raw) if fmt == "auto" else fmt, into=decoded)
        except ImportRejected as exc:
            exc.source = str(path)
            raise
    return decoded


def read_feedback(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES) -> dict[str, int]:
    """Read a feedback JSONL file: lines {trace_id, value}, value "down"/"up" or a number; return trace id → -1/0/1."""
    try:
        return feedback_items(json_lines(read_bytes(path, max_bytes=max_bytes)))
    except ImportRejected as exc:
        exc.source = str(path)
        raise


def feedback_items(items: Iterable[tuple[int, Any]], *, lines: bool = True, otlp: bool = False) -> dict[str, int]:
    """Check feedback records {trace_id, value} (the --feedback file's rules); return trace id → -1/0/1, the last wins.

    `items`: (number, parsed JSON) pairs, numbered as lines (`lines`) or else as the items of a JSON
    array. The first bad record raises ImportRejected naming its line (or item) and field. `otlp`: the
    receiver's rule, a trace id an OTLP span can have (32 hex digits, a UUID's dashes allowed, not all
    zeros): any other could never meet its trace and would only be dropped a day later.
    """
    out: dict[str, int] = {}
    for number, data in items:
        line, where = (number, "") if lines else (None, f"item {number}: ")
        if not isinstance(data, dict):
            raise reject(where + "must be an object {trace_id, value}", line=line)
        trace_id = data.get("trace_id")
        if not isinstance(trace_id, str) or not trace_id.strip() or len(trace_id) > 200:
            raise reject(where + "must be a trace id string", line=line, field="trace_id")
        if otlp and (not OTLP_TRACE_ID.fullmatch(trace_id.strip()) or not trace_id.strip("-0 ")):
            raise reject((where + f"must be an OTLP trace id, 32 hex digits (a UUID's dashes allowed) and not all zeros, "
                          f"found {trace_id!r}")[:300], line=line, field="trace_id")
        value = feedback_value(data.get("value"))
        if value is None:
            raise reject((where + f"must be \"down\", \"up\" or a number, found {data.get('value')!r}")[:200], line=line,
                         field="value")
        out[langfuse_trace_id(trace_id)] = value
    return out


def group_traces(decoded: Decoded) -> tuple[dict[str, Trace], int, int]:
    """Return traces by id, the number of distinct spans and the number of repeated ones (kept once, the first)."""
    traces: dict[str, Trace] = {}
    seen: set[tuple[str, str]] = set()
    spans = repeated = 0
    for span in decoded.spans:
        key = (span.trace_id, span.span_id)
        if key in seen:
            repeated += 1
            continue
        seen.add(key)
        spans += 1
        trace = traces.get(span.trace_id)
        if trace is None:
            trace = traces[span.trace_id] = Trace(span.trace_id)
        trace.spans.append(span)
    for item in decoded.langfuse:
        if item.trace_id in traces:  # the same trace again (or already read from OTLP): the first wins
            repeated += 1 + len(item.observations)
            continue
        spans += 1 + len(item.observations)
        traces[item.trace_id] = Trace(item.trace_id, langfuse=item, feedback=langfuse_feedback(item))
    return traces, spans, repeated


def acceptable(record: dict[str, Any], max_field_chars: int) -> bool:
    """Return whether the samples import would take the record (one trace's odd text must not refuse the others)."""
    check = RecordCheck(None, cells=False, problems=Problems(1), limit=max_field_chars)
    try:
        norm = normalise_sample(dict(record), check)
        return norm is not None and hash_checked(norm, check) is not None and check.ok
    except TooManyProblems:
        return False


def import_traces(target: Engine | Session, paths: Iterable[str | Path], *, dataset: str, fmt: str = "auto",
                  feedback: str | Path | None = None, rate: float = 1.0, salt: str | None = None,
                  max_samples: int | None = None, max_field_chars: int = 1_000_000, max_bytes: int = MAX_FILE_BYTES,
                  chunk_size: int = CHUNK_SIZE, stale_seconds: int = STALE_SECONDS, sessions: bool = False) -> TracesSummary:
    """Import trace files into `dataset` (module docstring); return the summary. `sessions`: conversations as one
    sample each (`import_decoded`).

    `target`: an Engine (short transactions of its own, as `calibrate import`) or a Session
    (everything in the caller's transaction, inside a savepoint; the caller commits).
    """
    check_rate(rate)
    if max_samples is not None and max_samples < 0:
        raise reject("--max must be 0 or more", field="max")
    paths = [Path(p) for p in paths]
    if not paths:
        raise reject("no trace file given")
    decoded = read_files(paths, fmt, max_bytes=max_bytes)
    given = read_feedback(feedback, max_bytes=max_bytes) if feedback is not None else {}
    return import_decoded(target, decoded, dataset=dataset, source=paths[0].name, feedback=given, rate=rate, salt=salt,
                          max_samples=max_samples, max_field_chars=max_field_chars, chunk_size=chunk_size,
                          stale_seconds=stale_seconds, sessions=sessions)


def import_decoded(target: Engine | Session, decoded: Decoded, *, dataset: str, source: str,
                   feedback: dict[str, int] | None = None, rate: float = 1.0, salt: str | None = None,
                   max_samples: int | None = None, max_field_chars: int = 1_000_000, chunk_size: int = CHUNK_SIZE,
                   stale_seconds: int = STALE_SECONDS, sessions: bool = False) -> TracesSummary:
    """Sample, map and store decoded spans: what `import_traces` does after reading, and what settling staged spans does.

    The one path from spans to samples, for trace files and for the OTLP/HTTP receiver's
    settled traces (staging.py), so the same spans give the same samples either way.
    `source`: a name for the import batch (a file's name, or "otlp-http"). `sessions`: the traces
    of one conversation (`session.id`, `gen_ai.conversation.id`) make one sample, `session:<id>`
    (sampled as one: a thumbs-down on any turn takes it); a trace of a conversation that is a
    sample already, and is not one of its turns, is a late turn (`late_turns`): imported as a sample
    of its own under its trace id, with `metadata.session_id` and `metadata.late_turn` (docs/production.md).
    """
    given = feedback or {}
    salt = dataset if salt is None else salt
    traces, spans, repeated = group_traces(decoded)
    summary = TracesSummary(dataset, traces=len(traces), spans=spans, duplicate_spans=repeated)
    for trace_id, value in given.items():
        if trace_id in traces:
            traces[trace_id].feedback = value
    with writes_to(target, chunk_size=chunk_size, stale_seconds=stale_seconds) as writes:
        units = _units(traces, writes, dataset, summary) if sessions else [(t, [traces[t]]) for t in sorted(traces)]
        records = _map_units(_sampled(units, summary, salt=salt, rate=rate, max_samples=max_samples), summary,
                             rate=rate, max_field_chars=max_field_chars)
        _store(writes, records, summary, source, max_field_chars)
    return summary


def _sampled(units: list[tuple[str, list[Trace]]], summary: TracesSummary, *, salt: str, rate: float,
             max_samples: int | None) -> list[tuple[bool, list[Trace]]]:
    """Sample the units (a trace, or a conversation's traces): thumbs-down always; any other when u(unit id) < rate.
    --max keeps thumbs-down first, then the smallest u. Return (thumbs-down, traces) of those taken, by unit id."""
    taken: list[tuple[bool, float, str, list[Trace]]] = []
    for unit_id, members in units:
        down = any(trace.feedback == -1 for trace in members)
        u = inclusion_u(salt, unit_id)
        if down or u < rate:
            taken.append((down, u, unit_id, members))
    summary.sampled = len(taken)
    summary.sampled_down = sum(item[0] for item in taken)
    if max_samples is not None and len(taken) > max_samples:
        kept = sorted(taken, key=lambda item: (not item[0], item[1]))[:max_samples]
        summary.skipped["over_max"] = len(taken) - max_samples
        taken = sorted(kept, key=lambda item: item[2])
    return [(down, members) for down, _, _, members in taken]


def _map_units(taken: list[tuple[bool, list[Trace]]], summary: TracesSummary, *, rate: float,
               max_field_chars: int) -> list[dict[str, Any]]:
    """Map each taken unit to a sample record (a conversation's turns merged), counting why the others make none."""
    skipped: Counter[str] = Counter(summary.skipped)
    upstream: Counter[str] = Counter()
    records = []
    for down, members in taken:
        turn = members[0].session is not None and not members[0].late_turn  # a conversation's turns
        mapped_turns = []
        for trace in members:
            mapped = _map_trace(trace, summary, skipped, max_field_chars=max_field_chars, turn=turn)
            if mapped is not None:
                mapped_turns.append(mapped)
        if not mapped_turns:
            continue
        mapped = _conversation(members[0].session, mapped_turns, skipped, max_field_chars) if turn else mapped_turns[0]
        if mapped is None:
            continue
        kind, mixed = mapped.pop("upstream", (None, False))
        if kind is not None:
            upstream.update([kind, *([MIXED] if mixed else [])])
        # The chance the trace is here: upstream's (the Collector's threshold) times ours (1 for a thumbs-down).
        prob = mapped["metadata"].get("upstream_prob", 1.0) * (1.0 if down else float(rate))
        if prob < MIN_INCLUSION_PROB:
            skipped["inclusion_prob_below_min"] += 1
            continue
        mapped["metadata"]["inclusion_prob"] = prob
        if not acceptable(mapped, max_field_chars):
            skipped["invalid"] += 1
            continue
        records.append(mapped)
    summary.skipped = dict(skipped.most_common())
    summary.upstream = dict(sorted(upstream.items()))
    return records


def _map_trace(trace: Trace, summary: TracesSummary, skipped: Counter[str], *, max_field_chars: int,
               turn: bool) -> dict[str, Any] | None:
    """Map one trace (a Skip or a failure counted, None returned); its bounds' cuts and dropped metadata counted."""
    try:
        mapped = (map_langfuse(trace.langfuse, max_chars=max_field_chars) if trace.langfuse is not None
                  else map_spans(trace.spans, max_chars=max_field_chars, turn=turn))
    except Exception as exc:  # the mapping is pure: whatever fails in it is this trace's, never the others'
        summary.unmappable[trace.trace_id] = (str(exc) if isinstance(exc, Unmappable)
                                              else f"{type(exc).__name__}: {exc}")[:300]
        skipped["unmappable"] += 1
        return None
    if isinstance(mapped, Skip):
        skipped[mapped.reason] += 1
        return None
    summary.metadata_dropped += mapped.pop("metadata_dropped", 0)
    summary.steps_cut += mapped.pop("steps_cut", 0)
    summary.step_texts_cut += mapped.pop("step_texts_cut", 0)
    mapped["feedback"] = trace.feedback
    if trace.late_turn:
        mapped["metadata"]["late_turn"] = True
        summary.late_turns += 1
    return mapped


def _conversation(session_id: str, turns: list[dict[str, Any]], skipped: Counter[str],
                  max_field_chars: int) -> dict[str, Any] | None:
    """Merge a conversation's mapped turns (in start order) into one record; None (counted) when it makes no sample."""
    turns.sort(key=lambda rec: (rec["metadata"].get("started_at") or "", rec["metadata"]["trace_id"]))
    merged = merge_turns(session_id, turns)
    try:
        checked = check_steps(merged["steps"])
    except StepsInvalid:  # two turns with one span id, or turns that overlap in time: not one conversation's
        skipped["invalid"] += len(turns)
        return None
    made = record(merged["id"], merged["question"], merged["answer"], merged["contexts"], merged["metadata"],
                  max_chars=max_field_chars, needs_contexts=not is_trajectory(checked.steps), steps=checked.steps)
    if isinstance(made, Skip):
        skipped[made.reason] += len(turns)
        return None
    down = [rec["feedback"] for rec in turns if rec["feedback"] is not None]
    made.update(steps=checked.steps, feedback=-1 if -1 in down else (down[-1] if down else None),
                upstream=turns[0].get("upstream", (None, False)))
    return made


def _units(traces: dict[str, Trace], writes: Writes, dataset: str, summary: TracesSummary) -> list[tuple[str, list[Trace]]]:
    """Group traces into conversations by their session id ("session:<id>"); a trace without one is its own unit.

    A trace of a conversation that is a sample already (`session:<id>` stored) and is not one of its
    turns (`metadata.trace_ids`) is a late turn: its own unit, under its trace id.
    """
    sessions: dict[str, list[Trace]] = {}
    units: list[tuple[str, list[Trace]]] = []
    for trace_id in sorted(traces):
        trace = traces[trace_id]
        trace.session = None if trace.langfuse is not None else session_of(trace.spans, root_of(trace.spans))
        if trace.session is None:
            units.append((trace_id, [trace]))
        else:
            sessions.setdefault(SESSION_PREFIX + trace.session, []).append(trace)
    stored = _stored_turns(writes, dataset, sorted(sessions))
    for unit_id, members in sessions.items():
        known = stored.get(unit_id)
        if known is not None:
            for trace in members:
                if trace.trace_id not in known:
                    trace.late_turn = True
                    units.append((trace.trace_id, [trace]))
            members = [trace for trace in members if trace.trace_id in known]
        if members:
            units.append((unit_id, members))
    summary.conversations = len(sessions)
    return sorted(units, key=lambda unit: unit[0])


def _stored_turns(writes: Writes, dataset: str, ids: list[str]) -> dict[str, set[str]]:
    """Return the conversations among `ids` that are samples of the dataset already: id → the trace ids of their turns."""
    out: dict[str, set[str]] = {}
    if not ids:
        return out
    with writes.read() as session:
        ds = session.scalars(select(Dataset).where(Dataset.name == dataset)).first()
        if ds is not None and ds.import_batch_id is None:
            for part in in_parts(ids):
                for external_id, metadata in session.execute(select(Sample.external_id, Sample.meta).where(
                        Sample.dataset_id == ds.id, col(Sample.external_id).in_(part))):
                    trace_ids = (metadata or {}).get("trace_ids")
                    out[external_id] = {str(t) for t in trace_ids} if isinstance(trace_ids, list) else set()
        writes.end_read(session)
    return out


@dataclass
class _Stored:
    """The stored samples a batch of trace records can meet: their ids, and their contents under other ids (reading the
    whole dataset cost as much as a settling batch's own work once the receiver had filled it)."""

    by_id: dict[str, tuple[int, str | None, Any, int | None]]  # id → (pk, content hash, metadata, feedback)
    labelled: set[int]  # pks of those with labels
    others: dict[str, str]  # content hash → id, of stored samples with one of these contents

    @classmethod
    def read(cls, session: Session, dataset: str, records: list[dict[str, Any]]) -> _Stored:
        out = cls({}, set(), {})
        ds = session.scalars(select(Dataset).where(Dataset.name == dataset)).first()
        if ds is None or ds.import_batch_id is not None:
            return out
        for part in in_parts([rec["id"] for rec in records]):
            for pk, external_id, metadata, feedback in session.execute(
                    select(Sample.id, Sample.external_id, Sample.meta, Sample.feedback)
                    .where(Sample.dataset_id == ds.id, col(Sample.external_id).in_(part))):
                out.by_id[external_id] = (pk, content_digest(metadata), metadata, feedback)
        # `content_sha256` is metadata.content_sha256's copy, indexed with the dataset (models.Sample).
        for part in in_parts(sorted({rec["metadata"]["content_sha256"] for rec in records})):
            for external_id, digest in session.execute(
                    select(Sample.external_id, Sample.content_sha256)
                    .where(Sample.dataset_id == ds.id, col(Sample.content_sha256).in_(part))):
                out.others.setdefault(digest, external_id)
        for part in in_parts(sorted(known[0] for known in out.by_id.values())):
            out.labelled.update(session.scalars(select(Label.sample_id).where(col(Label.sample_id).in_(part)).distinct()))
        return out

    def decide(self, records: list[dict[str, Any]], summary: TracesSummary) -> list[dict[str, Any]]:
        """Count each record as created, updated, unchanged, changed after labelling (kept) or duplicate content;
        return those to write."""
        contents = {**self.others, **{known[1]: external_id for external_id, known in self.by_id.items() if known[1]}}
        out = []
        for rec in records:
            digest = rec["metadata"]["content_sha256"]
            known = self.by_id.get(rec["id"])
            if known is not None:
                if known[1] == digest and rec["feedback"] is not None and rec["feedback"] != known[3]:
                    # Feedback that arrived after the trace was imported: only the feedback changes (it is not
                    # content; labels stay valid), the stored metadata is kept as it was.
                    summary.updated += 1
                    out.append({**rec, "metadata": known[2]})
                elif known[1] == digest:
                    summary.unchanged += 1
                elif known[0] in self.labelled:
                    summary.changed_after_labelling += 1
                else:
                    summary.updated += 1
                    out.append(rec)
                continue
            if digest in contents:
                summary.duplicate_content += 1
                continue
            contents[digest] = rec["id"]
            summary.created += 1
            out.append(rec)
        return out


def _store(writes: Writes, records: list[dict[str, Any]], summary: TracesSummary, source: str,
           max_field_chars: int) -> None:
    """Decide created/updated/unchanged/duplicate/kept against the dataset, then write through the samples import."""
    if not records:
        return
    with writes.read() as session:
        known = _Stored.read(session, summary.dataset, records)
        writes.end_read(session)
    out = known.decide(records, summary)
    if not out:
        return
    with tempfile.TemporaryDirectory(prefix="calibrate-traces-") as folder:
        path = Path(folder) / f"{Path(source).name[:100] or 'traces'}.samples.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            for rec in out:
                handle.write(json.dumps(rec, ensure_ascii=False) + "\n")
        # The ids at hand: the samples import reads those stored rows, not the whole dataset's.
        result = import_samples(writes, path, "jsonl", dataset=summary.dataset, update=True,
                                description="production traces", max_field_chars=max_field_chars,
                                ids=[rec["id"] for rec in out])
    # The samples import compared with the same stored rows; should another writer have got in between, its
    # counts are what was written.
    summary.unchanged += (summary.created - result.added) + (summary.updated - result.updated)
    summary.created, summary.updated = result.added, result.updated
