"""The dashboard's Optimise form, the optimisation's page (htmx polls its status while it runs), Cancel, in English and
Spanish; annotators get 403."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "loop"))

from optimise_helpers import DATASET, load_world, served_world


@pytest.fixture
def server():
    """The fake LLM server answering as a prompt world whose judge gets better with few-shots and rewrites."""
    with served_world() as fake:
        yield fake


@pytest.fixture
def page_app(app, engine, tmp_path, server):
    app.config["JUDGE_BACKENDS"] = {"fake": {"backend": "openai", "model": "fake-model", "base_url": server.openai_base,
                                             "api_key_env": "", "concurrency": 2}}
    load_world(engine, tmp_path, server.world)
    return app


def wait_until(client, url: str, states: tuple[str, ...], timeout: float = 120) -> BeautifulSoup:
    deadline = time.monotonic() + timeout
    while True:
        page = BeautifulSoup(client.get(url).data, "html.parser")
        state = page.select_one("#optimise-status")["data-status"]
        if state in states or time.monotonic() > deadline:
            return page
        time.sleep(0.2)


def start(client, token, **fields):
    form = {"csrf_token": token, "task": "claim_support", "start": "claims@1", "backend": "fake", "target": "0.75",
            "max_candidates": "6", "strategy_fewshot": "1", "strategy_rewrite": "1", **fields}
    return client.post(f"/datasets/{DATASET}/calibration/optimise", data=form)


def test_the_form_starts_an_optimisation_whose_page_shows_the_candidates_and_the_result(page_app, client, login, server):
    token = login("eng", "engineer")
    board = BeautifulSoup(client.get(f"/datasets/{DATASET}/calibration?split=dev").data, "html.parser")
    form = board.select_one("#optimise-form")
    assert form is not None and [o["value"] for o in form.select("select[name=backend] option")] == ["fake"]
    response = start(client, token)
    assert response.status_code == 303 and "/optimisations/" in response.headers["Location"]
    url = response.headers["Location"]
    first = BeautifulSoup(client.get(url).data, "html.parser")
    status = first.select_one("#optimise-status")
    if status["data-status"] == "running":  # htmx polls the fragment while it runs
        assert status["hx-get"].endswith("/status") and status["hx-trigger"] == "every 1s"
    page = wait_until(client, url + "/status", ("done", "failed", "cancelled"))
    assert page.select_one("#optimise-status")["data-status"] == "done"
    assert not page.select_one("#optimise-status").has_attr("hx-get")
    assert page.select_one("#optimise-stop")["data-stop"] == "target_reached"
    assert page.select_one("#optimise-outcome")["data-decision"] == "pass"
    rows = page.select("#optimise-candidates tbody tr")
    assert rows[0]["data-version"] == "claims@1" and any("chosen" in (r.get("class") or []) for r in rows)
    # The dashboard lists the candidates like any version, and counts the versions scored on dev.
    board = BeautifulSoup(client.get(f"/datasets/{DATASET}/calibration?split=dev").data, "html.parser")
    assert int(board.select_one("#split-looks").text) == len(rows)
    assert {r["data-judge"] for r in board.select("#judges tbody tr[data-judge]")} >= {r["data-version"] for r in rows}
    # In Spanish.
    client.post("/account", data={"csrf_token": token, "locale": "es"})
    spanish = BeautifulSoup(client.get(url).data, "html.parser")
    assert spanish.select_one("html")["lang"] == "es"
    assert "Optimización" in spanish.select_one("h1").text
    # "Target" is the value to reach here (objetivo), not a labelled item (elemento) as in the tables.
    assert spanish.select_one("#optimise-summary dt").text == "Objetivo"
    board = BeautifulSoup(client.get(f"/datasets/{DATASET}/calibration?split=dev").data, "html.parser")
    label = board.select_one("#optimise-form input[name=target]").parent
    assert label.text.strip() == "Objetivo"
    assert "Elemento" in [th.text for th in BeautifulSoup(client.get("/tasks").data, "html.parser").select("thead th")]


def test_cancel_stops_a_running_optimisation(page_app, client, login, server):
    token = login("eng", "engineer")
    gate = threading.Event()
    server.gate = gate  # every call waits: the optimisation is held in its first run
    try:
        url = start(client, token).headers["Location"]
        deadline = time.monotonic() + 30
        while server.stats()["requests"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        response = client.post(url + "/cancel", data={"csrf_token": token})
        assert response.status_code == 303
    finally:
        gate.set()
        server.gate = None
    page = wait_until(client, url + "/status", ("done", "failed", "cancelled"))
    assert page.select_one("#optimise-status")["data-status"] == "cancelled"
    assert page.select_one("#optimise-stop")["data-stop"] == "cancelled"


def test_refusals_are_said_on_the_dashboard_and_annotators_get_403(page_app, client, login, make_user):
    token = login("eng", "engineer")
    response = start(client, token, target="2")
    assert response.status_code == 303
    board = client.get(response.headers["Location"], follow_redirects=True)
    assert "--target must lie in (0, 1], not 2.0" in board.get_data(as_text=True)
    client.post("/logout", data={"csrf_token": token})
    other = login("ann", "annotator")
    assert start(client, other).status_code == 403


def test_a_candidate_scored_zero_is_counted_as_scored(app):
    """The count of candidates scored counted a dev value of exactly 0 (κ 0: a judge no better than chance) as unscored."""
    from types import SimpleNamespace

    from flask import render_template

    from calibrate.reports.optimise_report import context

    def candidate(version, value):
        return {"version": version, "parent": None, "round": 0, "change": {"kind": "start", "note": ""}, "calls": 0, "cost": 0.0,
                "dev": {"value": value, "ci": None, "lower_adjusted": None, "n": 10 if value is not None else None}}

    result = {"from": "p@1", "dataset": "d", "task": "claim_support", "target": 0.75, "metric": "cohen_kappa",
              "adjustment": "max_statistic", "looks": {"dev": 2, "test": 0}, "stop": {}, "calls": 0, "cost": 0.0,
              "candidates": [candidate("p@1", 0.4), candidate("p@2", 0.0), candidate("p@3", None)], "refused": []}
    with app.test_request_context("/"):
        html = render_template("calibration/_optimise_status.html", opt=SimpleNamespace(id=1, status="running", error=""),
                               active=False, **context(result))
    assert "2 candidates scored" in BeautifulSoup(html, "html.parser").select_one("#optimise-status p").get_text()


def test_a_target_typed_with_a_decimal_comma_is_read(page_app, client, login):
    """The Spanish dashboard writes the threshold 0,75: a target typed that way started nothing but a refusal."""
    token = login("eng", "engineer")
    client.post("/account", data={"csrf_token": token, "locale": "es"})
    response = start(client, token, target="0,8", max_candidates="2", strategy_rewrite="")
    assert response.status_code == 303 and "/optimisations/" in response.headers["Location"]
    page = wait_until(client, response.headers["Location"] + "/status", ("done", "failed", "cancelled"))
    assert "≥ 0,8" in page.select_one("#optimise-summary dd").get_text()
