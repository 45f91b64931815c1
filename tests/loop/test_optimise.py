"""`calibrate optimise` against the fake LLM server whose judge depends on its prompt (tests/judges/prompt_world.py):
it reaches the target from train items only, confirms on test once, keeps to its budget, refuses what it must, and
its chosen version's dev value is `calibrate report`'s."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from optimise_helpers import DATASET, load_world, optimise_args
from sqlmodel import select

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judges"))

from fakellm import FakeLLM
from prompt_world import PromptWorld

from calibrate.models import Optimisation, PromptVersion, TestEvaluation


@pytest.fixture
def world():
    return PromptWorld.make(n_train=24, n_dev=24, n_test=24, hard={"dosage", "timing"})


@pytest.fixture
def server(world):
    fake = FakeLLM().start()
    fake.responder = world
    yield fake
    fake.stop()


@pytest.fixture
def start(engine, tmp_path, world):
    return load_world(engine, tmp_path, world)


def run(runner, server, start, *extra):
    result = runner.invoke(optimise_args(server, start, *extra))
    return result, (json.loads(result.stdout) if result.exit_code == 0 and result.stdout.startswith("{") else None)


def test_it_reaches_the_target_from_train_items_and_confirms_on_test_once(runner, session, server, world, start):
    result, out = run(runner, server, start)
    assert result.exit_code == 0, result.output
    assert out["stop"]["code"] == "target_reached" and out["chosen"] and out["decision"] == "pass"
    assert out["test"] == {"version": out["chosen"], "value": 1.0, "ci": [1.0, 1.0], "n": 24, "decision": "pass", "look": 1}
    assert out["looks"] == {"dev": len(out["candidates"]), "test": 1}
    first = out["candidates"][0]
    assert first["version"] == start and first["change"]["kind"] == "start" and first["parent"] is None
    assert first["dev"]["value"] < 0.5  # the hard topics are judged wrong at first
    kinds = {c["change"]["kind"] for c in out["candidates"][1:]}
    assert kinds == {"fewshot", "rewrite", "fewshot+rewrite"}
    assert all(c["parent"] == start for c in out["candidates"][1:])
    for c in out["candidates"]:
        assert c["dev"]["lower_adjusted"] is None or c["dev"]["lower_adjusted"] <= c["dev"]["ci"][0] + 1e-12
    assert out["calls"] == server.stats()["requests"] == sum(c["calls"] for c in out["candidates"])
    # Every candidate is an immutable version with its parent, a note and its origin.
    chosen = session.exec(select(PromptVersion).where(PromptVersion.number == int(out["chosen"].split("@")[1]))).one()
    assert chosen.optimisation_id == out["optimisation"] and chosen.parent_id is not None and chosen.note
    assert session.exec(select(TestEvaluation)).all()[0].decision == "pass"
    # The chosen version's dev value is `calibrate report --judge it --split dev`'s.
    report = runner.invoke(["report", "--dataset", DATASET, "--judge", out["chosen"], "--split", "dev", "--format", "json"])
    section = json.loads(report.stdout)["tasks"]["claim_support"]
    assert section["alignment"]["value"] == out["candidates"][[c["version"] for c in out["candidates"]].index(out["chosen"])]["dev"]["value"]


def test_only_train_items_reach_the_prompts_and_rewrite_requests(runner, server, world, start):
    result, out = run(runner, server, start)
    assert result.exit_code == 0, result.output
    train, dev, test = world.texts("train"), world.texts("dev"), world.texts("test")
    rewrites = 0
    for request in server.requests:
        messages = request["body"]["messages"]
        system = "\n".join(m["content"] for m in messages if m["role"] == "system")
        user = messages[-1]["content"]
        assert not any(text in system for text in dev | test), "a dev or test item in a prompt's system text"
        if '"instructions"' in system:
            rewrites += 1
            shown = [line.removeprefix("Judged text: ") for line in user.splitlines() if line.startswith("Judged text: ")]
            assert shown and set(shown) <= train
            assert not any(text in user for text in dev | test)
    assert rewrites == 1
    # Test items were judged once, by the chosen version only (the confirmation), after every dev call.
    judged_test = [i for i, r in enumerate(server.requests) if any(t in r["body"]["messages"][-1]["content"] for t in test)]
    judged_dev = [i for i, r in enumerate(server.requests) if any(t in r["body"]["messages"][-1]["content"] for t in dev)]
    assert len(judged_test) == 24 and min(judged_test) > max(judged_dev)


def test_the_same_command_again_shows_the_result_and_asks_nothing(runner, server, start):
    first, out = run(runner, server, start)
    asked = server.stats()["requests"]
    again, out2 = run(runner, server, start)
    assert again.exit_code == 0 and out2 == out and server.stats()["requests"] == asked


def test_a_second_confirmation_on_the_test_split_is_refused_unless_reuse_test(runner, server, start):
    run(runner, server, start)
    asked = server.stats()["requests"]
    result, _ = run(runner, server, start, "--seed", "1")
    assert result.exit_code == 2 and server.stats()["requests"] == asked
    assert result.stderr.startswith("error: the test split of world was already looked at 1 time for claim_support")
    result, out = run(runner, server, start, "--seed", "1", "--reuse-test")
    assert result.exit_code == 0, result.output
    assert out["test"]["look"] == 2 and out["looks"]["test"] == 2 and "look 2" in out["note"]


def test_the_budget_stops_within_the_calls_in_flight(runner, server, start):
    result, out = run(runner, server, start, "--max-calls", "40")
    assert result.exit_code == 0, result.output
    assert out["stop"]["code"] == "budget" and out["chosen"] is None and out["decision"] is None
    assert server.stats()["requests"] <= 40 and out["calls"] == server.stats()["requests"]
    # A larger budget continues the same optimisation: nothing answered is asked again.
    asked = server.stats()["requests"]
    result, out = run(runner, server, start, "--max-calls", "1000")
    assert out["stop"]["code"] == "target_reached" and out["calls"] == server.stats()["requests"]
    assert len({json.dumps(r["body"]["messages"]) for r in server.requests}) == len(server.requests) >= asked


def test_a_rewrite_that_changes_the_template_fields_is_refused_and_counted(runner, server, world, start):
    world.break_fields = True
    result, out = run(runner, server, start, "--strategies", "rewrite", "--max-candidates", "3")
    assert result.exit_code == 0, result.output
    assert out["refused"] and out["refused"][0]["reason"]["code"] == "rewrite_fields_changed"
    assert "{{ task.guidelines }}" in out["refused"][0]["text"] and out["refused"][0]["calls"] == 1
    assert [c["change"]["kind"] for c in out["candidates"]] == ["start"]
    assert out["stop"]["code"] in ("max_candidates", "no_improvement", "cannot_reach")
    # In Spanish: the refused candidate's kind and the target in words and numbers of the reader.
    from bs4 import BeautifulSoup

    from calibrate.reports.optimise_report import render_optimise

    page = BeautifulSoup(render_optimise(out, "html", "es"), "html.parser")
    assert page.select_one("#optimise-refused li").get_text().startswith("ronda 1, reescritura desde claims@1:")
    assert "0,75" in page.select_one("#optimise-outcome").get_text() and "0.75" not in page.select_one("#optimise-summary").get_text()
    assert "objetivo 0,75" in render_optimise(out, "md", "es") and "reescritura desde claims@1" in render_optimise(out, "md", "es")


@pytest.mark.parametrize("change, line", [
    (["--target", "1.5"], "error: --target must lie in (0, 1], not 1.5"),
    (["--target", "0"], "error: --target must lie in (0, 1], not 0.0"),
    (["--from", "claims@9"], "error: prompt claims has no version 9 (versions: 1)"),
    (["--from", "nope@1"], "error: unknown prompt 'nope'"),
    (["--task", "faithfulness"], "error: faithfulness is a metric task"),
    (["--task", "answer_quality"], "error: claims@1 is a prompt of task claim_support, not answer_quality"),
    (["--dataset", "nodev"], "error: nodev has no dev split: candidates are selected on dev. Make one with calibrate sample"),
    (["--dataset", "nogold"], "error: no train item of nogold has gold for claim_support"),
    (["--max-cost", "1"], "error: --max-cost needs the price of fake-model"),
])
def test_refusals_exit_2_with_one_line_and_call_nothing(runner, engine, tmp_path, server, start, change, line):
    from sqlalchemy import text

    from calibrate.db import write_session

    nodev = PromptWorld.make(n_train=4, n_dev=0, n_test=0, hard=set())
    (tmp_path / "nodev").mkdir()
    load_world(engine, tmp_path / "nodev", nodev, dataset="nodev", prompt="other")
    nogold = PromptWorld.make(n_train=4, n_dev=4, n_test=0, hard=set())
    (tmp_path / "nogold").mkdir()
    load_world(engine, tmp_path / "nogold", nogold, dataset="nogold", prompt="third")
    with write_session(engine) as s:  # nogold: its train labels gone
        s.execute(text("DELETE FROM label WHERE sample_id IN (SELECT id FROM sample WHERE split = 'train' AND dataset_id = "
                       "(SELECT id FROM dataset WHERE name = 'nogold'))"))
    args = {"--dataset": DATASET, "--from": start}
    args.update(dict(zip(change[::2], change[1::2], strict=True)))
    result = runner.invoke(["optimise", *[x for kv in args.items() for x in kv], "--base-url", server.openai_base,
                            "--api-key-env", ""])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(line), result.stderr
    assert server.stats()["requests"] == 0


def test_the_baseline_backend_and_other_tasks_are_refused(runner, server, start):
    result = runner.invoke(["optimise", "--dataset", DATASET, "--from", start, "--backend", "baseline"])
    assert result.exit_code == 2  # not a choice of the command: there is no prompt the baseline reads
    result = runner.invoke(["optimise", "--dataset", DATASET, "--from", start, "--task", "claim_extraction",
                            "--base-url", server.openai_base, "--api-key-env", ""])
    assert result.exit_code == 2 and "is not calibrated" in result.stderr
    assert server.stats()["requests"] == 0


def test_markdown_and_html_say_the_stop_the_lineage_and_the_test(runner, server, start, tmp_path):
    from bs4 import BeautifulSoup

    result = runner.invoke(optimise_args(server, start, "--format", "md"))
    assert result.exit_code == 0, result.output
    assert "| claims@1 | — | start |" in result.stdout and "reached the target 0.75" in result.stdout
    assert "on test (look 1): pass" in result.stdout
    html = runner.invoke(optimise_args(server, start, "--format", "html", "--locale", "es", "-o", str(tmp_path / "o.html")))
    assert html.exit_code == 0, html.output
    page = BeautifulSoup((tmp_path / "o.html").read_text(encoding="utf-8"), "html.parser")
    rows = page.select("#optimise-candidates tbody tr")
    assert len(rows) == 4 and rows[0]["data-version"] == start
    assert rows[0].select_one("td").text.strip() == start and page.select("a[href^='/prompts/']") == []  # a file: no app links
    assert page.select_one("#optimise-stop")["data-stop"] == "target_reached"
    assert page.select_one("html")["lang"] == "es"
    assert page.select_one("#optimise-summary dt").text == "Objetivo"  # the value to reach (pgettext), not an item


def test_the_optimisation_is_stored_with_its_state(runner, session, server, start):
    _, out = run(runner, server, start)
    opt = session.exec(select(Optimisation)).one()
    assert opt.status == "done" and opt.result["stop"]["code"] == "target_reached"
    # The result says how it ended, printed and stored (it said "running", computed before the status was set).
    assert out["status"] == opt.result["status"] == "done"
    assert len(opt.state["candidates"]) == 4 and opt.state["test"]["evaluation_id"]


def test_killed_with_sigkill_it_resumes_repeating_at_most_the_calls_in_flight(db_url, tmp_path, server, start):
    import os
    import signal
    import sqlite3
    import subprocess
    import threading
    import time

    database = db_url.removeprefix("sqlite:///")

    def verdicts() -> int:
        conn = sqlite3.connect(database, timeout=10)
        try:
            return conn.execute("select count(*) from verdict").fetchone()[0]
        finally:
            conn.close()

    command = [sys.executable, "-m", "calibrate", *optimise_args(server, start), "--db", db_url]
    env = dict(os.environ, CALIBRATE_INSTANCE=str(tmp_path / "instance"))
    root = Path(__file__).resolve().parents[2]
    server.latency = 0.01
    proc = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    gate = threading.Event()
    try:
        deadline = time.monotonic() + 180  # a hang guard, never a timing: a loaded machine takes its time
        while verdicts() < 30 and time.monotonic() < deadline:  # the start's dev run done, its train run under way
            time.sleep(0.02)
        server.gate = gate  # from now on every call waits: those asked are in flight
        last, still, in_flight = -1, time.monotonic(), 0
        while time.monotonic() < deadline:  # every answered call written, and calls held at the gate
            now = verdicts()
            if now != last:
                last, still = now, time.monotonic()
            stats = server.stats()
            in_flight = stats["requests"] - sum(stats["answers"].values())
            if time.monotonic() - still >= 1.0 and in_flight >= 1:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        assert 1 <= in_flight <= 2 and 30 <= last < 145, "the kill must land mid-way, with calls in flight"
    finally:
        gate.set()
        server.gate = None
    before = [json.dumps(r["body"]["messages"]) for r in server.requests]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout)
    assert out["stop"]["code"] == "target_reached" and out["decision"] == "pass"
    after = [json.dumps(r["body"]["messages"]) for r in server.requests[len(before):]]
    repeated = set(after) & set(before)
    assert len(repeated) <= in_flight, "only the calls in flight at the kill are asked again"
    assert len(set(before) | set(after)) == 145  # what an uninterrupted optimisation asks


def test_without_a_test_split_the_result_rests_on_dev_and_says_it_is_not_confirmed(runner, engine, tmp_path, server):
    world = PromptWorld.make(n_train=24, n_dev=24, n_test=0, hard={"dosage", "timing"})
    server.responder = world
    (tmp_path / "notest").mkdir()
    start = load_world(engine, tmp_path / "notest", world, dataset="notest", prompt="nt")
    result = runner.invoke(optimise_args(server, start, dataset="notest"))
    out = json.loads(result.stdout)
    assert out["stop"]["code"] == "target_reached" and out["chosen"] and out["test"] is None
    assert out["decision"] is None and out["confirmed"] is False
    assert out["note"] == "notest has no test split: the result rests on dev only and is not confirmed"
    shown = runner.invoke(["prompt", "show", out["chosen"]])
    assert f"origin: proposed by optimisation {out['optimisation']}" in shown.stdout


def test_experts_who_agree_below_the_target_stop_it_before_any_call(runner, engine, tmp_path, server):
    import random

    world = PromptWorld.make(n_train=12, n_dev=40, n_test=0, hard=set())
    rng = random.Random(3)
    labels, dev = [], [s["id"] for s in world.samples if s["metadata"]["split"] == "dev"]
    for lab in world.labels:  # dev: six annotators in turn, each pair sharing a few targets, the second a coin flip
        if lab["sample_id"] not in dev:
            labels.append(lab)
        elif lab["annotator"] == "ann1":
            j = dev.index(lab["sample_id"])
            labels.append({**lab, "annotator": f"expert{j % 6}"})
            labels.append({**lab, "annotator": f"expert{(j + 1) % 6}", "value": rng.choice(["supported", "unsupported"])})
    world.labels = labels
    (tmp_path / "ceiling").mkdir()
    start = load_world(engine, tmp_path / "ceiling", world, dataset="ceiling", prompt="cl")
    result = runner.invoke(optimise_args(server, start, dataset="ceiling"))
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["stop"]["code"] == "ceiling_below_target" and out["candidates"] == [] and out["chosen"] is None
    assert out["ceiling"]["metric"] == "krippendorff_alpha_nominal" and out["ceiling"]["ci"][1] < 0.75
    assert "the experts agree with each other at" in out["stop"]["text"]
    assert server.stats()["requests"] == 0
