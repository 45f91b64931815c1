"""Tasks scoped to datasets: which datasets a custom task is for, and whether it is offered on one (docs/cli.md,
`task add --dataset`, `task edit --dataset` / `--all-datasets`).

A task without datasets is global (every built-in task, and a custom task added without
`--dataset`); a scoped task is shown, labelled and judged only on its datasets. The same rule
(`offered_on`) scopes prompts (judges/versions.py). A task's datasets change with `set_task_scope`,
which never leaves labels, verdicts or prompts on a dataset the task is no longer offered on.
"""

from __future__ import annotations

from sqlmodel import Session, func, select

from calibrate import lookup
from calibrate.errors import TaskError
from calibrate.models import Dataset, Label, Prompt, PromptDataset, Sample, Task, TaskDataset, Verdict
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


def check_task_named_on_dataset(session: Session, task_name: str | None, dataset_name: str | None) -> None:
    """Refuse (TaskError, `task_not_on_dataset`) a request naming a task scoped to other datasets than the one it names;
    names that do not exist pass (the caller's own lookup refuses them, naming what exists)."""
    if not task_name or not dataset_name:
        return
    task = session.exec(select(Task).where(Task.name == task_name)).first()
    dataset = session.exec(select(Dataset).where(Dataset.name == dataset_name)).first() if task is not None else None
    if dataset is not None:
        check_task_on_dataset(session, task, dataset)


def check_task_on_dataset(session: Session, task: Task, dataset: Dataset) -> None:
    """Refuse (TaskError) a task scoped to other datasets than `dataset`: it has no labels or verdicts there."""
    scope = task_scope(session, task)
    if scope and dataset.name not in scope:
        raise TaskError(Reason("task_not_on_dataset", task=task.name, dataset=dataset.name, datasets=", ".join(scope)))


def uses_reason(uses: list[Reason]) -> Reason:
    """Join one to three counts ("3 labels and 1 verdicts"), each worded in the reader's language, with "and"."""
    return Reason(("uses_one", "uses_two", "uses_three")[len(uses) - 1], **dict(zip(("first", "second", "third"), uses, strict=False)))


def uses_by_dataset(session: Session, task: Task) -> dict[int, tuple[str, list[Reason]]]:
    """Return dataset id → (its name, the counts of the task's labels, verdicts and prompts scoped to it), for the
    datasets that hold any (three grouped queries)."""
    counts: dict[int, dict[str, int]] = {}
    for model, what in ((Label, "uses_labels"), (Verdict, "uses_verdicts")):
        for dataset_id, n in session.exec(select(Sample.dataset_id, func.count()).select_from(model)
                                          .join(Sample, Sample.id == model.sample_id).where(model.task_id == task.id)
                                          .group_by(Sample.dataset_id)).all():
            counts.setdefault(dataset_id, {})[what] = n
    for dataset_id, n in session.exec(select(PromptDataset.dataset_id, func.count()).join(Prompt, Prompt.id == PromptDataset.prompt_id)
                                      .where(Prompt.task_id == task.id).group_by(PromptDataset.dataset_id)).all():
        counts.setdefault(dataset_id, {})["uses_prompts"] = n
    names = dict(session.exec(select(Dataset.id, Dataset.name).where(Dataset.id.in_(list(counts)))).all()) if counts else {}
    order = ("uses_labels", "uses_verdicts", "uses_prompts")
    return {dataset_id: (names[dataset_id], [Reason(what, count=found[what]) for what in order if what in found])
            for dataset_id, found in counts.items()}


def set_task_scope(session: Session, task: Task, names: list[str] | tuple[str, ...]) -> list[str]:
    """Scope a custom task to the datasets `names` (each once; none: global again), replacing its datasets; return what
    changed, in words (`task edit --dataset` / `--all-datasets`).

    Refused (TaskError, nothing changed): a built-in task (built-in tasks stay global), an unknown dataset (NotFound
    naming the known ones), and datasets that leave out one holding labels, verdicts or prompts of the task: it
    names that dataset and the counts (labels are never orphaned). The caller bumps the task's revision, so the
    workbench reads the tasks again.
    """
    if task.builtin:
        raise TaskError(Reason("task_scope_builtin", task=task.name))
    scope = scope_datasets(session, names)
    kept = {d.id for d in scope}
    if scope:
        for dataset_id, (name, uses) in sorted(uses_by_dataset(session, task).items(), key=lambda item: item[1][0]):
            if dataset_id not in kept:
                raise TaskError(Reason("task_scope_orphans", task=task.name, dataset=name, uses=uses_reason(uses)))
    before = task_scope(session, task)
    after = sorted(d.name for d in scope)
    if after == before:
        return []
    for row in session.exec(select(TaskDataset).where(TaskDataset.task_id == task.id)).all():
        session.delete(row)
    session.flush()
    session.add_all(TaskDataset(task_id=task.id, dataset_id=d.id) for d in scope)
    return [f"datasets now {', '.join(after)}" if after else "global now (every dataset)"]
