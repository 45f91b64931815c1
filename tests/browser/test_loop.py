"""Real browser: from the calibration dashboard, open a disagreement, add it as a few-shot example,
see v2 created with it, run v2, and see the target excluded from v2's scores."""

from __future__ import annotations

from sqlmodel import select

from calibrate.calibration import Options
from calibrate.calibration.compare import compare_judges
from calibrate.db import write_session
from calibrate.demo import DATASET, load_demo
from calibrate.judges import RunSpec, execute_run, prepare_run, save_version
from calibrate.models import FewShot, Prompt, PromptVersion


def _run(engine, prompt):
    execute_run(engine, prepare_run(engine, RunSpec(dataset=DATASET, prompt=prompt, backend="baseline", split="dev")), prices={})


def test_disagreement_to_fewshot_to_v2(page, live_server, browser_login, engine, session):
    load_demo(engine)
    with write_session(engine) as s:
        save_version(s, "claims", task="claim_support")
    _run(engine, "claims@1")
    browser_login("eng", "engineer")
    page.goto(f"{live_server}/datasets/{DATASET}/calibration")
    assert page.locator("#judges tr[data-judge='claims@1'] .n-fewshot").inner_text() == "0"
    page.click("#judges tr[data-judge='claims@1'] a.disagreements")
    first = page.locator("#disagreements tbody tr").first
    target = first.get_attribute("data-target")
    first.locator("a").click()
    page.wait_for_url(f"{live_server}/datasets/{DATASET}/calibration/judges/claims@1/disagreements/{target}*")
    page.wait_for_load_state()  # count() does not wait: the page must be there first
    assert page.locator("#judge-raw").count() == 1 and page.locator("#gold").inner_text()
    page.fill("#fewshot-form textarea[name=rationale]", "La fuente lo dice <b>así</b>.")
    page.click("#fewshot-form button[type=submit]")
    page.wait_for_url(f"{live_server}/prompts/claims/2")
    assert "Created claims@2" in page.locator(".flash").inner_text()
    assert page.locator("#few-shots h2").inner_text() == "Few-shot examples (1)"
    assert "La fuente lo dice <b>así</b>." in page.locator("#few-shots").inner_text()
    session.rollback()
    shots = session.exec(select(FewShot.target_key).join(PromptVersion, PromptVersion.id == FewShot.version_id)
                         .join(Prompt, Prompt.id == PromptVersion.prompt_id).where(Prompt.name == "claims", PromptVersion.number == 2)).all()
    assert shots == [target]
    _run(engine, "claims@2")
    page.goto(f"{live_server}/datasets/{DATASET}/calibration")
    row = page.locator("#judges tr[data-judge='claims@2']")
    assert row.locator(".n-fewshot").inner_text() == "1"
    # both versions are scored on the same targets: v2's example is left out of v1's figure too ...
    n1 = int(page.locator("#judges tr[data-judge='claims@1'] .n").inner_text())
    assert int(row.locator(".n").inner_text()) == n1
    assert f"Scored on the {n1} targets common to all versions" in page.locator("#common-targets").inner_text()
    # ... and v1's own figure, on all its targets, is shown beside: one target more
    assert f"n {n1 + 1}" in page.locator("#judges tr[data-judge='claims@1'] .own").inner_text()
    # ... and it is that target which v2 does not score: it is no longer among v2's disagreements.
    page.click("#judges tr[data-judge='claims@2'] a.disagreements")
    assert page.locator(f"#disagreements tr[data-target='{target}']").count() == 0


def test_compare_two_versions_from_the_dashboard(page, live_server, browser_login, engine, session):
    load_demo(engine)
    browser_login("eng", "engineer")
    page.goto(f"{live_server}/datasets/{DATASET}/calibration")
    # the form is pre-filled with the last two judges that ran
    assert page.locator("#compare-form select[name=a]").input_value() == "demo-claims@1"
    assert page.locator("#compare-form select[name=b]").input_value() == "demo-claims@2"
    page.click("#compare-form button[type=submit]")
    page.wait_for_url(f"{live_server}/datasets/{DATASET}/calibration/compare?*")
    cells = page.locator("#task-claim_support table.stats tbody tr").first.locator("td")
    expected = compare_judges(session, DATASET, "demo-claims@1", "demo-claims@2", task="claim_support",
                              options=Options(bootstrap=100, split="dev"))  # the point values do not depend on the bootstrap
    assert cells.nth(1).inner_text() == f"{expected['a']['value']:.3f}"
    assert cells.nth(2).inner_text() == f"{expected['b']['value']:.3f}"
    n_fixed, n_broken = expected["flips"]["n_fixed"], expected["flips"]["n_broken"]
    assert f"{n_fixed} fixed by B, {n_broken} broken by B" in page.locator("#task-claim_support .flips").inner_text()
    flips = page.locator("#task-claim_support .flips a")
    assert flips.count() == n_fixed + n_broken > 0
    flips.first.click()
    page.wait_for_url(f"{live_server}/datasets/{DATASET}/calibration/judges/*/disagreements/claim:*")
    assert page.locator("#gold").inner_text() and page.locator("#judge-raw").count() == 1
