"""The OTLP/HTTP receiver's database side: ingest tokens, staged spans, settling them into samples.

A request to `POST /v1/traces` only stages its spans (`stage_request`: write transactions of at
most STAGE_CHUNK spans under the write lock, which is given back between two): rows of
`stagedspan`, unique by (dataset, trace_id, span_id), so a span received twice is stored once
and a retried export changes nothing. A trace is a dataset's own: the dataset is the token's,
and the same trace id sent with another dataset's token is another trace, so one tenant's spans
never join, replace or move another's. A staged trace *settles* (`settle`) once its root span is
there and nothing new arrived for `TRACES_SETTLE_S` seconds (or at once, with `calibrate traces
flush`): its spans go through `importer.import_decoded`, the path a trace file takes (sampling
by the token's rate and salt, the mapping, the comparison with the dataset, the samples import),
and are deleted in the same transaction. That transaction takes the write lock before it looks
for settled traces, so two servers settling at once take turns and the second finds the first's
traces gone: nothing settles twice. A trace that cannot be mapped (a value no receiver of this
version stages, a failure of the import on its data) is *quarantined* with its reason instead
(never ready again, counted on the dataset page), so it holds no other trace back. Traces without
a root, and quarantined ones, whose newest span is older than `ROOTLESS_MAX_AGE` are dropped and
counted (`drop_rootless`, in transactions of at most DROP_CHUNK traces).

Each staged trace also has one row of `stagedtrace` (owner token, root or not, newest span's
time, span count, quarantine), upserted by `stage_spans` and deleted with its spans: the ready
query, the rootless drop and the dataset page read it through its index, so a settling
transaction costs its batch, not what is staged. `POST /v1/feedback` stages feedback
(`stage_feedback_request`, table `stagedfeedback`, also in chunks) that settling uses as `traces
import --feedback` uses its file; feedback for a trace that is a sample already is applied at
once, without changing its `inclusion_prob`.

The counters of the production source live on the token row (`IngestToken`); the dataset page
sums them over the dataset's tokens (`production_source`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import secrets
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, case, delete, false, func, or_, select, true, update
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, col

from calibrate import lazy
from calibrate.bounds import start_ns_problem
from calibrate.db import dialect_insert, write_session
from calibrate.errors import CalibrateError, NotFound
from calibrate.ingest.bulk import BulkInsert, in_parts
from calibrate.ingest.fields import check_dataset_name
from calibrate.ingest.problems import ImportRejected, reject
from calibrate.ingest.traces.conversations import whole_conversations
from calibrate.ingest.traces.decode import Decoded, Span, json_lines, parse_json
from calibrate.ingest.traces.importer import TracesSummary, check_rate, feedback_items, import_decoded, inclusion_u
from calibrate.models import Dataset, IngestToken, Sample, StagedFeedback, StagedSpan, StagedTrace
from calibrate.reasons import Reason

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
# Spans (or feedback records) a request stages per write transaction: the receiver gives the writer lock back
# between two, so a label save waits for one such transaction at most. An SDK's batch (512 spans) is one; a
# Collector's (8,192) sixteen; a 250,000-span request 489 (bench/results/receiver.md, --big-request).
STAGE_CHUNK = 512
# Rootless traces (or feedback records) dropped per write transaction (about twice as many spans): a CLI import, each
# of whose transactions may wait for one of them, waited up to 1.6 s behind drops of 1,000 on the loaded bench
# machine, 1.0 s behind drops of 250 (its own time alone: up to 0.3 s); drops of 100 took 2.5 times as long and
# did no better there (bench/results/receiver.md, --big-request).
DROP_CHUNK = 250
STAGED_SPAN_COLUMNS = ("dataset_id", "token_id", "trace_id", "span_id", "is_root", "received_at", "span")
QUARANTINE_SHOWN = 10  # quarantined traces the dataset page lists (the newest), with their reasons
TOKEN_PREFIX = "calt_"
SOURCE = "otlp-http"
log = logging.getLogger("calibrate.traces")
# Loaded when the settler first applies the retention settings (it brings pandas), not when the receiver starts.
retention = lazy.module("calibrate.ingest.traces.retention")


def hash_token(token: str) -> str:
    """Return what is stored of a bearer token: its sha256 in hex."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def new_token(session: Session, dataset: str, *, rate: float = 1.0, salt: str | None = None,
              sessions: bool = False) -> tuple[IngestToken, str]:
    """Create a token bound to `dataset` (created empty if missing) and its sampling; return the row and the token.

    `sessions`: the token's traces that share a session id (`session.id`, `gen_ai.conversation.id`)
    settle as one sample, a conversation (`settle`; docs/production.md, "Conversations").

    The token (`calt_` and 32 random bytes, URL-safe base64) is returned once; only its hash is stored.
    """
    rate = check_rate(rate)
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
    # The default salt is random, stored with the token: a salt anyone can guess (the dataset's name, which is in
    # the workbench's URLs) would let a sender choose trace ids that the sampling takes, or leaves out.
    entry = IngestToken(token_hash=hash_token(token), dataset_id=row.id, rate=rate,
                        salt=secrets.token_hex(16) if salt is None else salt, sessions=sessions)
    session.add(entry)
    session.flush()
    return entry, token


