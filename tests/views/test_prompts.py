"""Prompt pages: engineers only, version view, new version from the previous one, diff."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from sqlmodel import select

from calibrate.db import write_session
from calibrate.judges import save_version
from calibrate.models import PromptVersion


def soup(response):
    return BeautifulSoup(response.data, "html.parser")


@pytest.fixture
def prompt_v1(engine, make_sample):
    make_sample(external_id="s1", claims=["Tome 0,4 mg al día."])
    with write_session(engine) as session:
        save_version(session, "claims", task="claim_support", model="m1")
    return "claims"


@pytest.mark.parametrize("url", ["/prompts", "/prompts/claims/1", "/prompts/claims/1/edit", "/prompts/claims/diff?a=1&b=1", "/runs"])
def test_annotators_get_403(client, login, prompt_v1, url):
    login("ana", "annotator")
    assert client.get(url).status_code == 403


def test_the_list_and_the_version_page(client, login, prompt_v1):
    login("eng", "engineer")
    page = soup(client.get("/prompts"))
    link = page.select_one("#prompts tbody tr td a")
    assert link.get_text() == "claims" and link["href"] == "/prompts/claims/1"
    page = soup(client.get("/prompts/claims/1"))
    assert "claims@1" in page.select_one("#version-title").get_text()
    assert "Claim to check" in page.select_one("#template pre").get_text()
    assert page.select_one("#template pre").has_attr("hx-disable")
    assert page.select_one("#run-form input[name=csrf_token]") is not None
    assert [o.get_text() for o in page.select("#run-form select[name=backend] option")] == ["baseline"]


def test_creating_a_prompt_from_the_list(client, login, session):
    token = login("eng", "engineer")
    response = client.post("/prompts", data={"name": "quality", "task": "answer_quality", "csrf_token": token})
    assert response.status_code == 303 and response.headers["Location"].endswith("/prompts/quality/1")
    assert "Rubric" in soup(client.get("/prompts/quality/1")).select_one("#system pre").get_text()


def test_a_post_without_the_csrf_token_is_refused(client, login, prompt_v1):
    login("eng", "engineer")
    assert client.post("/prompts", data={"name": "x", "task": "claim_support"}).status_code == 400


def _form(client, url):
    page = soup(client.get(url))
    form = page.select_one("#version-form")
    data = {t["name"]: t.get_text() for t in form.select("textarea")}
    data.update({i["name"]: i.get("value", "") for i in form.select("input")})
    return data


def test_saving_an_edit_creates_the_next_version_and_an_identical_one_nothing(client, login, prompt_v1, session):
    login("eng", "engineer")
    data = _form(client, "/prompts/claims/1/edit")
    assert "Claim to check" in data["template"] and data["model"] == "m1"
    same = client.post("/prompts/claims/1/edit", data=data)
    assert same.status_code == 303 and same.headers["Location"].endswith("/prompts/claims/1")
    assert len(session.exec(select(PromptVersion)).all()) == 1
    data["template"] = data["template"].replace("Claim to check", "Claim under review") + "\r\n"
    data["note"] = "reword"
    saved = client.post("/prompts/claims/1/edit", data=data)
    assert saved.status_code == 303 and saved.headers["Location"].endswith("/prompts/claims/2")
    session.rollback()  # end the test session's read snapshot
    version = session.exec(select(PromptVersion).where(PromptVersion.number == 2)).one()
    assert version.parent_id is not None and version.note == "reword" and version.author_id is not None
    page = soup(client.get("/prompts/claims/2"))
    assert "claims@1" in page.select_one("#version-facts").get_text()


def test_a_template_with_an_unknown_field_is_refused_naming_it(client, login, prompt_v1, session):
    login("eng", "engineer")
    data = _form(client, "/prompts/claims/1/edit")
    data["template"] += "\n{{ claim.txt }}"
    response = client.post("/prompts/claims/1/edit", data=data)
    assert response.status_code == 400
    error = soup(response).select_one("#form-error").get_text()
    assert "claim.txt" in error
    assert soup(response).select_one("textarea[name=template]").get_text().endswith("{{ claim.txt }}")
    assert len(session.exec(select(PromptVersion)).all()) == 1


def test_the_prompt_editors_refusals_are_in_the_readers_language(client, login, prompt_v1, session):
    login("eng", "engineer")
    spanish = {"Accept-Language": "es"}
    cases = [({"template": "   "}, "plantilla: vacía"),
             ({"params": "temperature"}, "un parámetro debe tener la forma clave=valor; se recibió 'temperature'"),
             ({"few_shots": "nope:0"}, "few-shot nope:0: no hay ninguna muestra 'nope'")]
    for change, message in cases:
        data = {**_form(client, "/prompts/claims/1/edit"), **change}
        response = client.post("/prompts/claims/1/edit", data=data, headers=spanish)
        assert response.status_code == 400 and soup(response).select_one("#form-error").get_text().strip() == message
    assert len(session.exec(select(PromptVersion)).all()) == 1


def test_the_side_by_side_diff(client, login, prompt_v1, engine):
    with write_session(engine) as session:
        save_version(session, "claims", template="Question: {{ question }}\nClaim: {{ claim.text }}", model="m2")
    login("eng", "engineer")
    page = soup(client.get("/prompts/claims/diff?a=1&b=2"))
    assert "template" in page.select_one("#changed").get_text() and "model" in page.select_one("#changed").get_text()
    rows = page.select("#diff-model table.diff tbody tr")
    assert [(r["class"][0], r.select_one(".left").get_text(), r.select_one(".right").get_text()) for r in rows] == [("replace", "m1", "m2")]
    assert page.select_one("#diff-template table.diff").has_attr("hx-disable")
    assert "unchanged" in page.select_one("#diff-system h2").get_text()


def test_model_text_is_escaped(client, login, engine, make_sample):
    with write_session(engine) as session:
        save_version(session, "x", task="claim_support", system="<script>alert(1)</script> Judge.")
    login("eng", "engineer")
    page = soup(client.get("/prompts/x/1"))
    assert page.select("script[src]") and not [s for s in page.select("script") if not s.get("src") and s.get("type") != "application/json"]
    assert "<script>alert(1)</script>" in page.select_one("#system pre").get_text()
