"""The Alternative Annotator Test through calibrate's data: hand-computed ω and ρ, the CLI, the report, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
from bs4 import BeautifulSoup
from scipy import stats as sps
from sqlmodel import select

from calibrate.calibration import Options, build_report
from calibrate.calibration.alttest import run_alt_test
from calibrate.judges import FewShotSpec, save_version
from calibrate.reports import render

S, U = "supported", "unsupported"
# One block of items: the labels of a1, a2, a3, then the judge's verdict (worked through in d_of below).
BLOCK = [((S, S, S), S), ((S, S, U), S), ((U, U, U), U), ((S, U, U), U), ((S, S, S), U), ((U, S, U), U)]
BLOCKS = 6
# For each annotator, d = (annotator wins) − (judge wins) on the block's six items, scoring each side by the share of
# the *other* annotators with the same label (ties are a win for both, d = 0):
#   a1: i1 1 vs 1 tie; i2 ½ vs ½ tie; i3 tie; i4 a1=S 0 vs judge U 1 → −1; i5 a1=S 1 vs U 0 → +1; i6 ½ vs ½ tie
#   a2: i1–i4 ties; i5 +1; i6 a2=S 0 vs judge U 1 → −1
#   a3: i2 a3=U 0 vs judge S 1 → −1; i5 +1; the rest ties
D = {"a1": [0, 0, 0, -1, 1, 0], "a2": [0, 0, 0, 0, 1, -1], "a3": [0, -1, 0, 0, 1, 0]}
# The judge wins (scores ≥ the annotator) on 5 of 6 items for each annotator: ρ = mean(5/6, 5/6, 5/6) = 5/6.


def panel(store, session):
    """Store 36 kept items labelled by a1–a3 (a4 labels one: skipped), an unparsed verdict and a few-shot item."""
    for b in range(BLOCKS):
        for i, (labels, verdict) in enumerate(BLOCK):
            sid = f"b{b}i{i}"
            store.sample(sid, n_claims=1)
            for who, value in zip(("a1", "a2", "a3"), labels, strict=True):
                store.label("claim_support", who, sid, value, claim=0)
            store.verdict("p@1", "claim_support", sid, verdict, claim=0)
    store.label("claim_support", "a4", "b0i0", S, claim=0)  # one item: fewer than 30, not tested
    for sid, verdict in (("unparsed", None), ("example", U)):
        store.sample(sid, n_claims=1)
        for who in ("a1", "a2", "a3"):
            store.label("claim_support", who, sid, U, claim=0)
        store.verdict("p@1", "claim_support", sid, verdict, claim=0)  # None: an unparsed verdict, item not kept
    session.flush()
    version = save_version(session, "p", task="claim_support", few_shots=[FewShotSpec("example:0")], dataset="d").version
    judge = store.judges["p@1"]
    judge.kind, judge.prompt_version_id = "prompt", version.id  # the judge of p@1: "example" is its few-shot example
    store.commit()


@pytest.fixture
def stored(store, session):
    panel(store, session)
    return store


def test_omega_and_rho_by_hand(stored, session):
    result = run_alt_test(session, "d", "claim_support", "p@1")
    assert (result["n_items"], result["n_annotators"], result["n_skipped"]) == (36, 3, 1)  # unparsed and example dropped
    assert result["advantage_prob"] == pytest.approx(5 / 6) and result["scoring"] == "accuracy"
    by_name = {a["annotator"]: a for a in result["annotators"]}
    for name, d in D.items():
        # 36 items, 12 of them ±1: mean 0, s = √(12/35) = 0.586, t = (0 − 0.2)/(0.586/6) = −2.049, df 35
        p = sps.ttest_1samp(np.tile(d, BLOCKS), 0.2, alternative="less").pvalue
        assert by_name[name]["n"] == 36 and by_name[name]["p_value"] == pytest.approx(p)
        assert by_name[name]["judge_win_rate"] == pytest.approx(5 / 6) and by_name[name]["annotator_win_rate"] == pytest.approx(5 / 6)
    assert by_name["a1"]["p_value"] == pytest.approx(0.0240, abs=5e-4)
    # BY at α = 0.05 over m = 3: thresholds k·0.05/(3·(1 + ½ + ⅓)) = 0.0091, 0.0182, 0.0273; the largest p, 0.024, is
    # under the third: step-up rejects all three, ω = 3/3 = 1 ≥ 0.5: the judge could replace an expert
    assert result["winning_rate"] == 1 and result["passed"] is True
    # at α = 0.02 the thresholds are 0.0036, 0.0073, 0.0109: none is reached, ω = 0; ρ does not depend on α
    strict = run_alt_test(session, "d", "claim_support", "p@1", alpha=0.02)
    assert strict["winning_rate"] == 0 and strict["passed"] is False and strict["advantage_prob"] == pytest.approx(5 / 6)


def test_the_cli_writes_the_same_in_every_format(stored, session, runner, tmp_path):
    out = runner.invoke(["alt-test", "--dataset", "d", "--task", "claim_support", "--judge", "p@1", "--alpha", "0.02"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert list(data)[:4] == ["dataset", "task", "judge", "split"]
    assert list(data)[4:] == ["winning_rate", "advantage_prob", "passed", "epsilon", "alpha", "scoring", "n_items", "n_annotators",
                              "annotators", "n_skipped", "status", "note", "reason"]
    assert "alt_test_annotators_skipped" in [part["code"] for part in data["reason"]["parts"]]  # a1…a3 tested, one skipped
    assert data == run_alt_test(session, "d", "claim_support", "p@1", alpha=0.02)
    md = runner.invoke(["alt-test", "--dataset", "d", "--task", "claim_support", "--judge", "p@1", "--format", "md"]).output
    assert "**yes**: winning rate ω = 1.000 (3 of 3 tested annotators beaten at ε = 0.2, α = 0.05" in md
    assert [line.split("|")[1].strip() for line in md.splitlines() if line.startswith("| a") and line[3].isdigit()] == ["a1", "a2", "a3"]
    target = tmp_path / "alt.html"
    written = runner.invoke(["alt-test", "--dataset", "d", "--task", "claim_support", "--judge", "p@1", "--format", "html",
                             "-o", str(target)])
    assert written.exit_code == 0 and "wrote html alt-test" in written.output
    page = BeautifulSoup(target.read_text(encoding="utf-8"), "html.parser")
    assert page.select_one(".alt-test")["data-answer"] == "yes" and len(page.select("tr[data-annotator]")) == 3
    assert page.select("script") == []


@pytest.mark.parametrize(("args", "message"), [
    (["--dataset", "nope"], "error: unknown dataset 'nope'"),
    (["--task", "nope"], "error: unknown task 'nope'"),
    (["--judge", "nope"], "error: unknown judge 'nope'"),
    (["--epsilon", "0"], "error: --epsilon must lie strictly between 0 and 1, not 0; the paper suggests 0.2 for experts"),
    (["--epsilon", "1.5"], "error: --epsilon must lie strictly between 0 and 1, not 1.5"),
    (["--epsilon", "lots"], "error: --epsilon must be a number in (0, 1), not 'lots'"),
    (["--alpha", "1"], "error: --alpha must lie strictly between 0 and 1, not 1"),
    (["--min-items", "0"], "error: --min-items must be a positive whole number, not '0'"),
    (["--split", "nope"], "error: no sample of d is in split 'nope'"),
    (["--min-items", "40"], "error: the alt-test cannot be run on claim_support of d with p@1: no annotator labelled at least "
                            "min_items = 40 kept items (most: 36)"),
    (["--task", "answer_quality"], "error: the alt-test cannot be run on answer_quality of d with p@1: 0 annotator(s) with labels"),
])
def test_bad_input_is_one_line_and_exit_2(stored, runner, args, message):
    base = {"--dataset": "d", "--task": "claim_support", "--judge": "p@1"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    out = runner.invoke(["alt-test", *[arg for pair in base.items() for arg in pair]])
    assert out.exit_code == 2
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), out.output


def test_fewer_than_three_annotators_is_one_line(store, session, runner):
    for i in range(40):
        store.sample(f"s{i}", n_claims=1)
        for who in ("a1", "a2"):
            store.label("claim_support", who, f"s{i}", S, claim=0)
        store.verdict("j", "claim_support", f"s{i}", S, claim=0)
    store.commit()
    out = runner.invoke(["alt-test", "--dataset", "d", "--task", "claim_support", "--judge", "j"])
    assert out.exit_code == 2 and out.output.strip() == (
        "error: the alt-test cannot be run on claim_support of d with j: 2 annotator(s) with labels: the alt-test needs at least 3")
    # the report says so in its block, with every key, and does not fail
    block = build_report(session, "d", "j", options=Options(bootstrap=100)).data["tasks"]["claim_support"]["alt_test"]
    assert block["status"] == "undefined" and block["winning_rate"] is None and block["reason"]["code"] == "alt_test_too_few_annotators"


def test_the_report_carries_the_block_in_every_format(stored, session):
    report = build_report(session, "d", "p@1", options=Options(bootstrap=100))
    block = report.data["tasks"]["claim_support"]["alt_test"]
    assert block == {k: v for k, v in run_alt_test(session, "d", "claim_support", "p@1").items()
                     if k not in ("dataset", "task", "judge", "split")}
    md = render(report, "md")
    assert "Could the judge replace an expert (Alternative Annotator Test)? **yes**: winning rate ω = 1.000" in md
    page = BeautifulSoup(render(report, "html"), "html.parser")
    section = page.select_one("section.task[data-task=claim_support] .alt-test")
    assert section["data-answer"] == "yes" and [r["data-annotator"] for r in section.select("tr[data-annotator]")] == ["a1", "a2", "a3"]


def test_the_dashboard_column_and_the_page(stored, session, client, login, app):
    def soup(response):
        return BeautifulSoup(response.data, "html.parser")

    app.config["BOOTSTRAP"] = 100
    login("eng", "engineer")
    page = soup(client.get("/datasets/d/calibration?split=all"))
    cell = page.select_one("#judges tr[data-judge='p@1'] td.alt-test")
    assert cell["data-answer"] == "yes" and "ω = 1.000" in cell["title"]
    assert soup(client.get("/datasets/d/calibration?split=all&epsilon=0.1")).select_one(
        "#judges tr[data-judge='p@1'] td.alt-test")["title"].count("ε = 0.1") == 1
    shown = soup(client.get(cell.select_one("a")["href"] + "&alpha=0.02"))
    assert shown.select_one("#alt-test .alt-test")["data-answer"] == "no"
    bad = client.get("/datasets/d/calibration/judges/p@1/alt-test?task=claim_support&split=all&epsilon=2")
    assert bad.status_code == 400 and "epsilon must lie strictly between 0 and 1" in soup(bad).select_one("#alt-test-message").get_text()
    board = client.get("/datasets/d/calibration?split=all&epsilon=abc")
    assert board.status_code == 400 and "epsilon must lie strictly between 0 and 1" in soup(board).select_one(".input-error").get_text()
    few = soup(client.get("/datasets/d/calibration/judges/p@1/alt-test?task=answer_quality&split=all"))
    assert "0 annotator(s) with labels" in few.select_one("#alt-test-message").get_text()
    assert client.get("/datasets/d/calibration/judges/nobody/alt-test").status_code == 404


def test_the_page_refuses_the_frozen_test_split(stored, session, client, login):
    from calibrate.models import Sample

    for sample in session.exec(select(Sample)).all():
        sample.split = "test" if sample.external_id.startswith("b5") else "dev"
    session.commit()
    login("eng", "engineer")
    for split in ("test", "all"):  # every sample includes the test split
        page = client.get(f"/datasets/d/calibration/judges/p@1/alt-test?task=claim_support&split={split}")
        text = BeautifulSoup(page.data, "html.parser").select_one("#alt-test-message").get_text()
        assert page.status_code == 400 and "frozen" in text
    dev = BeautifulSoup(client.get("/datasets/d/calibration/judges/p@1/alt-test?task=claim_support&split=dev").data, "html.parser")
    assert dev.select_one("#alt-test .alt-test") is not None
