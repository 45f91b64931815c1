"""Adjudication: where annotators disagree, an engineer or admin decides the gold label.

A target is *disputed* when, among its annotators' current labels (not stale):

- categorical tasks: there are two or more different values (a tie — no majority, so no gold
  — or an outvoted minority);
- ordinal and continuous tasks: the highest and the lowest value are `SPREAD` (2) or more
  apart.

The adjudicated label is its own Label row (`adjudicated = true`, `annotator_id` = who
decided, `rationale` = the note, which is required); there is at most one per target:
deciding again updates it and keeps the previous decision in a LabelRevision. The calibration
report takes it as the gold over the majority.

A pairwise dispute shows the sample's responses (with their ids) and the order each annotator
saw; the gold must be one of the sample's response ids or tie.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from sqlalchemy import Float, case, cast, func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from calibrate.annotation import AnnotationError, NotFound
from calibrate.annotation.guidelines import current_version_of
from calibrate.annotation.items import TaskNotOffered, marked_contexts
from calibrate.models import LABEL_KINDS, Claim, Context, Dataset, Label, LabelRevision, Response, Sample, Task, User, utcnow
from calibrate.reasons import Reason
from calibrate.targets import where
from calibrate.task_scopes import check_task_on_dataset
from calibrate.task_values import canonical_value, pairwise_value
from calibrate.tasks import TaskError

SPREAD = 2
MAX_NOTE_CHARS = 5000


@dataclass
class Vote:
    annotator: str
    value: str
    rationale: str
    evidence: list | None = None  # Label.evidence: context ranks and sentences (docs/formats.md)
    order: list[str] | None = None  # pairwise: the response ids in the order this annotator saw them
    error_type: str | None = None  # Label.error_type: what was wrong, beside the task's negative label


@dataclass
class Dispute:
    """One disputed target: who said what, and the decision if there is one."""

    task: Task
    target_key: str
    sample: Sample
    target_text: str
    where: str
    votes: list[Vote]
    decision: Label | None = None
    decided_by: str = ""
    kind: str = ""  # tie | disagreement | spread
    dataset: str = ""
    responses: list[Response] = field(default_factory=list)  # pairwise: the sample's responses in import order
    # The sample's retrieved contexts with the evidence each annotator marked (annotation.items.marked_contexts).
    contexts: list = field(default_factory=list)

    @property
    def name(self) -> str:
        """Return the target as people name it: "demo-004 · claim 1" (calibrate/targets.py)."""
        return f"{self.sample.external_id} · {self.where}"

    @property
    def dom_id(self) -> str:
        return f"dispute-{self.task.id}-{self.target_key.replace(':', '-')}"


@dataclass
class DisputePage:
    disputes: list[Dispute]
    total: int
    page: int
    pages: int
    counts: dict[str, int] = field(default_factory=dict)


def _disputed(session: Session, dataset: Dataset, task: Task) -> list[tuple[str, bool]]:
    """Return (target key, decided?) of every disputed target of a task in a dataset, in data order.

    One pass over the task's labels in the dataset: the annotators' votes decide whether a target
    is disputed, an adjudicated label among them whether it is decided.
    """
    voting = Label.adjudicated.is_(False)
    if task.kind in LABEL_KINDS:
        disputed = func.count(func.distinct(case((voting, Label.value)))) > 1
    else:
        number = case((voting, cast(Label.value, Float)))
        disputed = func.max(number) - func.min(number) >= SPREAD
    rows = session.execute(
        sa_select(Label.target_key, func.max(case((Label.adjudicated.is_(True), 1), else_=0)))
        # IN (the dataset's sample ids, from an index) instead of a join: no sample row is read.
        .where(Label.sample_id.in_(sa_select(Sample.id).where(Sample.dataset_id == dataset.id)),
               Label.task_id == task.id, Label.stale.is_(False))
        .group_by(Label.target_key).having(disputed)
    ).all()
    # Data order: by the target's numeric id (claim:9 before claim:10).
    return sorted(((key, bool(decided)) for key, decided in rows), key=lambda row: int(row[0].partition(":")[2]))


def disputes(session: Session, dataset: Dataset, task: Task, *, show: str = "open", page: int = 1,
             per_page: int = 25) -> DisputePage:
    """Return one page of a task's disputed targets in a dataset (open ones, decided ones, or all)."""
    everything = _disputed(session, dataset, task)
    counts = {"open": sum(not decided for _, decided in everything), "decided": sum(decided for _, decided in everything)}
    chosen = [key for key, decided in everything if show == "all" or decided == (show == "decided")]
    total = len(chosen)
    pages = max((total + per_page - 1) // per_page, 1)
    page = min(max(page, 1), pages)
    return DisputePage(_load(session, task, chosen[(page - 1) * per_page: page * per_page]), total, page, pages, counts)


def _load(session: Session, task: Task, keys: list[str]) -> list[Dispute]:
    if not keys:
        return []
    rows = session.exec(
        select(Label, User).join(User, User.id == Label.annotator_id)
        .where(Label.task_id == task.id, col(Label.target_key).in_(keys), col(Label.stale).is_(False))
        .order_by(User.username)
    ).all()
    by_key: dict[str, list[tuple[Label, User]]] = {}
    for label, user in rows:
        by_key.setdefault(label.target_key, []).append((label, user))
    sample_ids = {label.sample_id for label, _ in rows}
    samples = {s.id: s for s in session.exec(select(Sample).where(col(Sample.id).in_(sample_ids))).all()}
    names = dict(session.exec(select(Dataset.id, Dataset.name).where(
        col(Dataset.id).in_({s.dataset_id for s in samples.values()}))).all())
    texts: dict[str, tuple[str, str]] = {}
    responses: dict[int, list[Response]] = {}
    if task.kind == "pairwise":
        for response in session.exec(select(Response).where(col(Response.sample_id).in_(sample_ids))
                                     .order_by(Response.sample_id, Response.position)).all():
            responses.setdefault(response.sample_id, []).append(response)
    contexts: dict[int, list[Context]] = {}
    for context in session.exec(select(Context).where(col(Context.sample_id).in_(sample_ids), Context.active.is_(True))
                                .order_by(Context.sample_id, Context.rank)).all():
        contexts.setdefault(context.sample_id, []).append(context)
    ids = [int(k.split(":")[1]) for k in keys]
    if task.target == "claim":
        for claim in session.exec(select(Claim).where(col(Claim.id).in_(ids))).all():
            texts[f"claim:{claim.id}"] = (claim.text, where("claim", claim.index))
    elif task.target == "context":
        for context in session.exec(select(Context).where(col(Context.id).in_(ids))).all():
            texts[f"context:{context.id}"] = (context.text, where("context", context.rank))
    out = []
    for key in keys:
        entries = by_key.get(key, [])
        if not entries:
            continue
        votes = [Vote(user.username, label.value, label.rationale, label.evidence, label.order, label.error_type) for label, user in entries
                 if not label.adjudicated]
        decision = next(((label, user) for label, user in entries if label.adjudicated), None)
        sample = samples[entries[0][0].sample_id]
        text, place = texts.get(key, (sample.answer, where("sample", None)))
        if task.kind == "pairwise":
            text, place = "", where("responses", None)
        out.append(Dispute(task, key, sample, text, place, votes, decision[0] if decision else None,
                           decision[1].username if decision else "", _kind(task, votes), names[sample.dataset_id],
                           responses.get(sample.id, []),
                           marked_contexts(contexts.get(sample.id, []), [(v.annotator, v.evidence) for v in votes],
                                           target_id=int(key.split(":")[1]) if task.target == "context" else None)))
    return out


def _kind(task: Task, votes: list[Vote]) -> str:
    if task.kind not in LABEL_KINDS:
        return "spread"
    counts = Counter(v.value for v in votes).most_common()
    return "tie" if len(counts) > 1 and counts[0][1] == counts[1][1] else "disagreement"


def dispute(session: Session, task: Task, key: str) -> Dispute:
    """Return one target's dispute view (whether or not it is still disputed)."""
    found = _load(session, task, [key])
    if not found:
        raise NotFound(key)
    return found[0]


def adjudicate(session: Session, user: User, task: Task, key: str, value: object, note: str) -> Label:
    """Set (or change) the adjudicated gold label of a target, with the decider's note."""
    note = (note or "").replace("\r\n", "\n").strip()
    if not note:
        raise AnnotationError(Reason("adjudication_needs_note"))
    if len(note) > MAX_NOTE_CHARS:
        raise AnnotationError(Reason("note_too_long", limit=MAX_NOTE_CHARS))
    votes = session.exec(select(Label).where(Label.task_id == task.id, Label.target_key == key,
                                             col(Label.adjudicated).is_(False))).first()
    if votes is None:
        raise NotFound(key)
    try:  # a task scoped to other datasets has no gold on this one (task_scopes; the view answers 400)
        check_task_on_dataset(session, task, session.get(Dataset, session.get(Sample, votes.sample_id).dataset_id))
    except TaskError as exc:
        raise TaskNotOffered.carrying(exc) from None
    try:
        if task.kind == "pairwise":
            ids = session.exec(select(Response.key).where(Response.sample_id == votes.sample_id).order_by(Response.position)).all()
            canonical = pairwise_value(task, value, list(ids))
        else:
            canonical = canonical_value(task, value)
    except TaskError as exc:
        raise AnnotationError.carrying(exc) from None
    now = utcnow()
    version = current_version_of(session, task.id)
    gold = session.exec(select(Label).where(Label.task_id == task.id, Label.target_key == key,
                                            col(Label.adjudicated).is_(True))).first()
    if gold is None:
        gold = Label(task_id=task.id, sample_id=votes.sample_id, claim_id=votes.claim_id, context_id=votes.context_id,
                     target_key=key, annotator_id=user.id, value=canonical, rationale=note, adjudicated=True,
                     guideline_version=version, source="adjudication", created_at=now, updated_at=now)
        session.add(gold)
        session.flush()
        session.add(LabelRevision(label_id=gold.id, action="create", value=canonical, rationale=note,
                                  guideline_version=version, source="adjudication", changed_by_id=user.id, changed_at=now))
        return gold
    if (gold.value, gold.rationale, gold.annotator_id) == (canonical, note, user.id):
        return gold
    session.add(LabelRevision(label_id=gold.id, action="update", value=gold.value, rationale=gold.rationale,
                              evidence=gold.evidence, guideline_version=gold.guideline_version, source="adjudication",
                              changed_by_id=user.id, changed_at=now))
    gold.value, gold.rationale, gold.annotator_id, gold.guideline_version = canonical, note, user.id, version
    gold.updated_at = now
    session.add(gold)
    session.flush()
    return gold
