"""`calibrate estimate`: the system's mean from verdicts and labels, end to end on a real SQLite file.

The labels and verdicts are stored from arrays drawn here; the command's numbers must equal the one
live estimator (stats.design.design_estimate, checked on its own in tests/stats/test_design.py) on the
same arrays, and its point estimate ppi_py's PPI++ point estimate at the same λ.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from bs4 import BeautifulSoup
from labelstore import Store
from ppi_py import ppi_mean_pointestimate
from prompt_helpers import prompt_version

from calibrate.stats.design import design_estimate

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


def _design(gold, verdict, labelled, *, prob=None, mask=None, lam=None, alpha=0.05, clusters=None):
    """The live estimator on the arrays the test stored: every sample its own cluster, weights 1/π (1 without π)."""
    mask = np.ones(len(verdict), dtype=bool) if mask is None else mask
    prob = np.ones(len(verdict)) if prob is None else prob
    ids = np.arange(len(verdict)) if clusters is None else clusters
    lab = mask & labelled
    return design_estimate(gold[lab].astype(float), verdict[lab].astype(float), 1 / prob[lab], prob[lab], ids[lab],
                           verdict[mask].astype(float), 1 / prob[mask], prob[mask], ids[mask], binary=True, alpha=alpha, lam=lam)


def test_estimate_is_the_live_estimator_on_the_stored_labels_and_verdicts(runner, session, binary_task):
    gold, verdict, labelled = _draw()
    _store(session, gold, verdict, labelled)
    data = _estimate(runner, "--alpha", "0.1")
    ours = _design(gold, verdict, labelled, alpha=0.1)
    assert (data["estimate"], data["ci"], data["lambda"]) == (pytest.approx(ours.value, abs=1e-12), pytest.approx(list(ours.ci), abs=1e-12),
                                                             pytest.approx(ours.extra["lambda"], abs=1e-12))
    # the point estimate is PPI++'s (ppi_py) at calibrate's λ, the verdicts of every target as the imputed term
    y, yhat = gold[labelled].astype(float), verdict[labelled].astype(float)
    assert data["estimate"] == pytest.approx(float(np.ravel(ppi_mean_pointestimate(y, yhat, verdict.astype(float),
                                                                                  lam=data["lambda"]))[0]), abs=1e-9)
    alone = _design(gold, verdict, labelled, alpha=0.1, lam=0.0)
    assert data["classical"] == {"estimate": pytest.approx(y.mean()), "ci": pytest.approx(list(alone.ci), abs=1e-12)}
    assert data["naive_judge"]["estimate"] == pytest.approx(verdict.mean())
    assert (data["n_labelled"], data["n_unlabelled"], data["n_fewshot_excluded"], data["n_failed"]) == (LABELLED, N - LABELLED, 0, 0)
    assert data["estimand"] == {"level": "answers", "positive": "pass", "metric": "share"}
    assert data["positive"] == "pass" and data["method"] == "ppi++" and data["weighted"] is False and data["labels"] == "all"
    assert 0 < data["lambda"] <= 1 and data["status"] == "ok" and data["interval"] == "t-agresti-min"
    assert data["labels_needed"] is None and data["target_width"] == 0.05  # 120 targets cannot give ±0.05
    assert data["labels_needed_note"].startswith("even labelling every target")
    assert data["labels_needed_reason"] == {"code": "width_unreachable"}
    wide = _estimate(runner, "--target-width", "0.2")
    assert isinstance(wide["labels_needed"], int) and 2 <= wide["labels_needed"] < N
    plain = _estimate(runner, "--method", "ppi", "--alpha", "0.1")
    assert plain["lambda"] == 1.0 and plain["method"] == "ppi"
    assert plain["ci"] == pytest.approx(list(_design(gold, verdict, labelled, alpha=0.1, lam=1.0).ci), abs=1e-12)
    labels_alone = _estimate(runner, "--method", "classical")
    assert labels_alone["method"] == "classical" and labels_alone["lambda"] == 0.0


def test_method_says_classical_when_lambda_is_zero(runner, session, binary_task):
    """Verdicts that do not vary carry nothing: λ is 0 and the output names the labels alone, not PPI++."""
    gold, _, labelled = _draw(6)
    _store(session, gold, np.ones(N, dtype=int), labelled)
    data = _estimate(runner)
    assert data["lambda"] == 0.0 and data["method"] == "classical"


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
        assert w["ci"] == pytest.approx(list(_design(gold, verdict, labelled, mask=mask).ci), abs=1e-12)
        assert w["status"] == "ok" and w["method"] in ("ppi++", "classical")


def test_inclusion_probabilities_weight_every_target_by_its_trace_sampling(runner, session, binary_task):
    """metadata.inclusion_prob is the trace's probability of becoming a sample (thumbs-down first): every target stands
    for 1/π traces, so the judge's term and the labels are both weighted (the Hájek form `monitor` uses)."""
    gold, verdict, labelled = _draw(2)
    prob = np.where(verdict == 0, 0.8, 0.2)  # the judge's failures oversampled, as thumbs-down first does
    _store(session, gold, verdict, labelled, meta=lambda i: {"inclusion_prob": float(prob[i])})
    data = _estimate(runner)
    y, yhat, w = gold[labelled].astype(float), verdict[labelled].astype(float), 1 / prob[labelled]
    ours = _design(gold, verdict, labelled, prob=prob)
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
    assert fixed["estimate"] == pytest.approx(_design(gold, verdict, labelled, prob=prob, lam=1.0).value)
    refused = _estimate(runner, "--method", "rogan-gladen", code=2)
    assert "[rogan_gladen_weighted]" in refused  # unweighted: it would estimate the samples, not the traffic


