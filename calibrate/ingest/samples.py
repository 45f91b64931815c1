"""Import samples (question, answer, contexts, claims) into a dataset, all or nothing.

Two streaming passes over the file. The first validates every record and keeps only
id → (content hash, line), so duplicates and changed samples are found without holding the
records; it only reads the database, in no write transaction. The second re-reads the file and
writes the new and updated samples as an import batch (calibrate/ingest/batches.py): chunk by
chunk, each its own short write transaction (`BulkInsert`; ids from max(id) + 1 inside the
chunk's transaction, which holds the write lock), into a hidden dataset; one last small
transaction publishes it. A file with any problem raises ImportRejected before anything is
written; re-importing a file whose samples are all known and unchanged skips the second pass
and writes nothing.

`--update` replaces a changed sample's fields; its contexts and claims are matched to the
stored ones by rank/index and text: unchanged rows stay (labels on them stay valid), changed
or dropped ones are retired (`active=False`) and new rows added. Labels on retired rows, and
the sample's own labels when its question, answer, ground truth or contexts changed, are
kept and flagged stale with a LabelRevision("stale"). A record without `claims` whose answer
is unchanged keeps claims an LLM extraction or an expert made (claim source `NAME@V`, or
`…+edited`): only a new answer, or claims given in the file, replace them. The chunks write
the new rows inactive and the new fields into a hidden copy of the sample, and record each
change as an ImportStep; the publish applies them.

`claims` is a list of strings (each located in the answer) or of `{"text", "start", "end"}`
objects (the span given, checked against the answer: what `calibrate export samples` writes),
and `claim_source` names where they come from (default `import`; `segmenter` without claims).

A pairwise sample carries `responses` (ingest/responses.py reads both spellings); `answer` and
`contexts` are then optional. Its responses are replaced whole by an `--update` that changes
them (nothing points at a response row: labels and verdicts name responses by id), and its
labels are flagged stale. A record without responses hashes exactly as before responses existed,
so re-importing an older file changes nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, delete, insert, or_, select, update
from sqlmodel import Session

from calibrate.ingest.batches import Writes, hidden_dataset
from calibrate.ingest.bulk import BulkInsert, first_free_id, sync_id_sequence
from calibrate.ingest.fields import MAX_ID_CHARS, RecordCheck, check_dataset_name, invalid, kind_of, plain_text
from calibrate.ingest.problems import ImportSummary, Problems, TooManyProblems, reject
from calibrate.ingest.readers import Progress, Record, read_records
from calibrate.ingest.responses import check_response_columns, has_response_fields, response_column, responses_of
from calibrate.models import (
    EDITED,
    IMPORT,
    SEGMENTER,
    Claim,
    Context,
    Dataset,
    ImportBatch,
    ImportStep,
    Label,
    LabelRevision,
    Response,
    Sample,
    target_key,
    utcnow,
)
from calibrate.text.sentences import ClaimSpan, SentenceSegmenter, locate_claims, segment

SAMPLE_FIELDS = ("id", "question", "answer", "contexts", "ground_truth", "claims", "claim_source", "metadata", "feedback",
                 "retrieved_ids", "relevant_ids", "responses")
MAX_SOURCE_CHARS = 250
RAGAS_ALIASES = {"user_input": "question", "response": "answer", "retrieved_contexts": "contexts", "reference": "ground_truth"}
REQUIRED = ("id", "question", "answer", "contexts")
PAIRWISE_OPTIONAL = ("answer", "contexts")  # a sample with responses may leave these out
_KNOWN = frozenset(SAMPLE_FIELDS)
GIVEN = "given"  # Sample.segmenter of a sample whose claims came with it
# A sample label judged the whole sample: it is stale when one of these changed.
SAMPLE_LABEL_FIELDS = ("question", "answer", "ground_truth", "contexts", "responses")

_SAMPLES, _CONTEXTS, _CLAIMS, _RESPONSES = Sample.__table__, Context.__table__, Claim.__table__, Response.__table__
_LABELS, _REVISIONS, _STEPS = Label.__table__, LabelRevision.__table__, ImportStep.__table__
_SAMPLE_COLUMNS = ("id", "dataset_id", "external_id", "question", "answer", "ground_truth", "metadata", "feedback",
                   "retrieved_ids", "relevant_ids", "content_hash", "segmenter", "claim_source", "content_sha256", "split",
                   "created_at", "updated_at")


def check_samples_header(columns: list[str]) -> list[tuple[str | None, str]]:
    """Return the problems of a samples CSV header: missing required or unknown columns."""
    present = set(columns)
    problems: list[tuple[str | None, str]] = []
    aliases = {name: alias for alias, name in RAGAS_ALIASES.items()}
    pairwise = any(response_column(name) for name in columns) or "responses" in present
    required = [name for name in REQUIRED if not (pairwise and name in PAIRWISE_OPTIONAL)]
    missing = [name for name in required if name not in present and aliases.get(name) not in present]
    for name in missing:
        alias = f" (or its alias {aliases[name]!r})" if name in aliases else ""
        hint = "" if pairwise else " (pairwise samples: response_<id> columns instead of answer and contexts)"
        problems.append((name, f"the header has no column {name!r}{alias}; required: {', '.join(REQUIRED)}{hint}"))
    for name in columns:
        if name not in SAMPLE_FIELDS and name not in RAGAS_ALIASES and not response_column(name):
            problems.append((name, f"unknown column (columns: {', '.join(SAMPLE_FIELDS)}, response_<id>); "
                                   "put other data in 'metadata' as JSON"))
    return problems + check_response_columns(columns)


def normalise_sample(data: dict[str, Any], check: RecordCheck) -> dict[str, Any] | None:
    """Return the record in canonical form (the form that is hashed), or None after filing problems."""
    check.aliases(data, RAGAS_ALIASES)
    pairwise = has_response_fields(data)
    responses = responses_of(data, check) if pairwise else None
    check.unknown(data, _KNOWN, "; put other data under 'metadata'")
    external_id = check.identifier(data, "id")
    question = check.text(data, "question", required=True)
    answer = check.text(data, "answer", required=not pairwise)
    if pairwise and answer is None:
        answer = ""  # a pairwise sample without an answer (stored as "", hashed as "")
    ground_truth = check.text(data, "ground_truth", required=False)
    contexts = [] if pairwise and data.get("contexts") is None else _contexts(data, check)
    claims = _claims(data, check, answer)
    claim_source = check.text(data, "claim_source", required=False, max_chars=MAX_SOURCE_CHARS)
    metadata = _metadata(data, check)
    feedback = check.integer(data, "feedback", choices=(-1, 0, 1), what="-1, 0 or 1")
    retrieved_ids = check.id_list(data, "retrieved_ids")
    relevant_ids = check.id_list(data, "relevant_ids")
    if not check.ok:
        return None
    record = {
        "id": external_id, "question": question, "answer": answer, "ground_truth": ground_truth,
        "contexts": contexts, "claims": claims, "metadata": metadata, "feedback": feedback,
        "retrieved_ids": retrieved_ids, "relevant_ids": relevant_ids,
    }
    if claim_source is not None:
        # Only when given: the content hash of a record without it stays what it always was.
        record["claim_source"] = claim_source.strip()
    if responses is not None:  # the same: a record without responses hashes as it always did
        record["responses"] = responses
    return record


_CONTEXTS_SHAPE = "a list of strings or of {text, doc_id} objects"


_CONTEXT_KEYS = frozenset({"text", "doc_id"})


def _contexts(data: dict[str, Any], check: RecordCheck) -> list[list[str | None]] | None:
    value = check.structured(data, "contexts", _CONTEXTS_SHAPE)
    if invalid(value):
        return None
    if value is None:
        check.bad("contexts", f"is missing ({_CONTEXTS_SHAPE}; [] for none)")
        return None
    if not isinstance(value, list):
        check.bad("contexts", f"must be {_CONTEXTS_SHAPE}, found {kind_of(value)}")
        return None
    out: list[list[str | None]] = []
    limit = check.limit
    for rank, item in enumerate(value):
        if type(item) is dict:
            text, doc_id = item.get("text"), item.get("doc_id")
            if item.keys() <= _CONTEXT_KEYS and plain_text(text, limit) and (doc_id is None or plain_text(doc_id, MAX_ID_CHARS)):
                out.append([text, doc_id])
                continue
        elif plain_text(item, limit):
            out.append([item, None])
            continue
        context = _context(item, rank, check)
        if context is None:
            return None
        out.append(context)
    return out


def _context(item: object, rank: int, check: RecordCheck) -> list[str | None] | None:
    """Check one context the fast path did not accept; return [text, doc_id], or None after filing a problem."""
    what = f"context at rank {rank}"
    doc_id = None
    if isinstance(item, dict):
        extra = sorted(set(item) - _CONTEXT_KEYS)
        if extra:
            check.bad("contexts", f"{what} has unknown key {extra[0]!r} (keys: text, doc_id)")
            return None
        text, doc_id = item.get("text"), item.get("doc_id")
        if isinstance(doc_id, int) and not isinstance(doc_id, bool):
            doc_id = str(doc_id)
        elif doc_id is not None:
            if not isinstance(doc_id, str):
                check.bad("contexts", f"{what}: doc_id must be a string, found {kind_of(doc_id)}")
                return None
            doc_id = check.check_text("contexts", doc_id, required=False, max_chars=MAX_ID_CHARS, what=f"{what}: doc_id")
            if not check.ok:
                return None
        if text is None:
            check.bad("contexts", f"{what} has no 'text'")
            return None
    else:
        text = item
    if not isinstance(text, str):
        check.bad("contexts", f"must be {_CONTEXTS_SHAPE}; {what} is {kind_of(text)}")
        return None
    if check.check_text("contexts", text, what=what) is None:
        return None
    return [text, doc_id]


_CLAIMS_SHAPE = "a list of strings or of {text, start, end} objects"
_CLAIM_KEYS = frozenset({"text", "start", "end"})


def _claims(data: dict[str, Any], check: RecordCheck, answer: str | None) -> list[str] | list[dict[str, Any]] | None:
    value = check.structured(data, "claims", _CLAIMS_SHAPE)
    if value is None or invalid(value):
        return None
    if not isinstance(value, list):
        check.bad("claims", f"must be {_CLAIMS_SHAPE}, found {kind_of(value)}")
        return None
    objects = bool(value) and isinstance(value[0], dict)
    out: list[Any] = []
    for index, item in enumerate(value):
        if objects != isinstance(item, dict) or not isinstance(item, (str, dict)):
            check.bad("claims", f"must be {_CLAIMS_SHAPE}, not a mix; claim {index} is {kind_of(item)}")
            return None
        if not objects:
            if check.check_text("claims", item, what=f"claim {index}") is None:
                return None
            out.append(item)
            continue
        claim = _claim_object(item, index, check, answer)
        if claim is None:
            return None
        out.append(claim)
    return out


def _claim_object(item: dict[str, Any], index: int, check: RecordCheck, answer: str | None) -> dict[str, Any] | None:
    """Check one {text, start, end} claim: the span is -1/-1 or where the text is in the answer (up to whitespace)."""
    what = f"claim {index}"
    extra = sorted(set(item) - _CLAIM_KEYS)
    if extra:
        check.bad("claims", f"{what} has unknown key {extra[0]!r} (keys: text, start, end)")
        return None
    text = item.get("text")
    if not isinstance(text, str):
        check.bad("claims", f"{what} needs a 'text' string, found {kind_of(text)}")
        return None
    if check.check_text("claims", text, what=what) is None:
        return None
    start, end = item.get("start", -1), item.get("end", -1)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (start, end)):
        check.bad("claims", f"{what}: start and end must be whole numbers (-1 for a claim not in the answer)")
        return None
    if (start, end) != (-1, -1) and answer is not None:
        if not 0 <= start < end <= len(answer):
            check.bad("claims", f"{what}: span [{start}, {end}) is outside the answer ({len(answer)} characters); "
                                "-1, -1 for a claim not in the answer")
            return None
        if answer[start:end].split() != text.split():
            check.bad("claims", f"{what}: the answer's characters {start}–{end} are not the claim's text")
            return None
    return {"text": text, "start": start, "end": end}


def _metadata(data: dict[str, Any], check: RecordCheck) -> dict[str, Any]:
    value = check.structured(data, "metadata", "an object")
    if value is None or invalid(value):
        return {}
    if not isinstance(value, dict):
        check.bad("metadata", f"must be an object ({{...}}), found {kind_of(value)}")
        return {}
    return value


def content_digest(metadata: Any) -> str | None:
    """Return what `Sample.content_sha256` holds: `metadata.content_sha256` when it is a 64-character string, else None.

    A trace sample's content digest (docs/formats.md, Traces), copied into an indexed column so the
    traces import finds the same content under another trace id without reading the dataset.
    """
    value = metadata.get("content_sha256") if isinstance(metadata, dict) else None
    return value if isinstance(value, str) and len(value) == 64 else None


def canonical_json(record: dict[str, Any]) -> str:
    """Return the canonical JSON text of a normalised record (sorted keys, no spaces)."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def hash_checked(record: dict[str, Any], check: RecordCheck) -> str | None:
    """Return the record's content hash (the sha256 of its canonical JSON); None if its metadata is too long."""
    text = canonical_json(record)
    # The metadata is part of the canonical text, so only a long record needs it measured.
    if len(text) > check.limit and record["metadata"]:
        size = len(canonical_json(record["metadata"]))
        if size > check.limit:
            check.bad("metadata", f"{size:,} characters as JSON, the limit is {check.limit:,}")
            return None
    return hashlib.sha256(text.encode()).hexdigest()


