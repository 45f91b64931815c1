"""The report's read of labels and verdicts (issue 34): as integers in chunks, one key code for both frames."""

from __future__ import annotations

import sqlite3
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from report_world import DATASET, JUDGE, fill_world
from sqlalchemy import select, text, update
from sqlmodel import Session

from calibrate import lookup
from calibrate.calibration import frames
from calibrate.calibration import report as report_module
from calibrate.calibration.frames import coded_frames, has_rows, labels_frame, verdicts_frame
from calibrate.claimsets import RANGE_READ_SPAN, source_counts
from calibrate.db import BOOL, CATEGORY, INFERRED, INT, SHARED_TEXT, read_columns
from calibrate.models import Label, Sample


@pytest.fixture
def world(db_url):
    fill_world(db_url.removeprefix("sqlite:///"), 9, 4, seed=5, third=0.5, adjudicated=0.2, stale=0.2, unparsed=0.2)
    return db_url


def values(frame: pd.DataFrame) -> pd.DataFrame:
    """Return the frame as Python objects, a missing value None (a chunk whose updated_at are all NULL reads them as
    objects, the whole table as text: the values are compared, not the dtypes)."""
    frame = frame.astype(object)
    return frame.where(frame.notna(), None)


def read(engine, judged: bool = True):
    with Session(engine) as session:
        dataset, task, judge = lookup.dataset(session, DATASET), lookup.task(session, "claim_support"), lookup.judge(session, JUDGE)
        plain, plain_v = labels_frame(session, dataset, task), verdicts_frame(session, dataset, task, judge)
        coded, coded_v = coded_frames(session, dataset, task, judge if judged else None)
    return plain, plain_v, coded, coded_v


def test_the_coded_read_gives_the_plain_reads_rows_and_values_with_one_sorted_key(world, engine, monkeypatch):
    monkeypatch.setattr("calibrate.db.READ_CHUNK_ROWS", 7)  # 36 claims, ~100 labels: many chunks, categories differing
    plain, plain_v, coded, coded_v = read(engine)
    assert len(plain) > 7 * 10
    for name in ("target_key", "annotator", "value"):
        assert isinstance(coded[name].dtype, pd.CategoricalDtype)
        assert list(coded[name].cat.categories) == sorted(coded[name].cat.categories)
    assert not isinstance(coded_v["value"].dtype, pd.CategoricalDtype)  # a verdict's value may be missing: kept as read
    # one key dtype for both: the text keys of either, sorted as text ("claim:10" before "claim:9")
    assert coded["target_key"].dtype == coded_v["target_key"].dtype
    categories = list(coded["target_key"].cat.categories)
    assert categories == sorted(set(plain["target_key"]) | set(plain_v["target_key"]))
    assert any(len(a) > len(b) for a, b in zip(categories, categories[1:], strict=False))  # ids of 1 and 2 digits mix
    pd.testing.assert_frame_equal(values(coded), values(plain))
    pd.testing.assert_frame_equal(values(coded_v), values(plain_v))
    assert coded_v["value"].isna().any() and coded["adjudicated"].any() and coded["stale"].any()
    merged = coded.merge(coded_v[["target_key", "value"]], on="target_key", suffixes=("", "_judge"))
    assert isinstance(merged["target_key"].dtype, pd.CategoricalDtype)


def test_a_label_whose_key_is_not_its_targets_id_keeps_its_key(world, engine):
    """A key is what a label means: a row whose key is not "claim:<its claim_id>" (or has no claim id) reads as written."""
    with Session(engine) as session:
        first, second = session.execute(Label.__table__.select().order_by(Label.id).limit(2)).all()
        session.execute(update(Label).where(Label.id == first.id).values(claim_id=None))
        session.execute(update(Label).where(Label.id == second.id).values(target_key="claim:99999"))
        session.commit()
    plain, plain_v, coded, coded_v = read(engine)
    assert "claim:99999" in set(coded["target_key"])
    pd.testing.assert_frame_equal(values(coded), values(plain))
    pd.testing.assert_frame_equal(values(coded_v), values(plain_v))
    assert list(coded["target_key"].cat.categories) == sorted(set(plain["target_key"]) | set(plain_v["target_key"]))


def test_without_a_judge_only_labels_and_an_empty_task_reads_empty(world, engine):
    plain, _, coded, none = read(engine, judged=False)
    assert none is None
    pd.testing.assert_frame_equal(values(coded), values(plain))
    with Session(engine) as session:
        dataset, judge = lookup.dataset(session, DATASET), lookup.judge(session, JUDGE)
        labels, verdicts = coded_frames(session, dataset, lookup.task(session, "answer_quality"), judge)
    assert labels.empty and verdicts.empty
    assert list(labels.columns)[0] == "target_key" and list(verdicts.columns)[0] == "target_key"


