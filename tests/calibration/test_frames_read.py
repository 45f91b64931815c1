"""The report's read of labels and verdicts (issue 34): in chunks, text as categoricals, one key code for both."""

from __future__ import annotations

import pandas as pd
import pytest
from report_world import DATASET, JUDGE, fill_world
from sqlmodel import Session

from calibrate import lookup
from calibrate.calibration.frames import labels_frame, shared_keys, verdicts_frame


@pytest.fixture
def world(db_url):
    fill_world(db_url.removeprefix("sqlite:///"), 9, 4, seed=5, third=0.5, adjudicated=0.2, stale=0.2, unparsed=0.2)
    return db_url


def values(frame: pd.DataFrame) -> pd.DataFrame:
    """Return the frame as Python objects, a missing value None (a chunk whose updated_at are all NULL reads them as
    objects, the whole table as text: the values are compared, not the dtypes)."""
    frame = frame.astype(object)
    return frame.where(frame.notna(), None)


def test_a_chunked_categorical_read_gives_the_plain_reads_rows_and_values(world, engine, monkeypatch):
    monkeypatch.setattr("calibrate.db.READ_CHUNK_ROWS", 7)  # 36 claims, ~100 labels: many chunks, categories differing
    with Session(engine) as session:
        dataset, task, judge = lookup.dataset(session, DATASET), lookup.task(session, "claim_support"), lookup.judge(session, JUDGE)
        plain, coded = labels_frame(session, dataset, task), labels_frame(session, dataset, task, categorical=True)
        plain_v, coded_v = verdicts_frame(session, dataset, task, judge), verdicts_frame(session, dataset, task, judge, categorical=True)
    assert len(plain) > 7 * 10
    for name in ("target_key", "annotator", "value"):
        assert isinstance(coded[name].dtype, pd.CategoricalDtype)
        assert list(coded[name].cat.categories) == sorted(coded[name].cat.categories)
    assert isinstance(coded_v["target_key"].dtype, pd.CategoricalDtype)
    assert not isinstance(coded_v["value"].dtype, pd.CategoricalDtype)  # a verdict's value may be missing: kept as read
    pd.testing.assert_frame_equal(values(coded), values(plain))
    pd.testing.assert_frame_equal(values(coded_v), values(plain_v))
    assert coded_v["value"].isna().any() and coded["adjudicated"].any() and coded["stale"].any()


def test_shared_keys_give_labels_and_verdicts_one_sorted_code_per_target(world, engine):
    with Session(engine) as session:
        dataset, task, judge = lookup.dataset(session, DATASET), lookup.task(session, "claim_support"), lookup.judge(session, JUDGE)
        labels = labels_frame(session, dataset, task, categorical=True)
        verdicts = verdicts_frame(session, dataset, task, judge)  # a text key and a categorical one unite alike
    labels = labels[labels["target_key"] != labels["target_key"].iloc[0]]  # a target only the verdicts have
    shared_l, shared_v = shared_keys(labels, verdicts)
    categories = list(shared_l["target_key"].cat.categories)
    assert categories == list(shared_v["target_key"].cat.categories) == sorted(set(verdicts["target_key"]))
    assert shared_l["target_key"].tolist() == labels["target_key"].astype(str).tolist()
    assert shared_v["target_key"].tolist() == verdicts["target_key"].tolist()
    merged = shared_l.merge(shared_v[["target_key", "value"]], on="target_key", suffixes=("", "_judge"))
    assert isinstance(merged["target_key"].dtype, pd.CategoricalDtype) and len(merged) == len(shared_l)
    none, empty = shared_keys(None, labels.iloc[:0])
    assert none is None and empty.empty
