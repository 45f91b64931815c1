"""Labels and verdicts staged and published: the writing half of the labels and verdicts imports.

ingest/label_records.py validates a file's lines, ingest/labels.py runs the import; here a
`Stager` stages the lines that change something, chunk by chunk, as rows of an import batch
(`StagedLabel`, `StagedVerdict`), and publishes them in the batch's last transaction with a few
set-based upserts: labels on (task, target, annotator), a LabelRevision (with the error type it
had) for every create and update; verdicts on (judge, task, target, order).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import JSON, Text, and_, case, cast, exists, false, func, insert, literal, null, or_, select, update
from sqlmodel import Session

from calibrate.accounts import ensure_annotator
from calibrate.ingest.batches import Writes
from calibrate.ingest.bulk import in_parts, sync_id_sequence
from calibrate.ingest.label_records import Line, LineContext
from calibrate.models import (
    Claim,
    Context,
    ImportBatch,
    Judge,
    Label,
    LabelRevision,
    StagedLabel,
    StagedVerdict,
    Step,
    User,
    Verdict,
    utcnow,
)
from calibrate.tasks import current_guideline

_CLAIMS, _CONTEXTS, _TRAJECTORY = Claim.__table__, Context.__table__, Step.__table__
_LABELS, _REVISIONS, _VERDICTS = Label.__table__, LabelRevision.__table__, Verdict.__table__


class Job(Protocol):
    """What a stager needs of its import: where it writes, what it imports, from which file, against which lines' context."""

    writes: Writes
    kind: str
    source: str | Path
    ctx: LineContext


