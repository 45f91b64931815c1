"""Real Chromium in Spanish: a Spanish browser, and an English browser whose user chose Spanish, get the login page and
the workbench in Spanish, and label with the same keys as in English (labels saved with their stored values)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from sqlmodel import col, select

from calibrate.accounts import get_user
from calibrate.models import Assignment, Claim, Label, User

LABEL_NAMES_ES = ["Respaldada", "No respaldada", "No es una afirmación"]


@pytest.fixture
def item(session, make_sample, make_user):
    """One item for ana: three claims and the answer's quality."""
    make_user("ana")
    sample = make_sample(external_id="s1", question="¿Cuánto ácido fólico?", answer="Tome 0,4 mg. Empiece antes. Gracias.",
                         contexts=("Se recomienda 0,4 mg diarios.", "Desde un mes antes de la concepción."),
                         claims=["Tome 0,4 mg.", "Empiece antes.", "Gracias."])
    assignment = Assignment(sample_id=sample.id, user_id=get_user(session, "ana").id, status="pending")
    session.add(assignment)
    session.commit()
    return assignment, sample


def labels(session, sample) -> dict:
    """Return {claim position or target: stored value} of the sample's labels, read afresh."""
    session.commit()
    session.expire_all()
    claims = {c.id: c.index for c in session.exec(select(Claim).where(Claim.sample_id == sample.id))}
    out = {}
    for label in session.exec(select(Label).where(Label.sample_id == sample.id, col(Label.adjudicated).is_(False))):
        out[f"claim {claims[label.claim_id]}" if label.claim_id else label.target_key.split(":")[0]] = label.value
    return out


def label_in_spanish(page, live_server, session, item):
    """Log in on the Spanish login page, open the item, label it with the English keys; check what was saved."""
    assignment, sample = item
    page.goto(f"{live_server}/login")
    expect(page.locator("h1")).to_have_text("Iniciar sesión")
    expect(page.locator("html")).to_have_attribute("lang", "es")
    assert page.locator("label", has_text="Contraseña").count() == 1
    page.fill("input[name=username]", "ana")
    page.fill("input[name=password]", "password-123")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server}/annotate")
    expect(page.locator(".topbar nav")).to_contain_text("Cola")
    page.goto(f"{live_server}/annotate/{assignment.id}")
    expect(page.locator("html")).to_have_attribute("lang", "es")
    expect(page.locator(".topbar")).to_contain_text("Cerrar sesión")
    names = page.locator("#claims .cell").first.locator(".choice-text").all_inner_texts()
    assert names == LABEL_NAMES_ES
    # The keys of the English workbench: 1 (the first label), x, n, then the quality.
    for key in ("1", "x", "n", "4"):
        page.keyboard.press(key)
    expect(page.locator(".cell[data-required='1'] .save-state[data-state=saved]")).to_have_count(4)
    assert labels(session, sample) == {"claim 0": "supported", "claim 1": "unsupported", "claim 2": "not_applicable", "sample": "4"}
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: url != f"{live_server}/annotate/{assignment.id}")
    session.commit()
    session.expire_all()
    assert session.get(Assignment, assignment.id).status == "done"


def test_a_spanish_browser_gets_spanish_and_the_same_keys(browser, live_server, session, item):
    context = browser.new_context(locale="es-ES")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(10_000)
    try:
        label_in_spanish(page, live_server, session, item)
    finally:
        context.close()
    assert errors == []


def test_an_english_browser_with_the_spanish_setting_gets_spanish(browser, live_server, session, item):
    session.exec(select(User).where(User.username == "ana")).one().locale = "es"
    session.commit()
    context = browser.new_context(locale="en-US")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(10_000)
    try:
        # The login page follows the browser (nobody is logged in yet): English; then the user's setting.
        page.goto(f"{live_server}/login")
        expect(page.locator("h1")).to_have_text("Log in")
        page.fill("input[name=username]", "ana")
        page.fill("input[name=password]", "password-123")
        page.keyboard.press("Enter")
        page.wait_for_url(f"{live_server}/annotate")
        expect(page.locator("html")).to_have_attribute("lang", "es")
        expect(page.locator(".topbar nav")).to_contain_text("Cola")
        assignment, sample = item
        page.goto(f"{live_server}/annotate/{assignment.id}")
        assert page.locator("#claims .cell").first.locator(".choice-text").all_inner_texts() == LABEL_NAMES_ES
        for key in ("s", "x", "n", "4"):
            page.keyboard.press(key)
        expect(page.locator(".cell[data-required='1'] .save-state[data-state=saved]")).to_have_count(4)
        assert labels(session, sample) == {"claim 0": "supported", "claim 1": "unsupported", "claim 2": "not_applicable",
                                           "sample": "4"}
    finally:
        context.close()
    assert errors == []
