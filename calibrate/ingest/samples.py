"""Import samples (question, answer, contexts, claims) into a dataset, all or nothing.

Three modules, one import: ingest/sample_records.py validates a record (its canonical form and
content hash), this module runs the import and writes it, ingest/sample_updates.py plans and
publishes what an `--update` changes in stored samples.

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

from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select
from sqlmodel import Session

from calibrate.ingest.batches import Writes, hidden_dataset
from calibrate.ingest.bulk import BulkInsert, first_free_id, in_parts, sync_id_sequence
from calibrate.ingest.fields import RecordCheck, check_dataset_name
from calibrate.ingest.problems import ImportSummary, Problems, TooManyProblems, reject
from calibrate.ingest.readers import Progress, Record, read_records
from calibrate.ingest.sample_records import (
    check_samples_header,
    claim_origin,
    claim_spans,
    content_digest,
    hash_checked,
    normalise_sample,
    short_id,
)
from calibrate.ingest.sample_updates import Plan, changed_fields, plan_replacement, publish_samples, stored_records
from calibrate.ingest.step_records import STEP_COLUMNS, step_rows
from calibrate.models import Claim, Context, Dataset, ImportStep, Response, Sample, Step, target_key, utcnow

_SAMPLES, _CONTEXTS, _CLAIMS, _RESPONSES = Sample.__table__, Context.__table__, Claim.__table__, Response.__table__
_STEPS = ImportStep.__table__
_TRAJECTORY = Step.__table__  # a sample's steps (models.Step); _STEPS are the import's own (ImportStep)
_SAMPLE_COLUMNS = ("id", "dataset_id", "external_id", "question", "answer", "ground_truth", "metadata", "feedback",
                   "retrieved_ids", "relevant_ids", "content_hash", "segmenter", "claim_source", "content_sha256", "split",
                   "created_at", "updated_at")


def _fingerprint(path: str | Path) -> tuple[int, int]:
    stat = Path(path).stat()
    return stat.st_size, stat.st_mtime_ns


@dataclass
class _Source:
    """The file being imported, read twice: its records, how to check them, and what pass 1 found."""

    path: str | Path
    fmt: str
    max_field_chars: int
    tick: Progress
    fingerprint: tuple[int, int] = (0, 0)
    seen: dict[str, tuple[str, int | None]] = field(default_factory=dict)  # id → (content hash, line)
    existing: dict[str, tuple[int, str]] = field(default_factory=dict)  # stored id → (pk, content hash)
    added: int = 0
    changed: int = 0
    cuts: Counter[str] = field(default_factory=Counter)  # what the trajectories' bounds cut (step_records.py)

    @property
    def cells(self) -> bool:
        return self.fmt == "csv"

    def records(self) -> Iterator[Record]:
        return read_records(self.path, self.fmt, header_check=check_samples_header if self.cells else None)

    def check(self, record: Record, problems: Problems) -> RecordCheck:
        return RecordCheck(record.line, cells=self.cells, problems=problems, limit=self.max_field_chars)


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
    file = _Source(source, fmt, max_field_chars, Progress(progress), _fingerprint(source))
    _validate(writes, file, dataset, update=update, max_errors=max_errors, wanted=None if ids is None else frozenset(ids))
    unchanged = len(file.seen) - file.added - file.changed
    cuts = {name: n for name, n in file.cuts.items() if n}
    if not file.added and not file.changed:
        return ImportSummary("samples", dataset, 0, 0, unchanged, cuts=cuts)
    flagged, stale = _write(writes, file, dataset, description)
    file.tick.flush()
    return ImportSummary("samples", dataset, file.added, file.changed, unchanged, flagged=flagged, stale_verdicts=stale,
                         cuts=cuts)


def _validate(writes: Writes, file: _Source, dataset: str, *, update: bool, max_errors: int,
              wanted: frozenset[str] | None) -> None:
    """Pass 1: check every record against the file and the stored samples, keeping id → (hash, line) only.

    Reads, in no write transaction; raises ImportRejected with the file's problems.
    """
    problems = Problems(max_errors)
    count = 0
    with writes.read() as session:
        ds = session.scalars(select(Dataset).where(Dataset.name == dataset)).first()
        if ds is None:  # a new dataset: its name must be one of the documented ones (older ones stay usable)
            check_dataset_name(dataset)
        elif ds.import_batch_id is None:
            file.existing = _stored_hashes(session, ds.id, wanted)
        writes.end_read(session)  # pass 1 reads the file, not the database: hold no snapshot meanwhile
        try:
            for record in file.records():
                count += not record.whole_file
                file.tick()
                if record.problem is not None:
                    problems.add_problem(record.problem)
                    continue
                _validate_one(writes, session, file, record, file.check(record, problems), update=update, wanted=wanted)
        except TooManyProblems:
            pass
    file.tick.flush()
    if problems:
        raise problems.rejected(count)


def _stored_hashes(session: Session, dataset_id: int, wanted: frozenset[str] | None) -> dict[str, tuple[int, str]]:
    """Return the dataset's stored samples as id → (pk, content hash): all of them, or those of the ids `wanted`."""
    stored = select(_SAMPLES.c.external_id, _SAMPLES.c.id, _SAMPLES.c.content_hash).where(_SAMPLES.c.dataset_id == dataset_id)
    if wanted is None:  # one scan of the dataset
        return {ext: (pk, digest) for ext, pk, digest in session.execute(stored)}
    out: dict[str, tuple[int, str]] = {}
    for part in in_parts(sorted(wanted)):
        out.update({ext: (pk, digest) for ext, pk, digest in session.execute(stored.where(_SAMPLES.c.external_id.in_(part)))})
    return out


