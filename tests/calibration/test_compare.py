"""Comparing two judges on the same targets, cross-checked with scikit-learn, SciPy and statsmodels."""

from __future__ import annotations

import json

import numpy as np
import pytest
from bs4 import BeautifulSoup
from prompt_helpers import prompt_version
from scipy import stats as sps
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.contingency_tables import mcnemar

from calibrate.calibration import CalibrationError, Options
from calibrate.calibration.compare import compare_judges
from calibrate.errors import NotFound
from calibrate.reports.compare_report import render_compare

FAST = Options(bootstrap=300)


def _two_judges(store, n=20, claims=3, a_wrong=(), b_wrong=()):
    gold = {}
    for i in range(n):
        sid = f"s{i}"
        store.sample(sid, n_claims=claims)
        for c in range(claims):
            value = "supported" if (i * claims + c) % 3 else "unsupported"
            gold[(sid, c)] = value
            other = "unsupported" if value == "supported" else "supported"
            store.label("claim_support", "ann", sid, value, claim=c)
            store.verdict("A", "claim_support", sid, other if (sid, c) in a_wrong else value, claim=c)
            store.verdict("B", "claim_support", sid, other if (sid, c) in b_wrong else value, claim=c)
    store.commit()
    return gold


def test_categorical_comparison_matches_references(store, session):
    a_wrong = {("s0", 0), ("s1", 1), ("s2", 2), ("s3", 0), ("s4", 1), ("s5", 2)}
    b_wrong = {("s0", 0), ("s9", 1)}
    gold = _two_judges(store, a_wrong=a_wrong, b_wrong=b_wrong)
    result = compare_judges(session, "d", "A", "B", options=FAST)
    keys = sorted(gold)
    g = [gold[k] for k in keys]
    flip = {"supported": "unsupported", "unsupported": "supported"}
    a = [flip[gold[k]] if k in a_wrong else gold[k] for k in keys]
    b = [flip[gold[k]] if k in b_wrong else gold[k] for k in keys]
    assert result["common_n"] == 60 and result["task"] == "claim_support"
    assert result["a"]["value"] == pytest.approx(cohen_kappa_score(g, a))
    assert result["b"]["value"] == pytest.approx(cohen_kappa_score(g, b))
    assert result["difference"]["value"] == pytest.approx(result["b"]["value"] - result["a"]["value"])
    low, high = result["difference"]["ci"]
    assert low <= result["difference"]["value"] <= high
    right_a = np.array([x == y for x, y in zip(a, g, strict=True)])
    right_b = np.array([x == y for x, y in zip(b, g, strict=True)])
    table = [[int((right_a & right_b).sum()), int((right_a & ~right_b).sum())],
             [int((~right_a & right_b).sum()), int((~right_a & ~right_b).sum())]]
    assert (result["mcnemar"]["b01"], result["mcnemar"]["b10"]) == (5, 1)
    assert result["mcnemar"]["p_value"] == pytest.approx(mcnemar(table, exact=True).pvalue)
    assert sorted(result["flips"]["fixed"]) == sorted(["s1/claim/1", "s2/claim/2", "s3/claim/0", "s4/claim/1", "s5/claim/2"])
    assert result["flips"]["broken"] == ["s9/claim/1"]
    json.dumps(result, allow_nan=False)


def test_score_comparison_uses_per_sample_absolute_error(store, session):
    rng = np.random.default_rng(3)
    gold = rng.integers(1, 6, 25)
    a = np.clip(gold + rng.integers(-2, 3, 25), 1, 5)
    b = np.clip(gold + rng.integers(-1, 2, 25), 1, 5)
    for i in range(25):
        store.sample(f"s{i}")
        store.label("answer_quality", "ann", f"s{i}", int(gold[i]))
        store.verdict("A", "answer_quality", f"s{i}", int(a[i]))
        store.verdict("B", "answer_quality", f"s{i}", int(b[i]))
    store.commit()
    result = compare_judges(session, "d", "A", "B", options=FAST)
    ea, eb = np.abs(a - gold), np.abs(b - gold)
    assert result["metric"] == "spearman_rho"
    assert result["a"]["value"] == pytest.approx(sps.spearmanr(gold, a).statistic)
    assert result["ttest"]["p_value"] == pytest.approx(sps.ttest_rel(ea, eb).pvalue)
    assert result["ttest"]["t"] == pytest.approx(sps.ttest_rel(ea, eb).statistic)
    assert result["wilcoxon"]["p_value"] == pytest.approx(sps.wilcoxon(ea, eb).pvalue)
    assert result["mcnemar"]["status"] == "not_applicable"


