"""Experts correct a sample's claims in the workbench: split one in two, merge it with the next,
edit its text; undo; and the history of every change (docs/annotation.md, "Editing claims").

Every change retires the claims it replaces (`active = false`, never deleted) and adds new ones
(origin `expert`), renumbers the sample's active claims in order, marks the sample's claim
source `…+edited` (calibrate/claimsets.py) and records a `ClaimEdit`: who, when, the claims
before and after, the labels it flagged stale. Labels on a changed claim become stale (reason
"claim 3 split by ana"), labels on untouched claims stay as they are.

Spans: a part of a split claim keeps its place in the answer when the claim had one; merging
two claims whose spans are in order takes the answer's own text between them ("0,4 mg al día"
+ "hasta la semana 12" → "0,4 mg al día y hasta la semana 12"), else joins the two texts with a
space; an edited or merged text is then found verbatim in the answer, or has no span.

Concurrency: the claims are the sample's, shared by its annotators. A change is refused while
an affected claim carries a current label of *another* annotator (adjudicated gold included):
changing it would silently make their work stale, so the expert flags the item instead. The
caller runs each change inside one write transaction (BEGIN IMMEDIATE), which reads the claims
again: a claim changed meanwhile by someone else is refused ("changed since the page was
loaded"), so two experts never split the same claim twice.

Undo (`undo_edit`) is for the expert's own last change, newest first (the workbench's `u`
interleaves it with label changes by time, `undo_last_action`): the new claims are retired,
the old ones come back with their indices, and the labels the change flagged stale are
current again. A label someone gave a new claim meanwhile is not lost: it is flagged stale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from calibrate.annotation import AnnotationError, NotFound
from calibrate.annotation.labels import UI, Undone, last_label_change, undo_label_change
from calibrate.claimsets import active_claims, edited, flag_stale
from calibrate.models import EXPERT, Claim, ClaimEdit, Label, LabelRevision, Sample, User, utcnow
from calibrate.reasons import Reason
from calibrate.task_values import MAX_CLAIM_CHARS

ACTIONS = ("split", "merge", "edit")
WORDS = {"split": "split", "merge": "merged", "edit": "edited"}


def _snapshot(claim: Claim) -> dict[str, Any]:
    return {"id": claim.id, "index": claim.index, "text": claim.text, "start": claim.start, "end": claim.end}


def _claim_of(claims: list[Claim], claim_id: int) -> Claim:
    claim = next((c for c in claims if c.id == claim_id), None)
    if claim is None:
        raise AnnotationError(Reason("claim_changed"))
    return claim


def _others_labels(session: Session, claim_ids: Sequence[int], user: User) -> int:
    """Return how many other annotators hold a current label on these claims."""
    rows = session.exec(select(Label.annotator_id).where(col(Label.claim_id).in_(list(claim_ids)), col(Label.stale).is_(False),
                                                         Label.annotator_id != user.id)).all()
    return len(set(rows))


def _check_others(session: Session, claims: Sequence[Claim], user: User) -> None:
    n = _others_labels(session, [c.id for c in claims], user)
    if n:
        raise AnnotationError(Reason("claims_have_others_labels" if len(claims) > 1 else "claim_has_others_labels",
                                     numbers=", ".join(str(c.index + 1) for c in claims), count=n))


def _clean(text: str) -> str:
    text = (text or "").replace("\r\n", "\n").strip()
    if not text:
        raise AnnotationError(Reason("claim_needs_text"))
    if len(text) > MAX_CLAIM_CHARS:
        raise AnnotationError(Reason("claim_too_long", limit=MAX_CLAIM_CHARS))
    return text


def _locate(answer: str, text: str, taken: set[int]) -> tuple[int, int]:
    """Return the first verbatim occurrence of `text` in the answer not taken by another claim, else (-1, -1)."""
    start = answer.find(text)
    while start >= 0 and start in taken:
        start = answer.find(text, start + 1)
    return (start, start + len(text)) if start >= 0 else (-1, -1)


def _exact(answer: str, claim: Claim) -> bool:
    return 0 <= claim.start < claim.end <= len(answer) and answer[claim.start:claim.end] == claim.text


@dataclass
class _Part:
    text: str
    start: int = -1
    end: int = -1


def _apply(session: Session, sample: Sample, user: User, action: str, claims: list[Claim], old: list[Claim],
           parts: list[_Part]) -> ClaimEdit:
    """Replace the contiguous claims `old` by `parts`, renumber, flag stale labels, record the edit."""
    position = claims.index(old[0])
    now = utcnow()
    new = [Claim(sample_id=sample.id, index=position + i, text=p.text, start=p.start, end=p.end, origin=EXPERT)
           for i, p in enumerate(parts)]
    for claim in old:
        claim.active = False
        session.add(claim)
    session.flush()
    for claim in new:
        session.add(claim)
    session.flush()
    order = claims[:position] + new + claims[position + len(old):]
    for index, claim in enumerate(order):
        if claim.index != index:
            claim.index = index
            session.add(claim)
    where = " and ".join(f"claim {c.index + 1}" for c in old)
    stale = flag_stale(session, [c.id for c in old], f"{where} {WORDS[action]} by {user.username}", user_id=user.id)
    edit = ClaimEdit(sample_id=sample.id, user_id=user.id, action=action, before=[_snapshot(c) for c in old],
                     after=[_snapshot(c) for c in new], source_before=sample.claim_source,
                     source_after=edited(sample.claim_source), stale_labels=stale, created_at=now)
    sample.claim_source, sample.updated_at = edited(sample.claim_source), now
    session.add(sample)
    session.add(edit)
    session.flush()
    return edit


def split_claim(session: Session, sample: Sample, user: User, claim_id: int, at: int) -> ClaimEdit:
    """Split a claim in two at character `at` of its text (both parts need text)."""
    claims = active_claims(session, sample.id)
    claim = _claim_of(claims, claim_id)
    _check_others(session, [claim], user)
    text = claim.text
    if not 0 < at < len(text):
        raise AnnotationError(Reason("split_inside", last=len(text) - 1))
    left_raw, right_raw = text[:at], text[at:]
    left, right = left_raw.strip(), right_raw.strip()
    if not left or not right:
        raise AnnotationError(Reason("split_between_words"))
    if _exact(sample.answer, claim):
        left_start = claim.start + len(left_raw) - len(left_raw.lstrip())
        right_start = claim.start + at + len(right_raw) - len(right_raw.lstrip())
        parts = [_Part(left, left_start, left_start + len(left)), _Part(right, right_start, right_start + len(right))]
    else:
        taken = {c.start for c in claims if c.id != claim.id and c.start >= 0}
        parts = []
        for piece in (left, right):
            start, end = _locate(sample.answer, piece, taken)
            taken.add(start)
            parts.append(_Part(piece, start, end))
    return _apply(session, sample, user, "split", claims, [claim], parts)


def merge_with_next(session: Session, sample: Sample, user: User, claim_id: int) -> ClaimEdit:
    """Merge a claim with the one after it."""
    claims = active_claims(session, sample.id)
    claim = _claim_of(claims, claim_id)
    position = claims.index(claim)
    if position + 1 >= len(claims):
        raise AnnotationError(Reason("merge_last_claim", number=claim.index + 1))
    following = claims[position + 1]
    _check_others(session, [claim, following], user)
    answer = sample.answer
    between_free = all(not (claim.end <= c.start < following.start) for c in claims if c not in (claim, following))
    if _exact(answer, claim) and _exact(answer, following) and claim.end <= following.start and between_free \
            and len(answer[claim.start:following.end]) <= MAX_CLAIM_CHARS:
        part = _Part(answer[claim.start:following.end], claim.start, following.end)
    else:
        text = _clean(f"{claim.text} {following.text}")
        taken = {c.start for c in claims if c not in (claim, following) and c.start >= 0}
        part = _Part(text, *_locate(answer, text, taken))
    return _apply(session, sample, user, "merge", claims, [claim, following], [part])


def edit_claim(session: Session, sample: Sample, user: User, claim_id: int, text: str) -> ClaimEdit | None:
    """Change a claim's text (None when the text is unchanged: nothing to record)."""
    claims = active_claims(session, sample.id)
    claim = _claim_of(claims, claim_id)
    text = _clean(text)
    if text == claim.text:
        return None
    _check_others(session, [claim], user)
    taken = {c.start for c in claims if c.id != claim.id and c.start >= 0}
    return _apply(session, sample, user, "edit", claims, [claim], [_Part(text, *_locate(sample.answer, text, taken))])