def _validate_one(writes: Writes, session: Session, file: _Source, record: Record, check: RecordCheck, *, update: bool,
                  wanted: frozenset[str] | None) -> None:
    """Check one record; count it as added or changed, or file its problem."""
    norm = normalise_sample(record.fields, check)
    digest = hash_checked(norm, check) if norm is not None else None
    if digest is None:
        return
    file.cuts.update(check.cuts)
    external_id = norm["id"]
    if wanted is not None and external_id not in wanted:
        check.bad("id", f"{short_id(external_id)} is not one of the ids the import was given")
        return
    first = file.seen.get(external_id)
    if first is not None:
        check.bad("id", f"duplicate id {external_id!r}: line {first[1]} has it too")
        return
    file.seen[external_id] = (digest, record.line)
    stored = file.existing.get(external_id)
    if stored is None:
        file.added += 1
    elif stored[1] != digest and update:
        file.changed += 1
    elif stored[1] != digest:
        fields = changed_fields(stored_records(session, [stored[0]])[stored[0]], norm)
        writes.end_read(session)
        if not fields:
            # Written differently, same content (an exported file: claims with their spans and source): nothing to import.
            file.seen[external_id] = (stored[1], record.line)
            return
        check.bad("id", f"sample {external_id!r} changed since it was imported ({', '.join(fields)}); use --update to replace it")