def list_tokens(session: Session) -> list[dict[str, Any]]:
    """Return every token as {id, dataset, rate, salt, sessions, created, last_used, revoked}, oldest first (never the token)."""
    rows = session.execute(select(IngestToken, Dataset.name).join(Dataset, Dataset.id == IngestToken.dataset_id)
                           .order_by(IngestToken.id))
    return [{"id": token.id, "dataset": name, "rate": token.rate, "salt": token.salt, "sessions": token.sessions,
             "created": _iso(token.created_at),
             "last_used": _iso(token.last_used_at), "revoked": _iso(token.revoked_at)} for token, name in rows]


def revoke_token(session: Session, token_id: int) -> IngestToken:
    """Revoke a token by id (its spans already staged still settle); NotFound for an unknown id."""
    token = session.get(IngestToken, token_id)
    if token is None:
        ids = [str(i) for i in session.scalars(select(IngestToken.id).order_by(IngestToken.id).limit(20))]
        raise NotFound(Reason("traces_unknown_token", token_id=token_id, ids=", ".join(ids)) if ids
                       else Reason("traces_no_tokens", token_id=token_id))
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
    data = {"parent": span.parent_id, "name": span.name, "start": span.start_ns, "attributes": span.attributes,
            "resource": span.resource}
    if span.trace_state:  # most spans carry none: the key is left out then (rows staged before it had none either)
        data["tracestate"] = span.trace_state
    if span.end_ns:  # the same for the end time and an error status (rows staged before steps had neither)
        data["end"] = span.end_ns
    if span.status:
        data["status"] = span.status
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def span_of(trace_id: str, span_id: str, text: str) -> Span:
    """Return the Span a staged row holds (the inverse of span_json)."""
    data = json.loads(text)
    return Span(trace_id, span_id, data["parent"], data["name"], data["start"], data["attributes"], data["resource"],
                str(data.get("tracestate", "")), int(data.get("end", 0)), str(data.get("status", "")))


@dataclass
class Staged:
    """What one request staged: new spans, spans already staged (or twice in the request), spans refused."""

    new: int = 0
    repeated: int = 0
    rejected: int = 0

    def add(self, other: Staged) -> None:
        self.new, self.repeated, self.rejected = self.new + other.new, self.repeated + other.repeated, \
            self.rejected + other.rejected


def encode_spans(spans: Iterable[Span], rejected: list[str]) -> list[tuple[Span, str]]:
    """Return each span with its stored text (span_json), done before the write so the lock is held shorter.

    The receiver's own refusals, one span at a time (the exporter is told in partialSuccess): a
    start time outside the years calibrate takes (calibrate.bounds: 1e22 ns would be year 318857,
    and stopped settling once), and text that is not valid Unicode (a lone surrogate escape such
    as "\\ud800" in its name or an attribute: JSON allows it, the database refuses it). Such a
    span is left out and why is appended to `rejected`. (A trace file keeps such spans: its
    import names the trace it cannot map and goes on, mapping.Unmappable.)
    """
    out = []
    for span in spans:
        problem = start_ns_problem(span.start_ns)
        if problem is not None:
            rejected.append(f"span {span.span_id} of trace {span.trace_id}: startTimeUnixNano {problem}")
            continue
        text = span_json(span)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            rejected.append(f"span {span.span_id} of trace {span.trace_id}: not valid Unicode (a lone surrogate "
                            f"{text[exc.start:exc.end]!a} in its name or attributes)")
            continue
        out.append((span, text))
    return out


