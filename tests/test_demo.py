"""The bundled demo: loads, is idempotent, marks itself as demo, and its logins work."""

from __future__ import annotations

import sqlite3

from bs4 import BeautifulSoup
from sqlmodel import func, select

from calibrate.demo import DATASET, DEMO_USERS, load_demo
from calibrate.models import Assignment, Claim, Dataset, Label, Sample, User


def _dump(db_url):
    return "\n".join(sqlite3.connect(db_url.removeprefix("sqlite:///")).iterdump())


def test_demo_loads_samples_labels_users_and_queue(engine, session):
    result = load_demo(engine)
    dataset = session.exec(select(Dataset).where(Dataset.name == DATASET)).one()
    assert dataset.is_demo
    assert session.exec(select(func.count()).select_from(Sample)).one() == 40
    assert session.exec(select(func.count()).select_from(Claim)).one() == 184
    assert session.exec(select(func.count()).select_from(Label)).one() == 564
    experts = {u.username for u in session.exec(select(User).where(User.role == "annotator"))}
    assert experts == {"dra.garcia", "matrona.ruiz"}
    # every sample is queued for both experts
    assert session.exec(select(func.count()).select_from(Assignment)).one() == 80
    splits = set(session.exec(select(Sample.split)).all())
    assert splits == {"train", "dev", "test"}
    printed = "\n".join(result.lines())
    for username, _, _, password in DEMO_USERS:
        assert username in printed and password in printed


def test_demo_twice_changes_nothing(engine, db_url):
    load_demo(engine)
    before = _dump(db_url)
    result = load_demo(engine)
    assert _dump(db_url) == before
    assert any("unchanged" in line or "nothing changed" in line for line in result.lines())


def test_demo_logins_work_and_the_ui_says_demo(engine, client):
    load_demo(engine)
    page = BeautifulSoup(client.get("/login").data, "html.parser")
    token = page.select_one("input[name=csrf_token]")["value"]
    name, _, _, password = DEMO_USERS[2]
    response = client.post("/login", data={"username": name, "password": password, "csrf_token": token})
    assert response.status_code == 303
    page = BeautifulSoup(client.get(f"/datasets/{DATASET}").data, "html.parser")
    assert page.select_one(".banner.demo") is not None
    assert "not medical advice" in page.select_one(".banner.demo").get_text()


def test_demo_command_without_serving(runner):
    result = runner.invoke(["demo", "--no-serve"])
    assert result.exit_code == 0, result.output
    assert "dra.garcia" in result.output and "demo-garcia" in result.output
