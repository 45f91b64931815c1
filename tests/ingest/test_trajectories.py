"""Agent trajectories from real SDK traces (issue 33): steps keep their order, kinds, tool names, arguments and results,
through a trace file and through the OTLP/HTTP receiver; conversations (`--sessions`) make one sample of their turns."""

from __future__ import annotations

import json

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode
from sqlmodel import Session, select
from test_receiver import new_token, post, staged

from calibrate.ingest.samples_export import export_samples
from calibrate.ingest.traces import import_traces
from calibrate.ingest.traces.staging import settle
from calibrate.models import Dataset, Sample, Step


def _provider():
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "prenatal-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def agent_program(conversations: list[list[str]]):
    """Run a prenatal-care agent under the SDK with OpenInference attributes: per question an AGENT root with LLM, TOOL
    (the second one fails), RETRIEVER and LLM children; the questions of one list share a session id."""
    provider, exporter = _provider()
    tracer = provider.get_tracer("agent")
    for c, questions in enumerate(conversations):
        for t, question in enumerate(questions):
            with tracer.start_as_current_span("agent") as root:
                root.set_attribute("openinference.span.kind", "AGENT")
                root.set_attribute("input.value", question)
                root.set_attribute("session.id", f"conv-{c}")
                with tracer.start_as_current_span("plan") as llm:
                    llm.set_attribute("openinference.span.kind", "LLM")
                    llm.set_attribute("input.value", question)
                    llm.set_attribute("output.value", "call gestational_age")
                with tracer.start_as_current_span("gestational_age") as tool:
                    tool.set_attribute("openinference.span.kind", "TOOL")
                    tool.set_attribute("tool.name", "gestational_age")
                    tool.set_attribute("tool.parameters", json.dumps({"lmp": f"2026-0{t + 1}-10"}))
                    tool.set_attribute("output.value", json.dumps({"weeks": 12 + t}))
                    tool.set_attribute("output.mime_type", "application/json")
                with tracer.start_as_current_span("dose_check") as tool:
                    tool.set_attribute("openinference.span.kind", "TOOL")
                    tool.set_attribute("tool.name", "dose_check")
                    tool.set_attribute("tool.parameters", '{"drug": "ibuprofen"}')
                    tool.set_status(Status(StatusCode.ERROR, "timeout"))
                with tracer.start_as_current_span("guidelines") as retriever:
                    retriever.set_attribute("openinference.span.kind", "RETRIEVER")
                    retriever.set_attribute("input.value", question)
                    retriever.set_attribute("retrieval.documents.0.document.id", "who-anc-2016")
                    retriever.set_attribute("retrieval.documents.0.document.content", "Eight contacts are recommended.")
                with tracer.start_as_current_span("answer") as llm:
                    llm.set_attribute("openinference.span.kind", "LLM")
                    llm.set_attribute("output.value", f"Answer {c}.{t}")
                root.set_attribute("output.value", f"Answer {c}.{t}")
    provider.shutdown()
    return encode_spans(exporter.get_finished_spans())


def genai_program():
    """One GenAI-convention agent trace: invoke_agent with chat and execute_tool children."""
    provider, exporter = _provider()
    tracer = provider.get_tracer("genai")
    user = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Is 0.4 mg folic acid enough?"}]}])
    reply = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Yes, 0.4 mg daily."}]}])
    with tracer.start_as_current_span("invoke_agent prenatal") as root:
        root.set_attribute("gen_ai.operation.name", "invoke_agent")
        root.set_attribute("gen_ai.conversation.id", "g-1")
        root.set_attribute("gen_ai.input.messages", user)
        root.set_attribute("gen_ai.output.messages", reply)
        with tracer.start_as_current_span("chat gpt") as chat:
            chat.set_attribute("gen_ai.operation.name", "chat")
            chat.set_attribute("gen_ai.request.model", "gpt-x")
            chat.set_attribute("gen_ai.input.messages", user)
        with tracer.start_as_current_span("execute_tool dose_check") as tool:
            tool.set_attribute("gen_ai.operation.name", "execute_tool")
            tool.set_attribute("gen_ai.tool.name", "dose_check")
            tool.set_attribute("gen_ai.tool.call.arguments", '{"drug": "folic acid", "mg": 0.4}')
            tool.set_attribute("gen_ai.tool.call.result", '{"within_range": true}')
    provider.shutdown()
    return encode_spans(exporter.get_finished_spans())


def trajectories(engine, dataset: str) -> dict[str, list[tuple]]:
    """Return external id → its steps as (index, parent, kind, name, status, tool name, arguments, result, turn)."""
    with Session(engine) as session:
        ds = session.exec(select(Dataset).where(Dataset.name == dataset)).one()
        out = {}
        for sample in session.exec(select(Sample).where(Sample.dataset_id == ds.id)):
            steps = session.exec(select(Step).where(Step.sample_id == sample.id, Step.active).order_by(Step.index))
            out[sample.external_id] = [(s.index, s.parent, s.kind, s.name, s.status, s.tool_name, s.tool_arguments,
                                        s.tool_result, s.turn) for s in steps]
        return out


EXPECTED = [(0, None, "agent", "agent", "ok", None, None, None, None),
            (1, 0, "llm", "plan", "ok", None, None, None, None),
            (2, 0, "tool", "gestational_age", "ok", "gestational_age", {"lmp": "2026-01-10"}, {"weeks": 12}, None),
            (3, 0, "tool", "dose_check", "error", "dose_check", {"drug": "ibuprofen"}, None, None),
            (4, 0, "retriever", "guidelines", "ok", None, None, None, None),
            (5, 0, "llm", "answer", "ok", None, None, None, None)]


