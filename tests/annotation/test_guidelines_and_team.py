"""Versioned guidelines with re-queueing, and the admin's team functions."""

from __future__ import annotations

import pytest
from sqlmodel import select

from calibrate.accounts import authenticate
from calibrate.annotation import AnnotationError
from calibrate.annotation.guidelines import guideline_overview, outdated_assignments, requeue_outdated, save_guideline, versions_of
from calibrate.annotation.labels import resolve_target, save_label
from calibrate.annotation.team import assign, create_user, reset_password, set_active
from calibrate.errors import NotFound
from calibrate.models import Assignment, Guideline


def test_saving_adds_a_version_and_refuses_an_unchanged_or_empty_text(work, session):
    eng = work.user("eng", "engineer")
    task = work.task("claim_support")
    assert save_guideline(session, task, "  Nueva versión\r\ncon dos líneas ", eng).version == 2
    with pytest.raises(AnnotationError, match="nothing changed: this is already version 2"):
        save_guideline(session, task, "Nueva versión\ncon dos líneas", eng)
    with pytest.raises(AnnotationError, match="empty"):
        save_guideline(session, task, "   ", eng)
    assert [(g.version, author.username if author else None) for g, author in versions_of(session, task)] == [(2, "eng"), (1, None)]
    assert session.exec(select(Guideline.text).where(Guideline.task_id == task.id, Guideline.version == 1)).one().startswith("Supported:")


def test_items_labelled_under_an_older_version_can_be_requeued(work, session):
    ana, bea, eng = work.user("ana"), work.user("bea"), work.user("eng", "engineer")
    old_done = work.assign(sample := work.sample("s1"), ana, status="done")
    work.assign(sample, bea, status="done")  # bea labelled nothing: not outdated
    fresh_done = work.assign(other := work.sample("s2"), ana, status="done")
    claim_support = work.task("claim_support")
    save_label(session, old_done, ana, resolve_target(session, old_done, "claim_support", f"claim:{work.claims(sample)[0].id}"), value="supported")
    session.commit()
    assert outdated_assignments(session, claim_support) == 0
    save_guideline(session, claim_support, "v2", eng)
    save_label(session, fresh_done, ana, resolve_target(session, fresh_done, "claim_support", f"claim:{work.claims(other)[0].id}"), value="supported")
    session.commit()
    assert outdated_assignments(session, claim_support) == 1
    assert [(row.task.name, row.outdated_items) for row in guideline_overview(session)][:1] == [("claim_support", 1)]
    assert requeue_outdated(session, work.task("answer_quality")) == 0
    assert requeue_outdated(session, claim_support) == 1
    session.commit()
    statuses = {a.id: (a.status, a.note) for a in session.exec(select(Assignment))}
    assert statuses[old_done.id] == ("pending", "re-queued: guideline claim_support v2")
    assert statuses[fresh_done.id] == ("done", "")
    assert outdated_assignments(session, claim_support) == 0


def test_admin_creates_users_resets_passwords_and_deactivates(work, session):
    boss = work.user("boss", "admin")
    user = create_user(session, " nuria ", role="annotator", password="a-good-password", display_name="Nuria")
    session.commit()
    assert authenticate(session, "nuria", "a-good-password").id == user.id
    with pytest.raises(AnnotationError, match="already exists"):
        create_user(session, "nuria", role="annotator", password="a-good-password")
    with pytest.raises(AnnotationError, match="at least 8"):
        reset_password(session, user, "short")
    reset_password(session, user, "another-password")
    session.commit()
    assert authenticate(session, "nuria", "a-good-password") is None
    assert authenticate(session, "nuria", "another-password") is not None
    work.assign(work.sample(), user)
    assert set_active(session, user, False, acting=boss) == 1
    session.commit()
    assert authenticate(session, "nuria", "another-password") is None
    with pytest.raises(AnnotationError, match="your own account"):
        set_active(session, boss, False, acting=boss)


def test_assigning_work_uses_the_sampler_with_overlap(work, session):
    for name in ("ana", "bea", "cris"):
        work.user(name)
    for i in range(6):
        work.sample(f"s{i}")
    summary = assign(session, "d", n=4, seed=1, overlap=2, usernames=["ana", "bea", "cris"])
    session.commit()
    assert (summary.taken, summary.assignments_added) == (4, 8)
    per_sample = {}
    for a in session.exec(select(Assignment)):
        per_sample.setdefault(a.sample_id, set()).add(a.user_id)
    assert len(per_sample) == 4 and all(len(users) == 2 for users in per_sample.values())
    with pytest.raises(AnnotationError, match="overlap 4 needs at least 4 annotators"):
        assign(session, "d", n=2, overlap=4, usernames=["ana", "bea"])
    with pytest.raises(NotFound, match="unknown dataset"):
        assign(session, "nope", n=1)
