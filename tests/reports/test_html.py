"""The HTML report: one self-contained page, checked by its structure."""

from __future__ import annotations

import re

from bs4 import BeautifulSoup
from report_helpers import HOSTILE, fill
from sqlmodel import select

from calibrate.models import Label, User
from calibrate.reports import render
from calibrate.tasks import add_task


def parse(report):
    return BeautifulSoup(render(report, "html"), "html.parser")


def task_section(page, name):
    section = page.select_one(f"section.task[data-task='{name}']")
    assert section is not None, f"no section for {name}"
    return section


def stat_value(section, key):
    return section.select_one(f"table[data-table=statistics] tr[data-stat={key}] td.value").get_text(strip=True)


def count_of(section, key):
    return int(section.select_one(f"table[data-table=counts] tr[data-count={key}] td").get_text(strip=True))


def test_html_opens_with_title_and_decision(full_report):
    page = parse(full_report)
    data = full_report.data
    assert "d" in page.title.get_text() and "judge j" in page.title.get_text()
    assert re.search(r"\d{4}-\d{2}-\d{2}", page.title.get_text())
    assert page.h1.get_text(strip=True) == "d"
    decision = page.select_one("#decision")
    # The decision comes before any task section.
    assert decision.find_previous("section", class_="task") is None
    expected = "passed" if data["passed"] else "not passed"
    assert decision.select_one(".verdict")["data-outcome"] == expected
    rows = decision.select("table.decisions tbody tr")
    assert [r["data-task"] for r in rows] == list(data["tasks"])
    for row in rows:
        section = data["tasks"][row["data-task"]]
        assert row["data-outcome"] == {True: "passed", False: "not passed", None: "undefined"}[section["passed"]]
        assert row.select_one("td.value").get_text(strip=True) == f"{section['alignment']['value']:.3f}"
        assert int(row.select_one("td.n").get_text()) == section["n"]
        low, high = section["alignment"]["ci"]
        assert row.select_one("td.ci").get_text(strip=True) == f"[{low:.3f}, {high:.3f}]"


def test_html_has_one_chart_per_categorical_task_one_scatter_and_the_agreement_chart(full_report):
    page = parse(full_report)
    assert len(page.select("#decision svg.chart-agreement")) == 1
    assert len(page.select("svg.chart-agreement")) == 1
    assert len(task_section(page, "claim_support").select("svg.chart-confusion")) == 1
    assert len(task_section(page, "context_relevance").select("svg.chart-confusion")) == 1
    assert len(task_section(page, "answer_quality").select("svg.chart-scatter")) == 1
    assert len(page.select("svg.chart-confusion")) == 2 and len(page.select("svg.chart-scatter")) == 1
    # The agreement chart: one estimate and one CI per task, one threshold line, human ceilings.
    chart = page.select_one("svg.chart-agreement")
    assert len(chart.select("circle.estimate")) == 3 and len(chart.select("g.ci")) == 3
    assert len(chart.select("line.threshold")) == 1
    assert len(chart.select("path.ceiling")) == 3
    # The heat map shows the confusion matrix's counts, axis titles included.
    heat = task_section(page, "claim_support").select_one("svg.chart-confusion")
    matrix = full_report.data["tasks"]["claim_support"]["confusion"]["matrix"]
    assert [int(t.get_text()) for t in heat.select("text.count")] == [v for row in matrix for v in row]
    texts = {t.get_text() for t in heat.find_all("text")}
    assert {"human gold", "judge"} <= texts
    scatter = task_section(page, "answer_quality").select_one("svg.chart-scatter")
    assert len(scatter.select("circle.point")) == full_report.data["tasks"]["answer_quality"]["n"]
    assert len(scatter.select("line.diagonal")) == 1