def test_openinference_agent_traces_keep_their_steps_through_a_file_and_the_receiver(engine, runner, client, tmp_path):
    request = agent_program([["How many weeks am I?"], ["Can I take ibuprofen?"]])
    path = tmp_path / "agent.pb"
    path.write_bytes(request.SerializeToString())
    summary = import_traces(engine, [path], dataset="file")
    assert summary.created == 2
    from_file = trajectories(engine, "file")
    assert all(steps == EXPECTED for steps in from_file.values())
    with Session(engine) as session:
        sample = session.exec(select(Sample).where(Sample.question == "How many weeks am I?")).first()
        assert (sample.answer, sample.meta["session_id"]) == ("Answer 0.0", "conv-0")
        row = session.exec(select(Step).where(Step.sample_id == sample.id, Step.kind == "retriever")).one()
        assert json.loads(row.output) == [{"id": "who-anc-2016", "content": "Eight contacts are recommended."}]
        assert row.input == "How many weeks am I?" and row.duration_ms is not None and row.started_at is not None
    # The receiver: the same spans posted, settled, give the same samples and steps.
    token = new_token(runner, "recv")
    assert post(client, token, request.SerializeToString()).status_code == 200
    assert settle(engine, settle_s=0).created == 2 and staged(engine) == 0
    assert trajectories(engine, "recv") == from_file


def test_genai_spans_make_steps_too(engine, tmp_path):
    path = tmp_path / "genai.pb"
    path.write_bytes(genai_program().SerializeToString())
    assert import_traces(engine, [path], dataset="g").created == 1  # an agent's trajectory needs no contexts
    (steps,) = trajectories(engine, "g").values()
    assert [(s[2], s[3]) for s in steps] == [("agent", "invoke_agent prenatal"), ("llm", "chat gpt"),
                                            ("tool", "execute_tool dose_check")]
    assert steps[2][5:8] == ("dose_check", {"drug": "folic acid", "mg": 0.4}, {"within_range": True})
    with Session(engine) as session:
        (exported,) = export_samples(session, "g").rows
    assert exported["question"] == "Is 0.4 mg folic acid enough?" and exported["answer"] == "Yes, 0.4 mg daily."
    assert exported["steps"][0]["kind"] == "agent" and exported["steps"][2]["tool"]["name"] == "dose_check"


def test_twelve_traces_of_four_sessions_make_four_conversations_of_three_turns(engine, runner, client, tmp_path):
    conversations = [[f"Question {c}.{t}" for t in range(3)] for c in range(4)]
    request = agent_program(conversations)
    path = tmp_path / "conversations.pb"
    path.write_bytes(request.SerializeToString())
    summary = import_traces(engine, [path], dataset="file", sessions=True)
    assert (summary.traces, summary.conversations, summary.created, summary.late_turns) == (12, 4, 4, 0)
    found = trajectories(engine, "file")
    assert sorted(found) == [f"session:conv-{c}" for c in range(4)]
    for steps in found.values():
        assert len(steps) == 18 and [s[8] for s in steps] == [t for t in range(3) for _ in range(6)]
        assert [s[1] for s in steps[6:12]] == [None, 6, 6, 6, 6, 6]  # parents stay within their turn
    with Session(engine) as session:
        sample = session.exec(select(Sample).where(Sample.external_id == "session:conv-2")).one()
    assert (sample.question, sample.answer) == ("Question 2.0", "Answer 2.2")
    assert sample.meta["turns"] == 3 and len(sample.meta["trace_ids"]) == 3
    # Imported again: unchanged. A fourth turn of a settled conversation is a late turn: counted, kept on its own.
    again = import_traces(engine, [path], dataset="file", sessions=True)
    assert (again.created, again.unchanged) == (0, 4)
    late = tmp_path / "late.pb"
    late.write_bytes(agent_program([["Question 0.3"]]).SerializeToString())
    summary = import_traces(engine, [late], dataset="file", sessions=True)
    assert (summary.late_turns, summary.created) == (1, 1)
    with Session(engine) as session:
        kept = session.exec(select(Sample).where(Sample.question == "Question 0.3")).one()
    assert kept.meta["late_turn"] is True and kept.meta["session_id"] == "conv-0" and not kept.external_id.startswith("session:")
    # Through a receiver token with sessions: the same four conversations.
    token = new_token(runner, "recv", "--sessions")
    assert post(client, token, request.SerializeToString()).status_code == 200
    assert runner.invoke(["traces", "flush", "--dataset", "recv"]).exit_code == 0
    assert trajectories(engine, "recv") == found and staged(engine) == 0


def test_a_conversation_settles_when_all_its_turns_are_quiet(engine, runner, client):
    token = new_token(runner, "recv", "--sessions")
    first = agent_program([["Question 0.0", "Question 0.1"]])
    assert post(client, token, first.SerializeToString()).status_code == 200
    # Settling while one more turn arrives: the conversation waits for it, nothing settles.
    from test_receiver import token_row

    with Session(engine) as session:
        from calibrate.models import StagedTrace

        rows = session.exec(select(StagedTrace)).all()
        oldest = min(row.last_received_at for row in rows)
        rows[0].last_received_at = oldest - 100  # one turn old, the other recent
        session.add(rows[0])
        session.commit()
        now = max(row.last_received_at for row in rows)
    assert settle(engine, settle_s=30, now=now).created == 0 and staged(engine) == 12
    # Quiet: both turns settle together, as one conversation.
    assert settle(engine, settle_s=30, now=now + 31).created == 1 and staged(engine) == 0
    assert list(trajectories(engine, "recv")) == ["session:conv-0"]
    assert token_row(engine, "recv").traces_settled == 2
