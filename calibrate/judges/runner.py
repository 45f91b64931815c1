"""Judge runs: send a prompt version over a dataset's targets and store one verdict per target.

    prepare_run(engine, spec)   checks everything that can be checked offline, creates the
                                judge NAME@N and a JudgeRun (or picks up an interrupted one)
    execute_run(engine, run_id) judges what is still pending: cache first, then HTTP with
                                bounded, adaptive concurrency and retries; commits in batches
    run_judge(engine, spec)     both, for the CLI, the demo and the benchmarks

Guarantees (each tested in tests/judges):

- One verdict per (judge, task, target): the writer checks inside a BEGIN IMMEDIATE
  transaction, so a resumed or doubled run never duplicates one.
- No DB transaction is open during an HTTP call: calls run on the event loop, results go
  to a writer that commits them in small batches from a worker thread.
- A run killed at any point (kill -9) and started again judges only targets without a
  verdict (or whose verdict is an error), and the response cache answers anything that was
  answered and committed: no repeated paid calls for answered items.
- Errors are never cached; unparsed answers are (the call was answered and paid).
- Bad credentials (401/403), an unknown model (404) or an unreachable base URL stop the run
  at the first call (it goes alone, before the others are let through).
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
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

import httpx
from sqlalchemy import Engine
from sqlalchemy import insert as sa_insert
from sqlmodel import Session, func, select

from calibrate.db import write_session
from calibrate.judges.backends import (
    DEFAULT_BASE_URLS,
    DEFAULT_KEY_ENV,
    Completion,
    Endpoint,
    HTTPBackend,
    Redactor,
    build_client,
    make_backend,
    read_api_key,
)
from calibrate.judges.baseline import BaselineJudge, settings_from
from calibrate.judges.errors import (
    FatalBackendError,
    JudgeError,
    PromptError,
    RateLimited,
    RequestRejected,
    RetryableError,
    RunSetupError,
    Unreachable,
)
from calibrate.judges.items import Scope, Target, fewshot_keys, item_for, load_items, select_targets, version_context
from calibrate.judges.parsing import parse_verdict
from calibrate.judges.prices import Price, load_prices, price_for
from calibrate.judges.render import Rendered, Renderer
from calibrate.judges.metrics import is_metric
from calibrate.judges.versions import judge_name, resolve_version
from calibrate.models import Dataset, Judge, JudgeRun, Prompt, PromptVersion, ResponseCache, Task, Verdict, utcnow

LIVE_SECONDS = 120  # a run whose heartbeat is older than this is taken as dead
BACKENDS = ("openai", "anthropic", "baseline")


class NothingToDo(JudgeError):
    """Every target in scope already has a verdict of this judge."""


@dataclass
class RunOptions:
    """How a run calls its backend (all stored in the run, so a resume behaves the same)."""

    concurrency: int = 8
    max_calls: int | None = None
    max_tokens: int | None = None
    max_attempts: int = 5
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    max_retry_after: float = 120.0
    connect_timeout: float = 5.0
    read_timeout: float = 120.0
    batch_size: int = 25
    flush_interval: float = 0.25
    adaptive: bool = True


@dataclass
class RunSpec:
    """What `calibrate judge run` and the Run button ask for (the key is only named, never held)."""

    dataset: str
    prompt: str
    backend: str = "baseline"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    split: str | None = None
    labelled_only: bool = False
    limit: int | None = None
    rerun: bool = False
    options: RunOptions = field(default_factory=RunOptions)


@dataclass
class RunSummary:
    run_id: int
    judge: str
    status: str
    n_total: int
    n_done: int
    n_ok: int
    n_unparsed: int
    n_errors: int
    n_cached: int
    calls: int
    retries: int
    input_tokens: int
    output_tokens: int
    cost: float
    seconds: float
    error: str = ""
    priced: bool = True
    call_seconds: float = 0.0  # from the first HTTP call to the last answer written
    skipped: dict[str, int] = field(default_factory=dict)  # metric runs: samples with nothing to measure, by reason

    def lines(self) -> list[str]:
        """Return what `calibrate judge run` prints."""
        cost = f"${self.cost:.4f}" if self.priced else "cost unknown (no price for the model: see docs/judges.md)"
        out = [
            f"{self.judge}: run {self.run_id} {self.status} — {self.n_done}/{self.n_total} targets judged "
            f"({self.n_ok} verdicts, {self.n_unparsed} unparsed, {self.n_errors} errors, {self.n_cached} from the cache)",
            f"  {self.calls} calls ({self.retries} retries), {self.input_tokens} input + {self.output_tokens} output tokens, "
            f"{cost}, {self.seconds:.1f} s",
        ]
        if self.skipped:
            out.append(f"  {skipped_text(self.skipped)}")
        if self.error:
            out.append(f"  {self.error}")
        return out


def skipped_text(skipped: dict[str, int]) -> str:
    """Return the line saying which samples a metric run skipped and why."""
    reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items()))
    return f"skipped {sum(skipped.values())} samples with nothing to measure (no verdict): {reasons}"


# --------------------------------------------------------------------------- setup


def endpoint_for(spec: RunSpec, version: PromptVersion) -> Endpoint:
    """Return where the run's calls go, checking the backend options."""
    if spec.backend not in BACKENDS:
        raise RunSetupError(f"backend must be one of {', '.join(BACKENDS)}; got {spec.backend!r}")
    if spec.backend == "baseline":
        return Endpoint("baseline", "", "baseline", None)
    model = version.model
    if spec.model and version.model and spec.model != version.model:
        raise RunSetupError(f"version uses model {version.model!r}; save a new version to use {spec.model!r}")
    model = model or (spec.model or "")
    if not model:
        raise RunSetupError("no model: the version has none, give --model")
    base_url = (spec.base_url or DEFAULT_BASE_URLS[spec.backend]).rstrip("/")
    if not base_url.startswith(("http://", "https://")):
        raise RunSetupError(f"--base-url must start with http:// or https://, got {base_url!r}")
    key_env = spec.api_key_env if spec.api_key_env is not None else DEFAULT_KEY_ENV[spec.backend]
    return Endpoint(spec.backend, base_url, model, key_env or None)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _aware(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def run_is_live(run: JudgeRun) -> bool:
    """Return whether a pending or running run still has a process behind it."""
    if run.status not in ("pending", "running"):
        return False
    params = run.params or {}
    beat = params.get("heartbeat")
    try:
        fresh = beat is not None and (_now() - datetime.fromisoformat(beat)).total_seconds() < LIVE_SECONDS
    except ValueError:
        fresh = False
    if not fresh:
        return False
    if params.get("host") == socket.gethostname() and params.get("pid"):
        try:
            os.kill(int(params["pid"]), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
    return True


def _owner() -> dict[str, Any]:
    return {"pid": os.getpid(), "host": socket.gethostname(), "heartbeat": _now().isoformat()}


def prepare_run(engine: Engine, spec: RunSpec) -> int:
    """Check the request, create the judge and a run (or take up an interrupted one); return the run id.

    Raises RunSetupError (or PromptError) with a one-line reason, NothingToDo when every
    target already has a verdict.
    """
    if spec.options.concurrency < 1:
        raise RunSetupError("--concurrency must be at least 1")
    if spec.split not in (None, "train", "dev", "test"):
        raise RunSetupError(f"--split must be train, dev or test; got {spec.split!r}")
    with write_session(engine) as session:
        dataset = session.exec(select(Dataset).where(Dataset.name == spec.dataset)).first()
        if dataset is None:
            names = ", ".join(session.exec(select(Dataset.name).order_by(Dataset.name)).all()) or "none"
            raise RunSetupError(f"unknown dataset {spec.dataset!r} (datasets: {names})")
        prompt, version = resolve_version(session, spec.prompt)
        task = session.get(Task, prompt.task_id)
        endpoint = endpoint_for(spec, version)
        read_api_key(endpoint)  # fail now, not at the first call, when the variable is missing
        if is_metric(task):
            metric_runs.check_metric_setup(task, version, endpoint)
        elif endpoint.backend == "baseline":
            BaselineJudge(task, settings_from(version.params), corpus=[])  # refuses tasks it cannot judge
        scope = Scope(spec.split, spec.labelled_only, spec.limit)
        targets = select_targets(session, dataset, task, scope, exclude=fewshot_keys(session, version))
        if not targets:
            raise RunSetupError(f"no {task.target} of dataset {dataset.name} to judge for task {task.name} with these options")
        skipped: dict[str, int] = {}
        if is_metric(task):
            targets, skipped, _ = metric_runs.measurable(session, task, targets)
            if not targets:
                raise RunSetupError(f"nothing to measure for {task.name} in {dataset.name}: {skipped_text(skipped)}")
        name = judge_name(prompt, version)
        judge = session.exec(select(Judge).where(Judge.name == name)).first()
        if judge is None:
            judge = Judge(name=name, kind="prompt", prompt_version_id=version.id,
                          description=f"runs of prompt {prompt.name} version {version.number}")
            session.add(judge)
            session.flush()
        elif judge.kind != "prompt" or judge.prompt_version_id != version.id:
            raise RunSetupError(f"a judge named {name} already exists and is not a run of this version (imported verdicts?)")
        runs = session.exec(select(JudgeRun).where(JudgeRun.judge_id == judge.id).order_by(JudgeRun.id.desc())).all()
        for run in runs:
            if run.status in ("pending", "running"):
                if run_is_live(run):
                    raise RunSetupError(f"run {run.id} of {name} is still in progress; wait for it or stop it first")
                run.status, run.error = "stopped", "interrupted: its process ended before it finished"
                session.add(run)
        done = _done_keys(session, judge, task, {t.key for t in targets}) if not spec.rerun else set()
        pending = [t for t in targets if t.key not in done]
        if not pending:
            raise NothingToDo(f"nothing to do: all {len(targets)} targets already have verdicts of {name} "
                              "(--rerun judges them again, answered from the cache)")
        settings = {
            "scope": scope.as_dict(), "rerun": spec.rerun, "options": asdict(spec.options), "skipped": skipped,
            "endpoint": {"backend": endpoint.backend, "base_url": endpoint.base_url, "model": endpoint.model,
                         "api_key_env": endpoint.api_key_env},
        }
        same = [r for r in runs if r.dataset_id == dataset.id and r.status in ("stopped", "failed")
                and (r.params or {}).get("scope") == settings["scope"] and (r.params or {}).get("endpoint") == settings["endpoint"]
                and not spec.rerun]
        if same and same[0].id == (runs[0].id if runs else None):
            run = same[0]
            params = dict(run.params or {})
            params.update(settings, **_owner())
            run.params, run.status, run.error, run.finished_at = params, "pending", "", None
        else:
            run = JudgeRun(judge_id=judge.id, dataset_id=dataset.id, status="pending", backend=endpoint.backend,
                           model=endpoint.model, base_url=endpoint.base_url, params={**settings, **_owner()})
        run.n_total = len(targets)
        run.n_done = len(targets) - len(pending)
        session.add(run)
        session.flush()
        return run.id


def _done_keys(session: Session, judge: Judge, task: Task, keys: set[str]) -> set[str]:
    """Return the targets that already have a usable or unparsed verdict (errors are judged again)."""
    rows = session.exec(select(Verdict.target_key, Verdict.status).where(Verdict.judge_id == judge.id, Verdict.task_id == task.id)).all()
    return {key for key, status in rows if status != "error" and key in keys}


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
                 progress: Callable[[int, int], object] | None = None) -> None:
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

    def write(self, outcomes: list[Outcome], *, extra: dict[str, Any] | None = None, cache: list[CacheEntry] = ()) -> None:
        """Store a batch (and `cache`: answers of steps whose sample was not finished); targets that
        gained a usable verdict meanwhile are left alone.

        New verdicts and cache entries go in as one multi-row INSERT each (Core, not ORM
        objects: the writer shares the GIL with the event loop making the calls).
        """
        with write_session(self.engine) as session:
            keys = [o.target.key for o in outcomes]
            existing = {v.target_key: v for v in session.exec(
                select(Verdict).where(Verdict.judge_id == self.judge_id, Verdict.task_id == self.task_id,
                                      Verdict.target_key.in_(keys))).all()} if keys else {}
            entries = [entry for o in outcomes for entry in o.cache_entries()] + list(cache)
            cache_keys = [entry.key for entry in entries]
            cached = set(session.exec(select(ResponseCache.key).where(ResponseCache.key.in_(cache_keys))).all()) if cache_keys else set()
            now = utcnow()
            new_rows, cache_rows = [], []
            for entry in entries:
                if entry.key not in cached:
                    cache_rows.append({"key": entry.key, "backend": self.backend_name, "model": self.model,
                                       "response": entry.text, "input_tokens": entry.input_tokens,
                                       "output_tokens": entry.output_tokens, "created_at": now})
                    cached.add(entry.key)
            for outcome in outcomes:
                fields = {"run_id": self.run_id, "value": outcome.value, "status": outcome.status, "reason": outcome.reason,
                          "raw": outcome.raw, "error": outcome.error, "latency_ms": outcome.latency_ms,
                          "input_tokens": outcome.input_tokens, "output_tokens": outcome.output_tokens,
                          "cached": outcome.cached, "created_at": now}
                verdict = existing.get(outcome.target.key)
                if verdict is None:
                    new_rows.append({"judge_id": self.judge_id, "task_id": self.task_id, "sample_id": outcome.target.sample_id,
                                     "claim_id": outcome.target.claim_id, "context_id": outcome.target.context_id,
                                     "target_key": outcome.target.key, "source": "run", **fields})
                elif verdict.status != "error" and not self.rerun:
                    continue  # judged meanwhile (a doubled run): keep the first, count nothing
                else:
                    if verdict.status == "error" and not self.rerun:
                        self.totals.n_errors -= 1  # an earlier error replaced (base counted it as an error, not as done)
                    for name, value in fields.items():
                        setattr(verdict, name, value)
                    session.add(verdict)
                self.totals.add(outcome)
            if cache_rows:
                session.execute(sa_insert(ResponseCache), cache_rows)
            if new_rows:
                session.execute(sa_insert(Verdict), new_rows)
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
        run.n_errors = b.n_errors + t.n_errors
        run.n_cached = b.n_cached + t.n_cached
        run.input_tokens = b.input_tokens + t.input_tokens
        run.output_tokens = b.output_tokens + t.output_tokens
        run.cost = b.cost + t.cost
        params = dict(run.params or {})
        params.update(_owner())
        params["n_unparsed"] = b.n_unparsed + t.n_unparsed
        params["calls"] = b.calls + t.calls
        params["retries"] = b.retries + t.retries
        if extra:
            params.update(extra)
        self.stop_requested = bool(params.get("stop_requested"))
        run.params = params


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


def cache_key(backend: HTTPBackend, rendered: Rendered) -> str:
    """Return the response-cache key: backend, base URL, model, parameters, rendered messages."""
    blob = json.dumps({"backend": backend.name, "base_url": backend.endpoint.base_url, "model": backend.model,
                       "params": backend.params, "messages": [rendered.system, rendered.user]},
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
            except asyncio.TimeoutError:
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
        parsed = parse_verdict(self.task, completion.text)
        cost = 0.0
        if not cached and self.price is not None:
            cost = self.price.cost(completion.input_tokens or 0, completion.output_tokens or 0, completion.cached_input_tokens)
        return Outcome(job.target, parsed.status, parsed.value, parsed.reason, completion.text, parsed.error,
                       None if cached else completion.latency_ms, completion.input_tokens, completion.output_tokens,
                       cached=cached, cost=cost, cache_key=job.cache_key, cache_text=None if cached else completion.text)

    def budget_left(self) -> bool:
        totals = self.writer.totals
        if self.options.max_calls is not None and totals.calls >= self.options.max_calls:
            self.stopped = self.stopped or f"stopped: budget of {self.options.max_calls} calls reached (--max-calls); run again to continue"
            return False
        used = totals.input_tokens + totals.output_tokens
        if self.options.max_tokens is not None and used >= self.options.max_tokens:
            self.stopped = self.stopped or f"stopped: budget of {self.options.max_tokens} tokens reached (--max-tokens); run again to continue"
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
                    await self.limit.succeeded()
                    return self.outcome(job, completion, cached=False)
            finally:
                await self.limit.release()
            if attempt < self.options.max_attempts:
                self.writer.totals.retries += 1
                await self.sleep(wait)
        return Outcome(job.target, "error", error=f"{last} (gave up after {self.options.max_attempts} attempts)")

    async def worker(self, jobs: deque[Job]) -> None:
        while jobs and not self.fatal and not self.stopped:
            job = jobs.popleft()
            outcome = await self.call(job)
            if outcome is not None:
                await self.results.put(outcome)

    async def run_http(self, jobs: deque[Job], client: httpx.AsyncClient) -> None:
        self.client = client
        writer = asyncio.create_task(self.write_loop())
        started = time.perf_counter()
        try:
            if jobs:
                # The first call goes alone: a bad key, model or URL stops the run here.
                await self.worker(deque([jobs.popleft()]))
            if jobs and not self.fatal:
                await asyncio.gather(*(self.worker(jobs) for _ in range(min(self.options.concurrency, len(jobs)))))
        finally:
            await self.results.put(None)
            await writer
            self.call_seconds = time.perf_counter() - started


def execute_run(engine: Engine, run_id: int, *, transport: httpx.AsyncBaseTransport | None = None,
                prices: dict[str, Price] | None = None, progress: Callable[[int, int], object] | None = None,
                sleep: Callable[[float], Awaitable[Any]] | None = None, seed: int | None = None) -> RunSummary:
    """Judge whatever the run still lacks; return its summary. Never raises for item failures."""
    started = time.perf_counter()
    with Session(engine, expire_on_commit=False) as session:
        run = session.get(JudgeRun, run_id)
        if run is None:
            raise RunSetupError(f"no run {run_id}")
        judge = session.get(Judge, run.judge_id)
        version = session.get(PromptVersion, judge.prompt_version_id)
        prompt = session.get(Prompt, version.prompt_id)
        task = session.get(Task, prompt.task_id)
        dataset = session.get(Dataset, run.dataset_id)
        params = dict(run.params or {})
        options = RunOptions(**params.get("options", {}))
        scope = Scope(**params.get("scope", {}))
        rerun = bool(params.get("rerun"))
        ep = params.get("endpoint", {})
        endpoint = Endpoint(ep.get("backend", "baseline"), ep.get("base_url", ""), ep.get("model", ""), ep.get("api_key_env"))
        targets = select_targets(session, dataset, task, scope, exclude=fewshot_keys(session, version))
        skipped: dict[str, int] = {}
        loaded = None
        if is_metric(task):
            targets, skipped, loaded = metric_runs.measurable(session, task, targets)
        done = set() if rerun else _done_keys(session, judge, task, {t.key for t in targets})
        pending = [t for t in targets if t.key not in done]
        samples = ({t.sample_id: loaded[t.sample_id] for t in pending} if loaded is not None
                   else load_items(session, {t.sample_id for t in pending}))
        context = version_context(session, version, task)
        base = Totals(n_done=len(targets) - len(pending), n_errors=0, n_cached=run.n_cached, input_tokens=run.input_tokens,
                      output_tokens=run.output_tokens, cost=run.cost, calls=int(params.get("calls", 0)),
                      retries=int(params.get("retries", 0)), n_unparsed=int(params.get("n_unparsed", 0)))
        base.n_errors = session.exec(select(func.count()).select_from(Verdict).where(
            Verdict.judge_id == judge.id, Verdict.status == "error", Verdict.target_key.in_([t.key for t in targets]))).one() if not rerun else 0
        run_name = judge.name
    run.n_total = len(targets)
    writer = Writer(engine, run, task, rerun=rerun, base=base, progress=progress)
    writer.backend_name, writer.model = endpoint.backend, endpoint.model
    _mark(engine, run_id, status="running", n_total=len(targets), n_done=base.n_done,
          attempts=int(params.get("attempts", 0)) + 1)
    status, error = "done", ""
    priced = True
    call_seconds = 0.0
    try:
        if is_metric(task):
            status, error, priced, call_seconds = metric_runs.run_metric(
                engine, run, writer, task, version, context, endpoint, samples, pending, options,
                transport=transport, prices=prices, sleep=sleep, seed=seed)
        elif endpoint.backend == "baseline":
            _run_baseline(writer, task, version, samples, pending, options)
        else:
            api_key = read_api_key(endpoint)
            redact = Redactor(api_key)
            backend = make_backend(endpoint, version.params, redact=redact)
            table = prices if prices is not None else load_prices()
            price = price_for(table, endpoint.model)
            priced = price is not None
            renderer = Renderer(version.system, version.template, context)
            jobs = []
            for target in pending:
                rendered = renderer.render(item_for(target, samples))
                jobs.append(Job(target, rendered, cache_key(backend, rendered)))
            jobs = _answer_from_cache(engine, writer, task, jobs, options)
            execution = Execution(engine, run, task, options, writer, backend=backend, price=price,
                                  sleep=sleep or asyncio.sleep, rng=random.Random(seed))
            run_coroutine(_run_async(execution, endpoint, api_key, options, transport, deque(jobs)))
            call_seconds = getattr(execution, "call_seconds", 0.0)
            if execution.fatal:
                status, error = "failed", redact(execution.fatal)
            elif execution.stopped:
                status, error = "stopped", execution.stopped
    except (JudgeError, PromptError) as exc:
        status, error = "failed", str(exc)
    except BaseException as exc:  # noqa: BLE001 - Ctrl+C or a bug: record it, then let it go on
        _finish(engine, run_id, "stopped" if isinstance(exc, KeyboardInterrupt) else "failed",
                "interrupted" if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {exc}", priced)
        raise
    if status == "done":
        still = len(pending) - writer.totals.n_done
        if still > 0:
            status, error = "stopped", f"{still} targets not judged; run again to continue"
    _finish(engine, run_id, status, error, priced)
    with Session(engine) as session:
        final = session.get(JudgeRun, run_id)
        t = writer.totals
        return RunSummary(run_id, run_name, final.status, final.n_total, final.n_done, t.n_ok, t.n_unparsed, t.n_errors,
                          t.n_cached, t.calls, t.retries, t.input_tokens, t.output_tokens, t.cost,
                          time.perf_counter() - started, final.error, priced, call_seconds, skipped)


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
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller below
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="calibrate-judge-loop")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


async def _run_async(execution: Execution, endpoint: Endpoint, api_key: str | None, options: RunOptions,
                     transport: httpx.AsyncBaseTransport | None, jobs: deque[Job]) -> None:
    client = build_client(endpoint, api_key=api_key, connect_timeout=options.connect_timeout,
                          read_timeout=options.read_timeout, max_connections=options.concurrency, transport=transport)
    async with client:
        await execution.run_http(jobs, client)


def _answer_from_cache(engine: Engine, writer: Writer, task: Task, jobs: list[Job], options: RunOptions) -> list[Job]:
    """Store verdicts for every job the cache answers (no HTTP); return the jobs left to call."""
    hits = _cached_responses(engine, {job.cache_key for job in jobs})
    left, batch = [], []
    for job in jobs:
        row = hits.get(job.cache_key)
        if row is None:
            left.append(job)
            continue
        parsed = parse_verdict(task, row.response)
        batch.append(Outcome(job.target, parsed.status, parsed.value, parsed.reason, row.response, parsed.error,
                             None, row.input_tokens, row.output_tokens, cached=True, cache_key=job.cache_key))
        if len(batch) >= 500:
            writer.write(batch)
            batch = []
    if batch:
        writer.write(batch)
    return left


def _cached_responses(engine: Engine, keys: set[str]) -> dict[str, ResponseCache]:
    """Return the response-cache rows of these keys (in chunks: SQLite limits bound parameters)."""
    ordered = sorted(keys)
    hits: dict[str, ResponseCache] = {}
    with Session(engine) as session:
        for start in range(0, len(ordered), 500):
            for row in session.exec(select(ResponseCache).where(ResponseCache.key.in_(ordered[start:start + 500]))).all():
                hits[row.key] = row
    return hits


def _run_baseline(writer: Writer, task: Task, version: PromptVersion, samples: dict[int, dict[str, Any]],
                  pending: list[Target], options: RunOptions) -> None:
    corpus = [item["question"] for item in samples.values()] + [c["text"] for item in samples.values() for c in item["contexts"]]
    judge = BaselineJudge(task, settings_from(version.params), corpus=corpus)

    def outcomes() -> Iterator[Outcome]:
        for target in pending:
            started = time.perf_counter()
            raw = judge.answer(item_for(target, samples))
            parsed = parse_verdict(task, raw)
            yield Outcome(target, parsed.status, parsed.value, parsed.reason, raw, parsed.error,
                          (time.perf_counter() - started) * 1000, 0, 0)

    _write_in_batches(writer, outcomes(), max(options.batch_size, 50))


def _write_in_batches(writer: Writer, outcomes: Iterable[Outcome], size: int) -> None:
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


def _mark(engine: Engine, run_id: int, *, status: str, n_total: int, n_done: int, attempts: int) -> None:
    with write_session(engine) as session:
        run = session.get(JudgeRun, run_id)
        run.status, run.n_total, run.n_done, run.error = status, n_total, n_done, ""
        run.started_at = run.started_at or utcnow()
        run.finished_at = None
        params = dict(run.params or {})
        params.update(_owner(), attempts=attempts, stop_requested=False)
        run.params = params
        session.add(run)


def _finish(engine: Engine, run_id: int, status: str, error: str, priced: bool) -> None:
    with write_session(engine) as session:
        run = session.get(JudgeRun, run_id)
        run.status, run.error, run.finished_at = status, error[:2000], utcnow()
        params = dict(run.params or {})
        params["priced"] = priced
        run.params = params
        session.add(run)


def request_stop(session: Session, run: JudgeRun) -> None:
    """Ask a running run to stop after its current batch (the caller commits)."""
    params = dict(run.params or {})
    params["stop_requested"] = True
    run.params = params
    session.add(run)


def run_judge(engine: Engine, spec: RunSpec, **kwargs: Any) -> RunSummary:
    """Prepare and execute a run (what `calibrate judge run` does)."""
    run_id = prepare_run(engine, spec)
    return execute_run(engine, run_id, **kwargs)


from calibrate.judges import metric_runs  # noqa: E402  (it builds on this module's Execution, Writer and Job)