def claim_spans(record: dict[str, Any]) -> tuple[list[ClaimSpan], str, str]:
    """Return the record's claims with their spans, the Sample.segmenter and the claim source that made them."""
    claims = record["claims"]
    if claims is not None:
        source = record.get("claim_source") or IMPORT
        if claims and isinstance(claims[0], dict):
            return [ClaimSpan(c["text"], c["start"], c["end"]) for c in claims], GIVEN, source
        return locate_claims(record["answer"], claims), GIVEN, source
    return segment(record["answer"]), SentenceSegmenter.name, record.get("claim_source") or SEGMENTER


def claim_origin(source: str) -> str:
    """Return the origin of imported claims: their set's source without "+edited"."""
    return source[: -len(EDITED)] if source.endswith(EDITED) else source


# --------------------------------------------------------------------------- the import


def _fingerprint(path: str | Path) -> tuple[int, int]:
    stat = Path(path).stat()
    return stat.st_size, stat.st_mtime_ns


def import_samples(writes: Writes, source: str | Path, fmt: str, *, dataset: str, update: bool = False,
                   description: str = "", progress: Callable[[int], object] | None = None,
                   max_errors: int = 50, max_field_chars: int = 1_000_000,
                   ids: Collection[str] | None = None) -> ImportSummary:
    """Validate then write the samples of a file into `dataset` (created if missing), as one import batch.

    `writes` says where: the caller's transaction, or short transactions of their own
    (calibrate.ingest.batches). Validation only reads; nothing is visible before the publish.
    `ids`: the ids the file holds, when the caller knows them (the traces import, a batch of a
    large dataset): the stored samples are then read by those ids (IN lists on the unique index
    (dataset_id, external_id)), not all of the dataset's; a record with another id is refused.
    """
    if not dataset or len(dataset) > 200:
        raise reject("the dataset name must be 1 to 200 characters", field="dataset")
    cells = fmt == "csv"
    fingerprint = _fingerprint(source)

    def records() -> Iterator[Record]:
        return read_records(source, fmt, header_check=check_samples_header if cells else None)

    # Pass 1: validate, keeping id -> (hash, line) only. Reads, in no write transaction.
    problems = Problems(max_errors)
    seen: dict[str, tuple[str, int | None]] = {}
    added = changed = count = 0
    tick = Progress(progress)
    with writes.read() as session:
        ds = session.scalars(select(Dataset).where(Dataset.name == dataset)).first()
        if ds is None:  # a new dataset: its name must be one of the documented ones (older ones stay usable)
            check_dataset_name(dataset)
        existing: dict[str, tuple[int, str]] = {}
        wanted = None if ids is None else frozenset(ids)
        if ds is not None and ds.import_batch_id is None:
            stored_rows = select(_SAMPLES.c.external_id, _SAMPLES.c.id, _SAMPLES.c.content_hash) \
                .where(_SAMPLES.c.dataset_id == ds.id)
            if wanted is None:  # one scan of the dataset
                existing = {ext: (pk, digest) for ext, pk, digest in session.execute(stored_rows)}
            else:
                for part in _in_parts(sorted(wanted)):
                    existing.update({ext: (pk, digest) for ext, pk, digest in
                                     session.execute(stored_rows.where(_SAMPLES.c.external_id.in_(part)))})
        writes.end_read(session)  # pass 1 reads the file, not the database: hold no snapshot meanwhile
        try:
            for record in records():
                count += not record.whole_file
                tick()
                if record.problem is not None:
                    problems.add_problem(record.problem)
                    continue
                check = RecordCheck(record.line, cells=cells, problems=problems, limit=max_field_chars)
                norm = normalise_sample(record.fields, check)
                if norm is None:
                    continue
                digest = hash_checked(norm, check)
                if digest is None:
                    continue
                external_id = norm["id"]
                if wanted is not None and external_id not in wanted:
                    check.bad("id", f"{_short(external_id)} is not one of the ids the import was given")
                    continue
                first = seen.get(external_id)
                if first is not None:
                    check.bad("id", f"duplicate id {external_id!r}: line {first[1]} has it too")
                    continue
                seen[external_id] = (digest, record.line)
                stored = existing.get(external_id)
                if stored is None:
                    added += 1
                elif stored[1] != digest:
                    if not update:
                        fields = _diff(_stored_records(session, [stored[0]])[stored[0]], norm)
                        writes.end_read(session)
                        if not fields:
                            # Written differently, same content (an exported file: claims with their spans and
                            # source): nothing to import.
                            seen[external_id] = (stored[1], record.line)
                            continue
                        check.bad("id", f"sample {external_id!r} changed since it was imported ({', '.join(fields)}); "
                                        "use --update to replace it")
                        continue
                    changed += 1
        except TooManyProblems:
            pass
    tick.flush()
    if problems:
        raise problems.rejected(count)
    unchanged = len(seen) - added - changed
    if not added and not changed:
        return ImportSummary("samples", dataset, 0, 0, unchanged)

    # Pass 2: write in chunks into the batch's hidden dataset; then publish. The records are those
    # pass 1 validated and hashed, unless the file changed.
    batch = writes.open_batch("samples", dataset, Path(source).name)
    try:
        with writes.chunk() as session:
            staging = hidden_dataset(session, batch, dataset, source=Path(source).name, description=description)
            staging_id = staging.id
        stager = _SampleStager(writes, staging_id, batch.id)
        quiet = Problems(1)
        for record in records():
            tick()
            norm = None
            if record.fields is not None:
                try:
                    norm = normalise_sample(record.fields, RecordCheck(record.line, cells=cells, problems=quiet,
                                                                       limit=max_field_chars))
                except TooManyProblems:
                    pass
            first = seen.get(norm["id"]) if norm is not None else None
            if first is None or first[1] != record.line:
                raise reject("the file changed while it was being imported: import it again", line=record.line)
            stored = existing.get(norm["id"])
            if stored is None:
                stager.add(norm, first[0])
            elif stored[1] != first[0]:
                stager.replace(stored[0], norm, first[0])
        if _fingerprint(source) != fingerprint:
            raise reject("the file changed while it was being imported: import it again")
        stager.flush()
        with writes.publish() as session:
            flagged = publish_samples(session, batch.id, staging_id, dataset)
    except BaseException:
        writes.abandon()
        raise
    writes.finish()
    tick.flush()
    return ImportSummary("samples", dataset, added, changed, unchanged, flagged=flagged)


