"""The item view: cells per task and target, widgets and keys by task kind, completeness, blind rules."""

from __future__ import annotations

import pytest
from sqlmodel import select

from calibrate.annotation import NotFound
from calibrate.annotation.guidelines import rubric_levels, save_guideline
from calibrate.annotation.items import build_item, context_pieces, get_assignment, widget_for
from calibrate.annotation.labels import resolve_target, save_label
from calibrate.annotation.review import may_review, others_on
from calibrate.models import Guideline, Judge, Label, Verdict
from calibrate.tasks import add_task
from calibrate.text.sentences import segment


def test_cells_in_keyboard_order_claims_then_answer_then_contexts(work, session):
    ana = work.user()
    sample = work.sample()
    item = build_item(session, work.assign(sample, ana), ana)
    assert [(c.task.name, c.where) for c in item.cells] == [
        ("claim_support", "claim 1"), ("claim_support", "claim 2"), ("claim_support", "claim 3"),
        ("answer_quality", "the answer"),
        ("context_relevance", "context #1"), ("context_relevance", "context #2"),
    ]
    assert [c.required for c in item.cells] == [True] * 4 + [False] * 2
    assert [t.name for t, _ in item.guidelines] == ["claim_support", "answer_quality", "context_relevance"]


def test_custom_tasks_join_their_targets(work, session):
    add_task(session, "preference", target="sample", kind="categorical", labels=["A", "B", "tie"])
    add_task(session, "severity", target="claim", kind="ordinal", scale=(0, 3))
    add_task(session, "confidence", target="context", kind="continuous", scale=(0, 1))
    session.commit()
    ana = work.user()
    sample = work.sample(claims=("Uno.",), contexts=("x",))
    item = build_item(session, work.assign(sample, ana), ana)
    assert [(c.task.name, c.target, c.widget.kind, c.required) for c in item.cells] == [
        ("claim_support", "claim", "choices", True), ("severity", "claim", "choices", False),
        ("answer_quality", "sample", "choices", True), ("preference", "sample", "choices", False),
        ("context_relevance", "context", "choices", False), ("confidence", "context", "number", False),
    ]
    item = build_item(session, item.assignment, ana, required=("claim_support", "preference"))
    assert [c.task.name for c in item.status.missing] == ["claim_support", "preference"]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"name": "claim_support"}, [("supported", "Supported", ("1", "s")), ("unsupported", "Unsupported", ("2", "x")),
                                     ("not_applicable", "Not a claim", ("3", "n"))]),
        ({"name": "context_relevance"}, [("relevant", "Relevant", ("1", "y")), ("not_relevant", "Not relevant", ("2", "n"))]),
        ({"name": "pairwise", "target": "sample", "kind": "categorical", "labels": ["A", "B", "no_preference"]},
         [("A", "A", ("1",)), ("B", "B", ("2",)), ("no_preference", "no preference", ("3",))]),
        ({"name": "grade", "target": "sample", "kind": "ordinal", "scale": (0, 2)},
         [("0", "0", ("0",)), ("1", "1", ("1",)), ("2", "2", ("2",))]),
    ],
)
def test_widgets_and_keys_by_task(session, work, spec, expected):
    if spec["name"] in ("claim_support", "context_relevance"):
        task = work.task(spec["name"])
    else:
        task = add_task(session, spec.pop("name"), **spec)
    widget = widget_for(task, None)
    assert widget.kind == "choices"
    assert [(c.value, c.text, c.keys) for c in widget.choices] == expected


@pytest.mark.parametrize(("kind", "scale", "step"), [("ordinal", (1, 10), "1"), ("ordinal", (-2, 2), "1"), ("continuous", None, "any")])
def test_scales_without_single_digit_keys_get_a_number_field(session, kind, scale, step):
    task = add_task(session, "score", target="sample", kind=kind, scale=scale)
    widget = widget_for(task, None)
    assert (widget.kind, widget.step, widget.low, widget.high) == ("number", step, scale[0] if scale else None, scale[1] if scale else None)


def test_answer_quality_buttons_carry_the_rubric_text(work, session):
    task = work.task("answer_quality")
    guideline = session.exec(select(Guideline).where(Guideline.task_id == task.id)).one()
    widget = widget_for(task, guideline)
    assert [c.value for c in widget.choices] == ["1", "2", "3", "4", "5"]
    assert widget.choices[4].hint == "correct, complete and fully grounded in the contexts."


@pytest.mark.parametrize(
    ("text", "levels"),
    [
        ("5: excelente\n4: bueno", {"5": "excelente", "4": "bueno"}),
        ("  3) regular \n2 - malo\n1. pésimo", {"3": "regular", "2": "malo", "1": "pésimo"}),
        ("Intro line\n5:sin espacio no cuenta\n10: diez", {"10": "diez"}),
        ("", {}),
    ],
)
def test_rubric_levels(text, levels):
    assert rubric_levels(text) == levels


def test_outdated_and_stale_labels_must_be_confirmed_before_submitting(work, session):
    ana = work.user()
    sample = work.sample(claims=("Uno.",))
    assignment = work.assign(sample, ana)
    claim = work.claims(sample)[0]
    save_label(session, assignment, ana, resolve_target(session, assignment, "claim_support", f"claim:{claim.id}"), value="supported")
    quality = save_label(session, assignment, ana, resolve_target(session, assignment, "answer_quality", f"sample:{sample.id}"), value=5)
    assert build_item(session, assignment, ana).status.submittable
    save_guideline(session, work.task("claim_support"), "v2: más estricta", ana)
    quality = session.get(Label, quality.id)
    quality.stale, quality.stale_reason = True, "the answer changed"
    session.add(quality)
    session.flush()
    status = build_item(session, assignment, ana).status
    assert status.complete and not status.submittable
    assert [c.state for c in status.to_confirm] == ["outdated", "outdated"]
    assert "confirm claim 1, the answer" in status.explain()[0]


