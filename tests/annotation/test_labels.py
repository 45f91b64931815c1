"""Saving labels (upsert with history), undo, history: the rules that keep work from being lost or doubled."""

from __future__ import annotations

import pytest
from sqlmodel import col, func, select

from calibrate.annotation import AnnotationError, NotFound
from calibrate.annotation.guidelines import save_guideline
from calibrate.annotation.labels import history, resolve_target, save_label, undo_last
from calibrate.models import Label, LabelRevision
from calibrate.models import LabelRevision as Rev


def _labels(session, **where):
    query = select(Label).where(col(Label.adjudicated).is_(False))
    for name, value in where.items():
        query = query.where(getattr(Label, name) == value)
    return list(session.exec(query))


def _revisions(session, label_id):
    return list(session.exec(select(Rev).where(Rev.label_id == label_id).order_by(Rev.id)))


@pytest.fixture
def item(work):
    ana = work.user("ana")
    sample = work.sample()
    assignment = work.assign(sample, ana)
    return work, ana, sample, assignment


def _claim_target(work, session, assignment, sample, index=0, task="claim_support"):
    claim = work.claims(sample)[index]
    return resolve_target(session, assignment, task, f"claim:{claim.id}")


def test_first_label_is_created_with_a_revision_and_the_guideline_version(session, item):
    work, ana, sample, assignment = item
    target = _claim_target(work, session, assignment, sample)
    label = save_label(session, assignment, ana, target, value="Supported")
    session.commit()
    assert (label.value, label.annotator_id, label.source, label.guideline_version) == ("supported", ana.id, "ui", 1)
    assert [(r.action, r.value, r.changed_by_id, r.source) for r in _revisions(session, label.id)] == [("create", "supported", ana.id, "ui")]


def test_repeating_the_same_value_changes_nothing(session, item):
    """A double click or a replayed request: one label, one revision."""
    work, ana, sample, assignment = item
    target = _claim_target(work, session, assignment, sample)
    for _ in range(3):
        save_label(session, assignment, ana, target, value="supported")
        session.commit()
    [label] = _labels(session, annotator_id=ana.id)
    assert len(_revisions(session, label.id)) == 1


def test_a_change_keeps_the_previous_value_with_who_and_when(session, item):
    work, ana, sample, assignment = item
    target = _claim_target(work, session, assignment, sample)
    save_label(session, assignment, ana, target, value="supported", rationale="dice 0,4 mg")
    session.commit()
    label = save_label(session, assignment, ana, target, value="unsupported")
    session.commit()
    assert (label.value, label.rationale) == ("unsupported", "dice 0,4 mg")
    revisions = _revisions(session, label.id)
    assert [(r.action, r.value, r.rationale) for r in revisions] == [("create", "supported", "dice 0,4 mg"),
                                                                     ("update", "supported", "dice 0,4 mg")]
    assert revisions[1].changed_by_id == ana.id and revisions[1].changed_at is not None


def test_rationale_and_evidence_need_a_label_first(session, item):
    work, ana, sample, assignment = item
    target = _claim_target(work, session, assignment, sample)
    with pytest.raises(AnnotationError, match="choose a label first"):
        save_label(session, assignment, ana, target, rationale="porque sí")
    with pytest.raises(AnnotationError, match="choose a label first"):
        save_label(session, assignment, ana, target, evidence_toggle=0)
    assert _labels(session) == []


def test_evidence_toggles_context_ranks(session, item):
    work, ana, sample, assignment = item
    target = _claim_target(work, session, assignment, sample)
    save_label(session, assignment, ana, target, value="supported")
    assert save_label(session, assignment, ana, target, evidence_toggle=1).evidence == [1]
    assert save_label(session, assignment, ana, target, evidence_toggle=0).evidence == [0, 1]
    assert save_label(session, assignment, ana, target, evidence_toggle=1).evidence == [0]
    assert save_label(session, assignment, ana, target, evidence_toggle=0).evidence is None
    with pytest.raises(AnnotationError, match="no context #3"):
        save_label(session, assignment, ana, target, evidence_toggle=2)


