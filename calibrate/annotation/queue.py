"""The queue: what a user labels next, and how far everyone is.

Next item for a user: their own pending assignments by priority (lower first: negative
feedback first when sampled so), then in the seeded order `calibrate sample` created them
(assignment id). When none is left, an annotator claims an open slot (an assignment with no
user) on a sample they do not have yet, in the same order; the claim is a compare-and-set
(`UPDATE … WHERE user_id IS NULL`) inside the caller's write transaction, so two annotators
never get the same slot. Engineers and admins only get what is assigned to them by name.

Statuses: pending → done (submitted); skipped (with a reason) and flagged (for an engineer to
look at, with a note) leave the queue; any of them can be reopened.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, case, exists, func, text, update
from sqlalchemy import select as sa_select
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from calibrate.annotation import AnnotationError
from calibrate.annotation.items import ItemStatus
from calibrate.models import Assignment, Dataset, Sample, User, utcnow
from calibrate.reasons import Reason

STATUSES = ("pending", "done", "skipped", "flagged")
_ASSIGNMENTS = Assignment.__table__
MAX_NOTE_CHARS = 1000
CLAIMING_ROLES = ("annotator",)


class Incomplete(AnnotationError):
    """The item cannot be submitted yet; `status.explain()` says what is missing."""

    def __init__(self, status: ItemStatus) -> None:
        self.status = status
        super().__init__("; ".join(status.explain()))


# Every submit asks for the next item: plain SQL on the queue index (user, status, priority, id).
_NEXT_SQL = text("SELECT id, sample_id, user_id, status, priority FROM assignment "
                 "WHERE user_id = :user_id AND status = 'pending' ORDER BY priority, id LIMIT 1")
_NEXT_IN_DATASET_SQL = text("SELECT a.id, a.sample_id, a.user_id, a.status, a.priority FROM assignment a "
                            "JOIN sample s ON s.id = a.sample_id WHERE a.user_id = :user_id AND a.status = 'pending' "
                            "AND s.dataset_id = :dataset_id ORDER BY a.priority, a.id LIMIT 1")


def pending_assignment(session: Session, user: User, *, dataset_id: int | None = None):
    """Return the user's next pending assignment (a row: priority, then seeded order), or None."""
    if dataset_id is None:
        return session.connection().execute(_NEXT_SQL, {"user_id": user.id}).first()
    return session.connection().execute(_NEXT_IN_DATASET_SQL, {"user_id": user.id, "dataset_id": dataset_id}).first()


def claim_open_slot(session: Session, user: User, *, dataset_id: int | None = None) -> Assignment | None:
    """Give the user the first open slot on a sample they do not have yet; None if there is none.

    Call it in a write transaction (BEGIN IMMEDIATE on SQLite); the update only takes a slot
    that is still open, so a slot is never given twice.
    """
    if user.role not in CLAIMING_ROLES or not user.active:
        return None
    mine = aliased(Assignment)
    query = select(Assignment.id).where(
        col(Assignment.user_id).is_(None), Assignment.status == "pending",
        ~exists().where(mine.sample_id == Assignment.sample_id, mine.user_id == user.id))
    if dataset_id is not None:
        query = query.join(Sample, Sample.id == Assignment.sample_id).where(Sample.dataset_id == dataset_id)
    for slot_id in session.exec(query.order_by(Assignment.priority, Assignment.id).limit(5)).all():
        taken = session.execute(
            update(Assignment).where(Assignment.id == slot_id, col(Assignment.user_id).is_(None))
            .values(user_id=user.id, updated_at=utcnow()).execution_options(synchronize_session=False))
        if taken.rowcount == 1:
            assignment = session.get(Assignment, slot_id)
            session.refresh(assignment)
            return assignment
    return None


def open_slots(session: Session, user: User, *, dataset_id: int | None = None) -> int:
    """Return how many open slots the user could still claim."""
    if user.role not in CLAIMING_ROLES:
        return 0
    mine = aliased(Assignment)
    query = select(func.count(func.distinct(Assignment.sample_id))).where(
        col(Assignment.user_id).is_(None), Assignment.status == "pending",
        ~exists().where(mine.sample_id == Assignment.sample_id, mine.user_id == user.id))
    if dataset_id is not None:
        query = query.join(Sample, Sample.id == Assignment.sample_id).where(Sample.dataset_id == dataset_id)
    return session.exec(query).one()


def set_status(session: Session, assignment, status: str, note: str = "") -> None:
    """Move an assignment (an object or a row with its id) to a status; skipped and flagged need a note saying why."""
    if status not in STATUSES:
        raise AnnotationError(Reason("status_unknown", statuses=', '.join(STATUSES)))
    note = (note or "").strip()
    if status in ("skipped", "flagged") and not note:
        raise AnnotationError(Reason("say_why_skip" if status == "skipped" else "say_why_flag"))
    if len(note) > MAX_NOTE_CHARS:
        raise AnnotationError(Reason("note_too_long", limit=MAX_NOTE_CHARS))
    session.execute(update(Assignment).where(Assignment.id == assignment.id)
                    .values(status=status, note=note, updated_at=utcnow())
                    .execution_options(synchronize_session="evaluate"))


def submit(session: Session, assignment, status: ItemStatus) -> None:
    """Mark the item done, or raise Incomplete when labels are missing or need confirming."""
    if not status.submittable:
        raise Incomplete(status)
    if assignment.status != "done":  # a double submit changes nothing
        set_status(session, assignment, "done")


