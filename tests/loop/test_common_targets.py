"""Versions on common targets (calibration/common.py), what compare says changed, and each group's own value."""

from __future__ import annotations

import json

import numpy as np
import pytest
from bs4 import BeautifulSoup
from loop_helpers import copy_verdicts
from scipy import stats as sps
from sklearn.metrics import cohen_kappa_score
from sqlmodel import select

from calibrate.calibration import Options, build_report
from calibrate.calibration.common import MISS, score_versions
from calibrate.calibration.compare import compare_judges
from calibrate.db import write_session
from calibrate.judges import FewShotSpec, save_version
from calibrate.loop.dashboard import dashboard, versions_section
from calibrate.models import Claim, Judge, PromptVersion, Sample, Verdict
from calibrate.reports.compare_report import render_compare

FAST = Options(bootstrap=300)


def _v3_with_a_dev_example(engine, session, demo):
    """Save demo-claims@3: @2 plus one dev target as a few-shot example; give it @2's verdicts (identical verdicts)."""
    with write_session(engine) as s:
        v2 = s.exec(select(PromptVersion).where(PromptVersion.number == 2)).one()
        dev = s.exec(select(Sample.external_id, Claim.index).join(Claim, Claim.sample_id == Sample.id)
                     .where(Sample.split == "dev").order_by(Sample.external_id, Claim.index)).first()
        existing = [FewShotSpec(ref) for ref in _refs(s, v2)]
        version = save_version(s, "demo-claims", few_shots=[*existing, FewShotSpec(f"{dev[0]}:{dev[1]}")],
                               dataset=demo, note="one more example, from dev").version
        version_id = version.id
    session.rollback()
    two = session.exec(select(Judge).where(Judge.name == "demo-claims@2")).one()
    return copy_verdicts(session, two, "demo-claims@3", version_id)


def _refs(session, version):
    from calibrate.judges.versions import example_ref, stored_examples

    return [example_ref(session, row) for row in stored_examples(session, version)]


def test_the_demo_finding_identical_verdicts_and_a_new_example_give_the_same_n_and_value(demo, engine, session):
    _v3_with_a_dev_example(engine, session, demo)
    board = dashboard(session, demo, options=FAST)
    rows = {r.judge: r for r in board.rows}
    assert list(rows) == ["demo-claims@1", "demo-claims@2", "demo-claims@3"]
    # every version on the same targets: @3's new example is left out of @1's and @2's figures too
    assert rows["demo-claims@1"].n == rows["demo-claims@2"].n == rows["demo-claims@3"].n == board.common_targets
    assert board.n_fewshot_common == 1
    assert rows["demo-claims@2"].value == rows["demo-claims@3"].value and rows["demo-claims@2"].ci == rows["demo-claims@3"].ci
    assert rows["demo-claims@2"].decision == rows["demo-claims@3"].decision
    # what the chart used to show: each version on its own targets, n 71 → 70 (the own figure, shown muted)
    assert rows["demo-claims@2"].own["n"] == board.common_targets + 1 and rows["demo-claims@3"].own["n"] == board.common_targets
    assert rows["demo-claims@2"].own_differs and not rows["demo-claims@3"].own_differs
    # the report's versions section says the same
    section = versions_section(session, demo, "demo-claims@3", options=Options(bootstrap=300, split="dev"))
    by_judge = {v["judge"]: v for v in section["versions"]}
    assert section["common_targets"] == board.common_targets
    assert {v["n"] for v in section["versions"]} == {board.common_targets}
    assert by_judge["demo-claims@2"]["value"] == by_judge["demo-claims@3"]["value"]
    assert by_judge["demo-claims@2"]["own"]["n"] == by_judge["demo-claims@3"]["own"]["n"] + 1
    assert section["comparison"]["changed"] == ["few_shots"]


