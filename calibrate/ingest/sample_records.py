"""A samples file's records, validated: the header, each record in canonical form, its content hash.

The validating half of the samples import (ingest/samples.py writes, ingest/sample_updates.py
replaces stored samples): `normalise_sample` turns one record into the canonical form that is
hashed (`hash_checked`: the sha256 of `canonical_json`), filing every problem with its line and
field; the traces import maps traces through the same function. `claim_spans` says which claims a
record makes and by which method. Formats and rules: docs/formats.md, "Samples".
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from calibrate.bounds import metadata_problems
from calibrate.ingest.fields import MAX_ID_CHARS, RecordCheck, invalid, kind_of, plain_text
from calibrate.ingest.responses import check_response_columns, has_response_fields, response_column, responses_of
from calibrate.ingest.step_records import FIELD as STEPS
from calibrate.ingest.step_records import StepsInvalid, check_steps
from calibrate.models import EDITED, IMPORT, SEGMENTER
from calibrate.text.sentences import ClaimSpan, SentenceSegmenter, locate_claims, segment

SAMPLE_FIELDS = ("id", "question", "answer", "contexts", "ground_truth", "claims", "claim_source", "metadata", "feedback",
                 "retrieved_ids", "relevant_ids", "responses", "steps")
MAX_SOURCE_CHARS = 250
RAGAS_ALIASES = {"user_input": "question", "response": "answer", "retrieved_contexts": "contexts", "reference": "ground_truth"}
REQUIRED = ("id", "question", "answer", "contexts")
PAIRWISE_OPTIONAL = ("answer", "contexts")  # a sample with responses may leave these out
_KNOWN = frozenset(SAMPLE_FIELDS)
GIVEN = "given"  # Sample.segmenter of a sample whose claims came with it


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
    steps = _steps(data, check)
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
    if steps:  # and without steps (or with none: [] is no trajectory)
        record["steps"] = steps
    return record


def _steps(data: dict[str, Any], check: RecordCheck) -> list[dict[str, Any]] | None:
    """Return an agent's trajectory in canonical form (ingest/step_records.py), counting what its bounds cut on `check`."""
    value = check.structured(data, STEPS, "a list of step objects")
    if value is None or invalid(value):
        return None
    try:
        checked = check_steps(value)
    except StepsInvalid as exc:
        check.bad(exc.field, exc.message)
        return None
    check.cuts["steps_cut"] = check.cuts.get("steps_cut", 0) + checked.steps_cut
    check.cuts["step_texts_cut"] = check.cuts.get("step_texts_cut", 0) + checked.texts_cut
    return checked.steps

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
    for name, problem in metadata_problems(value):  # what the production estimates read (calibrate.bounds)
        check.bad(name, problem)
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


def response_record(key: str, text: str, model: str | None, metadata: dict | None) -> dict[str, Any]:
    """Return a stored response in the import's form ({id, text, model, metadata}: what `responses` holds)."""
    return {"id": key, "text": text, "model": model or None, "metadata": metadata}


def short_id(text: str, limit: int = 80) -> str:
    """Return an id as a message quotes it, cut at `limit` characters."""
    return repr(text if len(text) <= limit else text[:limit] + "…")
