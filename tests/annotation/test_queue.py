"""The queue: which item comes next, claiming open slots, skip/flag/submit, progress."""

from __future__ import annotations

import threading

import pytest
from sqlmodel import Session, col, func, select

from calibrate.annotation import AnnotationError
from calibrate.annotation.items import build_item
from calibrate.annotation.labels import resolve_target, save_label
from calibrate.annotation.queue import (Incomplete, claim_open_slot, my_queue, open_slots, pending_assignment,
                                        release_pending, set_status, submit, team_progress)
from calibrate.db import write_session
from calibrate.models import Assignment, User


def test_next_is_by_priority_then_seeded_order(work, session):
    ana = work.user()
    samples = [work.sample(f"s{i}") for i in range(4)]
    work.assign(samples[0], ana, priority=1)
    work.assign(samples[1], ana, priority=1, status="done")
    urgent = work.assign(samples[2], ana, priority=0)
    later = work.assign(samples[3], ana, priority=1)
    assert pending_assignment(session, ana).id == urgent.id
    set_status(session, urgent, "done")
    first = pending_assignment(session, ana)
    assert first.sample_id == samples[0].id
    set_status(session, first, "skipped", "fuera de mi especialidad")
    assert pending_assignment(session, ana).id == later.id


def test_next_in_a_dataset(work, session):
    ana = work.user()
    a = work.assign(work.sample("a1", dataset="A"), ana)
    b = work.assign(work.sample("b1", dataset="B"), ana)
    dataset_b = work.reload(work.sample("b2", dataset="B")).dataset_id
    assert pending_assignment(session, ana).id == a.id
    assert pending_assignment(session, ana, dataset_id=dataset_b).id == b.id


def test_an_annotator_claims_open_slots_but_never_two_on_one_sample(work, session):
    ana, bea = work.user("ana"), work.user("bea")
    s1, s2 = work.sample("s1"), work.sample("s2")
    slots = [work.assign(s1), work.assign(s1), work.assign(s2)]
    first = claim_open_slot(session, ana)
    assert (first.id, first.user_id) == (slots[0].id, ana.id)
    second = claim_open_slot(session, ana)
    assert second.sample_id == s2.id  # not the other slot of s1
    assert claim_open_slot(session, ana) is None
    assert claim_open_slot(session, bea).id == slots[1].id
    assert open_slots(session, bea) == 0


@pytest.mark.parametrize("role", ["engineer", "admin"])
def test_engineers_and_admins_do_not_claim_open_slots(work, session, role):
    user = work.user("eng", role)
    work.assign(work.sample())
    assert claim_open_slot(session, user) is None
    assert open_slots(session, user) == 0


def test_concurrent_claims_never_give_a_slot_twice(work, engine, session):
    people = [work.user(f"a{i}") for i in range(6)]
    for i in range(4):
        sample = work.sample(f"s{i}")
        for _ in range(2):
            work.assign(sample)
    barrier = threading.Barrier(len(people))
    got, errors = {}, []

    def worker(user_id):
        try:
            barrier.wait()
            mine = []
            while True:
                with write_session(engine) as s:
                    slot = claim_open_slot(s, s.get(User, user_id))
                    if slot is None:
                        break
                    mine.append(slot.id)
            got[user_id] = mine
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(u.id,)) for u in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    claimed = [slot for slots in got.values() for slot in slots]
    assert len(claimed) == len(set(claimed)) == 8
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(Assignment).where(col(Assignment.user_id).is_(None))).one() == 0
        pairs = s.exec(select(Assignment.sample_id, Assignment.user_id)).all()
        assert len(pairs) == len(set(pairs))


@pytest.mark.parametrize("status", ["skipped", "flagged"])
def test_skip_and_flag_need_a_reason(work, session, status):
    assignment = work.assign(work.sample(), work.user())
    with pytest.raises(AnnotationError, match="say why"):
        set_status(session, assignment, status, "  ")
    set_status(session, assignment, status, "el contexto está cortado")
    assert (assignment.status, assignment.note) == (status, "el contexto está cortado")


def test_submit_needs_every_claim_and_the_quality_and_says_what_is_missing(work, session):
    ana = work.user()
    sample = work.sample()
    assignment = work.assign(sample, ana)
    claims = work.claims(sample)
    save_label(session, assignment, ana, resolve_target(session, assignment, "claim_support", f"claim:{claims[0].id}"), value="supported")
    with pytest.raises(Incomplete) as raised:
        submit(session, assignment, build_item(session, assignment, ana).status)
    assert str(raised.value) == "claim_support: label claim 2, claim 3; answer_quality: label the answer"
    for claim in claims[1:]:
        save_label(session, assignment, ana, resolve_target(session, assignment, "claim_support", f"claim:{claim.id}"), value="unsupported")
    save_label(session, assignment, ana, resolve_target(session, assignment, "answer_quality", f"sample:{sample.id}"), value=3)
    # context relevance is optional: the item is complete without it
    submit(session, assignment, build_item(session, assignment, ana).status)
    assert assignment.status == "done"
    submit(session, assignment, build_item(session, assignment, ana).status)  # a second submit changes nothing
    assert assignment.status == "done"


def test_progress_per_annotator_and_dataset(work, session):
    ana, bea = work.user("ana"), work.user("bea")
    for i, status in enumerate(["done", "done", "pending", "skipped"]):
        work.assign(work.sample(f"a{i}", dataset="A"), ana, status=status)
    work.assign(work.sample("b0", dataset="B"), bea, status="flagged")
    work.assign(work.sample("b1", dataset="B"))
    row, other = my_queue(session, ana)
    assert (row.dataset.name, row.progress.done, row.progress.total, row.progress.pending, row.progress.skipped) == ("A", 2, 4, 1, 1)
    assert (other.dataset.name, other.progress.total, other.open_slots) == ("B", 0, 1)  # ana could claim B's open slot
    assert [(r.dataset.name, r.open_slots) for r in my_queue(session, bea)] == [("B", 1)]
    per_annotator, per_dataset = team_progress(session)
    assert [(p.user.username, p.dataset.name, p.progress.done, p.progress.total) for p in per_annotator] == [
        ("ana", "A", 2, 4), ("bea", "B", 0, 1)]
    assert [(d.name, p.total, slots) for d, p, slots in per_dataset] == [("A", 4, 0), ("B", 2, 1)]


def test_releasing_a_users_pending_items_returns_them_to_the_pool(work, session):
    ana, bea = work.user("ana"), work.user("bea")
    pending = work.assign(work.sample("s1"), ana)
    done = work.assign(work.sample("s2"), ana, status="done")
    assert release_pending(session, ana) == 1
    session.refresh(pending)
    session.refresh(done)
    assert (pending.user_id, done.user_id) == (None, ana.id)
    assert claim_open_slot(session, bea).id == pending.id
