"""`calibrate task add|list|edit|remove`: what is labelled, on which target, with which values."""

from __future__ import annotations

import click
from sqlmodel import Session, select

from calibrate.cli.common import Settings, db_option, ready_engine
from calibrate.db import write_session
from calibrate.models import Task
from calibrate.task_scopes import tasks_scopes
from calibrate.task_values import describe_values
from calibrate.tasks import add_task, edit_task, parse_descriptions, parse_display, parse_levels, parse_scale, remove_task


@click.group("task")
def task_group() -> None:
    """Manage tasks (what is labelled, on which target, with which values)."""


@task_group.command("add")
@click.argument("name")
@click.option("--target", type=click.Choice(["sample", "claim", "context", "step"]), required=True,
              help="What each label is on: the sample, each claim, each retrieved context, or each step of an agent's "
                   "trajectory.")
@click.option("--kind", type=click.Choice(["categorical", "ordinal", "continuous", "pairwise"]), required=True)
@click.option("--labels", help="Comma-separated labels of a categorical task, e.g. A,B,tie; of a pairwise task, the "
                               "response ids and optionally tie, e.g. 1,2,tie.")
@click.option("--scale", help="Range of an ordinal or continuous task, e.g. 1-5.")
@click.option("--description", "description", multiple=True, metavar="[LOCALE:]TEXT",
              help="One line shown to annotators; LOCALE:TEXT gives it in a language, e.g. es:¿Cuál es mejor? "
                   "(repeatable; a plain TEXT is the default language's).")
@click.option("--level", "level", multiple=True, metavar="[LOCALE:]LEVEL=TEXT",
              help="What a label or score means, shown beside its button on the workbench, e.g. 5=correct and complete "
                   "or es:5=correcta y completa (repeatable; without LOCALE the default language's; an empty TEXT "
                   "removes one). Categorical and ordinal tasks.")
@click.option("--dataset", "datasets", multiple=True, metavar="NAME",
              help="Scope the task to a dataset: the workbench offers it only on that dataset's items (repeatable; "
                   "without it the task is global).")
@click.option("--error-types", metavar="X,Y", help="A categorical task's error taxonomy: a label or verdict may name one "
                                                    "as what was wrong (`error_type`), e.g. wrong_tool,wrong_arguments.")
@db_option
def task_add_command(settings: Settings, name: str, target: str, kind: str, labels: str | None, scale: str | None,
                     description: tuple[str, ...], datasets: tuple[str, ...], level: tuple[str, ...],
                     error_types: str | None) -> None:
    """Add a custom task (global, or scoped to the datasets named with --dataset)."""
    parsed_scale = parse_scale(scale) if scale else None
    default, texts = parse_descriptions(description)
    levels = parse_levels(level) if level else None
    with write_session(ready_engine(settings)) as session:
        task = add_task(session, name, target=target, kind=kind, labels=labels.split(",") if labels else None,
                        scale=parsed_scale, description=default or "", descriptions=texts, datasets=datasets, levels=levels,
                        error_types=error_types.split(",") if error_types else None)
        detail = ", ".join(task.labels) if task.labels else f"{task.scale_min:g}–{task.scale_max:g}" if task.scale_min is not None else "any number"
        line = f"added task {task.name}: {task.kind} on {task.target} ({detail})"
        if datasets:
            line += f", for dataset {', '.join(dict.fromkeys(datasets))} only"
    click.echo(line)


@task_group.command("list")
@db_option
def task_list_command(settings: Settings) -> None:
    """List tasks: name, target, kind, labels or scale, and the datasets of a scoped task."""
    with Session(ready_engine(settings)) as session:
        scopes = tasks_scopes(session)
        for task in session.exec(select(Task).order_by(Task.id)):
            scope = f"\tdatasets {','.join(scopes[task.id])}" if task.id in scopes else ""
            click.echo(f"{task.name}\t{task.target}\t{task.kind}\t{describe_values(task)}{scope}")


@task_group.command("edit")
@click.argument("name")
@click.option("--description", "description", multiple=True, metavar="[LOCALE:]TEXT",
              help="The new one-line description shown to annotators; LOCALE:TEXT sets it in a language, e.g. "
                   "es:¿Cuál es mejor? (repeatable; a plain TEXT is the default language's; an empty es: text goes "
                   "back to the default one).")
@click.option("--add-labels", metavar="X,Y", help="Labels to add to a categorical task, or response ids to a pairwise one (labels are never removed).")
@click.option("--scale", metavar="LO-HI", help="New range of an ordinal or continuous task; every stored value must fit.")
@click.option("--display", "display", multiple=True, metavar="LOCALE:LABEL=NAME",
              help="How a label is shown to people in a language, e.g. es:supported=Respaldada (repeatable; an empty NAME "
                   "goes back to the default name). Stored values never change.")
@click.option("--level", "level", multiple=True, metavar="[LOCALE:]LEVEL=TEXT",
              help="What a label or score means, shown beside its button on the workbench, e.g. 5=correct and complete "
                   "or es:5=correcta y completa (repeatable; without LOCALE the default language's; an empty TEXT "
                   "removes one). Categorical and ordinal tasks.")
@click.option("--dataset", "datasets", multiple=True, metavar="NAME",
              help="Scope the task to this dataset (repeatable): the set replaces the task's datasets. Refused when it "
                   "leaves out a dataset that holds labels, verdicts or prompts of the task.")
@click.option("--all-datasets", is_flag=True, help="Make the task global again: offered on every dataset.")
@click.option("--error-types", metavar="X,Y",
              help="Replace a categorical task's error taxonomy (an empty value removes it; stored error types stay).")
@db_option
def task_edit_command(settings: Settings, name: str, description: tuple[str, ...], add_labels: str | None,
                      scale: str | None, display: tuple[str, ...], level: tuple[str, ...], datasets: tuple[str, ...],
                      all_datasets: bool, error_types: str | None) -> None:
    """Change a task: its description (per language), more labels, a scale every stored value fits, its labels'
    display names, what its labels or scores mean (per language), or the datasets it is scoped to."""
    if datasets and all_datasets:
        raise click.UsageError("--dataset and --all-datasets exclude each other")
    if not (description or add_labels or scale or display or level or datasets or all_datasets or error_types is not None):
        raise click.UsageError("give --description, --add-labels, --scale, --display, --level, --dataset, --all-datasets "
                               "or --error-types")
    parsed_scale = parse_scale(scale) if scale else None
    names = parse_display(display) if display else None
    default, texts = parse_descriptions(description)
    levels = parse_levels(level) if level else None
    with write_session(ready_engine(settings)) as session:
        change = edit_task(session, name, description=default, add_labels=add_labels.split(",") if add_labels else None,
                           scale=parsed_scale, display=names, descriptions=texts or None, levels=levels,
                           datasets=() if all_datasets else datasets or None,
                           error_types=None if error_types is None else error_types.split(","))
        line = change.line()
    click.echo(line)


@task_group.command("remove")
@click.argument("name")
@db_option
def task_remove_command(settings: Settings, name: str) -> None:
    """Remove a custom task that has no labels, verdicts or prompts."""
    with write_session(ready_engine(settings)) as session:
        task = remove_task(session, name)
        line = f"removed task {task.name}"
    click.echo(line)
