"""Production traces in (issue 23): OTLP protobuf/JSON/JSONL and Langfuse files → sampled samples, idempotent, all or nothing."""

from __future__ import annotations

import json

import pytest
from ingest_helpers import dump, write_jsonl
from sqlmodel import Session, select
from trace_helpers import collector_json, rag_program, synthetic_request, trace_id_of, write_encodings

from calibrate.accounts import add_user
from calibrate.ingest.problems import ImportRejected
from calibrate.ingest.traces import SUMMARY_KEYS, import_traces, inclusion_u
from calibrate.models import Context, Dataset, Label, Sample, Task


def samples_of(engine, dataset: str) -> dict[str, dict]:
    """Return the dataset's samples by external id: fields, feedback, metadata and active contexts."""
    with Session(engine) as session:
        ds = session.exec(select(Dataset).where(Dataset.name == dataset)).first()
        if ds is None:
            return {}
        out = {}
        for sample in session.exec(select(Sample).where(Sample.dataset_id == ds.id)):
            contexts = session.exec(select(Context).where(Context.sample_id == sample.id, Context.active)
                                    .order_by(Context.rank)).all()
            out[sample.external_id] = {"question": sample.question, "answer": sample.answer, "feedback": sample.feedback,
                                       "metadata": sample.meta, "contexts": [(c.rank, c.text, c.doc_id) for c in contexts]}
        return out


def test_the_sdk_programs_traces_give_the_same_samples_in_every_encoding(engine, tmp_path):
    request = rag_program(["What is the dose?", "Who wrote it?", "When does it expire?"])
    files = write_encodings(tmp_path, request)
    # protobuf's own JSON mapping writes ids in base64: accepted as well.
    base64_file = tmp_path / "base64.json"
    from google.protobuf import json_format
    base64_file.write_text(json_format.MessageToJson(request), encoding="utf-8")
    results = {}
    for name, path in [*files.items(), ("base64", base64_file)]:
        summary = import_traces(engine, [path], dataset=f"d-{name}", salt="s")
        assert (summary.traces, summary.spans, summary.created, summary.skipped) == (3, 9, 3, {}), name
        results[name] = samples_of(engine, f"d-{name}")
    assert results["otlp-proto"] == results["otlp-json"] == results["otlp-jsonl"] == results["base64"]
    trace_ids = {span.trace_id.hex() for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans}
    assert set(results["otlp-proto"]) == trace_ids
    sample = next(s for s in results["otlp-json"].values() if s["question"] == "What is the dose?")
    assert sample["answer"] == "The answer to What is the dose? is in passage 0."
    assert sample["contexts"] == [(0, "Passage 0 about What is the dose?", "doc-0-0"),
                                  (1, "Passage 1 about What is the dose?", "doc-0-1")]
    meta = sample["metadata"]
    assert meta["convention"] == "openinference" and meta["model"] == "gpt-4o-mini"
    assert meta["service_name"] == "rag-api" and meta["prompt_version"] == "v7" and meta["session_id"] == "session-0"
    assert meta["inclusion_prob"] == 1.0 and meta["retrieval_scores"] == [0.9, 0.8]
    assert len(meta["root_span_id"]) == 16 and meta["started_at"].endswith("Z") and len(meta["content_sha256"]) == 64
    roots = {span.span_id.hex() for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans
             if not span.parent_span_id}
    assert {s["metadata"]["root_span_id"] for s in results["otlp-json"].values()} == roots


