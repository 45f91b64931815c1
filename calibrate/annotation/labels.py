"""Labels made in the workbench: save (an upsert with history), undo, and a label's history.

One current label per (task, target, annotator) — the unique constraint `uq_label_current`
makes that hold even under a double click or a replayed request: saving the same value twice
changes nothing and writes no revision. Every change keeps the previous state in a
LabelRevision ("update": the previous value, rationale, evidence, error type and guideline
version), with who and when. Undo walks my workbench revisions on the item backwards: an "undo" revision
cancels the change before it, so pressing `u` repeatedly steps further back. Undoing a
label's creation deletes the label (there was nothing before it; its revisions go with it).

Evidence (`Label.evidence`, JSON) is a list of what supports a claim, each entry either a
context rank (an int: the whole context, the only kind before sentences) or one sentence of a
context, an object `{"context": rank, "sentence": i, "start": s, "end": e, "text": "..."}`:
`i` is the 0-based index among the context's sentences as `calibrate.text.sentences.segment`
cuts it, `[s, e)` its character span in the context and `text` the sentence itself (so a
reader needs neither the segmenter nor the context). Entries are kept sorted by (rank,
sentence), a whole context before its sentences.

A label of a pairwise task names a response by id (or tie) and records `order`, the response
ids in the order the annotator was shown them; its revisions keep the order too, so an undo
restores it with the value.

A label of the task's negative label (`incorrect`, task_values.negative_label) may name an error
type of the task's taxonomy (`Label.error_type`), saved in the same write as the value and kept in
the revisions as the value is: posting one with another label is refused, and a label changed away
from the negative label drops it (docs/annotation.md, "Error types").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from calibrate import lookup
from calibrate.annotation import AnnotationError, NotFound
from calibrate.annotation.guidelines import current_version_of
from calibrate.annotation.items import LABEL_COLUMNS
from calibrate.db import Statement
from calibrate.judged import TARGET_KINDS, target_kind
from calibrate.models import (
    MAX_ID,
    TARGETS,
    Assignment,
    Context,
    Label,
    LabelRevision,
    Task,
    User,
    parse_target_key,
    target_key,
    utcnow,
)
from calibrate.reasons import Reason
from calibrate.task_values import canonical_error_type, canonical_value, negative_label, pairwise_value
from calibrate.tasks import TaskError
from calibrate.text.sentences import segment

_CONTEXTS = Context.__table__

MAX_RATIONALE_CHARS = 5000
UI = "ui"


@dataclass
class Target:
    """A resolved target of the assignment's sample."""

    task: Task
    kind: str
    id: int
    claim_id: int | None = None
    context_id: int | None = None
    step_id: int | None = None

    @property
    def key(self) -> str:
        return target_key(self.kind, self.id)


def _parse(task, key: str) -> tuple[str, int]:
    parsed = parse_target_key(key)
    if parsed is None:
        kind, _, raw_id = (key or "").partition(":")
        if kind in TARGETS and raw_id.isascii() and raw_id.isdigit():
            raise NotFound(key)  # an id larger than any row can have
        raise AnnotationError(Reason("target_key_shape", key=key))
    kind, target_id = parsed
    if kind != task.target:
        raise AnnotationError(Reason("task_other_target", task=task.name, target=task.target, kind_=kind))
    return kind, target_id


def _target(task, kind: str, target_id: int) -> Target:
    """Return the target with the id column its label attaches by (the registered kind's: calibrate/judged.py)."""
    part = target_kind(kind)
    return Target(task, kind, target_id, **part.attach(target_id if part.within else None))


def resolve_target(session: Session, assignment, task_ref: str | int, key: str) -> Target:
    """Return the task and target named by a request, checking the target belongs to the assignment's sample."""
    task = _task(session, task_ref)
    kind, target_id = _parse(task, key)
    part = target_kind(kind)
    if not part.within:
        belongs = target_id == assignment.sample_id
    else:
        row = session.get(part.row, target_id)
        belongs = row is not None and row.sample_id == assignment.sample_id and row.active
    if not belongs:
        raise NotFound(key)
    return _target(task, kind, target_id)


