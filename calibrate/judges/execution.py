"""The machinery of a judge run, shared by prompt runs (runner.py) and metric runs (metric_runs.py).

    RunOptions          how a run calls its backend (stored in the run: a resume behaves the same)
    Outcome, Totals     one target's result, ready to store; a run's counters
    Writer              commits outcomes in small BEGIN IMMEDIATE batches with the run's
                        counters and heartbeat (never a transaction across an HTTP call)
    AdaptiveLimit       the concurrency limit that halves on 429 and grows back
    Job, Execution      one call to make; one attempt at a run: calls, retries, budgets
    run_calls           the event loop's side: one httpx client, the workers, the writer
    run_coroutine       run a coroutine from synchronous code (even inside a running loop)

runner.py prepares and executes runs on it; metric_runs.py builds its step jobs on it. Neither
imports the other's internals, so there is no import circle. watch.py (`calibrate watch`) runs
on it too, through three hooks that are off otherwise: Execution.refill (claim the next batch
when the jobs run out), Execution.stop_event (SIGTERM: no call starts after it) and
Writer.release (delete the stored jobs' leases in the transaction that stores them).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import socket
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import Engine
from sqlalchemy import insert as sa_insert
from sqlmodel import Session, select

from calibrate.db import write_session
from calibrate.judges.backends import DEFAULT_MAX_ANSWER_BYTES, Completion, Endpoint, HTTPBackend, build_client
from calibrate.judges.errors import FatalBackendError, RateLimited, RequestRejected, RetryableError, Unreachable
from calibrate.judges.items import Target
from calibrate.judges.parsing import parse_verdict
from calibrate.judges.prices import Price
from calibrate.judges.render import Rendered
from calibrate.models import JudgeRun, ResponseCache, Task, Verdict, utcnow


@dataclass
class RunOptions:
    """How a run calls its backend (all stored in the run, so a resume behaves the same)."""

    concurrency: int = 8
    max_calls: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None  # USD of answered calls (needs a price for the model); those in flight may pass it
    max_attempts: int = 5
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    max_retry_after: float = 120.0
    connect_timeout: float = 5.0
    read_timeout: float = 120.0
    batch_size: int = 25
    flush_interval: float = 0.25
    adaptive: bool = True


# --------------------------------------------------------------------------- outcomes and writing


@dataclass
class Outcome:
    """The result for one target, ready to store."""

    target: Target
    status: str  # ok | unparsed | error
    value: str | None = None
    reason: str = ""
    raw: str = ""
    error: str = ""
    latency_ms: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached: bool = False
    cost: float = 0.0
    cache_key: str | None = None
    cache_text: str | None = None  # set when the answer is new and should be cached
    step_cache: list[CacheEntry] = field(default_factory=list)  # metric runs: new answers of the sample's steps

    def cache_entries(self) -> list[CacheEntry]:
        """Return the new answers this outcome brings to the response cache."""
        own = [CacheEntry(self.cache_key, self.cache_text, self.input_tokens, self.output_tokens)] if self.cache_text is not None else []
        return own + self.step_cache


@dataclass(frozen=True)
class CacheEntry:
    """One new answer for the response cache."""

    key: str
    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass
class Totals:
    """Counters of one run, written to its row with every batch."""

    n_done: int = 0
    n_ok: int = 0
    n_unparsed: int = 0
    n_errors: int = 0
    n_retried_errors: int = 0  # error verdicts of earlier attempts judged again (each counted in n_errors before)
    n_cached: int = 0
    calls: int = 0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0

    def add(self, outcome: Outcome) -> None:
        self.n_done += 1
        if outcome.status == "ok":
            self.n_ok += 1
        elif outcome.status == "unparsed":
            self.n_unparsed += 1
        else:
            self.n_errors += 1
        if outcome.cached:
            self.n_cached += 1
        else:
            self.input_tokens += outcome.input_tokens or 0
            self.output_tokens += outcome.output_tokens or 0
            self.cost += outcome.cost


class Writer:
    """Commit outcomes in small batches (BEGIN IMMEDIATE), with the run's counters and heartbeat."""

    def __init__(self, engine: Engine, run: JudgeRun, task: Task, *, rerun: bool, base: Totals,
                 progress: Callable[[int, int], object] | None = None,
                 apply: Callable[[Session, list[Outcome]], None] | None = None, replace: bool = False,
                 release: Callable[[Session, list[Outcome]], None] | None = None) -> None:
        self.engine = engine
        self.run_id = run.id
        self.judge_id = run.judge_id
        self.task_id = task.id
        self.rerun = rerun
        self.base = base  # what earlier attempts of this run already counted
        self.totals = Totals()
        self.n_total = run.n_total
        self.progress = progress
        self.stop_requested = False
        # The task's apply step (claim extraction: the claims replace the sample's), run in the
        # transaction that stores the outcomes; `replace`: an existing verdict of a pending
        # target is replaced (extraction: an unparsed answer is taken again).
        self.apply = apply
        self.replace = replace
        # `calibrate watch`: frees the batch's leases (judges/watch.py) in the transaction that
        # stores its verdicts, so no other watcher can claim a job between the two.
        self.release = release

    def write(self, outcomes: list[Outcome], *, extra: dict[str, Any] | None = None, cache: list[CacheEntry] = ()) -> None:
        """Store a batch (and `cache`: answers of steps whose sample was not finished); targets that
        gained a usable verdict meanwhile are left alone.

        New verdicts and cache entries go in as one multi-row INSERT each (Core, not ORM
        objects: the writer shares the GIL with the event loop making the calls).
        """
        with write_session(self.engine) as session:
            keys = sorted({o.target.key for o in outcomes})
            # A pairwise target has one verdict per presentation order, a self-consistency run one per
            # sample: (target key, order key, sample index).
            existing = {(v.target_key, v.order_key, v.sample_index): v for v in session.exec(
                select(Verdict).where(Verdict.judge_id == self.judge_id, Verdict.task_id == self.task_id,
                                      Verdict.target_key.in_(keys))).all()} if keys else {}
            cache_rows = new_cache_rows(session, [entry for o in outcomes for entry in o.cache_entries()] + list(cache),
                                        self.backend_name, self.model)
            now = utcnow()
            new_rows, written = [], []
            for outcome in outcomes:
                fields = {"run_id": self.run_id, "value": outcome.value, "status": outcome.status, "reason": outcome.reason,
                          "raw": outcome.raw, "error": outcome.error, "latency_ms": outcome.latency_ms,
                          "input_tokens": outcome.input_tokens, "output_tokens": outcome.output_tokens,
                          "cached": outcome.cached, "created_at": now}
                target = outcome.target
                verdict = existing.get(target.job)
                if verdict is None:
                    new_rows.append({"judge_id": self.judge_id, "task_id": self.task_id, "sample_id": target.sample_id,
                                     **target.attach,
                                     "target_key": target.key, "source": "run",
                                     "order": list(target.order) if target.order is not None else None,
                                     "order_key": target.order_key, "sample_index": target.sample_index, **fields})
                elif verdict.status != "error" and not (self.rerun or self.replace):
                    continue  # judged meanwhile (a doubled run): keep the first, count nothing
                else:
                    if verdict.status == "error" and not self.rerun:
                        self.totals.n_retried_errors += 1  # base counted it as an error, not as done
                    for name, value in fields.items():
                        setattr(verdict, name, value)
                    session.add(verdict)
                self.totals.add(outcome)
                written.append(outcome)
            if cache_rows:
                session.execute(sa_insert(ResponseCache), cache_rows)
            if new_rows:
                session.execute(sa_insert(Verdict), new_rows)
            if self.apply is not None and written:
                session.flush()
                self.apply(session, written)
            if self.release is not None and outcomes:
                self.release(session, outcomes)
            run = session.get(JudgeRun, self.run_id)
            self._store_counters(run, extra)
            session.add(run)
        if self.progress:
            self.progress(min(self.base.n_done + self.totals.n_done, self.n_total), self.n_total)

    backend_name = ""
    model = ""

    def _store_counters(self, run: JudgeRun, extra: dict[str, Any] | None) -> None:
        b, t = self.base, self.totals
        run.n_done = min(b.n_done + t.n_done, run.n_total)
        run.n_errors = b.n_errors - t.n_retried_errors + t.n_errors
        run.n_cached = b.n_cached + t.n_cached
        run.input_tokens = b.input_tokens + t.input_tokens
        run.output_tokens = b.output_tokens + t.output_tokens
        run.cost = b.cost + t.cost
        params = dict(run.params or {})
        params.update(owner_fields())
        params["n_unparsed"] = b.n_unparsed + t.n_unparsed
        params["calls"] = b.calls + t.calls
        params["retries"] = b.retries + t.retries
        if extra:
            params.update(extra)
        self.stop_requested = bool(params.get("stop_requested"))
        run.params = params


