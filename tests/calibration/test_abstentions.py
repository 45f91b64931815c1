"""A judge's abstention (not_applicable on a claim the experts judged checkable) counts as a miss, never as a pass."""

from __future__ import annotations

import json

from bs4 import BeautifulSoup

from calibrate.calibration import Options, build_report
from calibrate.cli.gate import gate_lines
from calibrate.reports import render

FAST = Options(bootstrap=200)
ABSTAINS_ON = {("s1", 0), ("s4", 2), ("s7", 1), ("s10", 0)}


def _two_judges(store):
    """12 answers × 3 claims labelled by two experts who agree; `commits` gives the gold everywhere, `abstains` the
    same correct verdicts except not_applicable on four checkable claims; one claim's gold is not_applicable."""
    for i in range(12):
        sid = f"s{i}"
        store.sample(sid, n_claims=3)
        for c in range(3):
            value = "supported" if (i + c) % 3 else "unsupported"
            if (sid, c) == ("s0", 1):
                value = "not_applicable"  # not a claim: left out for both judges
            for annotator in ("ann1", "ann2"):
                store.label("claim_support", annotator, sid, value, claim=c)
            store.verdict("commits", "claim_support", sid, value, claim=c)
            store.verdict("abstains", "claim_support", sid, "not_applicable" if (sid, c) in ABSTAINS_ON else value, claim=c)
    store.commit()


def test_an_abstaining_judge_scores_below_a_committing_one_with_the_same_correct_verdicts(store, session):
    _two_judges(store)
    commits = build_report(session, "d", "commits", options=FAST).data["tasks"]["claim_support"]
    abstains = build_report(session, "d", "abstains", options=FAST).data["tasks"]["claim_support"]
    assert commits["n"] == abstains["n"] == 35  # the gold not_applicable claim is out for both
    assert commits["n_excluded_label"] == abstains["n_excluded_label"] == 1
    assert commits["n_abstained"] == 0 and abstains["n_abstained"] == 4
    assert commits["cohen_kappa"]["value"] == 1.0
    assert abstains["percent_agreement"] == 31 / 35
    assert abstains["cohen_kappa"]["value"] < commits["cohen_kappa"]["value"]
    # κ over the labels plus the abstentions' category, by hand: p_o = 31/35; gold supported 23, unsupported 12;
    # judge supported 23 − a, unsupported 12 − b, abstained 4 (a + b = 4: never a gold value, so it adds nothing to p_e)
    gold_supported = 23
    supported_lost = sum(1 for i, c in ABSTAINS_ON if (int(i[1:]) + c) % 3)
    p_e = (gold_supported * (gold_supported - supported_lost) + 12 * (12 - (4 - supported_lost))) / 35 ** 2
    assert abs(abstains["cohen_kappa"]["value"] - (31 / 35 - p_e) / (1 - p_e)) < 1e-12
    # recall of each label drops by its abstentions; precision does not (an abstention predicts no label)
    assert abstains["per_label"]["supported"]["recall"] == (23 - supported_lost) / 23
    assert abstains["per_label"]["supported"]["precision"] == 1.0
    assert abstains["confusion"]["labels"] == ["supported", "unsupported", "(abstained)"]
    # each expert's agreement with the judge counts the abstentions too
    assert all(row["percent_agreement"] == 31 / 35 for row in abstains["per_annotator"])


def test_the_gate_fails_a_judge_that_abstained_its_way_to_a_pass(store, session, runner):
    _two_judges(store)
    report = build_report(session, "d", "abstains", options=FAST)
    ok, lines = gate_lines(report, min_kappa=0.9, min_rho=0.9, ci_lower=False)
    # on the 31 claims it committed on, κ is 1.0: before abstentions counted, this judge passed at 0.9
    assert not ok
    assert "n=35 (4 abstained)" in lines[0] and lines[0].endswith("counts as failing"), lines
    result = runner.invoke(["gate", "--dataset", "d", "--judge", "abstains", "--min-kappa", "0.9", "--bootstrap", "200"])
    assert result.exit_code == 1, result.output
    assert "4 abstained" in result.output
    result = runner.invoke(["gate", "--dataset", "d", "--judge", "commits", "--min-kappa", "0.9", "--bootstrap", "200"])
    assert result.exit_code == 0, result.output


def test_the_reports_show_the_abstentions(store, session):
    _two_judges(store)
    report = build_report(session, "d", "abstains", options=FAST)
    assert json.loads(render(report, "json"))["tasks"]["claim_support"]["n_abstained"] == 4
    for locale, word in (("en", "Abstentions"), ("es", "Abstenciones")):
        page = BeautifulSoup(render(report, "html", locale), "html.parser")
        row = page.select_one("section.task[data-task=claim_support] table[data-table=counts] tr[data-count=n_abstained]")
        assert row.select_one("th").get_text().startswith(word) and row.select_one("td").get_text(strip=True) == "4"
        lines = [line for line in render(report, "md", locale).splitlines() if line.startswith(word)]
        assert len(lines) == 1 and lines[0].endswith(": 4."), lines
    # a report without a judge has nothing to abstain: no row
    human_only = BeautifulSoup(render(build_report(session, "d", options=FAST), "html"), "html.parser")
    assert human_only.select_one("tr[data-count=n_abstained]") is None
