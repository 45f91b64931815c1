"""Blind rules: what a user may see of other annotators' labels and of judge verdicts on an item.

Seeing the machine's verdict or a colleague's label before committing one's own anchors the
judgement. So in the workbench:

- an annotator never sees other annotators' labels or judge verdicts (before or after);
- an engineer or admin sees them only in *review mode* (a switch they turn on), and only on
  items where their own labels are complete.

`may_review` is the one rule; the views ask it before rendering anything of other people's.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session, col, select

from calibrate.annotation.items import ItemView
from calibrate.models import Judge, Label, Task, User, Verdict

REVIEWER_ROLES = ("engineer", "admin")


def may_review(user: User, item: ItemView, review_mode: bool) -> bool:
    """Return whether the user may see other people's labels and the verdicts on this item."""
    return user.role in REVIEWER_ROLES and review_mode and item.status.complete


@dataclass
class Others:
    """Other people's labels and judges' verdicts on one item, by (task id, target key)."""

    labels: dict[tuple[int, str], list[tuple[str, Label]]]
    verdicts: dict[tuple[int, str], list[tuple[str, Verdict]]]

    def empty(self) -> bool:
        return not self.labels and not self.verdicts


def others_on(session: Session, item: ItemView, user: User) -> Others:
    """Return the other annotators' labels (adjudicated gold included) and all verdicts on an item."""
    labels: dict[tuple[int, str], list[tuple[str, Label]]] = {}
    for label, who in session.exec(
        select(Label, User).join(User, User.id == Label.annotator_id)
        .where(Label.sample_id == item.sample.id, (Label.annotator_id != user.id) | col(Label.adjudicated).is_(True))
        .order_by(User.username)
    ).all():
        name = f"{who.username} (adjudicated)" if label.adjudicated else who.username
        labels.setdefault((label.task_id, label.target_key), []).append((name, label))
    verdicts: dict[tuple[int, str], list[tuple[str, Verdict]]] = {}
    for verdict, judge in session.exec(
        select(Verdict, Judge).join(Judge, Judge.id == Verdict.judge_id)
        .where(Verdict.sample_id == item.sample.id, Verdict.sample_index == 0).order_by(Judge.name)
    ).all():
        verdicts.setdefault((verdict.task_id, verdict.target_key), []).append((judge.name, verdict))
    return Others(labels, verdicts)


def task_names(session: Session) -> dict[int, str]:
    """Return task names by id."""
    return dict(session.exec(select(Task.id, Task.name)).all())
