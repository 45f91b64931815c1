"""One claim numbering for people: every page names a claim the same way, from 1 with the sample's own id
("demo-004 · claim 1"), while files and JSON keep the 0-based position."""

from __future__ import annotations

import re

import pytest
from bs4 import BeautifulSoup
from sqlmodel import select

from calibrate.demo import DATASET, DEMO_USERS
from calibrate.models import Assignment, Claim, Sample, User

JUDGE = "demo-claims@1"
PASSWORDS = {u: p for u, _r, _d, p in DEMO_USERS}


def _soup(response):
    return BeautifulSoup(response.data, "html.parser")


def _login(client, username):
    token = _soup(client.get("/login")).select_one("input[name=csrf_token]")["value"]
    assert client.post("/login", data={"username": username, "password": PASSWORDS[username], "csrf_token": token}).status_code == 303


@pytest.fixture
def demo(demo_engine):
    """The bundled demo with its judges' runs (a copy of the session's demo database, tests/conftest.py)."""


def test_the_pages_name_a_claim_alike(app, session, demo):
    engineer = app.test_client()
    _login(engineer, "engineer")
    listing = _soup(engineer.get(f"/datasets/{DATASET}/calibration/judges/{JUDGE}/disagreements?task=claim_support&split=dev"))
    row = listing.select_one("#disagreements tbody tr")
    target = row["data-target"]
    claim = session.get(Claim, int(target.split(":")[1]))
    sample = session.get(Sample, claim.sample_id)
    expected = f"{sample.external_id} · claim {claim.index + 1}"
    assert row.select_one("td.target-name").get_text(strip=True) == expected
    detail = _soup(engineer.get(row.select_one("td.target-name a")["href"]))
    assert detail.select_one("#target-name").get_text() == expected
    # the annotator's workbench numbers the same claim the same way
    annotator, user = session.exec(select(Assignment, User).join(User, User.id == Assignment.user_id)
                                   .where(Assignment.sample_id == sample.id, User.role == "annotator")).first()
    person = app.test_client()
    _login(person, user.username)
    item = _soup(person.get(f"/annotate/{annotator.id}"))
    assert item.select_one("h1 #external-id").get_text() == sample.external_id
    claim_row = item.select_one(f".claim-row[data-claim-id='{claim.id}']")
    assert claim_row.select_one(".claim-no").get_text() == str(claim.index + 1)
    assert claim_row.select_one(".cell")["data-where"] == f"claim {claim.index + 1}"
    # files keep the 0-based position, for programs: the CSV report's target column
    rows = engineer.get(f"/datasets/{DATASET}/calibration/report.csv?judge={JUDGE}&task=claim_support&split=dev").data.decode()
    assert f"{sample.external_id}/claim/{claim.index}" in rows


def test_the_compare_pages_few_shot_diff_names_targets_for_people(app, demo):
    engineer = app.test_client()
    _login(engineer, "engineer")
    page = engineer.get(f"/datasets/{DATASET}/calibration/compare?task=claim_support&split=dev&a=demo-claims@1&b=demo-claims@2")
    text = _soup(page).get_text()
    shots = re.findall(r"\+(\S+ · claim \d+) → ", text)
    assert shots and not re.search(r"\+claim:\d+ →", text)
