"""`calibrate estimate`: the system's mean from verdicts and labels, end to end on a real SQLite file.

The labels and verdicts are stored from arrays drawn here; the command's numbers must equal
ppi_py's (the authors' package) on the same arrays.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from bs4 import BeautifulSoup
from labelstore import Store
from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate

from calibrate.stats.survey import hajek_ppi_mean

TASK = "verdict_ok"
N = 120
LABELLED = 40


def _draw(seed=0):
    rng = np.random.default_rng(seed)
    gold = (rng.random(N) < 0.6).astype(int)
    verdict = np.where(rng.random(N) < 0.85, gold, 1 - gold)
    labelled = np.zeros(N, dtype=bool)
    labelled[rng.choice(N, LABELLED, replace=False)] = True
    return gold, verdict, labelled


def _store(session, gold, verdict, labelled, *, meta=None, gold_values=None):
    store = Store(session)
    for i in range(N):
        store.sample(f"s{i}", meta=meta(i) if meta else {})
        store.verdict("J", TASK, f"s{i}", "pass" if verdict[i] else "fail")
        if labelled[i]:
            value = gold_values[i] if gold_values is not None else ("pass" if gold[i] else "fail")
            store.label(TASK, "ana", f"s{i}", value)
    store.commit()
    return store


@pytest.fixture
def binary_task(runner):
    result = runner.invoke(["task", "add", TASK, "--target", "sample", "--kind", "categorical", "--labels", "pass,fail"])
    assert result.exit_code == 0, result.output


def _estimate(runner, *args, code=0):
    result = runner.invoke(["estimate", "--dataset", "d", "--judge", "J", "--task", TASK, *args])
    assert result.exit_code == code, result.output
    return json.loads(result.output) if code == 0 and "--format" not in args else result.output


def test_ppi_plus_plus_equals_ppi_py_on_the_stored_labels_and_verdicts(runner, session, binary_task):
    gold, verdict, labelled = _draw()
    _store(session, gold, verdict, labelled)
    data = _estimate(runner, "--alpha", "0.1")
    y, yhat, unl = gold[labelled].astype(float), verdict[labelled].astype(float), verdict[~labelled].astype(float)
    lo, hi = ppi_mean_ci(y, yhat, unl, alpha=0.1)
    assert data["estimate"] == pytest.approx(float(np.ravel(ppi_mean_pointestimate(y, yhat, unl))[0]), abs=1e-9)
    assert data["ci"] == pytest.approx([float(np.ravel(lo)[0]), float(np.ravel(hi)[0])], abs=1e-9)
    assert data["classical"]["ci"] == pytest.approx(list(classical_mean_ci(y, alpha=0.1)), abs=1e-9)
    assert data["naive_judge"]["estimate"] == pytest.approx(verdict.mean())
    assert (data["n_labelled"], data["n_unlabelled"], data["n_fewshot_excluded"]) == (LABELLED, N - LABELLED, 0)
    assert data["positive"] == "pass" and data["method"] == "ppi++" and data["weighted"] is False
    assert 0 <= data["lambda"] <= 1 and data["status"] == "ok"
    assert data["labels_needed"] is None and data["target_width"] == 0.05  # 120 targets cannot give ±0.05
    assert data["labels_needed_note"].startswith("even labelling every target")
    assert data["labels_needed_reason"] == {"code": "width_unreachable"}
    wide = _estimate(runner, "--target-width", "0.2")
    assert isinstance(wide["labels_needed"], int) and 2 <= wide["labels_needed"] < N
    plain = _estimate(runner, "--method", "ppi", "--alpha", "0.1")
    assert plain["lambda"] == 1.0
    assert plain["ci"] == pytest.approx([float(np.ravel(v)[0]) for v in ppi_mean_ci(y, yhat, unl, alpha=0.1, lam=1)], abs=1e-9)


def test_positive_label_flips_the_share(runner, session, binary_task):
    gold, verdict, labelled = _draw()
    _store(session, gold, verdict, labelled)
    passed, failed = _estimate(runner), _estimate(runner, "--positive", "fail")
    assert passed["estimate"] + failed["estimate"] == pytest.approx(1.0)
    assert _estimate(runner, "--positive", "maybe", code=2).startswith("error: --positive 'maybe' is not a label of verdict_ok")


def test_by_week_estimates_each_window_from_its_own_targets(runner, session, binary_task):
    gold, verdict, labelled = _draw(1)
    week = lambda i: {"started_at": "2026-03-02T10:00:00Z" if i % 2 else "2026-03-10T10:00:00+01:00"}  # noqa: E731
    _store(session, gold, verdict, labelled, meta=week)
    data = _estimate(runner, "--by-window", "week")
    assert [w["window"] for w in data["windows"]] == ["2026-W10", "2026-W11"]
    for w, parity in zip(data["windows"], (1, 0), strict=True):
        mask = np.arange(N) % 2 == parity
        lab, unl = mask & labelled, mask & ~labelled
        assert (w["n_labelled"], w["n_unlabelled"]) == (lab.sum(), unl.sum())
        lo, hi = ppi_mean_ci(gold[lab].astype(float), verdict[lab].astype(float), verdict[unl].astype(float), alpha=0.05)
        assert w["ci"] == pytest.approx([float(np.ravel(lo)[0]), float(np.ravel(hi)[0])], abs=1e-9)


def test_inclusion_probabilities_weight_every_target_by_its_trace_sampling(runner, session, binary_task):
    """metadata.inclusion_prob is the trace's probability of becoming a sample (thumbs-down first): every target stands
    for 1/π traces, so the judge's term and the labels are both weighted (the Hájek PPI++ of `monitor`)."""
    gold, verdict, labelled = _draw(2)
    prob = np.where(verdict == 0, 0.8, 0.2)  # the judge's failures oversampled, as thumbs-down first does
    _store(session, gold, verdict, labelled, meta=lambda i: {"inclusion_prob": float(prob[i])})
    data = _estimate(runner)
    y, yhat, w = gold[labelled].astype(float), verdict[labelled].astype(float), 1 / prob[labelled]
    ours = hajek_ppi_mean(y, yhat, verdict.astype(float), w, 1 / prob)
    assert data["weighted"] is True and "n_outside_audit" not in data
    assert (data["estimate"], data["ci"], data["lambda"]) == (pytest.approx(ours.value, abs=1e-12),
                                                             pytest.approx(list(ours.ci), abs=1e-12),
                                                             pytest.approx(ours.extra["lambda"], abs=1e-12))
    # the point estimate is ppi_py's with both sets weighted, at the same λ
    assert ours.value == pytest.approx(float(np.ravel(ppi_mean_pointestimate(
        y, yhat, verdict.astype(float), lam=ours.extra["lambda"], w=w, w_unlabeled=1 / prob))[0]), abs=1e-9)
    assert data["classical"]["estimate"] == pytest.approx(float(np.sum(w * y) / np.sum(w)))
    assert data["naive_judge"]["estimate"] == pytest.approx(float(np.sum(verdict / prob) / np.sum(1 / prob)))
    fixed = _estimate(runner, "--method", "ppi")
    assert fixed["estimate"] == pytest.approx(hajek_ppi_mean(y, yhat, verdict.astype(float), w, 1 / prob, lam=1.0).value)