def test_html_task_tables_show_statistics_counts_and_the_human_ceiling(full_report):
    page = parse(full_report)
    data = full_report.data["tasks"]
    claims = task_section(page, "claim_support")
    assert stat_value(claims, "cohen_kappa") == f"{data['claim_support']['cohen_kappa']['value']:.3f}"
    assert count_of(claims, "n") == data["claim_support"]["n"]
    assert count_of(claims, "n_unparsed") == 1
    assert count_of(claims, "n_excluded_label") == data["claim_support"]["n_excluded_label"] >= 1
    assert count_of(claims, "n_ties") == data["claim_support"]["n_ties"]
    assert count_of(claims, "n_fewshot") == 0
    left_out = claims.select_one("table[data-table=counts] tfoot tr[data-count=excluded] td").get_text(strip=True)
    assert int(left_out) == sum(data["claim_support"][k] for k in ("n_unparsed", "n_no_gold", "n_excluded_label", "n_fewshot"))
    ceiling = claims.select_one("table[data-table=ceiling]")
    pair = data["claim_support"]["human"]["pairwise_kappa"][0]["value"]
    assert ceiling.select_one("tr.ceiling-row td.value").get_text(strip=True) == f"{pair:.3f}"
    assert ceiling.select_one("tr.judge-row td.value").get_text(strip=True) == f"{data['claim_support']['cohen_kappa']['value']:.3f}"
    fleiss = ceiling.select_one("tr[data-stat=fleiss_kappa] td.value").get_text(strip=True)
    assert fleiss == f"{data['claim_support']['human']['fleiss_kappa']['value']:.3f}"
    assert ceiling.select_one("tr[data-stat=krippendorff_nominal]") is not None
    annotators = [r.th.get_text(strip=True) for r in claims.select("table[data-table=per-annotator] tbody tr")]
    assert annotators == ["ann1", "ann2"]
    grouped = claims.select_one("table[data-table=grouped] tr[data-stat=cohen_kappa] td.value").get_text(strip=True)
    assert grouped == f"{data['claim_support']['grouped']['cohen_kappa']['value']:.3f}"
    quality = task_section(page, "answer_quality")
    assert stat_value(quality, "spearman_rho") == f"{data['answer_quality']['spearman_rho']['value']:.3f}"
    assert {r["data-stat"] for r in quality.select("table[data-table=statistics] tr[data-stat]")} == {
        "spearman_rho", "kendall_tau", "pearson_r", "weighted_kappa"}
    assert quality.select_one("table[data-table=ceiling] tr[data-stat=krippendorff_ordinal]") is not None
    assert quality.select_one("table[data-table=ceiling] tr[data-stat=krippendorff_interval]") is not None
    assert len(quality.select("table[data-table=grouped] tr[data-stat]")) == 3
    # Ties are listed for adjudication with who said what.
    if data["claim_support"]["n_ties"]:
        assert "ann1:" in claims.select_one("ul.ties li").get_text()


def test_html_explains_methods_provenance_and_rag(full_report):
    page = parse(full_report)
    methods = page.select_one("#methods").get_text(" ", strip=True)
    for words in ("adjudicated", "majority", "tie", "mean", "unparsed", "not_applicable", "few-shot",
                  "200 resamples", "seed 0", "95% percentile", "whole samples", "at least 0.75"):
        assert words in methods, words
    provenance = page.select_one("#provenance").get_text(" ", strip=True)
    assert "Answers of a RAG assistant, labelled by two experts." in provenance and "test" in provenance
    rag = {row["data-metric"] for row in page.select("#rag tr[data-metric]")}
    assert rag == {"faithfulness", "context_precision"}


def test_html_is_printable_and_self_contained(full_report):
    text = render(full_report, "html")
    page = BeautifulSoup(text, "html.parser")
    assert page.find_all(["script", "link", "img", "iframe", "object", "embed", "base", "form"]) == []
    style = " ".join(s.get_text() for s in page.find_all("style"))
    assert "@media print" in style and "@import" not in style and "url(" not in style
    for el in page.find_all(True):
        for attr, value in el.attrs.items():
            assert not attr.lower().startswith("on")
            if attr in ("src", "href", "xlink:href", "action"):
                assert str(value).startswith("#"), (el.name, attr, value)
    # The only address in the page is the SVG namespace.
    assert set(re.findall(r"https?://[^\s\"'<>]+", text)) == {"http://www.w3.org/2000/svg"}


