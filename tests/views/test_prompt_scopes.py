"""Prompts scoped to datasets (`calibrate prompt new NAME --dataset D`): listed, run and shown on the dashboard only
for their datasets (with the global prompts); an unscoped prompt stays global."""

from __future__ import annotations

from bs4 import BeautifulSoup
from sqlmodel import select

from calibrate.accounts import ensure_annotator
from calibrate.models import Claim, Label, Prompt, PromptDataset, Sample, Task


def _soup(response):
    return BeautifulSoup(response.data, "html.parser")


def _datasets(runner, make_sample, session):
    """Datasets news and other, each with a claim labelled by an expert; prompts news-only (scoped) and everywhere."""
    for dataset, external in (("news", "n1"), ("other", "o1")):
        sample = make_sample(dataset=dataset, external_id=external, claims=["Uno.", "Dos."])
        user = ensure_annotator(session, "expert")
        task = session.exec(select(Task).where(Task.name == "claim_support")).one()
        for claim in session.exec(select(Claim).where(Claim.sample_id == sample.id)).all():
            session.add(Label(task_id=task.id, sample_id=sample.id, claim_id=claim.id, target_key=f"claim:{claim.id}",
                              annotator_id=user.id, value="supported", source="import"))
        session.commit()
    assert runner.invoke(["task", "add", "checkable", "--target", "claim", "--kind", "categorical", "--labels", "yes,no",
                          "--dataset", "news"]).exit_code == 0
    scoped = runner.invoke(["prompt", "new", "news-claims", "--task", "claim_support", "--dataset", "news",
                            "--few-shot", "n1:0"])
    assert scoped.exit_code == 0, scoped.output
    assert runner.invoke(["prompt", "new", "everywhere", "--task", "claim_support"]).exit_code == 0


def test_prompt_new_dataset_scopes_the_prompt(runner, make_sample, session):
    _datasets(runner, make_sample, session)
    prompt = session.exec(select(Prompt).where(Prompt.name == "news-claims")).one()
    assert [row.dataset_id for row in session.exec(select(PromptDataset).where(PromptDataset.prompt_id == prompt.id))] == [
        session.exec(select(Sample.dataset_id).where(Sample.external_id == "n1")).one()]
    listing = runner.invoke(["prompt", "list"]).output.splitlines()
    assert listing[1].startswith("news-claims\tclaim_support\t1 versions") and listing[1].endswith("\tdatasets news")
    assert listing[0].startswith("everywhere\t") and "datasets" not in listing[0]
    other = runner.invoke(["prompt", "list", "--dataset", "other"]).output
    assert "everywhere" in other and "news-claims" not in other
    assert "news-claims" in runner.invoke(["prompt", "list", "--dataset", "news"]).output
    # a new version keeps its datasets: a few-shot from another dataset is not found, another --dataset is refused
    elsewhere = runner.invoke(["prompt", "new", "news-claims", "--few-shot", "o1:0"])
    assert elsewhere.exit_code == 2 and "no sample 'o1' in dataset news" in elsewhere.output
    fixed = runner.invoke(["prompt", "new", "news-claims", "--dataset", "other", "--note", "x"])
    assert fixed.exit_code == 2 and "prompt news-claims is scoped to news: --dataset other is not one of them" in fixed.output
    # within the task's datasets only
    outside = runner.invoke(["prompt", "new", "chk", "--task", "checkable", "--dataset", "other"])
    assert outside.exit_code == 2 and "task checkable is scoped to news: a prompt of it cannot be scoped to other" in outside.output
    assert session.exec(select(Prompt).where(Prompt.name == "chk")).first() is None
    # a scoped prompt runs only on its datasets
    run = runner.invoke(["judge", "run", "--dataset", "other", "--prompt", "news-claims@1", "--backend", "baseline"])
    assert run.exit_code == 2 and "prompt news-claims is scoped to news: it does not run on other" in run.output


def test_the_prompts_page_and_the_dashboard_keep_to_the_datasets(app, runner, make_sample, session, client, login):
    _datasets(runner, make_sample, session)
    assert runner.invoke(["judge", "run", "--dataset", "news", "--prompt", "news-claims@1", "--backend", "baseline"]).exit_code == 0
    app.config["BOOTSTRAP"] = 50
    token = login("eng", "engineer")
    rows = {tr.select_one("td a").get_text(): tr.select_one("td.scope").get_text()
            for tr in _soup(client.get("/prompts")).select("#prompts tbody tr")}
    assert rows == {"everywhere": "all", "news-claims": "news"}
    other = _soup(client.get("/prompts?dataset=other"))
    assert [a.get_text() for a in other.select("#prompts tbody tr td:first-child a")] == ["everywhere"]
    assert client.get("/prompts?dataset=nope").status_code == 404
    spanish = _soup(client.get("/prompts", headers={"Accept-Language": "es"}))
    assert "todos los conjuntos de datos (global)" in spanish.select_one("#new-prompt").get_text()
    # the dashboard of another dataset lists no row for the scoped prompt; its own dataset does
    board = _soup(client.get("/datasets/other/calibration?task=claim_support"))
    assert "news-claims@1" not in [tr["data-judge"] for tr in board.select("#judges tr[data-judge]")]
    assert "news-claims@1" not in board.get_text()
    news = _soup(client.get("/datasets/news/calibration?task=claim_support"))
    assert "news-claims@1" in [tr["data-judge"] for tr in news.select("#judges tr[data-judge]")]
    # the task selector offers a scoped task on its dataset only
    assert "checkable" not in [o["value"] for o in board.select("select[name=task] option")]
    # the version page runs it on its datasets only
    page = _soup(client.get("/prompts/news-claims/1"))
    assert [o.get_text() for o in page.select("#run-form select[name=dataset] option")] == ["news"]
    assert page.select_one("#prompt-scope").get_text() == "news"
    # a prompt made from the page for one dataset
    made = client.post("/prompts", data={"name": "web-other", "task": "claim_support", "dataset": "other", "csrf_token": token})
    assert made.status_code == 303
    assert "web-other" in [a.get_text() for a in _soup(client.get("/prompts?dataset=other")).select("#prompts tbody a")]
    assert "web-other" not in [a.get_text() for a in _soup(client.get("/prompts?dataset=news")).select("#prompts tbody a")]