def _task(session: Session, ref: str | int) -> Task:
    """Return a task by id (the workbench's forms) or by name."""
    if not (isinstance(ref, int) or (isinstance(ref, str) and ref.isascii() and ref.isdigit())):
        return lookup.task(session, ref)
    task = session.get(Task, int(ref)) if int(ref) <= MAX_ID else None
    if task is None:
        raise NotFound(Reason("no_such_task", ref=ref))
    return task


def target_in(data, task, key: str) -> Target:
    """Return the target named by `key` if it belongs to the loaded item (no query), else raise."""
    kind, target_id = _parse(task, key)
    part = target_kind(kind)
    if not part.within:
        belongs = target_id == data.assignment.sample_id
    else:
        belongs = any(row.id == target_id for row in getattr(data, part.items))
    if not belongs:
        raise NotFound(key)
    return _target(task, kind, target_id)


def was_retired_here(session: Session, sample_id: int, task, key: str) -> bool:
    """Return whether `key` names a part of this sample (claim, context, step) that is retired (a target the item showed
    before a change)."""
    parsed = parse_target_key(key)
    if parsed is None or parsed[0] != task.target or not target_kind(parsed[0]).within:
        return False
    row = session.get(target_kind(parsed[0]).row, parsed[1])
    return row is not None and row.sample_id == sample_id and not row.active


_MY_LABEL_SQL = Statement(f"SELECT {LABEL_COLUMNS} FROM label WHERE task_id = :task_id AND target_key = :key "
                          "AND annotator_id = :user_id AND NOT adjudicated", json_fields=("evidence", "order"))
_INSERT_LABEL_SQL = Statement(
    "INSERT INTO label (task_id, sample_id, claim_id, context_id, step_id, target_key, annotator_id, value, rationale, "
    'evidence, guideline_version, adjudicated, stale, stale_reason, source, "order", error_type, created_at, updated_at) '
    "VALUES (:task_id, :sample_id, :claim_id, :context_id, :step_id, :key, :user_id, :value, :rationale, :evidence, "
    ":version, FALSE, FALSE, '', :source, :order, :error_type, :now, :now) RETURNING id", json_fields=("evidence", "order"))
_UPDATE_LABEL_SQL = Statement(
    "UPDATE label SET value = :value, rationale = :rationale, evidence = :evidence, guideline_version = :version, "
    'stale = :stale, stale_reason = :stale_reason, "order" = :order, error_type = :error_type, updated_at = :now '
    "WHERE id = :id",
    json_fields=("evidence", "order"))
_INSERT_REVISION_SQL = Statement(
    'INSERT INTO labelrevision (label_id, action, value, rationale, evidence, guideline_version, source, "order", '
    "error_type, changed_by_id, changed_at) VALUES (:label_id, :action, :value, :rationale, :evidence, :version, :source, "
    ":order, :error_type, :user_id, :now)", json_fields=("evidence", "order"))


# Whether a part of a sample (a claim, context, step…) is still active, by its table.
_ACTIVE_SQL = {kind.name: Statement(f"SELECT active FROM {kind.row.__tablename__} WHERE id = :id")
               for kind in TARGET_KINDS.values() if kind.within}


class TargetRetired(AnnotationError):
    """The claim or context a label was for was retired meanwhile (split, merged, edited): HTTP 409, reload the item."""


def check_target_current(session: Session, target: Target) -> None:
    """Raise TargetRetired if the target's claim or context is no longer active.

    Called inside the write transaction (behind the writer lock), so that a claim split that
    committed after the item was read is seen: without it the label landed on the retired
    claim, not stale, and `export labels` wrote it under an index that names another claim.
    """
    statement = _ACTIVE_SQL.get(target.kind)
    if statement is None:  # the sample itself
        return
    if not statement.scalar(session, {"id": target.id}):
        raise TargetRetired(Reason("target_retired", kind=target.kind))


