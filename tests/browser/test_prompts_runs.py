"""Real browser: the Prompts and Runs pages. An engineer creates a prompt, saves version 2 from
version 1 (an edited template and a few-shot example) and compares them side by side; a
template with an unknown field is refused with the field's name; Run with the baseline shows
progress polled by htmx until "done"; hostile text in a note or template stays text; an
annotator gets 403 on every page."""

from __future__ import annotations

import threading

import pytest
from hostile import XSS_ANSWER
from playwright.sync_api import expect
from sqlmodel import select

import calibrate.views.runs as runs_view
from calibrate.demo import DATASET
from calibrate.demo.judges import PROMPT
from calibrate.gold import human_gold
from calibrate.models import Claim, JudgeRun, Label, Sample, Task, Verdict


@pytest.fixture
def engineer(load_demo_copy, page, live_server, browser_login, engine):
    """The demo data, and the page logged in as an engineer."""
    load_demo_copy(engine)
    browser_login("eng", "engineer")
    return page


def _create_prompt(page, live_server, name: str = "claims") -> None:
    page.goto(f"{live_server}/prompts")
    page.fill("#new-prompt input[name=name]", name)
    page.select_option("#new-prompt select[name=task]", "claim_support")
    page.click("#new-prompt button[type=submit]")
    page.wait_for_url(f"{live_server}/prompts/{name}/1")


def _few_shot_ref(session) -> str:
    """Return `SAMPLE:N` of a claim with a human gold label outside the test split."""
    task = session.exec(select(Task).where(Task.name == "claim_support")).one()
    keys = session.exec(select(Label.target_key).where(Label.task_id == task.id).distinct()).all()
    for key in sorted(keys):
        claim = session.get(Claim, int(key.split(":")[1]))
        sample = session.get(Sample, claim.sample_id)
        if sample.split != "test" and human_gold(session, task, key)[0] is not None:
            return f"{sample.external_id}:{claim.index}"
    raise AssertionError("the demo has no usable few-shot target")


def test_new_version_from_the_previous_one_and_the_side_by_side_diff(engineer, live_server, session):
    page = engineer
    _create_prompt(page, live_server)
    assert page.locator("#version-title").inner_text().startswith("claims@1")
    original = page.locator("#template pre").inner_text()
    assert page.locator("#few-shots h2").inner_text() == "Few-shot examples (0)"

    page.click("#new-version")
    page.wait_for_url(f"{live_server}/prompts/claims/1/edit")
    template = page.locator("#version-form textarea[name=template]")
    assert template.input_value() == original  # the form starts from the previous version
    template.fill(original + "\nBe strict: a number absent from the contexts is unsupported.")
    ref = _few_shot_ref(session)
    page.fill("#version-form textarea[name=few_shots]", f"{ref} | the source states it")
    page.fill("#version-form input[name=note]", "stricter about numbers")
    page.click("#version-form button[type=submit]")

    page.wait_for_url(f"{live_server}/prompts/claims/2")
    assert "Saved claims@2." in page.locator(".flash").inner_text()
    assert page.locator("#version-title").inner_text().startswith("claims@2")
    assert page.locator("#version-facts").get_by_role("link", name="claims@1").count() == 1
    assert page.locator("#few-shots h2").inner_text() == "Few-shot examples (1)"
    assert ref in page.locator("#few-shots").inner_text()
    assert "Be strict: a number absent" in page.locator("#template pre").inner_text()

    # The compare form is pre-set to parent → this version.
    assert page.locator("#compare select[name=a]").input_value() == "1"
    assert page.locator("#compare select[name=b]").input_value() == "2"
    page.click("#compare button[type=submit]")
    page.wait_for_url(f"{live_server}/prompts/claims/diff?a=1&b=2")
    assert page.locator("#changed").inner_text() == "Changed: template, few-shots."
    added = page.locator("#diff-template tr.insert td.right")
    assert added.count() == 1 and added.inner_text() == "Be strict: a number absent from the contexts is unsupported."
    # The unchanged lines sit side by side on both sides.
    first = original.splitlines()[0]
    equal = page.locator("#diff-template tr.equal").first
    assert equal.locator("td.left").inner_text() == first and equal.locator("td.right").inner_text() == first
    shots = page.locator("#diff-few-shots")
    assert ref in shots.locator("td.right").all_inner_texts()[0] and "unchanged" not in shots.locator("h2").inner_text()
    assert "(unchanged)" in page.locator("#diff-system h2").inner_text()


def test_a_template_with_an_unknown_field_is_refused_with_its_name(engineer, live_server, session):
    page = engineer
    _create_prompt(page, live_server)
    page.click("#new-version")
    page.fill("#version-form textarea[name=template]", "Claim: {{ claim.text }}\nSecret: {{ reviewer_notes }}")
    page.fill("#version-form input[name=dataset]", DATASET)
    page.fill("#version-form input[name=note]", "asks for notes")
    page.click("#version-form button[type=submit]")
    error = page.locator("#form-error")
    expect(error).to_contain_text("unknown field 'reviewer_notes'")
    assert "line 2" in error.inner_text()
    # What was typed is kept for correcting, and nothing was saved.
    assert "{{ reviewer_notes }}" in page.locator("#version-form textarea[name=template]").input_value()
    assert page.locator("#version-form input[name=dataset]").input_value() == DATASET
    assert page.locator("#version-form input[name=note]").input_value() == "asks for notes"
    page.goto(f"{live_server}/prompts")
    row = page.locator("#prompts tbody tr").filter(has=page.get_by_role("link", name="claims", exact=True))
    assert row.count() == 1 and row.locator("td.num").first.inner_text() == "1"  # one version