def stage_spans(session: Session, token: IngestToken, encoded: list[tuple[Span, str]], *, rejected: int = 0,
                now: float | None = None) -> Staged:
    """Stage spans (`encode_spans`' pairs) for `token`'s dataset in the caller's (write) transaction; count them on the token.

    A span is new for the token's dataset unless that dataset staged its (trace id, span id)
    already: another dataset's trace of the same id is another trace (models.StagedSpan).
    `rejected`: spans the request refused one by one, counted on the token.
    """
    now = time.time() if now is None else now
    dataset_id = token.dataset_id
    out = Staged(rejected=rejected)
    fresh: dict[tuple[str, str], tuple[Span, str]] = {}
    for span, text in encoded:
        key = (span.trace_id, span.span_id)
        if key in fresh:
            out.repeated += 1
        else:
            fresh[key] = (span, text)
    trace_ids = sorted({trace_id for trace_id, _ in fresh})
    for chunk in in_parts(trace_ids, QUERY_CHUNK):
        for key in session.execute(select(StagedSpan.trace_id, StagedSpan.span_id)
                                   .where(StagedSpan.dataset_id == dataset_id, col(StagedSpan.trace_id).in_(chunk))):
            if fresh.pop(tuple(key), None) is not None:
                out.repeated += 1
    rows = [(dataset_id, token.id, span.trace_id, span.span_id, not span.parent_id, now, text) for span, text in fresh.values()]
    if rows:
        # The driver's executemany of plain tuples: SQLAlchemy's work per row was half of a chunk's time under the lock.
        spans = BulkInsert(session, StagedSpan.__table__, STAGED_SPAN_COLUMNS)
        spans.extend(rows)
        spans.flush()
        traces: dict[str, dict[str, Any]] = {}
        for trace_id, span_id in fresh:
            entry = traces.get(trace_id)
            if entry is None:
                entry = traces[trace_id] = {"dataset_id": dataset_id, "trace_id": trace_id, "token_id": token.id,
                                            "has_root": False, "last_received_at": now, "n_spans": 0}
            entry["n_spans"] += 1
            entry["has_root"] = entry["has_root"] or not fresh[(trace_id, span_id)][0].parent_id
        upsert_traces(session, list(traces.values()))
    out.new = len(rows)
    session.execute(update(IngestToken).where(IngestToken.id == token.id).values(
        spans_received=IngestToken.spans_received + out.new, spans_repeated=IngestToken.spans_repeated + out.repeated,
        spans_rejected=IngestToken.spans_rejected + out.rejected, last_used_at=datetime.fromtimestamp(now, UTC),
        last_received_at=datetime.fromtimestamp(now, UTC) if encoded else IngestToken.last_received_at))
    return out


def upsert_traces(session: Session, rows: list[dict[str, Any]]) -> None:
    """Add each request's traces to `stagedtrace`, or add to the row a trace has (INSERT … ON CONFLICT, SQLite and PostgreSQL).

    Keyed by (dataset, trace id). A row's spans add up, its newest time is kept, `has_root` once
    true stays true, and the owner becomes the token of the first request that brought a root span.
    """
    table = StagedTrace.__table__
    statement = dialect_insert(session.connection(), table)
    new = statement.excluded
    statement = statement.on_conflict_do_update(index_elements=[table.c.dataset_id, table.c.trace_id], set_={
        "n_spans": table.c.n_spans + new.n_spans,
        "last_received_at": case((new.last_received_at > table.c.last_received_at, new.last_received_at),
                                 else_=table.c.last_received_at),
        "has_root": or_(table.c.has_root, new.has_root),
        "token_id": case((table.c.has_root, table.c.token_id), (new.has_root, new.token_id), else_=table.c.token_id),
    })
    session.connection().execute(statement, rows)


def stage_request(write: Callable[[Callable[[Session], Staged]], Staged], token: IngestToken, spans: Iterable[Span],
                  rejected: list[str], *, chunk: int | None = None) -> Staged:
    """Stage one request's spans in write transactions of at most `chunk` spans each; return what was staged.

    `write(action)` runs `action(session)` in one write transaction behind the writer lock (the
    receiver's background write): between two chunks the lock is given back, so a label save waits
    for one chunk's transaction at most, never for the whole request. `spans` may be an iterator
    that decodes as it goes (memory: one chunk of decoded spans), appending its per-span refusals to
    `rejected`; they are counted on the token with the chunk that follows them. Staging is
    idempotent (a span staged again is "repeated"), so a request cut short by a failure is simply
    sent again by its exporter. `chunk`: STAGE_CHUNK unless given.
    """
    chunk = chunk or STAGE_CHUNK
    out = Staged()
    counted, first = 0, True
    iterator = iter(spans)
    while True:
        part = list(itertools.islice(iterator, chunk))  # decoding them appends the spans it refuses to `rejected`
        encoded = encode_spans(part, rejected)
        refused, counted = len(rejected) - counted, len(rejected)
        if encoded or refused or first:  # an empty request still marks the token used
            out.add(write(lambda session, encoded=encoded, refused=refused:
                          stage_spans(session, token, encoded, rejected=refused)))
        first = False
        if len(part) < chunk:
            return out