def my_label(session: Session, task_id: int, key: str, user: User):
    """Return my current (not adjudicated) label on a target, as a row."""
    return _MY_LABEL_SQL.first(session, {"task_id": task_id, "key": key, "user_id": user.id})


def _context_ranks(session: Session, sample_id: int) -> set[int]:
    return set(session.execute(sa_select(_CONTEXTS.c.rank).where(_CONTEXTS.c.sample_id == sample_id,
                                                              _CONTEXTS.c.active.is_(True))).scalars())


_UNKNOWN = object()


class EvidenceError(AnnotationError):
    """A sentence named as evidence that is not one of the item's (HTTP 400, naming the form field)."""

    def __init__(self, field: str, reason: Reason) -> None:
        super().__init__(Reason("evidence_field", field=field, refusal=reason))
        self.field = field


class ErrorTypeRefused(AnnotationError):
    """An error type the label cannot have: not the task's, or beside a label that is not its negative one (HTTP 400,
    naming the form field `error_type`)."""

    field = "error_type"


def sentence_evidence(contexts, context_id: int, index: int, *, field: str = "evidence_sentence") -> dict:
    """Return the evidence entry of sentence `index` of the context `context_id` among the item's `contexts`.

    Raise EvidenceError when the context is not one of these (another sample's, or retired) or
    has no such sentence.
    """
    context = next((c for c in contexts if c.id == context_id), None)
    if context is None:
        raise EvidenceError(field, Reason("evidence_not_item_context", context_id=context_id))
    sentences = segment(context.text)
    if not 0 <= index < len(sentences):
        raise EvidenceError(field, Reason("evidence_no_sentence", number=context.rank + 1, count=len(sentences), index=index + 1))
    span = sentences[index]
    return {"context": context.rank, "sentence": index, "start": span.start, "end": span.end, "text": span.text}


def _evidence_key(entry: int | dict) -> tuple[int, int]:
    """Return the identity and sort key of an evidence entry: (context rank, sentence index; -1 for the whole context)."""
    return (entry, -1) if isinstance(entry, int) else (entry["context"], entry["sentence"])


def toggle_evidence(evidence: list | None, entry: int | dict) -> list | None:
    """Return `evidence` with `entry` added, or removed if it is there (None when nothing is left)."""
    chosen = {_evidence_key(e): e for e in evidence or []}
    key = _evidence_key(entry)
    if key in chosen:
        del chosen[key]
    else:
        chosen[key] = entry
    return [chosen[k] for k in sorted(chosen)] or None


class LabelState(NamedTuple):
    """A label as just written (the same fields as a row read with LABEL_COLUMNS)."""

    id: int
    task_id: int
    sample_id: int
    claim_id: int | None
    context_id: int | None
    target_key: str
    annotator_id: int
    value: str
    rationale: str
    evidence: list | None
    guideline_version: int | None
    stale: bool
    stale_reason: str
    source: str
    order: list[str] | None = None
    error_type: str | None = None


def _error_type(task: Task, value: str, posted: str | None, kept: str | None) -> str | None:
    """Return the error type a label of `value` stores: the one `posted` (checked; "" clears it), else the one it had
    while it stays the task's negative label (a label changed away from it drops it)."""
    if posted is None:
        return kept if value == negative_label(task) else None
    try:
        return canonical_error_type(task, value, posted)
    except TaskError as exc:
        raise ErrorTypeRefused.carrying(exc) from None


