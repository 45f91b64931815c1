"""Real Chromium on the workbench: keyboard-only labelling, autosave, undo, session expiry, security."""

from __future__ import annotations

import pytest
from browser_helpers import eventually
from hostile import XSS_ANSWER, XSS_CONTEXT, XSS_QUESTION
from playwright.sync_api import expect
from sqlmodel import col, select

from calibrate import lookup
from calibrate.accounts import get_user
from calibrate.models import Assignment, Claim, Label


def _assign(session, sample, username, status="pending"):
    assignment = Assignment(sample_id=sample.id, user_id=get_user(session, username).id, status=status)
    session.add(assignment)
    session.commit()
    return assignment


def _labels(session, sample):
    """Return {target position: value} of the sample's labels, read afresh from the database."""
    session.commit()
    session.expire_all()
    claims = {c.id: c.index for c in session.exec(select(Claim).where(Claim.sample_id == sample.id))}
    out = {}
    for label in session.exec(select(Label).where(Label.sample_id == sample.id, col(Label.adjudicated).is_(False))):
        out[f"claim {claims[label.claim_id]}" if label.claim_id else label.target_key.split(":")[0]] = label.value
    return out


@pytest.fixture
def two_items(session, make_sample, make_user):
    make_user("ana")
    first = make_sample(external_id="s1", question="¿Cuánto ácido fólico?", answer="Tome 0,4 mg. Empiece antes. Gracias.",
                        contexts=("Se recomienda 0,4 mg diarios.", "Desde un mes antes de la concepción."),
                        claims=["Tome 0,4 mg.", "Empiece antes.", "Gracias."])
    second = make_sample(external_id="s2", question="¿Y el hierro?", answer="30 mg al día. Con vitamina C.",
                         contexts=("El hierro: 30–60 mg diarios.",), claims=["30 mg al día.", "Con vitamina C."])
    return _assign(session, first, "ana"), _assign(session, second, "ana"), first, second


def _login(page, live_server, username="ana", password="password-123"):
    page.goto(f"{live_server}/login")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: "/login" not in url)


def test_label_a_whole_item_with_the_keyboard_submit_and_come_back(page, live_server, session, two_items):
    a1, a2, first, second = two_items
    _login(page, live_server)
    page.wait_for_url(f"{live_server}/annotate")
    page.keyboard.press("Enter")  # "Start labelling" has the focus
    page.wait_for_url(f"{live_server}/annotate/{a1.id}")
    # one key per claim: focus moves on by itself; then the quality
    for key in ("1", "x", "n", "4"):
        page.keyboard.press(key)
    expect(page.locator(".cell[data-required='1'] .save-state[data-state=saved]")).to_have_count(4)
    assert _labels(session, first) == {"claim 0": "supported", "claim 1": "unsupported", "claim 2": "not_applicable", "sample": "4"}
    expect(page.locator("mark.claim[data-value=unsupported]")).to_have_count(1)
    # the item is complete: the focus is on Submit (not lost to <body>), in view
    expect(page.locator("#submit-button")).to_be_focused()
    expect(page.locator("#submit-button")).to_be_in_viewport()
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server}/annotate/{a2.id}")
    session.commit()
    session.expire_all()
    assert session.get(Assignment, a1.id).status == "done"
    # back on the first item (a reload of it): every label is shown as saved
    page.goto(f"{live_server}/annotate/{a1.id}")
    pressed = page.locator("#claims button[aria-pressed=true]")
    expect(pressed).to_have_count(3)
    assert [pressed.nth(i).get_attribute("value") for i in range(3)] == ["supported", "unsupported", "not_applicable"]
    assert page.locator(".whole button[aria-pressed=true]").get_attribute("value") == "4"


def test_enter_on_an_incomplete_item_says_what_is_missing(page, live_server, session, two_items):
    a1, _, first, _ = two_items
    _login(page, live_server)
    page.goto(f"{live_server}/annotate/{a1.id}")
    page.keyboard.press("s")
    expect(page.locator("#claims .save-state[data-state=saved]")).to_have_count(1)
    page.keyboard.press("Enter")
    missing = page.locator("#item-status .missing li")
    expect(missing).to_have_count(2)
    assert missing.nth(0).inner_text() == "Claim support: label claim 2, claim 3"
    # ... and says it by name in the notice bar, an alert inside the viewport wherever the page is scrolled
    notice = page.locator("#notice[role=alert]")
    expect(notice).to_have_text("Not submitted yet: claim 2, claim 3, the answer.")
    box, view = notice.bounding_box(), page.viewport_size
    assert box["width"] > 0 and 0 <= box["y"] and box["y"] + box["height"] <= view["height"]
    assert page.url == f"{live_server}/annotate/{a1.id}"
    # the focus went to the first claim still to do
    assert page.evaluate("document.activeElement.dataset.where") == "claim 2"


