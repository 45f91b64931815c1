"""The production queues' streams as data: which expert was given which sample in which stream (issue 24/25).

`calibrate queue auto` fills the experts' queues in two streams kept apart in the data: the
**audit** (a random draw, its selection probability `audit_prob` stored on the assignment) and
the **triage** (thumbs-down and the judge's least certain targets, chosen on purpose). Only
audit labels may feed an estimate that assumes a known sampling design (`calibrate monitor`,
`calibrate estimate`); a triage label never does (docs/production.md, docs/statistics.md §18).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from calibrate.models import Assignment, Dataset, Sample, User

__all__ = ["audit_probabilities", "stream_assignments", "stream_labels"]


def stream_assignments(session: Session, dataset: Dataset) -> pd.DataFrame:
    """Return one row per stream assignment: sample_id, username, stream, audit_prob."""
    rows = session.execute(
        sa_select(Assignment.sample_id, User.username, Assignment.stream, Assignment.audit_prob)
        .join(Sample, Sample.id == Assignment.sample_id).join(User, User.id == Assignment.user_id)
        .where(Sample.dataset_id == dataset.id, col(Assignment.stream).is_not(None))).all()
    return pd.DataFrame(rows, columns=["sample_id", "annotator", "stream", "audit_prob"])


def stream_labels(labels: pd.DataFrame, streams: pd.DataFrame, stream: str) -> pd.DataFrame:
    """Return the labels of one stream: an expert's label on a sample she has an assignment of that stream for
    (audit: and the adjudicated labels on audit samples)."""
    if labels.empty or streams.empty:
        return labels.iloc[0:0]
    mine = streams[streams["stream"] == stream]
    pairs = set(zip(mine["sample_id"].astype(int), mine["annotator"], strict=True))
    keep = np.array([(int(s), a) in pairs for s, a in zip(labels["sample_id"], labels["annotator"], strict=True)], dtype=bool)
    if stream == "audit":
        keep |= labels["adjudicated"].to_numpy(dtype=bool) & labels["sample_id"].astype(int).isin(set(mine["sample_id"].astype(int))).to_numpy()
    return labels[keep]


def audit_probabilities(streams: pd.DataFrame) -> pd.Series:
    """Return each audit-drawn sample's selection probability (sample_id → audit_prob)."""
    if streams.empty:
        return pd.Series(dtype=float)
    return streams[streams["stream"] == "audit"].groupby("sample_id")["audit_prob"].first()
