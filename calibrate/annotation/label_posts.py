"""A label posted from the workbench, checked and saved: the one domain call behind the label-save view.

The item is read and the post checked against it (its task, its target, the sentence named as
evidence, the position a pairwise button posted) before the write lock is taken; inside the
lock, my label on the target is read again and written (save_label: three statements). The
result is the item as the workbench renders it, with the new label in place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlmodel import Session

from calibrate.annotation import NotFound
from calibrate.annotation.items import REQUIRED_TASKS, ItemView, chosen_response, item_view, load_item
from calibrate.annotation.labels import TargetRetired, my_label, save_label, sentence_evidence, target_in, was_retired_here
from calibrate.models import User
from calibrate.reasons import Reason

T = TypeVar("T")


@dataclass(frozen=True)
class LabelPost:
    """What the label form posted: a value, a rationale, an evidence toggle or an error type on one target."""

    task: str
    target: str
    value: str | None = None
    rationale: str | None = None
    evidence: int | None = None  # a context rank (the whole context)
    sentence: tuple[int, int] | None = None  # (context id, sentence index)
    error_type: str | None = None  # one of the task's error types, "" for none given (None: not posted)


@dataclass
class SavedLabel:
    """The item with the saved label, and which cell changed."""

    item: ItemView
    task_id: int
    key: str


def post_label(session: Session, user: User, assignment_id: int, post: LabelPost, *,
               write: Callable[[Callable[[Session], T]], T], release: Callable[[], None] | None = None,
               required: tuple[str, ...] | list[str] = REQUIRED_TASKS) -> SavedLabel:
    """Check `post` against the user's item, save it through `write`, and return the item to render.

    `session` reads the item; `release()` then ends that read before the lock is waited for;
    `write(action)` runs `action(session)` in the caller's write transaction and commits
    (views.session.write). Raises NotFound / AnnotationError (EvidenceError for a sentence that
    is not one of the item's) before anything is written, and TargetRetired when the target's claim or
    context was retired meanwhile: seen before the lock (the page is older than a split) or inside
    it (a split that won the race; save_label checks it there).
    """
    data = load_item(session, user, assignment_id, page=False)
    task = data.task(post.task)
    try:
        target = target_in(data, task, post.target)
    except NotFound:
        if was_retired_here(session, data.assignment.sample_id, task, post.target):
            raise TargetRetired(Reason("target_changed", target=post.target)) from None  # the page showed a claim split or merged since
        raise
    if release is not None:
        release()
    toggle: int | dict | None = post.evidence
    if post.sentence is not None:
        toggle = sentence_evidence(data.contexts, *post.sentence)

    value = post.value
    order = data.shown_order() if task.kind == "pairwise" else None
    if order is not None:  # the buttons post the position the response is shown in
        value = chosen_response(order, value)

    def act(db: Session):
        return save_label(db, data.assignment, user, target, value=value, rationale=post.rationale,
                          evidence_toggle=toggle, existing=my_label(db, task.id, target.key, user),
                          version=data.guidelines[task.id].version if task.id in data.guidelines else None,
                          context_ranks={c.rank for c in data.contexts}, order=order,
                          error_type=post.error_type)

    data.labels[(task.id, target.key)] = write(act)
    return SavedLabel(item_view(data, required=required), task.id, target.key)