@dataclass
class Progress:
    """Counts of assignments by status (one annotator, one dataset, or both)."""

    pending: int = 0
    done: int = 0
    skipped: int = 0
    flagged: int = 0

    @property
    def total(self) -> int:
        return self.pending + self.done + self.skipped + self.flagged

    def add(self, status: str, count: int) -> None:
        setattr(self, status, getattr(self, status, 0) + count)


@dataclass
class DatasetQueue:
    dataset: Dataset
    progress: Progress
    open_slots: int = 0


def my_queue(session: Session, user: User) -> list[DatasetQueue]:
    """Return my progress per dataset (datasets where I have work or could claim some)."""
    rows = session.exec(
        select(Sample.dataset_id, Assignment.status, func.count()).join(Sample, Sample.id == Assignment.sample_id)
        .where(Assignment.user_id == user.id).group_by(Sample.dataset_id, Assignment.status)
    ).all()
    progress: dict[int, Progress] = {}
    for dataset_id, status, count in rows:
        progress.setdefault(dataset_id, Progress()).add(status, count)
    slots: dict[int, int] = {}
    if user.role in CLAIMING_ROLES:
        mine = aliased(Assignment)
        slots = dict(session.exec(
            select(Sample.dataset_id, func.count(func.distinct(Assignment.sample_id))).join(Sample, Sample.id == Assignment.sample_id)
            .where(col(Assignment.user_id).is_(None), Assignment.status == "pending",
                   ~exists().where(mine.sample_id == Assignment.sample_id, mine.user_id == user.id))
            .group_by(Sample.dataset_id)
        ).all())
    ids = sorted(set(progress) | set(slots))
    datasets = {d.id: d for d in session.exec(select(Dataset).where(col(Dataset.id).in_(ids))).all()} if ids else {}
    return [DatasetQueue(datasets[i], progress.get(i, Progress()), slots.get(i, 0))
            for i in sorted(ids, key=lambda i: datasets[i].name)]


def my_assignments(session: Session, user: User, statuses: tuple[str, ...], *, limit: int = 50) -> list[tuple[Assignment, Sample, Dataset]]:
    """Return my assignments in some statuses, most recently changed first."""
    return list(session.exec(
        select(Assignment, Sample, Dataset).join(Sample, Sample.id == Assignment.sample_id)
        .join(Dataset, Dataset.id == Sample.dataset_id)
        .where(Assignment.user_id == user.id, col(Assignment.status).in_(statuses))
        .order_by(col(Assignment.updated_at).desc(), col(Assignment.id).desc()).limit(limit)
    ).all())


def my_progress(session: Session, user: User) -> Progress:
    """Return my progress over all my assignments (read from the queue index alone: cheap on every page)."""
    progress = Progress()
    for status, count in session.execute(
        sa_select(_ASSIGNMENTS.c.status, func.count()).where(_ASSIGNMENTS.c.user_id == user.id).group_by(_ASSIGNMENTS.c.status)
    ).all():
        progress.add(status, count)
    return progress


@dataclass
class AnnotatorProgress:
    user: User
    dataset: Dataset
    progress: Progress


def team_progress(session: Session) -> tuple[list[AnnotatorProgress], list[tuple[Dataset, Progress, int]]]:
    """Return progress per (annotator, dataset) and per dataset (with its open slots)."""
    rows = session.exec(
        select(Assignment.user_id, Sample.dataset_id, Assignment.status, func.count())
        .join(Sample, Sample.id == Assignment.sample_id)
        .group_by(Assignment.user_id, Sample.dataset_id, Assignment.status)
    ).all()
    users = {u.id: u for u in session.exec(select(User)).all()}
    datasets = {d.id: d for d in session.exec(select(Dataset)).all()}
    per_user: dict[tuple[int, int], Progress] = {}
    per_dataset: dict[int, Progress] = {}
    open_by_dataset: dict[int, int] = {}
    for user_id, dataset_id, status, count in rows:
        per_dataset.setdefault(dataset_id, Progress()).add(status, count)
        if user_id is None:
            if status == "pending":
                open_by_dataset[dataset_id] = open_by_dataset.get(dataset_id, 0) + count
            continue
        per_user.setdefault((user_id, dataset_id), Progress()).add(status, count)
    annotators = [AnnotatorProgress(users[u], datasets[d], p) for (u, d), p in per_user.items()]
    annotators.sort(key=lambda a: (a.dataset.name, a.user.username))
    by_dataset = [(datasets[d], p, open_by_dataset.get(d, 0)) for d, p in per_dataset.items()]
    by_dataset.sort(key=lambda row: row[0].name)
    return annotators, by_dataset


def for_review(session: Session, *, limit: int = 200) -> list[tuple[Assignment, Sample, Dataset, User | None]]:
    """Return skipped and flagged assignments (flagged first), newest first, for engineers and admins."""
    return list(session.exec(
        select(Assignment, Sample, Dataset, User).join(Sample, Sample.id == Assignment.sample_id)
        .join(Dataset, Dataset.id == Sample.dataset_id).join(User, User.id == Assignment.user_id, isouter=True)
        .where(col(Assignment.status).in_(("skipped", "flagged")))
        .order_by(case((Assignment.status == "flagged", 0), else_=1), col(Assignment.updated_at).desc())
        .limit(limit)
    ).all())


def release_pending(session: Session, user: User) -> int:
    """Return a user's pending assignments to the open pool (when the account is deactivated)."""
    result = session.execute(
        update(Assignment).where(and_(Assignment.user_id == user.id, Assignment.status == "pending"))
        .values(user_id=None, updated_at=utcnow()).execution_options(synchronize_session="fetch"))
    return result.rowcount or 0
