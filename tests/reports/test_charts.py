"""The inline SVG charts: well-formed, escaped, and drawing what they are given."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from calibrate.reports.charts import AgreementRow, agreement_chart, confusion_heatmap, score_scatter

NS = {"s": "http://www.w3.org/2000/svg"}
HOSTILE = "<script>alert(1)</script>"


def parse(svg):
    return ET.fromstring(svg)  # raises on malformed XML, unescaped "<" or "&"


def texts(root):
    return ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]


def test_heatmap_has_a_cell_and_a_count_per_pair_of_labels_and_axis_titles():
    root = parse(confusion_heatmap(["supported", "unsupported"], [[90, 3], [11, 40]]))
    cells = root.findall(".//s:rect[@class='cell']", NS)
    assert len(cells) == 4
    counts = [t.text for t in root.findall(".//s:text[@class='count']", NS)]
    assert counts == ["90", "3", "11", "40"]
    # The largest count is the darkest cell; an empty cell is the lightest.
    shades = [c.get("fill") for c in cells]
    assert shades[0] == max(shades, key=lambda h: -sum(int(h[i:i + 2], 16) for i in (1, 3, 5)))
    assert "human gold" in texts(root) and "judge" in texts(root)


def test_heatmap_escapes_labels_and_handles_an_empty_matrix():
    svg = confusion_heatmap([HOSTILE, "a&b"], [[0, 0], [0, 0]], row_axis="gold <x>", column_axis="judge")
    assert "<script" not in svg
    root = parse(svg)
    titles = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}title"))
    assert HOSTILE in titles and "a&b" in titles
    assert "gold <x>" in texts(root)
    assert [t.text for t in root.findall(".//s:text[@class='count']", NS)] == ["0"] * 4


def test_scatter_is_deterministic_with_a_point_per_pair_and_the_diagonal():
    points = [(1.0, 1.0, "s1"), (1.0, 1.0, "s2"), (3.5, 4.0, "s3"), (5.0, 2.0, "s4")]
    svg = score_scatter(points, scale=[1, 5])
    assert svg == score_scatter(points, scale=[1, 5])
    root = parse(svg)
    circles = root.findall(".//s:circle[@class='point']", NS)
    assert len(circles) == 4
    # Equal scores are jittered apart, so both stay visible.
    assert (circles[0].get("cx"), circles[0].get("cy")) != (circles[1].get("cx"), circles[1].get("cy"))
    assert len(root.findall(".//s:line[@class='diagonal']", NS)) == 1
    assert {"1", "2", "3", "4", "5"} <= set(texts(root))


def test_scatter_without_points_says_so():
    root = parse(score_scatter([], scale=[1, 5]))
    assert "no scored targets" in texts(root)


def test_agreement_chart_draws_estimates_intervals_threshold_and_ceilings():
    rows = [
        AgreementRow("claim_support · Cohen's κ", 0.82, (0.70, 0.91), "passed", ceiling=0.62),
        AgreementRow("answer_quality · Spearman's ρ", 0.55, (0.40, 0.66), "not passed", ceiling=None),
        AgreementRow(HOSTILE, None, None, "undefined"),
    ]
    svg = agreement_chart(rows, threshold=0.75)
    assert "<script" not in svg
    root = parse(svg)
    assert len(root.findall(".//s:circle[@class='estimate']", NS)) == 2
    assert len(root.findall(".//s:g[@class='ci']", NS)) == 2
    assert len(root.findall(".//s:path[@class='ceiling']", NS)) == 1
    line = root.find(".//s:line[@class='threshold']", NS)
    first, second = root.findall(".//s:circle[@class='estimate']", NS)
    # The threshold sits between the failing and the passing estimate.
    assert float(second.get("cx")) < float(line.get("x1")) < float(first.get("cx"))
    assert "threshold 0.75" in texts(root)
    assert "undefined" in texts(root)
    assert any(HOSTILE in t for t in texts(root))
    # Colours follow the outcome.
    assert first.get("fill") != second.get("fill")


def test_agreement_chart_widens_its_axis_for_negative_values():
    root = parse(agreement_chart([AgreementRow("t", -0.35, (-0.6, -0.1), "not passed")], threshold=0.5))
    assert "-0.6" in texts(root) and "1.0" in texts(root)


def test_the_windows_chart_draws_estimates_band_judge_minimum_and_marks_windows_without_an_estimate():
    from bs4 import BeautifulSoup

    from calibrate.reports.charts import WindowPoint, windows_chart

    points = [WindowPoint("2026-W45", 0.8, (0.7, 0.9), 0.85, "ok"), WindowPoint("2026-W46", 0.75, (0.6, 0.88), 0.86, "undecided"),
              WindowPoint("<W47>", None, None, 0.9, "too_few"), WindowPoint("2026-W48", 0.5, (0.4, 0.6), 0.84, "alert")]
    svg = BeautifulSoup(windows_chart(points, minimum=0.7, metric="share of <b>pass</b>"), "html.parser")
    assert [c["class"][1] for c in svg.select("circle.estimate")] == ["status-ok", "status-undecided", "status-alert"]
    assert len(svg.select("rect.no-estimate")) == 1 and len(svg.select("polygon.ci-band")) == 1  # the band breaks at W47
    assert svg.select_one("line.minimum") is not None and svg.select_one("polyline.judge-only") is not None
    assert svg.find("b") is None and "<W47>" in svg.get_text()  # every text escaped
    assert float(svg.select_one("svg")["width"]) <= 500  # about 480: readable when scaled to a 390 px phone
