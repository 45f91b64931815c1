"""Guidelines: one text per task, versioned; every label records the version it was made under.

Saving a guideline never edits the old text: it adds version n + 1. Items whose labels were
made under an older version can be re-queued: their done assignments go back to pending, and
the item view asks the annotator to confirm each outdated label (pressing its key again).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import and_, exists, func, update
from sqlmodel import Session, col, select

from calibrate.annotation import AnnotationError
from calibrate.models import Assignment, Dataset, Guideline, Label, Sample, Task, User, utcnow
from calibrate.reasons import Reason
from calibrate.tasks import BUILTIN_TASKS, JUDGE_ONLY_TASKS

MAX_GUIDELINE_CHARS = 50_000
# "5: correct, complete…", "4 - …", "3) …": a rubric level at the start of a line.
_LEVEL = re.compile(r"^\s*(-?\d+(?:[.,]\d+)?)\s*[:.)–-]\s+(.+?)\s*$")


def current_versions(session: Session) -> dict[int, Guideline]:
    """Return the newest guideline of every task that has one, by task id."""
    newest = select(Guideline.task_id, func.max(Guideline.version).label("version")).group_by(Guideline.task_id).subquery()
    rows = session.exec(
        select(Guideline).join(newest, and_(Guideline.task_id == newest.c.task_id, Guideline.version == newest.c.version))
    ).all()
    return {g.task_id: g for g in rows}


def current_version_of(session: Session, task_id: int) -> int | None:
    """Return the newest guideline version of a task (None if it has no guideline)."""
    return session.exec(select(func.max(Guideline.version)).where(Guideline.task_id == task_id)).one()


def rubric_levels(text: str) -> dict[str, str]:
    """Return the rubric text per level found in a guideline ("5: correct…" → {"5": "correct…"})."""
    levels: dict[str, str] = {}
    for line in (text or "").splitlines():
        match = _LEVEL.match(line)
        if match:
            number = float(match.group(1).replace(",", "."))
            key = str(int(number)) if number.is_integer() else repr(number)
            levels.setdefault(key, match.group(2))
    return levels


@dataclass
class GuidelineRow:
    task: Task
    current: Guideline | None
    versions: int
    outdated_items: int


def guideline_overview(session: Session) -> list[GuidelineRow]:
    """Return every task with its current guideline and how many done items are outdated."""
    tasks = tasks_in_order(session)
    current = current_versions(session)
    counts = dict(session.exec(select(Guideline.task_id, func.count()).group_by(Guideline.task_id)).all())
    return [GuidelineRow(task, current.get(task.id), counts.get(task.id, 0),
                         outdated_assignments(session, task, current.get(task.id)))
            for task in tasks]


def versions_of(session: Session, task: Task) -> list[tuple[Guideline, User | None]]:
    """Return every version of a task's guideline, newest first, with its author."""
    return list(session.exec(
        select(Guideline, User).join(User, Guideline.author_id == User.id, isouter=True)
        .where(Guideline.task_id == task.id).order_by(col(Guideline.version).desc())
    ).all())


def save_guideline(session: Session, task: Task, text: str, author: User) -> Guideline:
    """Add a new version of a task's guideline (the old ones stay); refuse an unchanged text."""
    text = (text or "").replace("\r\n", "\n").strip()
    if not text:
        raise AnnotationError(Reason("guideline_empty"))
    if len(text) > MAX_GUIDELINE_CHARS:
        raise AnnotationError(Reason("guideline_too_long", limit=MAX_GUIDELINE_CHARS))
    newest = current_versions(session).get(task.id)
    if newest is not None and newest.text == text:
        raise AnnotationError(Reason("guideline_unchanged", version=newest.version))
    guideline = Guideline(task_id=task.id, version=(newest.version + 1) if newest else 1, text=text, author_id=author.id)
    session.add(guideline)
    session.flush()
    return guideline


def _outdated_clause(task: Task, version: int):
    """SQL: the assignment's user has a label of `task` on its sample made under an older version."""
    return exists().where(
        Label.sample_id == Assignment.sample_id, Label.annotator_id == Assignment.user_id,
        Label.task_id == task.id, col(Label.adjudicated).is_(False), col(Label.stale).is_(False),
        col(Label.guideline_version).is_not(None), Label.guideline_version < version,
    )


def outdated_assignments(session: Session, task: Task, current: Guideline | None = None,
                         dataset: Dataset | None = None) -> int:
    """Return how many done assignments have labels of `task` made under an older guideline."""
    current = current if current is not None else current_versions(session).get(task.id)
    if current is None or current.version <= 1:
        return 0
    query = select(func.count()).select_from(Assignment).where(Assignment.status == "done", _outdated_clause(task, current.version))
    if dataset is not None:
        query = query.where(Assignment.sample_id.in_(select(Sample.id).where(Sample.dataset_id == dataset.id)))
    return session.exec(query).one()


def requeue_outdated(session: Session, task: Task, dataset: Dataset | None = None) -> int:
    """Put done items with labels of `task` made under an older guideline back in their annotators' queues."""
    current = current_versions(session).get(task.id)
    if current is None or current.version <= 1:
        return 0
    where = [Assignment.status == "done", _outdated_clause(task, current.version)]
    if dataset is not None:
        where.append(Assignment.sample_id.in_(select(Sample.id).where(Sample.dataset_id == dataset.id)))
    result = session.execute(
        update(Assignment).where(*where)
        .values(status="pending", note=f"re-queued: guideline {task.name} v{current.version}", updated_at=utcnow())
        .execution_options(synchronize_session="fetch")
    )
    return result.rowcount or 0


def tasks_in_order(session: Session) -> list[Task]:
    """Return the tasks annotators label: built-in ones first (claim_support, answer_quality, context_relevance),
    then by name (the metric tasks, scored per sample by metric judges, are not among them)."""

    order = {spec.name: i for i, spec in enumerate(BUILTIN_TASKS)}
    tasks = [t for t in session.exec(select(Task)).all() if t.name not in JUDGE_ONLY_TASKS]
    return sorted(tasks, key=lambda t: (order.get(t.name, len(order)), t.name))