def test_html_says_ci_lower_bound_must_pass(store, report_of):
    fill(store, n=12)
    page = parse(report_of(ci_lower=True))
    decision = page.select_one("#decision")
    assert "CI lower bound must pass" in decision.get_text(" ", strip=True)
    for row in decision.select("table.decisions tbody tr"):
        assert "CI lower bound" in row.select_one(".reason").get_text() or row["data-outcome"] == "undefined"


def test_undefined_statistics_say_so_with_their_note(store, report_of):
    for sid in ("s1", "s2", "s3"):
        store.sample(sid, 2)
        for c in range(2):
            for a in ("ann1", "ann2"):
                store.label("claim_support", a, sid, "supported", claim=c)
            store.verdict("j", "claim_support", sid, "supported", claim=c)
    report = report_of()
    page = parse(report)
    claims = task_section(page, "claim_support")
    cell = claims.select_one("table[data-table=statistics] tr[data-stat=cohen_kappa] td.value")
    assert cell.get_text(strip=True) == "undefined" and "undefined" in cell["class"]
    note = report.data["tasks"]["claim_support"]["cohen_kappa"]["note"]
    assert note and note in claims.get_text(" ", strip=True)
    row = page.select_one("#decision tr[data-task=claim_support]")
    assert row["data-outcome"] == "undefined" and note in row.get_text(" ", strip=True)
    words = set(re.findall(r"[A-Za-z]+", page.get_text(" ")))
    assert not words & {"None", "nan", "NaN", "null"}


def test_a_judge_without_verdicts_for_a_task_is_said_in_words(store, report_of):
    store.sample("s1", 2)
    store.sample("s2", 2)
    for sid in ("s1", "s2"):
        store.label("answer_quality", "ann1", sid, 3)
        for c in range(2):
            store.label("claim_support", "ann1", sid, "supported" if c else "unsupported", claim=c)
            store.verdict("j", "claim_support", sid, "supported" if c else "unsupported", claim=c)
    page = parse(report_of())
    quality = task_section(page, "answer_quality")
    assert "has no verdicts for this task" in quality.select_one(".judge-note").get_text()
    assert page.select_one("#decision tr[data-task=answer_quality]")["data-outcome"] in ("undefined", "not judged")


def test_a_task_with_no_data_says_so(store, report_of, session):
    store.sample("s1", 1)
    store.label("claim_support", "ann1", "s1", "supported", claim=0)
    store.label("answer_quality", "ann1", "s1", 4)
    store.verdict("j", "answer_quality", "s1", 4)
    session.flush()
    for label in session.exec(select(Label)).all():
        if label.claim_id is not None:
            label.stale = True
    report = report_of()
    assert report.data["tasks"]["claim_support"]["status"] == "no_data"
    claims = task_section(parse(report), "claim_support")
    assert "This task has no data" in claims.select_one(".no-data").get_text()


def test_without_a_judge_the_report_makes_no_decision(store, report_of):
    fill(store, n=6)
    page = parse(report_of(judge=None))
    assert page.select_one("#decision .verdict")["data-outcome"] == "not judged"
    assert "No decision" in page.select_one("#decision .verdict").get_text()
    assert page.select("svg") == []
    assert page.select_one("table[data-table=ceiling]") is not None


