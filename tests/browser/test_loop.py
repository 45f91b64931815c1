"""Real browser: from the calibration dashboard, open a disagreement, add it as a few-shot example,
see v2 created with it, run v2, and see the target excluded from v2's scores."""

from __future__ import annotations

from sqlmodel import select

from calibrate.calibration import Options
from calibrate.calibration.compare import compare_judges
from calibrate.db import write_session
from calibrate.demo import DATASET
from calibrate.judges import RunSpec, execute_run, prepare_run, save_version
from calibrate.models import FewShot, Prompt, PromptVersion


def _run(engine, prompt):
    execute_run(engine, prepare_run(engine, RunSpec(dataset=DATASET, prompt=prompt, backend="baseline", split="dev")), prices={})


def test_disagreement_to_fewshot_to_v2(load_demo_copy, page, live_server, browser_login, engine, session):
    load_demo_copy(engine)
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


def test_compare_two_versions_from_the_dashboard(load_demo_copy, page, live_server, browser_login, engine, session):
    load_demo_copy(engine)
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


def test_dashboard_three_states_and_the_test_split_asks_before_each_look(load_demo_copy, page, live_server, browser_login, engine, session, app):
    from calibrate.models import Judge, Label, Task, TestEvaluation, User, Verdict
    from calibrate.reports.charts import OUTCOME_COLOURS

    load_demo_copy(engine)
    app.config["BOOTSTRAP"] = 300
    two = session.exec(select(Judge).where(Judge.name == "demo-claims@2")).one()
    # an imported judge that always says "supported": it fails
    lazy = Judge(name="lazy", kind="imported")
    session.add(lazy)
    session.flush()
    for v in session.exec(select(Verdict).where(Verdict.judge_id == two.id)).all():
        session.add(Verdict(judge_id=lazy.id, task_id=v.task_id, sample_id=v.sample_id, claim_id=v.claim_id,
                            target_key=v.target_key, value="supported", status="ok", source="import"))
    # and one that copies an expert: right wherever there is gold (the experts agree, or they tie and there is none)
    copycat = Judge(name="copycat", kind="imported")
    session.add(copycat)
    session.flush()
    expert = session.exec(select(User).where(User.username == "dra.garcia")).one()
    claims = session.exec(select(Task).where(Task.name == "claim_support")).one()
    for label in session.exec(select(Label).where(Label.annotator_id == expert.id, Label.task_id == claims.id)).all():
        session.add(Verdict(judge_id=copycat.id, task_id=label.task_id, sample_id=label.sample_id, claim_id=label.claim_id,
                            target_key=label.target_key, value=label.value, status="ok", source="import"))
    session.commit()
    browser_login("eng", "engineer")
    page.goto(f"{live_server}/datasets/{DATASET}/calibration")
    states = {}
    for judge in ("demo-claims@1", "demo-claims@2", "copycat", "lazy"):
        cell = page.locator(f"#judges tr[data-judge='{judge}'] td.decision")
        states[judge] = cell.get_attribute("data-decision")
        assert cell.locator(".badge").inner_text() == states[judge]
        assert "(rule: point" in cell.locator(".decision-text").inner_text()
    assert states == {"demo-claims@1": "undecided", "demo-claims@2": "undecided", "copycat": "pass", "lazy": "fail"}
    assert "label ≈" in page.locator("#judges tr[data-judge='demo-claims@2'] .decision-text").inner_text()
    # the chart colours each point by its decision
    fills = [page.locator("#versions-chart circle.estimate").nth(i).get_attribute("fill") for i in range(4)]
    assert fills == [OUTCOME_COLOURS[states[j]] for j in ("demo-claims@1", "demo-claims@2", "copycat", "lazy")]
    # "Evaluate on test…" asks first, without JavaScript doing it: a page that records nothing
    page.locator("#judges tr[data-judge='demo-claims@2'] form.evaluate-test button").click()
    page.wait_for_url(f"{live_server}/datasets/{DATASET}/calibration/judges/demo-claims@2/evaluate-test")
    assert page.locator("#judge-looks").inner_text() == "0" and page.locator("#all-looks").inner_text() == "0"
    assert "false pass" in page.locator("#look-cost").inner_text()
    session.rollback()
    assert session.exec(select(TestEvaluation)).all() == []
    page.click("#confirm-look-form a")  # cancel: back to the dashboard, still nothing recorded
    page.wait_for_url(f"{live_server}/datasets/{DATASET}/calibration?*")
    assert page.locator("#test-looks").inner_text() == "0"
    for look in (1, 2):
        page.locator("#judges tr[data-judge='demo-claims@2'] form.evaluate-test button").click()
        page.wait_for_url("**/evaluate-test")
        assert page.locator("#all-looks").inner_text() == str(look - 1)
        page.click("#confirm-look-form button[type=submit]")
        page.wait_for_url(f"{live_server}/datasets/{DATASET}/calibration?*")
        assert page.locator("#test-looks").inner_text() == str(look)
        decision = page.locator("#judges tr[data-judge='demo-claims@2'] .test-score").get_attribute("data-decision")
        assert decision in ("pass", "fail", "undecided")
        assert f"{decision} — κ" in page.locator(".flash").inner_text()
    session.rollback()
    looks = session.exec(select(TestEvaluation)).all()
    assert len(looks) == 2 and {(x.decision, x.rule, x.threshold) for x in looks} == {(decision, "point", 0.75)}
