"""A dataset for the golden-set tests (tests/loop/test_golden.py, tests/test_postgres.py), written in one transaction.

200 expert-labelled samples in split test (topics a:80 b:60 c:40 d:20) and 300 production traces
(metadata.source=live; topics a:60 b:60 c:90 d:90), one claim each; two experts label the golden
claims, judge `j` agrees with the gold on about 85 % of them.
"""

from __future__ import annotations

import numpy as np
from sqlmodel import select

from calibrate.db import write_session
from calibrate.models import Claim, Dataset, Judge, Label, Sample, Task, User, Verdict, target_key

DS = "support"
GOLDEN_TOPICS = {"a": 80, "b": 60, "c": 40, "d": 20}
LIVE_TOPICS = {"a": 60, "b": 60, "c": 90, "d": 90}
REFRESH = {"source": "metadata.source=live", "renew": 0.2, "anchor_share": 0.5, "strata": "metadata.topic", "seed": 7}

def build(engine) -> None:
    """Write the dataset (one transaction)."""
    rng = np.random.default_rng(26)
    with write_session(engine) as session:
        task = session.exec(select(Task).where(Task.name == "claim_support")).one()
        users = [User(username=name, role="annotator") for name in ("ana", "ben", "cleo")]
        session.add_all(users)
        dataset = Dataset(name=DS, source="test")
        session.add(dataset)
        judge = Judge(name="j", kind="imported")
        session.add(judge)
        session.flush()
        rows = [(f"g{i:03d}", topic, "test", None) for i, topic in enumerate(t for t, n in GOLDEN_TOPICS.items() for _ in range(n))]
        rows += [(f"p{i:03d}", topic, None, "live") for i, topic in enumerate(t for t, n in LIVE_TOPICS.items() for _ in range(n))]
        for external, topic, split, source in rows:
            meta = {"topic": topic, "trace_id": f"trace-{external}", **({"source": source} if source else {})}
            sample = Sample(dataset_id=dataset.id, external_id=external, question=f"What about {topic} number {external}?",
                            answer="A fact.", content_hash=external, segmenter="given", split=split, meta=meta)
            session.add(sample)
            session.flush()
            claim = Claim(sample_id=sample.id, index=0, text="A fact.", start=0, end=7)
            session.add(claim)
            session.flush()
            gold = "supported" if rng.random() < 0.6 else "unsupported"
            if split == "test":
                for user in users[:2]:
                    session.add(Label(task_id=task.id, sample_id=sample.id, claim_id=claim.id,
                                      target_key=target_key("claim", claim.id), annotator_id=user.id, value=gold))
            verdict = gold if rng.random() < 0.85 else ("unsupported" if gold == "supported" else "supported")
            session.add(Verdict(judge_id=judge.id, task_id=task.id, sample_id=sample.id, claim_id=claim.id,
                                target_key=target_key("claim", claim.id), value=verdict, source="import"))
