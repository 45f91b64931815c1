"""Pairwise items on the pages: the workbench (responses side by side, positions not ids, the order recorded),
adjudication, the disagreement page, the sample page and the dashboard."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup
from hostile import XSS_ANSWER, XSS_CONTEXT
from sqlmodel import col, select

from calibrate import lookup
from calibrate.accounts import get_user
from calibrate.annotation.items import presentation_order
from calibrate.models import Assignment, Judge, Label, LabelRevision, Response, Verdict
from calibrate.tasks import add_task

HX = {"HX-Request": "true"}
SECRET_IDS = ("gpt-secret-model", "llama-hidden")  # response ids an annotator must never see


def _soup(response):
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


@pytest.fixture
def pair(session, make_sample):
    """A pairwise sample (no answer) with hostile responses whose ids are model names, and the task pref."""
    sample = make_sample(external_id="p1", answer="", claims=[])
    session.add(Response(sample_id=sample.id, position=0, key=SECRET_IDS[0], text=XSS_ANSWER, model="hidden-model-name"))
    session.add(Response(sample_id=sample.id, position=1, key=SECRET_IDS[1], text=XSS_CONTEXT, model="second-secret-model"))
    add_task(session, "pref", target="sample", kind="pairwise", labels=[*SECRET_IDS, "tie"])
    session.commit()
    return sample


@pytest.fixture
def item(session, pair, login):
    token = login("ana")
    ana = get_user(session, "ana")
    assignment = Assignment(sample_id=pair.id, user_id=ana.id, status="pending")
    session.add(assignment)
    session.commit()
    order = presentation_order(ana.id, pair.id, list(SECRET_IDS))
    return SimpleNamespace(token=token, user=ana, sample=pair, url=f"/annotate/{assignment.id}", order=order,
                           key=f"sample:{pair.id}")


def _label(client, item, value, **fields):
    return client.post(f"{item.url}/label", data={"task": "pref", "target": item.key, "value": value, **fields},
                       headers={**HX, "X-CSRFToken": item.token})


def test_the_item_shows_the_responses_side_by_side_by_position_and_never_their_ids(client, item):
    response = client.get(item.url)
    text = response.get_data(as_text=True)
    assert "<script>alert" not in text and "<img src=x" not in text
    assert not any(secret in text for secret in SECRET_IDS) and "hidden-model-name" not in text  # blind: no ids, no models
    page = _soup(response)
    responses = page.select("#responses .response")
    assert [r["data-position"] for r in responses] == ["1", "2"]
    by_id = {SECRET_IDS[0]: XSS_ANSWER, SECRET_IDS[1]: XSS_CONTEXT}
    assert [r.select_one(".response-text").get_text() for r in responses] == [by_id[key] for key in item.order]
    assert page.select_one("#responses").has_attr("hx-disable")
    [cell] = page.select(".pairwise .cell")
    assert cell["data-task"] == "pref" and cell["data-where"] == "the responses" and cell["data-required"] == "1"
    buttons = cell.select("form.choices button[name=value]")
    assert [(b["value"], b["data-keys"]) for b in buttons] == [("1", "1"), ("2", "2"), ("tie", "3 t")]
    # an item without an answer has no answer section and no answer_quality cell
    assert page.select_one("#answer") is None and page.select(".whole .cell") == []


def test_a_position_is_stored_as_the_id_shown_there_with_the_order_and_undo_restores(client, session, item):
    assert _label(client, item, "2").status_code == 200
    session.commit()
    label = session.exec(select(Label)).one()
    assert (label.value, label.order) == (item.order[1], item.order)
    fragment = _soup(_label(client, item, "tie"))
    assert fragment.select_one(".cell")["data-value"] == "tie"
    assert fragment.select_one("button[aria-pressed=true]")["value"] == "tie"
    session.commit()
    session.expire_all()
    revisions = session.exec(select(LabelRevision).order_by(LabelRevision.id)).all()
    assert [(r.action, r.value, r.order) for r in revisions] == [("create", item.order[1], item.order),
                                                                 ("update", item.order[1], item.order)]
    undone = client.post(f"{item.url}/undo", headers={**HX, "X-CSRFToken": item.token})
    assert undone.status_code == 200
    session.commit()
    session.expire_all()
    label = session.exec(select(Label)).one()
    assert (label.value, label.order) == (item.order[1], item.order)
    # the item is complete: submitting it works
    assert client.post(f"{item.url}/submit", headers={**HX, "X-CSRFToken": item.token}).status_code == 204


@pytest.mark.parametrize("value", ["3", "0", SECRET_IDS[0], "<b>"])
def test_a_position_the_item_does_not_show_is_refused(client, session, item, value):
    response = _label(client, item, value)
    assert response.status_code == 422
    assert "value must be a response's position (1–2) or tie" in response.get_data(as_text=True)
    session.commit()
    assert session.exec(select(Label)).all() == []


SECRETS = (*SECRET_IDS, "hidden-model-name", "second-secret-model")


def test_no_fragment_of_a_pairwise_item_carries_a_response_id_or_model_before_it_is_left(client, item):
    """Issue 20, finding 5: after a key press the cell said data-value="B" and the history "Now: B"."""
    pages = [client.get(item.url), client.get(item.url, headers=HX)]
    history = f"{item.url}/history?task=pref&target={item.key}"
    pages.append(client.get(history, headers=HX))
    for value in ("1", "2", "tie", "2"):
        saved = _label(client, item, value)
        assert saved.status_code == 200
        pages += [saved, client.get(history, headers=HX), client.get(item.url)]
        cell = _soup(saved).select_one(".cell")
        assert cell["data-value"] == value  # the position pressed, as the button posts it
    pages.append(_label(client, item, "2", rationale="because"))
    undone = client.post(f"{item.url}/undo", headers={**HX, "X-CSRFToken": item.token})
    pages += [undone, client.get(history, headers=HX), client.get(item.url)]
    now = _soup(pages[-2]).select_one("#history strong").get_text()
    assert now == "Response 2"
    for page in pages:
        text = page.get_data(as_text=True)
        assert page.status_code == 200 and not [s for s in SECRETS if s in text], (page.request.path, text[:300])


@pytest.mark.parametrize("value", ["²", "١", "2²"])
def test_a_position_in_digits_int_cannot_read_is_a_400_not_a_500(client, session, item, value):
    """`isdigit()` is true for `²`, `int()` refuses it: the red team's 500 (issue 20, finding 7)."""
    response = _label(client, item, value)
    assert response.status_code == 400 and "value" in response.get_data(as_text=True)
    session.commit()
    assert session.exec(select(Label)).all() == []


