"""The OTLP/HTTP receiver's database side: ingest tokens, staged spans, settling them into samples.

A request to `POST /v1/traces` only stages its spans (`stage_spans`, one short write under the
write lock): rows of `stagedspan`, unique by (trace_id, span_id), so a span received twice is
stored once and a retried export changes nothing. A staged trace *settles* (`settle`) once its
root span is there and nothing new arrived for `TRACES_SETTLE_S` seconds (or at once, with
`calibrate traces flush`): its spans go through `importer.import_decoded`, the path a trace
file takes (sampling by the token's rate and salt, the mapping, the comparison with the
dataset, the samples import), and are deleted in the same transaction. That transaction takes
the write lock before it looks for settled traces, so two servers settling at once take turns
and the second finds the first's traces gone: nothing settles twice. Traces without a root
whose newest span is older than `ROOTLESS_MAX_AGE` are dropped and counted (`drop_rootless`).

Each staged trace also has one row of `stagedtrace` (owner token, root or not, newest span's
time, span count), upserted by `stage_spans` and deleted with its spans: the ready query, the
rootless drop and the dataset page read it through its index, so a settling transaction costs
its batch, not what is staged. `POST /v1/feedback` stages feedback (`stage_feedback`, table
`stagedfeedback`) that settling uses as `traces import --feedback` uses its file; feedback for
a trace that is a sample already is applied at once, without changing its `inclusion_prob`.

The counters of the production source live on the token row (`IngestToken`); the dataset page
sums them over the dataset's tokens (`production_source`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, case, delete, false, func, insert, or_, select, true, update
from sqlmodel import Session, col

from calibrate.db import dialect_insert, write_session
from calibrate.errors import NotFound
from calibrate.ingest.fields import check_dataset_name
from calibrate.ingest.problems import ImportRejected, reject
from calibrate.ingest.traces.decode import Decoded, Span, json_lines, parse_json
from calibrate.ingest.traces.importer import TracesSummary, feedback_items, import_decoded, inclusion_u
from calibrate.models import Dataset, IngestToken, Sample, StagedFeedback, StagedSpan, StagedTrace

ROOTLESS_MAX_AGE = 24 * 3600  # seconds: a trace whose root never came is dropped a day after its last span
SETTLE_BATCH = 250  # traces settled per transaction (keeps each write short for the label saves meanwhile)
# The server's settler (setting TRACES_SETTLE_BATCH). A transaction's cost is mostly fixed (with 10,000 samples,
# 50 traces took as long as 250, ~80 ms, so at 50 the settler fell behind a stream of 4,000 spans/s). It no
# longer grows with the dataset: the comparison reads the batch's ids and contents through indexes
# (`sample.content_sha256`, `import_samples(ids=…)`): 250 traces cost 55 ms with 1,024 samples in the dataset
# and 34 ms with 102,400, against 63 and 1,209 ms before (bench/results/receiver.md, --settle-dataset).
SERVER_SETTLE_BATCH = 250
# Seconds between two settling transactions when a process lock is shared (the server's): long enough for a
# request thread woken by the release to take the lock, short enough that the settler keeps up with a stream
# (at 20 ms, a third of its time under load went to pausing; bench/results/receiver.md).
BATCH_PAUSE = 0.005
QUERY_CHUNK = 500  # ids per IN (…) list
TOKEN_PREFIX = "calt_"
SOURCE = "otlp-http"
log = logging.getLogger("calibrate.traces")


def hash_token(token: str) -> str:
    """Return what is stored of a bearer token: its sha256 in hex."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def new_token(session: Session, dataset: str, *, rate: float = 1.0, salt: str | None = None) -> tuple[IngestToken, str]:
    """Create a token bound to `dataset` (created empty if missing) and its sampling; return the row and the token.

    The token (`calt_` and 32 random bytes, URL-safe base64) is returned once; only its hash is stored.
    """
    if not 0.0 <= rate <= 1.0:
        raise reject(f"the rate must be between 0 and 1, got {rate}", field="rate")
    name = check_dataset_name(dataset.strip())
    if salt is not None and len(salt) > 200:
        raise reject("the salt is over 200 characters", field="salt")
    row = session.scalars(select(Dataset).where(Dataset.name == name)).first()
    if row is not None and row.import_batch_id is not None:
        raise reject(f"dataset {name!r} is being imported; try again when the import has finished", field="dataset")
    if row is None:
        row = Dataset(name=name, source=SOURCE, description="production traces")
        session.add(row)
        session.flush()
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    entry = IngestToken(token_hash=hash_token(token), dataset_id=row.id, rate=float(rate),
                        salt=name if salt is None else salt)
    session.add(entry)
    session.flush()
    return entry, token


