"""The label-save view's one domain call (annotation/label_posts.py): check the post, save it under the lock, return the item."""

from __future__ import annotations

import pytest
from sqlmodel import select

from calibrate.annotation.label_posts import LabelPost, post_label
from calibrate.annotation.labels import EvidenceError
from calibrate.models import Label


def _write(session, calls):
    def write(action):
        calls.append("write")
        result = action(session)
        session.commit()
        return result
    return write


def test_a_post_is_saved_once_after_the_read_is_released_and_the_item_shows_it(session, work):
    ana = work.user("ana")
    sample = work.sample()
    assignment = work.assign(sample, ana)
    claim = work.claims(sample)[0]
    calls: list[str] = []
    saved = post_label(session, ana, assignment.id, LabelPost(task="claim_support", target=f"claim:{claim.id}", value="Supported"),
                       write=_write(session, calls), release=lambda: calls.append("release"))
    assert calls == ["release", "write"]
    assert saved.key == f"claim:{claim.id}" and saved.item.cell(saved.task_id, saved.key) is not None
    assert [(lab.value, lab.annotator_id) for lab in session.exec(select(Label)).all()] == [("supported", ana.id)]


def test_a_sentence_that_is_not_the_items_is_refused_before_anything_is_written(session, work):
    ana = work.user("ana")
    sample = work.sample()
    assignment = work.assign(sample, ana)
    claim = work.claims(sample)[0]
    calls: list[str] = []
    with pytest.raises(EvidenceError) as refused:
        post_label(session, ana, assignment.id, LabelPost(task="claim_support", target=f"claim:{claim.id}", sentence=(10**9, 0)),
                   write=_write(session, calls))
    assert refused.value.field == "evidence_sentence" and calls == []
    assert session.exec(select(Label)).all() == []