def test_the_dashboard_page_says_the_common_targets(demo, engine, session, client, login, soup, app):
    _v3_with_a_dev_example(engine, session, demo)
    app.config["BOOTSTRAP"] = 200
    login("eng", "engineer")
    page = soup(client.get(f"/datasets/{demo}/calibration"))
    board = dashboard(session, demo, options=Options(bootstrap=200))
    assert page.select_one("#common-targets").get_text(" ", strip=True).startswith(
        f"Scored on the {board.common_targets} targets common to all versions")
    cells = [r.select_one("td.n").get_text() for r in page.select("#judges tbody tr[data-judge]")]
    assert cells == [str(board.common_targets)] * 3
    own = page.select_one("#judges tr[data-judge='demo-claims@2'] small.own").get_text()
    assert own.startswith("own: κ") and own.endswith(f"n {board.common_targets + 1}")


def _stored(store, unparsed=(), na=(), skip=()):
    """Two imported judges with identical verdicts, except B's `unparsed`, `na` (not_applicable) and `skip` (not run)."""
    gold = []
    for i in range(12):
        sid = f"s{i:02d}"
        store.sample(sid, n_claims=2)
        for c in range(2):
            value = "supported" if (2 * i + c) % 3 else "unsupported"
            judged = value if (2 * i + c) % 5 else {"supported": "unsupported"}.get(value, "supported")
            store.label("claim_support", "ann", sid, value, claim=c)
            store.verdict("A", "claim_support", sid, judged, claim=c)
            if (sid, c) in skip:
                continue
            b = None if (sid, c) in unparsed else "not_applicable" if (sid, c) in na else judged
            store.verdict("B", "claim_support", sid, b, claim=c)
            gold.append(((sid, c), value, judged))
    store.commit()
    return gold


def test_unusable_verdicts_on_common_targets_are_misses_and_n_stays_the_same(store, session):
    gold = _stored(store, unparsed={("s01", 0), ("s04", 1)}, na={("s07", 0)}, skip={("s10", 1)})
    scores = score_versions(session, "d", "claim_support", ["A", "B"], options=FAST)
    a, b = scores.common["A"], scores.common["B"]
    assert scores.common_targets == a["n"] == b["n"] == 23  # s10/claim 1 was not run by B: not common
    assert (a["n_unparsed"], b["n_unparsed"], b["n_abstained"]) == (0, 2, 1)
    truth = [value for _, value, _ in gold]
    b_scored = [MISS if key in {("s01", 0), ("s04", 1), ("s07", 0)} else judged for key, _, judged in gold]
    assert b["cohen_kappa"]["value"] == pytest.approx(cohen_kappa_score(truth, b_scored))
    assert a["cohen_kappa"]["value"] == pytest.approx(cohen_kappa_score(truth, [j for _, _, j in gold]))
    # each one's own figure drops what it cannot score (its unparsed verdicts): B's n shrinks there; its
    # not_applicable on a checkable claim is an abstention, scored as a miss in its own report too
    assert scores.own["A"]["n"] == 24 and scores.own["B"]["n"] == 21 and scores.own["B"]["n_abstained"] == 1
    own_b = build_report(session, "d", "B", options=FAST).data["tasks"]["claim_support"]
    assert scores.own["B"]["value"] == pytest.approx(own_b["alignment"]["value"]) and own_b["n"] == 21


def test_a_missed_score_is_the_end_of_the_scale_farthest_from_the_gold(store, session):
    gold, judged = [1, 2, 4, 5, 3, 2, 4, 1, 5, 3], [1, 3, 4, 4, 3, 2, 5, 2, 5, 3]
    for i, (g, j) in enumerate(zip(gold, judged, strict=True)):
        store.sample(f"s{i}")
        store.label("answer_quality", "ann", f"s{i}", g)
        store.verdict("A", "answer_quality", f"s{i}", j)
        store.verdict("B", "answer_quality", f"s{i}", None if i in (1, 4) else j)
    store.commit()
    scores = score_versions(session, "d", "answer_quality", ["A", "B"], options=FAST)
    b = scores.common["B"]
    assert b["n"] == 10 and b["n_unparsed"] == 2
    missed = list(judged)
    missed[1], missed[4] = 5, 1  # gold 2 → 5 (farther than 1); gold 3 → 1 and 5 are as far: the low end
    assert b["spearman_rho"]["value"] == pytest.approx(sps.spearmanr(gold, missed).statistic)


