"""The adjudication page: disputes with each annotator's label and rationale; deciding the gold."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from hostile import XSS_ANSWER
from sqlmodel import col, select

from calibrate import lookup
from calibrate.models import Claim, Label


def _soup(response):
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


@pytest.fixture
def dispute(session, make_sample, make_user):
    """Claim 0 of a hostile sample: ana says supported, bea unsupported (a tie)."""
    sample = make_sample()
    claim = session.exec(select(Claim).where(Claim.sample_id == sample.id, Claim.index == 0)).one()
    task = lookup.task(session, "claim_support")
    for name, value in (("ana", "supported"), ("bea", "unsupported")):
        user = make_user(name)
        session.add(Label(task_id=task.id, sample_id=sample.id, claim_id=claim.id, target_key=f"claim:{claim.id}",
                          annotator_id=user.id, value=value, rationale=f"<script>alert('{name}')</script>", source="import"))
    session.commit()
    return f"claim:{claim.id}"


def test_the_page_lists_disputes_with_labels_and_rationales_escaped(client, login, dispute):
    login("eng", "engineer")
    response = client.get("/adjudicate?dataset=d&task=claim_support")
    assert "<script>alert" not in response.get_data(as_text=True)
    page = _soup(response)
    [article] = page.select("#disputes article.dispute")
    assert "kind-tie" in article["class"]
    assert [[td.get_text() for td in tr.select("td")] for tr in article.select(".votes tbody tr")] == [
        ["ana", "Supported", "<script>alert('ana')</script>"], ["bea", "Unsupported", "<script>alert('bea')</script>"]]
    assert article.select_one(".dispute-text").has_attr("hx-disable")
    assert [b["value"] for b in article.select("form.decide button[name=value]")] == ["supported", "unsupported", "not_applicable"]
    assert page.select_one("#dispute-counts").get_text() == "1 open · 0 decided"
    assert page.select_one(".target-text").get_text() == XSS_ANSWER.split(". ")[0]


def test_deciding_sets_the_gold_and_answers_with_the_fragment(client, session, login, dispute):
    token = login("eng", "engineer")
    refused = client.post(f"/adjudicate/claim_support/{dispute}", data={"value": "supported", "note": ""},
                          headers={"HX-Request": "true", "X-CSRFToken": token})
    assert refused.status_code == 422 and "note" in refused.get_data(as_text=True)
    response = client.post(f"/adjudicate/claim_support/{dispute}", data={"value": "unsupported", "note": "la dosis está mal"},
                           headers={"HX-Request": "true", "X-CSRFToken": token})
    assert response.status_code == 200
    article = _soup(response).select_one("article.dispute")
    assert article["id"] == f"dispute-{lookup.task(session, 'claim_support').id}-{dispute.replace(':', '-')}"
    assert article.select_one(".badge.gold").get_text() == "gold: Unsupported"
    assert article.select_one("button[aria-pressed=true]")["value"] == "unsupported"
    session.commit()
    gold = session.exec(select(Label).where(col(Label.adjudicated).is_(True))).one()
    assert (gold.target_key, gold.value, gold.rationale) == (dispute, "unsupported", "la dosis está mal")
    page = _soup(client.get("/adjudicate?dataset=d&task=claim_support"))
    assert page.select("#disputes article") == [] and page.select_one("#dispute-counts").get_text() == "0 open · 1 decided"
    decided = _soup(client.get("/adjudicate?dataset=d&task=claim_support&show=decided"))
    assert "decided" in decided.select_one("#disputes article")["class"]


def test_a_plain_form_decision_redirects_back(client, session, login, dispute):
    token = login("boss", "admin")
    response = client.post(f"/adjudicate/claim_support/{dispute}", data={"value": "supported", "note": "ok", "csrf_token": token,
                                                                         "back": "/adjudicate?dataset=d"})
    assert response.status_code == 303 and response.headers["Location"] == "/adjudicate?dataset=d"


def test_unknown_dataset_task_or_target(client, login, dispute):
    token = login("eng", "engineer")
    assert client.get("/adjudicate?dataset=nope").status_code == 404
    assert client.get("/adjudicate?dataset=d&task=nope").status_code == 404
    response = client.post("/adjudicate/claim_support/claim:99999", data={"value": "supported", "note": "x"},
                           headers={"HX-Request": "true", "X-CSRFToken": token})
    assert response.status_code == 404
