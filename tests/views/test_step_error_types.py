"""The error type of an `incorrect` step, chosen in the workbench (issue 33): one save path with the value, refused
with a 400 naming the field when it cannot be, dropped when the label leaves `incorrect`, kept by undo and the history,
shown on reload, in review mode and in the disputes, and exported as `error_type` (docs/annotation.md, "Error types")."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup
from sqlmodel import select
from trajectory_items import trajectory_item

from calibrate import lookup
from calibrate.accounts import get_user
from calibrate.models import Assignment, Label, LabelRevision, Step
from calibrate.tasks import STEP_ERROR_TYPES, add_task, edit_task

HX = {"HX-Request": "true"}
STEPS = [dict(kind="agent", name="agent", input="Can I take ibuprofen at 12 weeks?", output="Avoid it."),
         dict(kind="tool", name="dose_check", parent=0, status="error", tool_name="dose_check",
              tool_arguments={"drug": "ibuprofen"}, tool_result={"error": "unknown drug code"}),
         dict(kind="llm", name="answer", parent=0, input="Write the answer.", output="Avoid ibuprofen.")]


def _soup(response):
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


@pytest.fixture
def trajectory(session, make_sample, login):
    """Ana, logged in, with an assigned agent trajectory of three steps (step_correctness offered on its dataset)."""
    token = login("ana")
    ana = get_user(session, "ana")
    sample = make_sample(external_id="agent-1", question="Ibuprofen at 12 weeks?", answer="Avoid ibuprofen.",
                         contexts=(), claims=[])
    assignment = trajectory_item(session, sample, ana, STEPS)
    steps = session.exec(select(Step).where(Step.sample_id == sample.id).order_by(Step.index)).all()
    return SimpleNamespace(token=token, user=ana, sample=sample, url=f"/annotate/{assignment.id}",
                           steps=[f"step:{s.id}" for s in steps])


def _post(client, item, target, *, task="step_correctness", headers=HX, **fields):
    return client.post(f"{item.url}/label", data={"task": task, "target": target, **fields},
                       headers={**headers, "X-CSRFToken": item.token})


def _label(session, target):
    session.commit()
    session.expire_all()
    return session.exec(select(Label).where(Label.target_key == target)).one_or_none()


def _cell(soup, target):
    return soup.select_one(f'.cell[data-target="{target}"]')


def _checked(cell):
    return [chip["value"] for chip in cell.select("form.error-type button[aria-checked=true]")]


def test_incorrect_offers_the_error_types_and_saves_one_with_the_label(client, session, trajectory):
    target = trajectory.steps[1]
    cell = _cell(_soup(client.get(trajectory.url)), target)
    form = cell.select_one("form.error-type")
    assert form.has_attr("hidden")  # not labelled yet: the choice waits for `incorrect`
    assert [chip["value"] for chip in form.select("button[name=error_type]")] == [*STEP_ERROR_TYPES, ""]
    assert [chip["data-key"] for chip in form.select("button[name=error_type]")] == ["1", "2", "3", "4", "5", "6", "7", "0"]
    assert form.select_one("[role=radiogroup]") is not None

    fragment = _soup(_post(client, trajectory, target, value="incorrect"))
    form = _cell(fragment, target).select_one("form.error-type")
    assert not form.has_attr("hidden")
    assert _checked(_cell(fragment, target)) == [""]  # none given yet
    response = _post(client, trajectory, target, error_type="wrong_arguments")
    assert response.status_code == 200
    assert _checked(_cell(_soup(response), target)) == ["wrong_arguments"]
    label = _label(session, target)
    assert (label.value, label.error_type) == ("incorrect", "wrong_arguments")
    # a reload shows it chosen
    assert _checked(_cell(_soup(client.get(trajectory.url)), target)) == ["wrong_arguments"]


def test_value_and_error_type_in_one_post_are_one_write(client, session, trajectory):
    target = trajectory.steps[2]
    assert _post(client, trajectory, target, value="incorrect", error_type="unsupported_claim").status_code == 200
    label = _label(session, target)
    assert (label.value, label.error_type) == ("incorrect", "unsupported_claim")
    revisions = session.exec(select(LabelRevision).where(LabelRevision.label_id == label.id)).all()
    assert [(r.action, r.value, r.error_type) for r in revisions] == [("create", "incorrect", "unsupported_claim")]
    # the same again changes nothing and writes no revision
    assert _post(client, trajectory, target, value="incorrect", error_type="unsupported_claim").status_code == 200
    assert len(session.exec(select(LabelRevision).where(LabelRevision.label_id == label.id)).all()) == 1


@pytest.mark.parametrize(("value", "error_type", "says"), [
    ("incorrect", "bogus", "error type 'bogus' is not one of task step_correctness's: wrong_tool, wrong_arguments"),
    ("correct", "wrong_tool", "an error type goes with the label incorrect, not correct"),
    ("not_applicable", "wrong_tool", "an error type goes with the label incorrect, not not_applicable"),
])
def test_an_error_type_the_label_cannot_have_is_a_400_naming_the_field(client, session, trajectory, value, error_type, says):
    target = trajectory.steps[0]
    assert _post(client, trajectory, target, value="incorrect", error_type="wrong_tool").status_code == 200
    response = _post(client, trajectory, target, value=value, error_type=error_type)
    assert response.status_code == 400
    assert response.headers["X-Invalid-Field"] == "error_type"
    assert says in response.get_data(as_text=True)
    label = _label(session, target)
    assert (label.value, label.error_type) == ("incorrect", "wrong_tool")  # nothing of the refused post was written


def test_an_error_type_on_a_task_without_error_types_is_refused(client, session, trajectory):
    target = f"sample:{trajectory.sample.id}"
    response = _post(client, trajectory, target, task="trajectory_success", value="failure", error_type="wrong_tool")
    assert response.status_code == 400
    assert "task trajectory_success has no error types" in response.get_data(as_text=True)
    assert _label(session, target) is None


def test_a_plain_form_refusal_is_a_400_too(client, session, trajectory):
    response = _post(client, trajectory, trajectory.steps[0], headers={}, value="incorrect", error_type="bogus")
    assert response.status_code == 400
    assert _label(session, trajectory.steps[0]) is None


def test_changing_the_label_away_from_incorrect_clears_it_and_undo_brings_it_back(client, session, trajectory):
    target = trajectory.steps[1]
    _post(client, trajectory, target, value="incorrect", error_type="misread_result")
    fragment = _soup(_post(client, trajectory, target, value="correct"))
    assert _cell(fragment, target).select_one("form.error-type").has_attr("hidden")
    assert _checked(_cell(fragment, target)) == []
    assert _label(session, target).error_type is None
    # back to incorrect: the type is not remembered from before (it was cleared), none given
    _post(client, trajectory, target, value="incorrect")
    assert _label(session, target).error_type is None
    # undo twice: incorrect without a type → correct → incorrect with misread_result
    for _ in range(2):
        response = client.post(f"{trajectory.url}/undo", headers={**HX, "X-CSRFToken": trajectory.token})
    assert _checked(_soup(response).select_one(".cell")) == ["misread_result"]
    label = _label(session, target)
    assert (label.value, label.error_type) == ("incorrect", "misread_result")


def test_none_given_clears_it_and_a_rationale_keeps_it(client, session, trajectory):
    target = trajectory.steps[0]
    _post(client, trajectory, target, value="incorrect", error_type="wrong_tool")
    _post(client, trajectory, target, rationale="called the wrong calculator")
    assert _label(session, target).error_type == "wrong_tool"
    _post(client, trajectory, target, error_type="")
    label = _label(session, target)
    assert (label.value, label.error_type, label.rationale) == ("incorrect", None, "called the wrong calculator")


def test_the_history_shows_each_error_type(client, trajectory):
    target = trajectory.steps[1]
    _post(client, trajectory, target, value="incorrect", error_type="wrong_tool")
    _post(client, trajectory, target, error_type="wrong_arguments")
    page = _soup(client.get(f"{trajectory.url}/history", query_string={"task": "step_correctness", "target": target},
                            headers=HX))
    assert "Incorrect · wrong arguments" in page.select_one("#history p").get_text()
    rows = [[td.get_text() for td in tr.select("td")][2:4] for tr in page.select("#history tbody tr")]
    assert rows == [["changed from", "Incorrect · wrong tool"], ["created as", "Incorrect · wrong tool"]]


def test_tasks_without_error_types_show_nothing_new(client, session, trajectory):
    add_task(session, "step_ok", target="step", kind="categorical", labels=["correct", "incorrect"])
    session.commit()
    page = _soup(client.get(trajectory.url))
    assert page.select(".cell[data-task=step_ok] form.error-type") == []
    assert page.select(".cell[data-task=trajectory_success] form.error-type") == []
    assert len(page.select(".cell[data-task=step_correctness] form.error-type")) == 3
    edit_task(session, "step_correctness", error_types=[])  # the engineer removes the taxonomy
    session.commit()
    assert _soup(client.get(trajectory.url)).select("form.error-type") == []


def test_in_spanish(client, trajectory):
    target = trajectory.steps[1]
    _post(client, trajectory, target, value="incorrect", error_type="unsafe_advice")
    page = _soup(client.get(trajectory.url, headers={"Accept-Language": "es"}))
    form = _cell(page, target).select_one("form.error-type")
    assert "tipo de error:" in form.get_text()
    assert form.select_one("button[aria-checked=true]").get_text(" ", strip=True) == "5 consejo peligroso"
    assert form.select_one('button[value=""]').get_text(" ", strip=True) == "0 no se indicó"
    help_text = page.select_one("#help").get_text(" ")
    assert "tipo de error" in help_text and "desplegar o plegar el paso" in help_text


def _log_in(client, username):
    """Log a fresh test client in; return its CSRF token."""
    token = _soup(client.get("/login")).select_one("input[name=csrf_token]")["value"]
    assert client.post("/login", data={"username": username, "password": "password-123", "csrf_token": token}).status_code == 303
    return _soup(client.get("/datasets")).select_one(".whoami input[name=csrf_token]")["value"]


def test_review_mode_and_the_disputes_show_the_error_types(app, client, session, trajectory, make_user):
    target = trajectory.steps[1]
    _post(client, trajectory, target, value="incorrect", error_type="wrong_tool")
    session.commit()  # end the test session's read snapshot: it writes next
    eng = make_user("eng", "engineer")
    client = app.test_client()  # the engineer's browser
    token = _log_in(client, "eng")
    assignment = Assignment(sample_id=trajectory.sample.id, user_id=eng.id, status="pending")
    session.add(assignment)
    session.commit()
    item = SimpleNamespace(url=f"/annotate/{assignment.id}", token=token)
    client.post("/annotate/review-mode", data={"on": "1", "back": item.url, "csrf_token": token})
    assert _post(client, item, target, value="correct").status_code == 200
    assert _post(client, item, f"sample:{trajectory.sample.id}", task="answer_quality", value="4").status_code == 200
    review = _soup(client.get(f"{item.url}/review", headers=HX))
    assert "Incorrect · wrong tool" in [td.get_text() for td in review.select("tr.other-label td")]
    disputes = _soup(client.get("/adjudicate?dataset=d&task=step_correctness"))
    values = {td.get_text(" ", strip=True) for td in disputes.select("td.vote-value")}
    assert values == {"Incorrect · wrong tool", "Correct"}


def test_the_browser_save_round_trips_through_the_export(client, session, trajectory, runner, tmp_path):
    _post(client, trajectory, trajectory.steps[0], value="correct")
    _post(client, trajectory, trajectory.steps[1], value="incorrect", error_type="wrong_arguments")
    _post(client, trajectory, trajectory.steps[2], value="incorrect")
    out = runner.invoke(["export", "labels", "--dataset", "d", "--task", "step_correctness"])
    assert out.exit_code == 0, out.output
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    assert [(line["step"], line["value"], line.get("error_type")) for line in lines] == [
        (0, "correct", None), (1, "incorrect", "wrong_arguments"), (2, "incorrect", None)]
    # imported again, it is what is stored: nothing changes
    path = tmp_path / "labels.jsonl"
    path.write_text(out.stdout)
    again = runner.invoke(["import", "labels", str(path), "--dataset", "d"])
    assert again.exit_code == 0, again.output
    assert "nothing changed: every record was already imported (3 records)" in again.output
    task = lookup.task(session, "step_correctness")
    session.commit()
    stored = {(label.target_key, label.error_type) for label in session.exec(select(Label).where(Label.task_id == task.id))}
    assert stored == {(trajectory.steps[0], None), (trajectory.steps[1], "wrong_arguments"), (trajectory.steps[2], None)}