def _stored_records(session: Session, pks: list[int]) -> dict[int, dict[str, Any]]:
    """Return the stored samples in normalised form, with their active context and claim rows."""
    out: dict[int, dict[str, Any]] = {}
    for row in session.execute(select(_SAMPLES).where(_SAMPLES.c.id.in_(pks))).mappings():
        out[row["id"]] = {
            "id": row["external_id"], "question": row["question"], "answer": row["answer"],
            "ground_truth": row["ground_truth"], "metadata": row["metadata"], "feedback": row["feedback"],
            "retrieved_ids": row["retrieved_ids"], "relevant_ids": row["relevant_ids"],
            "segmenter": row["segmenter"], "claim_source": row["claim_source"], "context_rows": [], "claim_rows": [],
        }
    for row in session.execute(select(_CONTEXTS.c.id, _CONTEXTS.c.sample_id, _CONTEXTS.c.rank, _CONTEXTS.c.text,
                                      _CONTEXTS.c.doc_id)
                               .where(_CONTEXTS.c.sample_id.in_(pks), _CONTEXTS.c.active.is_(True))
                               .order_by(_CONTEXTS.c.sample_id, _CONTEXTS.c.rank)):
        out[row.sample_id]["context_rows"].append(row)
    for row in session.execute(select(_CLAIMS.c.id, _CLAIMS.c.sample_id, _CLAIMS.c.index, _CLAIMS.c.text,
                                      _CLAIMS.c.start, _CLAIMS.c.end)
                               .where(_CLAIMS.c.sample_id.in_(pks), _CLAIMS.c.active.is_(True))
                               .order_by(_CLAIMS.c.sample_id, _CLAIMS.c.index)):
        out[row.sample_id]["claim_rows"].append(row)
    for row in session.execute(select(_RESPONSES.c.sample_id, _RESPONSES.c.key, _RESPONSES.c.text, _RESPONSES.c.model,
                                      _RESPONSES.c.metadata)
                               .where(_RESPONSES.c.sample_id.in_(pks)).order_by(_RESPONSES.c.sample_id, _RESPONSES.c.position)):
        out[row.sample_id].setdefault("responses", []).append(response_record(row.key, row.text, row.model, row.metadata))
    for stored in out.values():
        stored["contexts"] = [[row.text, row.doc_id] for row in stored["context_rows"]]
        stored["claims"] = [row.text for row in stored["claim_rows"]] if stored["segmenter"] == GIVEN else None
    return out


