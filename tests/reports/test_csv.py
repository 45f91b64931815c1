"""The CSV report: one row per target per task, safe to open in a spreadsheet."""

from __future__ import annotations

import csv
import io

import pytest
from sqlmodel import select

from calibrate.models import User
from calibrate.reports import render
from calibrate.reports.csv_report import neutralise
from calibrate.tasks import add_task


def read(report):
    return list(csv.DictReader(io.StringIO(render(report, "csv"), newline="")))


def test_csv_has_one_row_per_target_per_task_with_the_documented_columns(full_report):
    text = render(full_report, "csv")
    header = next(csv.reader(io.StringIO(text)))
    assert header == ["task", "sample_id", "target", "claim", "context", "step", "group", "human_ann1", "human_ann2",
                      "gold", "gold_source", "judge", "judge_status", "agree", "excluded"]
    rows = read(full_report)
    assert len(rows) == sum(len(r) for r in full_report.rows.values())
    by_task = {t: [r for r in rows if r["task"] == t] for t in full_report.data["tasks"]}
    claims = by_task["claim_support"]
    assert {r["claim"] for r in claims} == {"0", "1", "2"} and {r["context"] for r in claims} == {""}
    assert {r["context"] for r in by_task["context_relevance"]} == {"0", "1"}
    # targets as the user names them (0-based, as in the files), never a database id such as claim:17
    assert {r["target"] for r in claims} == {f"{r['sample_id']}/claim/{r['claim']}" for r in claims}
    assert all(r["target"] == f"{r['sample_id']}/context/{r['context']}" for r in by_task["context_relevance"])
    assert {r["target"] for r in by_task["answer_quality"]} == {r["sample_id"] for r in by_task["answer_quality"]}
    assert {r["group"] for r in claims} == {"a", "b", "c"}
    assert {r["agree"] for r in claims} <= {"true", "false", ""}
    scored = [r for r in claims if r["excluded"] == ""]
    assert len([r for r in scored if r["agree"]]) == full_report.data["tasks"]["claim_support"]["n"]
    unparsed = [r for r in claims if r["excluded"] == "unparsed"]
    assert len(unparsed) == 1 and unparsed[0]["judge"] == "" and unparsed[0]["judge_status"] == "unparsed"
    assert [r for r in claims if r["sample_id"] == "s1" and r["claim"] == "0"][0]["excluded"] == "excluded_label"
    agree_true = [r for r in scored if r["agree"] == "true"]
    assert all(r["gold"] == r["judge"] for r in agree_true)
    assert text.endswith("\r\n")


@pytest.mark.parametrize(("value", "cell"), [
    ("=1+1", "'=1+1"),
    ("+1", "'+1"),
    ("-2+3", "'-2+3"),
    ("@SUM(A1)", "'@SUM(A1)"),
    ("\tx", "'\tx"),
    ("\rx", "'\rx"),
    ("=HYPERLINK(\"http://evil.example\",\"x\")", "'=HYPERLINK(\"http://evil.example\",\"x\")"),
    ("-1", "-1"),
    ("-0.5", "-0.5"),
    ("-", "'-"),
    ("-1e5", "'-1e5"),
    ("3.5", "3.5"),
    ("supported", "supported"),
    ("a=b", "a=b"),
    (None, ""),
    (True, "true"),
    (False, "false"),
    (0, "0"),
])
def test_neutralise_prefixes_formulas_and_keeps_plain_numbers(value, cell):
    assert neutralise(value) == cell


def test_hostile_values_cannot_run_as_formulas(store, report_of, session):
    session.add(User(username="@evil", role="annotator"))
    add_task(session, "pick", target="sample", kind="categorical", labels=["=cmd|' /C calc'!A0", "+ok"])
    add_task(session, "delta", target="sample", kind="ordinal", scale=(-2, 2))
    for i in range(4):
        sid = "=1+2" if i == 0 else f"-s{i}"
        store.sample(sid, meta={"topic": "@topic"})
        for who in ("@evil", "ann2"):
            store.label("pick", who, sid, "=cmd|' /C calc'!A0" if i % 2 else "+ok")
            store.label("delta", who, sid, -1 if i % 2 else 1)
        store.verdict("j", "pick", sid, "+ok")
        store.verdict("j", "delta", sid, -2)
    session.flush()
    assert session.exec(select(User).where(User.username == "@evil")).one()
    report = report_of(group_by="metadata.topic")
    text = render(report, "csv")
    raw = list(csv.reader(io.StringIO(text, newline="")))
    assert "'human_@evil" not in raw[0] and "human_@evil" in raw[0]  # a header cell starting with "h" is safe
    for row in raw:
        for cell in row:
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
            assert not cell.startswith("-") or cell in ("-1", "-2"), cell
    rows = read(report)
    pick = [r for r in rows if r["task"] == "pick"]
    assert {r["sample_id"] for r in pick} == {"'=1+2", "'-s1", "'-s2", "'-s3"}
    assert {r["human_@evil"] for r in pick} == {"'=cmd|' /C calc'!A0", "'+ok"}
    assert {r["group"] for r in pick} == {"'@topic"}
    delta = [r for r in rows if r["task"] == "delta"]
    assert {r["human_ann2"] for r in delta} == {"-1", "1"} and {r["judge"] for r in delta} == {"-2"}
