"""Template limits (issue 14, finding 1): every render has a time and a size limit, amplifying
operations are refused before they allocate, the render context cannot be mutated, and the
save-time trial render runs before the write lock is taken. No clock in the assertions: a
limit is shown by the refusal naming it, memory by tracemalloc's peak."""

from __future__ import annotations

import tracemalloc

import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner
from judge_helpers import fast_options
from sqlite_helpers import write_lock_is_free
from sqlmodel import select

from calibrate.cli import cli
from calibrate.db import write_session
from calibrate.judges import RunSpec, run_judge, save_version, versions
from calibrate.judges.errors import PromptError, RenderError
from calibrate.judges.render import Renderer, check_template, environment, sample_context, sample_version_context
from calibrate.judges.sandbox import DEFAULT_LIMITS, Limits, render
from calibrate.models import PromptVersion, Sample, Verdict

FAST = Limits(seconds=0.2)
TIME = "PROMPT_RENDER_SECONDS"
SIZE = "PROMPT_RENDER_MAX_CHARS"


def refused_while_measuring(source: str, *, limits: Limits = DEFAULT_LIMITS) -> tuple[str, int]:
    """Return the PromptError of a save-time check of `source` and the peak memory the check allocated."""
    tracemalloc.start()
    try:
        with pytest.raises(PromptError) as info:
            check_template(source, target="claim", part="template", limits=limits)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return str(info.value), peak


# --------------------------------------------------------------------------- the two findings


def test_nested_loops_that_would_run_for_minutes_are_stopped_by_the_time_limit():
    # 10,000 × 10,000 empty iterations: over a minute without a limit (the finding: 100,000 × 3,000, 18.8 s).
    source = "{% for a in range(10000) %}{% for b in range(10000) %}{% endfor %}{% endfor %}"
    message, _ = refused_while_measuring(source, limits=FAST)
    assert message == "template refused: rendering took longer than the 0.2 s limit (PROMPT_RENDER_SECONDS)"


def test_the_finding_loop_is_refused_by_the_range_limit():
    source = "{% for a in range(100000) %}{% for b in range(3000) %}{% endfor %}{% endfor %}"
    message, _ = refused_while_measuring(source)
    assert message.startswith("template refused: range() of 100,000 numbers")


def test_padding_half_a_billion_characters_is_refused_without_allocating_them():
    message, peak = refused_while_measuring("{{ (question.center(500000000) ~ '')|length }}")
    assert message.startswith("template refused: center(500000000) would build 500,000,000 characters")
    assert SIZE in message
    assert peak < 20_000_000  # the refusal comes before the allocation (which took the process to 2.1 GB)


def test_loops_over_data_that_make_no_call_are_stopped_too():
    # Three nested loops over a 1,000-character question: 10⁹ steps, no call, no output.
    renderer = Renderer("", "{% for a in question %}{% for b in question %}{% for c in question %}"
                            "{% endfor %}{% endfor %}{% endfor %}{{ claim.text }}", {}, FAST)
    with pytest.raises(RenderError, match=TIME):
        renderer.render(dict(sample_context("claim", with_version=False), question="q" * 1000))


# --------------------------------------------------------------------------- every amplifier


