"""`judge run --samples K`: K calls per target on the fake LLM server (answers that vary by a counter), K cache
entries, resume, sample 0 as the verdict everywhere else, and the report's `self_consistency` block."""

from __future__ import annotations

from collections import Counter

import pytest
from fakellm import FakeLLM
from judge_helpers import fast_options
from sklearn.metrics import cohen_kappa_score
from sqlmodel import func, select
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from calibrate.accounts import ensure_annotator
from calibrate.calibration import Options, build_report
from calibrate.db import write_session
from calibrate.judges import NothingToDo, RunSetupError, RunSpec, run_judge
from calibrate.models import Claim, Label, ResponseCache, Task, Verdict
from calibrate.reports import render

K = 3
LABELS = ["supported", "unsupported"]


def _spec(server, prompt, **kwargs):
    return RunSpec(dataset="many", prompt=prompt, backend="openai", base_url=server.openai_base, api_key_env="",
                   options=kwargs.pop("options", None) or fast_options(), samples=kwargs.pop("samples", K), **kwargs)


@pytest.fixture
def vary_llm():
    server = FakeLLM(vary=True).start()
    yield server
    server.stop()


def _gold(engine):
    """Label every claim: supported for even claim indexes; two annotators agree."""
    with write_session(engine) as session:
        task = session.exec(select(Task).where(Task.name == "claim_support")).one()
        users = [ensure_annotator(session, name) for name in ("ana", "bea")]
        gold = {}
        for claim in session.exec(select(Claim)).all():
            value = LABELS[claim.index % 2]
            gold[f"claim:{claim.id}"] = value
            for user in users:
                session.add(Label(task_id=task.id, annotator_id=user.id, sample_id=claim.sample_id, claim_id=claim.id,
                                  target_key=f"claim:{claim.id}", value=value, source="import"))
    return gold


def test_k_samples_are_k_calls_k_cache_entries_and_the_report_measures_their_consistency(engine, session, vary_llm,
                                                                                        claims_dataset, claims_prompt):
    claims_dataset(n_samples=8, claims_per_sample=5)
    prompt = claims_prompt(params={"temperature": 0.7})
    gold = _gold(engine)
    first = run_judge(engine, _spec(vary_llm, prompt, options=fast_options(max_calls=50, concurrency=4)))
    assert first.status == "stopped" and first.n_total == 40 * K
    summary = run_judge(engine, _spec(vary_llm, prompt))  # resumes: only the jobs without a verdict are called
    assert summary.status == "done" and summary.n_done == 40 * K and summary.samples == K
    assert any("3 samples per target" in line for line in summary.lines())
    assert vary_llm.stats()["counts"]["openai"] == 40 * K  # resumed without calling any sample twice
    rows = session.exec(select(Verdict.target_key, Verdict.sample_index, Verdict.value)).all()
    assert Counter(index for _, index, _ in rows) == {index: 40 for index in range(K)}
    assert session.exec(select(func.count()).select_from(ResponseCache)).one() == 40 * K  # the cache keys on the sample
    with pytest.raises(NothingToDo):
        run_judge(engine, _spec(vary_llm, prompt))

    runs: dict[str, list] = {}
    for key, _index, value in sorted(rows, key=lambda r: (r[0], r[1])):
        runs.setdefault(key, []).append(value)
    keys = sorted(runs)
    flipped = sum(len(set(runs[k])) > 1 for k in keys)
    assert 0 < flipped < len(keys)  # half of the items vary from call to call, the rest never
    report = build_report(session, "many", prompt, options=Options(bootstrap=50))
    section = report.data["tasks"]["claim_support"]
    assert section["n"] == 40  # sample 0 is the verdict: the section counts each target once
    block = section["self_consistency"]
    assert block["k"] == K and block["n_targets"] == 40
    assert block["flip_rate"]["value"] == pytest.approx(flipped / 40)
    table = [[runs[k].count(lab) for lab in LABELS] for k in keys]
    assert block["fleiss_kappa"]["value"] == pytest.approx(sm_fleiss_kappa(table, method="fleiss"))
    truth = [gold[k] for k in keys]
    single = [runs[k][0] for k in keys]
    majority = [Counter(runs[k]).most_common(1)[0][0] for k in keys]  # K = 3 and two labels: no ties
    assert block["kappa_single"]["value"] == pytest.approx(cohen_kappa_score(truth, single, labels=LABELS))
    assert block["kappa_majority"]["value"] == pytest.approx(cohen_kappa_score(truth, majority, labels=LABELS))
    assert block["n_ties"] == 0
    assert section["cohen_kappa"]["value"] == pytest.approx(block["kappa_single"]["value"])  # the same sample 0
    assert f"Self-consistency over 3 samples per target (40 targets): flip rate {flipped / 40:.3f}" in render(report, "md")
    assert "Autoconsistencia con 3 muestras por elemento" in render(report, "html", "es")


def test_samples_are_bounded(engine, vary_llm, claims_dataset, claims_prompt):
    claims_dataset(n_samples=2, claims_per_sample=2)
    prompt = claims_prompt()
    for bad in (0, 21):
        with pytest.raises(RunSetupError, match="--samples must be an integer from 1 to 20"):
            run_judge(engine, _spec(vary_llm, prompt, samples=bad))
