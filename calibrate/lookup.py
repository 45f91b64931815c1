"""Find things by the names people type: datasets, tasks, judges, users, prompts and prompt versions.

Every lookup raises the one `NotFound` (calibrate/errors.py) with one wording, naming what
exists so the user can correct the name:

    unknown dataset 'supprt-bot' (datasets: demo-prenatal, support-bot)
    unknown dataset 'x' (datasets: none yet: import samples first)

`hint` adds what to do when the name is right but the thing is missing (an import names the
command that creates it). Called as `lookup.dataset(session, name)`: the module name says what
the function does, so local variables called `dataset` or `task` never shadow it.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, select

from calibrate.errors import NotFound
from calibrate.models import Dataset, Judge, Prompt, PromptVersion, Task, User, visible_dataset
from calibrate.reasons import Reason

SHOWN = 20  # names listed in a message before "… (N in all)"


def not_found(kind: str, name: str, existing: list[str], *, plural: str | None = None, hint: Reason | None = None) -> NotFound:
    """Return the NotFound for `name` of `kind`, listing `existing` (the first SHOWN of them), worded from a reason."""
    plural = plural or f"{kind}s"
    names = ", ".join(existing[:SHOWN])
    if not existing:
        refusal = Reason("unknown_name_none", kind=kind, name=name, plural=plural)
    elif len(existing) > SHOWN:
        refusal = Reason("unknown_name_more", kind=kind, name=name, plural=plural, names=names, total=len(existing))
    else:
        refusal = Reason("unknown_name", kind=kind, name=name, plural=plural, names=names)
    return NotFound(Reason("with_hint", refusal=refusal, hint=hint) if hint else refusal)


def _by_name(session: Session, model: Any, column: Any, name: str, kind: str, hint: Reason | None = None, *where: Any) -> Any:
    found = session.exec(select(model).where(column == name, *where)).first()
    if found is None:
        existing = list(session.exec(select(column).where(*where).order_by(column)).all())
        raise not_found(kind, name, existing, hint=hint)
    return found


def dataset(session: Session, name: str, *, hint: Reason | None = None) -> Dataset:
    """Return the dataset called `name` (never one an unpublished import is still writing)."""
    return _by_name(session, Dataset, Dataset.name, name, "dataset", hint, visible_dataset())


def task(session: Session, name: str) -> Task:
    """Return the task called `name`."""
    return _by_name(session, Task, Task.name, name, "task")


def judge(session: Session, name: str) -> Judge:
    """Return the judge called `name` (a prompt-version run is `PROMPT@N`)."""
    return _by_name(session, Judge, Judge.name, name, "judge")


def user(session: Session, username: str) -> User:
    """Return the account called `username`."""
    return _by_name(session, User, User.username, username, "user")


def prompt(session: Session, name: str) -> Prompt:
    """Return the prompt called `name`."""
    return _by_name(session, Prompt, Prompt.name, name, "prompt")


def prompt_version(session: Session, prompt_row: Prompt, number: int | None) -> PromptVersion:
    """Return version `number` of a prompt (None: its latest)."""
    query = select(PromptVersion).where(PromptVersion.prompt_id == prompt_row.id)
    if number is None:
        found = session.exec(query.order_by(PromptVersion.number.desc())).first()
    else:
        found = session.exec(query.where(PromptVersion.number == number)).first()
    if found is None:
        numbers = session.exec(select(PromptVersion.number).where(PromptVersion.prompt_id == prompt_row.id)
                               .order_by(PromptVersion.number)).all()
        if numbers:
            raise NotFound(Reason("unknown_version", prompt=prompt_row.name, number=number, numbers=", ".join(map(str, numbers))))
        raise NotFound(Reason("unknown_version_none", prompt=prompt_row.name, number=number))
    return found
