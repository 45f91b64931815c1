"""Real browser: the Optimise page. An engineer starts an optimisation from the dashboard's form against a judge served
by the fake LLM server (tests/judges/fakellm.py answering as the prompt world), watches the page poll its progress
until it is done, reads the versions tried, the number scored on dev and the selection bound (lower_adjusted, the
adjustment), and opens the chosen version's prompt page from its row."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "loop"))

from optimise_helpers import DATASET, load_world, served_world


@pytest.fixture
def fake_judge():
    """The fake LLM server answering as a prompt world whose judge gets better with few-shots and rewrites."""
    with served_world() as fake:
        yield fake


@pytest.fixture
def engineer(app, engine, tmp_path, fake_judge, page, browser_login):
    """The world's dataset with claims@1, the fake judge configured as a backend, and the page logged in as an engineer."""
    app.config["JUDGE_BACKENDS"] = {"fake": {"backend": "openai", "model": "fake-model", "base_url": fake_judge.openai_base,
                                             "api_key_env": "", "concurrency": 2}}
    load_world(engine, tmp_path, fake_judge.world)
    browser_login("eng", "engineer")
    return page


def test_optimise_from_the_dashboard_shows_progress_the_versions_tried_the_bound_and_opens_the_chosen_one(engineer, live_server):
    page = engineer
    page.goto(f"{live_server}/datasets/{DATASET}/calibration?split=dev")
    form = page.locator("#optimise-form")
    form.locator("select[name=start]").select_option("claims@1")
    form.locator("select[name=backend]").select_option("fake")
    form.locator("input[name=target]").fill("0.75")
    form.locator("input[name=max_candidates]").fill("6")
    form.get_by_role("button", name="Optimise").click()

    page.wait_for_url(re.compile(r"/optimisations/\d+$"))
    expect(page.locator("h1")).to_contain_text("of claims@1")
    breadcrumb = page.get_by_role("link", name=f"Calibration of claim_support on {DATASET}")
    expect(breadcrumb).to_have_attribute("href", f"/datasets/{DATASET}/calibration?task=claim_support")
    # htmx polls the status fragment until the optimisation ends: the page itself shows "done".
    status = page.locator("#optimise-status")
    expect(status).to_have_attribute("data-status", "done", timeout=120_000)
    expect(page.locator("#optimise-state")).to_have_text("done")
    expect(page.locator("#optimise-cancel")).to_have_count(0)
    expect(page.locator("#optimise-stop")).to_have_attribute("data-stop", "target_reached")

    # The versions tried: the start first, then the candidates, each scored on dev; one is chosen.
    rows = page.locator("#optimise-candidates tbody tr")
    tried = rows.count()
    assert tried >= 2
    versions = [rows.nth(i).get_attribute("data-version") for i in range(tried)]
    assert versions[0] == "claims@1" and len(set(versions)) == tried
    assert all(re.fullmatch(r"claims@\d+", v) for v in versions)
    expect(status).to_contain_text(f"{tried} candidates scored")
    # Every version scored on dev is counted in the selection's adjustment, and its bound is shown per row.
    expect(page.locator("#optimise-looks")).to_contain_text(f"dev: {tried} versions scored")
    expect(page.locator("#optimise-looks")).to_contain_text("adjustment: max_statistic")
    bounds = page.locator("#optimise-candidates tbody td.lower-adjusted").all_inner_texts()
    assert len(bounds) == tried and all(re.fullmatch(r"[01]\.\d{3}", b) for b in bounds)
    chosen = page.locator("#optimise-candidates tbody tr.chosen")
    expect(chosen).to_have_count(1)
    chosen_version = chosen.get_attribute("data-version")
    assert chosen_version != "claims@1"
    # The outcome names the chosen version and compares its bound with the target.
    expect(page.locator("#optimise-outcome")).to_contain_text(f"{chosen_version} reached 0.75 on dev")
    assert float(chosen.locator("td.lower-adjusted").inner_text()) >= 0.75

    # Every version tried links to its prompt page; the chosen one opens its version.
    for i, version in enumerate(versions):
        name, number = version.split("@")
        link = rows.nth(i).locator("td").first.get_by_role("link", name=version, exact=True)
        expect(link).to_have_attribute("href", f"/prompts/{name}/{number}")
    chosen.get_by_role("link", name=chosen_version, exact=True).click()
    name, number = chosen_version.split("@")
    page.wait_for_url(f"{live_server}/prompts/{name}/{number}")
    expect(page.locator("#version-title")).to_contain_text(chosen_version)
