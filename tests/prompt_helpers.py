"""The prompt editor's form in tests: save version 1 of a claim_support prompt, log in as an engineer, read its fields."""

from __future__ import annotations

from bs4 import BeautifulSoup
from sqlmodel import select

from calibrate.db import write_session
from calibrate.judges import save_version
from calibrate.models import Prompt, PromptVersion, Task


def claims_prompt_edit_form(client, login, engine) -> dict[str, str]:
    """Save `claims@1` (claim_support, model m1), log in as engineer `eng` and return the fields of its edit form."""
    with write_session(engine) as session:
        save_version(session, "claims", task="claim_support", model="m1")
    login("eng", "engineer")
    form = BeautifulSoup(client.get("/prompts/claims/1/edit").data, "html.parser").select_one("#version-form")
    data = {t["name"]: t.get_text() for t in form.select("textarea")}
    data.update({i["name"]: i.get("value", "") for i in form.select("input")})
    return data


def prompt_version(session, task_name: str, template: str = "t") -> PromptVersion:
    """Add prompt `p` of the task with its version 1 and return the version (flushed, not committed): what few-shot
    examples and a prompt judge hang on in tests that need no real prompt."""
    task = session.exec(select(Task).where(Task.name == task_name)).one()
    prompt = Prompt(name="p", task_id=task.id)
    session.add(prompt)
    session.flush()
    version = PromptVersion(prompt_id=prompt.id, number=1, template=template, content_hash="h")
    session.add(version)
    session.flush()
    return version