def test_undo_with_u_steps_back(page, live_server, session, two_items):
    a1, _, first, _ = two_items
    _login(page, live_server)
    page.goto(f"{live_server}/annotate/{a1.id}")
    page.keyboard.press("1")  # claim 1 supported, focus moves to claim 2
    page.keyboard.press("k")  # back to claim 1
    page.keyboard.press("2")  # changed to unsupported
    expect(page.locator("#claims .cell").first.locator("button[aria-pressed=true]")).to_have_attribute("value", "unsupported")
    expect(page.locator("#claims .save-state[data-state=saved]")).to_have_count(1)
    page.keyboard.press("u")
    expect(page.locator("#claims .cell").first).to_have_attribute("data-value", "supported")
    assert eventually(lambda: _labels(session, first) == {"claim 0": "supported"})
    page.keyboard.press("u")
    expect(page.locator("#claims .cell").first).to_have_attribute("data-state", "empty")
    assert eventually(lambda: _labels(session, first) == {})
    page.keyboard.press("u")
    expect(page.locator("#notice")).to_have_text("Nothing to undo on this item.")


def test_rationale_evidence_and_help_with_the_keyboard(page, live_server, session, two_items):
    a1, _, first, _ = two_items
    _login(page, live_server)
    page.goto(f"{live_server}/annotate/{a1.id}")
    page.keyboard.press("x")
    page.keyboard.press("k")
    page.keyboard.press("r")
    page.keyboard.type("dice 4 mg, no 0,4")
    page.keyboard.press("Enter")
    page.keyboard.press("e")
    page.keyboard.press("2")
    expect(page.locator("#claims .cell").first.locator(".evidence button[aria-pressed=true]")).to_have_attribute("value", "1")
    expect(page.locator("#claims .cell").first.locator(".save-state")).to_have_attribute("data-state", "saved")
    # "saved" may still be the rationale's save while the evidence's request is in flight on a busy
    # machine: wait (bounded) until the database has the evidence too.
    for _ in range(100):
        session.commit()
        session.expire_all()  # the fixture's session keeps loaded objects (expire_on_commit=False): read afresh
        label = session.exec(select(Label).where(Label.sample_id == first.id)).one()
        if label.evidence == [1]:
            break
        page.wait_for_timeout(100)
    assert (label.value, label.rationale, label.evidence) == ("unsupported", "dice 4 mg, no 0,4", [1])
    page.keyboard.press("?")
    expect(page.locator("dialog#help")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("dialog#help")).to_be_hidden()


def test_a_session_that_ends_mid_item_loses_nothing(page, live_server, session, two_items):
    a1, _, first, _ = two_items
    _login(page, live_server)
    page.goto(f"{live_server}/annotate/{a1.id}")
    page.keyboard.press("1")
    expect(page.locator("#claims .save-state[data-state=saved]")).to_have_count(1)
    page.context.clear_cookies()  # the session cookie expired
    page.keyboard.press("x")  # claim 2: the server asks for a login
    page.wait_for_url(f"{live_server}/login?next=/annotate/{a1.id}")
    assert _labels(session, first) == {"claim 0": "supported"}
    page.fill("input[name=username]", "ana")
    page.fill("input[name=password]", "password-123")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server}/annotate/{a1.id}")
    # back on the item, the waiting label is sent and shows as saved
    expect(page.locator("#claims .save-state[data-state=saved]")).to_have_count(2)
    assert _labels(session, first) == {"claim 0": "supported", "claim 1": "unsupported"}
    assert page.evaluate("Object.keys(localStorage).filter(k => k.startsWith('calibrate.pending'))") == []


def test_hostile_text_in_question_answer_and_context_stays_text(page, live_server, session, make_sample, make_user):
    make_user("ana")
    sample = make_sample()  # the XSS payloads of tests/hostile.py
    assignment = _assign(session, sample, "ana")
    _login(page, live_server)
    page.goto(f"{live_server}/annotate/{assignment.id}")
    assert page.locator("#question").inner_text() == XSS_QUESTION
    assert page.locator("#answer").inner_text() == XSS_ANSWER
    assert page.locator("#contexts .ctx-text").inner_text() == XSS_CONTEXT
    page.keyboard.press("1")
    page.keyboard.press("2")  # the swapped-in fragments carry the hostile claim text too
    expect(page.locator("#claims .save-state[data-state=saved]")).to_have_count(2)
    assert page.locator(".claim-text").nth(1).inner_text() == XSS_ANSWER.split(". ")[1]
    assert page.locator("#annotate img").count() == 0
    assert page.locator("#annotate a[href^='javascript']").count() == 0
    assert page.evaluate("document.querySelectorAll('script:not([src]):not(#calibrate-strings)').length") == 0
    # the page fixture fails the test if any alert() ran


