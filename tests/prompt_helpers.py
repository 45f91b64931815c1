"""The prompt editor's form in tests: save version 1 of a claim_support prompt, log in as an engineer, read its fields."""

from __future__ import annotations

from bs4 import BeautifulSoup

from calibrate.db import write_session
from calibrate.judges import save_version


def claims_prompt_edit_form(client, login, engine) -> dict[str, str]:
    """Save `claims@1` (claim_support, model m1), log in as engineer `eng` and return the fields of its edit form."""
    with write_session(engine) as session:
        save_version(session, "claims", task="claim_support", model="m1")
    login("eng", "engineer")
    form = BeautifulSoup(client.get("/prompts/claims/1/edit").data, "html.parser").select_one("#version-form")
    data = {t["name"]: t.get_text() for t in form.select("textarea")}
    data.update({i["name"]: i.get("value", "") for i in form.select("input")})
    return data