def save_label(session: Session, assignment, user: User, target: Target, *, value: object = None,
               rationale: str | None = None, evidence_toggle: int | dict | None = None,
               existing=_UNKNOWN, version=_UNKNOWN, context_ranks: set[int] | None = None,
               order: list[str] | None = None, error_type: str | None = None):
    """Set my label on a target: its value, rationale, evidence (an entry to toggle) and/or error type; return it (a row).

    Giving a value again under a newer guideline (or on a stale label) confirms it: the label
    takes the current guideline version. Nothing changes, and no revision is written, when the
    request repeats what is stored. `evidence_toggle` is a context rank, or a sentence entry from
    `sentence_evidence`. Raise AnnotationError for a value that does not fit the task, or for a
    rationale or evidence on a target that has no label yet. `existing`,
    `version` and `context_ranks` may be passed by a caller that has already read them.

    Pairwise tasks: `order` is the sample's response ids as shown to the annotator; the value
    must be one of them or tie, and the order is recorded with it.

    `error_type`: None leaves it as it is (dropped when the value leaves the negative label); "" clears it; else one of
    the task's error types, given with its negative label (ErrorTypeRefused otherwise: module docstring).
    """
    task = target.task
    canonical = None
    if task.kind == "pairwise" and not order:
        raise AnnotationError(Reason("pairwise_fewer_than_two", task=task.name))
    if value is not None:
        try:
            canonical = pairwise_value(task, value, order) if task.kind == "pairwise" else canonical_value(task, value)
        except TaskError as exc:
            raise AnnotationError.carrying(exc) from None
    if rationale is not None:
        rationale = rationale.replace("\r\n", "\n").strip()
        if len(rationale) > MAX_RATIONALE_CHARS:
            raise AnnotationError(Reason("rationale_too_long", limit=MAX_RATIONALE_CHARS))
    if evidence_toggle is not None:
        if target.kind != "claim":
            raise AnnotationError(Reason("evidence_on_claims"))
        ranks = context_ranks if context_ranks is not None else _context_ranks(session, assignment.sample_id)
        rank = _evidence_key(evidence_toggle)[0]
        if rank not in ranks:
            raise AnnotationError(Reason("no_such_context", number=rank + 1))
    check_target_current(session, target)
    if version is _UNKNOWN:
        version = current_version_of(session, task.id)
    label = my_label(session, task.id, target.key, user) if existing is _UNKNOWN else existing
    now = utcnow()
    if label is None:
        if canonical is None:
            raise AnnotationError(Reason("label_first"))
        evidence = toggle_evidence(None, evidence_toggle) if evidence_toggle is not None else None
        shown = list(order) if order else None
        chosen = _error_type(task, canonical, error_type, None)
        label_id = _INSERT_LABEL_SQL.scalar(session, {
            "task_id": task.id, "sample_id": assignment.sample_id, "claim_id": target.claim_id, "context_id": target.context_id,
            "step_id": target.step_id, "key": target.key, "user_id": user.id, "value": canonical, "rationale": rationale or "", "evidence": evidence,
            "version": version, "source": UI, "order": shown, "error_type": chosen, "now": now})
        _INSERT_REVISION_SQL.execute(session, {"label_id": label_id, "action": "create", "value": canonical,
                                               "rationale": rationale or "", "evidence": evidence, "version": version,
                                               "source": UI, "order": shown, "error_type": chosen, "user_id": user.id,
                                               "now": now})
        return LabelState(label_id, task.id, assignment.sample_id, target.claim_id, target.context_id, target.key, user.id,
                          canonical, rationale or "", evidence, version, False, "", UI, shown, chosen)
    new_value = canonical if canonical is not None else label.value
    new_rationale = rationale if rationale is not None else label.rationale
    new_evidence = label.evidence
    if evidence_toggle is not None:
        new_evidence = toggle_evidence(label.evidence, evidence_toggle)
    new_version = version if canonical is not None else label.guideline_version
    new_stale = bool(label.stale) and canonical is None
    new_order = list(order) if canonical is not None and order else label.order
    new_error = _error_type(task, new_value, error_type, label.error_type)
    if (new_value, new_rationale, new_evidence, new_version, new_stale, new_order, new_error) == (
            label.value, label.rationale, label.evidence, label.guideline_version, bool(label.stale), label.order,
            label.error_type):
        return label
    _INSERT_REVISION_SQL.execute(session, {"label_id": label.id, "action": "update", "value": label.value,
                                           "rationale": label.rationale, "evidence": label.evidence,
                                           "version": label.guideline_version, "source": UI, "order": label.order,
                                           "error_type": label.error_type, "user_id": user.id, "now": now})
    stale_reason = label.stale_reason if new_stale else ""
    _UPDATE_LABEL_SQL.execute(session, {"id": label.id, "value": new_value, "rationale": new_rationale, "evidence": new_evidence,
                                        "version": new_version, "stale": new_stale, "stale_reason": stale_reason,
                                        "order": new_order, "error_type": new_error, "now": now})
    return LabelState(label.id, task.id, label.sample_id, label.claim_id, label.context_id, label.target_key,
                      label.annotator_id, new_value, new_rationale, new_evidence, new_version, new_stale, stale_reason,
                      label.source, new_order, new_error)