def test_a_post_without_csrf_token_is_rejected(page, live_server, session, two_items):
    a1, _, first, _ = two_items
    _login(page, live_server)
    page.goto(f"{live_server}/annotate/{a1.id}")
    claim = session.exec(select(Claim).where(Claim.sample_id == first.id, Claim.index == 0)).one()
    status = page.evaluate(
        """async (target) => (await fetch(location.pathname + '/label', {method: 'POST', headers: {'HX-Request': 'true'},
               body: new URLSearchParams({task: 'claim_support', target, value: 'supported'})})).status""",
        f"claim:{claim.id}")
    assert status == 400
    assert _labels(session, first) == {}


@pytest.mark.parametrize("path", ["/admin", "/adjudicate", "/guidelines", "/guidelines/claim_support"])
def test_an_annotator_gets_403_on_engineer_and_admin_pages(page, live_server, two_items, path):
    _login(page, live_server)
    page.wait_for_url(f"{live_server}/annotate")
    assert page.goto(f"{live_server}{path}").status == 403


def test_an_annotator_cannot_open_or_read_another_annotators_work(page, live_server, session, make_user, two_items):
    a1, _, first, _ = two_items
    make_user("bea")
    theirs = _assign(session, first, "bea")
    claim = session.exec(select(Claim).where(Claim.sample_id == first.id, Claim.index == 0)).one()
    session.add(Label(task_id=lookup.task(session, "claim_support").id, sample_id=first.id, claim_id=claim.id, target_key=f"claim:{claim.id}",
                      annotator_id=get_user(session, "bea").id, value="unsupported", rationale="BEA-ONLY"))
    session.commit()
    _login(page, live_server)
    page.wait_for_url(f"{live_server}/annotate")
    assert page.goto(f"{live_server}/annotate/{theirs.id}").status == 404
    assert page.goto(f"{live_server}/annotate/{theirs.id}/history?task=claim_support&target=claim:{claim.id}").status == 404
    # through my own assignment of the same sample, the history shows only mine: nothing
    response = page.goto(f"{live_server}/annotate/{a1.id}/history?task=claim_support&target=claim:{claim.id}")
    assert response.status == 200 and "BEA-ONLY" not in page.content()


def test_mark_sentences_as_evidence_by_click_and_by_keys_and_they_stay_marked(page, live_server, session, make_sample, make_user):
    make_user("ana")
    sample = make_sample(external_id="s1", answer="Tome 0,4 mg. Empiece antes.", claims=["Tome 0,4 mg.", "Empiece antes."],
                         contexts=("Se recomienda ácido fólico. La dosis es 0,4 mg diarios. Desde un mes <b>antes</b>.",))
    assignment = _assign(session, sample, "ana")
    _login(page, live_server)
    page.goto(f"{live_server}/annotate/{assignment.id}")
    page.keyboard.press("1")  # claim 1: supported; the focus moves on to claim 2
    page.keyboard.press("k")  # back to claim 1
    claim = page.locator("#claims .cell").first
    expect(claim.locator(".save-state")).to_have_attribute("data-state", "saved")
    sentences = page.locator("#contexts .context").first.locator(".sentence")
    expect(sentences).to_have_count(3)
    sentences.nth(1).click()
    expect(claim.locator(".sentence-chip[aria-pressed=true]")).to_have_text("#1.2")
    # The keyboard path: Shift+E, the context's number, the sentence's number (shown while picking).
    page.keyboard.press("Shift+E")
    expect(page.locator("#annotate.picking-sentence")).to_have_count(1)
    page.keyboard.press("1")
    page.keyboard.press("3")
    expect(page.locator("#annotate.picking-sentence")).to_have_count(0)
    expect(claim.locator(".sentence-chip[aria-pressed=true]")).to_have_text(["#1.2", "#1.3"])
    expect(claim.locator(".save-state")).to_have_attribute("data-state", "saved")
    session.commit()
    label = session.exec(select(Label).where(Label.sample_id == sample.id)).one()
    assert [(e["context"], e["sentence"], e["text"]) for e in label.evidence] == [
        (0, 1, "La dosis es 0,4 mg diarios."), (0, 2, "Desde un mes <b>antes</b>.")]
    # Reload: the marks are still there, and focusing the claim highlights its sentences in the context.
    page.reload()
    page.keyboard.press("k")
    claim = page.locator("#claims .cell").first
    expect(claim).to_have_class("cell focused")
    expect(claim.locator(".sentence-chip[aria-pressed=true]")).to_have_text(["#1.2", "#1.3"])
    expect(page.locator("#contexts .sentence.evidence-shown")).to_have_text(["La dosis es 0,4 mg diarios.", "Desde un mes <b>antes</b>."])
    # Pressing a chip unmarks that sentence.
    claim.locator(".sentence-chip").first.click()
    expect(claim.locator(".sentence-chip")).to_have_text(["#1.3"])
    session.commit()
    session.expire_all()
    assert [e["sentence"] for e in session.exec(select(Label).where(Label.sample_id == sample.id)).one().evidence] == [2]