def list_tokens(session: Session) -> list[dict[str, Any]]:
    """Return every token as {id, dataset, rate, salt, created, last_used, revoked}, oldest first (never the token)."""
    rows = session.execute(select(IngestToken, Dataset.name).join(Dataset, Dataset.id == IngestToken.dataset_id)
                           .order_by(IngestToken.id))
    return [{"id": token.id, "dataset": name, "rate": token.rate, "salt": token.salt, "created": _iso(token.created_at),
             "last_used": _iso(token.last_used_at), "revoked": _iso(token.revoked_at)} for token, name in rows]


def revoke_token(session: Session, token_id: int) -> IngestToken:
    """Revoke a token by id (its spans already staged still settle); NotFound for an unknown id."""
    token = session.get(IngestToken, token_id)
    if token is None:
        ids = [str(i) for i in session.scalars(select(IngestToken.id).order_by(IngestToken.id).limit(20))]
        raise NotFound(f"unknown token id {token_id} (tokens: {', '.join(ids) or 'none yet'})")
    if token.revoked_at is None:
        token.revoked_at = datetime.now(UTC)
        session.add(token)
    return token


def token_for(session: Session, bearer: str) -> IngestToken | None:
    """Return the live (not revoked) token a bearer string is, else None."""
    if not bearer or len(bearer) > 200:
        return None
    token = session.scalars(select(IngestToken).where(IngestToken.token_hash == hash_token(bearer))).first()
    return token if token is not None and token.revoked_at is None else None


# --------------------------------------------------------------------------- staging


def span_json(span: Span) -> str:
    """Return what a staged span stores: the decoded span's fields but its ids, as JSON text."""
    return json.dumps({"parent": span.parent_id, "name": span.name, "start": span.start_ns, "attributes": span.attributes,
                       "resource": span.resource}, ensure_ascii=False, separators=(",", ":"))


def span_of(trace_id: str, span_id: str, text: str) -> Span:
    """Return the Span a staged row holds (the inverse of span_json)."""
    data = json.loads(text)
    return Span(trace_id, span_id, data["parent"], data["name"], data["start"], data["attributes"], data["resource"])


@dataclass
class Staged:
    """What one request staged: new spans, spans already staged (or twice in the request), spans refused."""

    new: int = 0
    repeated: int = 0
    rejected: int = 0


def encode_spans(spans: list[Span]) -> dict[tuple[str, str], str]:
    """Return each span's stored text by (trace id, span id): done before the write, so the lock is held shorter."""
    return {(span.trace_id, span.span_id): span_json(span) for span in spans}


def stage_spans(session: Session, token: IngestToken, spans: list[Span], *, rejected: int = 0,
                now: float | None = None, encoded: dict[tuple[str, str], str] | None = None) -> Staged:
    """Stage a request's spans for `token` in the caller's (write) transaction; count them on the token.

    `encoded`: `encode_spans(spans)`, made before the transaction (else each span is encoded here).
    """
    now = time.time() if now is None else now
    out = Staged(rejected=rejected)
    fresh: dict[tuple[str, str], Span] = {}
    for span in spans:
        key = (span.trace_id, span.span_id)
        if key in fresh:
            out.repeated += 1
        else:
            fresh[key] = span
    trace_ids = sorted({trace_id for trace_id, _ in fresh})
    for start in range(0, len(trace_ids), QUERY_CHUNK):
        chunk = trace_ids[start:start + QUERY_CHUNK]
        for key in session.execute(select(StagedSpan.trace_id, StagedSpan.span_id)
                                   .where(col(StagedSpan.trace_id).in_(chunk))):
            if fresh.pop(tuple(key), None) is not None:
                out.repeated += 1
    rows = [{"token_id": token.id, "trace_id": span.trace_id, "span_id": span.span_id, "is_root": not span.parent_id,
             "received_at": now, "span": encoded[key] if encoded is not None and key in encoded else span_json(span)}
            for key, span in fresh.items()]
    if rows:
        session.connection().execute(insert(StagedSpan.__table__), rows)  # Core executemany: no ORM work per row
        traces: dict[str, dict[str, Any]] = {}
        for trace_id, span_id in fresh:
            entry = traces.get(trace_id)
            if entry is None:
                entry = traces[trace_id] = {"trace_id": trace_id, "token_id": token.id, "has_root": False,
                                            "last_received_at": now, "n_spans": 0}
            entry["n_spans"] += 1
            entry["has_root"] = entry["has_root"] or not fresh[(trace_id, span_id)].parent_id
        upsert_traces(session, list(traces.values()))
    out.new = len(rows)
    session.execute(update(IngestToken).where(IngestToken.id == token.id).values(
        spans_received=IngestToken.spans_received + out.new, spans_repeated=IngestToken.spans_repeated + out.repeated,
        spans_rejected=IngestToken.spans_rejected + out.rejected, last_used_at=datetime.fromtimestamp(now, UTC),
        last_received_at=datetime.fromtimestamp(now, UTC) if spans else IngestToken.last_received_at))
    return out