@dataclass
class Undone:
    """What an undo did: the target it touched and the label now there (None: removed)."""

    task_id: int
    target_key: str
    label: Label | None
    what: str


def last_label_change(session: Session, assignment: Assignment, user: User) -> tuple[LabelRevision, Label] | None:
    """Return my last workbench change on this item's labels that is not undone yet (its revision and label)."""
    rows = session.exec(
        select(LabelRevision, Label).join(Label, LabelRevision.label_id == Label.id)
        .where(Label.sample_id == assignment.sample_id, Label.annotator_id == user.id,
               col(Label.adjudicated).is_(False), LabelRevision.changed_by_id == user.id, LabelRevision.source == UI,
               col(LabelRevision.action).in_(("create", "update", "undo")))
        .order_by(col(LabelRevision.id).desc())
    ).all()
    cancelled = 0
    for revision, label in rows:
        if revision.action == "undo":
            cancelled += 1
            continue
        if cancelled:
            cancelled -= 1
            continue
        return revision, label
    return None


def undo_label_change(session: Session, user: User, revision: LabelRevision, label: Label) -> Undone:
    """Undo one label change (a `last_label_change`): a creation removes the label, an update restores what it replaced."""
    if revision.action == "create":
        task_id, key, value = label.task_id, label.target_key, label.value
        session.delete(label)
        session.flush()
        return Undone(task_id, key, None, f"removed {value}")
    now = utcnow()
    session.add(LabelRevision(label_id=label.id, action="undo", value=label.value, rationale=label.rationale,
                              evidence=label.evidence, guideline_version=label.guideline_version, source=UI,
                              order=label.order, error_type=label.error_type, changed_by_id=user.id, changed_at=now))
    before = label.value
    label.value, label.rationale = revision.value, revision.rationale
    label.evidence, label.guideline_version = revision.evidence, revision.guideline_version
    label.order, label.error_type = revision.order, revision.error_type
    label.updated_at = now
    session.add(label)
    session.flush()
    return Undone(label.task_id, label.target_key, label, f"{before} → {label.value}" if before != label.value else "restored")


def undo_last(session: Session, assignment: Assignment, user: User) -> Undone | None:
    """Undo my last workbench change on this item's labels; return None when there is nothing to undo."""
    found = last_label_change(session, assignment, user)
    return undo_label_change(session, user, *found) if found is not None else None


@dataclass
class HistoryEntry:
    action: str
    value: str
    rationale: str
    evidence: list | None
    guideline_version: int | None
    who: str
    when: object
    error_type: str | None = None


def history(session: Session, target: Target, user: User) -> tuple[Label | None, list[HistoryEntry]]:
    """Return my label on a target and its revisions, newest first (only mine: others' stay blind)."""
    label = my_label(session, target.task.id, target.key, user)
    if label is None:
        return None, []
    rows = session.exec(
        select(LabelRevision, User).join(User, LabelRevision.changed_by_id == User.id, isouter=True)
        .where(LabelRevision.label_id == label.id).order_by(col(LabelRevision.id).desc())
    ).all()
    return label, [HistoryEntry(r.action, r.value, r.rationale, r.evidence, r.guideline_version,
                                u.username if u else "import", r.changed_at, r.error_type) for r, u in rows]