def last_edit(session: Session, sample_id: int, user: User) -> ClaimEdit | None:
    """Return my newest claim edit on the sample that is not undone."""
    return session.exec(select(ClaimEdit).where(ClaimEdit.sample_id == sample_id, ClaimEdit.user_id == user.id,
                                                col(ClaimEdit.undone_at).is_(None)).order_by(col(ClaimEdit.id).desc())).first()


def undo_edit(session: Session, sample: Sample, user: User, edit: ClaimEdit) -> ClaimEdit:
    """Undo one of my claim edits: its new claims retired, the old ones back, their labels current again."""
    claims = active_claims(session, sample.id)
    ids = {c.id for c in claims}
    after = [int(c["id"]) for c in edit.after]
    if not all(claim_id in ids for claim_id in after):
        raise AnnotationError(Reason("undo_changed_again"))
    _check_others(session, [c for c in claims if c.id in after], user)
    position = min(i for i, c in enumerate(claims) if c.id in after)
    restored = [session.get(Claim, int(c["id"])) for c in edit.before]
    now = utcnow()
    for claim in claims:
        if claim.id in after:
            claim.active = False
            session.add(claim)
    session.flush()
    for claim in restored:
        claim.active = True
        session.add(claim)
    session.flush()
    order = [c for c in claims[:position] if c.id not in after] + restored + [c for c in claims[position:] if c.id not in after]
    for index, claim in enumerate(order):
        if claim.index != index:
            claim.index = index
            session.add(claim)
    # A label given to a new claim since (mine, not undone first) is kept, flagged stale.
    flag_stale(session, after, f"claim edit undone by {user.username}", user_id=user.id)
    for label_id in edit.stale_labels or []:
        label = session.get(Label, label_id)
        if label is None or not label.stale:
            continue
        session.add(LabelRevision(label_id=label.id, action="restore", value=label.value, rationale=label.rationale,
                                  evidence=label.evidence, guideline_version=label.guideline_version, source=UI,
                                  changed_by_id=user.id, changed_at=now))
        label.stale, label.stale_reason, label.updated_at = False, "", now
        session.add(label)
    if sample.claim_source == edit.source_after:
        sample.claim_source = edit.source_before
        sample.updated_at = now
        session.add(sample)
    edit.undone_at = now
    session.add(edit)
    session.flush()
    return edit