def test_compare_lists_params_when_only_params_differ(demo, engine, session, client, login, soup, runner):
    with write_session(engine) as s:
        save_version(s, "demo-claims", params={"temperature": 0.7, "baseline.entities": True, "baseline.min_overlap": 0.5,
                                               "top_p": 0.9}, note="only the parameters")
        version_id = s.exec(select(PromptVersion).where(PromptVersion.number == 3)).one().id
    session.rollback()
    copy_verdicts(session, session.exec(select(Judge).where(Judge.name == "demo-claims@2")).one(), "demo-claims@3", version_id)
    result = compare_judges(session, demo, "demo-claims@2", "demo-claims@3", options=FAST)
    assert result["changed"] == ["params"] and "changed_note" not in result
    assert result["versions"]["params_diff"] == [{"key": "temperature", "a": 0, "b": 0.7}, {"key": "top_p", "a": None, "b": 0.9}]
    assert compare_judges(session, demo, "demo-claims@1", "demo-claims@2", options=FAST)["changed"] == ["params", "few_shots"]
    login("eng", "engineer")
    page = soup(client.get(f"/datasets/{demo}/calibration/compare",
                           query_string={"a": "demo-claims@2", "b": "demo-claims@3", "split": "dev"}))
    assert [x["data-changed"] for x in page.select("#changed [data-changed]")] == ["params"]
    rows = {r["data-param"]: [td.get_text() for td in r.select("td")] for r in page.select("#changed table.params-diff tr[data-param]")}
    assert rows == {"temperature": ["0", "0.7"], "top_p": ["—", "0.9"]}
    md = runner.invoke(["compare", "--dataset", demo, "--judge", "demo-claims@2", "--judge", "demo-claims@3",
                        "--bootstrap", "200", "--format", "md"]).output
    assert "- params.temperature: 0 → 0.7" in md and "- params.top\\_p: null → 0.9" in md


def test_compare_of_imported_judges_has_no_changed_list(store, session):
    _stored(store)
    result = compare_judges(session, "d", "A", "B", options=FAST)
    assert result["changed"] is None and "imported" in result["changed_note"]


def test_the_reconciling_sentence_when_the_ci_and_mcnemar_disagree():
    from calibrate.calibration.compare import reconcile

    section = {"metric": "cohen_kappa", "difference": {"ci": [0.01, 0.2]}, "mcnemar": {"p_value": 0.12, "b01": 5, "b10": 1}}
    assert reconcile(section, 0.05) == ("The bootstrap CI of the difference excludes 0 but McNemar's exact test is not "
                                        "significant (p = 0.120; B fixed 5 targets and broke 1): the gain rests on few "
                                        "discordant targets; treat it as unproven.")
    section["difference"]["ci"] = [-0.02, 0.2]
    section["mcnemar"]["p_value"] = 0.01
    assert reconcile(section, 0.05).startswith("McNemar's exact test is significant (p = 0.010")
    section["mcnemar"]["p_value"] = 0.3
    assert reconcile(section, 0.05) is None  # both say "not shown": nothing to reconcile


def test_per_group_values_equal_scikit_learn_and_scipy_on_each_group(store, session):
    rng = np.random.default_rng(3)
    topics = ["a", "b", "c"]
    for i in range(36):
        sid = f"s{i:02d}"
        store.sample(sid, n_claims=3, meta={"topic": topics[i % 3]} if i != 35 else {})
        for c in range(3):
            gold = "supported" if rng.random() < 0.6 else "unsupported"
            judge = gold if rng.random() < 0.8 else {"supported": "unsupported", "unsupported": "supported"}[gold]
            store.label("claim_support", "ann", sid, gold, claim=c)
            store.verdict("j", "claim_support", sid, judge, claim=c)
        store.label("answer_quality", "ann", sid, int(rng.integers(1, 6)))
        store.verdict("j", "answer_quality", sid, int(rng.integers(1, 6)))
    store.commit()
    report = build_report(session, "d", "j", options=Options(bootstrap=300, group_by="metadata.topic"))
    rows = report.rows
    for task, statistic in (("claim_support", lambda g, j: cohen_kappa_score(g, j)),
                            ("answer_quality", lambda g, j: sps.spearmanr(np.asarray(g, float), np.asarray(j, float)).statistic)):
        per_group = report.data["tasks"][task]["grouped"]["per_group"]
        assert [g["group"] for g in per_group] == ["a", "b", "c", None]
        for entry in per_group:
            scored = [r for r in rows[task] if r.excluded == "" and r.gold is not None and r.judge is not None
                      and r.group == entry["group"]]
            assert entry["n"] == len(scored)
            if entry["group"] is None:  # one sample of three claims, or one answer: undefined or defined, never a crash
                assert entry["status"] in ("ok", "undefined", "no_data")
                continue
            assert entry["value"] == pytest.approx(statistic([r.gold for r in scored], [r.judge for r in scored]))
            assert entry["ci"][0] <= entry["value"] <= entry["ci"][1]


