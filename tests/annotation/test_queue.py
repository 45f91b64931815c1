"""The queue: which item comes next, claiming open slots, skip/flag/submit, progress."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from sqlmodel import Session, col, func, select

from calibrate.annotation import AnnotationError
from calibrate.annotation.items import build_item
from calibrate.annotation.labels import resolve_target, save_label
from calibrate.annotation.queue import (
    Incomplete,
    claim_open_slot,
    my_queue,
    open_slots,
    pending_assignment,
    release_pending,
    set_status,
    submit,
    team_progress,
)
from calibrate.db import write_session
from calibrate.errors import NotFound
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
        except Exception as exc:
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
    assert str(raised.value) == "Claim support: label claim 2, claim 3; Answer quality: label the answer"
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


# --------------------------------------------------------------------------- uncertain first


def _verdicts(work, judge_name, sample, values, task="claim_support"):
    """Store one judge's claim verdicts on a sample (None: an unparsed verdict)."""
    from calibrate.models import Judge, Verdict

    session = work.session
    judge = session.exec(select(Judge).where(Judge.name == judge_name)).first()
    if judge is None:
        judge = Judge(name=judge_name, kind="imported")
        session.add(judge)
        session.flush()
    task_row = work.task(task)
    for claim, value in zip(work.claims(sample), values, strict=True):
        session.add(Verdict(judge_id=judge.id, task_id=task_row.id, sample_id=sample.id, claim_id=claim.id,
                            target_key=f"claim:{claim.id}", value=value, status="ok" if value is not None else "unparsed",
                            source="import"))
    session.commit()


def _uncertain_case(work):
    """Three samples two judges disagree on 0, 1 and 2 claims of 3 (mean vote entropy 0, 1/3, 2/3), one without verdicts."""
    ana = work.user("ana")
    s = {name: work.sample(name) for name in ("calm", "some", "torn", "unjudged", "finished")}
    S, U = "supported", "unsupported"
    _verdicts(work, "j1", s["calm"], [S, S, U])
    _verdicts(work, "j2", s["calm"], [S, S, U])
    _verdicts(work, "j1", s["some"], [S, S, S])
    _verdicts(work, "j2", s["some"], [S, U, S])
    _verdicts(work, "j1", s["torn"], [S, S, U])
    _verdicts(work, "j2", s["torn"], [U, U, U])
    _verdicts(work, "j1", s["finished"], [S, U, U])
    _verdicts(work, "j2", s["finished"], [U, S, S])
    work.assign(s["calm"], ana, priority=0)  # sampled with --negative-first: a negative
    work.assign(s["unjudged"], ana, priority=1)
    work.assign(s["some"], ana, priority=1)
    work.assign(s["torn"], ana, priority=1)
    work.assign(s["torn"])  # an open slot of the same sample
    done = work.assign(s["finished"], ana, priority=1, status="done")
    skipped = work.assign(work.sample("skipped"), ana, priority=1, status="skipped")
    return ana, s, done, skipped


def _served_order(work, session, ana):
    """Return the external ids in the order the queue serves them, submitting each in turn (then undoing that)."""
    from calibrate.models import Sample

    served, taken = [], []
    while (row := pending_assignment(session, ana)) is not None:
        served.append(session.get(Sample, row.sample_id).external_id)
        taken.append(row)
        set_status(session, row, "done")
    for row in taken:
        set_status(session, row, "pending")
    session.commit()
    return served


def test_uncertain_first_serves_where_judges_disagree_and_sampled_restores(work, session):
    from calibrate.annotation.uncertainty import order_queue, queue_mode, sample_uncertainty
    from calibrate.models import Dataset, Judge, Task

    ana, s, done, skipped = _uncertain_case(work)
    dataset = session.get(Dataset, s["calm"].dataset_id)
    before = {a.id: (a.priority, a.status, a.updated_at) for a in session.exec(select(Assignment)).all()}
    assert _served_order(work, session, ana) == ["calm", "unjudged", "some", "torn"]  # negative first, then seeded order
    judges = list(session.exec(select(Judge).order_by(Judge.name)).all())
    scores = sample_uncertainty(session, dataset, session.exec(select(Task).where(Task.name == "claim_support")).one(), judges)
    # two judges: a disagreement has vote entropy ln 2 / ln min(2, 3 labels) = 1, an agreement 0
    assert scores.to_dict() == pytest.approx({s["calm"].id: 0.0, s["some"].id: 1 / 3, s["torn"].id: 2 / 3, s["finished"].id: 1.0})
    result = order_queue(session, "d", mode="uncertain")
    session.commit()
    assert (result.judges, result.pending, result.without_verdicts) == (["j1", "j2"], 5, 1)
    assert [ext for ext, _ in result.first] == ["torn", "some", "calm"] and "torn 0.67" in result.line()
    assert queue_mode(session, dataset) == "uncertain"
    assert _served_order(work, session, ana) == ["torn", "some", "calm", "unjudged"]
    bea = work.user("bea")
    assert claim_open_slot(session, bea).sample_id == s["torn"].id  # open slots follow the same order
    after = {a.id: (a.priority, a.status, a.updated_at) for a in session.exec(select(Assignment)).all()}
    assert after[done.id] == before[done.id] and after[skipped.id] == before[skipped.id]  # done and skipped untouched
    result = order_queue(session, "d", mode="sampled")
    session.commit()
    assert queue_mode(session, dataset) == "sampled" and result.changed == 5
    restored = {a.id: a.priority for a in session.exec(select(Assignment)).all()}
    assert restored == {aid: priority for aid, (priority, _, _) in before.items()}  # exactly what sampling set
    assert _served_order(work, session, ana) == ["calm", "unjudged", "some", "torn"]
    assert order_queue(session, "d", mode="sampled").changed == 0  # restoring twice changes nothing