def upsert_traces(session: Session, rows: list[dict[str, Any]]) -> None:
    """Add each request's traces to `stagedtrace`, or add to the row a trace has (INSERT … ON CONFLICT, SQLite and PostgreSQL).

    A row's spans add up, its newest time is kept, `has_root` once true stays true, and the owner
    becomes the token of the first request that brought a root span.
    """
    table = StagedTrace.__table__
    statement = dialect_insert(session.connection(), table)
    new = statement.excluded
    statement = statement.on_conflict_do_update(index_elements=[table.c.trace_id], set_={
        "n_spans": table.c.n_spans + new.n_spans,
        "last_received_at": case((new.last_received_at > table.c.last_received_at, new.last_received_at),
                                 else_=table.c.last_received_at),
        "has_root": or_(table.c.has_root, new.has_root),
        "token_id": case((table.c.has_root, table.c.token_id), (new.has_root, new.token_id), else_=table.c.token_id),
    })
    session.connection().execute(statement, rows)


# --------------------------------------------------------------------------- feedback


def parse_feedback(body: bytes) -> dict[str, int]:
    """Return trace id → -1/0/1 from a `POST /v1/feedback` body: one object {trace_id, value}, a JSON array of them, or
    JSON lines; the records follow the --feedback file's rules (`importer.feedback_items`). ImportRejected names the
    first bad line (or array item) and field."""
    try:
        data = parse_json(body)
    except ImportRejected:
        given = feedback_items(json_lines(body))  # JSON lines (or not JSON: the bad line is named)
    else:
        if isinstance(data, dict):
            data = [data]
        if not isinstance(data, list):
            raise reject("the body must be an object {trace_id, value}, a JSON array of them, or JSON lines")
        given = feedback_items(enumerate(data, start=1), lines=False)
    if not given:
        raise reject("no feedback records: send {trace_id, value} objects")
    return given


@dataclass
class FeedbackStaged:
    """What one `POST /v1/feedback` did: records staged for traces not yet samples, and late ones applied to samples."""

    staged: int = 0
    late: int = 0
    late_changed: int = 0


def stage_feedback(session: Session, token: IngestToken, given: dict[str, int], *, now: float | None = None) -> FeedbackStaged:
    """Stage feedback for `token`'s dataset in the caller's (write) transaction; count it on the token.

    A trace that is a sample of the dataset already gets its feedback now (late feedback: the
    sample's `feedback` changes, nothing else; its `inclusion_prob` stays the rate it was drawn
    at, docs/formats.md). Any other is staged (a later value replaces an earlier one) and used
    when the trace settles, as the --feedback file is by `traces import`.
    """
    now = time.time() if now is None else now
    out = FeedbackStaged()
    ids = sorted(given)
    samples: dict[str, tuple[int, int | None]] = {}
    for start in range(0, len(ids), QUERY_CHUNK):
        for pk, external_id, feedback in session.execute(
                select(Sample.id, Sample.external_id, Sample.feedback)
                .where(Sample.dataset_id == token.dataset_id, col(Sample.external_id).in_(ids[start:start + QUERY_CHUNK]))):
            samples[external_id] = (pk, feedback)
    staged = []
    for trace_id in ids:
        value = given[trace_id]
        known = samples.get(trace_id)
        if known is None:
            staged.append({"dataset_id": token.dataset_id, "token_id": token.id, "trace_id": trace_id, "value": value,
                           "received_at": now})
            continue
        out.late += 1
        if known[1] != value:
            session.execute(update(Sample).where(Sample.id == known[0]).values(feedback=value))
            out.late_changed += 1
    if staged:
        table = StagedFeedback.__table__
        statement = dialect_insert(session.connection(), table)
        statement = statement.on_conflict_do_update(
            index_elements=[table.c.dataset_id, table.c.trace_id],
            set_={"value": statement.excluded.value, "received_at": statement.excluded.received_at,
                  "token_id": statement.excluded.token_id})
        session.connection().execute(statement, staged)
    out.staged = len(staged)
    session.execute(update(IngestToken).where(IngestToken.id == token.id).values(
        feedback_received=IngestToken.feedback_received + len(ids), feedback_late=IngestToken.feedback_late + out.late,
        last_used_at=datetime.fromtimestamp(now, UTC)))
    return out


