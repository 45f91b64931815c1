"""Judge runs for the demo: two versions of a claim-support prompt and two metric judges, run
with the offline baseline judge over the demo dataset, so the calibration screens have real
data offline.

- `demo-claims@1`: the built-in template; the baseline checks numbers only and asks that 30 %
  of a claim's words occur in the contexts (a loose first try).
- `demo-claims@2`: adds two few-shot examples from the train split (never scored for @2) and
  the baseline's defaults: names checked too, 50 % of the words.
- `demo-faithfulness@1`: the faithfulness metric judge (built-in template, one step per claim,
  the baseline's defaults): one score per answer, calibrated against the faithfulness the
  experts' claim_support gold gives.
- `demo-context-precision@1`: the context_precision metric judge (one step per retrieved
  context): calibrated against the context precision of the experts' context_relevance gold
  (demo-001 … demo-020 have it).

- `demo-preference@1`: the built-in pairwise template on the pairwise dataset (demo-prenatal-ab),
  run by the baseline in both presentation orders, so the report's position block has data.

answer_relevancy and context_recall judges are not loaded: their human gold can only be
direct expert values of the metric, and the demo has none, so their dashboards would show
verdicts with nothing to calibrate against.

Idempotent: the versions are content-hashed (saving them again creates nothing) and a run
with nothing left to judge writes nothing.
"""

from __future__ import annotations

from sqlalchemy import Engine
from sqlmodel import select

from calibrate.db import write_session
from calibrate.gold import human_gold
from calibrate.judges import FewShotSpec, NothingToDo, RunSpec, run_judge, save_version
from calibrate.models import Claim, Dataset, Sample, Task

PROMPT = "demo-claims"
DATASET = "demo-prenatal"
AB_DATASET = "demo-prenatal-ab"
PREFERENCE_PROMPT = "demo-preference"
V1_PARAMS = {"temperature": 0, "baseline.entities": False, "baseline.min_overlap": 0.3}
V2_PARAMS = {"temperature": 0, "baseline.entities": True, "baseline.min_overlap": 0.5}
# Metric judges: (prompt name, metric task, note), each version 1 of its prompt with the baseline's defaults.
METRIC_JUDGES = (
    ("demo-faithfulness", "faithfulness", "demo: faithfulness metric judge, one baseline claim check per claim"),
    ("demo-context-precision", "context_precision", "demo: context precision metric judge, one baseline relevance "
                                                    "check per retrieved context"),
)


def _examples(session) -> list[FewShotSpec]:
    """Pick one supported and one unsupported claim from the train split, with the experts' rationale."""
    task = session.exec(select(Task).where(Task.name == "claim_support")).one()
    rows = session.exec(
        select(Sample.external_id, Claim.index, Claim.id).join(Claim, Claim.sample_id == Sample.id).join(Dataset)
        .where(Dataset.name == DATASET, Sample.split == "train", Claim.active).order_by(Sample.external_id, Claim.index)
    ).all()
    picked: dict[str, FewShotSpec] = {}
    for external_id, index, claim_id in rows:
        value, rationale = human_gold(session, task, f"claim:{claim_id}")
        if value in ("supported", "unsupported") and value not in picked and (rationale or value == "supported"):
            picked[value] = FewShotSpec(f"{external_id}:{index}")
        if len(picked) == 2:
            break
    return [picked[v] for v in ("unsupported", "supported") if v in picked]


def load_demo_judges(engine: Engine) -> list[str]:
    """Create demo-claims@1 and @2 and the metric judges, and run each with the baseline judge; return what was done."""
    lines = []
    with write_session(engine) as session:
        first = save_version(session, PROMPT, task="claim_support", params=V1_PARAMS, few_shots=[],
                             note="demo: built-in template; baseline checks numbers only, 30 % word overlap")
        second = save_version(session, PROMPT, params=V2_PARAMS, few_shots=_examples(session), dataset=DATASET,
                              note="demo: two few-shot examples from train; baseline also checks names, 50 % overlap")
        refs = [(f"{PROMPT}@{first.version.number}", "claims"), (f"{PROMPT}@{second.version.number}", "claims")]
        for name, task, note in METRIC_JUDGES:
            version = save_version(session, name, task=task, params={"temperature": 0}, note=note).version
            refs.append((f"{name}@{version.number}", "answers"))
        preference = save_version(session, PREFERENCE_PROMPT, task="preference", params={"temperature": 0},
                                  note="demo: built-in pairwise template; baseline prefers the response closer to the contexts").version
    runs = [(ref, unit, DATASET, None) for ref, unit in refs]
    runs.append((f"{PREFERENCE_PROMPT}@{preference.number}", "pairs in both orders", AB_DATASET, "both"))
    for ref, unit, dataset, orders in runs:
        try:
            summary = run_judge(engine, RunSpec(dataset=dataset, prompt=ref, backend="baseline", orders=orders))
        except NothingToDo:
            lines.append(f"judge {ref}: already run on {dataset}")
        else:
            count = summary.n_done // 2 if orders == "both" else summary.n_done
            lines.append(f"judge {ref}: {count} {unit} judged by the offline baseline")
    return lines