def test_run_with_the_baseline_shows_live_progress_until_done(engineer, live_server, session, monkeypatch):
    page = engineer
    # Hold the background run until the page is showing it, so the polling is what shows "done".
    go = threading.Event()
    execute = runs_view._execute_in_background

    def held(*args):
        go.wait(10)
        execute(*args)

    monkeypatch.setattr(runs_view, "_execute_in_background", held)
    _create_prompt(page, live_server)
    page.select_option("#run-form select[name=dataset]", DATASET)
    page.select_option("#run-form select[name=backend]", "baseline")
    assert page.locator("#run-form input[name=samples]").input_value() == "1"
    page.fill("#run-form input[name=samples]", "2")  # self-consistency: two calls per target (judge run --samples 2)
    page.click("#run-form button[type=submit]")
    page.wait_for_url(f"{live_server}/runs/*")
    run_id = int(page.url.rsplit("/", 1)[1])
    status = page.locator("#run-status")
    assert status.get_attribute("hx-get") == f"/runs/{run_id}/status"  # polling while active
    assert page.locator("#run-state").inner_text() == "pending"

    with page.expect_response(lambda r: r.url.endswith(f"/runs/{run_id}/status") and r.status == 200):
        go.set()
    expect(page.locator("#run-state")).to_have_text("done", timeout=15_000)
    assert page.locator("#run-status").get_attribute("hx-get") is None  # polling stopped
    session.rollback()
    run = session.get(JudgeRun, run_id)
    n_verdicts = len(session.exec(select(Verdict.id).where(Verdict.run_id == run_id)).all())
    assert run.status == "done" and run.n_total > 0 and run.n_done == run.n_total == n_verdicts
    indexes = session.exec(select(Verdict.sample_index).where(Verdict.run_id == run_id)).all()
    assert sorted(set(indexes)) == [0, 1] and indexes.count(0) == indexes.count(1) == run.n_total // 2
    assert page.locator("#run-samples").inner_text().startswith("2 (self-consistency")
    assert page.locator("#run-count").inner_text() == f"{run.n_total}/{run.n_total}"
    assert page.locator("#run-progress").get_attribute("value") == str(run.n_total)
    assert page.locator("#run-errors").inner_text() == "0"
    assert page.locator("#run-cached").inner_text() == "0"
    assert page.locator("#run-unparsed").inner_text() == str((run.params or {}).get("n_unparsed", 0))
    # The run is listed on the Runs page and on the version's page.
    page.goto(f"{live_server}/runs")
    row = page.locator("#runs tbody tr").filter(has=page.get_by_role("link", name=f"#{run_id}", exact=True))
    assert "claims@1" in row.inner_text() and f"{run.n_total}/{run.n_total}" in row.inner_text()
    page.goto(f"{live_server}/prompts/claims/1")
    assert "done" in page.locator("#version-runs").inner_text()


XSS_TEMPLATE = "Claim: {{ claim.text }}\n<script>alert('template')</script><img src=x onerror=\"alert('img')\">"


def test_hostile_note_and_template_render_as_text(engineer, live_server):
    page = engineer
    _create_prompt(page, live_server)
    page.click("#new-version")
    page.fill("#version-form textarea[name=template]", XSS_TEMPLATE)
    page.fill("#version-form input[name=note]", XSS_ANSWER)
    page.click("#version-form button[type=submit]")
    page.wait_for_url(f"{live_server}/prompts/claims/2")
    assert page.locator("#template pre").inner_text() == XSS_TEMPLATE
    assert page.locator("#version-facts").inner_text().count(XSS_ANSWER) == 1
    assert XSS_ANSWER in page.locator("#compare .versions").inner_text()
    page.goto(f"{live_server}/prompts/claims/diff?a=1&b=2")
    assert "<script>alert('template')</script>" in page.locator("#diff-template").inner_text()
    # A syntax error quoting hostile text is shown as text too.
    page.goto(f"{live_server}/prompts/claims/2/edit")
    page.fill("#version-form textarea[name=template]", "{{ claim.text }} {% <img src=x onerror=alert(3)> %}")
    page.click("#version-form button[type=submit]")
    expect(page.locator("#form-error")).to_contain_text("template: line 1")
    for url in ("/prompts/claims/2", "/prompts/claims/diff?a=1&b=2", "/prompts/claims/2/edit"):
        page.goto(live_server + url)
        assert page.locator("main img, main script").count() == 0, url
    # (the page fixture fails the test if any dialog opened)


def test_an_annotator_gets_403_on_prompt_and_run_pages(load_demo_copy, page, live_server, browser_login, engine, session):
    load_demo_copy(engine)
    browser_login("ana", "annotator")
    run_id = session.exec(select(JudgeRun.id)).first()
    prompt = PROMPT
    for url in ("/prompts", f"/prompts/{prompt}", f"/prompts/{prompt}/1", f"/prompts/{prompt}/1/edit",
                f"/prompts/{prompt}/diff?a=1&b=2", "/runs", f"/runs/{run_id}", f"/runs/{run_id}/status"):
        response = page.goto(live_server + url)
        assert response.status == 403, url
    # Neither can an annotator start a run (the form's POST, with a valid CSRF token).
    page.goto(f"{live_server}/annotate")
    token = page.locator("body").get_attribute("hx-headers")
    response = page.request.post(f"{live_server}/prompts/{prompt}/1/run", form={"dataset": DATASET, "backend": "baseline"},
                                 headers={"X-CSRFToken": token.split('"')[3]})
    assert response.status == 403
