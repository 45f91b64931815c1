"""Pairwise tasks in the report: the order rule both ways and the position block, on constructed data with gaps.

Ten targets p0…p9, responses A and B (the original order shows A first, the swapped order B
first). The judge's verdicts per order, with unusable (None) and missing (absent) ones:

    target     p0  p1  p2  p3  p4   p5  p6    p7    p8   p9
    gold       A   A   B   B   A    B   A     B     A    A
    original   A   A   A   A   A    B   None  A     A    -
    swapped    A   B   B   A   tie  B   A     None  -    A

Hand-computed position figures: pairs p0–p5 (6); same verdict on p0, p3, p5 (0.5); non-tie
picks of the first-shown response: original 5 of 6, swapped 3 of 5 (p1, p2, p5 pick B) → 8/11;
ties 1 of 12; flips p1 and p2, both "first twice" (2, 0; exact sign test p = 0.5); unusable
2 + 2.
"""

from __future__ import annotations

import json

import pytest
from sklearn.metrics import cohen_kappa_score
from sqlmodel import Session, select

from calibrate.calibration import Options, build_report, compare_judges
from calibrate.calibration.common import MISS
from calibrate.db import write_session
from calibrate.ingest import import_file
from calibrate.tasks import add_task

GOLD = ["A", "A", "B", "B", "A", "B", "A", "B", "A", "A"]
ORIGINAL = ["A", "A", "A", "A", "A", "B", None, "A", "A", "-"]
SWAPPED = ["A", "B", "B", "A", "tie", "B", "A", None, "-", "A"]
# The order each label's annotator saw (None: not recorded): first-shown picks are p0, p6, p7, p8, p9 (ann), p3, p5 (bob).
ANN_ORDERS = [["A", "B"], ["B", "A"], ["A", "B"], None, ["B", "A"], ["A", "B"], ["A", "B"], ["B", "A"], ["A", "B"], ["A", "B"]]
BOB = {2: ("B", ["A", "B"]), 3: ("B", ["B", "A"]), 5: ("B", ["B", "A"])}


def jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def verdict_rows(judge: str, task: str, original: list, swapped: list) -> list[dict]:
    rows = []
    for i, (o, s) in enumerate(zip(original, swapped, strict=True)):
        for value, order in ((o, "original"), (s, "swapped")):
            if value != "-":
                rows.append({"sample_id": f"p{i}", "judge": judge, "task": task, "value": value, "order": order})
    return rows


@pytest.fixture
def pairwise(engine, tmp_path):
    samples = [{"id": f"p{i}", "question": f"Q{i}?", "responses": [{"id": "A", "text": f"a{i}"}, {"id": "B", "text": f"b{i}"}]}
               for i in range(10)]
    labels = [{"sample_id": f"p{i}", "annotator": "ann", "task": task, "value": GOLD[i],
               **({"order": ANN_ORDERS[i]} if ANN_ORDERS[i] else {})} for task in ("pref", "strict") for i in range(10)]
    labels += [{"sample_id": f"p{i}", "annotator": "bob", "task": task, "value": value, "order": order}
               for task in ("pref", "strict") for i, (value, order) in BOB.items()]
    strict = list(SWAPPED)
    strict[4] = "B"  # the task without tie: the swapped order says B where the other task's says tie
    with write_session(engine) as session:
        import_file(session, "samples", jsonl(tmp_path / "s.jsonl", samples), dataset="d")
        add_task(session, "pref", target="sample", kind="pairwise", labels=["A", "B", "tie"])
        add_task(session, "strict", target="sample", kind="pairwise", labels=["A", "B"])
        import_file(session, "labels", jsonl(tmp_path / "l.jsonl", labels), dataset="d")
        import_file(session, "verdicts", jsonl(tmp_path / "v.jsonl", verdict_rows("j", "pref", ORIGINAL, SWAPPED)
                                                + verdict_rows("j", "strict", ORIGINAL, strict)), dataset="d")
    return tmp_path


def report(engine, rule: str = "consistent", task: str = "pref", judge: str = "j") -> dict:
    with Session(engine) as session:
        return build_report(session, "d", judge, options=Options(bootstrap=200, order_rule=rule), tasks=[task]).data


