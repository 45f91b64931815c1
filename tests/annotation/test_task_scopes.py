"""Tasks scoped to datasets (`calibrate task add --dataset`): the workbench shows an item only the tasks of its
dataset and the global ones, refuses a label on another dataset's task (400 naming `task`), and imports refuse it;
built-in and unscoped custom tasks stay global."""

from __future__ import annotations

import json

import pytest
from bs4 import BeautifulSoup
from sqlmodel import select

from calibrate.accounts import get_user
from calibrate.annotation.items import TaskNotOffered, build_item, load_item
from calibrate.models import Assignment, Claim, Sample, Task, TaskDataset

HX = {"HX-Request": "true"}


def _assign(session, sample, user):
    assignment = Assignment(sample_id=sample.id, user_id=user.id, status="pending")
    session.add(assignment)
    session.commit()
    return assignment


def _two_datasets(runner, make_sample):
    """Datasets news and claims, a task for news only, one for both, and one global custom task."""
    make_sample(dataset="news", external_id="n1", claims=["Uno."])
    make_sample(dataset="claims", external_id="c1", claims=["Dos."])
    make_sample(dataset="other", external_id="o1", claims=["Tres."])
    for args in (["headline_ok", "--target", "sample", "--kind", "categorical", "--labels", "yes,no", "--dataset", "news"],
                 ["checkable", "--target", "claim", "--kind", "categorical", "--labels", "yes,no", "--dataset", "news",
                  "--dataset", "claims", "--dataset", "news"],
                 ["tone", "--target", "sample", "--kind", "ordinal", "--scale", "1-5"]):
        result = runner.invoke(["task", "add", *args])
        assert result.exit_code == 0, result.output


def test_task_add_dataset_scopes_the_task_and_task_list_says_so(runner, make_sample, session):
    _two_datasets(runner, make_sample)
    added = runner.invoke(["task", "add", "x", "--target", "sample", "--kind", "continuous", "--dataset", "claims"])
    assert added.output == "added task x: continuous on sample (any number), for dataset claims only\n"
    listing = runner.invoke(["task", "list"]).output.splitlines()
    assert "headline_ok\tsample\tcategorical\tyes,no\tdatasets news" in listing
    assert "checkable\tclaim\tcategorical\tyes,no\tdatasets claims,news" in listing  # each once
    assert any(line.startswith("tone\tsample\tordinal\t") and "datasets" not in line for line in listing)
    assert any(line.startswith("claim_support\tclaim\tcategorical\t") and "datasets" not in line for line in listing)
    unknown = runner.invoke(["task", "add", "y", "--target", "sample", "--kind", "continuous", "--dataset", "nope"])
    assert unknown.exit_code == 2 and "unknown dataset 'nope'" in unknown.output
    assert session.exec(select(Task).where(Task.name == "y")).first() is None  # nothing half-written
    checkable = session.exec(select(Task).where(Task.name == "checkable")).one()
    assert len(session.exec(select(TaskDataset).where(TaskDataset.task_id == checkable.id)).all()) == 2


def test_the_workbench_shows_an_item_only_its_datasets_tasks(runner, make_sample, make_user, session):
    _two_datasets(runner, make_sample)
    ana = make_user("ana", "annotator")
    shown = {}
    for external in ("n1", "c1", "o1"):
        sample = session.exec(select(Sample).where(Sample.external_id == external)).one()
        item = build_item(session, _assign(session, sample, ana), ana)
        shown[external] = sorted({cell.task.name for cell in item.cells})
    assert shown["n1"] == ["answer_quality", "checkable", "claim_support", "context_relevance", "headline_ok", "tone"]
    assert shown["c1"] == ["answer_quality", "checkable", "claim_support", "context_relevance", "tone"]
    assert shown["o1"] == ["answer_quality", "claim_support", "context_relevance", "tone"]


def test_a_label_on_another_datasets_task_is_refused(runner, make_sample, session, client, login):
    _two_datasets(runner, make_sample)
    token = login("ana")
    ana = get_user(session, "ana")
    sample = session.exec(select(Sample).where(Sample.external_id == "o1")).one()
    assignment = _assign(session, sample, ana)
    page = BeautifulSoup(client.get(f"/annotate/{assignment.id}").data, "html.parser")
    assert page.select("[data-task=headline_ok]") == [] and page.select("[data-task=checkable]") == []
    assert page.select("[data-task=tone]")  # the global custom task is there
    claim = session.exec(select(Claim).where(Claim.sample_id == sample.id)).one()
    refused = client.post(f"/annotate/{assignment.id}/label", data={"task": "checkable", "target": f"claim:{claim.id}",
                                                                     "value": "yes"}, headers={**HX, "X-CSRFToken": token})
    assert refused.status_code == 400 and refused.headers["X-Invalid-Field"] == "task"
    assert refused.get_data(as_text=True) == "task checkable is scoped to claims, news: it is not labelled or judged on other"
    spanish = client.post(f"/annotate/{assignment.id}/label", data={"task": "checkable", "target": f"claim:{claim.id}",
                                                                     "value": "yes"},
                          headers={**HX, "X-CSRFToken": token, "Accept-Language": "es"})
    assert spanish.status_code == 400 and spanish.get_data(as_text=True).startswith("la tarea checkable está limitada a claims, news")
    ok = client.post(f"/annotate/{assignment.id}/label", data={"task": "tone", "target": f"sample:{sample.id}", "value": "3"},
                     headers={**HX, "X-CSRFToken": token})
    assert ok.status_code == 200
    with pytest.raises(TaskNotOffered, match="scoped to claims, news"):
        load_item(session, ana, assignment.id).task("checkable")


def test_importing_labels_of_another_datasets_task_is_refused(runner, make_sample, tmp_path):
    _two_datasets(runner, make_sample)
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({"sample_id": "o1", "task": "checkable", "claim": 0, "annotator": "a", "value": "yes"}) + "\n")
    result = runner.invoke(["import", "labels", "--dataset", "other", str(path)])
    assert result.exit_code == 2
    assert "task checkable is scoped to claims, news: it is not labelled or judged on other" in result.output
    path.write_text(json.dumps({"sample_id": "c1", "task": "checkable", "claim": 0, "annotator": "a", "value": "yes"}) + "\n")
    assert runner.invoke(["import", "labels", "--dataset", "claims", str(path)]).exit_code == 0


def test_the_tasks_page_names_a_scoped_tasks_datasets(runner, make_sample, client, login):
    _two_datasets(runner, make_sample)
    login("eng", "engineer")
    page = BeautifulSoup(client.get("/tasks").data, "html.parser")
    scopes = [s.get_text() for s in page.select(".task-scope")]
    assert scopes == ["for news only", "for claims, news only"]
    spanish = BeautifulSoup(client.get("/tasks", headers={"Accept-Language": "es"}).data, "html.parser")
    assert spanish.select_one(".task-scope").get_text() == "solo para news"
