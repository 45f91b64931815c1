"""The calibration dashboard: every judge of a task on one split, its chart, and bad input."""

from __future__ import annotations

import json
import re

import pytest
from bs4 import BeautifulSoup
from sqlmodel import select

from calibrate.calibration import CalibrationError, Options, build_report
from calibrate.db import write_session
from calibrate.errors import NotFound
from calibrate.judges import save_version
from calibrate.loop.dashboard import dashboard
from calibrate.models import Claim, Label, Sample


def test_dashboard_rows_are_the_report_on_the_split(demo, session):
    board = dashboard(session, demo, options=Options(bootstrap=200))
    assert board.split == "dev" and not board.message
    assert [r.judge for r in board.rows] == ["demo-claims@1", "demo-claims@2"]
    for row in board.rows:
        section = build_report(session, demo, row.judge, options=Options(bootstrap=200, split="dev"),
                               tasks=["claim_support"]).data["tasks"]["claim_support"]
        assert row.value == section["alignment"]["value"] and list(row.ci) == section["alignment"]["ci"]
        assert (row.n, row.n_fewshot, row.n_no_gold, row.n_unparsed) == (
            section["n"], section["n_fewshot"], section["n_no_gold"], section["n_unparsed"])
        assert row.passed == section["passed"] and row.cost == 0.0
    assert board.ceiling is not None and board.n_labelled > 0


@pytest.mark.parametrize("task", ["claim_support", "answer_quality", "faithfulness"])
def test_the_ceiling_is_the_reports_human_block_without_building_the_report(demo, session, task):
    """human_agreement gives exactly the human-only report's `human` block (the dashboard's ceiling comes from it)."""
    from calibrate.calibration import human_agreement

    section = build_report(session, demo, None, options=Options(bootstrap=100, split="dev"), tasks=[task]).data["tasks"][task]
    alone = human_agreement(session, demo, task, split="dev")
    assert alone == {"kind": section["kind"], "human": section["human"]} and alone["human"]["annotators"]
    if task == "claim_support":
        from calibrate.reports.summary import ceiling

        board = dashboard(session, demo, options=Options(bootstrap=100))
        assert board.ceiling == ceiling(section).value is not None


def test_split_filter_keeps_only_that_splits_samples(demo, session):
    dev_ids = set(session.exec(select(Sample.id).where(Sample.split == "dev")).all())
    dev_targets = set(session.exec(select(Label.target_key).where(Label.sample_id.in_(dev_ids))).all())
    full = build_report(session, demo, "demo-claims@1", options=Options(bootstrap=100))
    dev = build_report(session, demo, "demo-claims@1", options=Options(bootstrap=100, split="dev"))
    assert dev.data["provenance"]["split"] == "dev" and "split" not in full.data["provenance"]
    assert 0 < dev.data["tasks"]["claim_support"]["n"] < full.data["tasks"]["claim_support"]["n"]
    scored = {r.target for r in dev.rows["claim_support"]}
    assert scored <= dev_targets | {r.target for r in dev.rows["claim_support"] if r.gold is None}
    with pytest.raises(CalibrationError, match="no sample of .* is in split 'nope' \\(splits: .*dev"):
        build_report(session, demo, "demo-claims@1", options=Options(split="nope"))


def test_bad_input_gives_a_message_not_an_empty_chart(demo, session, engine):
    assert "no sample in split 'nope'" in dashboard(session, demo, split="nope").message
    # a split that exists but has no labels for the task
    dev_ids = session.exec(select(Sample.id).where(Sample.split == "dev")).all()
    for label in session.exec(select(Label).where(Label.sample_id.in_(dev_ids))).all():
        session.delete(label)
    session.commit()
    message = dashboard(session, demo, split="dev").message
    assert "no claim_support labels in split dev" in message
    assert not dashboard(session, demo, split="train", options=Options(bootstrap=100)).message
    # a version without any run is a row with a note, not a point
    with write_session(engine) as s:
        save_version(s, "demo-claims", template=None, note="unrun", params={"temperature": 0.5})
    session.rollback()  # end the read snapshot: see the new version
    board = dashboard(session, demo, split="train", options=Options(bootstrap=100))
    unrun = board.rows[-1]
    assert unrun.judge == "demo-claims@3" and not unrun.ran and "no run of this version" in unrun.note
    assert len(board.scored) == 2
    with pytest.raises(NotFound, match="unknown task"):
        dashboard(session, demo, task="nope")