def kappa(gold, judge, labels):
    return cohen_kappa_score(gold, judge, labels=labels)


def test_the_position_block_on_data_with_unusable_and_missing_verdicts(engine, pairwise):
    position = report(engine)["tasks"]["pref"]["position"]
    assert position["orders"] == ["original", "swapped"]
    assert (position["n_targets"], position["n_pairs"]) == (10, 6)
    assert position["agreement"] == pytest.approx(0.5)
    assert position["first_position_rate"] == pytest.approx(8 / 11)
    assert position["tie_rate"] == pytest.approx(1 / 12)
    assert (position["n_first_both"], position["n_second_both"], position["position_p_value"]) == (2, 0, pytest.approx(0.5))
    assert (position["n_unusable"], position["n_unusable_original"], position["n_unusable_swapped"]) == (4, 2, 2)
    pairs_o, pairs_s = ORIGINAL[:6], SWAPPED[:6]
    assert position["kappa"]["value"] == pytest.approx(cohen_kappa_score(pairs_o, pairs_s))
    # alignment with the gold in each order, every usable verdict of that order (κ against sklearn)
    orig = [(g, v) for g, v in zip(GOLD, ORIGINAL, strict=True) if v not in (None, "-")]
    swap = [(g, v) for g, v in zip(GOLD, SWAPPED, strict=True) if v not in (None, "-")]
    for name, pairs in (("original", orig), ("swapped", swap)):
        align = position[f"alignment_{name}"]
        assert align["n"] == len(pairs) and align["metric"] == "cohen_kappa" and len(align["ci"]) == 2
        assert align["value"] == pytest.approx(kappa([g for g, _ in pairs], [v for _, v in pairs], ["A", "B", "tie"]))
    assert position["alignment_original"]["n_unparsed"] == 1 and position["alignment_swapped"]["n_unparsed"] == 1
    # the annotators: 12 non-tie labels with a recorded order, 7 of them picked the response shown first
    assert (position["human_first_position_rate"], position["n_human_with_order"]) == (pytest.approx(7 / 12), 12)
    assert position["n_human_without_order"] == 1


def test_the_consistent_rule_makes_a_conflict_a_tie_and_counts_what_it_leaves_out(engine, pairwise):
    data = report(engine, "consistent")
    section = data["tasks"]["pref"]
    assert data["method"]["order_rule"] == section["order_rule"] == "consistent"
    judge = ["A", "tie", "tie", "A", "tie", "B"]  # p1, p2, p4 conflict → tie
    assert section["n"] == 6 and section["n_unparsed"] == 2 and section["n_order_miss"] == 2  # p6, p7 unusable; p8, p9 one order
    assert section["cohen_kappa"]["value"] == pytest.approx(kappa(GOLD[:6], judge, ["A", "B", "tie"]))
    assert section["confusion"]["matrix"] == [[1, 0, 2], [1, 1, 1], [0, 0, 0]]


def test_without_tie_a_conflict_is_a_miss(engine, pairwise):
    section = report(engine, "consistent", task="strict")["tasks"]["strict"]
    # p1, p2, p4 conflict with no tie to fall back on; p8, p9 have one order: five misses, never agreeing
    assert (section["n"], section["n_order_miss"], section["n_unparsed"]) == (3, 5, 2)
    assert section["percent_agreement"] == pytest.approx(2 / 3)  # p0 A=A, p3 B≠A, p5 B=B


def test_the_original_rule_scores_the_original_order_alone(engine, pairwise):
    section = report(engine, "original")["tasks"]["pref"]
    scored = [(g, v) for g, v in zip(GOLD, ORIGINAL, strict=True) if v not in (None, "-")]
    assert section["order_rule"] == "original"
    assert (section["n"], section["n_unparsed"], section["n_order_miss"]) == (8, 1, 0)
    assert section["cohen_kappa"]["value"] == pytest.approx(kappa(*zip(*scored, strict=True), ["A", "B", "tie"]))
    assert section["alignment"]["value"] == section["position"]["alignment_original"]["value"]