@dataclass
class UndoneAction:
    """What `u` undid on an item: a label change (`label`) or a claim edit (`edit`)."""

    label: Undone | None = None
    edit: ClaimEdit | None = None

    @property
    def what(self) -> str:
        if self.edit is not None:
            return f"the {self.edit.action} of " + " and ".join(f"claim {c['index'] + 1}" for c in self.edit.before)
        return self.label.what if self.label else ""


def undo_last_action(session: Session, assignment, user: User) -> UndoneAction | None:
    """Undo my last change on this item, a label's or the claims', whichever came last (None: nothing to undo)."""
    label_change = last_label_change(session, assignment, user)
    edit = last_edit(session, assignment.sample_id, user)
    if edit is None and label_change is None:
        return None
    label_time = label_change[0].changed_at if label_change else None
    if edit is not None and (label_time is None or _later(edit.created_at, label_time)):
        sample = session.get(Sample, assignment.sample_id)
        return UndoneAction(edit=undo_edit(session, sample, user, edit))
    return UndoneAction(label=undo_label_change(session, user, *label_change))


def _later(a: datetime, b: datetime) -> bool:
    # SQLite hands datetimes back naive (UTC), PostgreSQL aware: compare them as UTC.
    return a.replace(tzinfo=None) >= b.replace(tzinfo=None)


@dataclass
class HistoryRow:
    """One claim edit as the history table shows it."""

    id: int
    action: str
    who: str
    when: datetime
    before: list[dict[str, Any]]
    after: list[dict[str, Any]]
    undone: bool
    stale_labels: int


def claim_history(session: Session, sample_id: int) -> list[HistoryRow]:
    """Return every claim edit of a sample, newest first, with who made it."""
    rows = session.exec(select(ClaimEdit, User.username).join(User, User.id == ClaimEdit.user_id)
                        .where(ClaimEdit.sample_id == sample_id).order_by(col(ClaimEdit.id).desc())).all()
    return [HistoryRow(e.id, e.action, name, e.created_at, e.before, e.after, e.undone_at is not None,
                       len(e.stale_labels or [])) for e, name in rows]


def sample_of(session: Session, assignment) -> Sample:
    """Return the assignment's sample (NotFound if it is gone)."""
    sample = session.get(Sample, assignment.sample_id)
    if sample is None:
        raise NotFound(Reason("no_such_sample", sample_id=assignment.sample_id))
    return sample
