"""A report section's `estimate` block: `calibrate estimate`'s ppi++ on the report's targets, rendered with the naive
judge number struck through (English and Spanish)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from bs4 import BeautifulSoup
from labelstore import Store

from calibrate.calibration import Options, build_report
from calibrate.reports import render
from calibrate.stats.design import design_estimate

N, LABELLED = 80, 30


@pytest.fixture
def binary(runner):
    result = runner.invoke(["task", "add", "ok_task", "--target", "sample", "--kind", "categorical", "--labels", "pass,fail"])
    assert result.exit_code == 0, result.output


def _store(session, *, labelled_all=False):
    rng = np.random.default_rng(11)
    gold = (rng.random(N) < 0.6).astype(int)
    verdict = np.where(rng.random(N) < 0.8, gold, 1 - gold)
    labelled = np.ones(N, dtype=bool) if labelled_all else np.zeros(N, dtype=bool)
    labelled[:LABELLED] = True
    store = Store(session)
    for i in range(N):
        store.sample(f"s{i}")
        store.verdict("J", "ok_task", f"s{i}", "pass" if verdict[i] else "fail")
        if labelled[i]:
            store.label("ok_task", "ana", f"s{i}", "pass" if gold[i] else "fail")
    store.commit()
    return gold, verdict, labelled


def test_the_estimate_block_is_ppi_plus_plus_on_the_sections_targets(binary, session, runner):
    gold, verdict, labelled = _store(session)
    report = build_report(session, "d", "J", options=Options(bootstrap=50))
    block = report.data["tasks"]["ok_task"]["estimate"]
    ids, ones = np.arange(N), np.ones(N)
    ours = design_estimate(gold[labelled].astype(float), verdict[labelled].astype(float), ones[labelled], ones[labelled],
                           ids[labelled], verdict.astype(float), ones, ones, ids, binary=True)
    assert block["method"] == "ppi++" and block["positive"] == "pass" and block["alpha"] == pytest.approx(0.05)
    assert block["estimand"] == {"level": "answers", "positive": "pass", "metric": "share"}
    assert block["estimate"] == pytest.approx(ours.value, abs=1e-12) and block["ci"] == pytest.approx(list(ours.ci), abs=1e-12)
    assert (block["n_labelled"], block["n_unlabelled"]) == (LABELLED, N - LABELLED)
    assert block["naive_judge"]["estimate"] == pytest.approx(verdict.mean())
    cli = json.loads(runner.invoke(["estimate", "--dataset", "d", "--judge", "J", "--task", "ok_task"]).output)
    assert {k: cli[k] for k in block} == block  # the same computation as `calibrate estimate`

    naive = f"{verdict.mean():.3f}"
    md = render(report, "md")
    assert f"~~{naive}~~" in md and "biased by the judge's errors" in md and "Estimate of the share of answers labelled pass (PPI++)" in md
    md_es = render(report, "md", "es")
    assert f"~~{naive.replace('.', ',')}~~" in md_es and "sesgado por los errores del juez" in md_es and "El juez solo" in md_es
    html = BeautifulSoup(render(report, "html", "es"), "html.parser")
    assert html.select_one("p.estimate s.naive").get_text() == naive.replace(".", ",")
    assert "El juez solo" in html.select_one("p.estimate").get_text()


def test_no_block_when_every_target_is_labelled(binary, session):
    _store(session, labelled_all=True)
    report = build_report(session, "d", "J", options=Options(bootstrap=50))
    assert "estimate" not in report.data["tasks"]["ok_task"]
