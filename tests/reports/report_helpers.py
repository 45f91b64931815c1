"""Helpers of the report tests: hostile text and `fill`, a store of three tasks' labels and verdicts."""

from __future__ import annotations

import random

HOSTILE = "<script>alert(1)</script>"


def fill(store, *, n=24, seed=0, annotators=("ann1", "ann2"), judge="j"):
    """Store claims, answer scores and contexts with two annotators and a judge that mostly agrees.

    Sample s0's first claim has an unparsed verdict; s1's first claim is not_applicable for both
    annotators; the rest is random with a fixed seed, so ties appear.
    """
    rng = random.Random(seed)
    for i in range(n):
        sid = f"s{i}"
        store.sample(sid, 3, 2, meta={"topic": "abc"[i % 3]})
        for c in range(3):
            truth = "supported" if rng.random() < 0.6 else "unsupported"
            if i == 1 and c == 0:
                truth = "not_applicable"
            for a in annotators:
                flip = rng.random() < 0.1 and truth != "not_applicable"
                store.label("claim_support", a, sid, ("unsupported" if truth == "supported" else "supported") if flip else truth, claim=c)
            if i == 0 and c == 0:
                store.verdict(judge, "claim_support", sid, None, claim=c)
            else:
                store.verdict(judge, "claim_support", sid, truth if rng.random() < 0.85 else "supported", claim=c)
        q = rng.randint(1, 5)
        for a in annotators:
            store.label("answer_quality", a, sid, min(5, max(1, q + rng.choice([0, 0, 1, -1]))))
        store.verdict(judge, "answer_quality", sid, min(5, max(1, q + rng.choice([0, 1, -1]))))
        for r in range(2):
            v = rng.choice(["relevant", "not_relevant"])
            for a in annotators:
                store.label("context_relevance", a, sid, v, context=r)
            store.verdict(judge, "context_relevance", sid, v if rng.random() < 0.9 else "relevant", context=r)
