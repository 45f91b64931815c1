"""Tasks scoped to datasets on the adjudication page, the workbench's review mode and the calibration loop's pages
(disagreements, triage, the dashboard): a dataset's tasks and the global ones are offered, a request naming another
dataset's task is refused (400 naming `task`, worded in the reader's language)."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from sqlmodel import select

from calibrate import lookup
from calibrate.accounts import ensure_annotator, get_user
from calibrate.models import Assignment, Claim, Label, Sample

HX = {"HX-Request": "true"}
REFUSAL = "task headline_ok is scoped to news: it is not labelled or judged on other"
NEGATIVA = "la tarea headline_ok está limitada a news: no se etiqueta ni se juzga en other"


def _soup(response):
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def _sample(session, external):
    return session.exec(select(Sample).where(Sample.external_id == external)).one()


@pytest.fixture
def scoped(runner, session, make_sample):
    """Datasets news and other; headline_ok for news only, tone global; ana and bea disagree on both tasks on n1, and
    on headline_ok on o1 too (labels stored before the task was scoped: what the pages must not offer)."""
    make_sample(dataset="news", external_id="n1", claims=["Uno."])
    make_sample(dataset="other", external_id="o1", claims=["Dos."])
    for args in (["headline_ok", "--target", "sample", "--kind", "categorical", "--labels", "yes,no", "--dataset", "news"],
                 ["tone", "--target", "sample", "--kind", "categorical", "--labels", "calm,angry"]):
        assert runner.invoke(["task", "add", *args]).exit_code == 0
    headline, tone = lookup.task(session, "headline_ok"), lookup.task(session, "tone")
    users = [ensure_annotator(session, name) for name in ("ana", "bea")]
    for external, task, values in (("n1", headline, ("yes", "no")), ("n1", tone, ("calm", "angry")),
                                   ("o1", headline, ("yes", "no")), ("o1", tone, ("calm", "angry"))):
        sample = _sample(session, external)
        for user, value in zip(users, values, strict=True):
            session.add(Label(task_id=task.id, sample_id=sample.id, target_key=f"sample:{sample.id}", annotator_id=user.id,
                              value=value, rationale=f"{user.username} on {task.name}", source="import"))
    session.commit()


def _offered(page) -> list[str]:
    return [o["value"] for o in page.select("#filters select[name=task] option")]


def test_the_adjudication_page_offers_a_dataset_its_tasks_and_the_global_ones(client, login, scoped):
    login("eng", "engineer")
    news = _soup(client.get("/adjudicate?dataset=news"))
    assert "headline_ok" in _offered(news) and "tone" in _offered(news) and "claim_support" in _offered(news)
    other = _soup(client.get("/adjudicate?dataset=other&task=tone"))
    assert "headline_ok" not in _offered(other) and "tone" in _offered(other)
    assert other.select_one("#dispute-counts").get_text() == "1 open · 0 decided"
    # A task alone opens on a dataset it is offered on.
    alone = _soup(client.get("/adjudicate?task=headline_ok"))
    assert alone.select_one("#filters select[name=dataset] option[selected]").get_text() == "news"
    assert len(alone.select("#disputes article.dispute")) == 1


@pytest.mark.parametrize(("locale", "message"), [("en", REFUSAL), ("es", NEGATIVA)])
def test_the_adjudication_page_refuses_another_datasets_task(client, login, session, scoped, locale, message):
    token = login("eng", "engineer")
    page = client.get("/adjudicate?dataset=other&task=headline_ok", headers={"Accept-Language": locale})
    assert page.status_code == 400 and message in _soup(page).get_text()
    o1 = _sample(session, "o1")
    decided = client.post(f"/adjudicate/headline_ok/sample:{o1.id}", data={"value": "yes", "note": "looks right"},
                          headers={**HX, "X-CSRFToken": token, "Accept-Language": locale})
    assert decided.status_code == 400 and decided.headers["X-Invalid-Field"] == "task"
    assert decided.get_data(as_text=True) == message
    session.rollback()
    assert session.exec(select(Label).where(Label.adjudicated.is_(True))).all() == []  # nothing written
    n1 = _sample(session, "n1")
    ok = client.post(f"/adjudicate/headline_ok/sample:{n1.id}", data={"value": "yes", "note": "looks right"},
                     headers={**HX, "X-CSRFToken": token})
    assert ok.status_code == 200


def test_review_mode_shows_others_labels_only_on_the_items_tasks(client, login, session, scoped):
    token = login("eng", "engineer")
    eng = get_user(session, "eng")
    o1 = _sample(session, "o1")
    claim = session.exec(select(Claim).where(Claim.sample_id == o1.id)).one()
    for task, key, value in (("claim_support", f"claim:{claim.id}", "supported"), ("answer_quality", f"sample:{o1.id}", "4")):
        session.add(Label(task_id=lookup.task(session, task).id, sample_id=o1.id, claim_id=claim.id if task == "claim_support" else None,
                          target_key=key, annotator_id=eng.id, value=value, source="import"))
    assignment = Assignment(sample_id=o1.id, user_id=eng.id, status="pending")
    session.add(assignment)
    session.commit()
    client.post("/annotate/review-mode", data={"on": "1", "csrf_token": token})
    review = _soup(client.get(f"/annotate/{assignment.id}/review", headers=HX))
    why = {td.get_text() for td in review.select("tr.other-label td.clip")}
    assert why == {"ana on tone", "bea on tone"}  # headline_ok's labels on o1 belong to no task of the item


@pytest.mark.parametrize(("locale", "message"), [("en", REFUSAL), ("es", NEGATIVA)])
def test_the_calibration_pages_refuse_another_datasets_task(client, login, scoped, locale, message):
    token = login("eng", "engineer")
    headers = {"Accept-Language": locale}
    for url in ("/datasets/other/calibration?task=headline_ok",
                "/datasets/other/calibration/judges/j@1/disagreements?task=headline_ok",
                "/datasets/other/calibration/judges/j@1/disagreements/sample:1?task=headline_ok",
                "/datasets/other/calibration/compare?a=j@1&b=k@1&task=headline_ok"):
        page = client.get(url, headers=headers)
        assert page.status_code == 400, url
        assert message in _soup(page).get_text(), url
    triage = client.post("/datasets/other/calibration/judges/j@1/disagreements/sample:1/triage",
                         data={"task": "headline_ok", "kind": "judge_wrong", "csrf_token": token}, headers=headers)
    assert triage.status_code == 400 and message in _soup(triage).get_text()
    # The task's own dataset, and a global task on the other one, are not refused.
    assert client.get("/datasets/news/calibration?task=headline_ok").status_code == 200
    assert client.get("/datasets/other/calibration?task=tone").status_code == 200


def test_the_refusal_says_nothing_to_those_the_pages_are_not_for(client, login, scoped):
    assert client.get("/datasets/other/calibration?task=headline_ok").status_code in (302, 303)  # the login page
    login("cris")  # an annotator
    assert client.get("/datasets/other/calibration?task=headline_ok").status_code == 403
