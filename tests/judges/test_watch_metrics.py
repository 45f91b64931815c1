"""`calibrate watch` with metric judges: the same verdicts as `judge run` (steps, cache, skip reasons, leakage
guard), with the watcher's guarantees — leases shared by watchers, take-over after kill -9 without asking a
stored step again, a stop that keeps the steps it paid for. The real fake LLM server; a real process for the
kill, watchers in threads elsewhere (a process costs seconds of imports; the leases are in the database
either way). No timing asserts: the waits are hang guards."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time

import pytest
from judge_helpers import fast_options
from sqlalchemy import delete
from sqlmodel import func, select
from test_watch import GUARD, held_by, start, verdict_count, wait_for, watch_command

from calibrate.db import write_session
from calibrate.judges import RunSetupError, RunSpec, run_judge, save_version
from calibrate.judges.watch import Watcher, WatchSpec
from calibrate.models import Judge, JudgeRun, ResponseCache, Verdict, WatchLease

FIELDS = ("value", "status", "reason", "raw", "error", "input_tokens", "output_tokens", "cached")


def metric_prompt(engine, name: str, task: str, **fields) -> str:
    with write_session(engine) as s:
        return f"{name}@{save_version(s, name, task=task, **fields).version.number}"


def verdicts(session, prompt: str) -> dict[str, tuple]:
    """Return target key → the verdict's stored fields (those `judge run` and the watcher both decide)."""
    session.rollback()  # a fresh read: see what the runs and watchers committed
    judge = session.exec(select(Judge).where(Judge.name == prompt)).one()
    return {v.target_key: tuple(getattr(v, f) for f in FIELDS)
            for v in session.exec(select(Verdict).where(Verdict.judge_id == judge.id)).all()}


def forget(engine, *, cache: bool) -> None:
    """Delete every verdict (and the response cache): the next run or pass judges everything again."""
    with write_session(engine) as s:
        s.execute(delete(Verdict))
        if cache:
            s.execute(delete(ResponseCache))


def settled_requests(server) -> int:
    """Return the server's request count once a killed client's last request has been counted (a hang guard bounds it)."""
    seen = -1
    deadline = time.monotonic() + GUARD
    while (now := server.stats()["requests"]) != seen and time.monotonic() < deadline:
        seen = now
        time.sleep(0.2)
    return now


def once(engine, prompt: str, server=None, **options) -> list:
    backend = {"backend": "openai", "base_url": server.openai_base, "api_key_env": ""} if server else {"backend": "baseline"}
    spec = WatchSpec("many", prompt, options=fast_options(**options), once=True, **backend)
    return list(Watcher(engine, spec).passes())


def test_a_watched_faithfulness_verdict_equals_judge_runs_from_the_cache_and_from_fresh_calls(
        engine, session, fake_llm, claims_dataset, make_sample):
    claims_dataset(n_samples=5, claims_per_sample=3)
    make_sample(dataset="many", external_id="bare", claims=[], contexts=())  # nothing to measure: "no claims"
    prompt = metric_prompt(engine, "faith", "faithfulness", model="fake-model")
    ran = run_judge(engine, RunSpec(dataset="many", prompt=prompt, backend="openai", base_url=fake_llm.openai_base,
                                    api_key_env="", options=fast_options(concurrency=2)))
    assert (ran.status, ran.n_ok, ran.calls, ran.skipped) == ("done", 5, 15, {"no claims": 1})
    by_run = verdicts(session, prompt)
    assert len(by_run) == 5

    # The watcher reads the same response cache: every step answered from it, no call, the same verdicts.
    forget(engine, cache=False)
    [cached] = once(engine, prompt, fake_llm, concurrency=2)
    assert [(r.status, r.n_done, r.n_cached, r.calls) for r in cached.runs] == [("done", 5, 5, 0)]
    assert fake_llm.stats()["requests"] == 15
    assert {k: v[:4] for k, v in verdicts(session, prompt).items()} == {k: v[:4] for k, v in by_run.items()}

    # With an empty cache the watcher asks each step once and writes exactly `judge run`'s verdicts.
    forget(engine, cache=True)
    [fresh] = once(engine, prompt, fake_llm, concurrency=2)
    assert [(r.status, r.n_done, r.n_ok, r.calls, r.skipped) for r in fresh.runs] == [("done", 5, 5, 15, {"no claims": 1})]
    assert fresh.lines()[-1] == "  skipped 1 samples with nothing to measure (no verdict): 1 no claims"
    assert verdicts(session, prompt) == by_run  # value, status, reason, the steps' raw JSON, tokens, not cached
    assert fake_llm.stats()["requests"] == 30 and set(fake_llm.stats()["calls"].values()) == {2}  # once per run
    run = session.exec(select(JudgeRun).order_by(JudgeRun.id.desc())).first()
    assert run.params["skipped"] == {"no claims": 1} and run.params["watch"] and run.n_done == 5
    assert {v.run_id for v in session.exec(select(Verdict)).all()} == {run.id}
    assert session.exec(select(func.count()).select_from(WatchLease)).one() == 0

    # The skipped sample gets no lease and no verdict: the next pass has nothing to do and says why.
    [idle] = once(engine, prompt, fake_llm)
    assert idle.lines() == ["pass 1: nothing to judge",
                            "  skipped 1 samples with nothing to measure (no verdict): 1 no claims"]
    assert fake_llm.stats()["requests"] == 30