@pytest.mark.parametrize(
    ("task", "kind", "value", "message"),
    [
        ("claim_support", "claim", "maybe", "not a label of task claim_support"),
        ("answer_quality", "sample", "7", "outside the scale"),
        ("answer_quality", "sample", "good", "must be a number"),
        ("context_relevance", "claim", "relevant", "labels contexts, not claims"),
        ("claim_support", "sample", "supported", "labels claims, not samples"),
    ],
)
def test_values_and_targets_must_fit_the_task(session, item, task, kind, value, message):
    work, ana, sample, assignment = item
    target_id = {"claim": work.claims(sample)[0].id, "sample": sample.id}[kind]
    with pytest.raises(AnnotationError, match=message):
        target = resolve_target(session, assignment, task, f"{kind}:{target_id}")
        save_label(session, assignment, ana, target, value=value)


@pytest.mark.parametrize("kind", ["claim", "context", "sample"])
def test_a_target_of_another_sample_is_not_found(session, item, kind):
    """Guessing ids: a claim, context or sample of another item cannot be labelled through this assignment."""
    work, ana, sample, assignment = item
    other = work.sample("s2")
    target_id = {"claim": work.claims(other)[0].id, "context": work.contexts(other)[0].id, "sample": other.id}[kind]
    task = {"claim": "claim_support", "context": "context_relevance", "sample": "answer_quality"}[kind]
    with pytest.raises(NotFound):
        resolve_target(session, assignment, task, f"{kind}:{target_id}")


def test_a_retired_claim_cannot_be_labelled(session, item):
    work, ana, sample, assignment = item
    claim = work.claims(sample)[0]
    claim.active = False
    session.add(claim)
    session.commit()
    with pytest.raises(NotFound):
        resolve_target(session, assignment, "claim_support", f"claim:{claim.id}")


# --------------------------------------------------------------------------- undo

UNDO_CASES = [
    # (actions on claims 0/1 as (claim, value), number of undos, expected {claim: value} afterwards)
    ([(0, "supported")], 1, {}),
    ([(0, "supported"), (1, "unsupported")], 1, {0: "supported"}),
    ([(0, "supported"), (1, "unsupported")], 2, {}),
    ([(0, "supported"), (0, "unsupported")], 1, {0: "supported"}),
    ([(0, "supported"), (0, "unsupported"), (0, "not_applicable")], 2, {0: "supported"}),
    ([(0, "supported"), (0, "unsupported")], 2, {}),
    ([(0, "supported"), (1, "supported"), (0, "unsupported")], 2, {0: "supported"}),
    ([(0, "supported")], 3, {}),  # more undos than changes: nothing left, no error
]


@pytest.mark.parametrize(("actions", "undos", "expected"), UNDO_CASES)
def test_undo_steps_back_through_my_changes(session, item, actions, undos, expected):
    work, ana, sample, assignment = item
    claims = work.claims(sample)
    for index, value in actions:
        save_label(session, assignment, ana, resolve_target(session, assignment, "claim_support", f"claim:{claims[index].id}"), value=value)
        session.commit()
    for _ in range(undos):
        undo_last(session, assignment, ana)
        session.commit()
    by_claim = {c.id: i for i, c in enumerate(claims)}
    assert {by_claim[label.claim_id]: label.value for label in _labels(session)} == expected


def test_undo_after_an_undo_and_a_new_change(session, item):
    """set A, change A, undo (A back), change A again, undo: A is back to the first value again."""
    work, ana, sample, assignment = item
    target = _claim_target(work, session, assignment, sample)
    for value in ("supported", "unsupported"):
        save_label(session, assignment, ana, target, value=value)
    undo_last(session, assignment, ana)
    save_label(session, assignment, ana, target, value="not_applicable")
    undone = undo_last(session, assignment, ana)
    assert undone.label.value == "supported"
    undo_last(session, assignment, ana)
    assert _labels(session) == []
    assert undo_last(session, assignment, ana) is None


def test_undo_restores_rationale_and_evidence(session, item):
    work, ana, sample, assignment = item
    target = _claim_target(work, session, assignment, sample)
    save_label(session, assignment, ana, target, value="supported", rationale="primero")
    save_label(session, assignment, ana, target, evidence_toggle=1)
    save_label(session, assignment, ana, target, rationale="segundo")
    assert undo_last(session, assignment, ana).label.rationale == "primero"
    label = undo_last(session, assignment, ana).label
    assert (label.rationale, label.evidence) == ("primero", None)