def new_cache_rows(session: Session, entries: list[CacheEntry], backend: str, model: str) -> list[dict[str, Any]]:
    """Return the response-cache rows to insert for `entries`: those whose key is not stored yet, each once."""
    keys = [entry.key for entry in entries]
    cached = set(session.exec(select(ResponseCache.key).where(ResponseCache.key.in_(keys))).all()) if keys else set()
    rows, now = [], utcnow()
    for entry in entries:
        if entry.key not in cached:
            cached.add(entry.key)
            rows.append({"key": entry.key, "backend": backend, "model": model, "response": entry.text,
                         "input_tokens": entry.input_tokens, "output_tokens": entry.output_tokens, "created_at": now})
    return rows


class AnswerWriter(Writer):
    """The writer of calls that are not verdicts (the optimiser's instruction rewrites, judges/rewrite.py): it stores
    each new answer in the response cache in small batches, as the run writer does, and keeps the outcomes in memory;
    `on_write(session, totals)` runs in the same transaction (the caller records its counters there) and returns
    whether to stop."""

    def __init__(self, engine: Engine, *, backend_name: str, model: str,
                 on_write: Callable[[Session, Totals], bool] | None = None) -> None:
        self.engine = engine
        self.totals = Totals()
        self.outcomes: list[Outcome] = []
        self.stop_requested = False
        self.progress = None
        self.on_write = on_write
        self.backend_name, self.model = backend_name, model

    def write(self, outcomes: list[Outcome], *, extra: dict[str, Any] | None = None, cache: list[CacheEntry] = ()) -> None:
        with write_session(self.engine) as session:
            rows = new_cache_rows(session, [entry for o in outcomes for entry in o.cache_entries()] + list(cache),
                                  self.backend_name, self.model)
            if rows:
                session.execute(sa_insert(ResponseCache), rows)
            for outcome in outcomes:
                self.totals.add(outcome)
            self.outcomes.extend(outcomes)
            if self.on_write is not None and self.on_write(session, self.totals):
                self.stop_requested = True


