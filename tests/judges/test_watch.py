"""`calibrate watch`: watchers that share a dataset through leases in the database, as real processes
against the fake LLM server (which counts the calls per item). No timing asserts: events and counters,
with generous timeouts as hang guards only."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from judge_helpers import fast_options, write_samples
from sqlmodel import func, select

from calibrate.db import write_session
from calibrate.judges.errors import RunSetupError
from calibrate.judges.watch import Watcher, WatchSpec, claim, enqueue, owner_token
from calibrate.models import Judge, JudgeRun, Task, Verdict, WatchLease

ROOT = Path(__file__).resolve().parents[2]
GUARD = 180  # seconds: a hang guard, never a measurement (a loaded 2-core machine takes its time)


def watch_command(db_url: str, server, prompt: str, *extra: str, concurrency: int = 4) -> list[str]:
    return [sys.executable, "-m", "calibrate", "watch", "--db", db_url, "--dataset", "many", "--prompt", prompt,
            "--backend", "openai", "--base-url", server.openai_base, "--api-key-env", "", "--concurrency", str(concurrency),
            *extra]


def start(command: list[str], tmp_path: Path) -> subprocess.Popen:
    env = dict(os.environ, CALIBRATE_INSTANCE=str(tmp_path / "instance"))
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(condition, what: str, *processes: subprocess.Popen) -> None:
    """Poll until the condition holds; past the hang guard, kill the given processes (no watcher outlives its test) and fail."""
    deadline = time.monotonic() + GUARD
    while not condition():
        failed = [p for p in processes if p.poll() not in (None, 0)]
        if failed:  # a watcher that ended in an error cannot make the condition true: say why at once
            raise AssertionError(f"{what}: a watcher ended with {failed[0].returncode}: {failed[0].communicate()[1]}")
        if time.monotonic() > deadline:
            for process in processes:
                process.kill()
                process.communicate()
            raise AssertionError(f"hang guard: {what}")
        time.sleep(0.02)


def verdict_count(db_url: str) -> int:
    conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), timeout=30)
    try:
        return conn.execute("select count(*) from verdict").fetchone()[0]
    finally:
        conn.close()


def held_by(db_url: str, pid: int) -> int:
    """Return how many leases the watcher process `pid` holds."""
    conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), timeout=30)
    try:
        return conn.execute("select count(*) from watchlease where owner like ? and expires > 0", (f"%:{pid}:%",)).fetchone()[0]
    finally:
        conn.close()


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=GUARD)
    return proc.returncode, out, err


def one_verdict_each(session, n: int) -> None:
    session.expire_all()
    rows = session.exec(select(Verdict.target_key, func.count()).group_by(Verdict.target_key)).all()
    assert len(rows) == n and {count for _, count in rows} == {1}


def test_a_pass_judges_every_target_once_and_a_second_pass_calls_nothing(engine, session, fake_llm, claims_dataset,
                                                                         claims_prompt):
    claims_dataset(n_samples=8, claims_per_sample=3)
    prompt = claims_prompt()
    spec = WatchSpec("many", prompt, backend="openai", base_url=fake_llm.openai_base, api_key_env="",
                     options=fast_options(concurrency=4), once=True)
    [first] = list(Watcher(engine, spec).passes())
    assert [run.n_done for run in first.runs] == [24] and first.runs[0].status == "done"
    assert fake_llm.stats()["requests"] == 24 and set(fake_llm.stats()["calls"].values()) == {1}
    one_verdict_each(session, 24)
    # The pass is one run, and its verdicts carry its id; the leases are gone with their verdicts.
    run = session.exec(select(JudgeRun)).one()
    assert (run.status, run.n_total, run.n_done) == ("done", 24, 24) and run.params["watch"]["every"] == 30.0
    assert {v.run_id for v in session.exec(select(Verdict)).all()} == {run.id}
    assert session.exec(select(func.count()).select_from(WatchLease)).one() == 0
    [second] = list(Watcher(engine, spec).passes())
    assert second.runs == [] and second.lines() == ["pass 1: nothing to judge"]
    assert fake_llm.stats()["requests"] == 24


def test_a_lease_is_claimed_once_until_it_expires_and_a_judged_job_is_never_claimed(engine, session, claims_dataset,
                                                                                 claims_prompt):
    claims_dataset(n_samples=2, claims_per_sample=3)
    watcher = Watcher(engine, WatchSpec("many", claims_prompt(), once=True))
    with write_session(engine) as s:
        judge = s.get(Judge, watcher.main.judge_id)
        task = s.get(Task, watcher.main.task.id)
        from calibrate.models import Dataset
        dataset = s.get(Dataset, watcher.dataset_id)
        jobs, _ = watcher._pending(s, watcher.main, set())
    assert enqueue(engine, judge, task, dataset, jobs) == 6
    assert enqueue(engine, judge, task, dataset, jobs) == 0  # already there
    a, b = owner_token(), owner_token()
    got_a = claim(engine, judge.id, task.id, a, 4, 60)
    got_b = claim(engine, judge.id, task.id, b, 4, 60)
    assert len(got_a) == 4 and len(got_b) == 2 and not {r[0] for r in got_a} & {r[0] for r in got_b}
    assert claim(engine, judge.id, task.id, b, 4, 60) == []  # everything is held
    # A job that gained a verdict meanwhile is never claimed again, even when its lease expired.
    key = got_b[0][1]
    target = next(t for t in jobs if t.key == key)
    with write_session(engine) as s:
        s.add(Verdict(judge_id=judge.id, task_id=task.id, sample_id=target.sample_id, **target.attach,
                      target_key=key, value="supported"))
        for lease in s.exec(select(WatchLease).where(WatchLease.owner == b)).all():
            lease.expires = 1.0  # b died: its leases expired
            s.add(lease)
    taken = claim(engine, judge.id, task.id, a, 10, 60)
    assert [r[1] for r in taken] == [got_b[1][1]]


def test_a_job_judged_after_the_pending_list_was_read_gets_no_lease_row(engine, session, claims_dataset, claims_prompt):
    # A watcher reads its pending jobs, another stores one of them (deleting its row) before this one
    # enqueues: the row it would add back is dropped in the same transaction, so no lease outlives its job
    # (a killed watcher's test once ended with 4 such rows on a loaded machine).
    claims_dataset(n_samples=1, claims_per_sample=3)
    watcher = Watcher(engine, WatchSpec("many", claims_prompt(), once=True))
    with write_session(engine) as s:
        from calibrate.models import Dataset
        judge, task = s.get(Judge, watcher.main.judge_id), s.get(Task, watcher.main.task.id)
        dataset = s.get(Dataset, watcher.dataset_id)
        jobs, _ = watcher._pending(s, watcher.main, set())
        judged = jobs[0]
        s.add(Verdict(judge_id=judge.id, task_id=task.id, sample_id=judged.sample_id, **judged.attach,
                      target_key=judged.key, value="supported"))
    enqueue(engine, judge, task, dataset, jobs)  # the stale list still names the judged job
    rows = session.exec(select(WatchLease.target_key)).all()
    assert sorted(rows) == sorted(t.key for t in jobs[1:])


def test_two_watchers_share_the_dataset_and_no_call_is_repeated(db_url, session, fake_llm, claims_dataset,
                                                                claims_prompt, tmp_path):
    fake_llm.keep_requests = False
    fake_llm.gate = threading.Event()  # closed: each watcher's first call waits, so both are in before any answer
    claims_dataset(n_samples=30, claims_per_sample=5)
    prompt = claims_prompt()
    procs = [start(watch_command(db_url, fake_llm, prompt, "--once"), tmp_path) for _ in range(2)]
    try:
        wait_for(lambda: fake_llm.stats()["requests"] >= 2, "both watchers call")
    finally:
        fake_llm.gate.set()
    results = [finish(proc) for proc in procs]
    assert [code for code, _, _ in results] == [0, 0], results
    one_verdict_each(session, 150)
    stats = fake_llm.stats()
    assert stats["requests"] == 150 and set(stats["calls"].values()) == {1}  # no item called twice
    runs = session.exec(select(JudgeRun)).all()
    owners = {run.params["watch"]["owner"] for run in runs}
    assert len(owners) == 2 and all(run.status == "done" for run in runs)  # both watchers judged some
    assert sum(run.n_done for run in runs) == 150
    assert session.exec(select(func.count()).select_from(WatchLease)).one() == 0


def test_a_watcher_killed_mid_way_is_taken_over_and_only_its_calls_in_flight_are_repeated(
        db_url, session, fake_llm, claims_dataset, claims_prompt, tmp_path):
    fake_llm.keep_requests = False
    fake_llm.latency = 0.02
    claims_dataset(n_samples=30, claims_per_sample=5)
    prompt = claims_prompt()
    killed = start(watch_command(db_url, fake_llm, prompt, "--once", "--lease", "2"), tmp_path)
    other = start(watch_command(db_url, fake_llm, prompt, "--once", "--lease", "2"), tmp_path)
    wait_for(lambda: verdict_count(db_url) >= 40 and held_by(db_url, killed.pid) > 0, "verdicts written, leases held",
             killed, other)
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=GUARD)
    code, _, err = finish(other)
    assert code == 0, err
    assert killed.returncode == -signal.SIGKILL
    third = start(watch_command(db_url, fake_llm, prompt, "--every", "0.2", "--lease", "2"), tmp_path)
    # Its first line on stderr is written once its SIGTERM handler is in place (the other watcher may
    # have taken every expired lease over already, and then there is nothing left to wait for).
    assert third.stderr.readline().startswith("watching")
    wait_for(lambda: verdict_count(db_url) == 150, "the third watcher finishes after the leases expire", third)
    third.send_signal(signal.SIGTERM)
    code, out, err = finish(third)
    assert code == 0, err
    one_verdict_each(session, 150)
    calls = fake_llm.stats()["calls"]
    repeated = sum(n - 1 for n in calls.values())
    # Only jobs the killed watcher had sent and not yet stored: its calls in flight (4) and its
    # answers waiting for the next write (one batch at most: 25).
    assert len(calls) == 150 and repeated <= 4 + 25
    assert session.exec(select(func.count()).select_from(WatchLease)).one() == 0


def test_a_running_watcher_picks_up_samples_imported_while_it_runs_and_sigterm_finishes_its_calls_in_flight(
        db_url, engine, session, fake_llm, claims_dataset, claims_prompt, tmp_path):
    from calibrate.ingest import import_file

    fake_llm.keep_requests = False
    claims_dataset(n_samples=6, claims_per_sample=5)
    prompt = claims_prompt()
    proc = start(watch_command(db_url, fake_llm, prompt, "--every", "0.2"), tmp_path)
    try:
        wait_for(lambda: verdict_count(db_url) == 30, "the first samples judged")
        path = write_samples(tmp_path / "more.jsonl", 4, 5, start=6)
        with write_session(engine) as s:
            import_file(s, "samples", path, dataset="many")
        wait_for(lambda: verdict_count(db_url) == 50, "the samples imported while it runs judged")
        assert fake_llm.stats()["requests"] == 50 and set(fake_llm.stats()["calls"].values()) == {1}
        # SIGTERM with a call in flight: it is finished and written, no call starts after it, exit 0.
        fake_llm.gate = threading.Event()
        path = write_samples(tmp_path / "last.jsonl", 10, 5, start=10)
        with write_session(engine) as s:
            import_file(s, "samples", path, dataset="many")
        wait_for(lambda: fake_llm.stats()["requests"] >= 51, "a call of the last samples in flight")
        proc.send_signal(signal.SIGTERM)  # delivered before the answer: no call starts after it
    finally:
        if fake_llm.gate is not None:
            fake_llm.gate.set()
    code, out, err = finish(proc)
    assert code == 0, err
    assert "stopped: calls in flight were written" in err
    calls = fake_llm.stats()["requests"]
    assert 51 <= calls < 100 and set(fake_llm.stats()["calls"].values()) == {1}
    session.expire_all()
    assert verdict_count(db_url) == calls  # every call made was written
    last = session.exec(select(JudgeRun).order_by(JudgeRun.id.desc())).first()
    assert last.status == "stopped" and "SIGTERM" in last.error and last.n_done == calls - 50
    assert session.exec(select(func.count()).select_from(WatchLease).where(WatchLease.owner != "")).one() == 0


def test_watch_refuses_an_extraction_given_as_the_prompt(engine, claims_dataset, claims_prompt):
    """(Metric prompts are watched: tests/judges/test_watch_metrics.py.)"""
    from calibrate.judges import save_version

    claims_dataset(n_samples=1, claims_per_sample=1)
    with write_session(engine) as s:
        save_version(s, "ext", task="claim_extraction", model="m")
    with pytest.raises(RunSetupError, match="give it as --extract"):
        Watcher(engine, WatchSpec("many", "ext@1", once=True))
    with pytest.raises(RunSetupError, match="--extract claims_prompt"):
        Watcher(engine, WatchSpec("many", claims_prompt(), extract=claims_prompt("claims_prompt"), once=True))


def test_with_extract_answers_without_claims_are_extracted_first_then_their_claims_judged(engine, session, claims_prompt):
    import json

    from fakellm import FakeLLM

    from calibrate.ingest import import_file
    from calibrate.judges import save_version
    from calibrate.models import Claim, Sample

    server = FakeLLM(claims=True).start()
    try:
        path = engine.url.database.replace("calibrate.sqlite", "plain.jsonl")
        with open(path, "w", encoding="utf-8") as fh:
            for i in range(4):  # no "claims": the segmenter's sentences, claim source "segmenter"
                fh.write(json.dumps({"id": f"p{i}", "question": f"Q{i}?",
                                     "answer": f"Take {i} mg and rest {i} days. Drink water.", "contexts": []}) + "\n")
        with write_session(engine) as s:
            import_file(s, "samples", Path(path), dataset="many")
            save_version(s, "ext", task="claim_extraction", model="fake-model")
        spec = WatchSpec("many", claims_prompt(), backend="openai", base_url=server.openai_base, api_key_env="",
                         options=fast_options(concurrency=2), extract="ext@1", once=True)
        [first] = list(Watcher(engine, spec).passes())
        assert [run.judge for run in first.runs] == ["ext@1", "claims@1"]
        session.expire_all()
        assert {s.claim_source for s in session.exec(select(Sample)).all()} == {"ext@1"}
        active = session.exec(select(Claim).where(Claim.active)).all()
        assert len(active) == 12  # "Take i mg" / "rest i days." / "Drink water." per answer
        judged = session.exec(select(Verdict).join(Judge).where(Judge.name == "claims@1")).all()
        assert sorted(v.target_key for v in judged) == sorted(f"claim:{c.id}" for c in active)  # none on retired claims
        assert server.stats()["requests"] == 4 + 12
        [second] = list(Watcher(engine, spec).passes())
        assert second.runs == [] and server.stats()["requests"] == 16
    finally:
        server.stop()


def test_the_budget_is_the_watchers_whole_life_and_it_ends_when_spent(engine, session, fake_llm, claims_dataset,
                                                                      claims_prompt):
    claims_dataset(n_samples=4, claims_per_sample=5)
    spec = WatchSpec("many", claims_prompt(), backend="openai", base_url=fake_llm.openai_base, api_key_env="",
                     options=fast_options(concurrency=1, max_calls=5), every=0.05)
    summaries = list(Watcher(engine, spec).passes())  # no --once: it ends because the budget is spent
    assert len(summaries) == 1 and "--max-calls" in summaries[0].stopped
    assert fake_llm.stats()["requests"] == 5
    run = session.exec(select(JudgeRun)).one()
    assert (run.status, run.n_done) == ("stopped", 5)
    # The jobs it claimed and did not send are free for the other watchers at once.
    assert session.exec(select(func.count()).select_from(WatchLease).where(WatchLease.owner != "")).one() == 0
    assert session.exec(select(func.count()).select_from(WatchLease)).one() == 15


def test_the_offline_baseline_backend_watches_too(engine, session, claims_dataset, claims_prompt):
    claims_dataset(n_samples=3, claims_per_sample=4)
    [done] = list(Watcher(engine, WatchSpec("many", claims_prompt(), backend="baseline", once=True)).passes())
    assert [(run.status, run.n_done, run.calls) for run in done.runs] == [("done", 12, 0)]
    one_verdict_each(session, 12)
    assert session.exec(select(func.count()).select_from(WatchLease)).one() == 0


def test_after_each_pass_the_saved_queue_policy_fills_the_experts_queues(runner, engine, session, claims_dataset, claims_prompt):
    """The watcher applies `queue auto`'s saved policy after a pass: what it judged is drawn for audit."""
    from calibrate.accounts import ensure_annotator
    from calibrate.annotation.auto_queue import queue_auto
    from calibrate.models import Assignment

    claims_dataset(n_samples=6, claims_per_sample=2)
    prompt = claims_prompt()
    for name in ("ana", "ben"):
        ensure_annotator(session, name)
    queue_auto(session, "many", daily=4, assign=["ana", "ben"], audit_share=1.0)  # nothing judged yet: nothing drawn
    session.commit()
    assert session.exec(select(Assignment)).all() == []
    result = runner.invoke(["watch", "--dataset", "many", "--prompt", prompt, "--backend", "baseline", "--once"])
    assert result.exit_code == 0, result.output
    assert "queue auto: many " in result.output and "audit +4" in result.output
    session.rollback()  # end the read transaction begun above: its snapshot predates the command
    assert sorted(a.stream for a in session.exec(select(Assignment)).all()) == ["audit"] * 4