def test_a_judge_with_one_order_is_scored_on_it_under_either_rule(engine, pairwise, tmp_path):
    rows = [row for row in verdict_rows("only", "pref", ORIGINAL, SWAPPED) if row["order"] == "swapped"]
    with write_session(engine) as session:
        import_file(session, "verdicts", jsonl(tmp_path / "one.jsonl", rows), dataset="d")
    sections = [report(engine, rule, judge="only")["tasks"]["pref"] for rule in ("consistent", "original")]
    assert sections[0]["n"] == sections[1]["n"] == 8 and sections[0]["cohen_kappa"] == sections[1]["cohen_kappa"]
    position = sections[0]["position"]
    assert position["orders"] == ["swapped"] and position["status"] == "undefined"
    assert position["reason"] == {"code": "one_order_missing", "missing": {"code": "verdicts_in_one_order", "order": "swapped"}}
    assert "swapped order only" in position["note"]


def test_the_order_rule_on_the_command_line_report_gate_and_compare(engine, pairwise, runner, tmp_path):
    out = {}
    for rule in ("consistent", "original"):
        result = runner.invoke(["report", "--dataset", "d", "--judge", "j", "--task", "pref", "--bootstrap", "200",
                                "--order-rule", rule])
        assert result.exit_code == 0, result.output
        out[rule] = json.loads(result.output)
    assert out["consistent"]["tasks"]["pref"]["n"] == 6 and out["original"]["tasks"]["pref"]["n"] == 8
    markdown = runner.invoke(["report", "--dataset", "d", "--judge", "j", "--task", "pref", "--format", "md",
                              "--bootstrap", "200", "--order-rule", "original"]).output
    assert "by the order rule original: the verdict in the original presentation order" in markdown
    bad = runner.invoke(["report", "--dataset", "d", "--judge", "j", "--order-rule", "both"])
    assert bad.exit_code == 2 and "'both' is not one of 'consistent', 'original'" in bad.output
    gate = runner.invoke(["gate", "--dataset", "d", "--judge", "j", "--task", "pref", "--order-rule", "original",
                          "--bootstrap", "200"])
    assert gate.exit_code == 1 and "pref" in gate.output
    rows = verdict_rows("k", "pref", GOLD, GOLD)  # a second judge that agrees with the gold in both orders
    with write_session(engine) as session:
        import_file(session, "verdicts", jsonl(tmp_path / "k.jsonl", rows), dataset="d")
    with Session(engine) as session:
        consistent = compare_judges(session, "d", "j", "k", task="pref", options=Options(bootstrap=200))
        original = compare_judges(session, "d", "j", "k", task="pref", options=Options(bootstrap=200, order_rule="original"))
    # the common targets (common.common_targets): every target both were run on; j's unusable verdicts and order
    # misses are j's misses there (consistent: all 10; original: j never judged p9 in that order)
    assert (consistent["common_n"], original["common_n"]) == (10, 9)
    assert consistent["tasks"]["pref"]["n_unparsed_a"] == 4 and original["tasks"]["pref"]["n_unparsed_a"] == 1
    assert consistent["method"]["order_rule"] == "consistent" and original["method"]["order_rule"] == "original"
    scored = [(g, MISS if v is None else v) for g, v in zip(GOLD, ORIGINAL, strict=True) if v != "-"]
    assert original["a"]["value"] == pytest.approx(kappa(*zip(*scored, strict=True), ["A", "B", "tie", MISS]))


def test_the_alignment_in_each_order_is_what_the_categorical_section_gives_for_that_order(engine, pairwise):
    from calibrate import lookup
    from calibrate.calibration.frames import labels_frame, verdicts_frame
    from calibrate.calibration.pairwise import order_alignment, split_orders
    from calibrate.calibration.sections import categorical_section
    from calibrate.gold import categorical_gold

    options = Options(bootstrap=300, seed=4)
    with Session(engine) as session:
        dataset, task, judge = lookup.dataset(session, "d"), lookup.task(session, "pref"), lookup.judge(session, "j")
        labels = labels_frame(session, dataset, task)
        orders = split_orders(verdicts_frame(session, dataset, task, judge))
    gold = categorical_gold(labels)
    for kind, verdicts in orders.items():
        fast = order_alignment(task, verdicts, gold, {"sample:3"}, options)
        section, _ = categorical_section(task, labels, verdicts, {"sample:3"}, None, options, gold=gold, light=True)
        assert fast["value"] == section["cohen_kappa"]["value"] and fast["ci"] == section["cohen_kappa"]["ci"], kind
        assert (fast["n"], fast["n_unparsed"], fast["percent_agreement"]) == (
            section["n"], section["n_unparsed"], section["percent_agreement"]), kind