def test_dashboard_page_shows_rows_and_chart(app, demo, client, login, soup, session):
    app.config["BOOTSTRAP"] = 200
    login("eng", "engineer")
    page = soup(client.get(f"/datasets/{demo}/calibration"))
    rows = page.select("#judges tbody tr[data-judge]")
    assert [r["data-judge"] for r in rows] == ["demo-claims@1", "demo-claims@2"]
    # the three-state decision, coloured, with the rule named; `passed` (under rule point) beside it
    board = dashboard(session, demo, options=Options(bootstrap=200))
    for row, cells in zip(board.rows, rows, strict=True):
        cell = cells.select_one("td.decision")
        assert cell["data-decision"] == row.decision and cell["data-passed"] == json.dumps(row.passed)
        assert "rule: point" in cell.get_text() and row.decision in ("pass", "fail", "undecided")
    assert page.select_one("#decision-rule").get_text() == "point"
    assert page.select_one("#common-targets").get_text(" ", strip=True).startswith(f"Scored on the {board.common_targets} targets common to all versions")
    assert page.select_one("select[name=split] option[selected]")["value"] == "dev"
    svg = page.select_one("#versions-chart svg")
    assert svg is not None and len(svg.select("circle.estimate")) == 2
    assert svg.select_one("polygon.ci-band") and svg.select_one("line.threshold") and svg.select_one("line.ceiling")
    assert not page.select("[style]") and not page.select("script:not([src]):not(#calibrate-strings)")
    bad = soup(client.get(f"/datasets/{demo}/calibration?split=nope"))
    assert "no sample in split" in bad.select_one("#dashboard-message").get_text() and bad.select_one("svg") is None
    # the test split is frozen: neither it nor "all samples" (which includes it) shows scores
    for split in ("test", "all"):
        frozen = soup(client.get(f"/datasets/{demo}/calibration?split={split}"))
        assert "frozen" in frozen.select_one("#dashboard-message").get_text() and frozen.select_one("#judges") is None
    assert client.get("/datasets/nope/calibration").status_code == 404


def test_annotators_get_403(demo, client, login):
    login("ana", "annotator")
    assert client.get(f"/datasets/{demo}/calibration").status_code == 403
    assert client.get("/calibration").status_code == 403


