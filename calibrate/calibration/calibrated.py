"""Which tasks a judge is calibrated on: every task but the claim extraction and the instruction rewrite, which have no
agreement statistics.

Shared by the loop's pages (loop.py), the frozen test split and the Alternative Annotator Test.
"""

from __future__ import annotations

from sqlmodel import Session, select

from calibrate import lookup
from calibrate.errors import CalibrationError
from calibrate.models import EXTRACTION, REWRITE, Task
from calibrate.reasons import Reason


def calibrated_task_names(session: Session) -> list[str]:
    """Return the names of the tasks a judge is calibrated on (every task but the extraction and the rewrite)."""
    return list(session.exec(select(Task.name).where(Task.kind.not_in((EXTRACTION, REWRITE))).order_by(Task.id)).all())


def calibrated_task(session: Session, name: str) -> Task:
    """Return a task by name (NotFound), refusing claim_extraction: it has no agreement statistics."""
    task = lookup.task(session, name)
    if task.kind == EXTRACTION:
        raise CalibrationError(Reason("extraction_not_calibrated", task=task.name))
    if task.kind == REWRITE:
        raise CalibrationError(Reason("rewrite_not_calibrated", task=task.name))
    return task
