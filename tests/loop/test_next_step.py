"""The dashboard's "what next" line (loop/next_step.py), from the state the dashboard shows, and on the page."""

from __future__ import annotations

from types import SimpleNamespace

from calibrate.loop.dashboard import Dashboard, JudgeRow
from calibrate.loop.next_step import next_step


def _board(*rows, has_test=False):
    board = Dashboard(dataset="d", task="claim_support", split="dev", threshold=0.75, n_labelled=40, has_test=has_test)
    board.rows = list(rows)
    return board


def _row(judge, value, decision, **fields):
    return JudgeRow(judge=judge, kind="prompt", value=value, decision=decision, ran=True, **fields)


def test_no_judge_ran_yet():
    assert next_step(_board(JudgeRow(judge="p@1", kind="prompt"))).kind == "run"


def test_an_undecided_lead_asks_for_the_labels_that_would_settle_it():
    lead = _row("p@2", 0.86, "undecided", labels_to_decide={"more_targets": 16}, budget={"more_targets": 294})
    step = next_step(_board(_row("p@1", 0.74, "undecided", labels_to_decide={"more_targets": None}), lead))
    assert (step.kind, step.judge, step.n) == ("label", "p@2", 16)
    assert step.text() == "Next: label 16 more targets to decide whether p@2 passes."


def test_labels_that_would_not_settle_it_give_way_to_triage_then_improvement():
    row = _row("p@1", 0.6, "undecided", labels_to_decide={"more_targets": None}, n_disagree=9,
               triage={"judge_error": 3, "human_error": 1})
    step = next_step(_board(row))
    assert (step.kind, step.n) == ("triage", 5) and step.text() == "Next: triage 5 disagreements of p@1."
    row.triage = {"judge_error": 9}
    assert next_step(_board(row)).kind == "improve"


def test_a_passing_lead_goes_to_test_once_then_is_done():
    lead = _row("p@3", 0.9, "pass", n_disagree=4)
    assert next_step(_board(_row("p@1", 0.95, "fail"), lead, has_test=True)).judge == "p@3"
    assert next_step(_board(lead, has_test=True)).kind == "test"
    lead.test = SimpleNamespace(value=0.88)
    assert next_step(_board(lead, has_test=True)).kind == "done"
    assert next_step(_board(_row("p@4", 0.9, "pass"))).text() == "Done: p@4 passes."


def test_the_dashboard_says_it(client, login, demo, soup):
    login("eng", "engineer")
    page = soup(client.get(f"/datasets/{demo}/calibration?task=claim_support&split=dev"))
    line = page.select_one("#next-step")
    assert line["data-step"] in {"label", "triage", "improve", "test", "done"} and line.get_text(strip=True).startswith(("Next:", "Done:"))