def response_record(key: str, text: str, model: str | None, metadata: dict | None) -> dict[str, Any]:
    """Return a stored response in the import's form ({id, text, model, metadata}: what `responses` holds)."""
    return {"id": key, "text": text, "model": model or None, "metadata": metadata}


def _diff(stored: dict[str, Any], norm: dict[str, Any]) -> list[str]:
    changed = [name for name in SAMPLE_FIELDS if name not in ("id", "claims", "claim_source")
               and stored.get(name) != norm.get(name)]
    claims = norm["claims"]
    if claims and isinstance(claims[0], dict):
        old = [{"text": row.text, "start": row.start, "end": row.end} for row in stored["claim_rows"]]
    else:
        old = stored["claims"]
    if old != claims:
        changed.append("claims")
    if "claim_source" in norm and norm["claim_source"] != stored["claim_source"]:
        changed.append("claim_source")
    return changed


class _SampleStager:
    """Write a samples batch chunk by chunk: new samples into the hidden dataset, replacements as steps.

    The work of a chunk that needs no lock (segmenting answers, comparing a changed sample with
    the stored one) is done before its write transaction; inside it are the INSERTs.
    """

    def __init__(self, writes: Writes, staging_id: int, batch_id: int) -> None:
        self.writes = writes
        self.staging_id = staging_id
        self.batch_id = batch_id
        self.now = utcnow()
        with writes.read() as session:  # the driver's form of JSON values, as SQLAlchemy stores them
            self.json = BulkInsert(session, _SAMPLES, _SAMPLE_COLUMNS).bind("metadata")
        self.null = self.json(None)
        # New samples wait as tuples of plain values: a chunk's thousand records held as dicts and
        # lists would keep the garbage collector busy (measured: a fifth of the import's time).
        self.new: list[tuple] = []
        self.replacements: list[tuple[int, dict[str, Any], str]] = []

    def add(self, norm: dict[str, Any], digest: str) -> None:
        """Queue a new sample (written with the chunk it falls in); its answer is segmented now, outside any transaction."""
        spans, segmenter, source = claim_spans(norm)
        origin = claim_origin(source)
        self.new.append((self._fields(norm, digest, segmenter, source),
                         tuple((text, doc_id) for text, doc_id in norm["contexts"]),
                         tuple((span.text, span.start, span.end, origin) for span in spans),
                         self._responses(norm)))
        self._maybe_write()

    def _responses(self, norm: dict[str, Any]) -> tuple:
        """Return a pairwise sample's responses as (position, key, text, model, metadata) rows (none for another sample)."""
        json_value, null = self.json, self.null
        return tuple((position, r["id"], r["text"], r["model"] or "", null if r["metadata"] is None else json_value(r["metadata"]))
                     for position, r in enumerate(norm.get("responses") or []))

    def _fields(self, norm: dict[str, Any], digest: str, segmenter: str, source: str) -> tuple:
        """Return a sample's columns from external_id to content_sha256, as the driver takes them."""
        json_value, null = self.json, self.null
        retrieved, relevant = norm["retrieved_ids"], norm["relevant_ids"]
        return (norm["id"], norm["question"], norm["answer"], norm["ground_truth"], json_value(norm["metadata"]),
                norm["feedback"], null if retrieved is None else json_value(retrieved),
                null if relevant is None else json_value(relevant), digest, segmenter, source,
                content_digest(norm["metadata"]))

    def replace(self, pk: int, norm: dict[str, Any], digest: str) -> None:
        """Queue the replacement of a stored sample."""
        self.replacements.append((pk, norm, digest))
        self._maybe_write()

    def _maybe_write(self) -> None:
        if len(self.new) + len(self.replacements) >= self.writes.chunk_size:
            self.flush()

    def flush(self) -> None:
        """Write what is queued, as one chunk."""
        if not self.new and not self.replacements:
            return
        new, self.new = self.new, []
        plans: list[_Plan] = []
        if self.replacements:
            batch, self.replacements = self.replacements, []
            with self.writes.read() as session:
                stored_by_pk = _stored_records(session, [pk for pk, _, _ in batch])
            plans = [_plan(pk, norm, digest, stored_by_pk[pk]) for pk, norm, digest in batch]
            for plan in plans:
                if plan.responses is not None:
                    plan.responses = self._responses(plan.norm)
        with self.writes.chunk() as session:
            self._write(session, new, plans)

    def _write(self, session: Session, new: list[tuple], plans: list[_Plan]) -> None:
        samples = BulkInsert(session, _SAMPLES, _SAMPLE_COLUMNS)
        contexts = BulkInsert(session, _CONTEXTS, ("id", "sample_id", "rank", "text", "doc_id", "active"))
        claims = BulkInsert(session, _CLAIMS, ("id", "sample_id", "index", "text", "start", "end", "active", "origin"))
        responses = BulkInsert(session, _RESPONSES, ("sample_id", "position", "key", "text", "model", "metadata"))
        stamp = samples.bind("created_at")(self.now)
        active, inactive = contexts.bind("active")(True), contexts.bind("active")(False)
        next_sample = first_free_id(session, _SAMPLES)
        next_context, next_claim = first_free_id(session, _CONTEXTS), first_free_id(session, _CLAIMS)
        staging = self.staging_id
        for fields, context_rows, claim_rows, response_rows in new:
            sample_id, next_sample = next_sample, next_sample + 1
            responses.extend([(sample_id, *row) for row in response_rows])
            samples.add((sample_id, staging, *fields, None, stamp, stamp))
            contexts.extend([(next_context + rank, sample_id, rank, text, doc_id, active)
                             for rank, (text, doc_id) in enumerate(context_rows)])
            next_context += len(context_rows)
            claims.extend([(next_claim + index, sample_id, index, text, start, end, active, origin)
                           for index, (text, start, end, origin) in enumerate(claim_rows)])
            next_claim += len(claim_rows)
        steps: list[dict[str, Any]] = []
        for plan in plans:
            # The new fields wait in a hidden copy; new rows are written inactive; the rest are steps.
            copy_id, next_sample = next_sample, next_sample + 1
            samples.add((copy_id, staging, *self._fields(plan.norm, plan.digest, plan.segmenter, plan.source), None, stamp,
                         stamp))
            steps.append(self._step("sample", plan.pk, other_id=copy_id, key=target_key("sample", plan.pk),
                                    note=plan.stale_reason, data={"responses": True} if plan.responses is not None else None))
            if plan.responses is not None:  # replaced whole at the publish: the new ones wait on the copy
                responses.extend([(copy_id, *row) for row in plan.responses])
            for rank, text, doc_id in plan.new_contexts:
                contexts.add((next_context, plan.pk, rank, text, doc_id, inactive))
                steps.append(self._step("activate", next_context, target="context"))
                next_context += 1
            for index, text, start, end in plan.new_claims:
                claims.add((next_claim, plan.pk, index, text, start, end, inactive, claim_origin(plan.source)))
                steps.append(self._step("activate", next_claim, target="claim"))
                next_claim += 1
            steps += [self._step("retire", row_id, target=target, note=reason) for target, row_id, reason in plan.retired]
            steps += [self._step("keep", row_id, target=target, data=data) for target, row_id, data in plan.kept]
        # Parents first: the foreign keys are checked row by row.
        samples.flush()
        contexts.flush()
        claims.flush()
        responses.flush()
        for table in (_SAMPLES, _CONTEXTS, _CLAIMS, _RESPONSES):
            sync_id_sequence(session, table)
        if steps:
            session.execute(insert(_STEPS), steps)

    def _step(self, action: str, row_id: int, *, target: str = "", other_id: int | None = None, key: str = "",
              note: str = "", data: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"batch_id": self.batch_id, "action": action, "target": target, "row_id": row_id, "other_id": other_id,
                "key": key, "note": note[:500], "data": data}


