"""Changed content makes sample-level verdicts stale (issue 30, finding 6): kept as history, out of every figure, and
judged again by the next pass, as labels on a changed target are flagged stale.

The red team replayed a trace (same ids, a new answer): the sample was rewritten and its old verdict stayed, so the
watcher never judged it again and audit labels were compared with a verdict on other text.
"""

from __future__ import annotations

import json

from ingest_helpers import write_jsonl
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from sqlmodel import Session, select
from test_receiver import new_token, post
from trace_helpers import synthetic_request, trace_id_of

from calibrate import lookup
from calibrate.judges.watch import Watcher, WatchSpec
from calibrate.loop.testsplit import version_looks
from calibrate.models import Sample, StaleVerdict, Task, Verdict

ANSWERS = {"s0": "Take 10 mg a day. Ask your doctor.", "s1": "Take 20 mg a day with water."}


def rows(answers: dict[str, str]) -> list[dict]:
    return [{"id": key, "question": "How much?", "answer": answer, "contexts": ["Take 10 mg a day with water."]}
            for key, answer in answers.items()]


def verdicts_of(engine, judge_prefix: str = "quality@") -> dict[str, str]:
    with Session(engine) as session:
        found = session.exec(select(Sample.external_id, Verdict.value).join(Sample, Sample.id == Verdict.sample_id)
                             .where(Verdict.claim_id.is_(None), Verdict.context_id.is_(None))).all()
    return dict(found)


def test_an_update_that_changes_an_answer_sets_its_sample_verdicts_aside_and_the_next_run_judges_it_again(
        runner, engine, tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", rows(ANSWERS))
    assert runner.invoke(["import", "samples", str(path), "--dataset", "d"]).exit_code == 0
    assert runner.invoke(["prompt", "new", "quality", "--task", "answer_quality"]).exit_code == 0
    assert runner.invoke(["judge", "run", "--dataset", "d", "--prompt", "quality@1"]).exit_code == 0
    before = verdicts_of(engine)
    assert set(before) == {"s0", "s1"}
    changed = write_jsonl(tmp_path / "s2.jsonl", rows({**ANSWERS, "s1": "Take 50 mg at night."}))
    result = runner.invoke(["import", "samples", str(changed), "--dataset", "d", "--update"])
    assert result.exit_code == 0 and "1 verdict set aside as stale (the next run judges the new content)" in result.output
    assert set(verdicts_of(engine)) == {"s0"}  # out of every figure: no reader of `verdict` sees it
    with Session(engine) as session:
        stale = session.exec(select(StaleVerdict)).one()
        assert (stale.value, stale.judge_id, stale.status) == (before["s1"], stale.judge_id, "ok")
        assert "changed in an --update import (answer)" in stale.stale_reason
    report = json.loads(runner.invoke(["report", "--dataset", "d", "--judge", "quality@1", "--format", "json"]).stdout)
    assert report["tasks"]["answer_quality"]["n_no_gold"] == 1
    again = runner.invoke(["judge", "run", "--dataset", "d", "--prompt", "quality@1"])
    assert again.exit_code == 0 and "(1 verdicts, 0 unparsed, 0 errors, 0 from the cache; 1 judged before)" in again.output
    assert set(verdicts_of(engine)) == {"s0", "s1"}
    # Only content the verdict judged counts: a new metadata field changes nothing of it.
    tagged = [{**row, "metadata": {"tag": "x"}} for row in rows({**ANSWERS, "s1": "Take 50 mg at night."})]
    result = runner.invoke(["import", "samples", str(write_jsonl(tmp_path / "s3.jsonl", tagged)), "--dataset", "d", "--update"])
    assert result.exit_code == 0 and "stale" not in result.output and set(verdicts_of(engine)) == {"s0", "s1"}


def test_a_replayed_trace_with_a_new_answer_is_judged_again_by_the_watcher(runner, engine, client):
    token = new_token(runner, "prod")
    assert post(client, token, synthetic_request(2, repeat_every=0).SerializeToString()).status_code == 200
    assert runner.invoke(["traces", "flush", "--dataset", "prod"]).exit_code == 0
    assert runner.invoke(["prompt", "new", "quality", "--task", "answer_quality"]).exit_code == 0
    [first] = list(Watcher(engine, WatchSpec("prod", "quality@1", once=True)).passes())
    assert [run.n_done for run in first.runs] == [2]
    # The same trace again (same ids), its answer changed: the sample is rewritten and its verdict set aside.
    replay = synthetic_request(2, repeat_every=0)
    root = replay.resource_spans[0].scope_spans[0].spans[3]  # trace 1's root
    for attribute in root.attributes:
        if attribute.key == "output.value":
            attribute.value.CopyFrom(AnyValue(string_value="A different answer: Context of 1."))
    assert post(client, token, replay.SerializeToString()).status_code == 200
    flushed = json.loads(runner.invoke(["traces", "flush", "--dataset", "prod", "--json"]).stdout)
    assert (flushed["updated"], flushed["unchanged"]) == (1, 1)
    with Session(engine) as session:
        stale = session.exec(select(StaleVerdict.target_key, StaleVerdict.stale_reason)).all()
        judged = session.exec(select(Sample.external_id).join(Verdict, Verdict.sample_id == Sample.id)).all()
    assert len(stale) == 1 and "changed in an --update import (answer, steps)" in stale[0][1]
    assert judged == [trace_id_of(0)]
    [second] = list(Watcher(engine, WatchSpec("prod", "quality@1", once=True)).passes())
    assert [run.n_done for run in second.runs] == [1]  # the replayed trace, judged on its new answer
    with Session(engine) as session:
        assert sorted(session.exec(select(Sample.external_id).join(Verdict, Verdict.sample_id == Sample.id)).all()) == \
            sorted([trace_id_of(0), trace_id_of(1)])


def test_a_judge_whose_verdicts_were_set_aside_still_counts_as_a_look_on_its_split(runner, engine, tmp_path):
    """`calibrate optimise` adjusts its lower bounds for every version ever scored on dev (`testsplit.version_looks`,
    issue 32). Verdicts an --update sets aside leave `verdict`, but their judge was looked at all the same: the count
    must not go down, or the adjustment would shrink."""
    path = write_jsonl(tmp_path / "s.jsonl", rows(ANSWERS))
    assert runner.invoke(["import", "samples", str(path), "--dataset", "d"]).exit_code == 0
    with Session(engine) as session:
        for sample in session.exec(select(Sample)).all():
            sample.split = "dev"
            session.add(sample)
        session.commit()
    assert runner.invoke(["prompt", "new", "quality", "--task", "answer_quality"]).exit_code == 0
    assert runner.invoke(["judge", "run", "--dataset", "d", "--prompt", "quality@1"]).exit_code == 0

    def looks() -> int:
        with Session(engine) as session:
            dataset = lookup.dataset(session, "d")
            task = session.exec(select(Task).where(Task.name == "answer_quality")).one()
            return version_looks(session, dataset, task, "dev")

    assert looks() == 1
    changed = write_jsonl(tmp_path / "s2.jsonl", rows({"s0": "Take 30 mg.", "s1": "Take 50 mg at night."}))
    result = runner.invoke(["import", "samples", str(changed), "--dataset", "d", "--update"])
    assert result.exit_code == 0 and "2 verdicts set aside as stale" in result.output
    assert verdicts_of(engine) == {}
    assert looks() == 1