def test_weighting_only_the_labels_was_biased_and_weighting_every_target_is_not():
    """Thumbs-down traces kept with π = 1, the others with π = 0.05, a random 150 of the samples labelled: the traffic's
    share of good answers is estimated without bias and covered at the nominal rate; weighting only the labelled
    targets (the estimator before) missed it by about 9 points."""
    from calibrate.calibration.estimate import estimate_values

    rng = np.random.default_rng(0)
    errors, before, covered = [], [], 0
    reps = 150
    for _ in range(reps):
        y = (rng.random(20_000) < 0.8).astype(float)
        down = rng.random(y.size) < np.where(y == 1, 0.01, 0.12)
        yhat = np.where(rng.random(y.size) < 0.85, y, 1 - y)
        pi = np.where(down, 1.0, 0.05)
        kept = np.flatnonzero(down | (rng.random(y.size) < 0.05))
        lab = rng.choice(kept, 150, replace=False)
        out = estimate_values(y[lab], yhat[lab], None, method="ppi++", alpha=0.05, weights=1 / pi[lab], yhat_all=yhat[kept],
                              weights_all=1 / pi[kept])
        errors.append(out["estimate"] - y.mean())
        covered += out["ci"][0] <= y.mean() <= out["ci"][1]
        old = ppi_mean_pointestimate(y[lab], yhat[lab], yhat[kept], lam=out["lambda"], w=1 / pi[lab])
        before.append(float(np.ravel(old)[0]) - y.mean())
    assert abs(np.mean(errors)) < 0.01 and np.mean(before) < -0.05
    assert covered / reps >= 0.9


