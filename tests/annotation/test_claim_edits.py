"""Experts correcting claims: split, merge, edit, undo, history, stale labels, and the concurrency rule."""

from __future__ import annotations

import pytest
from sqlmodel import select

from calibrate.annotation import AnnotationError
from calibrate.annotation.claim_edits import (
    claim_history,
    edit_claim,
    merge_with_next,
    split_claim,
    undo_last_action,
)
from calibrate.annotation.labels import resolve_target, save_label
from calibrate.claimsets import expert_changes
from calibrate.models import Claim, Dataset, Label, LabelRevision, Sample

ANSWER = "Tome 0,4 mg al día y hasta la semana 12. Consulte a su médico."


@pytest.fixture
def item(work, session):
    ana = work.user("ana")
    sample = work.sample("s1", claims=("Tome 0,4 mg al día y hasta la semana 12.", "Consulte a su médico."))
    return work, ana, sample, work.assign(sample, ana)


def active(session, sample):
    session.expire_all()
    return [(c.index, c.text, c.start, c.end, c.origin)
            for c in session.exec(select(Claim).where(Claim.sample_id == sample.id, Claim.active).order_by(Claim.index))]


def label(session, assignment, user, claim, value="supported"):
    target = resolve_target(session, assignment, "claim_support", f"claim:{claim.id}")
    result = save_label(session, assignment, user, target, value=value)
    session.commit()
    return session.get(Label, result.id)


def test_split_at_the_caret_keeps_both_parts_in_the_answer(session, item):
    work, ana, sample, _ = item
    first = work.claims(sample)[0]
    edit = split_claim(session, work.reload(sample), ana, first.id, len("Tome 0,4 mg al día "))
    session.commit()
    assert sample.answer == ANSWER
    assert active(session, sample) == [
        (0, "Tome 0,4 mg al día", 0, 18, "expert"),
        (1, "y hasta la semana 12.", 19, 40, "expert"),
        (2, "Consulte a su médico.", 41, 62, "segmenter"),
    ]
    assert edit.action == "split" and [c["text"] for c in edit.before] == ["Tome 0,4 mg al día y hasta la semana 12."]
    assert work.reload(sample).claim_source == "segmenter+edited"
    retired = session.get(Claim, first.id)
    assert retired is not None and not retired.active  # never deleted


@pytest.mark.parametrize("at", [0, 40, 999])
def test_a_split_needs_text_on_both_sides(session, item, at):
    work, ana, sample, _ = item
    first = work.claims(sample)[0]
    with pytest.raises(AnnotationError, match="split inside the claim"):
        split_claim(session, work.reload(sample), ana, first.id, at)


def test_merge_takes_the_answers_own_text_between_the_claims(session, item):
    work, ana, sample, _ = item
    first = work.claims(sample)[0]
    split_claim(session, work.reload(sample), ana, first.id, len("Tome 0,4 mg al día "))
    session.commit()
    parts = [c for c in work.claims(sample) if c.active]
    merge_with_next(session, work.reload(sample), ana, parts[0].id)
    session.commit()
    assert active(session, sample)[0][:4] == (0, "Tome 0,4 mg al día y hasta la semana 12.", 0, 40)
    last = [c for c in work.claims(sample) if c.active][-1]
    with pytest.raises(AnnotationError, match="the last one"):
        merge_with_next(session, work.reload(sample), ana, last.id)


def test_edit_finds_the_new_text_in_the_answer_or_gives_it_no_span(session, item):
    work, ana, sample, _ = item
    second = work.claims(sample)[1]
    edit_claim(session, work.reload(sample), ana, second.id, "  Consulte a su médico de cabecera.  ")
    session.commit()
    assert active(session, sample)[1][:4] == (1, "Consulte a su médico de cabecera.", -1, -1)
    now = [c for c in work.claims(sample) if c.active][1]
    assert edit_claim(session, work.reload(sample), ana, now.id, "Consulte a su médico de cabecera.") is None  # unchanged
    edit_claim(session, work.reload(sample), ana, now.id, "Consulte a su médico.")
    session.commit()
    assert active(session, sample)[1][:4] == (1, "Consulte a su médico.", 41, 62)
    with pytest.raises(AnnotationError, match="needs text"):
        edit_claim(session, work.reload(sample), ana, [c for c in work.claims(sample) if c.active][1].id, "   ")


def test_labels_on_the_changed_claim_become_stale_and_the_others_stay(session, item):
    work, ana, sample, assignment = item
    first, second = work.claims(sample)
    on_first, on_second = label(session, assignment, ana, first), label(session, assignment, ana, second)
    split_claim(session, work.reload(sample), ana, first.id, len("Tome 0,4 mg al día "))
    session.commit()
    session.expire_all()
    stale, kept = session.get(Label, on_first.id), session.get(Label, on_second.id)
    assert stale.stale and stale.stale_reason == "claim 1 split by ana" and stale.value == "supported"
    assert not kept.stale
    assert [r.action for r in session.exec(select(LabelRevision).where(LabelRevision.label_id == stale.id))] == ["create", "stale"]