# --------------------------------------------------------------------------- settling


def settle(engine: Engine, *, settle_s: float, dataset: str | None = None, now: float | None = None,
           max_field_chars: int = 1_000_000, batch: int = SETTLE_BATCH, background: bool = False) -> TracesSummary:
    """Turn every staged trace whose root is there and whose newest span is `settle_s` seconds old into samples.

    `dataset`: only that dataset's tokens (`calibrate traces flush --dataset D` passes settle_s=0).
    Each transaction settles at most `batch` traces in a write session (db.write_session: the writer lock,
    module docstring); `background`: the server's settler, whose transactions let waiting label saves go first.
    """
    now = time.time() if now is None else now
    total = TracesSummary(dataset or "")
    while True:
        with write_session(engine, background=background) as session:
            done = _settle_some(session, settle_s=settle_s, dataset=dataset, now=now, max_field_chars=max_field_chars,
                                batch=batch, into=total)
        if done < batch:
            break
        if background:
            # Let the threads waiting for the lock in first: a thread that releases a lock and takes it again
            # at once keeps it (Python's locks are not fair), and label saves waited through whole settling runs.
            time.sleep(BATCH_PAUSE)
    return total


def _token_filter(session: Session, dataset: str | None) -> list[int] | None:
    if dataset is None:
        return None
    return list(session.scalars(select(IngestToken.id).join(Dataset, Dataset.id == IngestToken.dataset_id)
                                .where(Dataset.name == dataset)))


def _settle_some(session: Session, *, settle_s: float, dataset: str | None, now: float, max_field_chars: int, batch: int,
                 into: TracesSummary) -> int:
    tokens = _token_filter(session, dataset)
    if tokens is not None and not tokens:
        return 0
    # The oldest ready traces first, straight from the index (has_root, last_received_at, trace_id): a batch
    # costs the batch, however many spans are staged.
    ready = (select(StagedTrace.trace_id, StagedTrace.token_id)
             .where(col(StagedTrace.has_root) == true(), StagedTrace.last_received_at <= now - settle_s)
             .order_by(StagedTrace.last_received_at, StagedTrace.trace_id).limit(batch))
    if tokens is not None:
        ready = ready.where(col(StagedTrace.token_id).in_(tokens))
    owners: dict[str, int] = dict(session.execute(ready).all())  # a trace belongs to the token its root came with
    trace_ids = sorted(owners)
    if not trace_ids:
        return 0
    tokens_of = {token_id: session.get(IngestToken, token_id) for token_id in set(owners.values())}
    # Feedback staged for these traces (POST /v1/feedback), by the owner's dataset: used here and deleted with them.
    feedback: dict[int, dict[str, int]] = defaultdict(dict)  # token → trace → value
    used: list[int] = []
    datasets = {token.dataset_id for token in tokens_of.values()}
    for row_id, dataset_id, trace_id, value in session.execute(
            select(StagedFeedback.id, StagedFeedback.dataset_id, StagedFeedback.trace_id, StagedFeedback.value)
            .where(col(StagedFeedback.trace_id).in_(trace_ids), col(StagedFeedback.dataset_id).in_(datasets))):
        token = tokens_of[owners[trace_id]]
        if token.dataset_id == dataset_id:
            feedback[token.id][trace_id] = value
            used.append(row_id)
    # Only the traces the sampling takes need their spans read: OTLP spans carry no feedback (the mapping reads
    # none), so a trace is taken when its staged feedback is down or by its draw, the rule import_decoded applies
    # to them again.
    taken: list[str] = []
    passed: Counter[int] = Counter()
    for trace_id in trace_ids:
        token = tokens_of[owners[trace_id]]
        if feedback[token.id].get(trace_id) == -1 or inclusion_u(token.salt, trace_id) < token.rate:
            taken.append(trace_id)
        else:
            passed[token.id] += 1
    per_token: dict[int, Decoded] = {token_id: Decoded() for token_id in tokens_of}
    for start in range(0, len(taken), QUERY_CHUNK):
        for trace_id, span_id, text in session.execute(
                select(StagedSpan.trace_id, StagedSpan.span_id, StagedSpan.span)
                .where(col(StagedSpan.trace_id).in_(taken[start:start + QUERY_CHUNK])).order_by(StagedSpan.id)):
            per_token[owners[trace_id]].spans.append(span_of(trace_id, span_id, text))
    for token_id, decoded in sorted(per_token.items()):
        token = tokens_of[token_id]
        ds = session.get(Dataset, token.dataset_id)
        summary = import_decoded(session, decoded, dataset=ds.name, source=SOURCE, feedback=feedback[token_id],
                                 rate=token.rate, salt=token.salt, max_field_chars=max_field_chars)
        summary.traces += passed[token_id]
        merged = Counter(token.skipped or {})
        merged.update(summary.skipped)
        session.execute(update(IngestToken).where(IngestToken.id == token_id).values(
            traces_settled=IngestToken.traces_settled + summary.traces,
            traces_sampled=IngestToken.traces_sampled + summary.sampled,
            traces_sampled_down=IngestToken.traces_sampled_down + summary.sampled_down, skipped=dict(merged)))
        into.add(summary)
    session.execute(delete(StagedSpan).where(col(StagedSpan.trace_id).in_(trace_ids)))
    session.execute(delete(StagedTrace).where(col(StagedTrace.trace_id).in_(trace_ids)))
    if used:
        session.execute(delete(StagedFeedback).where(col(StagedFeedback.id).in_(used)))
    return len(trace_ids)