def test_watched_baseline_metrics_equal_judge_run_and_versions_fitted_on_the_run_are_refused(
        engine, session, claims_dataset):
    claims_dataset(n_samples=4, claims_per_sample=3)
    with write_session(engine) as s:  # a ground truth per answer: context_recall's statements
        from calibrate.models import Sample
        for i, sample in enumerate(s.exec(select(Sample)).all()):
            sample.ground_truth = f"Take {i * 10} mg a day. Avoid alcohol."
            s.add(sample)
    for task, params in (("faithfulness", {}), ("context_recall", {"leakage_guard": "lexical"})):
        prompt = metric_prompt(engine, f"w-{task}", task, params=params)
        [watched] = once(engine, prompt)
        assert [(r.status, r.n_done, r.calls) for r in watched.runs] == [("done", 4, 0)]
        by_watch = verdicts(session, prompt)
        forget(engine, cache=True)
        run_judge(engine, RunSpec(dataset="many", prompt=prompt, backend="baseline"))
        by_run = verdicts(session, prompt)
        assert len(by_run) == 4 and {k: v[:5] for k, v in by_watch.items()} == {k: v[:5] for k, v in by_run.items()}
    assert any("leakage guard (lexical)" in v[FIELDS.index("raw")] for v in by_run.values())  # decided without a call

    # A score fitted on the samples judged together cannot equal `judge run`'s: refused, with its code.
    refused = {
        "watch_metric_tfidf_embedder": (metric_prompt(engine, "rel", "answer_relevancy"), "baseline"),
        "watch_metric_embedding_guard": (metric_prompt(engine, "rec", "context_recall", model="m",
                                                       params={"leakage_guard": "embedding"}), "openai"),
        "watch_metric_baseline_relevance": (metric_prompt(engine, "prec", "context_precision"), "baseline"),
    }
    for code, (prompt, backend) in refused.items():
        with pytest.raises(RunSetupError) as caught:
            Watcher(engine, WatchSpec("many", prompt, backend=backend, base_url="http://127.0.0.1:9/v1", api_key_env="",
                                      once=True))
        assert caught.value.reason.code == code and "calibrate judge run" in str(caught.value)
    tfidf = metric_prompt(engine, "rel2", "answer_relevancy", model="m", params={"embedder": "tfidf"})
    with pytest.raises(RunSetupError, match="TF-IDF embedder"):
        Watcher(engine, WatchSpec("many", tfidf, backend="openai", base_url="http://127.0.0.1:9/v1", api_key_env=""))


