"""The Markdown report: a compact summary whose untrusted text cannot become markup."""

from __future__ import annotations

import re

import pytest
from report_helpers import HOSTILE, fill
from sqlmodel import select

from calibrate.models import User
from calibrate.reports import render
from calibrate.reports.md_report import escape
from calibrate.tasks import add_task


def cells(line):
    """Split a Markdown table row on its unescaped pipes."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def tables(text):
    """Return the tables of a Markdown text as lists of rows of cells (separator rows dropped)."""
    out, current = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            if not re.fullmatch(r"\|(\s*-+:?\s*\|)+", line.replace("---:", "---")):
                current.append(cells(line))
        elif current:
            out.append(current)
            current = []
    if current:
        out.append(current)
    return out


def test_markdown_opens_with_a_decision_line_per_task(full_report):
    text = render(full_report, "md")
    data = full_report.data
    assert text.startswith("# Calibration report: d\n")
    heading = next(line for line in text.splitlines() if line.startswith("## Decision"))
    assert ("PASSED" in heading) and (("NOT PASSED" in heading) != bool(data["passed"]))
    for name, section in data["tasks"].items():
        line = next(line for line in text.splitlines() if line.startswith("- ") and f"**{escape(name)}**" in line)
        value = section["alignment"]["value"]
        low, high = section["alignment"]["ci"]
        assert f"{value:.3f}" in line or f"{value:.4f}" in line
        assert f"[{low:.3f}, {high:.3f}]" in line
        assert f"n = {section['n']} " in line and "threshold 0.75" in line
        assert ("✅ " in line) == (section["passed"] is True)


def test_markdown_has_a_table_per_task_and_the_human_ceiling_and_counts(full_report):
    text = render(full_report, "md")
    found = tables(text)
    stats_tables = [t for t in found if t[0][0] == "statistic"]
    assert len(stats_tables) == len(full_report.data["tasks"])
    for table in found:
        assert len({len(row) for row in table}) == 1, table  # every row has the header's cells
    kappa = full_report.data["tasks"]["claim_support"]["cohen_kappa"]["value"]
    assert stats_tables[0][1][:2] == ["Cohen's κ", f"**{kappa:.3f}**"]
    pair = full_report.data["tasks"]["claim_support"]["human"]["pairwise_kappa"][0]["value"]
    assert f"pairwise Cohen's κ {pair:.3f}" in text
    assert "Excluded from the statistics: unparsed verdicts 1," in text
    methods = text.split("## Methods", 1)[1]
    assert "200 resamples" in methods and "cluster bootstrap" in methods and "majority" in methods


@pytest.mark.parametrize(("raw", "shown"), [
    ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
    ("a|b", "a\\|b"),
    ("line\nbreak\r\nagain", "line break again"),
    ("`code` [link](https://x.example) ![img](y)", "\\`code\\` \\[link\\](https://x.example) \\!\\[img\\](y)"),
    ("**bold** _it_ ~~s~~ # h", "\\*\\*bold\\*\\* \\_it\\_ \\~\\~s\\~\\~ \\# h"),
    ("back\\slash &amp;", "back\\\\slash &amp;amp;"),
])
def test_escape_neutralises_markdown_and_html(raw, shown):
    assert escape(raw) == shown


def test_hostile_names_stay_text_in_markdown(store, report_of, session):
    store.dataset.name = HOSTILE
    store.dataset.description = "line one\n# not a heading | [x](https://evil.example)"
    session.add(User(username="a|b`c", role="annotator"))
    add_task(session, "verdict_kind", target="sample", kind="categorical", labels=[HOSTILE, "ok|no"])
    for i in range(4):
        store.sample(f"s{i}")
        for a in ("a|b`c", "ann2"):
            store.label("verdict_kind", a, f"s{i}", HOSTILE if i % 2 else "ok|no")
        store.verdict(HOSTILE, "verdict_kind", f"s{i}", HOSTILE if i < 2 else "ok|no")
    session.flush()
    assert session.exec(select(User).where(User.username == "a|b`c")).one()
    text = render(report_of(judge=HOSTILE), "md")
    assert "<script" not in text
    assert not re.search(r"(?<!\\)\]\(", text) and not re.search(r"(?<!\\)\[x", text)  # no link survives
    assert not re.search(r"^#\s*not a heading", text, flags=re.MULTILINE)
    for table in tables(text):
        assert len({len(row) for row in table}) == 1, table


def test_markdown_without_a_judge_makes_no_decision(store, report_of):
    fill(store, n=6)
    text = render(report_of(judge=None), "md")
    assert "## Decision: no decision" in text
    assert "Human–human agreement over" in text