def test_adjudication_shows_both_responses_with_ids_and_the_orders_seen(client, session, pair, login, make_user):
    task = lookup.task(session, "pref")
    for name, value, order in (("ana", SECRET_IDS[0], list(SECRET_IDS)), ("bea", SECRET_IDS[1], list(SECRET_IDS)[::-1])):
        user = make_user(name)
        session.add(Label(task_id=task.id, sample_id=pair.id, target_key=f"sample:{pair.id}", annotator_id=user.id,
                          value=value, order=order, source="import"))
    session.commit()
    token = login("eng", "engineer")
    response = client.get("/adjudicate?dataset=d&task=pref")
    assert "<script>alert" not in response.get_data(as_text=True)
    article = _soup(response).select_one("#disputes article.dispute")
    assert [r["data-response-id"] for r in article.select("#responses .response")] == list(SECRET_IDS)
    assert [td.get_text() for td in article.select(".votes td.order")] == [", ".join(SECRET_IDS), ", ".join(SECRET_IDS[::-1])]
    assert [b["value"] for b in article.select("form.decide button[name=value]")] == [*SECRET_IDS, "tie"]
    bad = client.post(f"/adjudicate/pref/sample:{pair.id}", data={"value": "other", "note": "n"},
                      headers={**HX, "X-CSRFToken": token})
    assert bad.status_code == 422 and "is not a label of task pref" in bad.get_data(as_text=True)
    good = client.post(f"/adjudicate/pref/sample:{pair.id}", data={"value": "tie", "note": "both fine"},
                       headers={**HX, "X-CSRFToken": token})
    assert good.status_code == 200
    session.expire_all()
    assert session.exec(select(Label).where(col(Label.adjudicated).is_(True))).one().value == "tie"


