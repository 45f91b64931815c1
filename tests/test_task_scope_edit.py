"""`calibrate task edit NAME --dataset D` / `--all-datasets`: a task's datasets set after it was added, with the
checks of `task add --dataset`, and a refusal (nothing changed) that would leave labels or verdicts on a dataset the
task is no longer offered on."""

from __future__ import annotations

from bs4 import BeautifulSoup
from sqlmodel import select

from calibrate.accounts import ensure_annotator, get_user
from calibrate.models import Assignment, Judge, Label, Sample, Task, TaskDataset, Verdict
from calibrate.task_scopes import task_scope


def _scope(session, name):
    session.rollback()  # a new transaction: see what the command committed
    session.expire_all()
    return task_scope(session, session.exec(select(Task).where(Task.name == name)).one())


def _datasets(runner, make_sample):
    for dataset, external in (("news", "n1"), ("claims", "c1"), ("other", "o1")):
        make_sample(dataset=dataset, external_id=external)
    result = runner.invoke(["task", "add", "tone", "--target", "sample", "--kind", "categorical", "--labels", "calm,angry"])
    assert result.exit_code == 0, result.output


def _sample(session, external):
    return session.exec(select(Sample).where(Sample.external_id == external)).one()


def test_task_edit_sets_replaces_and_clears_a_tasks_datasets(runner, session, make_sample):
    _datasets(runner, make_sample)
    scoped = runner.invoke(["task", "edit", "tone", "--dataset", "news", "--dataset", "claims", "--dataset", "news"])
    assert scoped.exit_code == 0, scoped.output
    assert scoped.output == "task tone: datasets now claims, news\n"
    assert _scope(session, "tone") == ["claims", "news"]  # each once
    assert "tone\tsample\tcategorical\tcalm,angry\tdatasets claims,news" in runner.invoke(["task", "list"]).output
    replaced = runner.invoke(["task", "edit", "tone", "--dataset", "other"])
    assert replaced.output == "task tone: datasets now other\n" and _scope(session, "tone") == ["other"]
    same = runner.invoke(["task", "edit", "tone", "--dataset", "other"])
    assert same.output == "task tone: nothing to change\n"
    cleared = runner.invoke(["task", "edit", "tone", "--all-datasets"])
    assert cleared.output == "task tone: global now (every dataset)\n" and _scope(session, "tone") == []
    listing = [line for line in runner.invoke(["task", "list"]).output.splitlines() if line.startswith("tone\t")]
    assert listing == ["tone\tsample\tcategorical\tcalm,angry"]
    assert session.exec(select(TaskDataset)).all() == []


def test_task_edit_dataset_refuses_what_task_add_refuses(runner, session, make_sample):
    _datasets(runner, make_sample)
    assert runner.invoke(["task", "edit", "tone", "--dataset", "news"]).exit_code == 0
    unknown = runner.invoke(["task", "edit", "tone", "--dataset", "claims", "--dataset", "nope"])
    assert unknown.exit_code == 2
    assert unknown.output.startswith("error: unknown dataset 'nope' (datasets: ") and "claims" in unknown.output
    both = runner.invoke(["task", "edit", "tone", "--dataset", "claims", "--all-datasets"])
    assert both.exit_code == 2 and "--dataset and --all-datasets exclude each other" in both.output
    builtin = runner.invoke(["task", "edit", "claim_support", "--dataset", "news"])
    assert builtin.exit_code == 2
    assert builtin.output == "error: task claim_support is built in: it stays global (every dataset)\n"
    assert _scope(session, "tone") == ["news"]  # nothing changed
    assert _scope(session, "claim_support") == []


def test_a_scope_that_would_orphan_labels_or_verdicts_is_refused_and_changes_nothing(runner, session, make_sample):
    _datasets(runner, make_sample)
    task = session.exec(select(Task).where(Task.name == "tone")).one()
    ana, bea = ensure_annotator(session, "ana"), ensure_annotator(session, "bea")
    judge = Judge(name="j@1", kind="imported")
    session.add(judge)
    session.flush()
    news, other = _sample(session, "n1"), _sample(session, "o1")
    for user in (ana, bea):
        session.add(Label(task_id=task.id, sample_id=news.id, target_key=f"sample:{news.id}", annotator_id=user.id,
                          value="calm", source="import"))
    session.add(Verdict(judge_id=judge.id, task_id=task.id, sample_id=other.id, target_key=f"sample:{other.id}",
                        value="angry", status="ok"))
    session.commit()
    refused = runner.invoke(["task", "edit", "tone", "--description", "How does it sound?", "--dataset", "claims",
                             "--dataset", "other"])
    assert refused.exit_code == 2
    assert refused.output == ("error: task tone has 2 labels on dataset news: it cannot be scoped away from news "
                              "(name news among its datasets)\n")
    refused = runner.invoke(["task", "edit", "tone", "--dataset", "news"])
    assert refused.output == ("error: task tone has 1 verdicts on dataset other: it cannot be scoped away from other "
                              "(name other among its datasets)\n")
    session.rollback()
    session.expire_all()
    edited = session.exec(select(Task).where(Task.name == "tone")).one()
    assert _scope(session, "tone") == [] and edited.description == "" and edited.revision in (None, 0)  # nothing written
    # Naming every dataset that holds them is fine, and so is global again.
    assert runner.invoke(["task", "edit", "tone", "--dataset", "news", "--dataset", "other"]).exit_code == 0
    assert _scope(session, "tone") == ["news", "other"]
    assert runner.invoke(["task", "edit", "tone", "--all-datasets"]).exit_code == 0


def test_the_workbench_offers_an_edited_task_only_on_its_datasets(runner, session, make_sample, client, login):
    _datasets(runner, make_sample)
    login("ana")
    ana = get_user(session, "ana")
    assignments = {}
    for external in ("n1", "o1"):
        assignment = Assignment(sample_id=_sample(session, external).id, user_id=ana.id, status="pending")
        session.add(assignment)
        session.commit()
        assignments[external] = assignment.id

    def offered(external):
        page = BeautifulSoup(client.get(f"/annotate/{assignments[external]}").data, "html.parser")
        return bool(page.select("[data-task=tone]"))

    assert offered("n1") and offered("o1")  # global: every item, and the workbench's task cache holds it
    assert runner.invoke(["task", "edit", "tone", "--dataset", "news"]).exit_code == 0
    assert offered("n1") and not offered("o1")  # the edit reaches the cached tasks
    refused = client.post(f"/annotate/{assignments['o1']}/label",
                          data={"task": "tone", "target": f"sample:{_sample(session, 'o1').id}", "value": "calm"},
                          headers={"HX-Request": "true", "X-CSRFToken": _token(client)})
    assert refused.status_code == 400 and refused.headers["X-Invalid-Field"] == "task"
    assert runner.invoke(["task", "edit", "tone", "--all-datasets"]).exit_code == 0
    assert offered("o1")


def _token(client):
    page = client.get("/datasets")
    return BeautifulSoup(page.data, "html.parser").select_one(".whoami input[name=csrf_token]")["value"]