def test_a_task_with_nothing_to_report_costs_one_query_and_no_read(world, engine, monkeypatch):
    read_tasks = []
    real = report_module.coded_frames

    def counting(session, dataset, task, judge):
        read_tasks.append(task.name)
        return real(session, dataset, task, judge)

    monkeypatch.setattr(report_module, "coded_frames", counting)
    with Session(engine) as session:
        dataset, judge = lookup.dataset(session, DATASET), lookup.judge(session, JUDGE)
        assert has_rows(session, dataset, lookup.task(session, "claim_support"), judge)
        assert has_rows(session, dataset, lookup.task(session, "claim_support"), None)  # labels alone
        assert not has_rows(session, dataset, lookup.task(session, "answer_quality"), judge)
        report = report_module.build_report(session, DATASET, JUDGE)
    assert read_tasks == ["claim_support"] and list(report.data["tasks"]) == ["claim_support"]


def test_claim_source_counts_of_some_samples_read_their_range_once(world, engine):
    """claimsets.source_counts of a set of samples (a report's section) counts exactly those samples' sources."""
    with Session(engine) as session:
        ids = session.execute(select(Sample.id).order_by(Sample.id)).scalars().all()
        session.execute(text("UPDATE sample SET claim_source = 'expert' WHERE id % 3 = 0"))
        chosen = set(ids[1::2])
        expected: dict[str, int] = {}
        for sid, source in session.execute(select(Sample.id, Sample.claim_source)).all():
            if sid in chosen:
                expected[source] = expected.get(source, 0) + 1
        assert len(expected) == 2
        assert source_counts(session, chosen) == dict(sorted(expected.items()))
        assert source_counts(session, set()) == {}
        assert all(type(n) is int for n in source_counts(session, chosen).values())  # JSON-ready
        sparse = {ids[0], ids[-1]}  # far apart: read one by one, not the whole range (a watcher's few new samples)
        assert ids[-1] - ids[0] >= RANGE_READ_SPAN * len(sparse)
        expected = dict(sorted(Counter(s for sid, s in session.execute(select(Sample.id, Sample.claim_source)).all()
                                       if sid in sparse).items()))
        assert source_counts(session, sparse) == expected


def test_parts_read_by_id_lists_when_sparse_and_retired_parts_stay_inactive(world, engine, monkeypatch):
    """The parts' positions and active flags read once (place_parts), by IN lists when the ids are too sparse for one
    range read, give what the per-row join gives: retired claims inactive, a label without a claim no position."""
    with Session(engine) as session:
        session.execute(text("UPDATE claim SET active = 0 WHERE id % 5 = 0"))
        first = session.execute(Label.__table__.select().order_by(Label.id).limit(1)).one()
        session.execute(update(Label).where(Label.id == first.id).values(claim_id=None))
        session.commit()
    dense = read(engine)
    monkeypatch.setattr(frames.IdIndex, "DENSE", 0)
    monkeypatch.setattr(frames.IdIndex, "SLACK", 0)
    monkeypatch.setattr(frames, "PARTS_IN_LIST", 3)
    for plain, plain_v, coded, coded_v in (dense, read(engine)):
        assert not coded_v["active"].all() and coded_v["active"].any()
        assert coded["position"].isna().sum() == 1
        pd.testing.assert_frame_equal(values(coded), values(plain))
        pd.testing.assert_frame_equal(values(coded_v), values(plain_v))


@pytest.mark.parametrize("dense", [True, False])
def test_an_id_index_finds_each_id_among_the_distinct_ones(dense, monkeypatch):
    if not dense:
        monkeypatch.setattr(frames.IdIndex, "DENSE", 0)
        monkeypatch.setattr(frames.IdIndex, "SLACK", 0)
    rng = np.random.default_rng(1)
    values = rng.choice([0, 3, 7, 8, 40, 41, 1000], size=200)
    index = frames.IdIndex(values)
    assert index.ids.tolist() == sorted(set(values.tolist()))
    assert (index.ids[index.places(values)] == values).all()
    assert frames.IdIndex(np.array([], dtype=np.int64)).ids.tolist() == []