# --------------------------------------------------------------------------- feedback


class TooManyRecords(CalibrateError):
    """A `POST /v1/feedback` body with more records than the receiver takes per request (HTTP 413)."""


def parse_feedback(body: bytes, *, max_records: int | None = None) -> dict[str, int]:
    """Return trace id → -1/0/1 from a `POST /v1/feedback` body: one object {trace_id, value}, a JSON array of them, or
    JSON lines; the records follow the --feedback file's rules (`importer.feedback_items`). ImportRejected names the
    first bad line (or array item) and field; TooManyRecords past `max_records` records (counted before any is checked)."""
    try:
        data = parse_json(body)
    except ImportRejected:
        if max_records is not None and body.count(b"\n") >= max_records:
            lines = sum(1 for line in body.split(b"\n") if line.strip())
            if lines > max_records:
                raise TooManyRecords(Reason("feedback_too_many", count=lines, limit=max_records)) from None
        given = feedback_items(json_lines(body), otlp=True)  # JSON lines (or not JSON: the bad line is named)
    else:
        if isinstance(data, dict):
            data = [data]
        if not isinstance(data, list):
            raise reject("the body must be an object {trace_id, value}, a JSON array of them, or JSON lines")
        if max_records is not None and len(data) > max_records:
            raise TooManyRecords(Reason("feedback_too_many", count=len(data), limit=max_records))
        given = feedback_items(enumerate(data, start=1), lines=False, otlp=True)
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
    for chunk in in_parts(ids, QUERY_CHUNK):
        for pk, external_id, feedback in session.execute(
                select(Sample.id, Sample.external_id, Sample.feedback)
                .where(Sample.dataset_id == token.dataset_id, col(Sample.external_id).in_(chunk))):
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


def stage_feedback_request(write: Callable[[Callable[[Session], FeedbackStaged]], FeedbackStaged], token: IngestToken,
                           given: dict[str, int], *, chunk: int | None = None) -> FeedbackStaged:
    """Stage one request's feedback in write transactions of at most `chunk` (STAGE_CHUNK) records each (as `stage_request`)."""
    chunk = chunk or STAGE_CHUNK
    out = FeedbackStaged()
    ids = sorted(given)
    for part in in_parts(ids, chunk):
        done = write(lambda session, part=part: stage_feedback(session, token, {trace_id: given[trace_id] for trace_id in part}))
        out.staged, out.late, out.late_changed = out.staged + done.staged, out.late + done.late, \
            out.late_changed + done.late_changed
    return out


# --------------------------------------------------------------------------- settling


def settle(engine: Engine, *, settle_s: float, dataset: str | None = None, now: float | None = None,
           max_field_chars: int = 1_000_000, batch: int = SETTLE_BATCH, background: bool = False) -> TracesSummary:
    """Turn every staged trace whose root is there and whose newest span is `settle_s` seconds old into samples.

    `dataset`: only that dataset's traces (`calibrate traces flush --dataset D` passes settle_s=0).
    Each transaction settles at most `batch` traces in a write session (db.write_session: the writer lock,
    module docstring); `background`: the server's settler, whose transactions let waiting label saves go first.
    A trace that cannot be mapped is quarantined, not settled, and never holds the others back (`_settle_some`).
    """
    now = time.time() if now is None else now
    total = TracesSummary(dataset or "")
    _in_transactions(engine, background, batch, lambda session: _settle_some(
        session, settle_s=settle_s, dataset=dataset, now=now, max_field_chars=max_field_chars, batch=batch, into=total))
    return total