def _write(writes: Writes, file: _Source, dataset: str, description: str) -> tuple[int, int]:
    """Pass 2: write in chunks into the batch's hidden dataset; then publish. Return how many labels went stale.

    The records are those pass 1 validated and hashed, unless the file changed (then it is refused whole).
    """
    name = Path(file.path).name
    batch = writes.open_batch("samples", dataset, name)
    try:
        with writes.chunk() as session:
            staging_id = hidden_dataset(session, batch, dataset, source=name, description=description).id
        stager = _SampleStager(writes, staging_id, batch.id)
        quiet = Problems(1)
        for record in file.records():
            file.tick()
            norm = None
            if record.fields is not None:
                try:
                    norm = normalise_sample(record.fields, file.check(record, quiet))
                except TooManyProblems:
                    pass
            first = file.seen.get(norm["id"]) if norm is not None else None
            if first is None or first[1] != record.line:
                raise reject("the file changed while it was being imported: import it again", line=record.line)
            stored = file.existing.get(norm["id"])
            if stored is None:
                stager.add(norm, first[0])
            elif stored[1] != first[0]:
                stager.replace(stored[0], norm, first[0])
        if _fingerprint(file.path) != file.fingerprint:
            raise reject("the file changed while it was being imported: import it again")
        stager.flush()
        with writes.publish() as session:
            flagged, stale = publish_samples(session, batch.id, staging_id, dataset)
    except BaseException:
        writes.abandon()
        raise
    writes.finish()
    return flagged, stale


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
                         self._responses(norm), tuple(step_rows(norm.get("steps") or []))))
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
        plans: list[Plan] = []
        if self.replacements:
            batch, self.replacements = self.replacements, []
            with self.writes.read() as session:
                stored_by_pk = stored_records(session, [pk for pk, _, _ in batch])
            plans = [plan_replacement(pk, norm, digest, stored_by_pk[pk]) for pk, norm, digest in batch]
            for plan in plans:
                if plan.responses is not None:
                    plan.responses = self._responses(plan.norm)
        with self.writes.chunk() as session:
            self._write(session, new, plans)

    def _write(self, session: Session, new: list[tuple], plans: list[Plan]) -> None:
        samples = BulkInsert(session, _SAMPLES, _SAMPLE_COLUMNS)
        contexts = BulkInsert(session, _CONTEXTS, ("id", "sample_id", "rank", "text", "doc_id", "active"))
        claims = BulkInsert(session, _CLAIMS, ("id", "sample_id", "index", "text", "start", "end", "active", "origin"))
        responses = BulkInsert(session, _RESPONSES, ("sample_id", "position", "key", "text", "model", "metadata"))
        trajectory = _StepRows(session)
        stamp = samples.bind("created_at")(self.now)
        active, inactive = contexts.bind("active")(True), contexts.bind("active")(False)
        next_sample = first_free_id(session, _SAMPLES)
        next_context, next_claim = first_free_id(session, _CONTEXTS), first_free_id(session, _CLAIMS)
        staging = self.staging_id
        for fields, context_rows, claim_rows, response_rows, step_rows_ in new:
            sample_id, next_sample = next_sample, next_sample + 1
            responses.extend([(sample_id, *row) for row in response_rows])
            samples.add((sample_id, staging, *fields, None, stamp, stamp))
            contexts.extend([(next_context + rank, sample_id, rank, text, doc_id, active)
                             for rank, (text, doc_id) in enumerate(context_rows)])
            next_context += len(context_rows)
            claims.extend([(next_claim + index, sample_id, index, text, start, end, active, origin)
                           for index, (text, start, end, origin) in enumerate(claim_rows)])
            next_claim += len(claim_rows)
            trajectory.add(sample_id, step_rows_, active=True)
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
            for row in plan.new_steps:
                steps.append(self._step("activate", trajectory.add(plan.pk, [row], active=False)[0], target="step"))
            steps += [self._step("retire", row_id, target=target, note=reason) for target, row_id, reason in plan.retired]
            steps += [self._step("keep", row_id, target=target, data=data) for target, row_id, data in plan.kept]
        # Parents first: the foreign keys are checked row by row.
        samples.flush()
        contexts.flush()
        claims.flush()
        responses.flush()
        trajectory.flush()
        for table in (_SAMPLES, _CONTEXTS, _CLAIMS, _RESPONSES, _TRAJECTORY):
            sync_id_sequence(session, table)
        if steps:
            session.execute(insert(_STEPS), steps)

    def _step(self, action: str, row_id: int, *, target: str = "", other_id: int | None = None, key: str = "",
              note: str = "", data: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"batch_id": self.batch_id, "action": action, "target": target, "row_id": row_id, "other_id": other_id,
                "key": key, "note": note[:500], "data": data}


class _StepRows:
    """The Step rows of one chunk: numbered from the table's first free id (the chunk holds the write lock)."""

    def __init__(self, session: Session) -> None:
        self.rows = BulkInsert(session, _TRAJECTORY, ("id", "sample_id", *STEP_COLUMNS, "active"))
        self.started_at, self.json = self.rows.bind("started_at"), self.rows.bind("tool_arguments")
        self.active = self.rows.bind("active")
        self.next_id: int | None = None
        self.session = session

    def add(self, sample_id: int, rows: Collection[tuple], *, active: bool) -> list[int]:
        """Queue a sample's steps (rows of step_records.step_rows); return their ids."""
        if not rows:
            return []
        if self.next_id is None:
            self.next_id = first_free_id(self.session, _TRAJECTORY)
        ids = list(range(self.next_id, self.next_id + len(rows)))
        self.next_id += len(rows)
        flag, started_at, json_value = self.active(active), self.started_at, self.json
        for step_id, row in zip(ids, rows, strict=True):
            *head, started, duration, tool_name, arguments, result, turn = row
            self.rows.add((step_id, sample_id, *head, started_at(started), duration, tool_name,
                           None if tool_name is None else json_value(arguments),
                           None if tool_name is None else json_value(result), turn, flag))
        return ids

    def flush(self) -> None:
        self.rows.flush()