def test_rogan_gladen_reports_sensitivity_and_specificity(runner, session, binary_task):
    gold, verdict, labelled = _draw(3)
    _store(session, gold, verdict, labelled)
    data = _estimate(runner, "--method", "rogan-gladen")
    pos, neg = labelled & (gold == 1), labelled & (gold == 0)
    assert data["sensitivity"] == pytest.approx(verdict[pos].mean()) and data["n_positive"] == pos.sum()
    assert data["specificity"] == pytest.approx(1 - verdict[neg].mean()) and data["n_negative"] == neg.sum()
    assert data["lambda"] is None and data["weighted"] is False


@pytest.mark.parametrize(
    ("case", "args", "reason"),
    [
        ("constant", [], "[constant_gold]"),
        ("chance", ["--method", "rogan-gladen"], "[not_better_than_chance]"),
        ("nolabels", [], "[no_labels]"),
    ],
)
def test_refusals_name_the_reason_and_give_no_number(runner, session, binary_task, case, args, reason):
    gold, verdict, labelled = _draw(4)
    if case == "constant":
        _store(session, gold, verdict, labelled, gold_values=["pass"] * N)
    elif case == "chance":  # the verdicts are the opposite of the gold: sensitivity + specificity = 0
        _store(session, gold, 1 - gold, labelled)
    else:
        _store(session, gold, verdict, np.zeros(N, dtype=bool))
    output = _estimate(runner, *args, code=2)
    assert output.startswith("error: no ") and reason in output and output.count("\n") == 1  # one line, no report


def test_few_shot_examples_of_the_version_are_left_out_and_counted(runner, session, binary_task):
    from sqlmodel import select

    from calibrate.models import FewShot, Judge, Prompt, PromptVersion, Task

    gold, verdict, labelled = _draw(5)
    store = _store(session, gold, verdict, labelled)
    task = session.exec(select(Task).where(Task.name == TASK)).one()
    prompt = Prompt(name="p", task_id=task.id)
    session.add(prompt)
    session.flush()
    version = PromptVersion(prompt_id=prompt.id, number=1, template="t", content_hash="h")
    session.add(version)
    session.flush()
    shots = [i for i in range(N) if labelled[i]][:3]
    for order, i in enumerate(shots):
        sample = store.samples[f"s{i}"]
        session.add(FewShot(version_id=version.id, order=order, sample_id=sample.id, target_key=f"sample:{sample.id}", value="pass"))
    judge = session.exec(select(Judge).where(Judge.name == "J")).one()
    judge.prompt_version_id = version.id
    session.commit()
    data = _estimate(runner)
    assert data["n_fewshot_excluded"] == 3 and data["n_labelled"] == LABELLED - 3


@pytest.mark.parametrize("locale", ["en", "es"])
def test_markdown_and_html_strike_the_naive_judge_number(runner, session, binary_task, locale):
    gold, verdict, labelled = _draw()
    _store(session, gold, verdict, labelled)
    md = _estimate(runner, "--format", "md", "--locale", locale, "--by-window", "month")
    naive = f"{verdict.mean():.3f}".replace(".", "," if locale == "es" else ".")
    assert f"~~{naive}~~" in md and "| PPI++ |" in md
    unreachable = {"en": "even labelling every target would not reach the target width",
                   "es": "ni etiquetando todos los elementos se alcanzaría la anchura objetivo"}[locale]
    assert unreachable in md  # 120 targets cannot give ±0.05: worded from the reason's code in the reader's language
    html = BeautifulSoup(_estimate(runner, "--format", "html", "--locale", locale), "html.parser")
    assert unreachable in html.get_text()
    assert html.find("html")["lang"] == locale
    assert html.select_one("tr.naive s").get_text() == naive
    assert html.select_one("dd.method").get_text() == "PPI++"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--alpha", "1.5"], "error: --alpha must lie in (0, 1), not 1.5"),
        (["--target-width", "0"], "error: --target-width must lie in (0, 1], not 0"),
        (["--where", "topic=x"], "error: --where must be metadata.FIELD=VALUE, got 'topic=x'"),
        (["--where", "metadata.topic=x"], "error: no sample of d has metadata.topic=x"),
    ],
)
def test_bad_options_are_one_line_errors(runner, session, binary_task, args, message):
    gold, verdict, labelled = _draw()
    _store(session, gold, verdict, labelled)
    output = _estimate(runner, *args, code=2)
    assert output.startswith(message) and output.count("\n") == 1