@pytest.mark.parametrize(
    ("task", "gold", "a", "b", "tolerance", "fixed", "broken"),
    [
        # ordinal 1–5: half a step; 2 off is wrong, on the gold is right
        ("answer_quality", [3, 4, 2, 5], [1, 4, 4, 5], [3, 4, 2, 3], 0.5, 2, 1),
        # continuous 0–1 (a metric task): a tenth of the range, not ±0.5 (which made every score "right")
        ("faithfulness", [0.9, 0.2, 0.5, 0.7], [0.5, 0.2, 0.8, 0.7], [0.85, 0.25, 0.5, 0.2], 0.1, 2, 1),
    ],
)
def test_fixed_and_broken_scores_use_the_tasks_scale(store, session, task, gold, a, b, tolerance, fixed, broken):
    for i, (g, va, vb) in enumerate(zip(gold, a, b, strict=True)):
        store.sample(f"s{i}")
        store.label(task, "ann", f"s{i}", g)
        store.verdict("A", task, f"s{i}", va)
        store.verdict("B", task, f"s{i}", vb)
    store.commit()
    result = compare_judges(session, "d", "A", "B", task=task, options=FAST)
    assert result["tolerance"] == pytest.approx(tolerance)
    assert (result["flips"]["n_fixed"], result["flips"]["n_broken"]) == (fixed, broken)


def test_few_shot_targets_of_either_version_are_left_out(store, session):
    from sqlmodel import select

    from calibrate.models import FewShot, Judge

    _two_judges(store, n=5)
    version = prompt_version(session, "claim_support")
    claim = store.claims[("s0", 0)]
    session.add(FewShot(version_id=version.id, order=0, sample_id=claim.sample_id, claim_id=claim.id,
                        target_key=f"claim:{claim.id}", value="supported"))
    judge_b = session.exec(select(Judge).where(Judge.name == "B")).one()
    judge_b.prompt_version_id = version.id
    session.commit()
    result = compare_judges(session, "d", "A", "B", options=FAST)
    assert result["common_n"] == 14
    assert result["tasks"]["claim_support"]["n_fewshot"] == 1
    assert result["versions"] is None  # A is not a prompt version: no diff to show


@pytest.mark.parametrize(
    ("a", "b", "error", "message"),
    [("A", "A", CalibrationError, "two different judges"), ("A", "nope", NotFound, "unknown judge 'nope'"),
     ("A", "C", CalibrationError, "nothing to compare")],
)
def test_nothing_to_compare_says_what_is_missing(store, session, a, b, error, message):
    _two_judges(store, n=3)
    store.sample("x", n_claims=1)
    store.verdict("C", "claim_support", "x", "supported", claim=0)  # C judged only an unlabelled target
    store.commit()
    with pytest.raises(error) as info:
        compare_judges(session, "d", a, b, options=FAST)
    assert message in str(info.value)


def test_renderers_escape_and_agree(store, session):
    _two_judges(store, a_wrong={("s0", 0), ("s1", 1)})
    result = compare_judges(session, "d", "A", "B", options=FAST)
    result["judge_b"] = "<script>alert(1)</script>"
    html = render_compare(result, "html")
    page = BeautifulSoup(html, "html.parser")
    assert page.select("script") == [] and "<script>alert" not in html
    assert page.select_one(".judge-b").get_text() == "<script>alert(1)</script>"
    assert f"{result['b']['value']:.3f}" in page.select_one("#task-claim_support .compare-headline").get_text()
    md = render_compare(result, "md")
    assert "\\<script\\>" in md and f"{result['difference']['value']:+.3f}" in md
    assert json.loads(render_compare(result, "json"))["common_n"] == result["common_n"]


def test_compare_command(runner, store, session, tmp_path):
    _two_judges(store, a_wrong={("s0", 0), ("s1", 1), ("s2", 2)})
    ok = runner.invoke(["compare", "--dataset", "d", "--judge", "A", "--judge", "B", "--bootstrap", "200"])
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.output)
    assert {"common_n", "a", "b", "difference", "mcnemar", "ttest", "wilcoxon", "flips"} <= set(data)
    out = tmp_path / "c.html"
    assert runner.invoke(["compare", "--dataset", "d", "--judge", "A", "--judge", "B", "--format", "html", "-o", str(out), "--bootstrap", "200"]).exit_code == 0
    assert out.read_text().startswith("<!doctype html>")
    one = runner.invoke(["compare", "--dataset", "d", "--judge", "A"])
    assert one.exit_code == 2 and "exactly two judges" in one.output
    bad = runner.invoke(["compare", "--dataset", "d", "--judge", "A", "--judge", "Z"])
    assert bad.exit_code == 2 and "unknown judge 'Z'" in bad.output