def hostile_report(store, report_of, session):
    """Store a report whose every user-provided text is markup."""
    store.dataset.name = HOSTILE
    store.dataset.description = HOSTILE + '<img src="https://evil.example/x.png" onerror="alert(2)">'
    store.dataset.source = 'javascript:alert(3)" onmouseover="alert(4)'
    session.add(User(username=HOSTILE, role="annotator"))
    session.add(User(username="<img src=x onerror=alert(5)>", role="annotator"))
    add_task(session, "verdict_kind", target="sample", kind="categorical", labels=[HOSTILE, "ok|<b>bold</b>"])
    for i in range(6):
        sid = f"<svg onload=alert({i})>"
        store.sample(sid, 1, meta={"topic": "<a href='https://evil.example'>x</a>"})
        for a in (HOSTILE, "<img src=x onerror=alert(5)>"):
            store.label("verdict_kind", a, sid, HOSTILE if i % 2 else "ok|<b>bold</b>")
            store.label("claim_support", a, sid, "supported" if i % 2 else "unsupported", claim=0)
        store.verdict(HOSTILE, "verdict_kind", sid, HOSTILE if i % 3 else "ok|<b>bold</b>")
        store.verdict(HOSTILE, "claim_support", sid, "supported", claim=0)
    return report_of(judge=HOSTILE, group_by="metadata.topic")


def test_hostile_names_are_shown_as_text_never_as_markup(store, report_of, session):
    report = hostile_report(store, report_of, session)
    text = render(report, "html")
    assert "<script" not in text.lower()
    # "onerror=" may appear as escaped text (&lt;img src=x onerror=...&gt;), never inside a tag.
    assert re.findall(r"<[^>]*\bon[a-z]+\s*=", text, flags=re.IGNORECASE) == []
    assert "<img" not in text.lower() and "<svg onload" not in text.lower()
    page = BeautifulSoup(text, "html.parser")
    assert page.find_all("script") == [] and page.find_all("img") == [] and page.find_all("a", href=re.compile("^[^#]")) == []
    for el in page.find_all(True):
        assert not [a for a in el.attrs if a.lower().startswith("on")], el
        for attr in ("src", "href"):
            assert not str(el.get(attr, "#")).lower().startswith(("http", "javascript")), el
    # The text is still there for the reader, escaped.
    visible = page.get_text(" ")
    assert HOSTILE in page.h1.get_text()
    assert HOSTILE in page.select_one(".judge-name").get_text()
    assert "ok|<b>bold</b>" in visible
    assert HOSTILE in task_section(page, "verdict_kind").select_one("table[data-table=per-annotator]").get_text()
    heat = task_section(page, "verdict_kind").select_one("svg.chart-confusion")
    assert HOSTILE in " ".join(t.get_text() for t in heat.find_all("title"))


def test_a_continuous_task_without_a_scale_gets_a_scatter(store, report_of, session):
    add_task(session, "groundedness", target="sample", kind="continuous")
    for i in range(8):
        store.sample(f"s{i}")
        for a, shift in (("ann1", 0.0), ("ann2", 0.05)):
            store.label("groundedness", a, f"s{i}", round(i / 10 + shift, 3))
        store.verdict("j", "groundedness", f"s{i}", round(i / 10 + (0.1 if i % 2 else -0.05), 3))
    report = report_of()
    page = parse(report)
    section = task_section(page, "groundedness")
    scatter = section.select_one("svg.chart-scatter")
    assert len(scatter.select("circle.point")) == report.data["tasks"]["groundedness"]["n"] == 8
    assert stat_value(section, "spearman_rho") == f"{report.data['tasks']['groundedness']['spearman_rho']['value']:.3f}"
    assert "scale" not in section.select_one(".task-kind").get_text()


def test_a_dataset_without_labels_or_verdicts_says_so(store, report_of, session):
    from calibrate.models import Judge

    store.sample("s1", 1)
    session.add(Judge(name="j", kind="imported"))
    report = report_of()
    assert report.data["tasks"] == {}
    page = parse(report)
    assert page.select_one("#decision .verdict")["data-outcome"] == "not passed"
    assert "no task with labels or verdicts" in page.select_one("#decision").get_text(" ", strip=True)
    assert page.select("section.task") == [] and page.select("svg") == []
    assert "## Decision: fail — ❌ NOT PASSED under rule point" in render(report, "md")
    assert render(report, "csv").splitlines() == ["task,sample_id,target,claim,context,step,group,gold,gold_source,judge,judge_status,agree,excluded"]