def test_claim_support_estimates_the_share_of_faithful_answers_not_of_claims(runner, session):
    """An answer is faithful when every counted claim is supported (the rag section's rule); labelled = every claim has gold."""
    rng = np.random.default_rng(7)
    store = Store(session)
    y_lab, yhat_lab, yhat_unl = [], [], []
    n_incomplete = 0
    for i in range(90):
        n = int(rng.integers(1, 4))
        store.sample(f"a{i}", n_claims=n)
        gold = ["supported" if rng.random() < 0.75 else "unsupported" for _ in range(n)]
        judged = [g if rng.random() < 0.85 else ("unsupported" if g == "supported" else "supported") for g in gold]
        if i % 9 == 0:
            judged[0] = "not_applicable"  # left out of the judge's denominator
        if i % 11 == 0:
            judged[-1] = None  # an unparsed verdict: the claim counts as not supported
        if i % 13 == 0 and n > 1:
            n_incomplete += 1  # a claim without a verdict: the answer is not a target
            judged = judged[:-1]
        for c, value in enumerate(judged):
            store.verdict("J", "claim_support", f"a{i}", value, claim=c)
        labelled = i % 3 == 0
        tie = i % 15 == 0
        if labelled:
            for c, g in enumerate(gold):
                store.label("claim_support", "ana", f"a{i}", g, claim=c)
                if tie and c == 0:
                    store.label("claim_support", "bea", f"a{i}", "unsupported" if g == "supported" else "supported", claim=c)
        if len(judged) < n:
            continue
        counted = [v for v in judged if v != "not_applicable"]
        if not counted:
            continue
        yhat = float(all(v == "supported" for v in counted))
        if labelled and not tie:
            y_lab.append(float(all(g == "supported" for g in gold)))
            yhat_lab.append(yhat)
        else:
            yhat_unl.append(yhat)
    store.commit()
    result = runner.invoke(["estimate", "--dataset", "d", "--judge", "J", "--task", "claim_support"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert (data["unit"], data["positive"]) == ("answer", "faithful")
    assert (data["n_labelled"], data["n_unlabelled"]) == (len(y_lab), len(yhat_unl))
    assert data["n_incomplete_answers"] == n_incomplete
    y, yhat, unl = (np.array(v) for v in (y_lab, yhat_lab, yhat_unl))
    lo, hi = ppi_mean_ci(y, yhat, unl, alpha=0.05)
    assert data["estimate"] == pytest.approx(float(np.ravel(ppi_mean_pointestimate(y, yhat, unl))[0]), abs=1e-9)
    assert data["ci"] == pytest.approx([float(np.ravel(lo)[0]), float(np.ravel(hi)[0])], abs=1e-9)
    assert data["classical"]["estimate"] == pytest.approx(y.mean())
    refused = runner.invoke(["estimate", "--dataset", "d", "--judge", "J", "--task", "claim_support", "--positive", "supported"])
    assert refused.exit_code == 2 and "share of faithful answers" in refused.output


def test_the_demo_estimated_by_week_shows_several_windows(demo_engine, runner):
    """The demo's samples carry metadata.started_at over four ISO weeks (calibrate/demo/samples.jsonl)."""
    result = runner.invoke(["estimate", "--dataset", "demo-prenatal", "--judge", "demo-claims@2", "--task", "claim_support",
                            "--by-window", "week"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [w["window"] for w in data["windows"]] == ["2026-W41", "2026-W42", "2026-W43", "2026-W44"]
    assert sum(w["n_labelled"] + w["n_unlabelled"] for w in data["windows"]) == data["n_labelled"] + data["n_unlabelled"]
    assert data["unit"] == "answer" and data["n_labelled"] > 0