def test_split_keeps_only_that_splits_samples_everywhere(store, session, runner):
    """Moving a sample to test takes its flips and targets out of the dev comparison, and only those."""
    a_wrong = {("s0", 0), ("s1", 1), ("s2", 2), ("s3", 0)}
    b_wrong = {("s3", 0), ("s9", 1)}
    _two_judges(store, a_wrong=a_wrong, b_wrong=b_wrong)
    for sample in store.samples.values():
        sample.split = "dev"
    store.samples["s1"].split = "test"
    store.samples["s9"].split = "test"
    session.commit()
    everywhere = compare_judges(session, "d", "A", "B", options=FAST)
    dev = compare_judges(session, "d", "A", "B", options=Options(bootstrap=300, split="dev"))
    assert (everywhere["common_n"], dev["common_n"]) == (60, 54) and dev["split"] == "dev"
    assert sorted(dev["flips"]["fixed"]) == ["s0/claim/0", "s2/claim/2"] and dev["flips"]["broken"] == []
    assert (dev["mcnemar"]["b01"], dev["mcnemar"]["b10"]) == (2, 0)
    keys = [(f"s{i}", c) for i in range(20) if f"s{i}" not in ("s1", "s9") for c in range(3)]
    gold = ["supported" if (int(s[1:]) * 3 + c) % 3 else "unsupported" for s, c in keys]
    flip = {"supported": "unsupported", "unsupported": "supported"}
    a = [flip[g] if k in a_wrong else g for k, g in zip(keys, gold, strict=True)]
    assert dev["a"]["value"] == pytest.approx(cohen_kappa_score(gold, a))
    test = compare_judges(session, "d", "A", "B", options=Options(bootstrap=300, split="test"))
    assert test["common_n"] == 6 and test["flips"]["fixed"] == ["s1/claim/1"] and test["flips"]["broken"] == ["s9/claim/1"]
    with pytest.raises(CalibrationError, match="no sample of d is in split 'train' \\(splits: dev, test\\)"):
        compare_judges(session, "d", "A", "B", options=Options(bootstrap=300, split="train"))
    out = runner.invoke(["compare", "--dataset", "d", "--judge", "A", "--judge", "B", "--split", "dev", "--bootstrap", "200"])
    assert out.exit_code == 0 and json.loads(out.output)["common_n"] == 54
    md = runner.invoke(["compare", "--dataset", "d", "--judge", "A", "--judge", "B", "--split", "dev", "--bootstrap", "200", "--format", "md"])
    assert "(split dev)" in md.output.splitlines()[0]
    html = BeautifulSoup(runner.invoke(["compare", "--dataset", "d", "--judge", "A", "--judge", "B", "--split", "dev",
                                        "--bootstrap", "200", "--format", "html"]).output, "html.parser")
    assert html.select_one("dd.split").get_text() == "split dev"


def test_stale_labels_do_not_count_towards_the_gold(store, session):
    from sqlmodel import select

    from calibrate.models import Label, User

    _two_judges(store, n=4, a_wrong={("s0", 0)})
    before = compare_judges(session, "d", "A", "B", options=FAST)
    store.label("claim_support", "bea", "s0", "supported", claim=0)  # s0's claim 0 is "unsupported" for ann
    store.commit()
    assert compare_judges(session, "d", "A", "B", options=FAST)["common_n"] == before["common_n"] - 1  # a 1–1 tie: no gold
    stale = session.exec(select(Label).join(User, User.id == Label.annotator_id).where(User.username == "bea")).one()
    stale.stale = True  # the sample changed after bea labelled it
    session.commit()
    after = compare_judges(session, "d", "A", "B", options=FAST)
    assert after["common_n"] == before["common_n"] and after["flips"] == before["flips"]


def test_a_step_task_is_compared_step_by_step(runner, store, session):
    """A step task's compare scores each step (not one target per sample) and names flips "SAMPLE/step/N" (issue 33:
    the targets were the sample ids, so a trajectory's four steps collapsed into one)."""
    from calibrate.tasks import ensure_trajectory_tasks

    ensure_trajectory_tasks(session, store.dataset.id)
    ok, bad = "correct", "incorrect"
    a_wrong, b_wrong = {("t0", 2), ("t1", 1), ("t2", 3)}, {("t2", 3)}
    gold = {}
    for i in range(6):
        sid = f"t{i}"
        store.sample(sid, n_steps=4)
        for s in range(4):
            value = bad if (i + s) % 3 == 0 else ok
            gold[(sid, s)] = value
            flipped = ok if value == bad else bad
            store.label("step_correctness", "ann", sid, value, step=s)
            store.verdict("A", "step_correctness", sid, flipped if (sid, s) in a_wrong else value, step=s)
            store.verdict("B", "step_correctness", sid, flipped if (sid, s) in b_wrong else value, step=s)
    store.commit()
    done = runner.invoke(["compare", "--dataset", "d", "--judge", "A", "--judge", "B", "--task", "step_correctness",
                          "--bootstrap", "200"])
    assert done.exit_code == 0, done.output
    result = json.loads(done.output)
    keys = sorted(gold)
    g = [gold[k] for k in keys]
    flip = {ok: bad, bad: ok}
    a = [flip[gold[k]] if k in a_wrong else gold[k] for k in keys]
    assert (result["task"], result["common_n"], result["tasks"]["step_correctness"]["n_samples"]) == ("step_correctness", 24, 6)
    assert result["a"]["value"] == pytest.approx(cohen_kappa_score(g, a))
    assert sorted(result["flips"]["fixed"]) == ["t0/step/2", "t1/step/1"] and result["flips"]["broken"] == []
    step_ids = {f"step:{store.steps[k].id}" for k in (("t0", 2), ("t1", 1))}
    assert set(result["flips"]["fixed_keys"]) == step_ids
