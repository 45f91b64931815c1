"""Benchmark: the calibration dashboard of a dataset with 20 prompt versions renders in ≤ 300 ms.

Data: the bundled demo (40 samples, 184 claims, two experts, train/dev/test split) with 18
more versions of `demo-claims` added to its two: each a copy of @1's verdicts with a random
5–30 % of them flipped, so every version has its own alignment, CI and row. The page is
fetched through the Flask test client as a logged-in engineer (dev split, 2,000-resample
bootstrap per version), i.e. the whole request: the domain call, the SVG chart, the template.
Baseline in the same run: the same rows computed the straightforward way, one full
`build_report` per version (what the dashboard did before `alignment_sections`).

    .venv/bin/python bench/bench_dashboard.py
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bs4 import BeautifulSoup
from sqlmodel import Session, select

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calibrate import create_app
from calibrate.accounts import add_user
from calibrate.calibration import Options, build_report
from calibrate.db import get_engine, write_session
from calibrate.demo import DATASET, load_demo
from calibrate.judges import save_version
from calibrate.migrations import upgrade
from calibrate.models import Judge, Verdict
from calibrate.tasks import ensure_builtin_tasks

VERSIONS = 20
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "7"))
GROUPED = os.environ.get("BENCH_GROUPED", "1") == "1"  # also time ?group_by=metadata.lang (2 groups)


def add_versions(engine, total: int = VERSIONS, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    other = {"supported": "unsupported", "unsupported": "supported"}
    with write_session(engine) as session:
        first = session.exec(select(Judge).where(Judge.name == "demo-claims@1")).one()
        base = session.exec(select(Verdict).where(Verdict.judge_id == first.id)).all()
        for i in range(3, total + 1):
            version = save_version(session, "demo-claims", model=f"bench-model-{i}", note=f"bench {i}").version
            judge = Judge(name=f"demo-claims@{version.number}", kind="prompt", prompt_version_id=version.id)
            session.add(judge)
            session.flush()
            flip = rng.random(len(base)) < rng.uniform(0.05, 0.3)
            for v, f in zip(base, flip, strict=True):
                value = other.get(v.value, v.value) if f else v.value
                session.add(Verdict(judge_id=judge.id, task_id=v.task_id, sample_id=v.sample_id, claim_id=v.claim_id,
                                    target_key=v.target_key, value=value, status=v.status, source="import"))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.sqlite"
        app = create_app({"DATABASE_URL": url, "INSTANCE_PATH": tmp, "SECRET_KEY": "bench", "WTF_CSRF_ENABLED": False})
        engine = get_engine(url)
        upgrade(engine)
        with write_session(engine) as session:
            ensure_builtin_tasks(session)
        load_demo(engine)
        add_versions(engine)
        with write_session(engine) as session:
            add_user(session, "bench-eng", role="engineer", password="password-123")
        client = app.test_client()
        page = client.get("/login")
        token = BeautifulSoup(page.data, "html.parser").select_one("input[name=csrf_token]")["value"]
        client.post("/login", data={"username": "bench-eng", "password": "password-123", "csrf_token": token})
        url_path = f"/datasets/{DATASET}/calibration?task=claim_support&split=dev"
        first = client.get(url_path)
        rows = BeautifulSoup(first.data, "html.parser").select("#judges tbody tr[data-judge]")
        assert first.status_code == 200 and len(rows) == VERSIONS, (first.status_code, len(rows))
        times, cpus = [], []
        for _ in range(REQUESTS):
            start, cpu = time.perf_counter(), time.process_time()
            client.get(url_path)
            times.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
        grouped = []  # the same page grouped by a metadata field: a per-group bootstrap per judge and group
        for _ in range(3 if GROUPED else 0):
            start, cpu = time.perf_counter(), time.process_time()
            client.get(url_path + "&group_by=metadata.lang")
            grouped.append((time.perf_counter() - start, time.process_time() - cpu))
        names = [f"demo-claims@{i}" for i in range(1, VERSIONS + 1)]
        base_times = []
        with Session(engine) as session:
            for _ in range(3):
                start = time.perf_counter()
                for name in names:
                    build_report(session, DATASET, name, options=Options(split="dev"), tasks=["claim_support"])
                base_times.append(time.perf_counter() - start)
    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}, load {os.getloadavg()[0]:.2f}")
    print(f"baseline, one full build_report per version ({VERSIONS} versions): median {statistics.median(base_times) * 1000:.0f} ms")
    print(f"dashboard page ({VERSIONS} versions, dev split, 2000 resamples): median {statistics.median(times) * 1000:.0f} ms, "
          f"min {min(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms (target ≤ 300 ms); "
          f"CPU median {statistics.median(cpus) * 1000:.0f} ms, min {min(cpus) * 1000:.0f} ms")
    if grouped:
        print(f"the same page grouped by metadata.lang (2 groups): median {statistics.median(w for w, _ in grouped) * 1000:.0f} ms, "
              f"CPU median {statistics.median(c for _, c in grouped) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