def test_a_stop_mid_sample_finishes_the_step_in_flight_keeps_it_and_the_next_watcher_never_asks_it_again(
        engine, session, fake_llm, claims_dataset):
    claims_dataset(n_samples=3, claims_per_sample=3)
    prompt = metric_prompt(engine, "faith", "faithfulness", model="fake-model")
    spec = WatchSpec("many", prompt, backend="openai", base_url=fake_llm.openai_base, api_key_env="",
                     options=fast_options(concurrency=2), every=0.1)
    stop = threading.Event()
    summaries: list = []
    fake_llm.gate = threading.Event()  # closed: the first step waits at the server
    thread = threading.Thread(target=lambda: summaries.extend(Watcher(engine, spec).passes(stop)))
    thread.start()
    try:
        wait_for(lambda: fake_llm.stats()["requests"] >= 1, "the first step in flight")
        stop.set()  # what SIGTERM does (cli/watch.py): no call starts after it
    finally:
        fake_llm.gate.set()
    thread.join(GUARD)
    assert not thread.is_alive()
    [stopped] = summaries
    assert [(r.status, r.n_done, r.calls) for r in stopped.runs] == [("stopped", 0, 1)] and "SIGTERM" in stopped.runs[0].error
    assert fake_llm.stats()["requests"] == 1  # the sample's other steps were never sent
    assert session.exec(select(func.count()).select_from(ResponseCache)).one() == 1  # the paid step is kept
    assert session.exec(select(func.count()).select_from(WatchLease).where(WatchLease.owner != "")).one() == 0
    fake_llm.gate = None
    [rest] = once(engine, prompt, fake_llm)
    assert [(r.status, r.n_done, r.calls) for r in rest.runs] == [("done", 3, 8)]
    assert set(fake_llm.stats()["calls"].values()) == {1}  # no step asked twice
    assert len(verdicts(session, prompt)) == 3


def test_two_metric_watchers_share_the_samples_and_no_step_is_asked_twice(engine, session, fake_llm, claims_dataset):
    """Two watchers (threads of this process, each with its own owner and connections: the leases are in the
    database, as between processes — test_watch.py runs them as processes) on one dataset."""
    fake_llm.keep_requests = False
    fake_llm.gate = threading.Event()  # closed: each watcher's first step waits, so both are in before any answer
    claims_dataset(n_samples=12, claims_per_sample=3)
    prompt = metric_prompt(engine, "faith", "faithfulness", model="fake-model")
    spec = WatchSpec("many", prompt, backend="openai", base_url=fake_llm.openai_base, api_key_env="",
                     options=fast_options(concurrency=2), once=True)
    summaries: list = []
    threads = [threading.Thread(target=lambda: summaries.extend(Watcher(engine, spec).passes())) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: fake_llm.stats()["requests"] >= 2, "both watchers call")
    finally:
        fake_llm.gate.set()
    for thread in threads:
        thread.join(GUARD)
    assert len(summaries) == 2 and all(run.status == "done" for s in summaries for run in s.runs)
    stats = fake_llm.stats()
    assert stats["requests"] == 36 and set(stats["calls"].values()) == {1}
    runs = session.exec(select(JudgeRun)).all()
    assert len({run.params["watch"]["owner"] for run in runs}) == 2 and sum(run.n_done for run in runs) == 12
    assert len(verdicts(session, prompt)) == 12
    assert session.exec(select(func.count()).select_from(WatchLease)).one() == 0


def test_a_metric_watcher_killed_mid_way_is_taken_over_without_asking_a_stored_step_again(
        db_url, engine, session, fake_llm, claims_dataset, tmp_path):
    fake_llm.keep_requests = False
    fake_llm.latency = 0.05
    claims_dataset(n_samples=16, claims_per_sample=3)
    prompt = metric_prompt(engine, "faith", "faithfulness", model="fake-model")
    killed = start(watch_command(db_url, fake_llm, prompt, "--once", "--lease", "1", concurrency=2), tmp_path)
    wait_for(lambda: verdict_count(db_url) >= 3 and held_by(db_url, killed.pid) > 0, "verdicts written, leases held", killed)
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=GUARD)
    conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), timeout=30)
    try:
        committed = conn.execute("select count(*) from verdict").fetchone()[0]
        cached = conn.execute("select count(*) from responsecache").fetchone()[0]
    finally:
        conn.close()
    assert 3 <= committed < 16, "the kill must land mid-way"
    assert cached == 3 * committed  # a sample's steps are stored with its verdict, in one transaction
    before = settled_requests(fake_llm)
    # Another watcher (in this process) takes the dead one's leases over once they expire (--lease 1).
    fake_llm.latency = 0.0
    spec = WatchSpec("many", prompt, backend="openai", base_url=fake_llm.openai_base, api_key_env="",
                     options=fast_options(concurrency=2), every=0.1, lease=1.0)
    stop = threading.Event()
    deadline = time.monotonic() + GUARD
    for _ in Watcher(engine, spec).passes(stop):
        if verdict_count(db_url) == 16 or time.monotonic() > deadline:
            stop.set()
    assert verdict_count(db_url) == 16, "hang guard: the killed watcher's samples taken over"
    # Only the steps not stored are asked: those of samples the killed watcher had not written.
    assert fake_llm.stats()["requests"] - before == 48 - cached
    counts = dict(session.exec(select(Verdict.target_key, func.count()).group_by(Verdict.target_key)).all())
    assert len(counts) == 16 and set(counts.values()) == {1}
    assert session.exec(select(func.count()).select_from(WatchLease)).one() == 0