CONSISTENT = ["A", "tie", "tie", "A", "tie", "B"]  # the consistent rule's verdicts on p0…p5 (p6–p9: none)
CY = ["A", "B", "B", "B", "A", "B", "A", "B", "B", "A"]  # a third annotator: differs from ann on p1 and p8


def test_the_dashboard_scores_a_pairwise_judge_on_one_verdict_per_target_by_the_order_rule(engine, pairwise):
    from calibrate.loop.dashboard import dashboard

    with Session(engine) as session:
        board = dashboard(session, "d", task="pref", split=None, options=Options(bootstrap=200))
        data = build_report(session, "d", "j", options=Options(bootstrap=200), tasks=["pref"]).data
    (row,) = board.rows
    assert board.pairwise and board.order_rule == "consistent" and board.common_targets == 10
    # every target was run on (p8, p9 in one order only): the four without a verdict by the rule are misses
    miss = "(no usable verdict)"
    judge = CONSISTENT + [miss] * 4
    assert (row.n, row.n_unparsed) == (10, 4)
    assert row.value == pytest.approx(kappa(GOLD, judge, ["A", "B", "tie", miss]))
    section = data["tasks"]["pref"]
    assert row.own["value"] == pytest.approx(section["cohen_kappa"]["value"]) and row.own["n"] == section["n"] == 6
    assert row.position == {k: v for k, v in section["position"].items() if not k.startswith(("alignment_", "human_", "n_human"))}


def test_versions_on_common_targets_score_pairwise_groups_with_kappa(engine, pairwise):
    from calibrate.calibration.common import MISS, score_versions
    from calibrate.models import Sample

    with Session(engine) as session:
        ids = {s.external_id: s.id for s in session.exec(select(Sample)).all()}
        groups = {ids[f"p{i}"]: "low" if i < 5 else "high" for i in range(10)}
        scores = score_versions(session, "d", "pref", ["j"], options=Options(bootstrap=200, order_rule="original"),
                                groups=groups)
    # by the original rule the judge was run on p0…p8 (p9 has the swapped order only); p6's verdict is unusable: a miss
    judge = [MISS if v is None else v for v in ORIGINAL[:9]]
    by_group = {g["group"]: g for g in scores.common["j"]["per_group"]}
    labels = ["A", "B", "tie", MISS]
    assert scores.common_targets == 9 and [g["n"] for g in scores.common["j"]["per_group"]] == [4, 5]
    assert by_group["low"]["value"] == pytest.approx(kappa(GOLD[:5], judge[:5], labels))
    assert by_group["high"]["value"] == pytest.approx(kappa(GOLD[5:9], judge[5:], labels))
    assert scores.common["j"]["cohen_kappa"]["value"] == pytest.approx(kappa(GOLD[:9], judge, labels))


@pytest.mark.parametrize("rule", ["consistent", "original"])
def test_the_alt_test_reads_a_pairwise_judge_by_the_order_rule(engine, pairwise, runner, tmp_path, rule):
    from calibrate.calibration.alttest import run_alt_test
    from calibrate.stats.alttest import alt_test

    rows = [{"sample_id": f"p{i}", "annotator": "cy", "task": "pref", "value": value} for i, value in enumerate(CY)]
    with write_session(engine) as session:
        import_file(session, "labels", jsonl(tmp_path / "cy.jsonl", rows), dataset="d")
    with Session(engine) as session:
        result = run_alt_test(session, "d", "pref", "j", min_items=1, order_rule=rule)
        section = build_report(session, "d", "j", options=Options(bootstrap=200, order_rule=rule), tasks=["pref"]).data
    humans = [(f"p{i}", "ann", v) for i, v in enumerate(GOLD)] + [(f"p{i}", "bob", v) for i, (v, _) in BOB.items()]
    humans += [(f"p{i}", "cy", v) for i, v in enumerate(CY)]
    verdicts = CONSISTENT if rule == "consistent" else ORIGINAL
    judged = [(f"p{i}", v) for i, v in enumerate(verdicts) if v not in (None, "-")]
    expected = alt_test(*zip(*humans, strict=True), *zip(*judged, strict=True), scoring="accuracy", min_items=1).to_dict()
    assert result["status"] == "ok" and result["order_rule"] == rule and result["scoring"] == "accuracy"
    by_name = lambda rows: sorted(rows, key=lambda r: r["annotator"])  # noqa: E731
    assert by_name(result.pop("annotators")) == by_name(expected.pop("annotators"))
    assert {k: result[k] for k in expected} == expected
    cli = runner.invoke(["alt-test", "--dataset", "d", "--task", "pref", "--judge", "j", "--min-items", "1", "--order-rule", rule])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.output)["winning_rate"] == result["winning_rate"]
    # the report's block (the test's defaults: 30 items per annotator) reads the same verdicts
    block = section["tasks"]["pref"]["alt_test"]
    assert block["scoring"] == "accuracy" and block["n_items"] == expected["n_items"]


