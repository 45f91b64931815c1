"""The gold rule (gold.py): one rule, the same answer for the report, compare, the loop and few-shots."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlmodel import select

from calibrate import lookup
from calibrate.calibration import Options, build_report
from calibrate.calibration.compare import compare_judges
from calibrate.calibration.frames import labels_frame
from calibrate.gold import categorical_gold, human_gold, numeric_gold
from calibrate.judges import FewShotSpec, save_version
from calibrate.models import FewShot, Label

FAST = Options(bootstrap=200)
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def _decide(store, session, task, sid, decisions, claim=None):
    """Store adjudications in this order (row ids rise), with the given updated_at offsets in minutes."""
    for adjudicator, value, minutes in decisions:
        store.label(task, adjudicator, sid, value, claim=claim, adjudicated=True)
        session.flush()
        row = session.exec(select(Label).order_by(Label.id.desc())).first()
        row.updated_at = T0 + timedelta(minutes=minutes)
        session.add(row)
    store.commit()


def test_the_most_recent_adjudication_wins_everywhere(store, session):
    """Two adjudicators decided one claim; the first one decided again later: theirs is in force.

    Before one rule, the report took the adjudication read last (the higher row id) and the
    few-shot value the latest updated one: the two disagreed on this target.
    """
    store.sample("s1", n_claims=1)
    store.label("claim_support", "ann1", "s1", "supported", claim=0)
    store.label("claim_support", "ann2", "s1", "unsupported", claim=0)
    # boss decided (row 1) and revised at minute 30; chief decided at minute 10 (row 2, the higher id).
    _decide(store, session, "claim_support", "s1", [("boss", "unsupported", 30), ("chief", "supported", 10)], claim=0)
    store.verdict("j", "claim_support", "s1", "unsupported", claim=0)
    store.verdict("k", "claim_support", "s1", "supported", claim=0)
    store.commit()
    task = lookup.task(session, "claim_support")
    key = store._target(task, "s1", claim=0)["target_key"]

    frame = categorical_gold(labels_frame(session, lookup.dataset(session, "d"), task)).set_index("target_key")
    assert (frame.loc[key, "gold"], frame.loc[key, "gold_source"]) == ("unsupported", "adjudicated")
    assert human_gold(session, task, key)[0] == "unsupported"  # the few-shot value
    report = build_report(session, "d", "j", options=FAST)
    [row] = report.rows["claim_support"]
    assert (row.gold, row.gold_source, row.agree) == ("unsupported", "adjudicated", True)
    # compare reads its own lean frame: the same gold (j is right, k is wrong on this target)
    result = compare_judges(session, "d", "j", "k", options=FAST)
    assert result["tasks"]["claim_support"]["accuracy"] == {"a": 1.0, "b": 0.0}


def test_a_few_shot_carries_the_gold_the_report_scores_against(store, session):
    """Two adjudications at the same time: the later row is in force (the few-shot code took the earlier one)."""
    store.sample("s1", n_claims=1)
    _decide(store, session, "claim_support", "s1", [("boss", "unsupported", 0), ("chief", "supported", 0)], claim=0)
    result = save_version(session, "p", task="claim_support", few_shots=[FewShotSpec("s1:0")])
    session.commit()
    [shot] = session.exec(select(FewShot).where(FewShot.version_id == result.version.id)).all()
    task = lookup.task(session, "claim_support")
    gold = categorical_gold(labels_frame(session, lookup.dataset(session, "d"), task)).set_index("target_key")
    assert shot.value == gold.loc[shot.target_key, "gold"] == "supported"


@pytest.mark.parametrize(
    ("votes", "gold", "source"),
    [
        (["supported", "supported", "unsupported"], "supported", "majority"),
        (["supported", "unsupported"], None, "tie"),
        (["supported"], "supported", "majority"),
    ],
)
def test_without_adjudication_the_majority_and_a_tie_gives_none(store, session, votes, gold, source):
    store.sample("s1", n_claims=1)
    for i, value in enumerate(votes):
        store.label("claim_support", f"ann{i}", "s1", value, claim=0)
    store.commit()
    task = lookup.task(session, "claim_support")
    key = store._target(task, "s1", claim=0)["target_key"]
    row = categorical_gold(labels_frame(session, lookup.dataset(session, "d"), task)).set_index("target_key").loc[key]
    assert (row["gold"], row["gold_source"]) == (gold, source)
    assert human_gold(session, task, key)[0] == gold


def test_scores_take_the_mean_unless_adjudicated(store, session):
    store.sample("s1")
    store.sample("s2")
    for annotator, value in (("ann1", 2), ("ann2", 5)):
        store.label("answer_quality", annotator, "s1", value)
        store.label("answer_quality", annotator, "s2", value)
    store.commit()
    _decide(store, session, "answer_quality", "s2", [("boss", 4, 0)])
    task = lookup.task(session, "answer_quality")
    gold = numeric_gold(labels_frame(session, lookup.dataset(session, "d"), task)).set_index("sample_id")
    s1, s2 = (store.samples[s].id for s in ("s1", "s2"))
    assert (gold.loc[s1, "gold"], gold.loc[s1, "gold_source"]) == (3.5, "mean")
    assert (gold.loc[s2, "gold"], gold.loc[s2, "gold_source"]) == (4.0, "adjudicated")
    assert human_gold(session, task, f"sample:{s1}")[0] == "3.5"
    assert human_gold(session, task, f"sample:{s2}")[0] == "4"