def test_the_disagreement_page_shows_the_responses_gold_and_each_orders_verdict(client, session, pair, login, make_user):
    task = lookup.task(session, "pref")
    user = make_user("ana")
    session.add(Label(task_id=task.id, sample_id=pair.id, target_key=f"sample:{pair.id}", annotator_id=user.id,
                      value=SECRET_IDS[0], order=list(SECRET_IDS), source="import"))
    judge = Judge(name="j", kind="imported")
    session.add(judge)
    session.flush()
    for value, order, key in ((SECRET_IDS[1], list(SECRET_IDS), "0,1"), (SECRET_IDS[1], list(SECRET_IDS)[::-1], "1,0")):
        session.add(Verdict(judge_id=judge.id, task_id=task.id, sample_id=pair.id, target_key=f"sample:{pair.id}",
                            value=value, order=order, order_key=key, raw="<script>alert('raw')</script>", source="import"))
    session.commit()
    login("eng", "engineer")
    response = client.get(f"/datasets/d/calibration/judges/j/disagreements/sample:{pair.id}?task=pref")
    assert response.status_code == 200 and "<script>alert" not in response.get_data(as_text=True)
    page = _soup(response)
    marks = {r["data-response-id"]: [b.get_text() for b in r.select(".badge")] for r in page.select("#responses .response")}
    assert marks == {SECRET_IDS[0]: ["gold"], SECRET_IDS[1]: ["judge"]}
    assert page.select_one("#judge-value").get_text() == SECRET_IDS[1]
    assert [tr["data-order"] for tr in page.select("#judge-orders tbody tr")] == ["0,1", "1,0"]
    listed = client.get("/datasets/d/calibration/judges/j/disagreements?task=pref&split=all")
    assert listed.status_code == 200 and f"sample:{pair.id}" in listed.get_data(as_text=True)
    refused = client.get(f"/datasets/d/calibration/judges/j/disagreements/sample:{pair.id}?task=pref&order_rule=both")
    assert refused.status_code == 404 and "order_rule must be one of consistent, original" in refused.get_data(as_text=True)
    spanish = client.get(f"/datasets/d/calibration/judges/j/disagreements/sample:{pair.id}?task=pref&order_rule=both",
                         headers={"Accept-Language": "es"})  # the refusal worded from its code, in the reader's language
    assert "order_rule debe ser uno de consistent, original, no 'both'" in BeautifulSoup(spanish.get_data(as_text=True), "html.parser").main.get_text()
    hostile = client.get(f"/datasets/d/calibration/judges/j/disagreements/sample:{pair.id}?task=pref&order_rule=<b>x</b>")
    assert "&lt;b&gt;x&lt;/b&gt;" in hostile.get_data(as_text=True)  # a refusal quoting the request is escaped, never markup


def test_the_sample_page_shows_responses_to_an_annotator_without_ids(client, pair, login):
    login("ana")
    response = client.get("/datasets/d/samples/p1")
    assert "<script>alert" not in response.get_data(as_text=True)
    assert not any(secret in response.get_data(as_text=True) for secret in SECRET_IDS)
    page = _soup(response)
    assert page.select_one("#responses").has_attr("hx-disable")
    assert [r.select_one("h3").get_text(strip=True) for r in page.select("#responses .response")] == ["Response 1", "Response 2"]
    assert not any(r.has_attr("data-response-id") for r in page.select("#responses .response"))


def test_the_dashboard_of_the_pairwise_demo_shows_position_bias_and_takes_the_order_rule(load_demo_copy, client, engine, login):
    load_demo_copy(engine)
    login("eng", "engineer")
    page = _soup(client.get("/datasets/demo-prenatal-ab/calibration?task=preference"))
    assert page.select_one("#order-rule").get_text() == "consistent"
    assert page.select_one("select[name=order_rule] option[selected]")["value"] == "consistent"
    row = page.select_one("#judges tr[data-judge='demo-preference@1']")
    # the baseline reads the responses, not their places: the same verdict in both orders
    assert row.select_one(".orders-agree").get_text() == "100%" and row.select_one(".first-rate").get_text() == "50%"
    assert row.select_one("td.n").get_text() == "6"
    alt_test = row.select_one("td.alt-test a")["href"]  # could it replace an expert? by the same rule
    assert "order_rule=consistent" in alt_test
    assert _soup(client.get(alt_test)).select_one("#order-rule").get_text() == "consistent"
    original = _soup(client.get("/datasets/demo-prenatal-ab/calibration?task=preference&order_rule=original"))
    assert original.select_one("#order-rule").get_text() == "original"
    bad = client.get("/datasets/demo-prenatal-ab/calibration?task=preference&order_rule=maybe")
    assert bad.status_code == 404 and "order_rule must be one of" in bad.get_data(as_text=True)
