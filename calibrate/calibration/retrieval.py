"""The report's retrieval section: Recall/Precision/F1@K, MRR and nDCG@K per query, then their means.

From the samples' `retrieved_ids` and `relevant_ids` when any sample carries both, else from
the context_relevance gold (each sample's retrieved contexts in rank order).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session

from calibrate import stats
from calibrate.db import read_frame
from calibrate.models import (
    Dataset,
    Sample,
)
from calibrate.reasons import Reason, join, noted

RETRIEVAL_METRICS = {"recall": "recall", "precision": "precision", "f1": "f1", "ndcg": "ndcg", "mrr": "rr"}


# The sources in words: the reasons retrieval_source_<source> (calibrate/reasons.py).


def id_lists(session: Session, dataset: Dataset) -> tuple[np.ndarray, list, list, int]:
    """Return the samples carrying both id lists (ids, retrieved lists, relevant lists) and how many lack them.

    Only the samples whose two columns are not NULL are read (a dataset without id lists: a count, not 10^5 rows).
    """
    total = session.execute(sa_select(func.count()).select_from(Sample).where(Sample.dataset_id == dataset.id)).scalar_one()
    query = sa_select(Sample.id, Sample.retrieved_ids, Sample.relevant_ids).where(
        Sample.dataset_id == dataset.id, Sample.retrieved_ids.is_not(None), Sample.relevant_ids.is_not(None))
    frame = read_frame(session, query, ["sample_id", "retrieved", "relevant"])
    ids, retrieved, relevant = [], [], []
    for sid, ret, rel in zip(frame["sample_id"], frame["retrieved"], frame["relevant"], strict=True):
        # SQLite hands JSON columns over as text (JSON null included); other drivers parse them.
        ret = json.loads(ret) if isinstance(ret, str) else ret
        rel = json.loads(rel) if isinstance(rel, str) else rel
        if isinstance(ret, list) and isinstance(rel, list):
            ids.append(sid)
            retrieved.append(ret)
            relevant.append(rel)
    return np.asarray(ids, dtype=np.int64), retrieved, relevant, int(total) - len(ids)


def _section_from(k: int, source: str, samples: np.ndarray, rel: np.ndarray, n_relevant: np.ndarray,
                       n_skipped: int) -> dict:
    per_query = stats.per_query_metrics(rel, n_relevant, k=k)
    means = stats.retrieval.summarize(per_query, n_relevant)
    n_no_relevant = int(np.count_nonzero(n_relevant <= 0))
    section: dict[str, Any] = {
        "k": k, "source": source, "n": len(samples) - n_no_relevant, "n_no_relevant": n_no_relevant,
        "n_skipped": n_skipped,
    }
    for key, name in (("recall_at_k", "recall"), ("precision_at_k", "precision"), ("f1_at_k", "f1"), ("mrr", "rr"),
                      ("ndcg_at_k", "ndcg")):
        section[key] = means[name].value
    notes = [Reason(f"retrieval_source_{source}")]
    if n_no_relevant:
        notes.append(Reason("retrieval_no_relevant", count=n_no_relevant))
    if section["n"] == 0:
        notes.append(Reason("retrieval_none_relevant"))
    section.update(noted(join(notes)))
    return section


def retrieval_section(session: Session, dataset: Dataset, k: int, gold_relevance: tuple[np.ndarray, np.ndarray] | None,
               n_samples: int) -> dict | None:
    """Return the report's retrieval section: from the samples' id lists, else from context_relevance gold."""
    ids, retrieved, relevant, skipped = id_lists(session, dataset)
    if len(ids):
        rel, n_relevant = stats.relevance_matrix(retrieved, relevant)
        return _section_from(k, "ids", ids, rel, n_relevant, skipped)
    if gold_relevance is not None and len(gold_relevance[0]):
        samples, rel = gold_relevance
        return _section_from(k, "context_relevance_gold", samples, rel, rel.sum(axis=1), n_samples - len(samples))
    return None