def _in_transactions(engine: Engine, background: bool, size: int, step: Callable[[Session], int]) -> None:
    """Run `step(session)` in write sessions (background ones with `background`) until it does fewer than `size` things."""
    while True:
        with write_session(engine, background=background) as session:
            done = step(session)
        if done < size:
            return
        if background:
            # Let the threads waiting for the lock in first: a thread that releases a lock and takes it again
            # at once keeps it (Python's locks are not fair), and label saves waited through whole settling runs.
            time.sleep(BATCH_PAUSE)


def _dataset_id(session: Session, dataset: str | None) -> int | None:
    """Return the id of the dataset named (0 when there is none: nothing matches), or None for every dataset."""
    if dataset is None:
        return None
    return session.scalar(select(Dataset.id).where(Dataset.name == dataset)) or 0


def _settle_some(session: Session, *, settle_s: float, dataset: str | None, now: float, max_field_chars: int, batch: int,
                 into: TracesSummary) -> int:
    """Settle one batch of ready traces in the caller's transaction; return how many were taken (settled or quarantined)."""
    dataset_id = _dataset_id(session, dataset)
    if dataset_id == 0:
        return 0
    # The oldest ready traces first, straight from the index (has_root, quarantined, last_received_at, …): a batch
    # costs the batch, however many spans are staged.
    ready = (select(StagedTrace.dataset_id, StagedTrace.trace_id, StagedTrace.token_id)
             .where(col(StagedTrace.has_root) == true(), col(StagedTrace.quarantined) == false(),
                    StagedTrace.last_received_at <= now - settle_s)
             .order_by(StagedTrace.last_received_at, StagedTrace.dataset_id, StagedTrace.trace_id).limit(batch))
    if dataset_id is not None:
        ready = ready.where(StagedTrace.dataset_id == dataset_id)
    # A trace is (dataset, trace id), and belongs to the token (of that dataset) its root came with.
    owners: dict[tuple[int, str], int] = {(ds, trace_id): token_id for ds, trace_id, token_id in session.execute(ready)}
    if not owners:
        return 0
    taken = len(owners)
    tokens = {token_id: session.get(IngestToken, token_id) for token_id in set(owners.values())}
    if any(token.sessions for token in tokens.values()):
        owners = whole_conversations(session, owners, tokens, now=now, settle_s=settle_s, read_span=span_of)
        tokens.update({token_id: session.get(IngestToken, token_id) for token_id in set(owners.values()) - set(tokens)})
    by_dataset: dict[int, list[str]] = defaultdict(list)
    for ds, trace_id in sorted(owners):
        by_dataset[ds].append(trace_id)
    for ds, trace_ids in sorted(by_dataset.items()):
        quarantine = _settle_dataset(session, ds, trace_ids, {trace_id: tokens[owners[(ds, trace_id)]] for trace_id in trace_ids},
                                     max_field_chars=max_field_chars, into=into)
        for trace_id, why in sorted(quarantine.items()):
            log.warning("staged trace %s of dataset %d quarantined: %s", trace_id, ds, why)
            session.execute(update(StagedTrace).where(StagedTrace.dataset_id == ds, StagedTrace.trace_id == trace_id)
                            .values(quarantined=True, quarantine_reason=why))
        for chunk in in_parts([trace_id for trace_id in trace_ids if trace_id not in quarantine], QUERY_CHUNK):
            session.execute(delete(StagedSpan).where(StagedSpan.dataset_id == ds, col(StagedSpan.trace_id).in_(chunk)))
            session.execute(delete(StagedTrace).where(StagedTrace.dataset_id == ds, col(StagedTrace.trace_id).in_(chunk)))
    return taken


