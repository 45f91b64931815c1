"""The bundled demo: loads, is idempotent, marks itself as demo, and its logins work."""

from __future__ import annotations

import sqlite3

from bs4 import BeautifulSoup
from sqlmodel import func, select

from calibrate.demo import AB_DATASET, AB_TO_LABEL, DATASET, DEMO_USERS, TO_LABEL, load_demo
from calibrate.models import Assignment, Claim, Dataset, Label, Response, Sample, User, Verdict


def _dump(db_url):
    return "\n".join(sqlite3.connect(db_url.removeprefix("sqlite:///")).iterdump())


def test_demo_loads_samples_labels_users_and_queue(engine, session):
    result = load_demo(engine)
    dataset = session.exec(select(Dataset).where(Dataset.name == DATASET)).one()
    assert dataset.is_demo
    in_demo = Sample.dataset_id == dataset.id
    assert session.exec(select(func.count()).select_from(Sample).where(in_demo)).one() == 40
    assert session.exec(select(func.count()).select_from(Claim).join(Sample).where(in_demo)).one() == 184
    # 564 bundled labels, less the experts' 64 on the six items left for them to label
    assert session.exec(select(func.count()).select_from(Label).join(Sample).where(in_demo)).one() == 500
    labelled = set(session.exec(select(Sample.external_id).join(Label, Label.sample_id == Sample.id).where(in_demo)).all())
    assert labelled.isdisjoint(TO_LABEL) and len(labelled) == 40 - len(TO_LABEL)
    experts = {u.username for u in session.exec(select(User).where(User.role == "annotator"))}
    assert experts == {"dra.garcia", "matrona.ruiz"}
    # every sample is queued for both experts
    assert session.exec(select(func.count()).select_from(Assignment).join(Sample).where(in_demo)).one() == 80
    # ... and each expert has exactly those waiting in the queue, the rest done
    for expert in experts:
        rows = session.exec(select(Sample.external_id, Assignment.status, Assignment.stream)
                            .join(Assignment, Assignment.sample_id == Sample.id)
                            .join(User, User.id == Assignment.user_id).where(User.username == expert)).all()
        assert sorted(name for name, status, _ in rows if status == "pending") == sorted(TO_LABEL + AB_TO_LABEL)
        calibration = [status for name, status, stream in rows if not name.startswith("live-")]
        assert sum(status == "done" for status in calibration) == 40 - len(TO_LABEL) + 8 - len(AB_TO_LABEL)
        # the production source (calibrate/demo/production.py): every stream assignment labelled and done
        live = [(status, stream) for name, status, stream in rows if name.startswith("live-")]
        assert live and all(status == "done" and stream in ("audit", "triage") for status, stream in live)
        assert {stream for _, stream in live} == {"audit", "triage"}
    splits = set(session.exec(select(Sample.split).where(in_demo)).all())
    assert splits == {"train", "dev", "test"}
    printed = "\n".join(result.lines())
    for username, _, _, password in DEMO_USERS:
        assert username in printed and password in printed


def test_demo_twice_changes_nothing(engine, db_url):
    load_demo(engine)
    before = _dump(db_url)
    result = load_demo(engine)
    assert _dump(db_url) == before
    assert any("unchanged" in line or "nothing changed" in line for line in result.lines())


def test_demo_logins_work_and_the_ui_says_demo(engine, client):
    load_demo(engine)
    page = BeautifulSoup(client.get("/login").data, "html.parser")
    token = page.select_one("input[name=csrf_token]")["value"]
    name, _, _, password = DEMO_USERS[2]
    response = client.post("/login", data={"username": name, "password": password, "csrf_token": token})
    assert response.status_code == 303
    page = BeautifulSoup(client.get(f"/datasets/{DATASET}").data, "html.parser")
    assert page.select_one(".banner.demo") is not None
    assert "not medical advice" in page.select_one(".banner.demo").get_text()


def test_demo_command_without_serving(runner):
    result = runner.invoke(["demo", "--no-serve"])
    assert result.exit_code == 0, result.output
    assert "dra.garcia" in result.output and "demo-garcia" in result.output


