"""An agent's trajectory assigned to an annotator: the item the step workbench tests open (the Flask test client's and
Chromium's). A module, not a fixture: importable by name from tests/ and tests/browser/."""

from __future__ import annotations

from sqlmodel import Session

from calibrate.models import Assignment, Sample, Step, User
from calibrate.tasks import ensure_trajectory_tasks


def trajectory_item(session: Session, sample: Sample, user: User, steps: list[dict]) -> Assignment:
    """Give `sample` the `steps` (in order), offer the trajectory tasks on its dataset, assign it to `user`; commit."""
    for index, step in enumerate(steps):
        session.add(Step(sample_id=sample.id, index=index, **step))
    ensure_trajectory_tasks(session, sample.dataset_id)
    assignment = Assignment(sample_id=sample.id, user_id=user.id, status="pending")
    session.add(assignment)
    session.commit()
    return assignment
