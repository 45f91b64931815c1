"""Prompt versions: content-hashed, immutable, numbered; few-shots from human gold, never from test."""

from __future__ import annotations

import pytest
from sqlmodel import select

from calibrate.errors import NotFound
from calibrate.judges import FewShotSpec, PromptError, resolve_version, save_version
from calibrate.judges.versions import diff_versions, parse_params, parse_ref, side_by_side
from calibrate.models import FewShot, Label, PromptVersion, Task


@pytest.fixture
def labelled(session, make_sample, make_user):
    """Two samples (train and test) with claims labelled by two annotators."""
    train = make_sample(external_id="s1", claims=["Tome 4 mg.", "Espere."], split="train")
    test = make_sample(external_id="s2", claims=["Tome 0,4 mg."], split="test")
    task = session.exec(select(Task).where(Task.name == "claim_support")).one()
    ana, bea = make_user("ana"), make_user("bea")
    from calibrate.models import Claim

    claims = {(c.sample_id, c.index): c for c in session.exec(select(Claim)).all()}
    for sample, index, who, value, why in [(train, 0, ana, "unsupported", "0,4 mg, not 4"), (train, 0, bea, "unsupported", ""),
                                           (train, 1, ana, "supported", ""), (train, 1, bea, "unsupported", ""),
                                           (test, 0, ana, "supported", "")]:
        claim = claims[(sample.id, index)]
        session.add(Label(task_id=task.id, sample_id=sample.id, claim_id=claim.id, target_key=f"claim:{claim.id}",
                          annotator_id=who.id, value=value, rationale=why))
    session.commit()
    return claims


def test_saving_identical_content_creates_nothing(session):
    first = save_version(session, "p", task="claim_support", model="m")
    again = save_version(session, "p", model="m")
    assert first.created and not again.created and again.version.id == first.version.id
    assert again.line("p") == "p@1 (unchanged: identical to version 1)"
    edited = save_version(session, "p", model="m2", note="bigger model")
    assert edited.created and edited.version.number == 2 and edited.version.parent_id == first.version.id
    assert edited.version.content_hash != first.version.content_hash
    back = save_version(session, "p", model="m")  # content equal to version 1: that version, not a third
    assert not back.created and back.version.number == 1
    assert len(session.exec(select(PromptVersion)).all()) == 2


def test_line_endings_do_not_change_the_hash(session):
    a = save_version(session, "p", task="claim_support", template="Q: {{ question }}\nC: {{ claim.text }}")
    b = save_version(session, "p", template="Q: {{ question }}\r\nC: {{ claim.text }}\r\n")
    assert not b.created and b.version.id == a.version.id


def test_few_shots_carry_the_human_gold_and_rationale(session, labelled):
    result = save_version(session, "p", task="claim_support", few_shots=[FewShotSpec("s1:0")])
    shots = session.exec(select(FewShot).where(FewShot.version_id == result.version.id)).all()
    assert [(s.value, s.rationale, s.order) for s in shots] == [("unsupported", "0,4 mg, not 4", 0)]
    with_note = save_version(session, "p", few_shots=[FewShotSpec("s1:0", "the dose is ten times too high")])
    assert with_note.created  # the rationale is content


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("s2:0", "test split"),
        ("s1:1", "disagree"),
        ("s1:5", "has no claim 5"),
        ("s1", "SAMPLE:N"),
        ("nope:0", "no sample 'nope'"),
        ("s1:x", "not a 0-based index"),
    ],
)
def test_bad_few_shots_are_refused(session, labelled, ref, message):
    with pytest.raises(PromptError, match=message):
        save_version(session, "p", task="claim_support", few_shots=[FewShotSpec(ref)])


def test_a_new_prompt_needs_a_task_and_a_valid_name(session):
    with pytest.raises(PromptError, match="give its task"):
        save_version(session, "p")
    with pytest.raises(PromptError, match="prompt name"):
        save_version(session, "bad@name", task="claim_support")
    with pytest.raises(NotFound, match="unknown task"):
        save_version(session, "p", task="nope")


def test_refs_and_params():
    assert parse_ref("claims@3") == ("claims", 3) and parse_ref("claims") == ("claims", None)
    with pytest.raises(PromptError):
        parse_ref("claims@x")
    assert parse_params(["temperature=0.2", "max_tokens=300", "stop=[\"\\n\"]", "name=gpt"]) == \
        {"temperature": 0.2, "max_tokens": 300, "stop": ["\n"], "name": "gpt"}
    with pytest.raises(PromptError, match="key=value"):
        parse_params(["oops"])


def test_resolving_versions_names_what_exists(session):
    save_version(session, "p", task="claim_support")
    assert resolve_version(session, "p")[1].number == 1
    with pytest.raises(NotFound, match=r"no version 4 \(versions: 1\)"):
        resolve_version(session, "p@4")
    with pytest.raises(NotFound, match=r"unknown prompt 'q' \(prompts: p\)"):
        resolve_version(session, "q@1")


def test_side_by_side_diff_rows():
    rows = side_by_side("a\nb\nc", "a\nB\nc\nd")
    assert [(r.tag, r.left, r.right) for r in rows] == [("equal", "a", "a"), ("replace", "b", "B"), ("equal", "c", "c"),
                                                         ("insert", "", "d")]


def test_diff_names_the_changed_fields(session, labelled):
    a = save_version(session, "p", task="claim_support").version
    b = save_version(session, "p", few_shots=[FewShotSpec("s1:0")], params={"temperature": 0.5}).version
    prompt = session.get(__import__("calibrate.models", fromlist=["Prompt"]).Prompt, a.prompt_id)
    diff = diff_versions(session, prompt, a, b)
    assert diff.changed == ["params", "few-shots"]
    assert diff.fields["few-shots"][0].right.startswith("s1:0 = unsupported")
