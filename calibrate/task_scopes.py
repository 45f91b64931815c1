"""Tasks scoped to datasets: which datasets a custom task is for, and whether it is offered on one (docs/cli.md, `task add --dataset`).

A task without datasets is global (every built-in task, and a custom task added without
`--dataset`); a scoped task is shown, labelled and judged only on its datasets. The same rule
(`offered_on`) scopes prompts (judges/versions.py).
"""

from __future__ import annotations

from sqlmodel import Session, select

from calibrate import lookup
from calibrate.errors import TaskError
from calibrate.models import Dataset, Task, TaskDataset
from calibrate.reasons import Reason


def scope_datasets(session: Session, names: list[str] | tuple[str, ...] | None) -> list[Dataset]:
    """Return the datasets `--dataset` names (each once, in the order given); NotFound names what exists."""
    out: list[Dataset] = []
    for name in names or ():
        dataset = lookup.dataset(session, name)
        if dataset not in out:
            out.append(dataset)
    return out


def task_scope(session: Session, task: Task) -> list[str]:
    """Return the names of the datasets a task is scoped to (empty: a global task)."""
    return list(session.exec(select(Dataset.name).join(TaskDataset, TaskDataset.dataset_id == Dataset.id)
                             .where(TaskDataset.task_id == task.id).order_by(Dataset.name)).all())


def tasks_scopes(session: Session) -> dict[int, list[str]]:
    """Return task id → the names of its datasets, for the scoped tasks only (one query)."""
    out: dict[int, list[str]] = {}
    for task_id, name in session.exec(select(TaskDataset.task_id, Dataset.name).join(Dataset, Dataset.id == TaskDataset.dataset_id)
                                      .order_by(Dataset.name)).all():
        out.setdefault(task_id, []).append(name)
    return out


def offered_on(scope: list[str] | None, dataset: str) -> bool:
    """Return whether a task or prompt with these datasets (none: global) is shown on `dataset`."""
    return not scope or dataset in scope


def offered_task_names(session: Session, dataset: str, names: list[str]) -> list[str]:
    """Return the task names among `names` offered on `dataset`: the global tasks and those scoped to it."""
    scopes = tasks_scopes(session)
    ids = dict(session.exec(select(Task.name, Task.id)).all())
    return [name for name in names if offered_on(scopes.get(ids.get(name)), dataset)]


def check_task_on_dataset(session: Session, task: Task, dataset: Dataset) -> None:
    """Refuse (TaskError) a task scoped to other datasets than `dataset`: it has no labels or verdicts there."""
    scope = task_scope(session, task)
    if scope and dataset.name not in scope:
        raise TaskError(Reason("task_not_on_dataset", task=task.name, dataset=dataset.name, datasets=", ".join(scope)))
