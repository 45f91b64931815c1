"""The three-state decision (pass, fail, undecided) on constructed data, in the report, the gate and its wording."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from calibrate.calibration import Options, build_report
from calibrate.calibration.decision import decide, labels_to_decide, overall
from calibrate.models import Sample
from calibrate.reports import render
from calibrate.reports.decisions import decision_text

T = 0.75


@pytest.mark.parametrize(("value", "ci", "rule", "decision", "passed"), [
    (0.90, (0.80, 0.97), "point", "pass", True),        # the whole CI at or above t
    (0.90, (0.75, 0.97), "ci_lower", "pass", True),     # lo == t passes
    (0.50, (0.40, 0.60), "point", "fail", False),       # the whole CI below t
    (0.70, (0.55, 0.749), "ci_lower", "fail", False),
    (0.861, (0.739, 0.965), "point", "undecided", True),       # straddles; passes on the estimate
    (0.861, (0.739, 0.965), "ci_lower", "undecided", False),   # straddles; the lower bound does not pass
    (0.746, (0.533, 0.929), "point", "undecided", False),
    (0.80, None, "point", "pass", True),                # no CI: rule point decides on the estimate
    (0.70, None, "point", "fail", False),
    (0.80, None, "ci_lower", "undecided", False),       # no CI: rule ci_lower cannot decide
    (None, None, "point", None, None),                  # an undefined statistic: no decision
])
def test_three_states_and_passed_under_each_rule(value, ci, rule, decision, passed):
    decided = decide(value, ci, T, rule=rule)
    assert (decided.decision, decided.passed, decided.rule) == (decision, passed, rule)
    assert bool(decided.note) == (ci is None)  # the special cases say why


def test_labels_to_decide_uses_the_side_facing_the_threshold():
    decided = decide(0.861, (0.748, 0.966), T, rule="point")
    # (0.861 − 0.748) / (0.861 − 0.75) = 1.018…; 71 · 1.018² = 73.6 → 74 in all, 3 more
    assert labels_to_decide(decided, 71, 0.861, (0.748, 0.966), T)["more_targets"] == 3
    below = decide(0.70, (0.55, 0.80), T, rule="point")
    # (0.80 − 0.70) / (0.75 − 0.70) = 2 → 4n in all: 300 more for n = 100
    assert labels_to_decide(below, 100, 0.70, (0.55, 0.80), T)["more_targets"] == 300
    assert labels_to_decide(decide(0.9, (0.8, 0.95), T, rule="point"), 100, 0.9, (0.8, 0.95), T) is None
    no_ci = labels_to_decide(decide(0.8, None, T, rule="ci_lower"), 10, 0.8, None, T)
    assert no_ci["more_targets"] is None and no_ci["reason"] == {"code": "no_interval"}
    assert overall([{"decision": "pass"}, {"decision": "undecided"}]) == "undecided"
    assert overall([{"decision": "pass"}, {"decision": "fail"}]) == "fail"
    assert overall([{"decision": "pass"}]) == "pass" and overall([]) == "fail"
    assert overall([{"decision": "pass"}, {"decision": None}]) == "undecided"  # an undefined task cannot pass


def test_the_wording_names_the_state_the_rule_and_the_labels():
    text = decision_text("undecided", "point", "cohen_kappa", 0.861, (0.739, 0.965), T, True, {"more_targets": 40})
    assert text == ("undecided — κ 0.861 [0.739, 0.965] straddles 0.75; passes on the point estimate "
                    "(rule: point, the estimate must reach 0.75); label ≈ 40 more targets to settle")
    strict = decision_text("undecided", "ci_lower", "cohen_kappa", 0.861, (0.739, 0.965), T, False, {"more_targets": 40})
    assert "does not pass on the CI lower bound (rule: ci_lower, the CI lower bound must reach 0.75)" in strict
    assert decision_text("fail", "point", "spearman_rho", 0.5, (0.4, 0.6), T, False, None).startswith("fail — ρ 0.500 [0.400, 0.600] lies below 0.75")
    assert "decided on the point estimate alone" in decision_text("pass", "point", "cohen_kappa", 0.8, None, T, True, None)


def three_judges(store, n_samples=40, claims=3):
    """Store gold on n_samples × claims targets and three judges: nearly right, one in four wrong, and one in ten wrong."""
    flip = {"supported": "unsupported", "unsupported": "supported"}
    for i in range(n_samples):
        sid = f"s{i:02d}"
        store.sample(sid, n_claims=claims)
        for c in range(claims):
            k = i * claims + c
            gold = "supported" if k % 2 else "unsupported"
            store.label("claim_support", "ann1", sid, gold, claim=c)
            store.label("claim_support", "ann2", sid, gold, claim=c)
            store.verdict("good", "claim_support", sid, flip[gold] if k == 7 else gold, claim=c)
            store.verdict("bad", "claim_support", sid, flip[gold] if k % 4 == 0 else gold, claim=c)
            store.verdict("mid", "claim_support", sid, flip[gold] if k % 10 == 3 else gold, claim=c)
    store.commit()


def test_the_report_decides_each_task_in_three_states(store, session):
    three_judges(store)
    seen = {}
    for judge in ("good", "bad", "mid"):
        for ci_lower in (False, True):
            data = build_report(session, "d", judge, options=Options(bootstrap=500, ci_lower=ci_lower)).data
            section = data["tasks"]["claim_support"]
            lo, hi = section["alignment"]["ci"]
            value = section["alignment"]["value"]
            expected = "pass" if lo >= T else "fail" if hi < T else "undecided"
            assert section["decision"] == expected and section["rule"] == ("ci_lower" if ci_lower else "point")
            assert section["passed"] is ((lo if ci_lower else value) >= T)  # `passed` keeps its meaning under the rule
            assert (section["labels_to_decide"] is None) == (expected != "undecided")
            assert data["decision"] == expected and data["rule"] == section["rule"] and data["passed"] is section["passed"]
            seen[judge] = expected
    assert seen == {"good": "pass", "bad": "fail", "mid": "undecided"}  # the data construct all three states
    mid = build_report(session, "d", "mid", options=Options(bootstrap=500)).data["tasks"]["claim_support"]
    assert mid["alignment"]["value"] >= T and mid["passed"] is True  # undecided, yet passes on the point estimate
    # every claim is labelled: the extrapolation's "more targets" do not exist, and the report says so
    assert mid["labels_to_decide"]["more_targets"] is None and mid["labels_to_decide"]["capped"] is True
    assert mid["labels_to_decide"]["targets_left"] == 0 and mid["labels_to_decide"]["extrapolated"] >= 1


def test_every_renderer_shows_the_three_states(store, session):
    three_judges(store)
    report = build_report(session, "d", "mid", options=Options(bootstrap=500))
    md = render(report, "md")
    assert "## Decision: undecided — ✅ PASSED under rule point" in md and "Decision: undecided — κ" in md
    from bs4 import BeautifulSoup

    page = BeautifulSoup(render(report, "html"), "html.parser")
    assert page.select_one("#decision .verdict")["data-decision"] == "undecided"
    cell = page.select_one("#decision tr[data-task=claim_support] td[data-decision]")
    assert cell["data-decision"] == "undecided" and "straddles 0.75" in cell.select_one(".decision-text").get_text()
    assert page.select_one("section.task .badge")["data-decision"] == "undecided"


def test_gate_prints_three_states_and_exits_by_passed_under_the_rule(store, session, runner):
    three_judges(store)
    for judge, state, code_point, code_strict in (("good", "PASS", 0, 0), ("bad", "FAIL", 1, 1), ("mid", "UNDECIDED", 0, 1)):
        point = runner.invoke(["gate", "--dataset", "d", "--judge", judge, "--bootstrap", "500"])
        strict = runner.invoke(["gate", "--dataset", "d", "--judge", judge, "--bootstrap", "500", "--ci-lower"])
        assert point.output.startswith(f"{state} claim_support: cohen_kappa") and "(rule: point," in point.output
        assert strict.output.startswith(f"{state} claim_support") and "(rule: ci_lower," in strict.output
        assert (point.exit_code, strict.exit_code) == (code_point, code_strict), (judge, point.output, strict.output)
    mid = runner.invoke(["gate", "--dataset", "d", "--judge", "mid", "--bootstrap", "500"]).output
    assert "straddles 0.75" in mid and "more targets to settle; counts as passing" in mid


def test_gate_split_checks_only_that_split(store, session, runner):
    three_judges(store)
    for sample in session.exec(select(Sample)).all():
        sample.split = "dev" if int(sample.external_id[1:]) < 10 else "train"
    session.commit()
    out = runner.invoke(["gate", "--dataset", "d", "--judge", "good", "--bootstrap", "200", "--split", "dev"])
    report = build_report(session, "d", "good", options=Options(bootstrap=200, split="dev")).data["tasks"]["claim_support"]
    assert f" n={report['n']} " in out.output and report["n"] == 30
    bad = runner.invoke(["gate", "--dataset", "d", "--judge", "good", "--split", "nope"])
    assert bad.exit_code == 2 and bad.output.strip().splitlines() == ["error: no sample of d is in split 'nope' (splits: dev, train)"]


def test_json_report_documents_the_decision_keys(store, session):
    import calibrate

    doc = (calibrate.PROJECT_ROOT / "docs" / "report.md").read_text(encoding="utf-8")
    for key in ("decision", "rule", "decision_note", "labels_to_decide", "alt_test", "per_group", "common_targets", "changed"):
        assert f"`{key}`" in doc, key
    three_judges(store)
    data = json.loads(render(build_report(session, "d", "mid", options=Options(bootstrap=200)), "json"))
    keys = list(data)
    assert keys[keys.index("passed"):keys.index("passed") + 3] == ["passed", "decision", "rule"]
