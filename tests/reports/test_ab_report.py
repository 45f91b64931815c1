"""The A/B renderers on hand-made results: the headline's reading of the interval, undefined values, escaping."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from bs4 import BeautifulSoup

from calibrate.calibration.ab import ABResult
from calibrate.reports import charts
from calibrate.reports.ab_report import FORMATS, headline, render_ab

HOSTILE = "<script>alert(1)</script>"


def result(value=0.1, ci=(0.05, 0.15), t=2.5, n_pairs=30, **extra):
    data = {
        "dataset": "d", "by": "metadata.system", "a": "v1", "b": HOSTILE, "metric": "ndcg@10", "k": 10,
        "source": "human", "values_from": "ids", "paired_by": "metadata.query_id",
        "direction": "B − A", "n_pairs": n_pairs, "n_unpaired": 2, "unpaired": {"a": 1, "b": 1},
        "n_undefined": {"a": 0, "b": 0}, "n_repeated": {"a": 0, "b": 0}, "mean_a": 0.5, "mean_b": 0.5 + (value or 0),
        "relative_improvement": (value or 0) / 0.5,
        "difference": {"value": value, "ci": list(ci) if ci else None, "p_value": 0.01, "confidence": 0.95,
                       "method": "percentile", "n_resamples": 2000, "seed": 0, "status": "ok", "note": ""},
        "ttest": {"t": t, "p_value": 0.02 if t is not None else None, "df": n_pairs - 1,
                  "status": "ok" if t is not None else "undefined", "note": "" if t is not None else "n < 2"},
        "wilcoxon": {"statistic": 120.0, "p_value": 0.03, "n_nonzero": n_pairs, "status": "ok", "note": ""},
        "notes": [f"note about {HOSTILE}"],
        "pairs": [{"key": f"{HOSTILE} q{i}", "a": 0.5, "b": 0.5 + (value or 0), "difference": value or 0,
                   "samples_a": [f"a{i}"], "samples_b": [f"b{i}"]} for i in range(3)],
        "generated_at": "2026-01-01T00:00:00+00:00", "calibrate_version": "0",
    }
    data.update(extra)
    return ABResult(data=data)


@pytest.mark.parametrize(
    ("value", "ci", "reading"),
    [
        (0.1, (0.05, 0.15), "B scores higher than A: the interval lies above 0"),
        (-0.1, (-0.15, -0.05), "B scores lower than A: the interval lies below 0"),
        (0.01, (-0.02, 0.04), "the interval includes 0: no difference is shown"),
    ],
)
def test_headline_reads_the_interval_against_zero(value, ci, reading):
    assert reading in headline(result(value, ci).data)


def test_headline_without_an_interval_says_so():
    text = headline(result(0.2, None, t=None, n_pairs=1).data)
    assert "with no interval" in text and "1 pair" in text


def test_every_format_renders_and_json_is_the_data():
    res = result()
    assert json.loads(render_ab(res, "json")) == res.data
    for fmt in FORMATS:
        assert render_ab(res, fmt).endswith("\n")
    with pytest.raises(ValueError, match="unknown A/B format"):
        render_ab(res, "csv")


def test_html_escapes_system_names_questions_and_notes_and_shows_undefined():
    page = BeautifulSoup(render_ab(result(t=None), "html"), "html.parser")
    assert page.find("script") is None
    assert page.select_one(".system-b").get_text() == HOSTILE
    assert all(HOSTILE in th.get_text() for th in page.select(".ab-pairs th.question"))
    assert HOSTILE in page.select_one(".notes").get_text()
    t_row = next(tr for tr in page.select(".ab-stats tr") if "t-test" in tr.get_text())
    assert t_row.select_one("td.value").get_text() == "undefined" and "n < 2" in t_row.get_text()


def test_markdown_makes_names_inert():
    md = render_ab(result(), "md")
    assert HOSTILE not in md and "&lt;script&gt;alert(1)&lt;/script&gt;" in md


def test_difference_chart_is_valid_svg_with_escaped_label():
    svg = charts.difference_chart(0.2, (0.1, 0.3), label=f"diff {HOSTILE}")
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg") and "<script>" not in svg
    undefined = charts.difference_chart(None, None, label="x")
    assert "undefined" in undefined and ET.fromstring(undefined) is not None
