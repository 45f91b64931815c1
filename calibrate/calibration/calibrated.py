"""Which tasks a judge is calibrated on: every task but the claim extraction, which has no agreement statistics.

Shared by the loop's pages (loop.py), the frozen test split and the Alternative Annotator Test.
"""

from __future__ import annotations

from sqlmodel import Session, select

from calibrate import lookup
from calibrate.errors import CalibrationError
from calibrate.models import EXTRACTION, Task
from calibrate.reasons import Reason


def calibrated_task_names(session: Session) -> list[str]:
    """Return the names of the tasks a judge is calibrated on (every task but the extraction)."""
    return list(session.exec(select(Task.name).where(Task.kind != EXTRACTION).order_by(Task.id)).all())


def calibrated_task(session: Session, name: str) -> Task:
    """Return a task by name (NotFound), refusing claim_extraction: it has no agreement statistics."""
    task = lookup.task(session, name)
    if task.kind == EXTRACTION:
        raise CalibrationError(Reason("extraction_not_calibrated", task=task.name))
    return task
