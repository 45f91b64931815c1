"""The jobs of a task's targets: one way for `judge run` (runner.py) and `calibrate watch` (watch.py) to make them.

A task's targets (items.select_targets) become its jobs by what its registered kinds say
(calibrate/judged.py): a task judged per presentation order gets one job per order of each sample
with two or more responses (items.expand_orders; the samples with fewer are counted), and a
metric task keeps the samples its scorer can measure (metric_runs.measurable; the others are
counted by reason, and the items read to decide are kept for the run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session

from calibrate.judged import judging
from calibrate.judges import metric_runs
from calibrate.judges.items import Target, expand_orders
from calibrate.models import Task

WITHOUT_TWO_RESPONSES = "without two responses"  # a skipped count's reason: a per-order task's sample with < 2 responses


@dataclass
class Jobs:
    """A task's jobs, and what was left out and why."""

    targets: list[Target]
    without_orders: int = 0  # per-order tasks: samples with fewer than two responses
    skipped: dict[str, int] = field(default_factory=dict)  # metric tasks: samples with nothing to measure, by reason
    loaded: dict[int, dict[str, Any]] | None = None  # metric tasks: the items read to decide (sample id → fields)


def task_jobs(session: Session, task: Task, targets: list[Target], *, orders: str | None = None,
              keep: Callable[[list[Target]], list[Target]] | None = None) -> Jobs:
    """Return the jobs of `targets`: per presentation order (`orders`, default both) when the task is judged so, then
    `keep` (the caller's filter: jobs already judged, samples waiting for claims), then the measurable ones of a
    metric task."""
    judged = judging(task)
    jobs = Jobs(targets)
    if judged.kind.orders:
        jobs.targets, jobs.without_orders = expand_orders(session, targets, orders or "both")
    if keep is not None:
        jobs.targets = keep(jobs.targets)
    if judged.metric:
        jobs.targets, jobs.skipped, jobs.loaded = metric_runs.measurable(session, task, jobs.targets)
    return jobs
