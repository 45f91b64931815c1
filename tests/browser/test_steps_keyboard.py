"""Real Chromium on an agent's trajectory (issue 33): the steps as a timeline folded to a line each, labelled with the
keyboard as claims are, unfolded with `o`; an `incorrect` step's error type chosen by keyboard and seen after a reload;
Spanish words; on a phone the steps stack. With CALIBRATE_UPDATE_SCREENSHOTS=1 it writes
docs/img/annotate-steps-*.png (docs/annotation.md)."""

from __future__ import annotations

import os
from pathlib import Path

from browser_helpers import eventually
from playwright.sync_api import expect
from sqlmodel import select
from trajectory_items import trajectory_item

from calibrate import lookup
from calibrate.accounts import get_user
from calibrate.models import Label, Step

DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
STEPS = [
    dict(kind="agent", name="prenatal-agent", input="12 weeks pregnant: can I take ibuprofen for a headache?",
         output="Avoid ibuprofen; paracetamol at the lowest dose is preferred."),
    dict(kind="llm", name="plan", parent=0, input="Plan the answer.", output="Check the drug's safety first."),
    dict(kind="tool", name="dose_check", parent=0, status="error", tool_name="dose_check",
         tool_arguments={"drug": "ibuprofen", "weeks": 12}, tool_result={"error": "unknown drug code"}),
    dict(kind="retriever", name="guidelines", parent=0, input="NSAIDs pregnancy",
         output="NSAIDs should be avoided in pregnancy unless clearly needed. " * 8),
]


def _trajectory_item(session, make_sample, make_user):
    make_user("ana")
    ana = get_user(session, "ana")
    sample = make_sample(external_id="agent-1", question="Can I take ibuprofen at 12 weeks?",
                         answer="Avoid ibuprofen; paracetamol is preferred.", contexts=(), claims=[])
    return sample, trajectory_item(session, sample, ana, STEPS)


def _watched(page, live_server, assignment) -> list[str]:
    """Open the item as ana; return the list the page's script errors are gathered in."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    _open(page, live_server, assignment)
    return errors


def _open(page, live_server, assignment):
    page.goto(f"{live_server}/login")
    page.fill("input[name=username]", "ana")
    page.fill("input[name=password]", "password-123")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server}/annotate")
    page.goto(f"{live_server}/annotate/{assignment.id}")


def _step_labels(session, sample, *, error_types=False):
    """Return step index → its label's value (with `error_types`: (value, error type))."""
    session.commit()
    session.expire_all()
    steps = {s.id: s.index for s in session.exec(select(Step).where(Step.sample_id == sample.id)).all()}
    return {steps[label.step_id]: (label.value, label.error_type) if error_types else label.value
            for label in session.exec(select(Label)).all() if label.target_key.startswith("step:") and label.step_id in steps}


def test_label_the_steps_of_a_trajectory_with_the_keyboard(page, live_server, session, make_sample, make_user):
    sample, assignment = _trajectory_item(session, make_sample, make_user)
    errors = _watched(page, live_server, assignment)
    steps = page.locator("#steps .step")
    expect(steps).to_have_count(4)
    tool = steps.nth(2)
    expect(tool.locator(".step-kind")).to_have_text("tool")
    expect(tool.locator(".step-status")).to_have_text("error")
    expect(tool.locator(".step-line")).to_contain_text('{"drug": "ibuprofen", "weeks": 12} → {"error": "unknown drug code"}')
    expect(tool.locator(".step-body")).not_to_be_visible()  # folded to its line until asked
    cells = page.locator("#steps .cell")
    expect(cells).to_have_count(4)
    for _ in range(8):  # j walks the cells in keyboard order (the answer's, then the steps')
        if "focused" in (cells.first.get_attribute("class") or ""):
            break
        page.keyboard.press("j")
    expect(cells.first).to_have_class("cell focused")
    # correct, correct, incorrect (the focus stays for its error type: 1, wrong tool), correct: each hands on to the next
    for key in ("1", "1", "2", "1", "1"):
        page.keyboard.press(key)
    assert eventually(lambda: _step_labels(session, sample) == {0: "correct", 1: "correct", 2: "incorrect", 3: "correct"})
    assert _step_labels(session, sample, error_types=True).get(2) == ("incorrect", "wrong_tool")
    expect(cells.nth(3).locator(".save-state[data-state=saved]")).to_have_count(1)
    page.keyboard.press("k")  # back to the tool step's cell
    page.keyboard.press("o")  # unfold that step
    expect(tool.locator(".step-body")).to_be_visible()
    expect(tool.locator(".step-body")).to_contain_text("unknown drug code")
    expect(steps.nth(0).locator(".step-body")).not_to_be_visible()
    assert errors == []