def test_report_versions_its_comparison_and_compare_score_the_same_common_targets(demo, session, runner):
    """One version's unparsed verdict and another's abstention used to drop targets from `compare` (and the versions
    section's comparison block) while the versions' rows scored them as misses: 356 against 352 in the field."""
    two = session.exec(select(Judge).where(Judge.name == "demo-claims@2")).one()
    one = session.exec(select(Judge).where(Judge.name == "demo-claims@1")).one()
    labelled = {v.target_key for v in session.exec(select(Verdict).where(Verdict.judge_id == one.id)).all()}
    dev = Options(bootstrap=300, split="dev")  # the dashboard's default split (test stays frozen)
    before = compare_judges(session, demo, "demo-claims@1", "demo-claims@2", options=dev)["common_n"]
    mine = sorted(session.exec(select(Verdict).join(Sample, Sample.id == Verdict.sample_id)
                               .where(Verdict.judge_id == two.id, Sample.split == "dev")).all(), key=lambda v: v.id)
    mine = [v for v in mine if v.target_key in labelled and v.status == "ok"]
    mine[0].value, mine[0].status = None, "unparsed"  # @2's call on a common target gave nothing usable
    mine[1].value = "not_applicable"  # @2 declined a claim the experts judged checkable
    session.add_all(mine[:2])
    session.commit()
    out = runner.invoke(["report", "--dataset", demo, "--judge", "demo-claims@2", "--bootstrap", "300", "--versions",
                         "--split", "dev"])
    assert out.exit_code == 0, out.output
    section = json.loads(out.output)["versions"]
    cli = json.loads(runner.invoke(["compare", "--dataset", demo, "--judge", "demo-claims@1", "--judge", "demo-claims@2",
                                    "--bootstrap", "300", "--task", "claim_support", "--split", "dev"]).output)
    board = dashboard(session, demo, split="dev", options=dev)
    assert section["common_targets"] == section["comparison"]["common_n"] == cli["common_n"] == board.common_targets
    assert {v["n"] for v in section["versions"]} == {cli["common_n"]}
    assert cli["common_n"] == before  # the targets are kept: the two verdicts are @2's misses, not exclusions
    task = cli["tasks"]["claim_support"]
    assert (task["n_unparsed_a"], task["n_abstained_a"], task["n_unparsed_b"], task["n_abstained_b"]) == (0, 0, 1, 1)
    # both say the same about @2 on those targets: the rows' κ is compare's B
    by_judge = {v["judge"]: v for v in section["versions"]}
    assert by_judge["demo-claims@2"]["value"] == pytest.approx(cli["b"]["value"])
    assert by_judge["demo-claims@1"]["value"] == pytest.approx(cli["a"]["value"])
    # the comparison's Markdown and HTML show each judge's misses on those targets
    assert "| misses: unusable verdicts / abstentions | 0 / 0 | 1 / 1 |" in render_compare(cli, "md").splitlines()
    page = BeautifulSoup(render_compare(cli, "html", "es"), "html.parser")
    row = page.select_one("#task-claim_support tr.misses-row")
    assert [td.get_text() for td in row.select("td")][:3] == ["fallos: veredictos inutilizables / abstenciones", "0 / 0", "1 / 1"]
