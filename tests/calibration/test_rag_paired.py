"""RAG blocks compare the human and the judge means on the same answers (`paired`), shown in every format."""

from __future__ import annotations

import json

import numpy as np
import pytest
from bs4 import BeautifulSoup

from calibrate.calibration import Options, build_report
from calibrate.reports import render
from calibrate.stats import bootstrap_index_matrix

OPTIONS = Options(bootstrap=500, seed=7)
S, U = "supported", "unsupported"
# answer → (gold per claim, judge per claim or None: the judge did not judge that answer)
ANSWERS = {
    "s0": ([S, S, U, U], [S, S, S, U]),  # human 2/4 = 0.5, judge 3/4 = 0.75
    "s1": ([S, U], [S, S]),  # human 0.5, judge 1.0
    "s2": ([S, U, U, U, U], [S, S, U, U, U]),  # human 0.2, judge 0.4
    "s3": ([U, U], None),  # human 0.0; never judged
}


def _answers(store):
    for sid, (gold, judged) in ANSWERS.items():
        store.sample(sid, n_claims=len(gold))
        for c, value in enumerate(gold):
            store.label("claim_support", "ann", sid, value, claim=c)
            if judged is not None:
                store.verdict("j", "claim_support", sid, judged[c], claim=c)
    store.commit()


def test_faithfulness_means_are_compared_on_the_answers_that_have_both(store, session):
    _answers(store)
    rag = build_report(session, "d", "j", options=OPTIONS).data["rag"]["faithfulness"]
    # each side over its own answers, as before: human over 4, judge over 3 — a gap of 0.717 − 0.3 = 0.417
    assert rag["human_mean"] == pytest.approx((0.5 + 0.5 + 0.2 + 0.0) / 4) and rag["n_human"] == 4
    assert rag["judge_mean"] == pytest.approx((0.75 + 1.0 + 0.4) / 3) and rag["n_judge"] == 3
    paired = rag["paired"]
    assert paired["n"] == 3
    assert paired["human_mean"] == pytest.approx((0.5 + 0.5 + 0.2) / 3)
    assert paired["judge_mean"] == pytest.approx((0.75 + 1.0 + 0.4) / 3)
    assert paired["difference"] == pytest.approx(0.95 / 3)  # judge − human on the same answers: 0.317, not 0.417
    # the CI: a paired bootstrap over answers, seeded; by hand, the same draws and the 2.5th/97.5th percentiles
    d = np.array([0.25, 0.5, 0.2])
    means = d[bootstrap_index_matrix(3, n_resamples=500, seed=7)].mean(axis=1)
    assert paired["ci"] == pytest.approx(list(np.quantile(means, [0.025, 0.975])))
    assert 0.2 <= paired["ci"][0] < paired["difference"] < paired["ci"][1] <= 0.5


def test_every_format_shows_the_counts_and_the_headline_uses_the_paired_means(store, session):
    _answers(store)
    report = build_report(session, "d", "j", options=OPTIONS)
    data = json.loads(render(report, "json"))
    assert data["rag"]["faithfulness"]["paired"]["n"] == 3
    ci = data["rag"]["faithfulness"]["paired"]["ci"]
    headline = (f"On the 3 answers with both values, the judge overstates faithfulness by 0.317 [{ci[0]:.3f}, {ci[1]:.3f}] "
                "(judge 0.717, experts 0.400).")
    md = render(report, "md")
    rows = [line for line in md.splitlines() if line.startswith("| Faithfulness")]
    assert rows and rows[0].split(" | ")[1:7] == ["0.300", "4", "0.717", "3", "3", f"+0.317 [{ci[0]:.3f}, {ci[1]:.3f}]"]
    assert "- " + headline.replace("[", "\\[").replace("]", "\\]") in md.splitlines()  # Markdown escapes brackets
    page = BeautifulSoup(render(report, "html"), "html.parser")
    row = page.select_one("#rag tr[data-metric=faithfulness]")
    assert [td.get_text() for td in row.select("td.num")][:6] == ["0.300", "4", "0.717", "3", "3", f"+0.317 [{ci[0]:.3f}, {ci[1]:.3f}]"]
    assert page.select_one("#rag p.rag-headline[data-metric=faithfulness]").get_text() == headline
    spanish = BeautifulSoup(render(report, "html", "es"), "html.parser")
    assert spanish.select_one("#rag p.rag-headline").get_text().startswith("En las 3 respuestas con ambos valores, el juez sobrestima")


def test_without_common_answers_the_paired_block_says_so(store, session):
    store.sample("s0", n_claims=2)
    store.sample("s1", n_claims=2)
    for c in range(2):
        store.label("claim_support", "ann", "s0", S, claim=c)
        store.verdict("j", "claim_support", "s1", S, claim=c)
    store.commit()
    paired = build_report(session, "d", "j", options=OPTIONS).data["rag"]["faithfulness"]["paired"]
    assert paired["n"] == 0 and paired["difference"] is None and paired["reason"]["code"] == "no_pairs_both_values"
