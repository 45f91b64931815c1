"""Adjudication: which targets are disputed, and how the decision becomes the gold."""

from __future__ import annotations

import pytest
from sqlmodel import col, select

from calibrate.annotation import AnnotationError
from calibrate.annotation.adjudication import adjudicate, disputes
from calibrate.calibration.frames import labels_frame
from calibrate.gold import categorical_gold, numeric_gold
from calibrate.models import Dataset, Label, LabelRevision


@pytest.fixture
def votes(work, session):
    """Store labels by annotator name on claim `index` (or on the sample) of one sample per call."""
    people = {}
    samples = {}

    def vote(sample_id, task, values, *, claim=0):
        sample = samples.get(sample_id) or work.sample(sample_id, claims=("Uno.", "Dos."))
        samples[sample_id] = sample
        task_row = work.task(task)
        for name, value in values.items():
            user = people.get(name) or work.user(name)
            people[name] = user
            if task_row.target == "claim":
                target = work.claims(sample)[claim]
                key, claim_id = f"claim:{target.id}", target.id
            else:
                key, claim_id = f"sample:{sample.id}", None
            session.add(Label(task_id=task_row.id, sample_id=sample.id, claim_id=claim_id, target_key=key,
                              annotator_id=user.id, value=value, rationale=f"{name} dice {value}", source="import"))
        session.commit()
        return sample

    vote.people = people
    return vote


def _dataset(session):
    return session.exec(select(Dataset).where(Dataset.name == "d")).one()


def test_categorical_disagreements_and_ties_are_listed_agreements_are_not(work, session, votes):
    votes("tie", "claim_support", {"ana": "supported", "bea": "unsupported"})
    votes("outvoted", "claim_support", {"ana": "supported", "bea": "supported", "cris": "unsupported"})
    votes("agree", "claim_support", {"ana": "supported", "bea": "supported"})
    votes("alone", "claim_support", {"ana": "unsupported"})
    page = disputes(session, _dataset(session), work.task("claim_support"))
    assert [(d.sample.external_id, d.kind) for d in page.disputes] == [("tie", "tie"), ("outvoted", "disagreement")]
    assert [(v.annotator, v.value, v.rationale) for v in page.disputes[0].votes] == [
        ("ana", "supported", "ana dice supported"), ("bea", "unsupported", "bea dice unsupported")]
    assert page.total == 2 and page.counts == {"open": 2, "decided": 0}


@pytest.mark.parametrize(("scores", "disputed"), [({"ana": "2", "bea": "4"}, True), ({"ana": "3", "bea": "4"}, False),
                                                  ({"ana": "1", "bea": "2", "cris": "3"}, True), ({"ana": "5", "bea": "5"}, False)])
def test_scores_are_disputed_from_a_spread_of_two(work, session, votes, scores, disputed):
    votes("s1", "answer_quality", scores)
    page = disputes(session, _dataset(session), work.task("answer_quality"))
    assert [d.kind for d in page.disputes] == (["spread"] if disputed else [])


def test_the_decision_is_one_gold_row_and_the_report_takes_it(work, session, votes):
    sample = votes("tie", "claim_support", {"ana": "supported", "bea": "unsupported"})
    task = work.task("claim_support")
    boss, other_boss = work.user("boss", "admin"), work.user("eng", "engineer")
    key = f"claim:{work.claims(sample)[0].id}"
    frame = labels_frame(session, _dataset(session), task)
    assert categorical_gold(frame).set_index("target_key").loc[key, "gold_source"] == "tie"

    with pytest.raises(AnnotationError, match="write a note"):
        adjudicate(session, boss, task, key, "supported", " ")
    with pytest.raises(AnnotationError, match="not a label"):
        adjudicate(session, boss, task, key, "maybe", "nota")
    adjudicate(session, boss, task, key, "unsupported", "la dosis no aparece en el contexto")
    # a second decider changes the same gold row, and the first decision stays in its history
    gold = adjudicate(session, other_boss, task, key, "Supported", "sí aparece en §3")
    session.commit()
    rows = session.exec(select(Label).where(Label.target_key == key, col(Label.adjudicated).is_(True))).all()
    assert [(r.value, r.annotator_id, r.rationale) for r in rows] == [("supported", other_boss.id, "sí aparece en §3")]
    history = session.exec(select(LabelRevision).where(LabelRevision.label_id == gold.id).order_by(LabelRevision.id)).all()
    assert [(h.action, h.value, h.changed_by_id) for h in history] == [("create", "unsupported", boss.id), ("update", "unsupported", other_boss.id)]

    gold_row = categorical_gold(labels_frame(session, _dataset(session), task)).set_index("target_key").loc[key]
    assert (gold_row["gold"], gold_row["gold_source"]) == ("supported", "adjudicated")
    assert [d.sample.external_id for d in disputes(session, _dataset(session), task).disputes] == []
    decided = disputes(session, _dataset(session), task, show="decided").disputes
    assert [(d.decision.value, d.decided_by) for d in decided] == [("supported", "eng")]


def test_a_score_decision_is_the_numeric_gold(work, session, votes):
    sample = votes("s1", "answer_quality", {"ana": "1", "bea": "5"})
    task = work.task("answer_quality")
    adjudicate(session, work.user("boss", "admin"), task, f"sample:{sample.id}", "4", "la respuesta omite un detalle menor")
    session.commit()
    gold = numeric_gold(labels_frame(session, _dataset(session), task)).set_index("target_key").loc[f"sample:{sample.id}"]
    assert (gold["gold"], gold["gold_source"]) == (4.0, "adjudicated")


def test_disputes_are_paged_in_data_order(work, session, votes):
    for i in range(5):
        votes(f"s{i}", "claim_support", {"ana": "supported", "bea": "unsupported"})
    task = work.task("claim_support")
    first = disputes(session, _dataset(session), task, per_page=2)
    last = disputes(session, _dataset(session), task, page=3, per_page=2)
    assert (first.pages, [d.sample.external_id for d in first.disputes]) == (3, ["s0", "s1"])
    assert [d.sample.external_id for d in last.disputes] == ["s4"]