def test_a_claim_another_annotator_labelled_cannot_be_changed(session, item, work):
    _, ana, sample, _ = item
    bea = work.user("bea")
    bea_assignment = work.assign(sample, bea)
    first, second = work.claims(sample)
    label(session, bea_assignment, bea, second)
    for change in (lambda: edit_claim(session, work.reload(sample), ana, second.id, "Otra cosa."),
                   lambda: merge_with_next(session, work.reload(sample), ana, first.id)):
        with pytest.raises(AnnotationError, match="labels of 1 other annotator"):
            change()
        session.rollback()
    # The first claim carries no one else's label: ana may split it.
    split_claim(session, work.reload(sample), ana, first.id, 5)
    session.commit()
    assert not session.exec(select(Label).where(Label.stale)).all()


def test_a_claim_changed_meanwhile_is_refused(session, item):
    work, ana, sample, _ = item
    first = work.claims(sample)[0]
    split_claim(session, work.reload(sample), ana, first.id, 5)
    session.commit()
    with pytest.raises(AnnotationError, match="changed since the page was loaded"):
        edit_claim(session, work.reload(sample), ana, first.id, "Otra.")


def test_u_undoes_claim_edits_and_labels_newest_first(session, item):
    work, ana, sample, assignment = item
    first, second = work.claims(sample)
    original = active(session, sample)
    on_first = label(session, assignment, ana, first)
    split_claim(session, work.reload(sample), ana, first.id, len("Tome 0,4 mg al día "))
    session.commit()
    new_first = [c for c in work.claims(sample) if c.active][0]
    label(session, assignment, ana, new_first, "unsupported")
    # 1st u: the label on the new claim goes; 2nd u: the split is undone; 3rd u: the first label goes.
    undone = undo_last_action(session, assignment, ana)
    session.commit()
    assert undone.label is not None and undone.label.label is None
    undone = undo_last_action(session, assignment, ana)
    session.commit()
    assert undone.edit is not None and undone.what == "the split of claim 1"
    assert active(session, sample) == original
    session.expire_all()
    restored = session.get(Label, on_first.id)
    assert not restored.stale and restored.stale_reason == ""
    assert work.reload(sample).claim_source == "segmenter"
    assert [r.action for r in session.exec(select(LabelRevision).where(LabelRevision.label_id == restored.id))] == \
        ["create", "stale", "restore"]
    undone = undo_last_action(session, assignment, ana)
    session.commit()
    assert undone.label is not None and session.get(Label, on_first.id) is None
    assert undo_last_action(session, assignment, ana) is None
    history = claim_history(session, sample.id)
    assert [(h.action, h.who, h.undone, h.stale_labels) for h in history] == [("split", "ana", True, 1)]


def test_undo_keeps_a_label_given_to_a_new_claim_meanwhile(session, item, work):
    _, ana, sample, assignment = item
    bea = work.user("bea")
    bea_assignment = work.assign(sample, bea)
    first = work.claims(sample)[0]
    split_claim(session, work.reload(sample), ana, first.id, 5)
    session.commit()
    new_second = [c for c in work.claims(sample) if c.active][1]
    given = label(session, bea_assignment, bea, new_second)
    # Bea labelled a claim ana's split made: undoing it would make bea's work stale: refused.
    with pytest.raises(AnnotationError, match="other annotator"):
        undo_last_action(session, assignment, ana)
    session.rollback()
    assert not session.get(Label, given.id).stale


def test_the_extractors_quality_is_the_share_of_its_claims_experts_changed(session, item, work):
    _, ana, sample, _ = item
    other = work.sample("s2", claims=("Uno.", "Dos.", "Tres.", "Cuatro."))
    for s in (sample, other):
        s = work.reload(s)
        s.claim_source = "ex@1"
        session.add(s)
        for c in work.claims(s):
            c.origin = "ex@1"
            session.add(c)
    session.commit()
    first = work.claims(sample)[0]
    split_claim(session, work.reload(sample), ana, first.id, 5)
    session.commit()
    a, b, c, d = work.claims(other)
    merge_with_next(session, work.reload(other), ana, a.id)
    session.commit()
    dataset = session.exec(select(Dataset)).one()
    changes = expert_changes(session, dataset)
    assert changes == {"ex@1": {"n_answers": 2, "n_answers_edited": 2, "n_claims": 6, "n_changed": 3,
                                "changed_share": 0.5, "split": 1, "merged": 2, "edited": 0}}
    # An undone change no longer counts.
    assert undo_last_action(session, work.assign(other, ana), ana).edit.action == "merge"
    session.commit()
    assert expert_changes(session, dataset)["ex@1"]["n_changed"] == 1
    assert session.exec(select(Sample).where(Sample.external_id == "s2")).one().claim_source == "ex@1"
