"""`calibrate queue auto`: two streams kept apart in the data, within a daily budget per UTC day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from labelstore import Store
from sqlmodel import select

from calibrate.accounts import ensure_annotator
from calibrate.annotation import AnnotationError
from calibrate.annotation.auto_queue import apply_saved_policy, queue_auto
from calibrate.models import Assignment, AuditDraw, Sample
from calibrate.tasks import add_task

TASK = "ok_task"
DAY = datetime(2026, 11, 10, 12, tzinfo=UTC)


def _dataset(session, n=40, *, judged=None, down=(), unparsed=()):
    add_task(session, TASK, target="sample", kind="categorical", labels=["pass", "fail"])
    store = Store(session)
    for i in range(n):
        sample = store.sample(f"s{i}")
        if i in down:
            sample.feedback = -1
        if judged is None or i in judged:
            store.verdict("J", TASK, f"s{i}", None if i in unparsed else ("pass" if i % 3 else "fail"))
    for name in ("ana", "ben", "cy"):
        ensure_annotator(session, name)
    store.commit()
    return store


def _streams(session):
    rows = session.exec(select(Assignment)).all()
    return {s: [a for a in rows if a.stream == s] for s in ("audit", "triage")}


def test_the_two_streams_fill_the_daily_budget_once_per_utc_day(session):
    store = _dataset(session, down={3, 7}, unparsed={11})
    summary = queue_auto(session, "d", daily=10, assign=["ana", "ben"], seed=1, now=DAY)
    session.commit()
    streams = _streams(session)
    assert summary["audit"] == {"budget": 5, "used_before": 0, "added": 5, "candidates": 40, "drawn": 5, "probability": 5 / 40}
    assert len(streams["audit"]) == 5 and {a.audit_prob for a in streams["audit"]} == {5 / 40}
    # every judged sample was a candidate once, drawn or passed over, with the same probability
    draws = session.exec(select(AuditDraw)).all()
    assert len(draws) == 40 and sum(d.drawn for d in draws) == 5 and {d.probability for d in draws} == {5 / 40}
    # triage: the thumbs-down samples first, then the unparsed verdict (the least certain); never an audit sample
    triage = [store.samples[f"s{i}"].id for i in (3, 7, 11)]
    audit_ids = {a.sample_id for a in streams["audit"]}
    assert summary["triage"]["thumbs_down"] + summary["triage"]["uncertain"] == len(streams["triage"])
    assert {a.sample_id for a in streams["triage"]} >= set(triage) - audit_ids
    assert not audit_ids & {a.sample_id for a in streams["triage"]}
    assert all(a.audit_prob is None for a in streams["triage"])
    # the same day again adds nothing beyond the budget
    again = queue_auto(session, "d", daily=10, assign=["ana", "ben"], seed=1, now=DAY + timedelta(hours=5))
    assert again["audit"]["added"] == 0 and again["triage"]["added"] == 0 and again["audit"]["used_before"] == 5
    # the next day: no new judged sample for the audit (each is a candidate once); triage goes on
    next_day = queue_auto(session, "d", daily=10, assign=["ana", "ben"], seed=1, now=DAY + timedelta(days=1))
    assert next_day["audit"]["candidates"] == 0 and next_day["audit"]["added"] == 0


def test_only_judged_samples_are_drawn_and_new_ones_wait_for_a_pass_with_budget(session):
    _dataset(session, n=20, judged=set(range(10)))
    summary = queue_auto(session, "d", daily=4, assign=["ana"], audit_share=1.0, now=DAY)
    assert summary["audit"]["candidates"] == 10 and summary["audit"]["probability"] == 4 / 10
    judged = {s.id for s in session.exec(select(Sample)).all() if s.external_id in {f"s{i}" for i in range(10)}}
    assert {a.sample_id for a in _streams(session)["audit"]} <= judged


def test_overlap_gives_distinct_experts_and_counts_against_the_budget(session):
    _dataset(session, n=12)
    summary = queue_auto(session, "d", daily=6, assign=["ana", "ben", "cy"], overlap=2, overlap_share=1.0, audit_share=1.0,
                         now=DAY)
    audit = _streams(session)["audit"]
    assert summary["audit"]["drawn"] == 3 and len(audit) == 6
    per_sample = {}
    for a in audit:
        per_sample.setdefault(a.sample_id, set()).add(a.user_id)
    assert all(len(users) == 2 for users in per_sample.values())


def test_apply_saved_policy_is_none_without_a_policy_and_applies_the_saved_one(session):
    _dataset(session, n=10)
    assert apply_saved_policy(session, "d", now=DAY) is None
    queue_auto(session, "d", daily=2, assign=["ana"], now=DAY)
    later = apply_saved_policy(session, "d", now=DAY + timedelta(days=1))
    assert later["policy"]["daily"] == 2 and later["day"] == "2026-11-11"


@pytest.mark.parametrize(("kwargs", "code"), [
    ({"daily": 0}, "auto_daily_range"),
    ({"assign": []}, "auto_needs_experts"),
    ({"overlap": 3}, "auto_overlap_experts"),
    ({"audit_share": 1.5}, "auto_share_range"),
    ({"overlap_share": float("nan")}, "auto_share_range"),
])
def test_bad_policies_are_refused_with_a_reason_and_nothing_is_written(session, kwargs, code):
    _dataset(session, n=5)
    args = {"daily": 4, "assign": ["ana", "ben"], **kwargs}
    with pytest.raises(AnnotationError) as refused:
        queue_auto(session, "d", now=DAY, **args)
    assert refused.value.reason.code == code
    session.rollback()
    assert session.exec(select(Assignment)).all() == []


def test_the_command_saves_and_applies(runner, session):
    _dataset(session, n=8, down={2})
    result = runner.invoke(["queue", "auto", "--dataset", "d", "--daily", "4", "--assign", "ana", "--assign", "ben", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "audit +2" in result.output and "triage +" in result.output
    bad = runner.invoke(["queue", "auto", "--dataset", "d", "--daily", "4", "--assign", "nobody"])
    assert bad.exit_code == 2 and "unknown user 'nobody'" in bad.output