def drop_rootless(engine: Engine, *, now: float | None = None, max_age: float = ROOTLESS_MAX_AGE,
                  dataset: str | None = None, background: bool = False) -> TracesSummary:
    """Delete what waited longer than `max_age` for nothing: traces without a root whose newest span is that old, and
    staged feedback received that long ago (its trace never settled, or settled and was not drawn); count them."""
    now = time.time() if now is None else now
    out = TracesSummary(dataset or "")
    with write_session(engine, background=background) as session:
        tokens = _token_filter(session, dataset)
        if tokens is not None and not tokens:
            return out
        old = (select(StagedTrace.trace_id, StagedTrace.token_id)
               .where(col(StagedTrace.has_root) == false(), StagedTrace.last_received_at < now - max_age))
        if tokens is not None:
            old = old.where(col(StagedTrace.token_id).in_(tokens))
        owners: dict[str, int] = dict(session.execute(old).all())
        trace_ids = sorted(owners)
        per_token: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])  # token → [traces, spans, feedback]
        for token_id in owners.values():
            per_token[token_id][0] += 1
        for start in range(0, len(trace_ids), QUERY_CHUNK):
            chunk = trace_ids[start:start + QUERY_CHUNK]
            for token_id, spans in session.execute(select(StagedSpan.token_id, func.count())
                                                   .where(col(StagedSpan.trace_id).in_(chunk)).group_by(StagedSpan.token_id)):
                per_token[token_id][1] += spans
            session.execute(delete(StagedSpan).where(col(StagedSpan.trace_id).in_(chunk)))
            session.execute(delete(StagedTrace).where(col(StagedTrace.trace_id).in_(chunk)))
        stale = select(StagedFeedback.id, StagedFeedback.token_id).where(StagedFeedback.received_at < now - max_age)
        if tokens is not None:
            stale = stale.where(col(StagedFeedback.token_id).in_(tokens))
        feedback_ids = []
        for row_id, token_id in session.execute(stale):
            per_token[token_id][2] += 1
            feedback_ids.append(row_id)
        for start in range(0, len(feedback_ids), QUERY_CHUNK):
            session.execute(delete(StagedFeedback).where(col(StagedFeedback.id).in_(feedback_ids[start:start + QUERY_CHUNK])))
        for token_id, (traces, spans, feedback) in per_token.items():
            values: dict[str, Any] = {"traces_dropped": IngestToken.traces_dropped + traces,
                                      "spans_dropped": IngestToken.spans_dropped + spans,
                                      "feedback_dropped": IngestToken.feedback_dropped + feedback}
            if traces:
                token = session.get(IngestToken, token_id)
                merged = Counter(token.skipped or {})
                merged["no_root_span"] += traces
                values["skipped"] = dict(merged)
            session.execute(update(IngestToken).where(IngestToken.id == token_id).values(**values))
            out.dropped_traces += traces
            out.dropped_spans += spans
            out.dropped_feedback += feedback
    if out.dropped_traces:
        out.skipped = {"no_root_span": out.dropped_traces}
    return out


