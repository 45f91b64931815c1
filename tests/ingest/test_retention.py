"""Retention of production samples (issue 36): `calibrate traces purge` and the per-dataset setting the settler applies.

Old samples (by metadata.started_at) are deleted with their verdicts, stale verdicts, assignments and staged spans of
rootless traces; a sample with any label, an adjudication, few-shot use or golden membership is kept; labels are never
deleted; `--dry-run` removes nothing.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from prompt_helpers import prompt_version
from sqlalchemy import func, update
from sqlmodel import Session, select
from test_receiver import new_token, post
from test_trace_metadata import rag_request, trace_id

from calibrate.accounts import add_user
from calibrate.db import write_session
from calibrate.ingest.traces import import_traces, retention
from calibrate.ingest.traces.staging import ROOTLESS_MAX_AGE, Settler
from calibrate.models import (
    Assignment,
    FewShot,
    Judge,
    Label,
    RetentionPolicy,
    Sample,
    StagedSpan,
    StaleVerdict,
    Task,
    Verdict,
    target_key,
)

DAY_NS = 24 * 3600 * 10**9


def load(engine, tmp_path, *, old: int, new: int, now_ns: int, topics=("iron", "zinc")) -> dict[str, int]:
    """Import `old` traces started 100 days before `now_ns` and `new` ones 10 days before; judge every one (a verdict
    and a stale verdict each) and assign each to an annotator; return trace id → sample id."""
    traces = [{"id": trace_id(n), "start": now_ns - (100 if n < old else 10) * DAY_NS,
               "root": {"metadata.topic": topics[n % len(topics)]}} for n in range(old + new)]
    path = tmp_path / "traces.pb"
    path.write_bytes(rag_request(traces).SerializeToString())
    assert import_traces(engine, [path], dataset="prod", salt="s").created == old + new
    with write_session(engine) as session:
        task = session.exec(select(Task).where(Task.name == "answer_quality")).one()
        judge = Judge(name="j@1")
        session.add(judge)
        expert = add_user(session, "ana", role="annotator", password="password-123")
        session.flush()
        ids = {s.external_id: s.id for s in session.exec(select(Sample))}
        for sample_id in ids.values():
            key = target_key("sample", sample_id)
            session.add(Verdict(judge_id=judge.id, task_id=task.id, sample_id=sample_id, target_key=key, value="4"))
            session.add(StaleVerdict(verdict_id=0, judge_id=judge.id, task_id=task.id, sample_id=sample_id, target_key=key,
                                     value="3", created_at=datetime.now(UTC)))
            session.add(Assignment(sample_id=sample_id, user_id=expert.id, stream="audit", audit_prob=0.5))
    return ids


def label(engine, sample_ids, *, adjudicated=False) -> None:
    with write_session(engine) as session:
        task = session.exec(select(Task).where(Task.name == "answer_quality")).one()
        user = session.exec(select(Label.annotator_id)).first() or add_user(session, "boss", role="admin",
                                                                             password="password-123").id
        for sample_id in sample_ids:
            session.add(Label(task_id=task.id, sample_id=sample_id, target_key=target_key("sample", sample_id),
                              annotator_id=user, value="5", adjudicated=adjudicated))


def counts(engine) -> dict[str, int]:
    with Session(engine) as session:
        return {name: session.exec(select(func.count()).select_from(table)).one()
                for name, table in (("samples", Sample), ("labels", Label), ("verdicts", Verdict),
                                    ("stale_verdicts", StaleVerdict), ("assignments", Assignment), ("staged", StagedSpan))}


def test_purge_removes_the_old_unlabelled_and_keeps_the_labelled_and_the_new(runner, engine, client, tmp_path):
    """40 old samples (5 of them labelled) and 20 new ones: 35 removed, 25 kept; --dry-run removes nothing."""
    now_ns = time.time_ns()
    ids = load(engine, tmp_path, old=40, new=20, now_ns=now_ns)
    labelled = [ids[trace_id(n)] for n in range(5)]
    label(engine, labelled[:4])
    label(engine, labelled[4:], adjudicated=True)
    # a trace whose root never came, its newest span over a day old: dropped with the purge
    token = new_token(runner, "prod")
    rootless = rag_request([{"id": trace_id(99)}])
    del rootless.resource_spans[0].scope_spans[0].spans[0]
    assert post(client, token, rootless.SerializeToString()).status_code == 200
    with write_session(engine) as session:
        from calibrate.models import StagedTrace

        session.execute(update(StagedTrace).values(last_received_at=time.time() - ROOTLESS_MAX_AGE - 60))
        session.execute(update(StagedSpan).values(received_at=time.time() - ROOTLESS_MAX_AGE - 60))
    before = counts(engine)
    assert before == {"samples": 60, "labels": 5, "verdicts": 60, "stale_verdicts": 60, "assignments": 60, "staged": 2}

    dry = runner.invoke(["traces", "purge", "--dataset", "prod", "--older-than", "90d", "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    found = json.loads(dry.stdout)
    assert found["dry_run"] is True and found["samples"] == 60
    assert found["removed"]["samples"] == 35 and found["removed"]["verdicts"] == 35
    assert found["removed"]["stale_verdicts"] == 35 and found["removed"]["assignments"] == 35
    assert found["kept"] == {"recent": 20, "golden": 0, "few_shot": 0, "adjudicated": 1, "labelled": 4, "claim_edits": 0}
    assert found["staged"] == {"traces": 1, "spans": 2, "feedback": 0}
    assert counts(engine) == before  # nothing removed

    done = runner.invoke(["traces", "purge", "--dataset", "prod", "--older-than", "90d"])
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[0].startswith("purge prod (older than 90d: before ") and "removed 35 of 60 samples" in lines[0]
    assert lines[1] == "kept 25: 20 recent, 0 golden set members, 0 few-shot examples, 1 adjudicated, 4 labelled, " \
                       "0 with expert claim edits"
    assert "removed 1 traces without a root or quarantined (2 spans)" in lines[2]
    assert counts(engine) == {"samples": 25, "labels": 5, "verdicts": 25, "stale_verdicts": 25, "assignments": 25,
                              "staged": 0}
    with Session(engine) as session:
        kept = set(session.exec(select(Sample.id)))
    assert set(labelled) <= kept and {ids[trace_id(n)] for n in range(40, 60)} <= kept
    again = json.loads(runner.invoke(["traces", "purge", "--dataset", "prod", "--older-than", "90d", "--json"]).stdout)
    assert again["removed"]["samples"] == 0 and sum(again["kept"].values()) == 25


def test_golden_members_and_few_shot_examples_are_kept(runner, engine, tmp_path):
    now_ns = time.time_ns()
    ids = load(engine, tmp_path, old=10, new=0, now_ns=now_ns, topics=("iron", "zinc", "zinc", "zinc", "zinc"))
    # a golden set of trace data, chosen by the application's metadata (no splits): the iron traces 0 and 5
    made = runner.invoke(["golden", "create", "iron", "--dataset", "prod", "--where", "metadata.topic=iron", "--json"])
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["n_items"] == 2
    with write_session(engine) as session:
        version = prompt_version(session, "answer_quality", template="{{ answer }}")
        for order, n in enumerate((1, 2, 3)):
            session.add(FewShot(version_id=version.id, order=order, sample_id=ids[trace_id(n)],
                                target_key=target_key("sample", ids[trace_id(n)]), value="5"))
    done = retention.purge(engine, "prod", older_than_days=90)
    assert done["removed"]["samples"] == 5
    assert done["kept"] == {"recent": 0, "golden": 2, "few_shot": 3, "adjudicated": 0, "labelled": 0, "claim_edits": 0}
    with Session(engine) as session:
        assert set(session.exec(select(Sample.external_id))) == {trace_id(n) for n in (0, 1, 2, 3, 5)}


def test_the_window_is_written_in_days():
    assert retention.parse_older_than("90d") == 90 and retention.parse_older_than(" 1d ") == 1
    for bad in ("90", "0d", "3w", "-5d", "36501d", ""):
        with pytest.raises(Exception, match="write the window as days"):
            retention.parse_older_than(bad)


def test_the_retention_setting_is_applied_by_the_settler_once_a_day(runner, engine, tmp_path):
    now_ns = time.time_ns()
    load(engine, tmp_path, old=6, new=4, now_ns=now_ns)
    shown = runner.invoke(["traces", "retention", "--dataset", "prod"])
    assert shown.exit_code == 0 and "no retention" in shown.stdout
    saved = runner.invoke(["traces", "retention", "--dataset", "prod", "--older-than", "90d"])
    assert saved.exit_code == 0 and "older than 90d are purged daily" in saved.stdout and "not applied yet" in saved.stdout
    bad = runner.invoke(["traces", "retention", "--dataset", "prod", "--older-than", "90"])
    assert bad.exit_code == 2 and "write the window as days" in bad.output

    settler = Settler(engine, settle_s=0, every=60, max_field_chars=1_000_000)
    settler.once()  # settles nothing, and applies the day's retention
    assert counts(engine)["samples"] == 4
    shown = runner.invoke(["traces", "retention", "--dataset", "prod", "--json"])
    policy = json.loads(shown.stdout)
    assert policy["older_than_days"] == 90 and policy["last_result"]["removed"]["samples"] == 6
    assert "last applied" in runner.invoke(["traces", "retention", "--dataset", "prod"]).stdout

    now = datetime.now(UTC)
    assert retention.apply_due(engine, now=now + timedelta(hours=23)) == []  # claimed today already
    later = retention.apply_due(engine, now=now + timedelta(hours=25))
    assert [d["removed"]["samples"] for d in later] == [0]
    off = runner.invoke(["traces", "retention", "--dataset", "prod", "--off"])
    assert off.exit_code == 0
    with Session(engine) as session:
        assert session.exec(select(func.count()).select_from(RetentionPolicy)).one() == 0


def test_a_label_saved_after_the_look_keeps_its_sample(engine, tmp_path, monkeypatch):
    """The keep rule is checked again in each deleting transaction: work saved between the look and the delete wins."""
    now_ns = time.time_ns()
    ids = load(engine, tmp_path, old=3, new=0, now_ns=now_ns)
    real = retention.kept_for
    calls = []

    def late_label(session, sample_ids):
        calls.append(1)
        if len(calls) == 2:  # the deleting transaction's check: a label arrives just before it
            task = session.exec(select(Task).where(Task.name == "answer_quality")).one()
            user = add_user(session, "late", role="annotator", password="password-123")
            session.add(Label(task_id=task.id, sample_id=ids[trace_id(0)], target_key=target_key("sample", ids[trace_id(0)]),
                              annotator_id=user.id, value="2"))
            session.flush()
        return real(session, sample_ids)

    monkeypatch.setattr(retention, "kept_for", late_label)
    done = retention.purge(engine, "prod", older_than_days=90)
    assert done["removed"]["samples"] == 2 and done["kept"]["labelled"] == 1
    assert counts(engine)["labels"] == 1