def test_cli_report_split(demo, runner):
    out = runner.invoke(["report", "--dataset", demo, "--judge", "demo-claims@1", "--split", "dev", "--bootstrap", "100"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["provenance"]["split"] == "dev"
    bad = runner.invoke(["report", "--dataset", demo, "--split", "nope"])
    assert bad.exit_code == 2 and "(splits: dev, test, train)" in bad.output


def test_versions_chart_escapes_labels_and_draws_band_threshold_ceiling():
    from calibrate.reports.charts import VersionPoint, versions_chart

    svg = BeautifulSoup(versions_chart([
        VersionPoint("<script>x</script>@1", 0.5, (0.4, 0.6), "not passed"),
        VersionPoint("<script>x</script>@2", 0.8, (0.7, 0.9), "passed"),
        VersionPoint("<script>x</script>@3", None, None, "undefined"),
    ], threshold=0.75, ceiling=0.82), "html.parser")
    assert svg.select_one("script") is None and "<script>x</script>@1" in svg.get_text()
    assert len(svg.select("circle.estimate")) == 2 and svg.select_one("polygon.ci-band")
    assert svg.select_one("line.threshold") and svg.select_one("line.ceiling")


def test_versions_chart_joins_only_the_versions_of_one_prompt():
    from calibrate.reports.charts import VersionPoint, versions_chart

    points = [VersionPoint("gpt4-verdicts", 0.61, (0.5, 0.7), "fail"),  # an imported judge: stands alone
              VersionPoint("claims@1", 0.70, (0.6, 0.8), "undecided"), VersionPoint("other@1", 0.30, (0.2, 0.4), "fail"),
              VersionPoint("claims@2", 0.80, (0.7, 0.9), "pass"), VersionPoint("baseline", 0.40, (0.3, 0.5), "fail"),
              VersionPoint("claims@3", 0.85, (0.8, 0.9), "pass"), VersionPoint("other@2", 0.35, None, "fail")]
    svg = BeautifulSoup(versions_chart(points, threshold=0.75), "html.parser")
    circles = {float(c["cy"]): float(c["cx"]) for c in svg.select("circle.estimate")}
    lines = [[tuple(map(float, xy.split(","))) for xy in line["points"].split()] for line in svg.select("polyline.trend")]
    assert len(lines) == 2  # claims@1–3 and other@1–2; the two imported judges are joined to nothing
    xs = sorted(circles.values())
    assert [x for x, _ in lines[0]] == [xs[1], xs[3], xs[5]] and [x for x, _ in lines[1]] == [xs[2], xs[6]]
    assert len(svg.select("polygon.ci-band")) == 1  # only claims has two versions with an interval
    alone = BeautifulSoup(versions_chart([VersionPoint("a", 0.5, (0.4, 0.6), "fail"), VersionPoint("b", 0.6, (0.5, 0.7), "fail")],
                                         threshold=0.75), "html.parser")
    assert not alone.select("polyline.trend") and not alone.select("polygon.ci-band")


def test_evaluate_on_test_is_on_demand_and_recorded(app, demo, session, client, login, soup):
    from calibrate.loop.disagreements import disagreements
    from calibrate.loop.testsplit import evaluate_on_test
    from calibrate.models import TestEvaluation

    assert dashboard(session, demo, split="test").message.startswith("the test split of")
    assert "frozen" in disagreements(session, demo, "demo-claims@1", split="test").message
    board = dashboard(session, demo, options=Options(bootstrap=100))
    assert board.test_looks == 0 and board.rows[0].test is None
    row = evaluate_on_test(session, demo, "demo-claims@2", options=Options(bootstrap=100))
    session.commit()
    expected = build_report(session, demo, "demo-claims@2", options=Options(bootstrap=100, split="test"),
                            tasks=["claim_support"]).data["tasks"]["claim_support"]
    assert row.value == expected["alignment"]["value"] and row.n == expected["n"] and row.created_at is not None
    app.config["BOOTSTRAP"] = 100
    token = login("eng", "engineer")
    page = soup(client.get(f"/datasets/{demo}/calibration"))
    assert page.select_one("#test-looks").get_text() == "1"
    form = page.select_one("#judges tr[data-judge='demo-claims@1'] form.evaluate-test")
    assert client.post(form["action"], data={"task": "claim_support"}).status_code == 400  # CSRF
    # without confirm: the confirmation, which records nothing
    ask = soup(client.post(form["action"], data={"task": "claim_support", "split": "dev", "csrf_token": token}))
    assert ask.select_one("#all-looks").get_text() == "1" and ask.select_one("#judge-looks").get_text() == "0"
    assert "false pass" in ask.select_one("#look-cost").get_text() and len(session.exec(select(TestEvaluation)).all()) == 1
    assert soup(client.get(form["action"] + "?task=claim_support")).select_one("#confirm-look-form") is not None
    confirm = ask.select_one("#confirm-look-form")
    fields = {i["name"]: i["value"] for i in confirm.select("input[type=hidden]")}
    done = soup(client.post(confirm["action"], data=fields, follow_redirects=True))
    flash = done.select_one(".flash").get_text()
    assert "demo-claims@1 on test: " in flash and "rule: point" in flash
    assert any(word in flash for word in ("pass —", "fail —", "undecided —"))
    assert done.select_one("#test-looks").get_text() == "2"
    assert done.select_one("#judges tr[data-judge='demo-claims@1'] .test-score").get_text()
    session.rollback()  # end the read snapshot: see the look the page recorded
    assert len(session.exec(select(TestEvaluation)).all()) == 2
    with pytest.raises(CalibrationError, match="no test split"):
        from calibrate.db import write_session
        from calibrate.models import Sample as S
        with write_session(session.get_bind()) as s:
            for sample in s.exec(select(S).where(S.split == "test")).all():
                sample.split = "dev"
        session.rollback()
        evaluate_on_test(session, demo, "demo-claims@1")


def test_label_budget_formula_json_and_dashboard(demo, session, client, login, app, runner, soup):
    import math

    from calibrate.calibration import label_budget
    from calibrate.calibration.budget import targets_in_dataset
    from calibrate.datasets import split_samples
    from calibrate.models import Dataset

    budget = label_budget(100, (0.6, 0.8), 0.05, ["claim:3", "claim:4"])
    assert budget["more_targets"] == 300 and budget["candidates"] == ["claim:3", "claim:4"] and budget["reason"]["code"] == "half_width_judge_more"
    assert budget["reason"]["candidates"] == 2
    assert label_budget(100, (0.74, 0.76), 0.05)["more_targets"] == 0
    assert label_budget(0, (0.1, 0.2), 0.05) is None and label_budget(10, None, 0.05) is None
    out = runner.invoke(["report", "--dataset", demo, "--judge", "demo-claims@1", "--split", "dev", "--bootstrap", "100",
                         "--budget-half-width", "0.1"])
    section = json.loads(out.output)["tasks"]["claim_support"]
    half = (section["alignment"]["ci"][1] - section["alignment"]["ci"][0]) / 2
    assert section["budget"]["target_half_width"] == 0.1
    wanted = max(math.ceil(round(section["n"] * (half / 0.1) ** 2, 9)) - section["n"], 0)
    # no more than the dev split's claims not yet counted in n (calibration/budget.py: cap_to_dataset)
    left = targets_in_dataset(session, session.exec(select(Dataset).where(Dataset.name == demo)).one().id, "claim",
                              split_samples(session, session.exec(select(Dataset).where(Dataset.name == demo)).one(), "dev")) - section["n"]
    assert wanted > left and section["budget"]["more_targets"] == left and section["budget"]["capped"] is True
    assert section["budget"]["n_candidates"] == section["n_no_gold"]
    assert len(section["budget"]["candidates"]) == min(section["budget"]["more_targets"], section["n_no_gold"])
    board = dashboard(session, demo, options=Options(bootstrap=100, budget_half_width=0.1))
    # The dashboard's budget comes from its common-targets section (calibration/common.py), not capped yet.
    assert board.rows[0].budget["more_targets"] == wanted
    app.config["BOOTSTRAP"] = 100
    login("eng", "engineer")
    page = soup(client.get(f"/datasets/{demo}/calibration?budget=0.1"))
    cell = page.select_one("#judges tr[data-judge='demo-claims@1'] .budget span")
    assert cell.get_text() == str(wanted)
    # the disclosure names the candidates as people read them: the sample's id and the claim from 1
    which = page.select_one("#judges tr[data-judge='demo-claims@1'] .budget-ids small").get_text()
    names = which.split(", ")
    assert len(names) == len(section["budget"]["candidates"]) > 0
    assert all(re.fullmatch(r"demo-\d{3} · claim \d+", name) for name in names), which
    first = session.get(Claim, int(section["budget"]["candidates"][0].split(":")[1]))
    assert names[0] == f"{session.get(Sample, first.sample_id).external_id} · claim {first.index + 1}"


def test_self_preference_guard(demo, session, client, login, app, runner, soup):
    from calibrate.judges.families import model_family
    from calibrate.models import Judge, PromptVersion
    from calibrate.reports import render

    assert model_family("openai/gpt-4o") == model_family("gpt-4o-mini") == "openai"
    assert model_family("llama-3.1-8b-instruct") == "meta" and model_family("claude-3-5-sonnet") == "anthropic"
    assert model_family("") is None and model_family("acme-7b") == "acme"
    assert build_report(session, demo, "demo-claims@1", options=Options(bootstrap=100)).data["warnings"] == []
    judge = session.exec(select(Judge).where(Judge.name == "demo-claims@1")).one()
    session.get(PromptVersion, judge.prompt_version_id).model = "openai/gpt-4o"
    session.commit()
    report = build_report(session, demo, "demo-claims@1", options=Options(bootstrap=100))
    [warning] = report.data["warnings"]
    assert warning["kind"] == "self_preference" and warning["generator_model"] == "gpt-4o-mini" and warning["family"] == "openai"
    assert warning["n_samples"] > 0
    md = render(report, "md")
    decision = md.split("## Decision")[1].split("\n## ")[0]
    assert "⚠️ **Warning" in decision and "same family" in decision
    html = BeautifulSoup(render(report, "html"), "html.parser")
    assert "gpt-4o-mini" in html.select_one("[data-warning=self_preference]").get_text()
    assert build_report(session, demo, "demo-claims@2", options=Options(bootstrap=100)).data["warnings"] == []
    app.config["BOOTSTRAP"] = 100
    login("eng", "engineer")
    page = soup(client.get(f"/datasets/{demo}/calibration"))
    assert len(page.select("#judges tr.row-warning[data-warning=self_preference]")) == 1


def test_calibration_index_links_every_dataset(demo, client, login, soup):
    login("eng", "engineer")
    page = soup(client.get("/datasets"))
    assert page.select_one("nav a[href='/calibration']") is not None
    listing = soup(client.get("/calibration"))
    # the demo has four datasets: the RAG answers, the pairwise items (its two versions side by side), the agent's
    # trajectories and the production source (calibrate/demo/production.py)
    assert [a["href"] for a in listing.select("#calibration-datasets a")] == [f"/datasets/{demo}/calibration",
                                                                              "/datasets/demo-prenatal-ab/calibration",
                                                                              "/datasets/demo-prenatal-agent/calibration",
                                                                              "/datasets/demo-prenatal-live/calibration"]


def test_the_dashboard_shows_the_estimate_beside_kappa_with_the_naive_number_struck(app, demo, client, login, soup, session):
    from calibrate.calibration import estimate_block
    from calibrate.models import Task

    app.config["BOOTSTRAP"] = 200
    login("eng", "engineer")
    task = session.exec(select(Task).where(Task.name == "claim_support")).one()
    block = estimate_block(session, demo, task, "demo-claims@2", split="dev")
    assert block is not None and block["unit"] == "answer" and block["n_unlabelled"] > 0
    cell = soup(client.get(f"/datasets/{demo}/calibration")).select_one('tr[data-judge="demo-claims@2"] td.value small.estimate')
    assert cell.select_one("s.naive").get_text() == f"{block['naive_judge']['estimate']:.3f}"
    assert "biased by the judge's errors" in cell.get_text() and "share of faithful answers" in cell.get_text()
    if block["status"] == "ok":
        assert cell.select_one(".estimate-value").get_text() == f"{block['estimate']:.3f}"
    spanish = soup(client.get(f"/datasets/{demo}/calibration", headers={"Accept-Language": "es"}))
    text = spanish.select_one('tr[data-judge="demo-claims@2"] td.value small.estimate').get_text()
    assert "el juez solo" in text and "sesgado por los errores del juez" in text
