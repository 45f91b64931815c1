"""The bundled demo: loads, is idempotent, marks itself as demo, and its logins work."""

from __future__ import annotations

import sqlite3

from bs4 import BeautifulSoup
from sqlmodel import func, select

from calibrate.demo import DATASET, DEMO_USERS, TO_LABEL, load_demo
from calibrate.models import Assignment, Claim, Dataset, Label, Sample, User


def _dump(db_url):
    return "\n".join(sqlite3.connect(db_url.removeprefix("sqlite:///")).iterdump())


def test_demo_loads_samples_labels_users_and_queue(engine, session):
    result = load_demo(engine)
    dataset = session.exec(select(Dataset).where(Dataset.name == DATASET)).one()
    assert dataset.is_demo
    assert session.exec(select(func.count()).select_from(Sample)).one() == 40
    assert session.exec(select(func.count()).select_from(Claim)).one() == 184
    # 564 bundled labels, less the experts' 64 on the six items left for them to label
    assert session.exec(select(func.count()).select_from(Label)).one() == 500
    labelled = set(session.exec(select(Sample.external_id).join(Label, Label.sample_id == Sample.id)).all())
    assert labelled.isdisjoint(TO_LABEL) and len(labelled) == 40 - len(TO_LABEL)
    experts = {u.username for u in session.exec(select(User).where(User.role == "annotator"))}
    assert experts == {"dra.garcia", "matrona.ruiz"}
    # every sample is queued for both experts
    assert session.exec(select(func.count()).select_from(Assignment)).one() == 80
    # ... and each expert has exactly those waiting in the queue, the rest done
    for expert in experts:
        rows = session.exec(select(Sample.external_id, Assignment.status).join(Assignment, Assignment.sample_id == Sample.id)
                            .join(User, User.id == Assignment.user_id).where(User.username == expert)).all()
        assert sorted(name for name, status in rows if status == "pending") == sorted(TO_LABEL)
        assert sum(status == "done" for _, status in rows) == 40 - len(TO_LABEL)
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


def test_demo_opens_on_the_workbench_for_an_expert(engine, client):
    """An expert logs in to their queue, and the next item is one left for them to label."""
    load_demo(engine)
    token = BeautifulSoup(client.get("/login").data, "html.parser").select_one("input[name=csrf_token]")["value"]
    name, _, _, password = DEMO_USERS[0]
    response = client.post("/login", data={"username": name, "password": password, "csrf_token": token})
    assert response.headers["Location"] == "/annotate"
    queue = BeautifulSoup(client.get("/annotate").data, "html.parser")
    assert queue.select_one("#start") is not None
    assert queue.select_one("#my-progress tr[data-dataset] .pending").get_text() == str(len(TO_LABEL))
    item = client.get(client.get("/annotate/next").headers["Location"])
    page = BeautifulSoup(item.data, "html.parser")
    assert page.select_one("#external-id").get_text() in TO_LABEL