def test_weighting_only_the_labels_was_biased_and_weighting_every_target_is_not():
    """Thumbs-down traces kept with π = 1, the others with π = 0.05, a random 150 of the samples labelled: the traffic's
    share of good answers is estimated without bias and covered at the nominal rate; weighting only the labelled
    targets (the estimator before 2026-12-02) missed it by about 9 points."""
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
        out = design_estimate(y[lab], yhat[lab], 1 / pi[lab], pi[lab], lab, yhat[kept], 1 / pi[kept], pi[kept], kept, binary=True)
        errors.append(out.value - y.mean())
        covered += out.ci[0] <= y.mean() <= out.ci[1]
        old = ppi_mean_pointestimate(y[lab], yhat[lab], yhat[kept], lam=out.extra["lambda"], w=1 / pi[lab])
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
        ("chance", ["--method", "rogan-gladen"], "[not_better_than_chance]"),
        ("nolabels", [], "[no_labels]"),
    ],
)
def test_refusals_name_the_reason_and_give_no_number(runner, session, binary_task, case, args, reason):
    gold, verdict, labelled = _draw(4)
    if case == "chance":  # the verdicts are the opposite of the gold: sensitivity + specificity = 0
        _store(session, gold, 1 - gold, labelled)
    else:
        _store(session, gold, verdict, np.zeros(N, dtype=bool))
    output = _estimate(runner, *args, code=2)
    assert output.startswith("error: no ") and reason in output and output.count("\n") == 1  # one line, no report


def test_a_constant_gold_gives_an_interval_never_a_point(runner, session, binary_task):
    """Every labelled target passes: the share is still estimated from a sample, so its interval has a width (Agresti–Min's
    pseudo-counts), and it never reaches past 1 or prints 0.9999999999999998."""
    gold, verdict, labelled = _draw(4)
    _store(session, gold, verdict, labelled, gold_values=["pass"] * N)
    data = _estimate(runner)
    low, high = data["ci"]
    assert data["status"] == "ok" and low < data["estimate"] <= high == 1.0 and high - low > 0.02
    alone = _estimate(runner, "--method", "classical")
    assert alone["estimate"] == 1.0 and alone["ci"][1] == 1.0 and alone["ci"][0] < 0.95


def test_too_few_audit_labels_where_the_traffic_is_are_refused_with_the_labels_that_would_settle_it(runner, session, binary_task):
    """A hundredfold weight: the traces kept with π = 0.01 are most of the traffic and carry two labels; no interval
    covers then, so the command refuses, naming the class and how many more audit labels would settle it."""
    gold, verdict, labelled = _draw(8)
    heavy = np.zeros(N, dtype=bool)
    heavy[np.flatnonzero(labelled)[:2]] = True
    heavy[np.flatnonzero(~labelled)[:10]] = True
    prob = np.where(heavy, 0.01, 1.0)
    _store(session, gold, verdict, labelled, meta=lambda i: {"inclusion_prob": float(prob[i])})
    output = _estimate(runner, code=2)
    assert "[too_few_audit]" in output and "traces kept with probability 0.01" in output and output.count("\n") == 1
    assert "have 2 labelled samples (at least 5 needed); about 30 more audit labels would settle it" in output


def test_few_shot_examples_of_the_version_are_left_out_and_counted(runner, session, binary_task):
    from sqlmodel import select

    from calibrate.models import FewShot, Judge

    gold, verdict, labelled = _draw(5)
    store = _store(session, gold, verdict, labelled)
    version = prompt_version(session, TASK)
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
        (["--alpha", "1e-320"], "error: alpha must lie in [1e-06, 0.5], not 1e-320"),
        (["--target-width", "0"], "error: --target-width must lie in (0, 1], not 0"),
        (["--target-width", "1e-300"], "error: target-width must lie in [1e-06, 1], not 1e-300"),
        (["--level", "claims"], "error: --level claims does not apply to verdict_ok (its levels: answers)"),
        (["--where", "topic=x"], "error: --where must be metadata.FIELD=VALUE, got 'topic=x'"),
        (["--where", "metadata.topic=x"], "error: no sample of d has metadata.topic=x"),
    ],
)
def test_bad_options_are_one_line_errors(runner, session, binary_task, args, message):
    gold, verdict, labelled = _draw()
    _store(session, gold, verdict, labelled)
    output = _estimate(runner, *args, code=2)
    assert output.startswith(message) and output.count("\n") == 1