@pytest.mark.parametrize("source", [
    "{{ 'x' * 1000000000 }}",
    "{{ ['x'] * 1000000000 }}",
    "{{ question.ljust(1000000000) }}",
    "{{ question.zfill(1000000000) }}",
    "{{ question|center(1000000000) }}",
    "{{ question|indent(1000000000) }}",
    "{{ '%1000000000s' % question }}",
    "{{ '%.1000000000f' % 1.5 }}",
    "{{ '%1000000000s'|format(question) }}",
    "{{ '{:>1000000000}'.format(question) }}",
    "{{ '{0:{1}}'.format(question, 1000000000) }}",
    "{{ '{x:>1000000000}'.format_map({'x': question}) }}",
    "{{ ('x' * 1000)|replace('x', 'y' * 100000) }}",
    "{{ ('x' * 1000).replace('', 'y' * 10000) }}",
    "{{ 'a\tb'.expandtabs(1000000000) }}",
    "{{ ('a' * 1000).translate({97: 'b' * 100000}) }}",
    "{{ ('x' * 100000).join(['a'] * 1000) }}",
    "{{ ['a']|join('x' * 100000) ~ ([question] * 10000)|join('x' * 1000) }}",
    "{{ ('x ' * 1000)|wordwrap(1, wrapstring='y' * 100000) }}",
    "{{ [1]|batch(1000000000, 'x')|list }}",
    "{{ [1]|slice(1000000000)|list }}",
    "{{ range(10000)|list|tojson(indent=1000) }}",
    "{{ lipsum(100000) }}",
    "{{ (1).to_bytes(1000000000, 'big') }}",
    "{% set ns = namespace(s=question) %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    "{% set ns = namespace(s=question) %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
    "{% set ns = namespace(s='\"') %}{% for i in range(64) %}{% set ns.s = ns.s|tojson %}{% endfor %}",
    "{% set ns = namespace(l=[question]) %}{% for i in range(64) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}",
    "{% set ns = namespace(l=(question,)) %}{% for i in range(64) %}{% set ns.l = (ns.l, ns.l) %}{% endfor %}",
    "{% set ns = namespace(l={}) %}{% for i in range(64) %}{% set ns.l = dict(a=ns.l, b=ns.l) %}{% endfor %}",
    "{{ range(10000)|map('center', 200000)|list|length }}",
    "{% set s %}{% for i in range(10000) %}{{ question.center(100000) }}{% endfor %}{% endset %}{{ s|length }}",
])
def test_operations_that_build_more_than_the_limit_allows_are_refused_before_they_allocate(source):
    message, peak = refused_while_measuring(source)
    assert message.startswith("template refused:") and SIZE in message
    assert peak < 100_000_000  # the work budget is 4,000,000 characters: nothing near the gigabytes asked for


@pytest.mark.parametrize("source", ["{{ 9 ** 100000 }}", "{{ (2 ** 6000) * (2 ** 6000) }}"])
def test_numbers_too_large_to_compute_quickly_are_refused(source):
    message, _ = refused_while_measuring(source)
    assert "bits" in message


def test_the_output_is_limited_and_the_refusal_names_the_setting():
    renderer = Renderer("", "{% for c in contexts %}{{ c.text }}{% endfor %}", {}, Limits(max_chars=5_000))
    item = dict(sample_context("claim", with_version=False), contexts=[{"rank": i, "text": "y" * 1000, "doc_id": ""} for i in range(10)])
    with pytest.raises(RenderError, match=f"template refused: the rendered text is longer than the 5,000-character limit \\({SIZE}\\)"):
        renderer.render(item)
    item["contexts"] = item["contexts"][:4]
    assert len(renderer.render(item).user) == 4000


def test_recursion_is_reported_not_raised():
    # The save-time field check already refuses a macro that calls itself; the sandbox does not rely on it.
    template = environment().from_string("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}")
    with pytest.raises(RenderError, match="recurses too deeply"):
        render(template, {}, Limits())


# --------------------------------------------------------------------------- what must keep working


def test_ordinary_templates_render_as_before():
    source = ("{% set n = contexts|length %}{% for c in contexts|sort(attribute='rank') %}[{{ loop.index }}/{{ loop.length }}] "
              "{{ c.text|trim|truncate(20) }}{% endfor %} {{ '%5.2f'|format(3.14159) }} {{ '{:>4}|{}'.format('a', n) }} "
              "{{ [1, 2]|join(',') }} {{ range(3)|sum }} {{ (question ~ '!')|upper }} {{ claim.text|center(9) }} "
              "{{ {'a': 1}|tojson }} {{ task.labels|map('upper')|join('/') }}")
    check_template(source, target="claim", part="template")
    renderer = Renderer("", source, sample_version_context("claim"))
    item = dict(sample_context("claim", with_version=False), question="Why?", claim={"index": 0, "text": "abc"},
                contexts=[{"rank": 1, "text": " second ", "doc_id": ""}, {"rank": 0, "text": "first", "doc_id": ""}])
    assert renderer.render(item).user == "[1/2] first[2/2] second  3.14    a|2 1,2 3 WHY?!    abc    {\"a\": 1} A/B"


# --------------------------------------------------------------------------- shared render context


def test_a_template_cannot_mutate_the_context_other_items_share():
    with pytest.raises(PromptError, match="unsafe"):
        check_template("{{ task.labels.append('x') }}", target="claim", part="template")
    version = sample_version_context("claim")
    renderer = Renderer("", "{{ task.labels.append('x') }}{{ metadata.update({'a': 1}) }}{{ claim.text }}", version)
    with pytest.raises(RenderError, match="unsafe"):
        renderer.render(sample_context("claim", with_version=False))
    assert version["task"]["labels"] == ["a", "b"]


# --------------------------------------------------------------------------- the save path and runs


@pytest.fixture
def lock_during_checks(monkeypatch, db_url):
    """Record, at every save-time template check, whether another writer could take the write lock."""
    seen: list[bool] = []
    real = versions.check_template

    def spy(*args, **kwargs):
        seen.append(write_lock_is_free(db_url))
        return real(*args, **kwargs)

    monkeypatch.setattr(versions, "check_template", spy)
    return seen


def test_the_cli_renders_the_template_before_taking_the_write_lock(runner, app, tmp_path, session, lock_during_checks):
    app.config["PROMPT_RENDER_SECONDS"] = 0.2
    template = tmp_path / "t.j2"
    template.write_text("{% for a in range(10000) %}{% for b in range(10000) %}{% endfor %}{% endfor %}{{ claim.text }}")
    result = runner.invoke(["prompt", "new", "claims", "--task", "claim_support", "--template", str(template)])
    assert result.exit_code == 2
    assert result.output == "error: template refused: rendering took longer than the 0.2 s limit (PROMPT_RENDER_SECONDS)\n"
    assert lock_during_checks and all(lock_during_checks)  # annotators' saves go on meanwhile
    assert session.exec(select(PromptVersion)).all() == []
    template.write_text("Question: {{ question }}\nClaim: {{ claim.text }}")
    assert runner.invoke(["prompt", "new", "claims", "--task", "claim_support", "--template", str(template)]).output == "claims@1\n"
    assert all(lock_during_checks)


def test_the_web_form_renders_the_template_before_taking_the_write_lock(client, app, login, engine, session, lock_during_checks):
    with write_session(engine) as s:
        save_version(s, "claims", task="claim_support", model="m1")
    lock_during_checks.clear()
    app.config["PROMPT_RENDER_MAX_CHARS"] = 1_000
    login("eng", "engineer")
    form = BeautifulSoup(client.get("/prompts/claims/1/edit").data, "html.parser").select_one("#version-form")
    data = {t["name"]: t.get_text() for t in form.select("textarea")}
    data.update({i["name"]: i.get("value", "") for i in form.select("input")})
    data["template"] = "{{ question.center(100000) }}{{ claim.text }}"
    response = client.post("/prompts/claims/1/edit", data=data)
    assert response.status_code == 400
    error = BeautifulSoup(response.data, "html.parser").select_one("#form-error").get_text()
    assert "template refused" in error and SIZE in error
    assert lock_during_checks and all(lock_during_checks)
    assert len(session.exec(select(PromptVersion)).all()) == 1


def _run_with_long_questions(engine, session, fake_llm, claims_dataset, claims_prompt, *, n_samples: int, long: set[str]):
    """Run a claims prompt showing the question, at a 2,000-character limit, where the samples `long` ask 3,000 characters."""
    claims_dataset(n_samples=n_samples, claims_per_sample=2)
    for sample in session.exec(select(Sample).where(Sample.external_id.in_(long))).all():
        sample.question = "q" * 3000
        session.add(sample)
    session.commit()
    prompt = claims_prompt(template="Question: {{ question }}\nClaim: {{ claim.text }}")
    spec = RunSpec(dataset="many", prompt=prompt, backend="openai", base_url=fake_llm.openai_base, api_key_env="",
                   options=fast_options())
    return run_judge(engine, spec, limits=Limits(max_chars=2_000))


def test_a_render_that_hits_a_limit_in_a_run_is_that_items_error(engine, session, fake_llm, claims_dataset, claims_prompt):
    summary = _run_with_long_questions(engine, session, fake_llm, claims_dataset, claims_prompt, n_samples=4, long={"s00002"})
    long = session.exec(select(Sample).where(Sample.external_id == "s00002")).one()
    assert summary.status == "done" and summary.n_done == 8 and summary.n_errors == 2 and summary.n_ok == 6
    errors = session.exec(select(Verdict).where(Verdict.status == "error")).all()
    assert {v.sample_id for v in errors} == {long.id}
    assert all(v.error == "template refused: the rendered text is longer than the 2,000-character limit "
                          "(PROMPT_RENDER_MAX_CHARS)" for v in errors)
    assert fake_llm.stats()["requests"] == 6  # the refused items were never sent


def test_a_metric_step_that_hits_a_limit_makes_its_samples_verdict_an_error(engine, session, make_sample, fake_llm):
    make_sample(external_id="s1", claims=["Tome 0,4 mg al día.", "Tome 4 mg al día."])
    make_sample(external_id="s2", claims=["Corto.", "Largo " * 1000])
    with write_session(engine) as s:
        save_version(s, "faith", task="faithfulness", model="fake-model", template="Claim to check: {{ claim.text }}")
    spec = RunSpec(dataset="d", prompt="faith@1", backend="openai", base_url=fake_llm.openai_base, api_key_env="",
                   options=fast_options())
    summary = run_judge(engine, spec, limits=Limits(max_chars=3_000))  # the system text is about 1,000
    assert summary.status == "done" and summary.n_ok == 1 and summary.n_errors == 1
    session.rollback()
    verdicts = {v.sample_id: v for v in session.exec(select(Verdict)).all()}
    errors = [v for v in verdicts.values() if v.status == "error"]
    assert len(errors) == 1 and "PROMPT_RENDER_MAX_CHARS" in errors[0].error
    assert fake_llm.stats()["requests"] == 2  # s1's two claims; none of s2's steps was sent


def test_a_run_whose_first_items_all_fail_to_render_the_same_way_stops_before_any_call(
        engine, session, fake_llm, claims_dataset, claims_prompt):
    every = {f"s{i:05d}" for i in range(6)}
    summary = _run_with_long_questions(engine, session, fake_llm, claims_dataset, claims_prompt, n_samples=6, long=every)
    assert summary.status == "failed"
    assert summary.error.startswith("the first 10 items all failed to render with the same error, so the run stopped "
                                    "before any call: template refused: the rendered text is longer than the 2,000-character")
    assert fake_llm.stats()["requests"] == 0
    assert session.exec(select(Verdict)).all() == []


def test_the_command_line_reads_the_limits_from_the_settings(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("CALIBRATE_INSTANCE", str(tmp_path / "instance"))
    monkeypatch.setenv("CALIBRATE_PROMPT_RENDER_MAX_CHARS", "300")
    template = tmp_path / "t.j2"
    template.write_text("{{ question }} {{ claim.text }} " + "x" * 400)
    result = CliRunner().invoke(cli, ["prompt", "new", "claims", "--task", "claim_support", "--template", str(template),
                                      "--db", db_url])
    assert result.exit_code == 2
    assert "longer than the 300-character limit (PROMPT_RENDER_MAX_CHARS)" in result.output
