"""Renders that cannot take a process down (issue 20, findings 1, 7b and 9): user templates check
and render in worker processes (calibrate.judges.render_pool) with memory and CPU limits; inside,
the sandbox bounds the nesting of what a template builds, the parser's depth and the input of
costly filters. A run whose process died is marked failed and resumable.

The finding's template nests a tuple 160,000 levels deep and hashes it (`unique`): Python
segfaults. With the default PROMPT_RENDER_MAX_DEPTH the sandbox refuses it at 101 levels; with
that bound lifted (`CRASHING`) it really crashes its worker, which shows the isolation itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from judge_helpers import fast_options
from prompt_helpers import claims_prompt_edit_form
from sqlmodel import select

from calibrate.db import write_session
from calibrate.judges import RunSpec, execute_run, prepare_run, render_pool, save_version
from calibrate.judges.errors import PromptError, RenderError
from calibrate.judges.render import Renderer, check_template
from calibrate.judges.runner import DEAD_RUN_ERROR
from calibrate.judges.sandbox import Limits
from calibrate.models import JudgeRun, PromptVersion, Sample, Verdict

DEEP_TUPLE = ("{% set ns = namespace(t=()) %}{% for i in range(10000) %}{% for j in range(16) %}"
              "{% set ns.t = (ns.t,) %}{% endfor %}{% endfor %}{{ [ns.t]|unique|list|length }}")
CRASHING = Limits(seconds=60, max_depth=10**9)  # the sandbox's depth bound lifted: the worker really segfaults
CRASHING_SETTINGS = {"PROMPT_RENDER_SECONDS": 60, "PROMPT_RENDER_MAX_DEPTH": 10**9}
PARENS = "{{ " + "(" * 300 + "1" + ")" * 300 + " }}"
ROOT = Path(__file__).resolve().parents[2]


def test_the_deep_tuple_is_refused_by_the_depth_bound_before_anything_hashes_it():
    assert len(DEEP_TUPLE) < 271  # the finding's template, or shorter
    with pytest.raises(PromptError) as info:
        check_template(DEEP_TUPLE, target="claim", part="template")
    assert str(info.value) == ("template refused: a list or dict builds a value nested more than 100 levels deep "
                               "(PROMPT_RENDER_MAX_DEPTH)")


def test_a_segfault_costs_one_check_and_the_next_render_gets_a_fresh_worker():
    pid = os.getpid()
    with pytest.raises(PromptError) as info:
        check_template(DEEP_TUPLE, target="claim", part="template", limits=CRASHING)
    assert str(info.value) == "template refused: the template crashed the render process (SIGSEGV)"
    assert os.getpid() == pid
    renderer = Renderer("", "Claim: {{ claim.text }}", {})
    assert renderer.render({"claim": {"index": 0, "text": "still here"}}).user == "Claim: still here"


def test_a_worker_that_does_not_answer_in_time_is_killed_and_replaced():
    # The parent's wall clock, not the sandbox's deadline: a request given (far) less time than a
    # worker needs to answer is refused and its worker killed; the next request gets a fresh one.
    check_template("{{ claim.text }}", target="claim", part="template")  # a worker is up and idle
    idle = list(render_pool.POOL.idle)
    message = {"op": "render", "source": "{{ x }}", "part": "template", "context": {"x": 1},
               "limits": {"seconds": 2, "max_chars": 1000, "max_depth": 100, "memory_mb": 512}}
    with pytest.raises(render_pool.WorkerLost) as info:
        render_pool.call(message, seconds=0.0, workers=1)
    assert str(info.value) == "the render took longer than its time limit and its process was stopped"
    assert any(not worker.alive for worker in idle)  # killed
    assert render_pool.call(message, seconds=30, workers=1) == {"text": "1"}


def test_a_render_that_allocates_past_the_memory_limit_is_the_items_error_not_the_processs():
    # 150 MB of text is within the size limits asked for here, not within 64 MiB of address space.
    renderer = Renderer("", "{{ ('x' * 150000000)|length }}", {}, Limits(memory_mb=64, max_chars=10_000_000))
    with pytest.raises(RenderError) as info:
        renderer.render({})
    assert str(info.value) == "template refused: it ran out of memory"
    assert Renderer("", "ok", {}).render({}).user == "ok"


def test_three_hundred_nested_parentheses_are_a_clean_error_naming_the_line():
    with pytest.raises(PromptError) as info:
        check_template("Claim: {{ claim.text }}\n" + PARENS, target="claim", part="template")
    assert str(info.value) == "template: line 2: brackets or blocks nested more than 40 deep"
    nested_ifs = "{% if true %}" * 300 + "x" + "{% endif %}" * 300
    with pytest.raises(PromptError) as info:
        check_template(nested_ifs, target="claim", part="template")
    assert "nested more than 40 deep" in str(info.value)


@pytest.mark.parametrize(("source", "what"), [
    ("{{ ('ab' * 1500000)|batch(1)|list|length }}", "|batch on 3,000,000 characters"),
    ("{{ ('<b>' * 1300000)|striptags|length }}", "|striptags on 3,900,000 characters"),
    ("{{ range(10000)|list|batch(1)|list|length }}", None),  # 10,000 elements: allowed
])
def test_costly_filters_are_refused_on_huge_inputs_before_they_run(source, what):
    if what is None:
        check_template(source, target="claim", part="template")
        return
    with pytest.raises(PromptError) as info:
        check_template(source, target="claim", part="template")
    assert str(info.value) == f"template refused: {what}; this filter takes at most 200,000 (PROMPT_RENDER_MAX_CHARS)"


# --------------------------------------------------------------------------- the web and the command line




@pytest.mark.parametrize(("settings", "expected"), [
    ({}, "nested more than 100 levels deep (PROMPT_RENDER_MAX_DEPTH)"),
    (CRASHING_SETTINGS, "the template crashed the render process (SIGSEGV)"),
])
def test_saving_the_deep_tuple_from_the_prompts_page_leaves_the_server_answering(client, app, login, engine, session,
                                                                                  settings, expected):
    app.config.update(settings)
    data = claims_prompt_edit_form(client, login, engine)
    data["template"] = DEEP_TUPLE
    response = client.post("/prompts/claims/1/edit", data=data)
    assert response.status_code == 400
    error = BeautifulSoup(response.data, "html.parser").select_one("#form-error").get_text()
    assert expected in error
    assert len(session.exec(select(PromptVersion)).all()) == 1
    assert client.get("/prompts").status_code == 200  # the same process answers the next request
    data["template"] = "Claim: {{ claim.text }}"
    assert client.post("/prompts/claims/1/edit", data=data).status_code == 303


def test_three_hundred_parentheses_from_the_prompts_page_are_a_400_naming_the_problem(client, login, engine):
    data = claims_prompt_edit_form(client, login, engine)
    data["template"] = PARENS
    response = client.post("/prompts/claims/1/edit", data=data)
    assert response.status_code == 400
    error = BeautifulSoup(response.data, "html.parser").select_one("#form-error").get_text()
    assert "template: line 1: brackets or blocks nested more than 40 deep" in error


def _prompt_new(db_url, tmp_path, template: str, **env: str) -> subprocess.CompletedProcess:
    path = tmp_path / "t.j2"
    path.write_text(template, encoding="utf-8")
    command = [sys.executable, "-m", "calibrate", "prompt", "new", "claims", "--db", db_url, "--task", "claim_support",
               "--template", str(path)]
    environ = dict(os.environ, CALIBRATE_INSTANCE=str(tmp_path / "instance"), **env)
    return subprocess.run(command, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120)


def test_prompt_new_with_the_deep_tuple_is_a_clean_error_not_a_segfault(db_url, tmp_path):
    done = _prompt_new(db_url, tmp_path, DEEP_TUPLE, CALIBRATE_PROMPT_RENDER_MAX_DEPTH=str(10**9),
                       CALIBRATE_PROMPT_RENDER_SECONDS="60")
    assert done.returncode == 2, done.stderr
    assert (done.stdout + done.stderr).strip() == "error: template refused: the template crashed the render process (SIGSEGV)"


def test_prompt_new_with_three_hundred_parentheses_is_a_clean_error(runner, tmp_path):
    path = tmp_path / "t.j2"
    path.write_text(PARENS, encoding="utf-8")
    result = runner.invoke(["prompt", "new", "claims", "--task", "claim_support", "--template", str(path)])
    assert result.exit_code == 2
    assert result.output.strip() == "error: template: line 1: brackets or blocks nested more than 40 deep"


# --------------------------------------------------------------------------- runs


def test_a_template_crashing_on_one_item_of_a_run_costs_that_item_only(engine, session, fake_llm, claims_dataset):
    claims_dataset(n_samples=3, claims_per_sample=2)
    hidden = '{% if sample_id == "s00001" %}' + DEEP_TUPLE + "{% endif %}Claim: {{ claim.text }}"
    with write_session(engine) as s:  # the save check renders sample "s": the condition is not met, it saves
        save_version(s, "claims", task="claim_support", model="fake-model", template=hidden, limits=CRASHING)
    spec = RunSpec(dataset="many", prompt="claims@1", backend="openai", base_url=fake_llm.openai_base, api_key_env="",
                   options=fast_options())
    run_id = prepare_run(engine, spec)
    summary = execute_run(engine, run_id, limits=CRASHING)
    assert summary.status == "done" and summary.n_done == 6 and summary.n_ok == 4 and summary.n_errors == 2
    crashed = session.exec(select(Sample).where(Sample.external_id == "s00001")).one()
    errors = session.exec(select(Verdict).where(Verdict.status == "error")).all()
    assert {v.sample_id for v in errors} == {crashed.id}
    assert {v.error for v in errors} == {"template refused: the template crashed the render process (SIGSEGV)"}
    assert session.get(JudgeRun, run_id).status == "done"
    assert fake_llm.stats()["requests"] == 4


def test_a_run_whose_process_died_is_shown_failed_and_resumes(engine, session, fake_llm, claims_dataset, client, login):
    claims_dataset(n_samples=2, claims_per_sample=2)
    with write_session(engine) as s:
        save_version(s, "claims", task="claim_support", model="fake-model")
    spec = RunSpec(dataset="many", prompt="claims@1", backend="openai", base_url=fake_llm.openai_base, api_key_env="",
                   options=fast_options())
    run_id = prepare_run(engine, spec)
    with write_session(engine) as s:  # what a process killed mid-run leaves: running, an old heartbeat, no process
        run = s.get(JudgeRun, run_id)
        run.status = "running"
        run.params = {**run.params, "pid": 2**22 + 1, "heartbeat": (datetime.now(UTC) - timedelta(hours=1)).isoformat()}
        s.add(run)
    login("eng", "engineer")
    page = client.get("/runs")
    assert page.status_code == 200
    session.expire_all()
    run = session.get(JudgeRun, run_id)
    assert (run.status, run.error) == ("failed", DEAD_RUN_ERROR)
    assert prepare_run(engine, spec) == run_id  # taken up again: resumable
    assert execute_run(engine, run_id).status == "done"


def test_prompt_new_with_the_deep_tuple_under_the_default_settings_is_refused_by_the_depth_bound(runner, tmp_path):
    path = tmp_path / "t.j2"
    path.write_text(DEEP_TUPLE, encoding="utf-8")
    result = runner.invoke(["prompt", "new", "claims", "--task", "claim_support", "--template", str(path)])
    assert result.exit_code == 2
    assert result.output.strip() == ("error: template refused: a list or dict builds a value nested more than 100 "
                                     "levels deep (PROMPT_RENDER_MAX_DEPTH)")
