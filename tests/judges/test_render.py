"""Templates: sandboxed, checked at save time (unknown fields named), defaults valid, cache-friendly."""

from __future__ import annotations

import pytest

from calibrate.judges.errors import PromptError
from calibrate.judges.render import Renderer, check_template, default_templates, sample_context, sample_version_context


@pytest.mark.parametrize("task,target", [("claim_support", "claim"), ("answer_quality", "sample"),
                                         ("context_relevance", "context"), ("custom", "sample"), ("custom", "claim"),
                                         ("custom", "context")])
def test_the_built_in_templates_pass_their_own_check(task, target):
    system, template = default_templates(task, target)
    check_template(system, target=target, part="system")
    check_template(template, target=target, part="template")


@pytest.mark.parametrize(
    ("source", "target", "part", "named"),
    [
        ("{{ question }} {{ claim.txt }}", "claim", "template", "claim.txt"),
        ("{{ quesiton }}", "claim", "template", "quesiton"),
        ("{% for c in contexts %}{{ c.body }}{% endfor %}", "claim", "template", "c.body"),
        ("{{ claim.text }}", "sample", "template", "claim"),
        ("{{ context.text }}", "claim", "template", "context"),
        ("{{ task.rubric }}", "claim", "system", "task.rubric"),
        ("{% for e in examples %}{{ e.verdit }}{% endfor %}", "claim", "system", "e.verdit"),
        ("{{ claim['txt'] }}", "claim", "template", "claim.txt"),
    ],
)
def test_an_unknown_field_is_refused_at_save_time_with_its_name(source, target, part, named):
    with pytest.raises(PromptError, match=f"'{named}'"):
        check_template(source, target=target, part=part)


def test_the_system_text_cannot_use_item_fields():
    with pytest.raises(PromptError, match="item field.*same for every item"):
        check_template("Judge this: {{ claim.text }}", target="claim", part="system")


@pytest.mark.parametrize("source", ["{{ question", "{% for x in contexts %}", "{{ question | nofilter }}"])
def test_syntax_errors_are_refused(source):
    with pytest.raises(PromptError, match="template"):
        check_template(source, target="claim", part="template")


@pytest.mark.parametrize("source", ["{{ question.__class__.__mro__ }}", "{{ ''.__class__.__subclasses__() }}",
                                    "{{ contexts.__init__.__globals__ }}"])
def test_the_sandbox_refuses_python_internals(source):
    with pytest.raises(PromptError):
        check_template(source, target="claim", part="template")


def test_loops_sets_macros_and_metadata_are_allowed():
    check_template("{% set n = contexts|length %}{% for c in contexts %}[{{ loop.index }}] {{ c.text }} {{ c.rank }}{% endfor %}"
                   "{% macro q(x) %}{{ x }}{% endmacro %}{{ q(question) }} {{ metadata.topic }} {{ n }}",
                   target="claim", part="template")


def test_rendering_puts_the_shared_prefix_first_and_the_item_last():
    system, template = default_templates("claim_support", "claim")
    renderer = Renderer(system, template, sample_version_context("claim"))
    a = renderer.render(dict(sample_context("claim", with_version=False), claim={"index": 0, "text": "Claim A"}))
    b = renderer.render(dict(sample_context("claim", with_version=False), claim={"index": 1, "text": "Claim B"}))
    assert a.system == b.system and "Example 1" in a.system
    assert a.user.endswith("Claim to check: Claim A") and b.user.endswith("Claim to check: Claim B")


def test_a_missing_metadata_key_renders_empty():
    renderer = Renderer("", "[{{ metadata.lang }}]", {})
    assert renderer.render(sample_context("sample", with_version=False)).user == "[]"