class Stager:
    """Stage the lines of a file that change something, chunk by chunk, in an import batch; publish them.

    Lines equal to what is stored are only counted (`unchanged`): a file imported again stages
    nothing and starts no batch. Publishing upserts the staged rows with a few set-based
    statements, so it stays short however many rows the file has.
    """

    model: Any = None

    def __init__(self, job: Job) -> None:
        self.job = job
        self.writes = job.writes
        self.unchanged = self.staged = 0
        self.rows: list[dict[str, Any]] = []
        self.created: list[str] = []  # labels: the annotator accounts that publishing created

    def stage(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self.staged += 1
        if len(self.rows) >= self.writes.chunk_size:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        if self.writes.batch is None:
            self.writes.open_batch(self.job.kind, self.job.ctx.dataset.name, Path(self.job.source).name)
        rows, self.rows = [{**row, "batch_id": self.writes.batch.id} for row in self.rows], []
        with self.writes.chunk() as session:
            session.execute(insert(self.model.__table__), rows)


def _order_text(order: list[str] | None) -> str | None:
    """Return a pairwise order as the JSON text it is stored as (None: not given)."""
    return None if order is None else json.dumps(order)


def _as_json(session: Session, expression: Any) -> Any:
    """Return a staged JSON text as a value for a JSON column (PostgreSQL needs the cast; SQLite stores the text)."""
    return cast(expression, JSON) if session.get_bind().dialect.name == "postgresql" else expression


def _json_text(column: Any) -> Any:
    """Return a JSON column as comparable text, JSON null and SQL NULL alike ("null")."""
    return func.coalesce(cast(column, Text), "null")


class LabelStager(Stager):
    """Labels: upserted on (task, target, annotator), a LabelRevision for every create and update.

    A line without `order` leaves a recorded order as it is.
    """

    model = StagedLabel

    def __init__(self, job: Job, session: Session, samples: set[int]) -> None:
        super().__init__(job)
        self.people = job.ctx.people
        self.guidelines: dict[int, int | None] = {}
        for task in job.ctx.tasks.values():
            guideline = current_guideline(session, task)
            self.guidelines[task.id] = guideline.version if guideline is not None else None
        self.existing: dict[tuple[int, str, int], tuple[str, str, list | None, str | None]] = {}
        for chunk in in_parts(sorted(samples)):
            for row in session.execute(
                select(_LABELS.c.task_id, _LABELS.c.target_key, _LABELS.c.annotator_id, _LABELS.c.value, _LABELS.c.rationale,
                       _LABELS.c.order, _LABELS.c.error_type)
                .where(_LABELS.c.sample_id.in_(chunk), _LABELS.c.adjudicated.is_(False))
            ):
                self.existing[(row.task_id, row.target_key, row.annotator_id)] = (row.value, row.rationale, row.order,
                                                                                  row.error_type)

    def add(self, line: Line, claim_id: int | None, context_id: int | None, step_id: int | None, key: str) -> None:
        annotator_id = self.people.get(line.who)
        old = self.existing.get((line.task.id, key, annotator_id)) if annotator_id is not None else None
        if old is not None:
            new_order = line.order if line.order is not None else old[2]
            if old == (line.value, line.text, new_order, line.error_type):
                self.unchanged += 1
                return
        self.stage({"task_id": line.task.id, "sample_id": line.sample_id, "claim_id": claim_id, "context_id": context_id,
                    "step_id": step_id, "target_key": key, "annotator": line.who, "value": line.value,
                    "error_type": line.error_type, "rationale": line.text,
                    "guideline_version": self.guidelines.get(line.task.id), "order": _order_text(line.order)})

    def publish(self, session: Session) -> tuple[int, int]:
        """Upsert the batch's staged labels (creating the annotators it names); return (added, updated).

        The names of the accounts it creates are kept in `self.created` for the summary.
        """
        batch_id, now = self.writes.batch.id, utcnow()
        staged, users = StagedLabel.__table__, User.__table__
        for name in session.execute(select(staged.c.annotator).where(staged.c.batch_id == batch_id).distinct()).scalars():
            if name not in self.people:  # the users as they were when the import began
                self.created.append(name)
            ensure_annotator(session, name)
        session.flush()
        first_new = (session.execute(select(func.max(_LABELS.c.id))).scalar() or 0) + 1
        match = and_(_LABELS.c.task_id == staged.c.task_id, _LABELS.c.target_key == staged.c.target_key,
                     _LABELS.c.annotator_id == users.c.id, _LABELS.c.adjudicated.is_(False))
        differs = or_(_LABELS.c.value != staged.c.value, _LABELS.c.rationale != staged.c.rationale,
                      _LABELS.c.error_type.is_distinct_from(staged.c.error_type),
                      and_(staged.c.order.is_not(None), _json_text(_LABELS.c.order) != staged.c.order))
        mine = and_(staged.c.batch_id == batch_id, users.c.username == staged.c.annotator)
        at = literal(now, _REVISIONS.c.changed_at.type)
        # An update keeps what it replaces in a revision: written first, from the label as it is.
        session.execute(insert(_REVISIONS).from_select(
            ["label_id", "action", "value", "rationale", "order", "error_type", "changed_by_id", "changed_at"],
            select(_LABELS.c.id, literal("update"), _LABELS.c.value, _LABELS.c.rationale, _LABELS.c.order,
                   _LABELS.c.error_type, _LABELS.c.annotator_id, at)
            .select_from(staged.join(users, users.c.username == staged.c.annotator).join(_LABELS, match))
            .where(staged.c.batch_id == batch_id, differs)))
        updated = session.execute(
            update(_LABELS).where(mine, match, differs)
            .values(value=staged.c.value, rationale=staged.c.rationale, error_type=staged.c.error_type, stale=False,
                    stale_reason="",
                    guideline_version=staged.c.guideline_version, updated_at=now,
                    order=case((staged.c.order.is_(None), _LABELS.c.order),
                               else_=_as_json(session, staged.c.order)))).rowcount
        stamp = literal(now, _LABELS.c.created_at.type)
        session.execute(insert(_LABELS).from_select(
            ["task_id", "sample_id", "claim_id", "context_id", "step_id", "target_key", "annotator_id", "value",
             "error_type", "rationale", "evidence", "guideline_version", "adjudicated", "stale", "stale_reason", "source", "order",
             "created_at", "updated_at"],
            select(staged.c.task_id, staged.c.sample_id, staged.c.claim_id, staged.c.context_id, staged.c.step_id,
                   staged.c.target_key,
                   users.c.id, staged.c.value, staged.c.error_type, staged.c.rationale, null(), staged.c.guideline_version, false(), false(),
                   literal(""), literal("import"), _as_json(session, staged.c.order), stamp, stamp)
            .select_from(staged.join(users, users.c.username == staged.c.annotator))
            .where(staged.c.batch_id == batch_id, ~exists().where(match))))
        # Counted, not taken from the INSERT's rowcount (not reliable for INSERT … SELECT on every driver).
        added = session.execute(select(func.count()).where(_LABELS.c.id >= first_new)).scalar()
        session.execute(insert(_REVISIONS).from_select(
            ["label_id", "action", "value", "rationale", "order", "error_type", "changed_by_id", "changed_at"],
            select(_LABELS.c.id, literal("create"), _LABELS.c.value, _LABELS.c.rationale, _LABELS.c.order,
                   _LABELS.c.error_type, _LABELS.c.annotator_id, at)
            .where(_LABELS.c.id >= first_new)))
        sync_id_sequence(session, _LABELS)
        # A claim, context or step retired after validation (an expert split it meanwhile, an --update replaced it):
        # the labels written onto it are stale, as every other path leaves them (never current on a retired target).
        retired = or_(_LABELS.c.claim_id.in_(select(_CLAIMS.c.id).where(_CLAIMS.c.active.is_(False))),
                      _LABELS.c.context_id.in_(select(_CONTEXTS.c.id).where(_CONTEXTS.c.active.is_(False))),
                      _LABELS.c.step_id.in_(select(_TRAJECTORY.c.id).where(_TRAJECTORY.c.active.is_(False))))
        session.execute(update(_LABELS).where(
            retired, _LABELS.c.stale.is_(False), _LABELS.c.updated_at == now,
            _LABELS.c.sample_id.in_(select(staged.c.sample_id).where(staged.c.batch_id == batch_id)))
            .values(stale=True, stale_reason="its claim or context changed during the import"))
        session.execute(update(ImportBatch).where(ImportBatch.id == batch_id).values(state="published"))
        return added, updated


_VERDICT_COLUMNS = ("value", "error_type", "status", "reason", "error", "raw", "latency_ms", "input_tokens", "output_tokens",
                    "order")
_PLAIN_COLUMNS = _VERDICT_COLUMNS[:-1]  # compared as they are; `order` (JSON) as text


class VerdictStager(Stager):
    """Verdicts: upserted on (judge, task, target, order)."""

    model = StagedVerdict

    def __init__(self, job: Job, session: Session, samples: set[int]) -> None:
        super().__init__(job)
        self.judges = {name: pk for name, (pk, _kind) in job.ctx.people.items()}
        self.existing: dict[tuple[int, int, str, str], tuple] = {}
        judge_ids = list(self.judges.values())
        for chunk in in_parts(sorted(samples)):
            for row in session.execute(
                select(_VERDICTS.c.judge_id, _VERDICTS.c.task_id, _VERDICTS.c.target_key, _VERDICTS.c.order_key,
                       *(_VERDICTS.c[name] for name in _VERDICT_COLUMNS))
                .where(_VERDICTS.c.sample_id.in_(chunk), _VERDICTS.c.judge_id.in_(judge_ids), _VERDICTS.c.sample_index == 0)
            ):
                self.existing[(row.judge_id, row.task_id, row.target_key, row.order_key)] = tuple(
                    row._mapping[name] for name in _VERDICT_COLUMNS)

    def add(self, line: Line, claim_id: int | None, context_id: int | None, step_id: int | None, key: str) -> None:
        content = {"value": line.value, "error_type": line.error_type, "reason": line.text, **line.extra,
                   "order": line.order if line.order_key else None}
        judge_id = self.judges.get(line.who)
        old = self.existing.get((judge_id, line.task.id, key, line.order_key)) if judge_id is not None else None
        if old is not None and old == tuple(content[n] for n in _VERDICT_COLUMNS):
            self.unchanged += 1
            return
        self.stage({"judge": line.who, "task_id": line.task.id, "sample_id": line.sample_id, "claim_id": claim_id,
                    "context_id": context_id, "step_id": step_id, "target_key": key, "order_key": line.order_key,
                    **{name: content[name] for name in _PLAIN_COLUMNS}, "order": _order_text(content["order"])})

    def publish(self, session: Session) -> tuple[int, int]:
        """Upsert the batch's staged verdicts (creating the imported judges it names); return (added, updated)."""
        batch_id, now = self.writes.batch.id, utcnow()
        staged, judges = StagedVerdict.__table__, Judge.__table__
        names = session.execute(select(staged.c.judge).where(staged.c.batch_id == batch_id).distinct()).scalars().all()
        known = set(session.execute(select(judges.c.name).where(judges.c.name.in_(names))).scalars())
        for name in sorted(set(names) - known):
            session.add(Judge(name=name, kind="imported", description="created by an import of verdicts"))
        session.flush()
        match = and_(_VERDICTS.c.judge_id == judges.c.id, _VERDICTS.c.task_id == staged.c.task_id,
                     _VERDICTS.c.target_key == staged.c.target_key, _VERDICTS.c.order_key == staged.c.order_key,
                     _VERDICTS.c.sample_index == 0)  # an import is sample 0: a self-consistency run's others stay
        differs = or_(*(_VERDICTS.c[name].is_distinct_from(staged.c[name]) for name in _PLAIN_COLUMNS),
                      _json_text(_VERDICTS.c.order) != func.coalesce(staged.c.order, "null"))
        order = _as_json(session, staged.c.order)
        updated = session.execute(
            update(_VERDICTS).where(staged.c.batch_id == batch_id, judges.c.name == staged.c.judge, match, differs)
            .values(**{name: staged.c[name] for name in _PLAIN_COLUMNS}, order=order, source="import",
                    run_id=None)).rowcount
        first_new = (session.execute(select(func.max(_VERDICTS.c.id))).scalar() or 0) + 1
        session.execute(insert(_VERDICTS).from_select(
            ["judge_id", "run_id", "task_id", "sample_id", "claim_id", "context_id", "step_id", "target_key", "order_key",
             *_PLAIN_COLUMNS, "order", "cached", "source", "created_at"],
            select(judges.c.id, null(), staged.c.task_id, staged.c.sample_id, staged.c.claim_id, staged.c.context_id,
                   staged.c.step_id, staged.c.target_key, staged.c.order_key, *(staged.c[name] for name in _PLAIN_COLUMNS), order, false(),
                   literal("import"), literal(now, _VERDICTS.c.created_at.type))
            .select_from(staged.join(judges, judges.c.name == staged.c.judge))
            .where(staged.c.batch_id == batch_id, ~exists().where(match))))
        added = session.execute(select(func.count()).where(_VERDICTS.c.id >= first_new)).scalar()
        session.execute(update(ImportBatch).where(ImportBatch.id == batch_id).values(state="published"))
        return added, updated