def test_under_golden_the_position_block_covers_the_golden_members_only(engine, pairwise, runner):
    """The golden set p0…p5 leaves out the targets whose verdicts are unusable or missing (p6…p9) and four of the
    annotators' first-shown picks (ann on p6–p9). Hand-computed on p0…p5 (table in the module docstring):

    judge   6 targets, 6 pairs, same verdict on p0, p3, p5 (0.5); first-shown picks original 5 of 6, swapped 3 of 5
            (8/11); ties 1 of 12; nothing unusable
    humans  ann with an order on p0 p1 p2 p4 p5 (p3 without), bob on p2 p3 p5: 8 non-tie labels, first-shown picks
            ann p0, bob p3 and p5 → 3/8 (7/12 over all ten)
    """
    from calibrate.loop.golden import create_golden, golden_scope
    from calibrate.models import Sample

    with write_session(engine) as session:
        for sample in session.exec(select(Sample)).all():
            if int(sample.external_id[1:]) < 6:
                sample.split = "test"
                session.add(sample)
    with write_session(engine) as session:
        create_golden(session, "d", "g", split="test")
    with Session(engine) as session:
        ids, cited = golden_scope(session, "d", "g")
        everything = build_report(session, "d", "j", options=Options(bootstrap=200), tasks=["pref"]).data
        scoped = build_report(session, "d", "j", options=Options(bootstrap=200, sample_ids=ids, golden=cited),
                              tasks=["pref"]).data
    full, position = everything["tasks"]["pref"]["position"], scoped["tasks"]["pref"]["position"]
    # The same JSON keys in the same order; `reason` only stands beside a non-empty `note` (here: the unusable verdicts).
    assert list(position) == [key for key in full if key != "reason"] and full["note"] and position["note"] == ""
    assert (full["n_targets"], full["n_unusable"], full["human_first_position_rate"]) == (10, 4, pytest.approx(7 / 12))
    assert (position["n_targets"], position["n_pairs"], position["n_unusable"]) == (6, 6, 0)
    assert position["agreement"] == pytest.approx(0.5)
    assert position["first_position_rate"] == pytest.approx(8 / 11)
    assert position["tie_rate"] == pytest.approx(1 / 12)
    assert (position["n_first_both"], position["n_second_both"]) == (2, 0)
    for name, verdicts in (("original", ORIGINAL), ("swapped", SWAPPED)):
        align = position[f"alignment_{name}"]
        assert (align["n"], align["n_unparsed"]) == (6, 0)
        assert align["value"] == pytest.approx(kappa(GOLD[:6], verdicts[:6], ["A", "B", "tie"]))
    assert (position["human_first_position_rate"], position["n_human_with_order"]) == (pytest.approx(3 / 8), 8)
    assert position["n_human_without_order"] == 1
    # The command: `report --golden g` writes the same block.
    out = runner.invoke(["report", "--dataset", "d", "--judge", "j", "--task", "pref", "--golden", "g", "--format", "json",
                         "--bootstrap", "200"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["golden"]["name"] == "g" and data["tasks"]["pref"]["position"]["n_human_with_order"] == 8
    assert data["tasks"]["pref"]["position"]["human_first_position_rate"] == pytest.approx(3 / 8)
