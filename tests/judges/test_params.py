"""Version parameters (issue 14, finding 9): checked by name against each backend's allowlist with
caps — refused at save time (domain, CLI, web form) and when a run starts — and documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from judge_helpers import fast_options
from prompt_helpers import claims_prompt_edit_form
from sqlmodel import select

from calibrate.db import write_session
from calibrate.judges import PromptError, RunSetupError, RunSpec, prepare_run, save_version
from calibrate.judges.params import MODEL_PARAMS
from calibrate.models import Prompt, PromptVersion, Task

DOCS = Path(__file__).resolve().parents[2] / "docs" / "judges.md"


@pytest.mark.parametrize(("params", "message"), [
    ({"n": 64}, "params: n must be 1, got 64"),
    ({"max_tokens": 100_000}, "params: max_tokens must be a whole number from 1 to 16,384, got 100000"),
    ({"max_tokens": 0}, "params: max_tokens must be a whole number from 1 to 16,384, got 0"),
    ({"max_tokens": 12.5}, "params: max_tokens must be a whole number"),
    ({"temperature": 3}, "params: temperature must be a number from 0 to 2, got 3"),
    ({"temperature": "hot"}, "params: temperature must be a number from 0 to 2, got 'hot'"),
    ({"top_p": 1.5}, "params: top_p must be a number from 0 to 1"),
    ({"seed": 2**70}, "params: seed must be a whole number"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "params: stop must be a string or a list of 1 to 4 strings"),
    ({"stop_sequences": "END"}, "params: stop_sequences must be a list of 1 to 4 strings"),
    ({"presence_penalty": -3}, "params: presence_penalty must be a number from -2 to 2"),
    ({"top_k": 0}, "params: top_k must be a whole number from 1 to 500"),
    ({"response_format": {"type": "xml"}}, "params: response_format must be an object with \"type\""),
    ({"logit_bias": {"50256": -100}}, "params: 'logit_bias' is not a parameter calibrate sends (allowed: "),
    ({"tools": []}, "params: 'tools' is not a parameter calibrate sends"),
    ({"stream": True}, "params: 'stream' is set by calibrate, not a parameter"),
    ({"json_mode": "no"}, "params: json_mode must be true or false"),
    ({"baseline.nope": 1}, "params: unknown baseline parameter(s): baseline.nope"),
    ({"n_questions": 3}, "params: 'n_questions' is not a parameter calibrate sends"),  # answer relevancy's only
])
def test_a_parameter_outside_the_allowlist_or_its_cap_is_refused_by_name(session, params, message):
    with pytest.raises(PromptError) as caught:
        save_version(session, "p", task="claim_support", params=params)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert session.exec(select(PromptVersion)).all() == []


def test_parameters_within_their_caps_are_saved(session):
    params = {"temperature": 2, "top_p": 0.9, "max_tokens": 16_384, "n": 1, "seed": 7, "stop": "\n\n",
              "presence_penalty": -2, "frequency_penalty": 0.5, "response_format": {"type": "json_object"},
              "json_mode": False, "baseline.min_overlap": 0.4, "top_k": 40, "stop_sequences": ["END"]}
    assert save_version(session, "p", task="claim_support", params=params).version.params == params
    relevancy = {"n_questions": 5, "embedder": "tfidf", "embedding_model": "text-embedding-3-small"}
    assert save_version(session, "r", task="answer_relevancy", params=relevancy).created


def test_the_cli_refuses_a_parameter_with_one_line(runner, session):
    result = runner.invoke(["prompt", "new", "claims", "--task", "claim_support", "--model", "m", "--param", "n=64"])
    assert result.exit_code == 2 and result.output == "error: params: n must be 1, got 64\n"
    result = runner.invoke(["prompt", "new", "claims", "--task", "claim_support", "--param", "max_tokens=100000"])
    assert result.exit_code == 2 and result.output.startswith("error: params: max_tokens must be a whole number from 1 to 16,384")
    assert session.exec(select(Prompt)).all() == []
    assert runner.invoke(["prompt", "new", "claims", "--task", "claim_support", "--param", "max_tokens=512"]).exit_code == 0


def test_the_web_form_refuses_a_parameter_naming_it(client, login, engine, session):
    data = claims_prompt_edit_form(client, login, engine)
    data["params"] = "temperature=0\nn=64"
    response = client.post("/prompts/claims/1/edit", data=data)
    assert response.status_code == 400
    assert BeautifulSoup(response.data, "html.parser").select_one("#form-error").get_text().strip() == "params: n must be 1, got 64"
    assert len(session.exec(select(PromptVersion)).all()) == 1


def _stored(engine, name, params):
    """Store a version as an older calibrate did, without the checks (params went into every request)."""
    with write_session(engine) as s:
        task = s.exec(select(Task).where(Task.name == "claim_support")).one()
        prompt = Prompt(name=name, task_id=task.id)
        s.add(prompt)
        s.flush()
        s.add(PromptVersion(prompt_id=prompt.id, number=1, template="{{ claim.text }}", system="", model="fake-model",
                            params=params, content_hash=name))
    return f"{name}@1"


@pytest.mark.parametrize(("backend", "params", "message"), [
    ("openai", {"n": 64}, "params: n must be 1 on the openai backend, got 64"),
    ("openai", {"logit_bias": {"1": 5}}, "params: 'logit_bias' is not a parameter calibrate sends"),
    ("openai", {"top_k": 5}, "params: the openai backend does not take 'top_k' (anthropic only)"),
    ("anthropic", {"seed": 1}, "params: the anthropic backend does not take 'seed' (openai only)"),
    ("anthropic", {"temperature": 1.5}, "params: temperature must be a number from 0 to 1 on the anthropic backend, got 1.5"),
])
def test_a_run_never_sends_a_parameter_its_backend_does_not_take(engine, fake_llm, claims_dataset, backend, params, message):
    claims_dataset(n_samples=2, claims_per_sample=1)
    prompt = _stored(engine, "old", params)
    base = fake_llm.openai_base if backend == "openai" else fake_llm.anthropic_base
    with pytest.raises(RunSetupError) as caught:
        prepare_run(engine, RunSpec(dataset="many", prompt=prompt, backend=backend, base_url=base, api_key_env="",
                                    options=fast_options()))
    assert str(caught.value).startswith(message)
    assert fake_llm.stats()["requests"] == 0


def test_the_documented_table_lists_every_parameter():
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("### Parameters"):]
    section = section[:section.index("\n## ")]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE))
    assert documented == set(MODEL_PARAMS)