@dataclass
class _Plan:
    """What replacing one stored sample changes, computed before the chunk's write transaction."""

    pk: int
    norm: dict[str, Any]
    digest: str
    segmenter: str
    source: str  # Sample.claim_source after the replacement
    stale_reason: str  # for the sample's own labels ("" when they stay valid)
    new_contexts: list[tuple[int, str, str | None]] = field(default_factory=list)
    new_claims: list[tuple[int, str, int, int]] = field(default_factory=list)
    retired: list[tuple[str, int, str]] = field(default_factory=list)  # (context|claim, row id, why its labels go stale)
    kept: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)  # (context|claim, row id, new doc_id or span)
    responses: tuple | None = None  # the new responses when they changed (they replace the stored ones whole)


def _plan(pk: int, norm: dict[str, Any], digest: str, stored: dict[str, Any]) -> _Plan:
    """Match a replacement's contexts and claims with the stored ones by rank/index and text (see the module's docstring)."""
    spans, segmenter, source = claim_spans(norm)
    if norm["claims"] is None and "claim_source" not in norm and norm["answer"] == stored["answer"] \
            and claim_origin(stored["claim_source"]) not in (SEGMENTER, IMPORT):
        # An extraction's or an expert's claims of an unchanged answer stay: the file says nothing new.
        spans = [ClaimSpan(row.text, row.start, row.end) for row in stored["claim_rows"]]
        segmenter, source = stored["segmenter"], stored["claim_source"]
    name = _short(norm["id"])
    changed = _diff(stored, norm)
    judged = [name_ for name_ in changed if name_ in SAMPLE_LABEL_FIELDS]
    plan = _Plan(pk, norm, digest, segmenter, source,
                 f"sample {name} changed in an --update import ({', '.join(judged)})" if judged else "",
                 responses=() if "responses" in changed else None)
    old_contexts = {row.rank: row for row in stored["context_rows"]}
    for rank, (text, doc_id) in enumerate(norm["contexts"]):
        old = old_contexts.pop(rank, None)
        if old is not None and old.text == text:
            if old.doc_id != doc_id:
                plan.kept.append(("context", old.id, {"doc_id": doc_id}))
            continue
        if old is not None:
            plan.retired.append(("context", old.id, f"context at rank {rank} of sample {name} changed in an --update import"))
        plan.new_contexts.append((rank, text, doc_id))
    for rank, old in old_contexts.items():
        plan.retired.append(("context", old.id, f"context at rank {rank} of sample {name} was removed by an --update import"))
    # Claims: the same by index and text; a kept claim's span follows the new answer.
    old_claims = {row.index: row for row in stored["claim_rows"]}
    for index, span in enumerate(spans):
        old = old_claims.pop(index, None)
        if old is not None and old.text == span.text:
            if (old.start, old.end) != (span.start, span.end):
                plan.kept.append(("claim", old.id, {"start": span.start, "end": span.end}))
            continue
        if old is not None:
            plan.retired.append(("claim", old.id, f"claim {index} of sample {name} changed in an --update import"))
        plan.new_claims.append((index, span.text, span.start, span.end))
    for index, old in old_claims.items():
        plan.retired.append(("claim", old.id, f"claim {index} of sample {name} was removed by an --update import"))
    return plan


