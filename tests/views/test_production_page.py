"""The Production page (dataset → Production) and the queue policy form, in English and Spanish, on the demo."""

from __future__ import annotations

import re

from bs4 import BeautifulSoup
from sqlmodel import Session, select

from calibrate.demo.production import PROD_DATASET
from calibrate.models import Assignment, QueuePolicy

SPANISH = {"Accept-Language": "es-ES,es;q=0.9"}
ENGLISH = {"Accept-Language": "en"}


def _page(response) -> BeautifulSoup:
    assert response.status_code == 200, response.data[:500]
    return BeautifulSoup(response.data, "html.parser")


def _login(client, username, password):
    token = _page(client.get("/login")).select_one("input[name=csrf_token]")["value"]
    assert client.post("/login", data={"username": username, "password": password, "csrf_token": token}).status_code == 303


def test_the_production_page_in_english_and_spanish(client, demo_engine):
    _login(client, "engineer", "demo-engineer")
    en = _page(client.get(f"/datasets/{PROD_DATASET}/production", headers=ENGLISH))
    cards = en.select("#production-windows article.window-card")
    assert [c["data-window"] for c in cards] == ["2026-W47", "2026-W46", "2026-W45"]  # newest first
    assert [c["data-status"] for c in cards] == ["alert", "ok", "ok"]
    assert "agreement below its gate" in cards[0].get_text()
    assert en.h1.get_text() == f"Production of {PROD_DATASET}"
    assert "Audit labels" in en.get_text() and "Triage labels" in en.get_text()
    assert en.select_one("#queue-auto-form input[name=daily]")["value"] == "8"  # the saved policy
    es = _page(client.get(f"/datasets/{PROD_DATASET}/production?by=day&min=3,5", headers=SPANISH))
    assert es.h1.get_text() == f"Producción de {PROD_DATASET}"
    text = es.get_text()
    assert "Etiquetas de auditoría" in text and "Colas de expertos que se llenan solas" in text
    assert re.search(r"\d,\d{3}", text)  # decimals with a comma
    days = es.select("#production-windows article.window-card")
    assert len(days) == 21 and days[0]["data-window"] == "2026-11-22"
    # the dataset page links to it and carries the form
    show = _page(client.get(f"/datasets/{PROD_DATASET}", headers=ENGLISH))
    assert show.select_one("#production-link")["href"] == f"/datasets/{PROD_DATASET}/production"
    assert show.select_one("#queue-auto-form input[name=back]")["value"] == "dataset"


def test_the_queue_form_saves_and_applies_the_policy_and_refusals_are_worded(client, demo_engine):
    _login(client, "engineer", "demo-engineer")
    page = _page(client.get(f"/datasets/{PROD_DATASET}", headers=ENGLISH))
    token = page.select_one("#queue-auto-form input[name=csrf_token]")["value"]
    form = {"csrf_token": token, "daily": "5", "assign": ["dra.garcia"], "audit_share": "0,6", "overlap": "1",
            "overlap_share": "0", "seed": "2", "back": "dataset"}
    response = client.post(f"/datasets/{PROD_DATASET}/queue-auto", data=form, headers=ENGLISH)
    assert response.status_code == 303 and response.headers["Location"].endswith(f"/datasets/{PROD_DATASET}")
    shown = _page(client.get(f"/datasets/{PROD_DATASET}", headers=ENGLISH))
    assert "Queue policy saved and applied" in shown.get_text()
    with Session(demo_engine) as session:
        policy = session.exec(select(QueuePolicy)).one()
        assert (policy.daily, policy.assign, policy.audit_share, policy.seed) == (5, ["dra.garcia"], 0.6, 2)
    bad = client.post(f"/datasets/{PROD_DATASET}/queue-auto", data={**form, "assign": [], "back": ""}, headers=SPANISH)
    assert bad.status_code == 303
    refused = _page(client.get(bad.headers["Location"], headers=SPANISH))
    assert "nombre al menos un experto que asignar" in refused.get_text()


