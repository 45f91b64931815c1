"""retrieval.id_lists reads only the samples whose two id lists are not NULL (issue 34): the same lists and counts."""

from __future__ import annotations

import json

import numpy as np
from sqlalchemy import select as sa_select
from sqlalchemy import text
from sqlmodel import select

from calibrate.calibration.retrieval import id_lists
from calibrate.db import read_frame
from calibrate.models import Dataset, Sample


def reference_id_lists(session, dataset):
    """The previous read: every sample of the dataset, the lists kept where both are lists."""
    rows = read_frame(session, sa_select(Sample.id, Sample.retrieved_ids, Sample.relevant_ids)
                      .where(Sample.dataset_id == dataset.id), ["sample_id", "retrieved", "relevant"])
    ids, retrieved, relevant = [], [], []
    for sid, ret, rel in zip(rows["sample_id"], rows["retrieved"], rows["relevant"], strict=True):
        ret = json.loads(ret) if isinstance(ret, str) else ret
        rel = json.loads(rel) if isinstance(rel, str) else rel
        if isinstance(ret, list) and isinstance(rel, list):
            ids.append(sid)
            retrieved.append(ret)
            relevant.append(rel)
    return ids, retrieved, relevant, len(rows) - len(ids)


def test_id_lists_reads_the_samples_with_both_lists_and_counts_the_others(session, make_sample):
    rng = np.random.default_rng(2)
    kinds = [["a", "b"], [], None, {"x": 1}, "a"]
    for dataset in ("d", "other"):
        for i in range(40):
            ret, rel = kinds[rng.integers(len(kinds))], kinds[rng.integers(len(kinds))]
            make_sample(dataset=dataset, external_id=f"s{i}", retrieved_ids=ret, relevant_ids=rel)
    # a JSON null stored as text, and SQL NULLs: both lack a list
    session.execute(text("UPDATE sample SET retrieved_ids = 'null' WHERE id % 7 = 1"))
    session.execute(text("UPDATE sample SET relevant_ids = NULL WHERE id % 11 = 2"))
    session.execute(text("UPDATE sample SET retrieved_ids = NULL WHERE id % 5 = 3"))
    session.commit()
    assert session.execute(text("SELECT count(*) FROM sample WHERE retrieved_ids IS NULL")).scalar() > 0
    for dataset in session.exec(select(Dataset)).all():
        ids, retrieved, relevant, skipped = id_lists(session, dataset)
        ref_ids, ref_retrieved, ref_relevant, ref_skipped = reference_id_lists(session, dataset)
        order = np.argsort(ids)
        assert ids[order].tolist() == sorted(ref_ids) and len(ref_ids) > 3
        by_id = dict(zip(ref_ids, zip(ref_retrieved, ref_relevant, strict=True), strict=True))
        assert [(retrieved[i], relevant[i]) for i in order] == [by_id[sid] for sid in sorted(ref_ids)]
        assert skipped == ref_skipped > 3 and isinstance(skipped, int)
    empty = Dataset(name="empty", source="test")
    session.add(empty)
    session.commit()
    ids, retrieved, relevant, skipped = id_lists(session, empty)
    assert ids.size == 0 and retrieved == relevant == [] and skipped == 0
