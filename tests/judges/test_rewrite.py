"""The instruction rewrite (judges/rewrite.py): what a rewrite may not change, its reply, its prompt versioned like any
other and never run over a dataset."""

from __future__ import annotations

import json

import pytest

from calibrate.judges.parsing import parse_instructions
from calibrate.judges.render import default_templates
from calibrate.judges.rewrite import check_rewrite, constructs, reply_lines
from calibrate.judges.sandbox import DEFAULT_LIMITS

SYSTEM = default_templates("claim_support", "claim", "categorical")[0]


def test_a_rewrite_of_the_wording_is_accepted():
    new = SYSTEM.replace("You are a careful fact checker.", "You are a meticulous fact checker. Rule for dosage: check units.")
    assert check_rewrite(SYSTEM, new, target="claim", task="claim_support", limits=DEFAULT_LIMITS) is None
    assert constructs(new) == constructs(SYSTEM) and reply_lines(new) == reply_lines(SYSTEM)


@pytest.mark.parametrize("edit, code", [
    (lambda s: s, "rewrite_unchanged"),
    (lambda s: s.replace("{{ task.guidelines }}", "the guidelines"), "rewrite_fields_changed"),
    (lambda s: s + "\n{{ question }}", "rewrite_fields_changed"),
    (lambda s: s.replace("{% if examples %}", "{% if examples and examples|length > 1 %}"), "rewrite_fields_changed"),
    (lambda s: s.replace('"reason": "one sentence naming the fact that decided"', '"why": "…"'), "rewrite_reply_changed"),
])
def test_a_rewrite_that_changes_fields_blocks_or_the_reply_format_is_refused(edit, code):
    reason = check_rewrite(SYSTEM, edit(SYSTEM), target="claim", task="claim_support", limits=DEFAULT_LIMITS)
    assert reason is not None and reason.code == code, reason


def test_a_rewrite_that_is_no_valid_template_is_refused():
    broken = SYSTEM.replace("Guidelines written", "{% if x %}Guidelines written")
    reason = check_rewrite(SYSTEM, broken, target="claim", task="claim_support", limits=DEFAULT_LIMITS)
    assert reason is not None and reason.code in ("rewrite_fields_changed", "rewrite_template_refused")


def test_the_reply_is_read_from_instructions():
    assert parse_instructions(json.dumps({"instructions": "new text\r\n"})).value == "new text"
    assert parse_instructions('Here you go: {"instructions": "x"}').value == "x"
    assert parse_instructions('{"verdict": "supported"}').status == "unparsed"
    assert parse_instructions(json.dumps({"instructions": "x" * 100_001})).status == "unparsed"


def test_its_prompt_is_versioned_like_any_other_and_never_run_over_a_dataset(runner, tmp_path, make_sample):
    make_sample(dataset="d", external_id="s1", answer="One. Two.")
    system = tmp_path / "rewriter.txt"
    system.write_text("Improve {{ task.name }}.", encoding="utf-8")
    template = tmp_path / "item.txt"
    template.write_text("{{ instructions }}\n{% for d in disagreements %}{{ d.text }} {{ d.gold }}{% endfor %}", encoding="utf-8")
    made = runner.invoke(["prompt", "new", "rw", "--task", "instruction_rewrite", "--system", str(system),
                          "--template", str(template)])
    assert made.exit_code == 0 and made.stdout.strip() == "rw@1"
    bad = tmp_path / "bad.txt"
    bad.write_text("{{ question }}", encoding="utf-8")
    refused = runner.invoke(["prompt", "new", "rw", "--template", str(bad)])
    assert refused.exit_code == 2 and "question" in refused.stderr
    shots = runner.invoke(["prompt", "new", "rw", "--few-shot", "s1"])
    assert shots.exit_code == 2 and "few-shot examples are not supported for the task instruction_rewrite" in shots.stderr
    run = runner.invoke(["judge", "run", "--dataset", "d", "--prompt", "rw@1"])
    assert run.exit_code == 2 and "is never run over a dataset" in run.stderr
