"""Golden sets from production traces by the one WHERE grammar (issue 36, phase B): `labelled`, `unlabelled`,
`metadata.topic=…` (the application's metadata), `stream=audit|triage` and `started_at>=DATE` on trace data.

The traces are OpenInference RAG traces (test_trace_metadata.rag_request) imported with `import_traces`: samples
without splits whose `metadata.topic` is the root span's `metadata` and whose `metadata.started_at` is the root's start.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sqlmodel import Session, select
from test_trace_metadata import rag_request, trace_id

from calibrate.accounts import add_user
from calibrate.ingest.traces import import_traces
from calibrate.models import Assignment, Dataset, Label, Sample, Task, User

DAY_NS = 86_400 * 10**9
NOV_1 = int(datetime(2026, 11, 1, tzinfo=UTC).timestamp()) * 10**9
TOPICS = ("iron", "zinc", "zinc")


def _production(engine, tmp_path, runner) -> dict[str, Sample]:
    """30 traces, one a day from 1 November 2026, topics iron/zinc/zinc; labels on the first 12 (and a stale one on the
    13th), an audit assignment on every even trace and a triage one on every odd one of the first ten."""
    assert runner.invoke(["task", "add", "ok", "--target", "sample", "--kind", "categorical", "--labels", "yes,no"]).exit_code == 0
    traces = [{"id": trace_id(n), "start": NOV_1 + n * DAY_NS, "root": {"metadata": json.dumps({"topic": TOPICS[n % 3]})}}
              for n in range(30)]
    path = tmp_path / "t.pb"
    path.write_bytes(rag_request(traces).SerializeToString())
    assert import_traces(engine, [path], dataset="prod", salt="s").created == 30
    with Session(engine, expire_on_commit=False) as session:
        for name in ("ana", "ben"):
            add_user(session, name, role="annotator", password="password-123")
        session.flush()
        ana = session.exec(select(User).where(User.username == "ana")).one()
        task = session.exec(select(Task).where(Task.name == "ok")).one()
        dataset = session.exec(select(Dataset).where(Dataset.name == "prod")).one()
        samples = {s.external_id: s for s in session.exec(select(Sample).where(Sample.dataset_id == dataset.id))}
        for n in range(13):
            sample = samples[trace_id(n)]
            session.add(Label(task_id=task.id, annotator_id=ana.id, sample_id=sample.id, target_key=f"sample:{sample.id}",
                              value="yes", source="workbench", stale=n == 12))
        for n in range(10):
            session.add(Assignment(sample_id=samples[trace_id(n)].id, user_id=ana.id, status="done",
                                   stream="audit" if n % 2 == 0 else "triage", audit_prob=0.5 if n % 2 == 0 else None))
        session.commit()
    return samples


def _create(runner, name, where):
    made = runner.invoke(["golden", "create", name, "--dataset", "prod", "--where", where, "--json"])
    assert made.exit_code == 0, made.output
    return json.loads(made.stdout)["n_items"]


def test_golden_sets_from_production_traces_by_labelled_topic_stream_and_time(runner, engine, tmp_path):
    samples = _production(engine, tmp_path, runner)
    assert samples[trace_id(0)].split is None and samples[trace_id(0)].meta["topic"] == "iron"

    assert _create(runner, "labelled", "labelled") == 12  # the stale label of the 13th is not a current one
    assert _create(runner, "iron", "metadata.topic=iron") == 10
    assert _create(runner, "iron-labelled", "metadata.topic=iron&labelled") == 4  # traces 0, 3, 6, 9
    assert _create(runner, "audit", "stream=audit") == 5
    assert _create(runner, "triage", "stream=triage&metadata.topic=zinc") == 3  # traces 1, 5, 7
    # started_at: the root span's start, 1 November + n days; a date is its midnight UTC
    assert _create(runner, "late", "started_at>=2026-11-21") == 10
    assert _create(runner, "window", "started_at>=2026-11-05&started_at<2026-11-10T00:00:00+01:00") == 5  # days 5 to 9
    assert _create(runner, "late-unlabelled-zinc", "unlabelled&metadata.topic=zinc&started_at>2026-11-20T12:00:00Z") == 7

    shown = json.loads(runner.invoke(["golden", "show", "iron-labelled", "--dataset", "prod", "--json"]).stdout)
    assert sorted(item["sample_id"] for item in shown["items"]) == sorted(trace_id(n) for n in (0, 3, 6, 9))
    assert all(item["source_trace_id"] == item["sample_id"] for item in shown["items"])

    # a refresh draws production by the same grammar: unlabelled zinc traces only, never a member
    refreshed = runner.invoke(["golden", "refresh", "iron", "--dataset", "prod", "--from", "unlabelled&metadata.topic=zinc",
                               "--renew", "0.2", "--anchor-share", "0", "--json"])
    assert refreshed.exit_code == 0, refreshed.output
    v2 = json.loads(runner.invoke(["golden", "show", "iron@2", "--dataset", "prod", "--json"]).stdout)
    added = {item["sample_id"] for item in v2["items"] if item["added_in"] == 2}
    assert len(added) == 2 and all(samples[sid].meta["topic"] == "zinc" for sid in added)
    assert not added & {trace_id(n) for n in range(12)}


def test_a_bad_where_on_trace_data_is_refused_naming_the_term_and_the_option(runner, engine, tmp_path):
    _production(engine, tmp_path, runner)
    for args, line in [
        (["golden", "create", "g", "--dataset", "prod", "--where", "labelled&stream=audits"],
         "error: WHERE term 'stream=audits' in --where: the stream is audit or triage\n"),
        (["golden", "create", "g", "--dataset", "prod", "--where", "started_at>=last week"],
         "error: WHERE term 'started_at>=last week' in --where: write started_at>=DATE (or >, <=, <) with an ISO 8601 "
         "date or date-time from 1970 to 2199, e.g. started_at>=2026-12-01\n"),
        (["golden", "refresh", "g", "--dataset", "prod", "--from", "labeled"],
         "error: WHERE term 'labeled' in --from: not a term; use split=NAME, metadata.FIELD=VALUE, last=Nd, "
         "started_at>=DATE, stream=audit|triage, labelled or unlabelled, joined by &\n"),
        (["golden", "create", "g", "--dataset", "prod", "--where", "topic=iron"],
         "error: --where must be metadata.FIELD=VALUE, got 'topic=iron': 'topic' is not a WHERE term (a metadata field "
         "is written metadata.topic)\n"),
        (["golden", "create", "g", "--dataset", "prod", "--where", "metadata.topic=gold"],
         "error: no sample of prod matches metadata.topic=gold\n"),
    ]:
        result = runner.invoke(args)
        assert (result.exit_code, result.output) == (2, line), args
    assert json.loads(runner.invoke(["golden", "list", "--dataset", "prod", "--json"]).stdout) == []


def _text(response) -> str:
    from bs4 import BeautifulSoup

    return BeautifulSoup(response.data, "html.parser").get_text()


def test_the_dataset_page_words_a_refused_where_in_the_readers_language(runner, engine, tmp_path, client, login):
    from bs4 import BeautifulSoup

    _production(engine, tmp_path, runner)
    assert _create(runner, "iron", "metadata.topic=iron") == 10
    token = login("eve", "engineer")
    spanish = {"Accept-Language": "es"}
    drift = client.get("/datasets/prod", query_string={"drift": "iron", "against": "labelled&stream=audits"}, headers=spanish)
    assert drift.status_code == 404
    assert "término WHERE 'stream=audits' en --against: el flujo es audit o triage" in _text(drift)
    refused = client.post("/datasets/prod/golden/iron/refresh", data={"csrf_token": token, "source": "labeled"}, headers=spanish)
    assert refused.status_code == 303
    page = BeautifulSoup(client.get("/datasets/prod", headers=spanish).data, "html.parser")
    assert "término WHERE 'labeled' en --from: no es un término" in page.get_text()
    english = client.get("/datasets/prod", query_string={"drift": "iron", "against": "started_at>=soon"})
    assert "WHERE term 'started_at>=soon' in --against: write started_at>=DATE" in _text(english)
    done = client.get("/datasets/prod", query_string={"drift": "iron", "against": "unlabelled&started_at>=2026-11-15",
                                                       "fields": "metadata.topic"})
    assert done.status_code == 200 and b"drift-table" in done.data