# --------------------------------------------------------------------------- publishing


def publish_samples(session: Session, batch_id: int, staging_id: int, dataset: str) -> int:
    """Make a samples batch visible in one transaction; return how many labels went stale.

    A new dataset is unhidden; into an existing one the staged samples move (one UPDATE).
    An --update's steps are applied: fields copied from the hidden copies, old rows retired and
    new ones activated, kept rows' doc_id and spans updated, labels on what changed flagged.
    """
    now = utcnow()
    steps = session.exec(select(ImportStep).where(ImportStep.batch_id == batch_id)).scalars().all()
    copies = {step.row_id: step for step in steps if step.action == "sample"}
    copy_ids = [step.other_id for step in copies.values()]
    staging = session.get(Dataset, staging_id)
    if staging.name == dataset:
        session.execute(update(Dataset).where(Dataset.id == staging_id).values(import_batch_id=None))
    else:
        real = session.scalars(select(Dataset).where(Dataset.name == dataset, Dataset.import_batch_id.is_(None))).one()
        moving = update(_SAMPLES).where(_SAMPLES.c.dataset_id == staging_id).values(dataset_id=real.id)
        session.execute(moving.where(_SAMPLES.c.id.not_in(copy_ids)) if copy_ids else moving)
    flagged = 0
    if copies:
        fields = ("question", "answer", "ground_truth", "metadata", "feedback", "retrieved_ids", "relevant_ids",
                  "content_hash", "segmenter", "claim_source", "content_sha256")
        updates = []
        for part in _in_parts(copy_ids):
            for row in session.execute(select(_SAMPLES).where(_SAMPLES.c.id.in_(part))).mappings():
                updates.append({"b_id": row["id"], **{name: row[name] for name in fields}, "updated_at": now})
        by_copy = {step.other_id: pk for pk, step in copies.items()}
        for row in updates:
            row["b_id"] = by_copy[row["b_id"]]
        session.execute(update(_SAMPLES).where(_SAMPLES.c.id == bindparam("b_id")), updates)
        # Responses are replaced whole (labels and verdicts name them by id, never by row): the
        # stored ones go, the copy's move over.
        replaced = [(pk, step.other_id) for pk, step in copies.items() if (step.data or {}).get("responses")]
        for part in _in_parts([pk for pk, _ in replaced]):
            session.execute(delete(_RESPONSES).where(_RESPONSES.c.sample_id.in_(part)))
        if replaced:
            session.execute(update(_RESPONSES).where(_RESPONSES.c.sample_id == bindparam("b_copy")).values(sample_id=bindparam("b_pk")),
                            [{"b_copy": copy, "b_pk": pk} for pk, copy in replaced])
        for target, table in (("context", _CONTEXTS), ("claim", _CLAIMS)):
            retired = [step.row_id for step in steps if step.action == "retire" and step.target == target]
            activated = [step.row_id for step in steps if step.action == "activate" and step.target == target]
            for part in _in_parts(retired):
                session.execute(update(table).where(table.c.id.in_(part)).values(active=False))
            for part in _in_parts(activated):
                session.execute(update(table).where(table.c.id.in_(part)).values(active=True))
            kept = [{"b_id": step.row_id, **step.data} for step in steps if step.action == "keep" and step.target == target]
            for columns in {tuple(sorted(row)) for row in kept}:
                rows = [row for row in kept if tuple(sorted(row)) == columns]
                session.execute(update(table).where(table.c.id == bindparam("b_id")), rows)
        flagged = _flag(session, now,
                        {step.row_id: step.note for step in steps if step.action == "retire" and step.target == "context"},
                        {step.row_id: step.note for step in steps if step.action == "retire" and step.target == "claim"},
                        {step.key: step.note for step in copies.values() if step.note})
        for part in _in_parts(copy_ids):
            session.execute(delete(_SAMPLES).where(_SAMPLES.c.id.in_(part)))
    if staging.name != dataset:
        session.execute(delete(Dataset).where(Dataset.id == staging_id))
    session.execute(update(ImportBatch).where(ImportBatch.id == batch_id).values(state="published"))
    return flagged