def test_uncertain_first_with_chosen_judges_and_unparsed_verdicts(work, session):
    from calibrate.annotation.uncertainty import order_queue

    ana = work.user("ana")
    first, second = work.sample("first"), work.sample("second")
    S, U = "supported", "unsupported"
    _verdicts(work, "j1", first, [S, S, S])
    _verdicts(work, "j3", first, [U, U, U])  # j3 disagrees everywhere, but is not in the committee
    _verdicts(work, "j1", second, [S, S, S])
    _verdicts(work, "j2", second, [S, None, S])  # one unparsed verdict: that claim is maximally uncertain
    _verdicts(work, "j2", first, [S, S, S])
    work.assign(first, ana)
    work.assign(second, ana)
    order_queue(session, "d", mode="uncertain", judges=["j1", "j2"])
    assert _served_order(work, session, ana) == ["second", "first"]
    order_queue(session, "d", mode="uncertain", judges=["j1", "j3"])
    assert _served_order(work, session, ana) == ["first", "second"]
    with pytest.raises(AnnotationError, match="no claim_support verdicts of nobody on d \\(judges with verdicts: j1, j2, j3\\)"):
        order_queue(session, "d", mode="uncertain", judges=["nobody"])
    with pytest.raises(NotFound, match="unknown dataset 'nope'"):
        order_queue(session, "nope", mode="uncertain")
    with pytest.raises(AnnotationError, match="mode must be one of"):
        order_queue(session, "d", mode="random")


@pytest.mark.parametrize(
    ("kind", "values", "n_labels", "scale", "expected"),
    [
        # three judges split 2–1 over two labels: H(1/3, 2/3) / ln 2
        ("categorical", ["a", "a", "b"], 2, None, "entropy2"),
        ("categorical", ["a", "a", "b"], 3, None, "entropy3"),  # normalised by ln min(3 verdicts, 3 labels)
        ("categorical", ["a", "b", "c"], 3, None, 1.0),
        ("categorical", ["a", "a", "a"], 3, None, 0.0),
        ("categorical", ["a"], 3, None, 0.0),  # one judge gives no confidence
        ("categorical", ["a", None], 3, None, 1.0),  # an unusable verdict: as uncertain as can be
        ("ordinal", ["1", "5"], None, (1, 5), 1.0),
        ("ordinal", ["2", "3", "4"], None, (1, 5), 0.5),  # range / scale width
        ("ordinal", ["3"], None, (1, 5), 1.0),  # one verdict at the middle of the scale
        ("ordinal", ["4"], None, (1, 5), 0.5),
        ("ordinal", ["5"], None, (1, 5), 0.0),
    ],
)
def test_target_uncertainty_worked_examples(kind, values, n_labels, scale, expected):
    import pandas as pd
    from scipy.stats import entropy

    from calibrate.annotation.uncertainty import target_uncertainty

    frame = pd.DataFrame({"target_key": ["t"] * len(values), "value": values,
                          "status": ["ok" if v is not None else "unparsed" for v in values]})
    want = {"entropy2": entropy([1, 2]) / np.log(2), "entropy3": entropy([1, 2]) / np.log(3)}.get(expected, expected)
    assert target_uncertainty(frame, kind=kind, n_labels=n_labels, scale=scale)["t"] == pytest.approx(want)


def test_queue_order_command(runner, work, session):
    ana, s, _, _ = _uncertain_case(work)
    out = runner.invoke(["queue", "order", "--dataset", "d", "--mode", "uncertain", "--judge", "j1", "--judge", "j2"])
    assert out.exit_code == 0, out.output
    assert "uncertain first on claim_support by j1, j2" in out.output and "first: torn 0.67, some 0.33, calm 0.00" in out.output
    session.expire_all()
    assert _served_order(work, session, ana)[0] == "torn"
    assert runner.invoke(["queue", "order", "--dataset", "d", "--mode", "sampled"]).exit_code == 0
    session.expire_all()
    assert _served_order(work, session, ana)[0] == "calm"
    bad = runner.invoke(["queue", "order", "--dataset", "d", "--mode", "uncertain", "--task", "nope"])
    assert bad.exit_code == 2 and "unknown task 'nope'" in bad.output


def test_one_judge_on_a_score_task_puts_unparsed_then_mid_scale_first(work, session):
    """One judge gives no confidence: an unusable verdict first, then verdicts by closeness to the middle of 1–5."""
    from calibrate.annotation.uncertainty import order_queue
    from calibrate.models import Judge, Verdict

    ana = work.user("ana")
    judge = Judge(name="solo", kind="imported")
    session.add(judge)
    session.flush()
    task = work.task("answer_quality")
    for name, value in [("top", "5"), ("middle", "3"), ("failed", None), ("fair", "4")]:
        sample = work.sample(name)
        session.add(Verdict(judge_id=judge.id, task_id=task.id, sample_id=sample.id, target_key=f"sample:{sample.id}",
                            value=value, status="ok" if value else "error", source="import"))
        work.assign(sample, ana)
    result = order_queue(session, "d", mode="uncertain", task="answer_quality")
    # middle and failed tie at 1: the seeded order (assignment id) decides
    assert [(ext, round(score, 2)) for ext, score in result.first] == [("middle", 1.0), ("failed", 1.0), ("fair", 0.5), ("top", 0.0)]
    assert _served_order(work, session, ana) == ["middle", "failed", "fair", "top"]
