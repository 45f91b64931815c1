"""The demo's production source: three weeks of trace-like samples, a calibrated judge watching them, and the experts' streams.

`PROD_DATASET` holds 10 samples a day from Monday 2 November 2026 for 21 days (the demo's questions
and contexts with their answers), each with `metadata.started_at`, `metadata.inclusion_prob` (the trace
sampling kept every thumbs-down trace and one in five of the others: π 1 and 0.2) and about one in six
with thumbs-down (`feedback` −1). The imported judge `PROD_JUDGE` scores `answer_quality` (1–5); it was
calibrated on the demo dataset's expert answer_quality gold (its verdicts there agree with the gold on
about 85 % of the answers) and agrees as well in the first two weeks, then drifts in the third (a model
change upstream): the Production page and `calibrate monitor` show it as an alert on agreement.

Day by day, the judge's verdicts of the day are imported and the saved queue policy
(`calibrate queue auto --daily 8 --assign dra.garcia --assign matrona.ruiz`) is applied as of the
end of that day, so the audit stream draws 4 of each day's 10 samples (probability 0.4) and the
triage stream takes thumbs-down and uncertain ones; both experts' labels (the synthetic truth) are
imported and their assignments marked done. Everything is seeded: the same data on every load, and
loading again changes nothing.
"""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from sqlmodel import Session, col, select

from calibrate.annotation.auto_queue import apply_policy, save_policy
from calibrate.ingest import import_file
from calibrate.models import Assignment, Dataset, Sample, User

HERE = Path(__file__).resolve().parent
PROD_DATASET = "demo-prenatal-live"
PROD_DESCRIPTION = ("Demo: three weeks of production traces of the prenatal-care RAG assistant (synthetic, not medical advice), "
                    "watched by a calibrated answer_quality judge; experts label a daily audit draw and the triage stream.")
PROD_JUDGE = "demo-quality@1"
CALIBRATION_DATASET = "demo-prenatal"
START = datetime(2026, 11, 2, tzinfo=UTC)
DAYS = 21
PER_DAY = 10
DAILY = 8
SEED = 7


def _truth(rng: np.random.Generator, thumbs_down: bool) -> int:
    weights = [0.25, 0.35, 0.25, 0.1, 0.05] if thumbs_down else [0.02, 0.05, 0.18, 0.4, 0.35]
    return int(rng.choice([1, 2, 3, 4, 5], p=weights))


def _verdict(rng: np.random.Generator, truth: int, agreement: float) -> int:
    if rng.random() < agreement:
        return truth
    return int(min(5, max(1, truth + (1 if rng.random() < 0.5 else -1))))


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def load_production_demo(session: Session, experts: list[str]) -> list[str]:
    """Load the production demo (nothing when it is there already); return what was done."""
    if session.exec(select(Dataset).where(Dataset.name == PROD_DATASET)).first() is not None:
        return [f"{PROD_DATASET}: already loaded"]
    rng = np.random.default_rng(SEED)
    base = [json.loads(line) for line in (HERE / "samples.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    samples, truth = [], {}
    for day in range(DAYS):
        for i in range(PER_DAY):
            src = base[(day * PER_DAY + i) % len(base)]
            down = bool(rng.random() < 0.17)
            ext = f"live-{(START + timedelta(days=day)).date().isoformat()}-{i:02d}"
            started = START + timedelta(days=day, hours=8 + i, minutes=int(rng.integers(0, 60)))
            samples.append({"id": ext, "question": src["question"], "contexts": src["contexts"], "answer": src["answer"],
                            "metadata": {"started_at": started.isoformat().replace("+00:00", "Z"),
                                         "inclusion_prob": 1.0 if down else 0.2, "system": "rag-v2"},
                            **({"feedback": -1} if down else {})})
            truth[ext] = _truth(rng, down)
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        summary = import_file(session, "samples", _write(folder / "live.jsonl", samples), dataset=PROD_DATASET,
                              description=PROD_DESCRIPTION)
        lines.append(summary.line())
        dataset = session.exec(select(Dataset).where(Dataset.name == PROD_DATASET)).one()
        dataset.is_demo, dataset.source = True, "calibrate demo (synthetic production traces)"
        session.add(dataset)
        lines.append(_calibration_verdicts(session, folder, rng))
        policy = save_policy(session, PROD_DATASET, daily=DAILY, assign=experts, audit_share=0.5, seed=SEED)
        n_verdicts = 0
        for day in range(DAYS):
            agreement = 0.85 if day < 14 else 0.3
            rows = []
            for i in range(PER_DAY):
                ext = f"live-{(START + timedelta(days=day)).date().isoformat()}-{i:02d}"
                unparsed = rng.random() < 0.03
                rows.append({"sample_id": ext, "task": "answer_quality", "judge": PROD_JUDGE,
                             "value": None if unparsed else _verdict(rng, truth[ext], agreement)})
            import_file(session, "verdicts", _write(folder / f"verdicts-{day}.jsonl", rows), dataset=PROD_DATASET, judge=PROD_JUDGE)
            n_verdicts += len(rows)
            apply_policy(session, dataset, policy, now=START + timedelta(days=day, hours=23, minutes=59))
        lines.append(f"judge {PROD_JUDGE}: {n_verdicts} answers of {PROD_DATASET} judged, day by day")
        ids = dict(session.exec(select(Sample.id, Sample.external_id).where(Sample.dataset_id == dataset.id)).all())
        assignments = session.exec(select(Assignment).where(col(Assignment.sample_id).in_(list(ids)),
                                                            col(Assignment.stream).is_not(None))).all()
        users = {a.user_id for a in assignments}
        names = dict(session.exec(select(User.id, User.username).where(col(User.id).in_(users))).all()) if users else {}
        labels = [{"sample_id": ids[a.sample_id], "annotator": names[a.user_id], "task": "answer_quality",
                   "value": truth[ids[a.sample_id]]} for a in assignments]
        if labels:
            import_file(session, "labels", _write(folder / "labels.jsonl", labels), dataset=PROD_DATASET)
        for a in assignments:
            a.status = "done"
            session.add(a)
        audit = sum(1 for a in assignments if a.stream == "audit")
        lines.append(f"{PROD_DATASET}: {audit} audit and {len(assignments) - audit} triage labels by the experts")
    return lines


def _calibration_verdicts(session: Session, folder: Path, rng: np.random.Generator) -> str:
    """Import the judge's verdicts on the demo dataset's answer_quality gold (its calibration-time figure)."""
    gold: dict[str, list[float]] = {}
    for line in (HERE / "labels.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if row["task"] == "answer_quality":
                gold.setdefault(row["sample_id"], []).append(float(row["value"]))
    rows = [{"sample_id": ext, "task": "answer_quality", "judge": PROD_JUDGE,
             "value": _verdict(rng, int(round(sum(v) / len(v))), 0.85)} for ext, v in sorted(gold.items())]
    import_file(session, "verdicts", _write(folder / "calibration.jsonl", rows), dataset=CALIBRATION_DATASET, judge=PROD_JUDGE)
    return f"judge {PROD_JUDGE}: {len(rows)} answers of {CALIBRATION_DATASET} judged (its calibration)"