def _in_parts(ids: list[Any], size: int = 500) -> Iterator[list[Any]]:
    for start in range(0, len(ids), size):
        yield ids[start:start + size]


def _flag(session: Session, now: Any, contexts: dict[int, str], claims: dict[int, str], samples: dict[str, str]) -> int:
    """Mark the labels on retired targets (and on changed samples) stale, with a revision each; return how many."""
    conditions = []
    if contexts:
        conditions.append(_LABELS.c.context_id.in_(list(contexts)))
    if claims:
        conditions.append(_LABELS.c.claim_id.in_(list(claims)))
    if samples:
        conditions.append(_LABELS.c.target_key.in_(list(samples)))
    if not conditions:
        return 0
    rows = session.execute(
        select(_LABELS.c.id, _LABELS.c.value, _LABELS.c.rationale, _LABELS.c.claim_id, _LABELS.c.context_id,
               _LABELS.c.target_key)
        .where(_LABELS.c.stale.is_(False), or_(*conditions))
    ).all()
    flags, revisions = [], []
    for row in rows:
        if row.claim_id is not None:
            reason = claims.get(row.claim_id)
        elif row.context_id is not None:
            reason = contexts.get(row.context_id)
        else:
            reason = samples.get(row.target_key)
        if reason is None:
            continue
        flags.append({"b_id": row.id, "stale": True, "stale_reason": reason[:500]})
        revisions.append({"label_id": row.id, "action": "stale", "value": row.value, "rationale": row.rationale,
                          "changed_by_id": None, "changed_at": now})
    if flags:
        session.execute(update(_LABELS).where(_LABELS.c.id == bindparam("b_id")), flags)
        session.execute(insert(_REVISIONS), revisions)
    return len(flags)


def _short(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")