def _settle_dataset(session: Session, ds: int, trace_ids: list[str], owner: dict[str, IngestToken], *, max_field_chars: int,
                    into: TracesSummary) -> dict[str, str]:
    """Settle one dataset's traces of the batch (each with its owner token); return the ones to quarantine, with why."""
    # Feedback staged for these traces (POST /v1/feedback): used here and deleted with them.
    feedback: dict[str, int] = {}
    used: list[int] = []
    for chunk in in_parts(trace_ids, QUERY_CHUNK):
        for row_id, trace_id, value in session.execute(
                select(StagedFeedback.id, StagedFeedback.trace_id, StagedFeedback.value)
                .where(StagedFeedback.dataset_id == ds, col(StagedFeedback.trace_id).in_(chunk))):
            feedback[trace_id] = value
            used.append(row_id)
    for chunk in in_parts(used, QUERY_CHUNK):
        session.execute(delete(StagedFeedback).where(col(StagedFeedback.id).in_(chunk)))
    # Only the traces the sampling takes need their spans read: OTLP spans carry no feedback (the mapping reads none),
    # so a trace is taken when its staged feedback is down or by its draw, the rule import_decoded applies again.
    # A sessions token's traces are sampled by conversation (import_decoded): all of them are read.
    taken = [trace_id for trace_id in trace_ids
             if owner[trace_id].sessions or feedback.get(trace_id) == -1
             or inclusion_u(owner[trace_id].salt, trace_id) < owner[trace_id].rate]
    passed = Counter(owner[trace_id].id for trace_id in set(trace_ids) - set(taken))
    spans, unreadable = _read_spans(session, ds, taken)
    name = session.scalar(select(Dataset.name).where(Dataset.id == ds))
    quarantine: dict[str, str] = {}
    for token in sorted({owner[trace_id].id: owner[trace_id] for trace_id in trace_ids}.values(), key=lambda t: t.id):
        mine = {trace_id: found for trace_id, found in spans.items() if owner[trace_id].id == token.id}
        summary = _import_isolated(session, mine, token, dataset=name, feedback=feedback, max_field_chars=max_field_chars)
        lost = {trace_id: why for trace_id, why in unreadable.items() if owner[trace_id].id == token.id}
        summary.unmappable.update(lost)  # taken, then set aside: as a trace the mapping could not take
        summary.traces, summary.sampled = summary.traces + len(lost), summary.sampled + len(lost)
        quarantine.update(summary.unmappable)
        _count_settled(session, token, summary, passed[token.id])
        into.add(summary)
    return quarantine


def _read_spans(session: Session, ds: int, trace_ids: list[str]) -> tuple[dict[str, list[Span]], dict[str, str]]:
    """Return the staged spans of a dataset's traces by trace, and the traces a stored row of which cannot be read."""
    spans: dict[str, list[Span]] = {}
    unreadable: dict[str, str] = {}
    for chunk in in_parts(trace_ids, QUERY_CHUNK):
        for trace_id, span_id, text in session.execute(
                select(StagedSpan.trace_id, StagedSpan.span_id, StagedSpan.span)
                .where(StagedSpan.dataset_id == ds, col(StagedSpan.trace_id).in_(chunk)).order_by(StagedSpan.id)):
            if trace_id in unreadable:
                continue
            try:
                spans.setdefault(trace_id, []).append(span_of(trace_id, span_id, text))
            except (ValueError, KeyError, TypeError) as exc:  # a row no receiver of this version writes
                unreadable[trace_id] = f"its staged span {span_id} cannot be read ({type(exc).__name__}: {exc})"[:300]
                spans.pop(trace_id, None)
    return spans, unreadable


def _count_settled(session: Session, token: IngestToken, summary: TracesSummary, passed: int) -> None:
    """Put one token's part of a batch on its counters: settled (drawn or passed over) and sampled; the quarantined
    ones are neither (they are counted when they are dropped), and their `unmappable` skip reason is not kept."""
    summary.quarantined = len(summary.unmappable)
    summary.traces += passed - summary.quarantined
    summary.sampled -= summary.quarantined
    skipped = Counter(summary.skipped)
    skipped.pop("unmappable", None)
    summary.skipped = dict(skipped.most_common())
    merged = Counter(token.skipped or {})
    merged.update(summary.skipped)
    upstream = Counter(token.upstream or {})
    upstream.update(summary.upstream)
    session.execute(update(IngestToken).where(IngestToken.id == token.id).values(
        traces_settled=IngestToken.traces_settled + summary.traces,
        traces_sampled=IngestToken.traces_sampled + summary.sampled,
        traces_sampled_down=IngestToken.traces_sampled_down + summary.sampled_down, skipped=dict(merged),
        upstream=dict(sorted(upstream.items())), metadata_dropped=IngestToken.metadata_dropped + summary.metadata_dropped))


