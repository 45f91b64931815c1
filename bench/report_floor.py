"""The report's floor: the core of `calibrate report` on claim_support in ~30 lines of numpy/pandas.

Reads the same SQLite file (label and verdict tables, integer claim ids) and computes what the report's core
computes on bench/bench_report_floor.py's world: the gold (two experts' agreed label; a tie gives none), Cohen's κ of
the judge against it (identical to the report's) and its 95% percentile cluster-bootstrap CI resampling samples
(2,000 resamples, per-sample contingency tables; another random stream, so within Monte-Carlo error of the report's).
Left out, on purpose: adjudications, stale labels, not_applicable and abstentions, few-shots, every other block of the
report (confusion, per label, per annotator, human agreement and its ceiling, the alt-test, the estimate, RAG,
claim sources, warnings) and the JSON. Prints {"kappa", "ci"} as JSON.

    .venv/bin/python bench/report_floor.py FILE.sqlite
"""

import json
import sqlite3
import sys

import numpy as np
import pandas as pd

con = sqlite3.connect(sys.argv[1])
task = "(SELECT id FROM task WHERE name = 'claim_support')"
labels = pd.read_sql(f"SELECT claim_id, sample_id, annotator_id, value FROM label WHERE task_id = {task}", con)
verdicts = pd.read_sql(f"SELECT claim_id, value FROM verdict WHERE task_id = {task} AND status = 'ok'", con)
codes = {"supported": 0, "unsupported": 1}
labels["code"], verdicts["code"] = labels["value"].map(codes), verdicts["value"].map(codes)
votes = labels.groupby("claim_id").agg(lo=("code", "min"), hi=("code", "max"), sample=("sample_id", "first"))
gold = votes[votes["lo"] == votes["hi"]]  # agreed; a tie leaves no gold
both = gold.join(verdicts.set_index("claim_id")["code"], how="inner")
k, cluster = 2, pd.factorize(both["sample"])[0]
tables = np.bincount(cluster * k * k + both["lo"].to_numpy() * k + both["code"].to_numpy(),
                     minlength=cluster.max() * k * k + k * k).reshape(-1, k * k).astype(float)


def kappa(t):  # t: (B, k*k) contingency tables
    t = t.reshape(-1, k, k) / t.reshape(-1, k * k).sum(axis=1).reshape(-1, 1, 1)
    po, pe = np.trace(t, axis1=1, axis2=2), (t.sum(axis=2) * t.sum(axis=1)).sum(axis=1)
    return (po - pe) / (1 - pe)


rng, g, out = np.random.default_rng(0), len(tables), []
for _ in range(20):  # 20 batches of 100 resamples: counts of each sample drawn, then the tables they make
    draws = rng.integers(0, g, size=(100, g))
    counts = np.stack([np.bincount(row, minlength=g) for row in draws]).astype(float)
    out.append(kappa(counts @ tables))
print(json.dumps({"kappa": float(kappa(tables.sum(axis=0))[0]),
                  "ci": np.percentile(np.concatenate(out), [2.5, 97.5]).tolist()}))
