"""Benchmark the OTLP/HTTP receiver: spans per second durably stored through `POST /v1/traces`, beside Arize Phoenix.

Payloads: protobuf `ExportTraceServiceRequest`s of 512 spans each (OpenInference RAG traces:
root CHAIN, RETRIEVER, LLM; a trace's spans may straddle two requests), every request distinct
(its trace ids and texts carry its number). The same bytes go to both servers, from the same
number of concurrent senders on keep-alive connections, each sending its requests as fast as
the server answers.

1. calibrate: `calibrate serve` (waitress, one process, 4 threads) on a fresh SQLite file, a
   token from `calibrate traces token`. Stored = rows of `stagedspan` counted in the database
   (a request is answered after its write committed); the rate is spans counted / seconds from
   the first request until the count reached every span sent.
2. Phoenix (`--phoenix`: the `python` of a separate virtual environment with `arize-phoenix`;
   never a dependency of calibrate): `python -m phoenix.server.main serve` with its default
   SQLite in a fresh working directory. Phoenix answers 200 once a request is queued and writes
   its spans later, so stored = rows of its `spans` table; the rate is the count over the
   seconds until the count stopped growing (or reached what was accepted). Refusals (503 when
   its queue is full) are counted.
3. Streaming (`--stream`, default 1,000,000 spans) through calibrate with the settler working
   (TRACES_SETTLE_S=0, every second: traces become samples while spans arrive, rate 0.05) and
   `--annotators` experts saving labels meanwhile (bench_annotate's database and clients): the
   server's RSS sampled every second, and the label saves' p50/p95. Whether the settler kept up:
   the spans still staged when the last request was answered, and how long the rest took to settle.
4. `--settle-timing` (alone): one settling transaction timed in-process with 1,024 and 102,400
   spans staged, this tree's staging.py against BEFORE_COMMIT's (its ready query grouped every
   staged span), in one run.
5. `--settle-dataset` (alone): one settling transaction timed in-process with 1,024 and 102,400
   samples already in the dataset, this tree's importer and samples import against
   BEFORE_DATASET_COMMIT's (both read the whole dataset), in one run.

    .venv/bin/python bench/bench_receiver.py [--spans 25600] [--senders 2] [--stream 1000000]
        [--split] [--traces-nice 10] [--phoenix /work/phoenix-venv/bin/python] [--record]
6. `--big-request N` (alone, default 250,000 spans): one `POST /v1/traces` of N rootless spans
   (the red team's shape: a root never comes) to `calibrate serve` on bench_annotate's database,
   TRACES_MAX_SPANS raised to take it, while `--annotators` experts save labels through the
   server and a `calibrate import labels` of 20 labels runs again and again in another process
   (the CLI's own code path, timed from inside it: `ready_engine`, then `import_in_chunks`).
   Then the drop of those rootless traces a day later (`drop_rootless`, in this process, as the
   server's settler runs it: a background writer). Reported per phase (alone first, then the
   request, then the drop): the saves' and imports' p50, p95 and max, the request's time and size,
   and the server's RSS. Goal (issue 30): every label save and CLI label import under 1 s.

7. `--trees before=DIR,after=this` (alone): the throughput test of 1. for each checkout (an
   older commit exported with `git archive`; `this` is this one) and each number of senders in
   `--senders-list` (default 2,4), `--rounds` times, interleaved so every tree sees the same load
   (issue 34: four exporters were refused 4.8–9.1 % of their requests; the goal is none, at a
   stored rate at least as high).

    .venv/bin/python bench/bench_receiver.py --trees before=/tmp/before,after=this --spans 300000 [--rounds 2] [--record]
    .venv/bin/python bench/bench_receiver.py --settle-timing [--record]
    .venv/bin/python bench/bench_receiver.py --settle-dataset [--record]
    .venv/bin/python bench/bench_receiver.py --big-request 250000 [--annotators 2] [--record]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import hashlib
import http.client
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_annotate import Client, build_db, percentile, record_section
from bench_import_while_labelling import Saver
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

RESULTS = ROOT / "bench" / "results" / "receiver.md"
BATCH = 512
TRACE_MARK = b"\xaa" * 8  # the request number's place in every trace id of the template
SPAN_MARK = b"\xbb" * 4  # its place in every span id
TEXT_MARK = "Q" * 16  # its place in every text (hex), so no two requests carry the same content
BASE_NS = 1_764_000_000_000_000_000


def template() -> bytes:
    """Return one request of 512 spans whose trace ids and texts carry the markers (replaced per request)."""
    def value(v):
        return AnyValue(double_value=v) if isinstance(v, float) else AnyValue(string_value=v)

    spans = []
    n = 0
    while len(spans) < BATCH:
        trace = TRACE_MARK + n.to_bytes(8, "big")
        # Span ids are unique across requests too (an SDK's are random): Phoenix keys spans by span id alone.
        ids = [SPAN_MARK + hashlib.sha256(f"{n}:{k}".encode()).digest()[:4] for k in range(3)]
        question = f"Question {TEXT_MARK}-{n}: what does the leaflet say about the dose?"
        answer = f"Answer {TEXT_MARK}-{n}: take one tablet a day with water, as passage {n % 5} says."
        attrs = [
            {"openinference.span.kind": "CHAIN", "input.value": question, "output.value": answer},
            {"openinference.span.kind": "RETRIEVER", "input.value": question,
             "retrieval.documents.0.document.content": f"Passage {TEXT_MARK}-{n}: one tablet a day. " * 4,
             "retrieval.documents.0.document.id": f"doc-{n}", "retrieval.documents.0.document.score": 0.8,
             "retrieval.documents.1.document.content": f"Passage {TEXT_MARK}-{n}b: with water. " * 4,
             "retrieval.documents.1.document.id": f"doc-{n}b", "retrieval.documents.1.document.score": 0.6},
            {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "output.value": answer},
        ]
        for k in range(3):
            spans.append(Span(trace_id=trace, span_id=ids[k], parent_span_id=b"" if k == 0 else ids[0],
                              name=("rag", "retrieve", "generate")[k], start_time_unix_nano=BASE_NS + n * 1000 + k,
                              end_time_unix_nano=BASE_NS + n * 1000 + k + 500,
                              attributes=[KeyValue(key=key, value=value(v)) for key, v in attrs[k].items()]))
        n += 1
    resource = ResourceSpans(scope_spans=[ScopeSpans(spans=spans[:BATCH])])
    resource.resource.attributes.append(KeyValue(key="service.name", value=AnyValue(string_value="rag-api")))
    return ExportTraceServiceRequest(resource_spans=[resource]).SerializeToString()


def payload(base: bytes, number: int) -> bytes:
    """Return request `number`: the template with its number in every trace id and text (same lengths: still valid)."""
    return (base.replace(TRACE_MARK, (number + 1).to_bytes(8, "big")).replace(SPAN_MARK, (number + 1).to_bytes(4, "big"))
            .replace(TEXT_MARK.encode(), f"{number:016x}".encode()))


class Senders:
    """`n` threads POSTing requests [start, stop) round-robin, each on its own keep-alive connection."""

    def __init__(self, port: int, path: str, headers: dict, base: bytes, numbers: range, n: int) -> None:
        self.port, self.path, self.headers, self.base, self.numbers, self.n = port, path, headers, base, numbers, n
        self.statuses: dict[int, int] = {}
        self.accepted_spans = 0
        self.lock = threading.Lock()
        self.latencies: list[float] = []

    def _run(self, offset: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        for i in range(offset, len(self.numbers), self.n):
            body = payload(self.base, self.numbers[i])
            t0 = time.monotonic()
            try:
                conn.request("POST", self.path, body=body, headers=self.headers)
                response = conn.getresponse()
                response.read()
                status = response.status
            except OSError:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                status = 0
            with self.lock:
                self.latencies.append((time.monotonic() - t0) * 1000)
                self.statuses[status] = self.statuses.get(status, 0) + 1
                if status == 200:
                    self.accepted_spans += BATCH
        conn.close()

    def run(self) -> None:
        threads = [threading.Thread(target=self._run, args=(k,)) for k in range(self.n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def count(db: Path, sql: str) -> int | None:
    """Return the query's number, or None while the database cannot be read (locked, not created yet)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return con.execute(sql).fetchone()[0]
    except sqlite3.OperationalError:
        return None
    finally:
        con.close()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def label_savers(port: int, annotators: int, stop: threading.Event) -> tuple[list[Saver], list[threading.Thread]]:
    """Log bench_annotate's experts b01… in and return their label savers with a thread each (not started) until `stop`."""
    clients = [Client(port, f"b{i + 1:02d}") for i in range(annotators)]
    for client in clients:
        client.login()
    savers = [Saver(client, seed) for seed, client in enumerate(clients)]
    return savers, [threading.Thread(target=saver.run, args=(stop,)) for saver in savers]


