"""All four formats render one Report, so their headline numbers agree."""

from __future__ import annotations

import ast
import csv
import io
import json
from pathlib import Path

from bs4 import BeautifulSoup

import calibrate
from calibrate.reports import FORMATS, render


def test_headline_numbers_agree_across_formats(full_report):
    parsed = json.loads(render(full_report, "json"))
    page = BeautifulSoup(render(full_report, "html"), "html.parser")
    md = render(full_report, "md")
    for name, section in parsed["tasks"].items():
        metric = section["alignment"]["metric"]
        shown = f"{section[metric]['value']:.3f}"
        assert page.select_one(f"#decision tr[data-task={name}] td.value").get_text(strip=True) == shown
        html_table = page.select_one(f"section.task[data-task={name}] table[data-table=statistics] tr[data-stat={metric}] td.value")
        assert html_table.get_text(strip=True) == shown
        md_row = next(line for line in md.splitlines() if line.startswith("|") and f"**{shown}**" in line)
        assert md_row.split("|")[1].strip() in ("Cohen's κ", "Spearman's ρ")
    rows = list(csv.reader(io.StringIO(render(full_report, "csv"))))
    assert len(rows) - 1 == sum(len(r) for r in full_report.rows.values())
    for name, section in parsed["tasks"].items():
        scored = [r for r in rows[1:] if r[0] == name and r[-1] == ""]
        assert len(scored) == section["n"]


def test_every_format_renders_text(full_report):
    for fmt in FORMATS:
        text = render(full_report, fmt)
        assert isinstance(text, str) and text.endswith("\n")


def test_docs_describe_every_format_column_and_rule():
    doc = (calibrate.PROJECT_ROOT / "docs" / "report.md").read_text(encoding="utf-8")
    for fmt in FORMATS:
        assert f"`{fmt}`" in doc, fmt
    for column in ("task", "sample_id", "target", "claim", "context", "step", "group", "human_<annotator>", "gold",
                   "gold_source", "judge", "judge_status", "agree", "excluded"):
        assert f"`{column}`" in doc, column
    for key in ("dataset", "judge", "threshold", "ci_lower", "passed", "tasks", "rag", "method", "provenance",
                "n_unparsed", "n_no_gold", "n_excluded_label", "n_fewshot", "n_ties", "alignment", "labels_needed",
                "per_annotator", "grouped", "human", "confusion", "per_label", "judge_note"):
        assert f"`{key}`" in doc, key
    assert "formula" in doc and "`'`" in doc and r"^-?\d+(\.\d+)?$" in doc


def test_reports_package_never_imports_flask():
    package = Path(calibrate.__file__).parent / "reports"
    for path in package.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n == "flask" or n.startswith("flask.") or n.startswith("calibrate.views") for n in names), path


def test_claim_sets_and_stale_counts_agree_across_formats(full_report):
    parsed = json.loads(render(full_report, "json"))
    sources = parsed["tasks"]["claim_support"]["claim_sources"]
    assert sources and sum(sources.values()) > 0 and parsed["rag"]["faithfulness"]["claim_sources"] == sources
    text = "; ".join(f"{source}: {n} answer{'s' * (n != 1)}" for source, n in sources.items())
    page = BeautifulSoup(render(full_report, "html"), "html.parser")
    assert page.select_one("section.task[data-task=claim_support] tr[data-count=claim_sources] td").get_text() == text
    stale = page.select_one("section.task[data-task=claim_support] tr[data-count=n_stale] td").get_text()
    assert stale == str(parsed["tasks"]["claim_support"]["n_stale"])
    md = render(full_report, "md")
    assert f"Claim sets: {text}." in md and f"claim sets: {text}" in md  # the task section and the RAG note
    assert set(parsed["claim_sets"]) == {"sources", "expert_changes"}