# --------------------------------------------------------------------------- concurrency


class AdaptiveLimit:
    """A concurrency limit that halves on 429 (at most once a second) and grows by one after
    `limit` successes in a row, never above the run's --concurrency."""

    def __init__(self, maximum: int, *, adaptive: bool = True) -> None:
        self.maximum = maximum
        self.limit = maximum
        self.adaptive = adaptive
        self.in_flight = 0
        self.successes = 0
        self.last_cut = 0.0
        self.lowest = maximum
        self._changed = asyncio.Condition()

    async def acquire(self) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1

    async def release(self) -> None:
        async with self._changed:
            self.in_flight -= 1
            self._changed.notify_all()

    def rate_limited(self) -> None:
        if not self.adaptive:
            return
        now = time.monotonic()
        if now - self.last_cut >= 1.0:
            self.limit = max(1, self.limit // 2)
            self.lowest = min(self.lowest, self.limit)
            self.last_cut = now
            self.successes = 0

    async def succeeded(self) -> None:
        if not self.adaptive or self.limit >= self.maximum:
            return
        self.successes += 1
        if self.successes >= self.limit:
            self.successes = 0
            async with self._changed:
                self.limit += 1
                self._changed.notify_all()


# --------------------------------------------------------------------------- execution


@dataclass
class Job:
    target: Target
    rendered: Rendered
    cache_key: str | None = None
    send: Callable[[httpx.AsyncClient, Rendered], Awaitable[Any]] | None = None  # instead of the chat call (embeddings)


def cache_key(backend: HTTPBackend, rendered: Rendered, sample_index: int = 0) -> str:
    """Return the response-cache key: backend, base URL, model, parameters, rendered messages, and (self-consistency)
    the sample index, so the K calls on one target are K entries; sample 0's key is the plain call's."""
    blob = json.dumps({"backend": backend.name, "base_url": backend.endpoint.base_url, "model": backend.model,
                       "params": backend.params, "messages": [rendered.system, rendered.user],
                       **({"sample": sample_index} if sample_index else {})},
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class Execution:
    """One attempt at a run: the async part (calls, retries, budget) and its writer."""

    def __init__(self, engine: Engine, run: JudgeRun, task: Task, options: RunOptions, writer: Writer, *,
                 backend: HTTPBackend | None, price: Price | None, sleep: Callable[[float], Awaitable[Any]],
                 rng: random.Random) -> None:
        self.engine = engine
        self.run = run
        self.task = task
        self.options = options
        self.writer = writer
        self.backend = backend
        self.price = price
        self.sleep = sleep
        self.rng = rng
        self.results: asyncio.Queue[Outcome | None] = asyncio.Queue()
        self.fatal: str = ""
        self.stopped: str = ""
        self.succeeded_once = False
        self.limit = AdaptiveLimit(options.concurrency, adaptive=options.adaptive)
        # Tokens of this attempt's answered calls, counted when each call returns, before the next is
        # admitted: the writer's totals lag behind (a batch is written every flush_interval), so a
        # budget read from them could let every item through on a loaded machine.
        self.spent_tokens = 0
        self.spent_cost = 0.0  # the same for the cost (max_cost)
        # `calibrate watch`: called when the jobs run out, it adds the next claimed batch to them
        # (and its cache hits to `results`); False when there is no more work (judges/watch.py).
        self.refill: Callable[[deque[Job]], Awaitable[bool]] | None = None
        # `calibrate watch`: set by SIGTERM / Ctrl+C; no call starts once it is set (those in flight finish).
        self.stop_event: threading.Event | None = None
        self.stop_message = "stopped on request"

    # ---- writer side
    async def write_loop(self) -> None:
        batch: list[Outcome] = []
        deadline = time.monotonic() + self.options.flush_interval
        beat = time.monotonic()
        done = False
        while not done:
            timeout = max(0.0, deadline - time.monotonic())
            try:
                item = await asyncio.wait_for(self.results.get(), timeout)
                if item is None:
                    done = True
                else:
                    batch.append(item)
            except TimeoutError:
                pass
            now = time.monotonic()
            if batch and (len(batch) >= self.options.batch_size or now >= deadline or done):
                await asyncio.to_thread(self.writer.write, batch, extra=None)
                batch, beat = [], now
                if self.writer.stop_requested and not self.stopped:
                    self.stopped = "stopped on request"
            elif not batch and now - beat > 10:
                await asyncio.to_thread(self.writer.write, [], extra=None)  # heartbeat while calls are slow
                beat = now
                if self.writer.stop_requested and not self.stopped:
                    self.stopped = "stopped on request"
            if now >= deadline:
                deadline = now + self.options.flush_interval

    # ---- call side
    def outcome(self, job: Job, completion: Completion, *, cached: bool) -> Outcome:
        parsed = parse_verdict(self.task, completion.text, job.target.order)
        cost = 0.0
        if not cached and self.price is not None:
            cost = self.price.cost(completion.input_tokens or 0, completion.output_tokens or 0, completion.cached_input_tokens)
        return Outcome(job.target, parsed.status, parsed.value, parsed.reason, completion.text, parsed.error,
                       None if cached else completion.latency_ms, completion.input_tokens, completion.output_tokens,
                       cached=cached, cost=cost, cache_key=job.cache_key, cache_text=None if cached else completion.text)

    def budget_left(self) -> bool:
        if self.stop_event is not None and self.stop_event.is_set():
            self.stopped = self.stopped or self.stop_message
            return False
        totals = self.writer.totals
        if self.options.max_calls is not None and totals.calls >= self.options.max_calls:
            self.stopped = self.stopped or f"stopped: budget of {self.options.max_calls} calls reached (--max-calls); run again to continue"
            return False
        if self.options.max_tokens is not None and self.spent_tokens >= self.options.max_tokens:
            self.stopped = self.stopped or f"stopped: budget of {self.options.max_tokens} tokens reached (--max-tokens); run again to continue"
            return False
        if self.options.max_cost is not None and self.spent_cost >= self.options.max_cost:
            self.stopped = self.stopped or f"stopped: budget of ${self.options.max_cost:g} reached (--max-cost); run again to continue"
            return False
        return True

    def delay(self, attempt: int, error: RetryableError) -> float | None:
        """Return how long to wait before the next attempt (None: give up)."""
        cap = min(self.options.backoff_max, self.options.backoff_base * 2 ** (attempt - 1))
        jittered = cap / 2 + self.rng.uniform(0, cap / 2)
        if error.retry_after is not None:
            if error.retry_after > self.options.max_retry_after:
                return None
            return error.retry_after if error.retry_after > 0 else jittered
        return jittered

    async def call(self, job: Job) -> Outcome | None:
        """Judge one job with retries; None when the run stops before it is judged."""
        last = ""
        for attempt in range(1, self.options.max_attempts + 1):
            if self.fatal or self.stopped or not self.budget_left():
                return None
            await self.limit.acquire()
            wait: float | None = 0.0
            try:
                if self.fatal or self.stopped or not self.budget_left():
                    return None
                self.writer.totals.calls += 1
                try:
                    completion = await (job.send or self.backend.complete)(self.client, job.rendered)
                except FatalBackendError as exc:
                    self.fatal = self.fatal or str(exc)
                    return None
                except RequestRejected as exc:
                    return Outcome(job.target, "error", error=str(exc))
                except RetryableError as exc:
                    if isinstance(exc, Unreachable) and not self.succeeded_once:
                        self.fatal = self.fatal or str(exc)
                        return None
                    if isinstance(exc, RateLimited):
                        self.limit.rate_limited()
                    last = str(exc)
                    wait = self.delay(attempt, exc)
                    if wait is None:
                        return Outcome(job.target, "error", error=f"{last} (asked to retry after {exc.retry_after:g} s: too long)")
                else:
                    self.succeeded_once = True
                    self.spent_tokens += (completion.input_tokens or 0) + (getattr(completion, "output_tokens", 0) or 0)
                    await self.limit.succeeded()
                    outcome = self.outcome(job, completion, cached=False)
                    self.spent_cost += outcome.cost
                    return outcome
            finally:
                await self.limit.release()
            if attempt < self.options.max_attempts:
                self.writer.totals.retries += 1
                await self.sleep(wait)
        return Outcome(job.target, "error", error=f"{last} (gave up after {self.options.max_attempts} attempts)")

    async def worker(self, jobs: deque[Job]) -> None:
        while not self.fatal and not self.stopped:
            if not jobs:
                if self.refill is None or not await self.refill(jobs):
                    return
                continue
            job = jobs.popleft()
            outcome = await self.call(job)
            if outcome is not None:
                await self.results.put(outcome)

    async def run_http(self, jobs: deque[Job], client: httpx.AsyncClient) -> None:
        self.client = client
        writer = asyncio.create_task(self.write_loop())
        started = time.perf_counter()
        try:
            if not jobs and self.refill is not None:
                await self.refill(jobs)
            if jobs:
                # The first call goes alone: a bad key, model or URL stops the run here.
                outcome = await self.call(jobs.popleft())
                if outcome is not None:
                    await self.results.put(outcome)
            if (jobs or self.refill is not None) and not self.fatal:
                workers = self.options.concurrency if self.refill is not None else min(self.options.concurrency, len(jobs))
                await asyncio.gather(*(self.worker(jobs) for _ in range(workers)))
        finally:
            await self.results.put(None)
            await writer
            self.call_seconds = time.perf_counter() - started


def run_coroutine(coroutine: Awaitable[Any]) -> Any:
    """Run a coroutine to completion from synchronous code.

    Where this thread already runs an event loop (a notebook, Playwright's sync API),
    `asyncio.run` refuses; the coroutine then gets its own loop in a helper thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(coroutine)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="calibrate-judge-loop")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


async def run_calls(execution: Execution, endpoint: Endpoint, api_key: str | None, options: RunOptions,
                     transport: httpx.AsyncBaseTransport | None, jobs: deque[Job]) -> None:
    client = build_client(endpoint, api_key=api_key, connect_timeout=options.connect_timeout,
                          read_timeout=options.read_timeout, max_connections=options.concurrency, transport=transport,
                          max_answer_bytes=getattr(execution.backend, "max_answer_bytes", DEFAULT_MAX_ANSWER_BYTES))
    async with client:
        await execution.run_http(jobs, client)


def cached_responses(engine: Engine, keys: set[str]) -> dict[str, ResponseCache]:
    """Return the response-cache rows of these keys (in chunks: SQLite limits bound parameters)."""
    ordered = sorted(keys)
    hits: dict[str, ResponseCache] = {}
    with Session(engine) as session:
        for start in range(0, len(ordered), 500):
            for row in session.exec(select(ResponseCache).where(ResponseCache.key.in_(ordered[start:start + 500]))).all():
                hits[row.key] = row
    return hits


def write_in_batches(writer: Writer, outcomes: Iterable[Outcome], size: int) -> None:
    """Write offline outcomes as they are made, `size` at a time, until done or the run is asked to stop."""
    batch: list[Outcome] = []
    for outcome in outcomes:
        batch.append(outcome)
        if len(batch) >= size:
            writer.write(batch)
            batch = []
            if writer.stop_requested:
                return
    if batch:
        writer.write(batch)


def owner_fields() -> dict[str, Any]:
    """Return who runs the run and when it was last seen alive (stored in its params; see runner.run_is_live)."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "heartbeat": datetime.now(UTC).isoformat()}
