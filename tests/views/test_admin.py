"""The admin page (accounts, assigning work, progress) and the guideline pages; who may open what."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from sqlmodel import select

from calibrate.accounts import authenticate, get_user
from calibrate.models import Assignment, Guideline, Label, User


def _soup(response):
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def _fresh(session):
    session.commit()
    session.expire_all()


PAGES = [
    # (method, path, roles allowed)
    ("get", "/admin", {"admin"}),
    ("post", "/admin/users", {"admin"}),
    ("post", "/admin/users/1/password", {"admin"}),
    ("post", "/admin/users/1/active", {"admin"}),
    ("post", "/admin/assign", {"admin"}),
    ("post", "/admin/assignments/1/reopen", {"admin", "engineer"}),
    ("get", "/adjudicate", {"admin", "engineer"}),
    ("post", "/adjudicate/claim_support/claim:1", {"admin", "engineer"}),
    ("get", "/guidelines", {"admin", "engineer"}),
    ("get", "/guidelines/claim_support", {"admin", "engineer"}),
    ("post", "/guidelines/claim_support", {"admin", "engineer"}),
    ("post", "/guidelines/claim_support/requeue", {"admin", "engineer"}),
    ("post", "/annotate/review-mode", {"admin", "engineer"}),
]


REFUSED = [(role, method, path) for method, path, allowed in PAGES for role in ("annotator", "engineer") if role not in allowed]


@pytest.mark.parametrize(("role", "method", "path"), REFUSED)
def test_pages_are_refused_to_roles_without_them(client, session, login, role, method, path):
    token = login("someone", role)
    before = {u.username: (u.active, u.password_hash) for u in session.exec(select(User))}
    response = client.get(path) if method == "get" else client.post(path, data={"csrf_token": token, "username": "x",
                                                                                 "password": "password-123", "text": "x"})
    assert response.status_code == 403
    _fresh(session)
    assert {u.username: (u.active, u.password_hash) for u in session.exec(select(User))} == before
    assert session.exec(select(Guideline).where(Guideline.version > 1)).first() is None


@pytest.mark.parametrize(("role", "links"), [
    ("annotator", {"Queue", "Datasets"}),
    ("engineer", {"Queue", "Datasets", "Adjudicate", "Guidelines"}),
    ("admin", {"Queue", "Datasets", "Adjudicate", "Guidelines", "Admin"}),
])
def test_nav_links_follow_the_role(client, login, role, links):
    login("someone", role)
    assert {a.get_text() for a in _soup(client.get("/annotate")).select(".topbar nav a")} >= links
    shown = {a.get_text() for a in _soup(client.get("/annotate")).select(".topbar nav a")}
    assert shown & {"Adjudicate", "Guidelines", "Admin"} == links - {"Queue", "Datasets"}


@pytest.fixture
def admin(client, login):
    return login("boss", "admin")


def test_admin_adds_a_user_who_can_log_in(client, session, admin):
    response = client.post("/admin/users", data={"csrf_token": admin, "username": "nuria", "role": "annotator",
                                                  "password": "a-good-password", "display_name": "Nuria P."})
    assert response.status_code == 303 and response.headers["Location"] == "/admin"
    page = _soup(client.get("/admin"))
    assert "Added nuria (annotator)." in page.select_one(".flash").get_text()
    row = page.select_one("#users tr[data-user=nuria]")
    assert [td.get_text(strip=True) for td in row.select("td")[1:3]] == ["annotator", "active"]
    _fresh(session)
    assert authenticate(session, "nuria", "a-good-password") is not None
    refused = client.post("/admin/users", data={"csrf_token": admin, "username": "nuria", "role": "annotator", "password": "a-good-password"})
    assert refused.status_code == 303
    assert "already exists" in _soup(client.get("/admin")).select_one(".flash-error").get_text()


def test_admin_resets_a_password_and_deactivates(client, session, make_user, make_sample, admin):
    ana = make_user("ana")
    pending = Assignment(sample_id=make_sample().id, user_id=ana.id)
    session.add(pending)
    session.commit()
    client.post(f"/admin/users/{ana.id}/password", data={"csrf_token": admin, "password": "brand-new-pass"})
    _fresh(session)
    assert authenticate(session, "ana", "brand-new-pass") is not None
    client.post(f"/admin/users/{ana.id}/active", data={"csrf_token": admin, "active": "0", "release": "1"})
    _fresh(session)
    assert get_user(session, "ana").active is False
    assert session.get(Assignment, pending.id).user_id is None
    assert "1 pending item returned to the open pool" in " ".join(f.get_text() for f in _soup(client.get("/admin")).select(".flash"))
    boss = get_user(session, "boss")
    client.post(f"/admin/users/{boss.id}/active", data={"csrf_token": admin, "active": "0"})
    _fresh(session)
    assert get_user(session, "boss").active is True


def test_admin_assigns_a_dataset_with_overlap_and_sees_progress(client, session, make_user, make_sample, admin):
    for name in ("ana", "bea", "cris"):
        make_user(name)
    for i in range(5):
        make_sample(external_id=f"s{i}")
    response = client.post("/admin/assign", data={"csrf_token": admin, "dataset": "d", "n": "4", "seed": "3", "overlap": "2",
                                                  "annotator": ["ana", "bea", "cris"]})
    assert response.status_code == 303
    page = _soup(client.get("/admin"))
    assert page.select_one(".flash").get_text().startswith("sampled 4 of 5 samples of d")
    rows = {tr["data-user"]: tr.select_one(".done-count").get_text() for tr in page.select("#annotator-progress tbody tr")}
    assert set(rows) == {"ana", "bea", "cris"} and sum(int(v.split("/")[1]) for v in rows.values()) == 8
    bad = client.post("/admin/assign", data={"csrf_token": admin, "dataset": "d", "n": "four"})
    assert bad.status_code == 400  # one rule for every number a form carries: 400 naming the field
    assert "n must be a whole number" in _soup(bad).get_text()


def test_flagged_items_are_listed_and_can_be_reopened(client, session, make_user, make_sample, admin):
    ana = make_user("ana")
    flagged = Assignment(sample_id=make_sample().id, user_id=ana.id, status="flagged", note="<b>contexto</b> cortado")
    session.add(flagged)
    session.commit()
    row = _soup(client.get("/admin")).select_one("#review-list tbody tr")
    assert [td.get_text() for td in row.select("td")[1:4]] == ["ana", "flagged", "<b>contexto</b> cortado"]
    client.post(f"/admin/assignments/{flagged.id}/reopen", data={"csrf_token": admin, "back": "/admin"})
    _fresh(session)
    assert session.get(Assignment, flagged.id).status == "pending"


# --------------------------------------------------------------------------- guidelines


def test_an_engineer_edits_a_guideline_as_a_new_version(client, session, login):
    token = login("eng", "engineer")
    rows = {tr["data-task"]: tr for tr in _soup(client.get("/guidelines")).select("#guidelines tbody tr")}
    assert set(rows) == {"claim_support", "answer_quality", "context_relevance"}
    page = _soup(client.get("/guidelines/answer_quality"))
    assert page.select_one("textarea[name=text]").get_text().startswith("5: correct")
    response = client.post("/guidelines/answer_quality", data={"csrf_token": token, "text": "5: perfecta\n1: inútil"})
    assert response.status_code == 303
    page = _soup(client.get("/guidelines/answer_quality"))
    assert "Saved answer_quality guideline v2" in page.select_one(".flash").get_text()
    assert [li.select_one("summary").get_text().split(" · ")[0] for li in page.select("#versions li")] == ["v2", "v1"]
    unchanged = client.post("/guidelines/answer_quality", data={"csrf_token": token, "text": "5: perfecta\n1: inútil"})
    assert unchanged.status_code == 303
    assert "nothing changed" in _soup(client.get("/guidelines/answer_quality")).select_one(".flash-error").get_text()
    assert client.get("/guidelines/no_such_task").status_code == 404


def test_requeue_outdated_items_from_the_guideline_page(client, session, make_user, make_sample, login):
    from calibrate import lookup

    token = login("eng", "engineer")
    ana = make_user("ana")
    sample = make_sample()
    done = Assignment(sample_id=sample.id, user_id=ana.id, status="done")
    session.add(done)
    task = lookup.task(session, "answer_quality")
    session.add(Label(task_id=task.id, sample_id=sample.id, target_key=f"sample:{sample.id}", annotator_id=ana.id,
                      value="4", guideline_version=1))
    session.commit()
    client.post("/guidelines/answer_quality", data={"csrf_token": token, "text": "v2 text"})
    page = _soup(client.get("/guidelines/answer_quality"))
    assert page.select_one("#outdated-count").get_text().startswith("1 submitted item has")
    client.post("/guidelines/answer_quality/requeue", data={"csrf_token": token})
    _fresh(session)
    assert (session.get(Assignment, done.id).status, session.get(Assignment, done.id).note) == ("pending", "re-queued: guideline answer_quality v2")