def test_demo_opens_on_the_workbench_for_an_expert(engine, client):
    """An expert logs in to their queue, and the next item is one left for them to label."""
    load_demo(engine)
    token = BeautifulSoup(client.get("/login").data, "html.parser").select_one("input[name=csrf_token]")["value"]
    name, _, _, password = DEMO_USERS[0]
    response = client.post("/login", data={"username": name, "password": password, "csrf_token": token})
    assert response.headers["Location"] == "/annotate"
    queue = BeautifulSoup(client.get("/annotate").data, "html.parser")
    assert queue.select_one("#start") is not None
    assert queue.select_one("#my-progress tr[data-dataset] .pending").get_text() == str(len(TO_LABEL))
    item = client.get(client.get("/annotate/next").headers["Location"])
    page = BeautifulSoup(item.data, "html.parser")
    assert page.select_one("#external-id").get_text() in TO_LABEL


def test_demo_metric_judges_are_calibrated_against_the_experts_derived_gold(engine, session, runner, client):
    """demo-faithfulness@1 and demo-context-precision@1 score every answer offline; the report and the
    dashboard calibrate the faithfulness judge against the faithfulness of the experts' claim gold."""
    import csv
    import io
    import json
    from collections import defaultdict
    from pathlib import Path

    import pytest
    from scipy import stats as sps

    from calibrate.demo import judges as demo_judges
    from calibrate.models import Judge, Task, Verdict

    load_demo(engine)
    for name, task_name, _ in demo_judges.METRIC_JUDGES:
        verdicts = session.exec(select(Verdict).join(Judge).join(Task, Task.id == Verdict.task_id)
                                .where(Judge.name == f"{name}@1", Task.name == task_name)).all()
        assert len(verdicts) == 40 and {v.target_key.split(":")[0] for v in verdicts} == {"sample"}
        assert all(v.status == "ok" and 0 <= float(v.value) <= 1 for v in verdicts)

    result = runner.invoke(["report", "--dataset", DATASET, "--judge", "demo-faithfulness@1", "--task", "faithfulness",
                            "--format", "json", "--bootstrap", "200"])
    assert result.exit_code == 0, result.output
    section = json.loads(result.output)["tasks"]["faithfulness"]
    rows = list(csv.DictReader(io.StringIO(runner.invoke(
        ["report", "--dataset", DATASET, "--judge", "demo-faithfulness@1", "--task", "faithfulness", "--format", "csv"]).output)))
    scored = {r["sample_id"]: (float(r["gold"]), float(r["judge"])) for r in rows if r["gold"] and r["judge_status"] == "ok"}
    assert {r["gold_source"] for r in rows if r["gold"]} == {"derived:claim_support"}
    assert section["n"] == len(scored) == 34  # the six samples left for the experts to label have no gold
    gold, judged = zip(*scored.values(), strict=True)
    assert section["alignment"]["value"] == pytest.approx(sps.spearmanr(gold, judged).statistic)
    assert section["alignment"]["value"] > 0.5  # the offline baseline tracks the experts on this demo
    # The derived gold by hand, on samples where both experts agree on every claim: supported / claims
    # that are not not_applicable.
    by_sample: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for line in (Path(demo_judges.__file__).parent / "labels.jsonl").read_text(encoding="utf-8").splitlines():
        label = json.loads(line)
        if label["task"] == "claim_support":
            by_sample[label["sample_id"]][label["claim"]].add(label["value"])
    agreed = {sid: [v.pop() for v in claims.values()] for sid, claims in by_sample.items()
              if sid in scored and all(len(v) == 1 for v in claims.values())}
    assert len(agreed) > 10
    for sid, values in agreed.items():
        countable = [v for v in values if v != "not_applicable"]
        assert scored[sid][0] == pytest.approx(countable.count("supported") / len(countable)), sid

    token = BeautifulSoup(client.get("/login").data, "html.parser").select_one("input[name=csrf_token]")["value"]
    name, _, _, password = DEMO_USERS[2]
    assert client.post("/login", data={"username": name, "password": password, "csrf_token": token}).status_code == 303
    # The dashboard (dev split by default: the test split is frozen) shows the judge as the report does on dev.
    for task_name, judge in (("faithfulness", "demo-faithfulness@1"), ("context_precision", "demo-context-precision@1")):
        dev = json.loads(runner.invoke(["report", "--dataset", DATASET, "--judge", judge, "--task", task_name, "--split", "dev",
                                        "--format", "json", "--bootstrap", "200"]).output)["tasks"][task_name]
        assert dev["n"] > 0 and dev["alignment"]["value"] is not None
        page = BeautifulSoup(client.get(f"/datasets/{DATASET}/calibration?task={task_name}").data, "html.parser")
        row = page.select_one(f'#judges tr[data-judge="{judge}"]')
        assert row.select_one(".n").get_text() == str(dev["n"])
        assert row.select_one(".value").get_text() == f"{dev['alignment']['value']:.3f}"