def _import_isolated(session: Session, traces: dict[str, list[Span]], token: IngestToken, *, dataset: str,
                     feedback: dict[str, int], max_field_chars: int) -> TracesSummary:
    """Import one token's traces of a batch; if that fails for something other than the database, import them one by one,
    so the trace that fails is named (`unmappable`) and quarantined, and the others settle."""
    def run(ids: list[str]) -> TracesSummary:
        decoded = Decoded(spans=[span for trace_id in ids for span in traces[trace_id]])
        return import_decoded(session, decoded, dataset=dataset, source=SOURCE,
                              feedback={trace_id: feedback[trace_id] for trace_id in ids if trace_id in feedback},
                              rate=token.rate, salt=token.salt, max_field_chars=max_field_chars, sessions=token.sessions)

    ids = sorted(traces)
    try:
        return run(ids)
    except SQLAlchemyError:
        raise  # the database's trouble (a full disk, a lock): the whole transaction fails and is tried again later
    except Exception:  # one trace's data broke the import (anything but the database): find it, settle the rest
        log.exception("settling %d traces of dataset %s failed; settling them one by one", len(ids), dataset)
    total = TracesSummary(dataset)
    for trace_id in ids:
        try:
            total.add(run([trace_id]))
        except SQLAlchemyError:
            raise
        except Exception as exc:  # as above: this trace's own failure, quarantined with it
            total.unmappable[trace_id] = f"{type(exc).__name__}: {exc}"[:300]
            total.traces += 1
            total.sampled += 1
    return total


def drop_rootless(engine: Engine, *, now: float | None = None, max_age: float = ROOTLESS_MAX_AGE,
                  dataset: str | None = None, background: bool = False, chunk: int | None = None) -> TracesSummary:
    """Delete what waited longer than `max_age` for nothing, and count it on the tokens: traces without a root (and
    quarantined ones) whose newest span is that old, and staged feedback received that long ago (its trace never
    settled, or settled and was not drawn).

    In write transactions of at most `chunk` (DROP_CHUNK) traces (or feedback records) each (`background`: the
    server's, as `settle`'s): a day's worth of rootless traces never holds the writer lock in one long transaction.
    """
    chunk = chunk or DROP_CHUNK
    before = (time.time() if now is None else now) - max_age
    out = TracesSummary(dataset or "")
    for drop in (_drop_some, _drop_feedback):
        _in_transactions(engine, background, chunk, lambda session, drop=drop: drop(session, before, dataset, chunk, out))
    return out


def _drop_some(session: Session, before: float, dataset: str | None, chunk: int, out: TracesSummary) -> int:
    """Drop up to `chunk` rootless or quarantined traces whose newest span came before `before`, with their spans;
    count them on their tokens (skip reasons `no_root_span`, `quarantined`); return how many."""
    dataset_id = _dataset_id(session, dataset)
    if dataset_id == 0:
        return 0
    old: list[tuple[int, str, int, int, bool]] = []
    # Each kind through the index (has_root, quarantined, last_received_at): rootless, then quarantined with or without root.
    for has_root, quarantined in ((False, False), (False, True), (True, True)):
        query = (select(StagedTrace.dataset_id, StagedTrace.trace_id, StagedTrace.token_id, StagedTrace.n_spans)
                 .where(col(StagedTrace.has_root) == (true() if has_root else false()),
                        col(StagedTrace.quarantined) == (true() if quarantined else false()),
                        StagedTrace.last_received_at < before)
                 .order_by(StagedTrace.last_received_at).limit(chunk - len(old)))
        if dataset_id is not None:
            query = query.where(StagedTrace.dataset_id == dataset_id)
        old += [(*row, quarantined) for row in session.execute(query)]
        if len(old) >= chunk:
            break
    by_dataset: dict[int, list[str]] = defaultdict(list)
    per_token: dict[int, Counter[str]] = defaultdict(Counter)  # token → traces, spans, and the skip reasons
    for ds, trace_id, token_id, n_spans, quarantined in old:
        by_dataset[ds].append(trace_id)
        per_token[token_id].update({"traces": 1, "spans": n_spans, "quarantined" if quarantined else "no_root_span": 1})
    for ds, trace_ids in by_dataset.items():
        for part in in_parts(trace_ids, QUERY_CHUNK):
            session.execute(delete(StagedSpan).where(StagedSpan.dataset_id == ds, col(StagedSpan.trace_id).in_(part)))
            session.execute(delete(StagedTrace).where(StagedTrace.dataset_id == ds, col(StagedTrace.trace_id).in_(part)))
    skipped = Counter(out.skipped)
    for token_id, counts in per_token.items():
        reasons = {reason: counts[reason] for reason in ("no_root_span", "quarantined") if counts[reason]}
        merged = Counter(session.get(IngestToken, token_id).skipped or {})
        merged.update(reasons)
        session.execute(update(IngestToken).where(IngestToken.id == token_id).values(
            traces_dropped=IngestToken.traces_dropped + counts["traces"],
            spans_dropped=IngestToken.spans_dropped + counts["spans"], skipped=dict(merged)))
        out.dropped_traces += counts["traces"]
        out.dropped_spans += counts["spans"]
        skipped.update(reasons)
    out.skipped = dict(skipped.most_common())
    return len(old)