def test_thousands_of_traces_sampled_exactly_nested_and_idempotent(engine, tmp_path):
    n = 2_000
    request = synthetic_request(n, repeat_every=20)  # 5 % of spans sent twice
    files = write_encodings(tmp_path, request)
    down = {trace_id_of(i) for i in range(0, n, 33)}  # 3 %
    up = {trace_id_of(i) for i in range(1, n, 50)}
    feedback = write_jsonl(tmp_path / "feedback.jsonl", [{"trace_id": t, "value": "down"} for t in sorted(down)]
                           + [{"trace_id": t, "value": 1} for t in sorted(up - down)])
    ids = {trace_id_of(i) for i in range(n)}
    expected = down | {t for t in ids if inclusion_u("prod", t) < 0.05}

    summary = import_traces(engine, [files["otlp-proto"]], dataset="prod", feedback=feedback, rate=0.05, chunk_size=500)
    assert summary.traces == n and summary.spans == 3 * n and summary.duplicate_spans == len(range(0, 3 * n, 20))
    assert summary.sampled_down == len(down)
    assert summary.created == summary.sampled == len(expected) and summary.skipped == {}
    stored = samples_of(engine, "prod")
    assert set(stored) == expected  # sample id = trace id; no duplicates
    for trace_id, sample in stored.items():
        assert sample["metadata"]["trace_id"] == trace_id
        assert sample["feedback"] == (-1 if trace_id in down else 1 if trace_id in up else None)
        assert sample["metadata"]["inclusion_prob"] == (1.0 if trace_id in down else 0.05)

    before = dump(str(engine.url))
    again = import_traces(engine, [files["otlp-json"]], dataset="prod", feedback=feedback, rate=0.05)
    assert (again.created, again.updated, again.unchanged) == (0, 0, len(expected))
    assert dump(str(engine.url)) == before

    # The same salt: the 1 % sample is inside the 5 % one (no thumbs-down, to compare the draws alone).
    one = import_traces(engine, [files["otlp-jsonl"]], dataset="one", salt="prod", rate=0.01)
    five = import_traces(engine, [files["otlp-jsonl"]], dataset="five", salt="prod", rate=0.05)
    small, large = set(samples_of(engine, "one")), set(samples_of(engine, "five"))
    assert 0 < len(small) == one.created < len(large) == five.created and small < large
    assert large == {t for t in ids if inclusion_u("prod", t) < 0.05}


def _otlp_file(path, spans, service="svc"):
    """Write one OTLP/JSON TracesData of spans given as (trace, span, parent, {attribute: string or list})."""
    def value(v):
        return {"stringValue": v} if isinstance(v, str) else {"arrayValue": {"values": [value(x) for x in v]}}
    rows = [{"traceId": t, "spanId": s, "parentSpanId": p, "name": "x", "startTimeUnixNano": "1764000000000000000",
             "attributes": [{"key": k, "value": value(v)} for k, v in attrs.items()]} for t, s, p, attrs in spans]
    path.write_text(json.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": service}}]}, "scopeSpans": [{"spans": rows}]}]}), encoding="utf-8")
    return path


T1, T2, T3 = "1" * 32, "2" * 32, "3" * 32


def _rag(trace, answer="A.", question="Q?", context="C."):
    return [(trace, "a" * 16, "", {"openinference.span.kind": "CHAIN", "input.value": question, "output.value": answer}),
            (trace, "b" * 16, "a" * 16, {"openinference.span.kind": "RETRIEVER",
                                         "retrieval.documents.0.document.content": context})]


def test_changed_traces_are_updated_until_labelled_and_copies_are_not_added(engine, tmp_path):
    import_traces(engine, [_otlp_file(tmp_path / "1.json", _rag(T1))], dataset="d")
    summary = import_traces(engine, [_otlp_file(tmp_path / "2.json", _rag(T1, answer="B."))], dataset="d")
    assert (summary.created, summary.updated) == (0, 1)
    assert samples_of(engine, "d")[T1]["answer"] == "B."
    with Session(engine) as session:
        user = add_user(session, "ana", role="annotator", password="password-123")
        sample = session.exec(select(Sample).where(Sample.external_id == T1)).one()
        task = session.exec(select(Task)).first()
        session.add(Label(task_id=task.id, sample_id=sample.id, target_key=f"sample:{sample.id}", annotator_id=user.id,
                          value="x"))
        session.commit()
    summary = import_traces(engine, [_otlp_file(tmp_path / "3.json", _rag(T1, answer="C."))], dataset="d")
    assert (summary.updated, summary.changed_after_labelling) == (0, 1)
    assert samples_of(engine, "d")[T1]["answer"] == "B."
    with Session(engine) as session:
        label = session.exec(select(Label)).one()
        assert (label.value, label.stale) == ("x", False)
    # The same content under another trace id (a retried request with a new id) is not added.
    summary = import_traces(engine, [_otlp_file(tmp_path / "4.json", _rag(T2, answer="B.") + _rag(T3, answer="B."))],
                            dataset="d")
    assert (summary.duplicate_content, summary.created) == (2, 0) and set(samples_of(engine, "d")) == {T1}


def test_traces_that_make_no_sample_are_counted_by_reason_with_what_to_enable(engine, tmp_path):
    genai_hidden = [(T1, "a" * 16, "", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"})]
    genai = [(T2, "a" * 16, "", {
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Dose?"}]}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "2 mg."}],
                                               "finish_reason": "stop"}]),
        "gen_ai.response.model": "m-2", "gen_ai.conversation.id": "c9"}),
        (T2, "b" * 16, "a" * 16, {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": json.dumps(
            [{"id": "k1", "score": 0.7, "content": "Take 2 mg."}])})]
    no_context = [(T3, "a" * 16, "", {"openinference.span.kind": "CHAIN", "input.value": "Q?", "output.value": "A."})]
    orphan = [("4" * 32, "b" * 16, "c" * 16, {"openinference.span.kind": "LLM"})]
    plain = [("5" * 32, "a" * 16, "", {"http.method": "GET"})]
    path = _otlp_file(tmp_path / "t.json", genai_hidden + genai + no_context + orphan + plain)
    summary = import_traces(engine, [path], dataset="d")
    assert summary.skipped == {"content_not_captured": 1, "no_contexts": 1, "no_root_span": 1, "unknown_convention": 1}
    assert summary.created == 1
    sample = samples_of(engine, "d")[T2]
    assert (sample["question"], sample["answer"], sample["contexts"]) == ("Dose?", "2 mg.", [(0, "Take 2 mg.", "k1")])
    assert sample["metadata"]["convention"] == "gen_ai" and sample["metadata"]["model"] == "m-2"
    assert sample["metadata"]["session_id"] == "c9"
    text = "\n".join(summary.lines())
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true" in text
    assert summary.sampled == summary.created + sum(summary.skipped.values())