def test_claim_support_estimates_the_share_of_faithful_answers_by_default_and_of_claims_with_level_claims(runner, session):
    """An answer is faithful when every counted claim is supported (the rag section's rule); labelled = every claim has gold.
    `--level claims` estimates the share of supported claims instead, its interval clustered by answer."""
    rng = np.random.default_rng(7)
    store = Store(session)
    y_lab, yhat_lab, yhat_unl = [], [], []
    claim_rows = []  # (answer, gold or None, verdict as a number or NaN) per judged claim of a complete answer
    n_incomplete = 0
    answers = []  # (answer, labelled) per complete answer
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
        for c, value in enumerate(judged):  # at the claims level every judged claim is a target, complete answer or not
            g = None if not labelled or (tie and c == 0) else float(gold[c] == "supported")
            claim_rows.append((i, g, np.nan if value == "not_applicable" else float(value == "supported")))
        if len(judged) < n:
            continue
        counted = [v for v in judged if v != "not_applicable"]
        # every claim not_applicable for the judge: the answer is not counted on the judge's side (the ratio's Ĉ = 0)
        yhat = float(all(v == "supported" for v in counted)) if counted else np.nan
        if labelled and not tie:
            y_lab.append(float(all(g == "supported" for g in gold)))
            yhat_lab.append(yhat)
        else:
            yhat_unl.append(yhat)
        answers.append((i, labelled and not tie))
    store.commit()
    result = runner.invoke(["estimate", "--dataset", "d", "--judge", "J", "--task", "claim_support"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert (data["unit"], data["positive"]) == ("answer", "supported")
    assert (data["n_labelled"], data["n_unlabelled"]) == (len(y_lab), len(yhat_unl))
    assert data["n_incomplete_answers"] == n_incomplete
    assert data["estimand"] == {"level": "answers", "positive": "supported", "metric": "share"} and data["target"] == "claim"
    y, yhat, unl = (np.array(v) for v in (y_lab, yhat_lab, yhat_unl))
    lab_ids = np.array([i for i, lab in answers if lab])
    unl_ids = np.array([i for i, lab in answers if not lab])
    every = np.r_[yhat, unl]
    ids = np.r_[lab_ids, unl_ids]
    ones = np.ones(len(every))
    ours = design_estimate(y, yhat, ones[:len(y)], ones[:len(y)], lab_ids, every, ones, ones, ids, binary=True)
    assert (data["estimate"], data["ci"]) == (pytest.approx(ours.value, abs=1e-12), pytest.approx(list(ours.ci), abs=1e-12))
    assert data["classical"]["estimate"] == pytest.approx(y.mean())
    claims = runner.invoke(["estimate", "--dataset", "d", "--judge", "J", "--task", "claim_support", "--level", "claims"])
    assert claims.exit_code == 0, claims.output
    per_claim = json.loads(claims.output)
    rows = np.array([(i, np.nan if g is None else g, v) for i, g, v in claim_rows], dtype=float)
    cluster, gold_c, verdict_c = rows[:, 0].astype(int), rows[:, 1], rows[:, 2]
    labelled_c = ~np.isnan(gold_c)
    one = np.ones(len(rows))
    expect = design_estimate(gold_c[labelled_c], verdict_c[labelled_c], one[labelled_c], one[labelled_c], cluster[labelled_c],
                             verdict_c, one, one, cluster, binary=True)
    assert per_claim["estimand"]["level"] == "claims" and per_claim["unit"] == "target"
    assert (per_claim["estimate"], per_claim["ci"]) == (pytest.approx(expect.value, abs=1e-12), pytest.approx(list(expect.ci), abs=1e-12))
    assert per_claim["estimate"] > data["estimate"] + 0.1  # most claims are supported, far fewer answers are faithful


def test_the_demo_estimated_by_week_shows_several_windows(demo_engine, runner):
    """The demo's samples carry metadata.started_at over four ISO weeks (calibrate/demo/samples.jsonl)."""
    result = runner.invoke(["estimate", "--dataset", "demo-prenatal", "--judge", "demo-claims@2", "--task", "claim_support",
                            "--by-window", "week"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [w["window"] for w in data["windows"]] == ["2026-W41", "2026-W42", "2026-W43", "2026-W44"]
    assert sum(w["n_labelled"] + w["n_unlabelled"] for w in data["windows"]) == data["n_labelled"] + data["n_unlabelled"]
    assert data["unit"] == "answer" and data["n_labelled"] > 0