def _drop_feedback(session: Session, before: float, dataset: str | None, chunk: int, out: TracesSummary) -> int:
    """Drop up to `chunk` staged feedback records received before `before`; return how many."""
    dataset_id = _dataset_id(session, dataset)
    if dataset_id == 0:
        return 0
    stale = (select(StagedFeedback.id, StagedFeedback.token_id).where(StagedFeedback.received_at < before)
             .order_by(StagedFeedback.received_at).limit(chunk))
    if dataset_id is not None:
        stale = stale.where(StagedFeedback.dataset_id == dataset_id)
    rows = session.execute(stale).all()
    per_token = Counter(token_id for _, token_id in rows)
    for part in in_parts([row_id for row_id, _ in rows], QUERY_CHUNK):
        session.execute(delete(StagedFeedback).where(col(StagedFeedback.id).in_(part)))
    for token_id, n in per_token.items():
        session.execute(update(IngestToken).where(IngestToken.id == token_id)
                        .values(feedback_dropped=IngestToken.feedback_dropped + n))
    out.dropped_feedback += len(rows)
    return len(rows)


def stale_staged(engine: Engine, *, dataset: str, now: float | None = None, max_age: float = ROOTLESS_MAX_AGE) -> dict[str, int]:
    """Return what `drop_rootless` would drop now from `dataset`: {traces, spans, feedback} (`traces purge --dry-run`)."""
    before = (time.time() if now is None else now) - max_age
    with Session(engine) as session:
        dataset_id = _dataset_id(session, dataset)
        traces, spans = session.execute(
            select(func.count(), func.coalesce(func.sum(StagedTrace.n_spans), 0))
            .where(StagedTrace.dataset_id == dataset_id, StagedTrace.last_received_at < before,
                   or_(col(StagedTrace.has_root) == false(), col(StagedTrace.quarantined) == true()))).one()
        feedback = session.scalar(select(func.count()).select_from(StagedFeedback)
                                  .where(StagedFeedback.dataset_id == dataset_id, StagedFeedback.received_at < before))
    return {"traces": int(traces), "spans": int(spans), "feedback": int(feedback or 0)}


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
        try:
            # The datasets' retention, once a day each (the first server to claim the day purges).
            for purged in retention.apply_due(self.engine, background=True):
                log.info("retention of %s: %d samples older than %d days removed, %d kept", purged["dataset"],
                         purged["removed"]["samples"], purged["older_than_days"], sum(purged["kept"].values()))
        except Exception:  # as above: the next wake-up retries (a claimed day waits for the next day)
            log.exception("applying the retention settings failed")

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
    upstream: Counter[str] = Counter()
    for token in tokens:
        skipped.update(token.skipped or {})
        upstream.update(token.upstream or {})
    staged_traces, staged_spans = session.execute(
        select(func.count(), func.coalesce(func.sum(StagedTrace.n_spans), 0))
        .where(StagedTrace.dataset_id == dataset.id, col(StagedTrace.quarantined) == false())).one()
    quarantined = session.scalar(select(func.count()).select_from(StagedTrace)
                                 .where(StagedTrace.dataset_id == dataset.id, col(StagedTrace.quarantined) == true()))
    recent = session.execute(select(StagedTrace.trace_id, StagedTrace.quarantine_reason)
                             .where(StagedTrace.dataset_id == dataset.id, col(StagedTrace.quarantined) == true())
                             .order_by(StagedTrace.last_received_at.desc(), StagedTrace.trace_id).limit(QUARANTINE_SHOWN)).all()
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
        "upstream": dict(sorted(upstream.items())), "metadata_dropped": sum(t.metadata_dropped for t in tokens),
        "feedback_received": sum(t.feedback_received for t in tokens), "feedback_late": sum(t.feedback_late for t in tokens),
        "feedback_dropped": sum(t.feedback_dropped for t in tokens), "feedback_staged": staged_feedback,
        "last_received": max(received) if received else None,
        "quarantined": quarantined, "quarantine": [{"trace_id": trace_id, "reason": why} for trace_id, why in recent],
    }


def _iso(when: datetime | None) -> str | None:
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
