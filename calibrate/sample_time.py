"""A sample's time: the one rule the live estimator's windows, retention and a WHERE's `started_at` terms read.

A sample's time is its `metadata.started_at` when that is an ISO 8601 time within calibrate.bounds
([1970, 2200) UTC; a time without an offset is UTC), else the time the sample row was created, in UTC.
`calibrate monitor` puts a sample in a window by it (calibration/live.py), `calibrate traces purge`
calls a sample old by it (ingest/traces/retention.py), and `--where started_at>=DATE` compares it
(where.py). A low floor beside `datasets` and `gold`, so the ingest floor and calibration share it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import select
from sqlmodel import Session

from calibrate.bounds import EARLIEST, LATEST
from calibrate.models import Sample

__all__ = ["sample_times", "time_of"]


def time_of(started_at: pd.Series, created_at: pd.Series) -> np.ndarray:
    """Return each sample's time (datetime64[us, UTC] values) from its `metadata.started_at` as stored (text, a number,
    None) and its creation time, by the rule of the module docstring."""
    started = pd.to_datetime(started_at.astype(object).astype("string"), errors="coerce", utc=True,
                             format="ISO8601").dt.as_unit("us")
    started = started.where((started >= pd.Timestamp(EARLIEST)) & (started < pd.Timestamp(LATEST)))
    created = pd.to_datetime(created_at, errors="coerce", utc=True).dt.as_unit("us")
    return started.fillna(created).to_numpy()


def sample_times(session: Session, dataset_id: int, *conditions: Any) -> pd.DataFrame:
    """Return the dataset's samples (those meeting the SQL `conditions` on the sample table, if any) with their time:
    index sample id, column `time` (UTC)."""
    rows = session.execute(select(Sample.id, Sample.meta["started_at"].as_string(), Sample.created_at)
                           .where(Sample.dataset_id == dataset_id, *conditions)).all()
    frame = pd.DataFrame(rows, columns=["sample_id", "started_at", "created_at"])
    return pd.DataFrame({"time": time_of(frame["started_at"], frame["created_at"])},
                        index=frame["sample_id"].astype("int64").to_numpy())