def test_someone_elses_assignment_is_not_found(work, session):
    ana, bea = work.user("ana"), work.user("bea")
    theirs = work.assign(work.sample(), bea)
    with pytest.raises(NotFound):
        get_assignment(session, ana, theirs.id)
    with pytest.raises(NotFound):
        get_assignment(session, ana, 99999)


# --------------------------------------------------------------------------- blind rules


@pytest.fixture
def reviewed_item(work, session):
    """An item labelled by bea and judged, opened by a user of each role."""
    bea = work.user("bea")
    sample = work.sample(claims=("Uno.",), contexts=("x",))
    theirs = work.assign(sample, bea)
    claim = work.claims(sample)[0]
    save_label(session, theirs, bea, resolve_target(session, theirs, "claim_support", f"claim:{claim.id}"), value="unsupported", rationale="secreto")
    judge = Judge(name="j1")
    session.add(judge)
    session.flush()
    session.add(Verdict(judge_id=judge.id, task_id=work.task("claim_support").id, sample_id=sample.id, claim_id=claim.id,
                        target_key=f"claim:{claim.id}", value="supported"))
    session.commit()
    return sample, claim


@pytest.mark.parametrize(
    ("role", "review_mode", "complete", "allowed"),
    [
        ("annotator", False, False, False), ("annotator", True, False, False), ("annotator", True, True, False),
        ("engineer", False, True, False), ("engineer", True, False, False), ("engineer", True, True, True),
        ("admin", False, True, False), ("admin", True, False, False), ("admin", True, True, True),
    ],
)
def test_blind_rules(work, session, reviewed_item, role, review_mode, complete, allowed):
    sample, claim = reviewed_item
    me = work.user("me", role)
    mine = work.assign(sample, me)
    if complete:
        save_label(session, mine, me, resolve_target(session, mine, "claim_support", f"claim:{claim.id}"), value="supported")
        save_label(session, mine, me, resolve_target(session, mine, "answer_quality", f"sample:{sample.id}"), value=4)
    item = build_item(session, mine, me)
    assert item.status.complete is complete
    assert may_review(me, item, review_mode) is allowed


def test_others_on_an_item_are_everyone_but_me_and_the_verdicts(work, session, reviewed_item):
    sample, claim = reviewed_item
    me = work.user("eng", "engineer")
    mine = work.assign(sample, me)
    save_label(session, mine, me, resolve_target(session, mine, "claim_support", f"claim:{claim.id}"), value="supported")
    others = others_on(session, build_item(session, mine, me), me)
    key = (work.task("claim_support").id, f"claim:{claim.id}")
    assert [(who, label.value) for who, label in others.labels[key]] == [("bea", "unsupported")]
    assert [(judge, verdict.value) for judge, verdict in others.verdicts[key]] == [("j1", "supported")]
    assert all(isinstance(label, Label) for _, label in others.labels[key])


@pytest.mark.parametrize("text", [
    "Tome 0,4 mg al día. Antes del <b>embarazo</b>! ¿Y después? Sí.",
    "  Con espacios delante.\n\n- una lista\n- de dos\nSin punto final",
    "Sin frases",
    "",
])
def test_context_pieces_number_the_segmenters_sentences_and_keep_every_character(text):
    pieces = context_pieces(text)
    assert "".join(p.text for p in pieces) == text
    assert [(p.sentence, p.text) for p in pieces if p.sentence is not None] == [(i, s.text) for i, s in enumerate(segment(text))]


def test_the_keystroke_statements_read_the_same_rows_on_the_driver_and_through_sqlalchemy(session, work, monkeypatch):
    """Statement runs on SQLite's driver directly, and through SQLAlchemy on other databases: same rows either way."""
    from calibrate.annotation import items

    ana = work.user("ana")
    sample = work.sample()
    assignment = work.assign(sample, ana)
    target = resolve_target(session, assignment, "claim_support", f"claim:{work.claims(sample)[0].id}")
    save_label(session, assignment, ana, target, value="supported")
    save_label(session, assignment, ana, target, evidence_toggle=1)
    session.commit()
    statements = [(items._ASSIGNMENT_SQL, {"id": assignment.id, "user_id": ana.id}),
                  (items._CLAIMS_SQL, {"sample_id": sample.id}), (items._CONTEXTS_SQL, {"sample_id": sample.id}),
                  (items._MY_LABELS_SQL, {"sample_id": sample.id, "user_id": ana.id})]
    driver = [[row._asdict() for row in statement.all(session, params)] for statement, params in statements]
    session.commit()
    monkeypatch.setattr(session.get_bind().dialect, "name", "not-sqlite")
    through = [[row._asdict() for row in statement.all(session, params)] for statement, params in statements]
    monkeypatch.undo()
    assert through == driver
    assert [len(rows) for rows in driver] == [1, 3, 2, 1]
    assert driver[3][0]["evidence"] == [1] and driver[3][0]["value"] == "supported"