def test_annotators_cannot_see_the_production_page_or_post_the_form(client, demo_engine):
    _login(client, "dra.garcia", "demo-garcia")
    assert client.get(f"/datasets/{PROD_DATASET}/production").status_code == 403
    with Session(demo_engine) as session:
        before = len(session.exec(select(Assignment)).all())
    token = _page(client.get("/annotate")).select_one("input[name=csrf_token]")
    data = {"csrf_token": token["value"] if token else "", "daily": "5", "assign": ["dra.garcia"]}
    assert client.post(f"/datasets/{PROD_DATASET}/queue-auto", data=data).status_code == 403
    with Session(demo_engine) as session:
        assert len(session.exec(select(Assignment)).all()) == before


def test_a_dataset_whose_judge_cannot_be_monitored_says_why_on_the_page(client, demo_engine):
    _login(client, "engineer", "demo-engineer")
    page = _page(client.get("/datasets/demo-prenatal-ab/production", headers=ENGLISH))
    assert "needs --positive" in page.select_one("#production-message").get_text()
    assert page.select_one("#queue-auto-form") is not None


def test_the_level_is_named_from_the_estimators_levels_in_both_languages(client, demo_engine):
    """A step task's one level is `steps` (calibration.levels_of), said on the page; a claim task chooses between answers
    and claims; the names come from targets.level_name, in English and Spanish."""
    from calibrate.calibration import LEVELS
    from calibrate.demo import AGENT_DATASET, DATASET
    from calibrate.i18n import using
    from calibrate.targets import LEVEL_NAMES, level_name

    assert set(LEVELS) <= set(LEVEL_NAMES)  # every level the estimator has has a name for people
    with using("es"):
        assert [level_name(level) for level in LEVELS] == ["respuestas", "afirmaciones", "contextos", "pasos"]
    _login(client, "engineer", "demo-engineer")
    for headers, words in ((ENGLISH, "Share of steps"), (SPANISH, "Proporción de pasos")):
        page = _page(client.get(f"/datasets/{AGENT_DATASET}/production?task=step_correctness", headers=headers))
        level = page.select_one("#production-level")
        assert (level["data-level"], level.get_text(" ", strip=True)) == ("steps", words)
        assert page.select_one("select[name=level]") is None
    claims = _page(client.get(f"/datasets/{DATASET}/production?task=claim_support", headers=SPANISH))
    options = claims.select("select[name=level] option")
    assert [(o["value"], o.get_text()) for o in options] == [("answers", "respuestas"), ("claims", "afirmaciones")]


def test_intervals_in_spanish_and_a_window_without_an_estimate(client, demo_engine):
    """The cards wrote an interval "[0,280, 0,679]" in Spanish (a comma between decimal commas: docs/i18n.md writes
    "[0,280; 0,679]"), and a window without an estimate showed "— —" (no value, no interval)."""
    _login(client, "engineer", "demo-engineer")
    es = _page(client.get(f"/datasets/{PROD_DATASET}/production", headers=SPANISH))
    intervals = [span.get_text() for span in es.select("#production-windows .ci") if span.get_text()]
    assert intervals and all(re.fullmatch(r"\[-?\d,\d{3}; -?\d,\d{3}\]", text) for text in intervals), intervals
    en = _page(client.get(f"/datasets/{PROD_DATASET}/production", headers=ENGLISH))
    assert all(re.fullmatch(r"\[-?\d\.\d{3}, -?\d\.\d{3}\]", span.get_text())
               for span in en.select("#production-windows .ci") if span.get_text())
    from calibrate.demo import DATASET

    empty = _page(client.get(f"/datasets/{DATASET}/production", headers=ENGLISH))
    card = empty.select_one("#production-windows article.window-card[data-status=too_few]")
    assert card is not None
    assert card.select_one("dd.estimate").get_text(" ", strip=True) == "—"
