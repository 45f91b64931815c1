"""The snippet at the top of docs/production.md (examples/rag_app.py) works as written (issue 36).

The real app, unchanged: the OpenTelemetry SDK, its OTLP/HTTP exporter configured from the documented environment
variables, OpenInference's OpenAI instrumentation around the real `openai` client (answered by a local fake OpenAI
server), thumbs POSTed to /v1/feedback. Its spans go through a Collector-like proxy that samples upstream as an
OpenTelemetry Collector's probabilistic_sampler in proportional mode does (keep a trace when the trace id's last 56
bits are at least the threshold; write `ot=th:c`, 25 %, into every kept span's tracestate) to a real `calibrate
serve`. No Collector binary comes from the registries this project reaches: the proxy applies the rule of the
sampler's specification ("TraceState: Probability Sampling", proportional downstream sampler).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from server_helpers import launch_serve, wait_serving
from test_receiver import staged, token_row
from test_traces import samples_of

from calibrate.db import get_engine

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "rag_app.py"
THRESHOLD = 0xC << 52  # ot=th:c: reject randomness below 0xc0000000000000, keep 25 %


def _fakellm():
    if "fakellm" not in sys.modules:  # tests/judges imported it already, or it is loaded here (registered first:
        spec = importlib.util.spec_from_file_location("fakellm", ROOT / "tests" / "judges" / "fakellm.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["fakellm"] = module  # its dataclasses look their module up there; run alone, it was absent)
        spec.loader.exec_module(module)
    return sys.modules["fakellm"].FakeLLM


class Collector:
    """A proportional probabilistic sampler in front of calibrate: what passes gets `ot=th:c` and is forwarded."""

    def __init__(self, target: str) -> None:
        self.target, self.kept, self.dropped = target, set(), set()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                request = ExportTraceServiceRequest.FromString(self.rfile.read(int(self.headers["Content-Length"])))
                for resource_spans in request.resource_spans:
                    for scope_spans in resource_spans.scope_spans:
                        kept = []
                        for span in scope_spans.spans:
                            randomness = int.from_bytes(span.trace_id[-7:], "big")
                            (collector.kept if randomness >= THRESHOLD else collector.dropped).add(span.trace_id.hex())
                            if randomness >= THRESHOLD:
                                span.trace_state = "ot=th:c"
                                kept.append(span)
                        del scope_spans.spans[:]
                        scope_spans.spans.extend(kept)
                forward = urllib.request.Request(collector.target, data=request.SerializeToString(), headers={
                    "Content-Type": "application/x-protobuf", "Authorization": self.headers["Authorization"]})
                with urllib.request.urlopen(forward, timeout=30) as answer:
                    body, status = answer.read(), answer.status
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.mark.slow
def test_the_snippets_app_gives_samples_with_its_metadata_the_collectors_rate_and_its_thumbs(tmp_path):
    url = f"sqlite:///{tmp_path / 'serve.sqlite'}"
    env = {**os.environ, "CALIBRATE_INSTANCE": str(tmp_path)}
    run = [sys.executable, "-m", "calibrate"]
    subprocess.run([*run, "init", "--db", url], check=True, env=env, capture_output=True)
    made = subprocess.run([*run, "traces", "token", "--dataset", "prod-rag", "--rate", "0.5", "--salt", "s", "--db", url],
                          check=True, env=env, capture_output=True, text=True)
    token = made.stdout.strip()
    llm = _fakellm()()
    llm.responder = lambda body: "From the context: " + body["messages"][-1]["content"].splitlines()[2]
    server, port = launch_serve(url, tmp_path, "--role", "traces", env={"CALIBRATE_TRACES_SETTLE_S": "1",
                                                                       "CALIBRATE_TRACES_SETTLE_EVERY": "0.2"})
    llm.start()
    try:
        wait_serving(server, port)
        collector = Collector(f"http://127.0.0.1:{port}/v1/traces")
        questions = [f"How much {'iron' if n % 3 else 'zinc'} is needed, case {n}?" for n in range(120)]
        typed = "".join(f"{q}\n" + ("-\n" if n % 2 == 0 else "") for n, q in enumerate(questions))
        app = subprocess.run([sys.executable, str(APP)], input=typed, capture_output=True, text=True, timeout=120, env={
            **os.environ, "CALIBRATE_URL": f"http://127.0.0.1:{port}", "CALIBRATE_TOKEN": token,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.url,
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": f"Authorization=Bearer {token}",
            "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": llm.openai_base})
        assert app.returncode == 0, app.stderr
        answered = [line.split(" ", 1) for line in app.stdout.splitlines()]
        assert len(answered) == 120 and all(len(trace_id) == 32 for trace_id, _ in answered)
        down = {trace_id for n, (trace_id, _) in enumerate(answered) if n % 2 == 0}
        engine = get_engine(url)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (token_row(engine, "prod-rag").traces_settled < len(collector.kept)
                                               or staged(engine)):
            time.sleep(0.2)
    finally:
        llm.stop()
        server.terminate()
        output = server.communicate(timeout=30)[0]
    assert "the trace receiver only: POST /v1/traces and POST /v1/feedback" in output
    assert collector.kept and collector.dropped and collector.kept | collector.dropped == {t for t, _ in answered}
    row = token_row(engine, "prod-rag")
    assert row.traces_settled == len(collector.kept) and row.feedback_received == 60, output
    samples = samples_of(engine, "prod-rag")
    # every thumbs-down trace the Collector kept is a sample; the others as calibrate's own draw (rate 0.5) says
    assert down & collector.kept <= set(samples) and set(samples) <= collector.kept
    assert any(t not in down for t in samples) and any(t in down for t in samples)
    for trace_id, sample in samples.items():
        meta = sample["metadata"]
        assert meta["upstream_prob"] == 0.25
        assert meta["inclusion_prob"] == (0.25 if trace_id in down else 0.125)  # upstream × ours (thumbs-down: × 1)
        assert sample["feedback"] == (-1 if trace_id in down else None)
        assert meta["topic"] in ("iron", "zinc") and meta["topic"] in sample["question"]
        assert meta["model"] and meta["convention"] == "openinference" and meta["service_name"] == "rag-app"
        assert sample["contexts"] and sample["answer"] == "From the context: " + sample["contexts"][0][1]
    assert row.upstream == {"with_threshold": len(samples)} and row.skipped == {}
    assert json.loads(json.dumps(row.upstream))  # stored as JSON


def test_the_docs_open_with_the_same_app():
    """docs/production.md's snippet is examples/rag_app.py, word for word (the file the test above runs)."""
    doc = (ROOT / "docs" / "production.md").read_text(encoding="utf-8")
    block = doc.split("```python\n", 1)[1].split("```", 1)[0]
    assert block == APP.read_text(encoding="utf-8")
    assert doc.index("```python") < doc.index("## Two streams")  # the page opens with it