def test_an_incorrect_steps_error_type_by_keyboard_survives_a_reload(page, live_server, session, make_sample, make_user):
    sample, assignment = _trajectory_item(session, make_sample, make_user)
    errors = _watched(page, live_server, assignment)
    cells = page.locator("#steps .cell")
    tool = cells.nth(2)
    expect(tool.locator("form.error-type")).to_be_hidden()  # nothing to choose before the label says incorrect
    tool.click(position={"x": 5, "y": 5})
    expect(tool).to_have_class("cell focused")
    page.keyboard.press("2")  # incorrect: the error types appear and the focus stays to pick one
    expect(tool.locator("form.error-type")).to_be_visible()
    expect(page.locator("#annotate.picking-error-type")).to_have_count(1)
    expect(tool).to_have_class("cell focused")
    page.keyboard.press("2")  # the second type: wrong arguments
    assert eventually(lambda: _step_labels(session, sample, error_types=True) == {2: ("incorrect", "wrong_arguments")})
    expect(cells.nth(3)).to_have_class("cell focused")  # then on to the next step
    # The step after it: incorrect, then j leaves its type unchosen and moves on (nothing picked by accident).
    page.keyboard.press("2")
    page.keyboard.press("k")
    assert eventually(lambda: _step_labels(session, sample, error_types=True).get(3) == ("incorrect", None))
    expect(tool).to_have_class("cell focused")
    page.keyboard.press("w")  # change the focused step's type: w, then 6 (missed step)
    page.keyboard.press("6")
    assert eventually(lambda: _step_labels(session, sample, error_types=True).get(2) == ("incorrect", "missed_step"))
    page.reload()
    chosen = page.locator("#steps .cell").nth(2).locator("form.error-type button[aria-checked=true]")
    expect(chosen).to_have_count(1)
    expect(chosen).to_have_attribute("value", "missed_step")
    expect(chosen).to_contain_text("missed step")
    expect(page.locator("#steps .cell").nth(3).locator('form.error-type button[value=""]')).to_have_attribute(
        "aria-checked", "true")  # incorrect with none given
    # Correct now: the choice goes away, and the stored type with it.
    page.locator("#steps .cell").nth(2).locator("button.choice[value=correct]").click()
    expect(page.locator("#steps .cell").nth(2).locator("form.error-type")).to_be_hidden()
    assert eventually(lambda: _step_labels(session, sample, error_types=True).get(2) == ("correct", None))
    page.keyboard.press("?")
    expect(page.locator("#help")).to_contain_text("unfold or fold the focused step")
    expect(page.locator("#help")).to_contain_text("the error type of the focused label")
    assert errors == []


def _label_the_tool_step(session, sample, assignment):
    """Ana's labels for the screenshots: the first steps correct, the failing tool call incorrect (wrong tool)."""
    task = lookup.task(session, "step_correctness")
    steps = session.exec(select(Step).where(Step.sample_id == sample.id).order_by(Step.index)).all()
    for step, value, error_type in zip(steps, ("correct", "correct", "incorrect"), (None, None, "wrong_tool"), strict=False):
        session.add(Label(task_id=task.id, sample_id=sample.id, step_id=step.id, target_key=f"step:{step.id}",
                          annotator_id=assignment.user_id, value=value, error_type=error_type))
    session.commit()


def test_the_trajectory_in_spanish_and_on_a_phone(browser, live_server, session, make_sample, make_user, tmp_path):
    sample, assignment = _trajectory_item(session, make_sample, make_user)
    _label_the_tool_step(session, sample, assignment)
    folder = DOCS_IMG if os.environ.get("CALIBRATE_UPDATE_SCREENSHOTS") == "1" else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    for name, viewport, locale in (("annotate-steps-desktop-en.png", {"width": 1200, "height": 900}, "en-US"),
                                   ("annotate-steps-desktop-es.png", {"width": 1200, "height": 900}, "es-ES"),
                                   ("annotate-steps-phone-en.png", {"width": 390, "height": 844}, "en-US")):
        context = browser.new_context(viewport=viewport, device_scale_factor=1, locale=locale)
        page = context.new_page()
        try:
            _open(page, live_server, assignment)
            timeline = page.locator("#steps")
            expect(timeline.locator(".step")).to_have_count(4)
            if locale == "es-ES":
                expect(page.locator("#steps-title")).to_contain_text("Trayectoria")
                expect(timeline.locator(".step").nth(2).locator(".step-kind")).to_have_text("herramienta")
                expect(timeline.locator(".step").nth(2).locator(".step-status")).to_have_text("error")
                expect(timeline.locator(".cell").first.locator(".choice-text").first).to_have_text("Correcto")
                expect(timeline.locator(".cell").nth(2).locator("form.error-type [aria-checked=true]")).to_contain_text(
                    "herramienta equivocada")
            first, second = (timeline.locator(".step").nth(i).bounding_box() for i in (1, 2))
            if viewport["width"] < 640:  # stacked: every step at the left edge, one under the other, its line wrapped
                assert abs(first["x"] - second["x"]) < 1 and second["y"] > first["y"] + first["height"] - 1
                assert timeline.locator(".step").nth(1).evaluate("e => getComputedStyle(e).marginLeft") == "0px"
            else:  # indented under the agent step
                assert first["x"] > timeline.locator(".step").nth(0).bounding_box()["x"]
            # The timeline from its top; on a phone from the failing tool step, its error type chosen.
            top = timeline.locator(".step").nth(2) if viewport["width"] < 640 else page.locator("#steps-title")
            top.evaluate("e => e.scrollIntoView({block: 'start'})")
            page.screenshot(path=str(folder / name))
        finally:
            context.close()
