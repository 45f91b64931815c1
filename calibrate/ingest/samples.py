"""Import samples (question, answer, contexts, claims) into a dataset, all or nothing.

Two streaming passes over the file. The first validates every record and keeps only
id → (content hash, line), so duplicates and changed samples are found without holding the
records; the second re-reads the file and writes the new and updated samples in batches
(`BulkInsert`; sample ids preallocated from max(id) + 1 (`first_free_id`), safe because the caller's transaction
holds SQLite's write lock). A file with any problem raises ImportRejected before anything is
written; re-importing a file whose samples are all known and unchanged skips the second pass
and writes nothing.

`--update` replaces a changed sample's fields; its contexts and claims are matched to the
stored ones by rank/index and text: unchanged rows stay (labels on them stay valid), changed
or dropped ones are retired (`active=False`) and new rows added. Labels on retired rows, and
the sample's own labels when its question, answer, ground truth or contexts changed, are
kept and flagged stale with a LabelRevision("stale"). A record without `claims` whose answer
is unchanged keeps claims an LLM extraction or an expert made (claim source `NAME@V`, or
`…+edited`): only a new answer, or claims given in the file, replace them.

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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, delete, insert, or_, select, update
from sqlmodel import Session

from calibrate.ingest.bulk import BulkInsert, first_free_id, sync_id_sequence
from calibrate.ingest.claims import ClaimSpan, SentenceSegmenter, locate_claims, segment
from calibrate.ingest.fields import MAX_ID_CHARS, RecordCheck, invalid, kind_of, plain_text
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
    Label,
    LabelRevision,
    Response,
    Sample,
    target_key,
    utcnow,
)

SAMPLE_FIELDS = ("id", "question", "answer", "contexts", "ground_truth", "claims", "claim_source", "metadata", "feedback",
                 "retrieved_ids", "relevant_ids", "responses")
MAX_SOURCE_CHARS = 250
RAGAS_ALIASES = {"user_input": "question", "response": "answer", "retrieved_contexts": "contexts", "reference": "ground_truth"}
REQUIRED = ("id", "question", "answer", "contexts")
PAIRWISE_OPTIONAL = ("answer", "contexts")  # a sample with responses may leave these out
_KNOWN = frozenset(SAMPLE_FIELDS)
GIVEN = "given"  # Sample.segmenter of a sample whose claims came with it
BATCH = 2000  # samples per bulk insert (about 12 rows each with contexts and claims)
UPDATE_BATCH = 500
# A sample label judged the whole sample: it is stale when one of these changed.
SAMPLE_LABEL_FIELDS = ("question", "answer", "ground_truth", "contexts", "responses")

_SAMPLES, _CONTEXTS, _CLAIMS, _RESPONSES = Sample.__table__, Context.__table__, Claim.__table__, Response.__table__
_LABELS, _REVISIONS = Label.__table__, LabelRevision.__table__
_SAMPLE_COLUMNS = ("id", "dataset_id", "external_id", "question", "answer", "ground_truth", "metadata", "feedback",
                   "retrieved_ids", "relevant_ids", "content_hash", "segmenter", "claim_source", "split", "created_at",
                   "updated_at")


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


def import_samples(session: Session, source: str | Path, fmt: str, *, dataset: str, update: bool = False,
                   description: str = "", progress: Callable[[int], object] | None = None,
                   max_errors: int = 50, max_field_chars: int = 1_000_000) -> ImportSummary:
    """Validate then write the samples of a file into `dataset` (created if missing)."""
    if not dataset.strip() or len(dataset) > 200:
        raise reject("the dataset name must be 1 to 200 characters", field="dataset")
    ds = session.scalars(select(Dataset).where(Dataset.name == dataset)).first()
    existing: dict[str, tuple[int, str]] = {}
    if ds is not None:
        rows = session.execute(select(_SAMPLES.c.external_id, _SAMPLES.c.id, _SAMPLES.c.content_hash)
                               .where(_SAMPLES.c.dataset_id == ds.id))
        existing = {ext: (pk, digest) for ext, pk, digest in rows}
    cells = fmt == "csv"
    fingerprint = _fingerprint(source)

    def records() -> Iterator[Record]:
        return read_records(source, fmt, header_check=check_samples_header if cells else None)

    # Pass 1: validate, keeping id -> (hash, line) only.
    problems = Problems(max_errors)
    seen: dict[str, tuple[str, int | None]] = {}
    added = changed = count = 0
    tick = Progress(progress)
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

    # Pass 2: write. The records are those pass 1 validated and hashed, unless the file changed.
    if ds is None:
        ds = Dataset(name=dataset, source=Path(source).name, description=description)
        session.add(ds)
        session.flush()
    writer = _SampleWriter(session, ds.id)
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
            writer.add(norm, first[0])
        elif stored[1] != first[0]:
            writer.replace(stored[0], norm, first[0])
    if _fingerprint(source) != fingerprint:
        raise reject("the file changed while it was being imported: import it again")
    writer.flush()
    tick.flush()
    return ImportSummary("samples", dataset, added, changed, unchanged, flagged=writer.flagged)


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


class _SampleWriter:
    """Bulk-insert new samples and replace changed ones, in batches."""

    def __init__(self, session: Session, dataset_id: int) -> None:
        self.session = session
        self.dataset_id = dataset_id
        self.now = utcnow()
        self.next_id = first_free_id(session, _SAMPLES)
        self.samples = BulkInsert(session, _SAMPLES, _SAMPLE_COLUMNS)
        self.contexts = BulkInsert(session, _CONTEXTS, ("sample_id", "rank", "text", "doc_id", "active"))
        self.claims = BulkInsert(session, _CLAIMS, ("sample_id", "index", "text", "start", "end", "active", "origin"))
        self.responses = BulkInsert(session, _RESPONSES, ("sample_id", "position", "key", "text", "model", "metadata"))
        self.json = self.samples.bind("metadata")
        self.null = self.json(None)  # what SQLAlchemy stores for None in a JSON column
        self.stamp = self.samples.bind("created_at")(self.now)
        self.active = self.contexts.bind("active")(True)
        self.replacements: list[tuple[int, dict[str, Any], str]] = []
        self.flagged = 0

    def add(self, norm: dict[str, Any], digest: str) -> None:
        """Queue a new sample with its contexts and claims."""
        sample_id = self.next_id
        self.next_id += 1
        spans, segmenter, source = claim_spans(norm)
        origin = claim_origin(source)
        json_value, null, active = self.json, self.null, self.active
        retrieved, relevant = norm["retrieved_ids"], norm["relevant_ids"]
        self.samples.add((
            sample_id, self.dataset_id, norm["id"], norm["question"], norm["answer"], norm["ground_truth"],
            json_value(norm["metadata"]), norm["feedback"], null if retrieved is None else json_value(retrieved),
            null if relevant is None else json_value(relevant), digest, segmenter, source, None, self.stamp, self.stamp,
        ))
        self.contexts.extend([(sample_id, rank, text, doc_id, active)
                              for rank, (text, doc_id) in enumerate(norm["contexts"])])
        self.claims.extend([(sample_id, index, span.text, span.start, span.end, active, origin)
                            for index, span in enumerate(spans)])
        self._add_responses(sample_id, norm)
        if len(self.samples) >= BATCH:
            self._insert()

    def replace(self, pk: int, norm: dict[str, Any], digest: str) -> None:
        """Queue the update of a stored sample."""
        self.replacements.append((pk, norm, digest))
        if len(self.replacements) >= UPDATE_BATCH:
            self._replace()

    def flush(self) -> None:
        """Write everything queued."""
        self._insert()
        self._replace()

    def _insert(self) -> None:
        # Parents first: the foreign keys are checked row by row.
        self.samples.flush()
        sync_id_sequence(self.session, _SAMPLES)
        self.contexts.flush()
        self.claims.flush()
        self.responses.flush()

    def _add_responses(self, sample_id: int, norm: dict[str, Any]) -> None:
        responses = norm.get("responses") or []
        json_value, null = self.json, self.null
        self.responses.extend([(sample_id, position, r["id"], r["text"], r["model"] or "",
                                null if r["metadata"] is None else json_value(r["metadata"]))
                               for position, r in enumerate(responses)])

    def _replace(self) -> None:
        if not self.replacements:
            return
        batch, self.replacements = self.replacements, []
        stored_by_pk = _stored_records(self.session, [pk for pk, _, _ in batch])
        sample_updates, context_doc_ids, claim_spans_kept = [], [], []
        retired_contexts: dict[int, str] = {}
        retired_claims: dict[int, str] = {}
        stale_samples: dict[str, str] = {}
        new_responses: list[int] = []
        for pk, norm, digest in batch:
            stored = stored_by_pk[pk]
            spans, segmenter, source = claim_spans(norm)
            if norm["claims"] is None and "claim_source" not in norm and norm["answer"] == stored["answer"] \
                    and claim_origin(stored["claim_source"]) not in (SEGMENTER, IMPORT):
                # An extraction's or an expert's claims of an unchanged answer stay: the file says nothing new.
                spans = [ClaimSpan(row.text, row.start, row.end) for row in stored["claim_rows"]]
                segmenter, source = stored["segmenter"], stored["claim_source"]
            origin = claim_origin(source)
            sample_updates.append({
                "b_id": pk, "question": norm["question"], "answer": norm["answer"],
                "ground_truth": norm["ground_truth"], "metadata": norm["metadata"], "feedback": norm["feedback"],
                "retrieved_ids": norm["retrieved_ids"], "relevant_ids": norm["relevant_ids"],
                "content_hash": digest, "segmenter": segmenter, "claim_source": source, "updated_at": self.now,
            })
            name = _short(norm["id"])
            changed = _diff(stored, norm)
            judged = [field for field in changed if field in SAMPLE_LABEL_FIELDS]
            if judged:
                stale_samples[target_key("sample", pk)] = f"sample {name} changed in an --update import ({', '.join(judged)})"
            # Contexts: keep a row whose rank and text are unchanged, retire the rest.
            old_contexts = {row.rank: row for row in stored["context_rows"]}
            for rank, (text, doc_id) in enumerate(norm["contexts"]):
                old = old_contexts.pop(rank, None)
                if old is not None and old.text == text:
                    if old.doc_id != doc_id:
                        context_doc_ids.append({"b_id": old.id, "doc_id": doc_id})
                    continue
                if old is not None:
                    retired_contexts[old.id] = f"context at rank {rank} of sample {name} changed in an --update import"
                self.contexts.add((pk, rank, text, doc_id, self.active))
            for rank, old in old_contexts.items():
                retired_contexts[old.id] = f"context at rank {rank} of sample {name} was removed by an --update import"
            # Claims: the same by index and text; a kept claim's span follows the new answer.
            old_claims = {row.index: row for row in stored["claim_rows"]}
            for index, span in enumerate(spans):
                old = old_claims.pop(index, None)
                if old is not None and old.text == span.text:
                    if (old.start, old.end) != (span.start, span.end):
                        claim_spans_kept.append({"b_id": old.id, "start": span.start, "end": span.end})
                    continue
                if old is not None:
                    retired_claims[old.id] = f"claim {index} of sample {name} changed in an --update import"
                self.claims.add((pk, index, span.text, span.start, span.end, self.active, origin))
            for index, old in old_claims.items():
                retired_claims[old.id] = f"claim {index} of sample {name} was removed by an --update import"
            if "responses" in changed:
                new_responses.append(pk)
                self._add_responses(pk, norm)
        execute = self.session.execute
        execute(update(_SAMPLES).where(_SAMPLES.c.id == bindparam("b_id")), sample_updates)
        if context_doc_ids:
            execute(update(_CONTEXTS).where(_CONTEXTS.c.id == bindparam("b_id")), context_doc_ids)
        if claim_spans_kept:
            execute(update(_CLAIMS).where(_CLAIMS.c.id == bindparam("b_id")), claim_spans_kept)
        if retired_contexts:
            execute(update(_CONTEXTS).where(_CONTEXTS.c.id.in_(list(retired_contexts))).values(active=False))
        if retired_claims:
            execute(update(_CLAIMS).where(_CLAIMS.c.id.in_(list(retired_claims))).values(active=False))
        if new_responses:  # replaced whole: labels and verdicts name responses by id, never by row
            execute(delete(_RESPONSES).where(_RESPONSES.c.sample_id.in_(new_responses)))
        self._insert()
        self._flag(retired_contexts, retired_claims, stale_samples)

    def _flag(self, contexts: dict[int, str], claims: dict[int, str], samples: dict[str, str]) -> None:
        """Mark the labels on retired targets (and on changed samples) stale, with a revision each."""
        conditions = []
        if contexts:
            conditions.append(_LABELS.c.context_id.in_(list(contexts)))
        if claims:
            conditions.append(_LABELS.c.claim_id.in_(list(claims)))
        if samples:
            conditions.append(_LABELS.c.target_key.in_(list(samples)))
        if not conditions:
            return
        rows = self.session.execute(
            select(_LABELS.c.id, _LABELS.c.value, _LABELS.c.rationale, _LABELS.c.claim_id, _LABELS.c.context_id,
                   _LABELS.c.target_key)
            .where(_LABELS.c.stale.is_(False), or_(*conditions))
        ).all()
        if not rows:
            return
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
                              "changed_by_id": None, "changed_at": self.now})
        if flags:
            self.session.execute(update(_LABELS).where(_LABELS.c.id == bindparam("b_id")), flags)
            self.session.execute(insert(_REVISIONS), revisions)
        self.flagged += len(flags)


def _short(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")