def test_the_command_watches_a_metric_judge_and_refuses_a_fitted_one_with_exit_2(runner, engine, claims_dataset,
                                                                                  make_sample):
    claims_dataset(n_samples=3, claims_per_sample=2)
    make_sample(dataset="many", external_id="bare", claims=[], contexts=())
    faith = metric_prompt(engine, "faith", "faithfulness")
    result = runner.invoke(["watch", "--dataset", "many", "--prompt", faith, "--backend", "baseline", "--once"])
    assert result.exit_code == 0, result.output
    assert f"pass 1: {faith}: run 1 done — 3/3 targets judged" in result.output
    assert "skipped 1 samples with nothing to measure (no verdict): 1 no claims" in result.output
    refused = runner.invoke(["watch", "--dataset", "many", "--prompt", metric_prompt(engine, "rel", "answer_relevancy"),
                             "--backend", "baseline", "--once"])
    assert refused.exit_code == 2 and "error: rel@1 scores answer_relevancy with the TF-IDF embedder" in refused.output


def test_watched_answer_relevancy_over_http_embeds_like_judge_run_and_reads_both_calls_from_the_cache(
        engine, session, claims_dataset):
    from fakellm import FakeLLM

    claims_dataset(n_samples=3, claims_per_sample=2)
    server = FakeLLM(questions=True).start()
    try:
        prompt = metric_prompt(engine, "rel", "answer_relevancy", model="fake-model", params={"embedding_model": "fake-embed"})
        run_judge(engine, RunSpec(dataset="many", prompt=prompt, backend="openai", base_url=server.openai_base,
                                  api_key_env="", options=fast_options()))
        by_run = verdicts(session, prompt)
        assert server.stats()["counts"]["embeddings"] == 3 and len(by_run) == 3
        forget(engine, cache=False)  # the question step and the embeddings call both answered from the cache
        [cached] = once(engine, prompt, server)
        assert [(r.n_done, r.n_cached, r.calls) for r in cached.runs] == [(3, 3, 0)]
        assert {k: v[:4] for k, v in verdicts(session, prompt).items()} == {k: v[:4] for k, v in by_run.items()}
        forget(engine, cache=True)
        [fresh] = once(engine, prompt, server)
        assert [(r.n_done, r.calls) for r in fresh.runs] == [(3, 6)]  # a question step and an embeddings call each
        assert verdicts(session, prompt) == by_run
    finally:
        server.stop()


def test_with_extract_faithfulness_is_measured_on_the_extracted_claims(engine, session, tmp_path):
    import json

    from fakellm import FakeLLM

    from calibrate.ingest import import_file

    server = FakeLLM(claims=True).start()
    try:
        path = tmp_path / "plain.jsonl"
        path.write_text("".join(json.dumps({"id": f"p{i}", "question": f"Q{i}?", "answer": f"Take {i} mg and rest {i} days.",
                                            "contexts": [{"text": f"Take {i} mg a day."}]}) + "\n" for i in range(3)))
        with write_session(engine) as s:
            import_file(s, "samples", path, dataset="many")  # no claims: the segmenter's, one per answer
            save_version(s, "ext", task="claim_extraction", model="fake-model")
        prompt = metric_prompt(engine, "faith", "faithfulness", model="fake-model")
        spec = WatchSpec("many", prompt, backend="openai", base_url=server.openai_base, api_key_env="",
                         options=fast_options(concurrency=2), extract="ext@1", once=True)
        [first] = list(Watcher(engine, spec).passes())
        assert [(r.judge, r.n_done) for r in first.runs] == [("ext@1", 3), (prompt, 3)]
        # "Take i mg" / "rest i days.": two extracted claims per answer, one faithfulness step each.
        assert server.stats()["requests"] == 3 + 6
        steps = [json.loads(v[FIELDS.index("raw")])["steps"] for v in verdicts(session, prompt).values()]
        assert sorted(len(s) for s in steps) == [2, 2, 2]
        run = session.exec(select(JudgeRun).order_by(JudgeRun.id.desc())).first()
        assert run.params["claim_sources"] == {"ext@1": 3}  # the claim sets the scores were measured on
    finally:
        server.stop()