def test_demo_has_pairwise_items_preferences_with_orders_and_a_two_order_judge(engine, session):
    load_demo(engine)
    ab = session.exec(select(Dataset).where(Dataset.name == AB_DATASET)).one()
    assert ab.is_demo
    samples = session.exec(select(Sample).where(Sample.dataset_id == ab.id)).all()
    assert len(samples) == 8 and all(s.answer == "" for s in samples)
    responses = session.exec(select(Response).join(Sample).where(Sample.dataset_id == ab.id)).all()
    assert len(responses) == 16 and {r.key for r in responses} == {"A", "B"}
    # both experts' preferences, minus the item left for them, each with the order that expert sees
    labels = session.exec(select(Label).join(Sample).where(Sample.dataset_id == ab.id)).all()
    assert len(labels) == 2 * (8 - len(AB_TO_LABEL))
    assert all(sorted(label.order) == ["A", "B"] for label in labels)
    assert {tuple(label.order) for label in labels} == {("A", "B"), ("B", "A")}  # shuffled per annotator and item
    # the baseline judged every item in both orders: two verdicts per item, one per order
    verdicts = session.exec(select(Verdict).join(Sample).where(Sample.dataset_id == ab.id)).all()
    assert sorted(v.order_key for v in verdicts) == ["0,1"] * 8 + ["1,0"] * 8


def test_demo_has_agent_trajectories_with_two_experts_step_labels_and_a_baseline_judge(engine, session):
    from sklearn.metrics import cohen_kappa_score

    from calibrate.demo import AGENT_DATASET, AGENT_JUDGE
    from calibrate.models import Judge, Step, Task, TaskDataset

    load_demo(engine)
    dataset = session.exec(select(Dataset).where(Dataset.name == AGENT_DATASET)).one()
    in_agent = Sample.dataset_id == dataset.id
    assert dataset.is_demo and session.exec(select(func.count()).select_from(Sample).where(in_agent)).one() == 30
    kinds = session.exec(select(Step.kind, func.count()).join(Sample).where(in_agent).group_by(Step.kind)).all()
    assert {kind for kind, _ in kinds} == {"agent", "llm", "tool", "retriever"}
    tools = set(session.exec(select(Step.tool_name).join(Sample).where(in_agent, Step.tool_name.is_not(None))).all())
    assert tools == {"gestational_age", "dose_check"}
    task = session.exec(select(Task).where(Task.name == "step_correctness")).one()
    assert session.get(TaskDataset, (task.id, dataset.id)) is not None  # offered on the agent dataset only
    assert session.exec(select(func.count()).select_from(TaskDataset).where(TaskDataset.task_id == task.id)).one() == 1
    rows = session.exec(select(Label.target_key, User.username, Label.value, Label.error_type)
                        .join(User, User.id == Label.annotator_id).join(Sample).where(in_agent, Label.task_id == task.id)).all()
    by_expert = {name: {key: value for key, who, value, _ in rows if who == name} for name in ("dra.garcia", "matrona.ruiz")}
    keys = sorted(by_expert["dra.garcia"])
    assert keys == sorted(by_expert["matrona.ruiz"]) and len(keys) == 163
    pairs = [(by_expert["dra.garcia"][k], by_expert["matrona.ruiz"][k]) for k in keys]
    assert 0 < sum(a != b for a, b in pairs) < 10  # the experts disagree, a little
    kappa = cohen_kappa_score([a for a, _ in pairs], [b for _, b in pairs])
    assert 0.3 < kappa < 0.95
    assert {error for *_, error in rows if error} >= {"wrong_arguments", "unsafe_advice", "unsupported_claim"}
    judged = session.exec(select(func.count()).select_from(Verdict).join(Sample)
                          .where(in_agent, Verdict.task_id == task.id)).one()
    assert judged == 163 and session.exec(select(Judge.kind).where(Judge.name == AGENT_JUDGE)).one() == "imported"