def test_a_column_read_types_each_kind_as_a_plain_read_would(engine, monkeypatch):
    """db.read_columns: ints and booleans straight, few-valued text as sorted categoricals (NULL missing) or shared text,
    anything else as pandas types it; chunks of any size give the same frame; an empty read has the columns."""
    monkeypatch.setattr("calibrate.db.READ_CHUNK_ROWS", 2)
    rows = [(3, 1, "b", None, "x", None, 1.5), (1, 0, None, None, "y", "t", None), (2, 1, "a", None, None, None, 2.0)]
    values_sql = " UNION ALL ".join(
        "SELECT " + ", ".join("NULL" if v is None else repr(v) for v in row) for row in rows)
    query = select(text("*")).select_from(text(f"({values_sql})"))
    kinds = {"n": INT, "flag": BOOL, "cat": CATEGORY, "none": SHARED_TEXT, "shared": SHARED_TEXT, "rare": INFERRED,
             "score": INFERRED}
    with Session(engine) as session:
        frame = read_columns(session, query, kinds)
        empty = read_columns(session, select(text("1 AS n")).where(text("0")), {"n": INT})
    assert frame["n"].tolist() == [3, 1, 2] and frame["n"].dtype == np.int64
    assert frame["flag"].tolist() == [True, False, True]
    assert list(frame["cat"].cat.categories) == ["a", "b"] and frame["cat"].tolist()[0] == "b"
    assert frame["cat"].isna().tolist() == [False, True, False]
    assert frame["none"].tolist() == [None, None, None] and frame["none"].dtype == object
    assert frame["shared"].tolist()[:2] == ["x", "y"] and pd.isna(frame["shared"][2])
    assert frame["shared"][0] is frame["shared"].array[0]  # rows point at one string per value
    assert frame["rare"].isna().tolist() == [True, False, True]
    assert frame["score"].dtype == float and frame["score"].isna().tolist() == [False, True, False]
    assert list(empty.columns) == ["n"] and empty.empty


def test_a_label_whose_annotator_is_gone_is_left_out_as_the_plain_read_leaves_it(world, engine):
    """With foreign keys off a user row can go while its labels stay: the coded read names the others and leaves those
    labels out, as labels_frame's join does (it used to fail on the unknown id)."""
    connection = sqlite3.connect(world.removeprefix("sqlite:///"))
    with connection:  # foreign keys are off on a plain connection
        gone = connection.execute("SELECT annotator_id FROM label ORDER BY id LIMIT 1").fetchone()[0]
        connection.execute("DELETE FROM user WHERE id = ?", (gone,))
    connection.close()
    plain, plain_v, coded, coded_v = read(engine)
    assert len(coded) == len(plain) > 0
    pd.testing.assert_frame_equal(values(coded), values(plain))
    pd.testing.assert_frame_equal(values(coded_v), values(plain_v))


def test_a_wide_read_fetches_fewer_rows_at_once(monkeypatch):
    """Chunks are sized by memory: a read of many columns fetches fewer rows a time, never none, never past the cap."""
    from calibrate import db

    assert db.chunk_rows(3) == db.READ_CHUNK_ROWS
    assert 0 < db.chunk_rows(40) < db.READ_CHUNK_ROWS
    assert db.chunk_rows(40) * (db.ROW_BYTES + 40 * db.VALUE_BYTES) <= db.READ_CHUNK_BYTES
    monkeypatch.setattr(db, "READ_CHUNK_BYTES", 10)
    assert db.chunk_rows(5) == 1


def test_a_dataset_read_by_its_id_range_or_by_the_join_gives_the_same_rows(world, engine):
    """The coded read restricts rows to the dataset by its sample-id range when the ids are exactly that range, else by
    the join to `sample`: with a sample of the range moved to another dataset, the join is used and that sample's
    labels and verdicts are left out, as the plain read leaves them out."""
    with Session(engine) as session:
        assert frames.dense_sample_range(session, lookup.dataset(session, DATASET)) is not None
    dense = read(engine)
    for plain, coded in ((dense[0], dense[2]), (dense[1], dense[3])):
        pd.testing.assert_frame_equal(values(coded), values(plain))
    with Session(engine) as session:
        ids = session.execute(select(Sample.id).order_by(Sample.id)).scalars().all()
        session.execute(text("INSERT INTO dataset (name, description, source, is_demo, created_at) "
                             "SELECT 'elsewhere', '', '', 0, created_at FROM dataset LIMIT 1"))
        other = session.execute(text("SELECT id FROM dataset WHERE name = 'elsewhere'")).scalar_one()
        session.execute(text("UPDATE sample SET dataset_id = :d WHERE id = :s"), {"d": other, "s": ids[len(ids) // 2]})
        session.commit()
        assert frames.dense_sample_range(session, lookup.dataset(session, DATASET)) is None
    plain, plain_v, coded, coded_v = read(engine)
    assert len(coded) < len(dense[2]) and len(coded_v) < len(dense[3])
    pd.testing.assert_frame_equal(values(coded), values(plain))
    pd.testing.assert_frame_equal(values(coded_v), values(plain_v))