def test_a_langfuse_export_with_scores_as_feedback(engine, tmp_path):
    trace = {"id": "lf-trace-1", "timestamp": "2025-11-24T16:00:00.000Z", "sessionId": "s1",
             "input": {"question": "How long?"}, "output": "Ten days.",
             "observations": [{"id": "o1", "type": "SPAN", "name": "retriever", "startTime": "2025-11-24T16:00:00.1Z",
                               "output": [{"page_content": "Ten days at most.", "metadata": {"id": "kb-3"}}]},
                              {"id": "o2", "type": "GENERATION", "name": "llm", "model": "claude-x",
                               "startTime": "2025-11-24T16:00:00.2Z"}],
             "scores": [{"name": "user-feedback", "value": 0, "dataType": "BOOLEAN"}]}
    other = {**trace, "id": "8d7b2c4e-0000-4000-8000-00000000000a", "scores": [], "output": "Eleven days."}
    path = tmp_path / "langfuse.json"
    path.write_text(json.dumps({"data": [trace, other]}), encoding="utf-8")
    # The smallest rate (1e-6, a rate of 0 is refused): only the thumbs-down trace is taken; the file's feedback
    # would win over the score.
    summary = import_traces(engine, [path], dataset="d", rate=1e-6)
    assert (summary.sampled, summary.sampled_down, summary.created) == (1, 1, 1)
    (key, sample), = samples_of(engine, "d").items()
    assert len(key) == 32 and sample["metadata"]["langfuse_trace_id"] == "lf-trace-1"
    assert (sample["question"], sample["answer"], sample["feedback"]) == ("How long?", "Ten days.", -1)
    assert sample["contexts"] == [(0, "Ten days at most.", "kb-3")] and sample["metadata"]["model"] == "claude-x"
    feedback = write_jsonl(tmp_path / "f.jsonl", [{"trace_id": "8d7b2c4e-0000-4000-8000-00000000000A", "value": "down"}])
    summary = import_traces(engine, [path], dataset="d", rate=1e-6, feedback=feedback)
    assert (summary.sampled_down, summary.created, summary.unchanged) == (2, 1, 1)
    assert samples_of(engine, "d")["8d7b2c4e00004000800000000000000a"]["answer"] == "Eleven days."


GOOD_SPAN = {"traceId": T1, "spanId": "a" * 16, "name": "x", "attributes": []}
DEEP: dict = {"stringValue": "bottom"}
for _ in range(12):
    DEEP = {"arrayValue": {"values": [DEEP]}}


