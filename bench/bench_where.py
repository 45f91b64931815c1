"""Benchmark: the one WHERE grammar (calibrate/where.py) on 10^5 production-like samples, SQL against the Python filter
it replaced.

The database: N samples (default 100,000) with `metadata` {topic (7 values), tier, started_at (a day of 2026)}, an
audit or triage assignment on every 10th sample and a label on every 20th, written with bulk SQL. Timed, best of
`--repeat` runs each:

- baseline: the old `estimate --where metadata.topic=t3` path — read every sample's id and whole metadata, decode the
  JSON, compare in Python (what calibration/estimate.py's where_samples did);
- `select_ids` on the same term (SQL: json_type/json_extract), on `metadata.topic=t3&labelled&stream=audit`
  (EXISTS sub-queries), and on `metadata.topic=t3&started_at>=2026-06-01` (SQL, then the time rule in Python on the
  rows left).

Each must select the same samples as a plain Python reading of the same data. Run from the project root::

    .venv/bin/python bench/bench_where.py            # print the report
    .venv/bin/python bench/bench_where.py --write    # also write bench/results/where.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import select
from sqlmodel import Session

from calibrate.db import dispose_engine, get_engine
from calibrate.models import Dataset, Sample
from calibrate.where import select_ids

ROOT = Path(__file__).resolve().parents[1]


def build(path: Path, n: int) -> dict[str, list[int]]:
    """Create the database; return the expected ids of each timed WHERE (by a plain reading of what was written)."""
    env = {**os.environ, "CALIBRATE_INSTANCE": str(path.parent)}
    subprocess.run([sys.executable, "-m", "calibrate", "init", "--db", f"sqlite:///{path}"], check=True, env=env,
                   capture_output=True, cwd=ROOT)
    con = sqlite3.connect(path)
    now = "2026-12-01 00:00:00.000000"
    con.execute("INSERT INTO dataset (id, name, description, source, is_demo, created_at) VALUES (1, 'prod', '', 'bench', 0, ?)", (now,))
    con.execute("INSERT INTO user (id, username, display_name, role, active, created_at) VALUES (1, 'ana', '', 'annotator', 1, ?)", (now,))
    task = con.execute("SELECT id FROM task WHERE name = 'verdict_ok'").fetchone()
    task = task[0] if task else con.execute("SELECT id FROM task ORDER BY id LIMIT 1").fetchone()[0]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    metas = [{"topic": f"t{i % 7}", "tier": "pro" if i % 3 else "free",
              "started_at": (start + timedelta(days=i % 365, seconds=i)).isoformat()} for i in range(n)]
    con.executemany("INSERT INTO sample (id, dataset_id, external_id, question, answer, metadata, content_hash, segmenter, "
                    "created_at, updated_at) VALUES (?, 1, ?, 'q', 'a', ?, 'h', 'given', ?, ?)",
                    [(i + 1, f"s{i}", json.dumps(metas[i]), now, now) for i in range(n)])
    con.executemany("INSERT INTO assignment (sample_id, user_id, status, note, priority, stream, audit_prob, created_at, updated_at) "
                    "VALUES (?, 1, 'done', '', 0, ?, ?, ?, ?)",
                    [(i + 1, "audit" if i % 20 == 0 else "triage", 0.1 if i % 20 == 0 else None, now, now)
                     for i in range(0, n, 10)])
    con.executemany("INSERT INTO label (task_id, sample_id, target_key, annotator_id, value, rationale, adjudicated, stale, "
                    "stale_reason, source, created_at, updated_at) VALUES (?, ?, ?, 1, 'x', '', 0, 0, '', 'import', ?, ?)",
                    [(task, i + 1, f"sample:{i + 1}", now, now) for i in range(0, n, 20)])
    con.commit()
    con.close()
    june = datetime(2026, 6, 1, tzinfo=UTC)
    topic = [i + 1 for i in range(n) if metas[i]["topic"] == "t3"]
    return {"metadata.topic=t3": topic,
            "metadata.topic=t3&labelled&stream=audit": [i + 1 for i in range(0, n, 20) if metas[i]["topic"] == "t3"],
            "metadata.topic=t3&started_at>=2026-06-01": [i + 1 for i in range(n) if metas[i]["topic"] == "t3"
                                                         and datetime.fromisoformat(metas[i]["started_at"]) >= june]}


def old_where(session: Session, dataset: Dataset, key: str, value: str) -> list[int]:
    """The filter `estimate --where` used before: every sample's whole metadata decoded, compared in Python."""
    rows = session.execute(select(Sample.id, Sample.meta).where(Sample.dataset_id == dataset.id)).all()
    return sorted(sid for sid, meta in rows if isinstance(meta, dict) and meta.get(key) is not None and str(meta[key]) == value)


def best(fn, repeat: int) -> tuple[float, list[int]]:
    times, out = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "where.sqlite"
        expected = build(path, args.n)
        url = f"sqlite:///{path}"
        engine = get_engine(url)
        load = os.getloadavg()
        rows = []
        with Session(engine) as session:
            dataset = session.get(Dataset, 1)
            base, found = best(lambda: old_where(session, dataset, "topic", "t3"), args.repeat)
            assert found == expected["metadata.topic=t3"]
            rows.append(("old Python filter: metadata.topic=t3", base, len(found)))
            for text, want in expected.items():
                seconds, found = best(lambda text=text: select_ids(session, dataset, text), args.repeat)
                assert found == want, text
                rows.append((f"select_ids: {text}", seconds, len(found)))
        dispose_engine(url)
    lines = [f"# WHERE on {args.n:,} samples (bench/bench_where.py)", "",
             f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC · {platform.processor() or platform.machine()} · Python "
             f"{platform.python_version()} · SQLite {sqlite3.sqlite_version} · load average at start "
             f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (2 cores shared with other work) · best of {args.repeat}", "",
             "| what | seconds | samples | × the old filter |", "|---|---:|---:|---:|"]
    lines += [f"| {what} | {seconds:.3f} | {count:,} | {seconds / base:.2f} |" for what, seconds, count in rows]
    lines += ["", "Every row selected exactly the samples a plain Python reading of the written data names."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        (ROOT / "bench" / "results" / "where.md").write_text(text)


if __name__ == "__main__":
    main()