def test_undo_never_touches_imported_labels_or_other_people(session, item, work):
    work_, ana, sample, assignment = item
    claim = work.claims(sample)[0]
    task = work.task("claim_support")
    imported = Label(task_id=task.id, sample_id=sample.id, claim_id=claim.id, target_key=f"claim:{claim.id}",
                     annotator_id=ana.id, value="supported", source="import")
    session.add(imported)
    session.flush()
    session.add(LabelRevision(label_id=imported.id, action="create", value="supported", changed_by_id=ana.id))
    bea = work.user("bea")
    other_assignment = work.assign(sample, bea)
    save_label(session, other_assignment, bea, resolve_target(session, other_assignment, "claim_support", f"claim:{claim.id}"), value="unsupported")
    session.commit()
    assert undo_last(session, assignment, ana) is None
    assert {(l.annotator_id, l.value) for l in _labels(session)} == {(ana.id, "supported"), (bea.id, "unsupported")}


def test_history_shows_only_my_label(session, item, work):
    work_, ana, sample, assignment = item
    bea = work.user("bea")
    other = work.assign(sample, bea)
    target = _claim_target(work, session, assignment, sample)
    save_label(session, other, bea, resolve_target(session, other, "claim_support", target.key), value="unsupported", rationale="secreto")
    label, entries = history(session, target, ana)
    assert label is None and entries == []
    save_label(session, assignment, ana, target, value="supported")
    save_label(session, assignment, ana, target, value="not_applicable")
    label, entries = history(session, target, ana)
    assert label.value == "not_applicable"
    assert [(e.action, e.value, e.who) for e in entries] == [("update", "supported", "ana"), ("create", "supported", "ana")]


# --------------------------------------------------------------------------- guideline versions


def test_labels_record_the_guideline_version_and_a_key_press_confirms_an_outdated_one(session, item, work):
    work_, ana, sample, assignment = item
    target = _claim_target(work, session, assignment, sample)
    label = save_label(session, assignment, ana, target, value="supported", rationale="v1")
    assert label.guideline_version == 1
    save_guideline(session, work.task("claim_support"), "Nueva regla: las cifras deben coincidir.", ana)
    # Editing the rationale is not a confirmation under the new guideline ...
    assert save_label(session, assignment, ana, target, rationale="still v1").guideline_version == 1
    # ... pressing the label's key again is (one more revision, the value unchanged).
    label = save_label(session, assignment, ana, target, value="supported")
    assert (label.value, label.guideline_version) == ("supported", 2)
    assert [r.guideline_version for r in _revisions(session, label.id)] == [1, 1, 1]
    assert undo_last(session, assignment, ana).label.guideline_version == 1


def test_a_key_press_on_a_stale_label_confirms_it(session, item, work):
    work_, ana, sample, assignment = item
    target = resolve_target(session, assignment, "answer_quality", f"sample:{sample.id}")
    label = session.get(Label, save_label(session, assignment, ana, target, value=4).id)
    label.stale, label.stale_reason = True, "the answer changed"
    session.add(label)
    session.commit()
    assert save_label(session, assignment, ana, target, rationale="x").stale is True
    label = save_label(session, assignment, ana, target, value=4)
    assert (label.stale, label.stale_reason) == (False, "")


def test_one_label_per_target_even_when_two_sessions_write_at_once(engine, item):
    """Two concurrent writers (BEGIN IMMEDIATE) saving the same label: still one row."""
    import threading

    from sqlmodel import Session

    from calibrate.db import write_session
    from calibrate.models import Assignment, User

    work, ana, sample, assignment = item
    key = f"claim:{work.claims(sample)[0].id}"
    barrier = threading.Barrier(4)
    errors = []

    def worker(value):
        try:
            barrier.wait()
            with write_session(engine) as s:
                a = s.get(Assignment, assignment.id)
                user = s.get(User, ana.id)
                save_label(s, a, user, resolve_target(s, a, "claim_support", key), value=value)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(v,)) for v in ("supported", "supported", "unsupported", "supported")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(Label)).one() == 1