class Settler(threading.Thread):
    """The server's background settler: every `every` seconds, settle what is ready and drop old rootless traces.

    One per server process (`calibrate serve`, each gunicorn worker); several are safe, since
    each settling transaction takes the write lock first (module docstring). A failure is
    logged and retried at the next wake-up.
    """

    def __init__(self, engine: Engine, *, settle_s: float, every: float, max_field_chars: int,
                 batch: int = SERVER_SETTLE_BATCH) -> None:
        super().__init__(name="calibrate-traces-settler", daemon=True)
        self.engine, self.settle_s, self.every, self.max_field_chars = engine, settle_s, every, max_field_chars
        self.batch = batch
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every):
            self.once()

    def once(self) -> None:
        """Settle and drop once; log what happened (and any failure) and return."""
        try:
            done = settle(self.engine, settle_s=self.settle_s, max_field_chars=self.max_field_chars, batch=self.batch,
                          background=True)
            dropped = drop_rootless(self.engine, background=True)
        except Exception:  # a background thread must live on; the next wake-up retries
            log.exception("settling staged traces failed")
            return
        if done.traces or dropped.dropped_traces:
            log.info("traces settled: %d (%d sampled, %d created), rootless dropped: %d", done.traces, done.sampled,
                     done.created, dropped.dropped_traces)

    def stop(self) -> None:
        self.stopped.set()


def start_settler(engine: Engine, settings: Any) -> Settler:
    """Start the background settler with the settings' TRACES_SETTLE_S, TRACES_SETTLE_EVERY and TRACES_SETTLE_BATCH; return it."""
    settler = Settler(engine, settle_s=float(settings["TRACES_SETTLE_S"]), every=float(settings["TRACES_SETTLE_EVERY"]),
                      batch=max(1, int(settings.get("TRACES_SETTLE_BATCH", SERVER_SETTLE_BATCH))),
                      max_field_chars=int(settings["IMPORT_MAX_FIELD_CHARS"]))
    settler.start()
    return settler


# --------------------------------------------------------------------------- the dataset page


def production_source(session: Session, dataset: Dataset) -> dict[str, Any] | None:
    """Return the production source's figures for a dataset's page, or None when it has no ingest token."""
    tokens = list(session.scalars(select(IngestToken).where(IngestToken.dataset_id == dataset.id)))
    if not tokens:
        return None
    skipped: Counter[str] = Counter()
    for token in tokens:
        skipped.update(token.skipped or {})
    staged_traces, staged_spans = session.execute(
        select(func.count(), func.coalesce(func.sum(StagedTrace.n_spans), 0))
        .where(col(StagedTrace.token_id).in_([t.id for t in tokens]))).one()
    staged_feedback = session.scalar(select(func.count()).select_from(StagedFeedback)
                                     .where(StagedFeedback.dataset_id == dataset.id))
    sampled = sum(t.traces_sampled for t in tokens)
    down = sum(t.traces_sampled_down for t in tokens)
    received = [t.last_received_at for t in tokens if t.last_received_at is not None]
    return {
        "tokens": len(tokens), "live_tokens": sum(t.revoked_at is None for t in tokens),
        "spans_received": sum(t.spans_received for t in tokens), "spans_repeated": sum(t.spans_repeated for t in tokens),
        "spans_rejected": sum(t.spans_rejected for t in tokens),
        "traces_received": sum(t.traces_settled + t.traces_dropped for t in tokens),
        "staged_traces": staged_traces, "staged_spans": staged_spans, "sampled": sampled, "sampled_down": down,
        "down_share": down / sampled if sampled else None, "skipped": dict(skipped.most_common()),
        "feedback_received": sum(t.feedback_received for t in tokens), "feedback_late": sum(t.feedback_late for t in tokens),
        "feedback_dropped": sum(t.feedback_dropped for t in tokens), "feedback_staged": staged_feedback,
        "last_received": max(received) if received else None,
    }


def _iso(when: datetime | None) -> str | None:
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