class RssSampler(threading.Thread):
    """Sample a process's RSS (MB) every `every` seconds, with the seconds since the start, until `stop()`."""

    def __init__(self, pid: int, every: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.samples: list[tuple[float, float]] = []
        self.done = threading.Event()

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.done.is_set():
            self.samples.append((time.monotonic() - t0, rss_mb(self.pid)))
            self.done.wait(self.every)

    def stop(self) -> list[tuple[float, float]]:
        self.done.set()
        self.join()
        return self.samples


def wait_http(port: int, path: str, process: subprocess.Popen, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited: {log.read_text()[-3000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            conn.getresponse().read()
            return
        except OSError:
            time.sleep(0.3)
    process.kill()
    raise RuntimeError(f"the server did not start: {log.read_text()[-3000:]}")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def calibrate_server(folder: Path, db: Path, dataset: str | None, *, rate: float, settle_env: dict, role: str = "all",
                     nice: int = 0, tree: Path = ROOT) -> tuple[subprocess.Popen, int, str]:
    """Start `calibrate serve --role ROLE` (under `nice -n NICE` when given) on `db`; with `dataset`, make a token first.
    `tree`: the checkout to run (another one, for example an older commit exported with `git archive`, goes first on
    PYTHONPATH and is the working directory)."""
    env = {**os.environ, "CALIBRATE_INSTANCE": str(folder), **settle_env}
    if tree != ROOT:
        env["PYTHONPATH"] = str(tree) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    url = f"sqlite:///{db}"
    if not db.exists():
        subprocess.run([sys.executable, "-m", "calibrate", "init", "--db", url], check=True, env=env, capture_output=True, cwd=tree)
    token = ""
    if dataset is not None:
        made = subprocess.run([sys.executable, "-m", "calibrate", "traces", "token", "--dataset", dataset, "--rate", str(rate),
                               "--db", url], check=True, env=env, capture_output=True, text=True, cwd=tree)
        token = made.stdout.strip()
    port = free_port()
    log = folder / f"calibrate-{port}.log"
    command = [sys.executable, "-m", "calibrate", "serve", "--port", str(port), "--role", role, "--db", url]
    if nice:
        command = ["nice", "-n", str(nice), *command]
    process = subprocess.Popen(command, env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=open(log, "wb"))
    wait_http(port, "/health", process, 60, log)
    return process, port, token


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def run_calibrate(folder: Path, base: bytes, n_requests: int, senders: int, tree: Path = ROOT, name: str = "throughput") -> dict:
    db = folder / f"{name}.sqlite"
    server, port, token = calibrate_server(folder, db, "bench", rate=0.05, settle_env={"CALIBRATE_TRACES_SETTLE_S": "3600"},
                                           tree=tree)
    try:
        send = Senders(port, "/v1/traces", {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {token}"},
                       base, range(n_requests), senders)
        t0 = time.monotonic()
        send.run()
        sent = time.monotonic() - t0
        expected = n_requests * BATCH
        stored = count(db, "SELECT count(*) FROM stagedspan") or 0
        stored_at = time.monotonic() - t0  # answered requests are committed: the count is there at once
    finally:
        stop(server)
    return {"sent_s": sent, "stored": stored, "expected": expected, "stored_s": stored_at, "statuses": send.statuses,
            "p95_ms": percentile(send.latencies, 95)}


def run_phoenix(folder: Path, python: str, base: bytes, n_requests: int, senders: int) -> dict:
    work = folder / "phoenix"
    work.mkdir()
    port, grpc = free_port(), free_port()
    log = folder / "phoenix.log"
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc),
           "PHOENIX_HOST": "127.0.0.1"}
    process = subprocess.Popen([python, "-m", "phoenix.server.main", "serve"], env=env, cwd=work,
                               stdout=subprocess.DEVNULL, stderr=open(log, "wb"))
    try:
        wait_http(port, "/", process, 180, log)
        time.sleep(2)
        db = work / "phoenix.db"
        send = Senders(port, "/v1/traces", {"Content-Type": "application/x-protobuf"}, base, range(n_requests), senders)
        t0 = time.monotonic()
        send.run()
        sent = time.monotonic() - t0
        # Stored: the spans table, until it reaches what was accepted or stops growing for 10 s.
        last, last_change = 0, time.monotonic()
        while time.monotonic() - t0 < 600:
            now_count = count(db, "SELECT count(*) FROM spans")
            if now_count is None:
                time.sleep(0.25)
                continue
            if now_count != last:
                last, last_change = now_count, time.monotonic()
            if now_count >= send.accepted_spans or time.monotonic() - last_change > 10:
                break
            time.sleep(0.25)
        stored_s = last_change - t0
    finally:
        stop(process)
    return {"sent_s": sent, "stored": last, "accepted": send.accepted_spans, "stored_s": stored_s,
            "statuses": send.statuses, "p95_ms": percentile(send.latencies, 95)}


def run_stream(folder: Path, base: bytes, n_requests: int, senders: int, annotators: int, baseline_s: float,
               split: bool = False, nice: int = 0) -> dict:
    """Stream with label saves meanwhile: one `--role all` server, or (`split`) a `web` and a `traces` server on one file."""
    db = folder / "stream.sqlite"
    build_db(db, 2000, annotators, 200)
    settle_env = {"CALIBRATE_TRACES_SETTLE_S": "0", "CALIBRATE_TRACES_SETTLE_EVERY": "1"}
    server, port, token = calibrate_server(folder, db, "stream", rate=0.05, settle_env=settle_env,
                                           role="traces" if split else "all", nice=nice)
    web, web_port = server, port
    if split:
        web, web_port, _ = calibrate_server(folder, db, None, rate=0.05, settle_env=settle_env, role="web")
    sampler = RssSampler(server.pid, 1)
    try:
        stop_saving = threading.Event()
        savers, saver_threads = label_savers(web_port, annotators, stop_saving)
        sampler.start()
        for thread in saver_threads:
            thread.start()
        time.sleep(baseline_s)  # label saves alone first: the same run's baseline
        streaming_from = time.monotonic()
        send = Senders(port, "/v1/traces", {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {token}"},
                       base, range(10_000, 10_000 + n_requests), senders)
        t0 = time.monotonic()
        send.run()
        sent = time.monotonic() - t0
        stop_saving.set()
        for thread in saver_threads:
            thread.join()
        # Whether the settler kept up: what is staged when the last request was answered, and how long it takes
        # to settle the rest (bounded wait), to count what became samples.
        staged_at_end = count(db, "SELECT count(*) FROM stagedspan")
        drain_from = time.monotonic()
        deadline = drain_from + 300
        while time.monotonic() < deadline and (count(db, "SELECT count(*) FROM stagedspan") or 0) > 0:
            time.sleep(0.5)
        drain_s = time.monotonic() - drain_from
        rss = sampler.stop()
        settled = count(db, "SELECT coalesce(sum(traces_settled), 0) FROM ingesttoken") or 0
        samples = count(db, "SELECT count(*) FROM sample s JOIN dataset d ON d.id = s.dataset_id WHERE d.name = 'stream'") or 0
        staged_left = count(db, "SELECT count(*) FROM stagedspan") or 0
        received = count(db, "SELECT coalesce(sum(spans_received), 0) FROM ingesttoken") or 0
    finally:
        stop(server)
        if web is not server:
            stop(web)
    saves = [ms for saver in savers for start, ms, _ in saver.saves if start >= streaming_from]
    alone = [ms for saver in savers for start, ms, _ in saver.saves if start < streaming_from]
    errors = sum(not ok for saver in savers for *_, ok in saver.saves)
    return {"sent_s": sent, "spans": n_requests * BATCH, "received": received, "statuses": send.statuses, "rss": rss,
            "settled": settled, "samples": samples, "staged_left": staged_left, "staged_at_end": staged_at_end,
            "drain_s": drain_s, "saves": len(saves),
            "save_p50": percentile(saves, 50), "save_p95": percentile(saves, 95), "save_max": max(saves) if saves else float("nan"),
            "save_errors": errors, "failures": [s.failure for s in savers if s.failure], "alone": len(alone),
            "alone_p50": percentile(alone, 50), "alone_p95": percentile(alone, 95)}


# `calibrate import labels FILE` as the command line runs it (its settings, `ready_engine`: the writer lock as a foreground
# writer), timed from inside the process: the milliseconds of the import itself, without the interpreter's start.
LABEL_IMPORT = r"""
import sys, time
from calibrate.cli.common import ready_engine
from calibrate.ingest import import_in_chunks
from calibrate.settings import load_settings
settings = load_settings({"DATABASE_URL": sys.argv[1]})
engine = ready_engine(settings)
for line in sys.stdin:
    t0 = time.perf_counter()
    import_in_chunks(engine, "labels", line.strip(), dataset="bench", chunk_size=settings["IMPORT_CHUNK_SIZE"])
    print(f"{(time.perf_counter() - t0) * 1000:.1f}", flush=True)
"""


class LabelImports:
    """A process that imports a 20-label file again and again (values alternating, so each import writes), timing each."""

    def __init__(self, folder: Path, db: Path) -> None:
        con = sqlite3.connect(db)
        claims = con.execute("SELECT s.external_id, c.\"index\" FROM claim c JOIN sample s ON s.id = c.sample_id "
                             "WHERE c.\"index\" = 0 ORDER BY s.id LIMIT 20").fetchall()
        con.close()
        self.files = []
        for value in ("supported", "unsupported"):
            path = folder / f"labels-{value}.jsonl"
            path.write_text("".join(json.dumps({"sample_id": sid, "annotator": "cli", "task": "claim_support",
                                                "claim": index, "value": value}) + "\n" for sid, index in claims))
            self.files.append(path)
        self.process = subprocess.Popen([sys.executable, "-c", LABEL_IMPORT, f"sqlite:///{db}"], cwd=ROOT, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        env={**os.environ, "CALIBRATE_INSTANCE": str(folder)})
        self.imports: list[tuple[float, float]] = []  # (monotonic start, ms)

    def run(self, stop: threading.Event) -> None:
        n = 0
        while not stop.is_set():
            t0 = time.monotonic()
            self.process.stdin.write(f"{self.files[n % 2]}\n")
            self.process.stdin.flush()
            self.imports.append((t0, float(self.process.stdout.readline())))
            n += 1

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def rootless_request(base: bytes, n_spans: int) -> tuple[bytes, int]:
    """Return one ExportTraceServiceRequest of at least `n_spans` spans without their roots (the requests joined), and its count."""
    parts, spans = [], 0
    number = 0
    while spans < n_spans:
        request = ExportTraceServiceRequest.FromString(payload(base, 20_000 + number))
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                kept = [span for span in scope_spans.spans if span.parent_span_id]
                del scope_spans.spans[:]
                scope_spans.spans.extend(kept)
                spans += len(kept)
        parts.append(request.SerializeToString())  # protobuf: messages one after the other are one message
        number += 1
    return b"".join(parts), spans


def run_big_request(folder: Path, n_spans: int, annotators: int, baseline_s: float) -> dict:
    """One request of `n_spans` rootless spans, then their drop, with label saves and CLI label imports meanwhile."""
    from calibrate.db import get_engine, writer_lock
    from calibrate.ingest.traces import staging

    db = folder / "big.sqlite"
    build_db(db, 2000, annotators, 200)
    body, spans = rootless_request(template(), n_spans)
    env = {"CALIBRATE_TRACES_SETTLE_S": "3600", "CALIBRATE_TRACES_MAX_SPANS": str(spans),
           "CALIBRATE_TRACES_MAX_BODY": str(len(body) + 1)}
    server, port, token = calibrate_server(folder, db, "big", rate=0.05, settle_env=env)
    phases: list[tuple[str, float, float]] = []
    sampler = RssSampler(server.pid, 0.5)
    importer = LabelImports(folder, db)
    try:
        stop_all = threading.Event()
        savers, workers = label_savers(port, annotators, stop_all)
        workers.append(threading.Thread(target=importer.run, args=(stop_all,)))
        sampler.start()
        for thread in workers:
            thread.start()
        start = time.monotonic()
        time.sleep(baseline_s)
        rss_before = sampler.samples[-1][1]
        phases.append(("alone", start, time.monotonic()))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        t0 = time.monotonic()
        conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf",
                                                              "Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        answer = response.read()
        request_s = time.monotonic() - t0
        phases.append(("request", t0, time.monotonic()))
        staged = count(db, "SELECT count(*) FROM stagedspan") or 0
        # The drop a day later, as the server's settler runs it (a background writer on the same file).
        engine = get_engine(f"sqlite:///{db}")
        t0 = time.monotonic()
        dropped = staging.drop_rootless(engine, now=time.time() + staging.ROOTLESS_MAX_AGE + 1,
                                        lock=writer_lock(f"sqlite:///{db}").background)
        drop_s = time.monotonic() - t0
        phases.append(("drop", t0, time.monotonic()))
        time.sleep(1)
        stop_all.set()
        for thread in workers:
            thread.join()
        rss = [mb for _, mb in sampler.stop()]
    finally:
        importer.close()
        stop(server)
    out = {"spans": spans, "bytes": len(body), "status": response.status, "answer": answer[:200], "request_s": request_s,
           "staged": staged, "dropped": dropped.dropped_traces, "dropped_spans": dropped.dropped_spans, "drop_s": drop_s,
           "rss_before": rss_before, "rss_max": max(rss), "errors": sum(not ok for s in savers for *_, ok in s.saves),
           "failures": [s.failure for s in savers if s.failure], "phases": {}}
    for name, begin, end in phases:
        saves = [ms for s in savers for t, ms, _ in s.saves if begin <= t < end]
        imports = [ms for t, ms in importer.imports if begin <= t < end]
        out["phases"][name] = {"saves": len(saves), "save_p50": percentile(saves, 50), "save_p95": percentile(saves, 95),
                               "save_max": max(saves, default=float("nan")), "imports": len(imports),
                               "import_p50": percentile(imports, 50), "import_p95": percentile(imports, 95),
                               "import_max": max(imports, default=float("nan"))}
    return out


def big_request_lines(n_spans: int, annotators: int, baseline_s: float, folder: Path) -> list[str]:
    from calibrate.ingest.traces.staging import DROP_CHUNK, STAGE_CHUNK

    big = run_big_request(folder, n_spans, annotators, baseline_s)
    print("big request:", {k: v for k, v in big.items() if k != "answer"}, file=sys.stderr, flush=True)
    lines = [f"One `POST /v1/traces` of **{big['spans']:,} rootless spans** ({big['bytes'] / 1e6:.1f} MB of protobuf, "
             f"TRACES_MAX_SPANS raised to take it) to one `calibrate serve` (waitress, 4 threads) on bench_annotate's "
             f"database, staged in transactions of {STAGE_CHUNK:,} spans (STAGE_CHUNK); then the drop of its "
             f"{big['dropped']:,} traces a day later in transactions of {DROP_CHUNK:,} traces (DROP_CHUNK), as the settler "
             f"runs it. Meanwhile {annotators} experts save labels through the server and a `calibrate import labels` "
             "of 20 labels runs again and again in another process (timed from inside it, the import call alone):", "",
             f"- the request: answered {big['status']} in **{big['request_s']:.1f} s**, {big['staged']:,} spans staged; "
             f"the drop: {big['dropped']:,} traces ({big['dropped_spans']:,} spans) in {big['drop_s']:.1f} s",
             f"- server RSS: {big['rss_before']:.0f} MB before the request, max {big['rss_max']:.0f} MB",
             f"- label-save errors: {big['errors']}" + (f", client failures {big['failures']}" if big["failures"] else ""),
             "", "| phase | label saves | save p50 ms | save p95 ms | save max ms | CLI label imports | import p50 ms | "
                 "import p95 ms | import max ms |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, label in (("alone", f"alone ({baseline_s:g} s, the same run's baseline)"),
                        ("request", f"during the {big['spans']:,}-span request"), ("drop", "during the drop")):
        p = big["phases"][name]
        lines.append(f"| {label} | {p['saves']:,} | {p['save_p50']:.0f} | **{p['save_p95']:.0f}** | **{p['save_max']:.0f}** | "
                     f"{p['imports']:,} | {p['import_p50']:.0f} | **{p['import_p95']:.0f}** | **{p['import_max']:.0f}** |")
    worst = max(max(p["save_max"], p["import_max"]) for name, p in big["phases"].items() if name != "alone")
    lines += ["", f"- the slowest label save or CLI label import during the request and the drop: **{worst:.0f} ms** "
                  f"(goal < 1,000 ms)"]
    return lines


# The receiver's settling before `stagedtrace` (its ready query grouped every staged span): the --settle-timing baseline.
BEFORE_COMMIT = "7dfa3dea5ffe7f2eaa2143ea91eab6c947d202a2"


def settle_timing(folder: Path, sizes: tuple[int, ...] = (1024, 102_400), repeats: int = 5) -> list[str]:
    """Time one settling transaction (the server's batch) with `sizes` spans staged: before and after `stagedtrace`.

    In-process, on one SQLite file: spans staged through `stage_spans` (the request path), with
    random trace ids as SDKs make them (the template's are in request order); the first
    `sizes[0]` spans are quiet for TRACES_SETTLE_S (30 s), the others just arrived, as while
    traces stream. Then `_settle_some` of this tree and of BEFORE_COMMIT's staging.py, each run
    `repeats` times in a write transaction that is rolled back (every run sees the same staged
    rows); the median.
    """

    from sqlmodel import Session

    from calibrate.db import write_engine, write_session
    from calibrate.ingest.traces import staging
    from calibrate.ingest.traces.decode import spans_of_protobuf

    before = _module_at(BEFORE_COMMIT, "calibrate/ingest/traces/staging.py", "calibrate_staging_before")
    engine, token = _settle_database(folder)
    base = template()
    staged_requests = 0
    rows = []
    now = time.time()
    for size in sizes:
        while staged_requests * BATCH < size:
            spans = [dataclasses.replace(span, trace_id=hashlib.sha256(span.trace_id.encode()).hexdigest()[:32])
                     for span in spans_of_protobuf(payload(base, staged_requests))]
            encoded = staging.encode_spans(spans, [])
            with write_session(engine) as session:
                staging.stage_spans(session, token, encoded, now=now - 60 if staged_requests * BATCH < sizes[0] else now)
            staged_requests += 1
        timings = {}
        for name, module in (("before", before), ("after", staging)):
            runs = []
            for _ in range(repeats):
                with Session(write_engine(engine), expire_on_commit=False) as session:
                    t0 = time.perf_counter()
                    # Before: a Settled and a Counter of skip reasons; after: the one TracesSummary.
                    extra = {"into": before.Settled(), "skipped": Counter()} if module is before else \
                        {"into": staging.TracesSummary()}
                    done = module._settle_some(session, settle_s=30, dataset=None, now=now, max_field_chars=1_000_000,
                                               batch=staging.SERVER_SETTLE_BATCH, **extra)
                    runs.append((time.perf_counter() - t0) * 1000)
                    session.rollback()
                assert done == staging.SERVER_SETTLE_BATCH, done
            timings[name] = sorted(runs)[len(runs) // 2]
        rows.append((staged_requests * BATCH, timings["before"], timings["after"]))
        print(f"settle timing: {rows[-1]}", file=sys.stderr, flush=True)
    lines = [f"One settling transaction ({staging.SERVER_SETTLE_BATCH} traces, rate 0.05, in-process, median of {repeats}, "
             f"rolled back) with spans staged, random trace ids, {sizes[0]:,} spans quiet for 30 s and the others just "
             f"arrived; before = staging.py at {BEFORE_COMMIT[:7]} (GROUP BY over `stagedspan`), after = `stagedtrace`:", "",
             "| spans staged | before ms | after ms | before / after |", "|---:|---:|---:|---:|"]
    lines += [f"| {n:,} | {b:.1f} | {a:.1f} | {b / a:.1f}× |" for n, b, a in rows]
    (n0, b0, a0), (n1, b1, a1) = rows[0], rows[-1]
    lines += ["", f"- growth from {n0:,} to {n1:,} staged spans: before **{b1 / b0:.1f}×**, after **{a1 / a0:.2f}×**"]
    return lines


# Issue 23's fixed part of a settling transaction: the samples import read every stored sample of the dataset and the
# duplicate-content check every stored metadata's digest. The --settle-dataset baseline: ingest/ at this commit.
BEFORE_DATASET_COMMIT = "33faaf150cd22517f660ddeda1b4382ed5569652"


def _settle_database(folder: Path):
    """Return the engine of a new database in `folder` (`calibrate init`) and an ingest token of dataset `settle` (rate 0.05)."""
    from calibrate.db import get_engine, write_session
    from calibrate.ingest.traces import staging

    url = f"sqlite:///{folder / 'settle.sqlite'}"
    subprocess.run([sys.executable, "-m", "calibrate", "init", "--db", url], check=True, capture_output=True, cwd=ROOT,
                   env={**os.environ, "CALIBRATE_INSTANCE": str(folder)})
    engine = get_engine(url)
    with write_session(engine) as session:
        token, _ = staging.new_token(session, "settle", rate=0.05)
    return engine, token


def _module_at(commit: str, path: str, name: str):
    """Return `path` of this repository at `commit`, loaded as module `name` (our own file, at a fixed commit)."""
    import types

    source = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    module = sys.modules[name] = types.ModuleType(name)
    exec(compile(source, f"{name}.py", "exec"), module.__dict__)
    return module


def settle_dataset_timing(folder: Path, sizes: tuple[int, ...] = (1024, 102_400), repeats: int = 5) -> list[str]:
    """Time one settling transaction (the server's batch, rate 0.05) with `sizes` samples already in the dataset.

    In-process, on one SQLite file migrated to this tree's head: two requests of spans staged
    through `stage_spans` (random trace ids, quiet for TRACES_SETTLE_S), a dataset filled through
    the samples import with trace-shaped samples (metadata `content_sha256`, `inclusion_prob`)
    up to each size in turn. Then `_settle_some`, `repeats` times each in a write transaction
    that is rolled back (every run settles the same traces into the same dataset), once with
    this tree's importer and samples import and once with BEFORE_DATASET_COMMIT's (the scan of
    the dataset's ids and hashes; the digest out of every stored metadata JSON); the median.
    """
    from sqlmodel import Session

    from calibrate.db import write_engine, write_session
    from calibrate.ingest.batches import InChunks
    from calibrate.ingest.samples import import_samples
    from calibrate.ingest.traces import staging
    from calibrate.ingest.traces.decode import spans_of_protobuf

    before_samples = _module_at(BEFORE_DATASET_COMMIT, "calibrate/ingest/samples.py", "calibrate_samples_before")
    before = _module_at(BEFORE_DATASET_COMMIT, "calibrate/ingest/traces/importer.py", "calibrate_importer_before")
    before.import_samples = before_samples.import_samples  # the old _store with the old samples import
    engine, token = _settle_database(folder)
    base = template()
    now = time.time()
    for number in range(2):  # 341 traces: more than one batch ready
        spans = [dataclasses.replace(span, trace_id=hashlib.sha256(span.trace_id.encode()).hexdigest()[:32])
                 for span in spans_of_protobuf(payload(base, number))]
        with write_session(engine) as session:
            staging.stage_spans(session, token, staging.encode_spans(spans, []), now=now - 60)
    filled = 0
    rows = []
    after_import = staging.import_decoded
    for size in sizes:
        path = folder / f"fill-{size}.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            for i in range(filled, size):
                question = f"Stored question {i}: what does the leaflet say about the dose?"
                answer = f"Stored answer {i}: take one tablet a day with water."
                contexts = [f"Stored passage {i}: one tablet a day. " * 4]
                digest = hashlib.sha256(f"{question}|{answer}|{contexts}".encode()).hexdigest()
                trace_id = hashlib.sha256(f"stored:{i}".encode()).hexdigest()[:32]
                handle.write(json.dumps({"id": trace_id, "question": question, "answer": answer, "contexts": contexts,
                                         "metadata": {"trace_id": trace_id, "convention": "openinference",
                                                      "content_sha256": digest, "inclusion_prob": 0.05}}) + "\n")
        t0 = time.perf_counter()
        import_samples(InChunks(engine), path, "jsonl", dataset="settle")
        print(f"settle dataset: filled to {size:,} samples in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        filled = size
        timings: dict[str, float] = {}
        created = set()
        for name, import_decoded in (("before", before.import_decoded), ("after", after_import)):
            runs = []
            staging.import_decoded = import_decoded  # what _settle_some calls
            try:
                for _ in range(repeats):
                    with Session(write_engine(engine), expire_on_commit=False) as session:
                        into = staging.TracesSummary()
                        t0 = time.perf_counter()
                        done = staging._settle_some(session, settle_s=30, dataset=None, now=now, max_field_chars=1_000_000,
                                                    batch=staging.SERVER_SETTLE_BATCH, into=into)
                        runs.append((time.perf_counter() - t0) * 1000)
                        session.rollback()
                    assert done == staging.SERVER_SETTLE_BATCH, done
                    created.add((name, into.created))
            finally:
                staging.import_decoded = after_import
            timings[name] = sorted(runs)[len(runs) // 2]
        assert len({n for _, n in created}) == 1 and next(iter(created))[1] > 0, created  # the same work either way
        rows.append((size, next(iter(created))[1], timings["before"], timings["after"]))
        print(f"settle dataset: {rows[-1]}", file=sys.stderr, flush=True)
    lines = [f"One settling transaction ({staging.SERVER_SETTLE_BATCH} traces, rate 0.05, in-process, median of {repeats}, "
             f"rolled back) into a dataset already holding trace-shaped samples; before = calibrate/ingest at "
             f"{BEFORE_DATASET_COMMIT[:7]} (the samples import read every stored sample's id and hash; the "
             "duplicate-content check read the digest out of every stored sample's metadata), after = "
             "`import_samples(ids=…)` and the indexed `sample.content_sha256`:", "",
             "| samples in the dataset | samples created | before ms | after ms | before / after |",
             "|---:|---:|---:|---:|---:|"]
    lines += [f"| {n:,} | {c} | {b:.1f} | {a:.1f} | {b / a:.1f}× |" for n, c, b, a in rows]
    (n0, _, b0, a0), (n1, _, b1, a1) = rows[0], rows[-1]
    lines += ["", f"- growth from {n0:,} to {n1:,} samples in the dataset: before **{b1 / b0:.1f}×**, "
                  f"after **{a1 / a0:.2f}×**"]
    return lines


def compare_trees(folder: Path, trees: list[tuple[str, Path]], senders: list[int], n_requests: int, rounds: int) -> list[str]:
    """Run the throughput test (`run_calibrate`: a fresh database each) for every (senders, tree), `rounds` times,
    interleaved so that every tree sees the same machine load; one table row per run, then the medians."""
    base = template()
    rows, by_case = [], {}
    for round_ in range(rounds):
        for n in senders:
            for label, tree in trees:
                result = run_calibrate(folder, base, n_requests, n, tree, name=f"r{round_}-{n}-{label}")
                print(label, n, result, file=sys.stderr, flush=True)
                refused = sum(k for status, k in result["statuses"].items() if status != 200)
                rate = result["stored"] / result["stored_s"]
                by_case.setdefault((n, label), []).append((refused, rate))
                rows.append(f"| {round_ + 1} | {label} | {n} | {n_requests:,} | {refused:,} ({refused / n_requests:.1%}; "
                            f"{dict(sorted(result['statuses'].items()))}) | {result['p95_ms']:.0f} | {result['stored']:,} of "
                            f"{result['expected']:,} | {result['stored_s']:.1f} | **{rate:,.0f}** |")
    lines = ["| round | tree | senders | requests | refused (non-200) | client p95 ms | spans stored | seconds | stored spans/s |",
             "|---:|---|---:|---:|---|---:|---:|---:|---:|", *rows, "",
             "| senders | tree | refused, every round | stored spans/s, median (every round) |", "|---:|---|---|---|"]
    for (n, label), values in by_case.items():
        rates = sorted(rate for _, rate in values)
        lines.append(f"| {n} | {label} | {', '.join(str(r) for r, _ in values)} | **{rates[len(rates) // 2]:,.0f}** "
                     f"({', '.join(f'{rate:,.0f}' for _, rate in values)}) |")
    return lines


def one_run_section(title: str, options: str, body: list[str], uptime: str, *, record: bool) -> None:
    """Print one run's section (its title, the machine and its load before and after, the command, the figures) and,
    with --record, add it to RESULTS."""
    lines = [f"## {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC: {title}", "",
             f"- machine: {platform.machine()}, {os.cpu_count()} CPUs (shared), Python {platform.python_version()}, "
             f"SQLite {sqlite3.sqlite_version}; `uptime` before: `{uptime}`",
             f"- command: `python bench/bench_receiver.py {options}`", "", *body, "",
             f"- `uptime` after: `{subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}`", ""]
    text = "\n".join(lines)
    print(text)
    if record:
        record_section(RESULTS, "OTLP/HTTP receiver benchmark", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=50 * BATCH, help="spans for the side-by-side run (a multiple of 512)")
    parser.add_argument("--senders", type=int, default=2,
                        help="concurrent clients (2: calibrate's TRACES_MAX_CONCURRENT, beyond which it answers 503)")
    parser.add_argument("--stream", type=int, default=1_000_000, help="spans streamed with the settler on (0: skip)")
    parser.add_argument("--annotators", type=int, default=2, help="experts saving labels during the stream")
    parser.add_argument("--baseline-seconds", type=float, default=10, help="label saves alone before the stream")
    parser.add_argument("--split", action="store_true",
                        help="stream to a `serve --role traces` process while labels go to a `serve --role web` one (same file)")
    parser.add_argument("--traces-nice", type=int, default=0, help="with --split: start the traces server under `nice -n N`")
    parser.add_argument("--phoenix", default="/work/phoenix-venv/bin/python",
                        help="python of a virtual environment with arize-phoenix ('' to skip)")
    parser.add_argument("--settle-timing", action="store_true",
                        help="only time one settling transaction with 1k and 100k spans staged, before and after stagedtrace")
    parser.add_argument("--settle-dataset", action="store_true",
                        help="only time one settling transaction into a dataset of 1k and 100k samples, before and after "
                             "sample.content_sha256 and import_samples(ids=)")
    parser.add_argument("--big-request", type=int, default=0, metavar="N",
                        help="only: one request of N rootless spans, then their drop, with label saves and CLI label imports")
    parser.add_argument("--trees", metavar="LABEL=DIR,…",
                        help="only: the throughput test (--spans) for each checkout and each of --senders-list, interleaved "
                             "(`this` names this one: before=/tmp/before,after=this)")
    parser.add_argument("--senders-list", default="2,4", help="with --trees: the numbers of concurrent senders")
    parser.add_argument("--rounds", type=int, default=1, help="with --trees: runs of each case")
    parser.add_argument("--record", action="store_true", help=f"add the section to {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    if args.trees:
        trees = [(label, ROOT if where == "this" else Path(where).resolve())
                 for label, _, where in (item.partition("=") for item in args.trees.split(","))]
        counts = [int(n) for n in args.senders_list.split(",")]
        n_requests = max(1, args.spans // BATCH)
        with tempfile.TemporaryDirectory() as tmp:
            body = compare_trees(Path(tmp), trees, counts, n_requests, args.rounds)
        one_run_section(f"{n_requests * BATCH:,} spans from {' and '.join(map(str, counts))} concurrent senders, "
                        f"{' against '.join(label for label, _ in trees)}",
                        f"--spans {args.spans} --trees {args.trees} --senders-list {args.senders_list} --rounds {args.rounds}",
                        ["One `calibrate serve` (waitress, 4 threads, `--role all`, settler idle) on a fresh SQLite file per run; "
                         "each sender POSTs protobuf requests of 512 spans back to back on its own keep-alive connection. "
                         "Stored = rows of `stagedspan` once the last request was answered (a 200 is committed).", "",
                         *body], uptime, record=args.record)
        return
    if args.big_request:
        with tempfile.TemporaryDirectory() as tmp:
            body = big_request_lines(args.big_request, args.annotators, args.baseline_seconds, Path(tmp))
        one_run_section(f"label saves and CLI label imports during a {args.big_request:,}-span request",
                        f"--big-request {args.big_request} --annotators {args.annotators} "
                        f"--baseline-seconds {args.baseline_seconds:g}", body, uptime, record=args.record)
        return
    if args.settle_timing or args.settle_dataset:
        flag, title = (("--settle-dataset", "settling cost against samples in the dataset") if args.settle_dataset
                       else ("--settle-timing", "settling cost against spans staged"))
        with tempfile.TemporaryDirectory() as tmp:
            body = settle_dataset_timing(Path(tmp)) if args.settle_dataset else settle_timing(Path(tmp))
        one_run_section(title, flag, body, uptime, record=args.record)
        return
    base = template()
    n_requests = max(1, args.spans // BATCH)
    lines = [f"## {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC: {n_requests * BATCH:,} spans in protobuf requests of "
             f"{BATCH}, {args.senders} senders", "",
             f"- machine: {platform.machine()}, {os.cpu_count()} CPUs (shared), Python {platform.python_version()}, "
             f"SQLite {sqlite3.sqlite_version}; `uptime` before: `{uptime}`",
             f"- command: `python bench/bench_receiver.py --spans {args.spans} --senders {args.senders} --stream {args.stream} "
             f"--annotators {args.annotators} --baseline-seconds {args.baseline_seconds:g}"
             f"{' --split' if args.split else ''}{f' --traces-nice {args.traces_nice}' if args.traces_nice else ''}`; "
             f"request body {len(base):,} bytes (512 spans)", ""]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cal = run_calibrate(folder, base, n_requests, args.senders)
        print("calibrate:", cal, file=sys.stderr, flush=True)
        phx = None
        phoenix_note = ""
        if args.phoenix:
            try:
                version = subprocess.run([args.phoenix, "-c", "import phoenix; print(phoenix.__version__)"], capture_output=True,
                                         text=True, check=True).stdout.strip()
                phx = run_phoenix(folder, args.phoenix, base, n_requests, args.senders)
                phoenix_note = f"arize-phoenix {version} (its own venv, default SQLite)"
                print("phoenix:", phx, file=sys.stderr, flush=True)
            except (OSError, subprocess.CalledProcessError, RuntimeError) as exc:
                phoenix_note = f"Phoenix could not be run here: {str(exc)[:300]}"
        cal_rate = cal["stored"] / cal["stored_s"]
        refused = sum(n for status, n in cal["statuses"].items() if status != 200)
        lines += ["| server | requests | refused (non-200) | client p95 ms | spans stored | seconds to stored | stored spans/s |",
                  "|---|---:|---:|---:|---:|---:|---:|",
                  f"| calibrate `serve` (waitress, 1 process × 4 threads) | {n_requests:,} | {refused} | {cal['p95_ms']:.0f} | "
                  f"{cal['stored']:,} of {cal['expected']:,} | {cal['stored_s']:.1f} | **{cal_rate:,.0f}** |"]
        if phx is not None:
            phx_rate = phx["stored"] / phx["stored_s"] if phx["stored_s"] > 0 and phx["stored"] > 0 else 0.0
            phx_refused = sum(n for status, n in phx["statuses"].items() if status != 200)
            lines.append(f"| Phoenix (`phoenix serve`) | {n_requests:,} | {phx_refused} ({phx_refused / n_requests:.0%}; "
                         f"{dict(sorted(phx['statuses'].items()))}) | {phx['p95_ms']:.0f} | {phx['stored']:,} of "
                         f"{phx['accepted']:,} accepted | {phx['stored_s']:.1f} | **{phx_rate:,.0f}** |")
            ratio = cal_rate / phx_rate if phx_rate else float("inf")
            lines += ["", f"- stored spans per second, calibrate / Phoenix (same payloads, same run): **{ratio:,.1f}×** "
                          f"(goal ≥ 10×); Phoenix accepted at {phx['accepted'] / phx['sent_s']:,.0f} spans/s over HTTP"]
        lines += ["", f"- Phoenix: {phoenix_note or 'not run (--phoenix empty)'}"]
        if args.stream:
            n_stream = max(1, args.stream // BATCH)
            st = run_stream(folder, base, n_stream, args.senders, args.annotators, args.baseline_seconds, args.split,
                            args.traces_nice)
            rss = [mb for _, mb in st["rss"]]
            warm = rss[len(rss) // 10:] or rss
            st_refused = sum(n for status, n in st["statuses"].items() if status != 200)
            arrangement = ("two processes on one SQLite file: `serve --role traces`"
                           + (f" under `nice -n {args.traces_nice}`" if args.traces_nice else "")
                           + " receives and settles, `serve --role web` answers the experts" if args.split
                           else "one `serve` process (`--role all`) receives, settles and answers the experts")
            lines += ["", f"Streaming {n_stream * BATCH:,} spans with the settler on (TRACES_SETTLE_S=0, every 1 s, rate 0.05) "
                          f"and {args.annotators} experts saving labels; {arrangement}:", "",
                      f"- {st['received']:,} spans staged in {st['sent_s']:.0f} s (**{st['received'] / st['sent_s']:,.0f} spans/s** "
                      f"while settling), {st_refused} requests refused; {st['settled']:,} traces settled, {st['samples']:,} samples",
                      f"- settler: {st['staged_at_end'] if st['staged_at_end'] is not None else '?':,} spans staged when the last "
                      f"request was answered, **{st['staged_left']:,} left** after draining for {st['drain_s']:.1f} s "
                      f"(TRACES_SETTLE_BATCH {os.environ.get('CALIBRATE_TRACES_SETTLE_BATCH', 'default')})",
                      f"- {'traces ' if args.split else ''}server RSS (MB), sampled every second: start {rss[0]:.0f}, after the first tenth {warm[0]:.0f}, "
                      f"max {max(rss):.0f}, end {rss[-1]:.0f} (max − after the first tenth: {max(warm) - warm[0]:+.0f} MB)",
                      f"- label saves meanwhile: {st['saves']:,}, p50 {st['save_p50']:.0f} ms, **p95 {st['save_p95']:.0f} ms** "
                      f"(goal < 200), max {st['save_max']:.0f} ms, errors {st['save_errors']}"
                      + (f", client failures {st['failures']}" if st["failures"] else ""),
                      f"- label saves alone just before, same {'servers' if args.split else 'server'} and run ({args.baseline_seconds:g} s): {st['alone']:,}, "
                      f"p50 {st['alone_p50']:.0f} ms, p95 {st['alone_p95']:.0f} ms"]
    lines += ["", f"- `uptime` after: `{subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}`", ""]
    text = "\n".join(lines)
    print(text)
    if args.record:
        record_section(RESULTS, "OTLP/HTTP receiver benchmark", text)


if __name__ == "__main__":
    main()