@pytest.mark.parametrize("content, fmt, where", [
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [', "auto", "not valid JSON"),
    (json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{**GOOD_SPAN, "traceId": "xyz"}]}]}]}).encode(), "auto",
     "resourceSpans[0].scopeSpans[0].spans[0].traceId"),
    (json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{**GOOD_SPAN, "attributes": [{"key": "k", "value": DEEP}]}]}]}]}
                ).encode(), "otlp-json", "nested deeper"),
    (json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{**GOOD_SPAN, "attributes": [
        {"key": f"k{i}", "value": {"stringValue": "v"}} for i in range(1001)]}]}]}]}).encode(), "auto", "limit is 1,000"),
    ((json.dumps({"resourceSpans": []}) + "\n") * 2 + '{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": 1}]}]}]}\n',
     "otlp-jsonl", "line 3"),
    (b"\x0a\xff\xff\xff\xff\x0f", "auto", "not a valid OTLP protobuf"),
    (b"hello", "auto", "cannot tell the format"),
])
def test_bad_trace_files_are_refused_whole_saying_where(engine, tmp_path, content, fmt, where):
    good = _otlp_file(tmp_path / "good.json", _rag(T1))
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = dump(str(engine.url))
    with pytest.raises(ImportRejected) as caught:
        import_traces(engine, [good, bad], dataset="d", fmt=fmt)
    text = "\n".join(caught.value.details())
    assert where in text and "bad.txt" in text
    assert dump(str(engine.url)) == before


def test_a_bad_feedback_line_refuses_the_import(engine, tmp_path):
    good = _otlp_file(tmp_path / "good.json", _rag(T1))
    feedback = write_jsonl(tmp_path / "f.jsonl", [{"trace_id": T1, "value": "down"}, {"trace_id": T2, "value": "meh"}])
    before = dump(str(engine.url))
    with pytest.raises(ImportRejected) as caught:
        import_traces(engine, [good], dataset="d", feedback=feedback)
    assert "line 2, field 'value'" in caught.value.details()[0]
    assert dump(str(engine.url)) == before


def test_the_command_prints_the_summary_as_json_and_takes_at_most_max(runner, engine, tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(collector_json(synthetic_request(30, repeat_every=0))), encoding="utf-8")
    result = runner.invoke(["traces", "import", str(path), "--dataset", "cli", "--max", "10", "--json", "--salt", "x"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert tuple(summary) == SUMMARY_KEYS
    assert (summary["traces"], summary["sampled"], summary["created"], summary["skipped"]) == (30, 30, 10, {"over_max": 20})
    # --max keeps the smallest draws: the 10 lowest u.
    draws = sorted((inclusion_u("x", trace_id_of(i)), trace_id_of(i)) for i in range(30))
    assert set(samples_of(engine, "cli")) == {t for _, t in draws[:10]}
    result = runner.invoke(["traces", "import", str(path), "--dataset", "cli", "--max", "10", "--salt", "x"])
    assert result.exit_code == 0 and "0 created" in result.output and "10 unchanged" in result.output
    result = runner.invoke(["traces", "import", str(tmp_path / "nope.json"), "--dataset", "cli"])
    assert result.exit_code == 2 and "no such file" in result.output


def test_feedback_that_arrives_later_updates_only_the_feedback(engine, tmp_path):
    path = _otlp_file(tmp_path / "1.json", _rag(T1))
    import_traces(engine, [path], dataset="d")
    before = samples_of(engine, "d")[T1]
    feedback = write_jsonl(tmp_path / "f.jsonl", [{"trace_id": T1, "value": -2.5}])
    summary = import_traces(engine, [path], dataset="d", feedback=feedback, rate=0.5)
    assert (summary.updated, summary.unchanged) == (1, 0)
    after = samples_of(engine, "d")[T1]
    assert after == {**before, "feedback": -1}  # metadata (inclusion_prob 1.0 of the first import) kept
    summary = import_traces(engine, [path], dataset="d", feedback=feedback)
    assert (summary.updated, summary.unchanged) == (0, 1)


def test_one_traces_odd_text_skips_that_trace_not_the_import_in_the_callers_transaction(engine, tmp_path):
    from calibrate.db import write_session

    long_id = [(T3, *span[1:]) for span in _rag(T3)]
    long_id[1] = (T3, "b" * 16, "a" * 16, {**long_id[1][3], "retrieval.documents.0.document.id": "x" * 501})
    path = tmp_path / "t.json"
    _otlp_file(path, long_id)  # a document id over 500 characters
    extra = _otlp_file(tmp_path / "u.json", _rag(T2, answer="bad \ud800 text"))  # an unpaired surrogate: not text
    good = _otlp_file(tmp_path / "g.json", _rag("6" * 32))
    with write_session(engine) as session:
        summary = import_traces(session, [path, extra, good], dataset="d")
    assert summary.skipped == {"invalid": 2} and summary.created == 1
    assert set(samples_of(engine, "d")) == {"6" * 32}
