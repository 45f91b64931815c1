"""`calibrate watch`: judge a dataset's targets as they arrive, with any number of watchers sharing the work.

    WatchSpec                what the command asks for: a judge run's fields, the extraction, the pace
    Watcher(engine, spec)    one watcher: checks the request, then `passes(stop)` yields one
                             PassSummary per pass until --once, a stop request or a spent budget
    enqueue / claim / renew / release_held / free_leases
                             the lease table's steps (models.WatchLease), public for the tests

A pass looks at the dataset as it is now: every target of the task (pairwise: every target and
presentation order) with no verdict of the pinned version — an `error` verdict is taken again,
as by `judge run` — gets a lease row (`enqueue`). Then the watcher claims rows in small batches
(`claim`: as many as --concurrency, in a write session as every write: db.write_session, whose
lock makes claims take turns; `FOR UPDATE SKIP LOCKED` stays for a row a writer holds), judges
them through the runner's own machinery (execution.py: the response cache, retries, budgets,
adaptive concurrency, per-item errors) and deletes each row in the transaction
that stores its verdict (the Writer's `release` hook), claiming the next batch as the workers run
out. A claimed row is held until `expires`; the watcher renews its rows every third of the lease
while they are in flight, so only a dead watcher's rows expire, and any watcher takes those over.
A claim skips a row whose job gained a verdict meanwhile, so a job is sent twice only when its
watcher died with the call in flight (or stalled past its lease).

Each pass that claims something is one JudgeRun (one per watcher and pass): its verdicts carry
its id, its counters and cost are that pass's, and its status says how the pass ended (`done`,
`stopped` by a budget, a stop request or SIGTERM, `failed` when the endpoint refused). A killed
watcher's run is settled `failed` like any dead run (runner.settle_dead_runs).

A metric version (faithfulness, answer relevancy, context precision and recall) is watched with
metric_runs' own pieces: a job is a sample (its samples with nothing to measure are skipped and
counted, as by `judge run`), each claimed batch's steps are rendered, read from the response cache
and called by the same MetricExecution, and each sample's verdict is the one `judge run` would
write. The versions whose scores are fitted on the samples judged together (metric_runs.fitted_part:
answer relevancy's TF-IDF embedder, the embedding leakage guard, the baseline's context relevance)
are refused with a coded reason: a watcher judges whatever batch it claimed, so they could not equal
`judge run`'s.

A job whose call failed (an `error` verdict: a render refused every time, an answer the
endpoint rejects) is backed off: after k failures in a row it sits out the next
min(2^(k-1), BACKOFF_MAX_PASSES) - 1 passes, so it is tried again after 1, 2, 4 … 32 passes
instead of every pass; each pass counts the jobs it left out (`backed_off`). The count lives in
the watcher (a restarted watcher tries each job once more); a success forgets it.

With an extraction version (`--extract E@V`), each pass first extracts the claims of the answers
whose claims came from the sentence segmenter (imported without claims), through the same leases
and the extraction's apply step (extraction.py); a claim task then judges those answers once they
carry the extraction's claims (an answer whose extraction failed is taken again next pass).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from sqlalchemy import Engine, delete, exists, text, update
from sqlmodel import Session, col, select

from calibrate import lookup
from calibrate.claimsets import base_source, source_counts
from calibrate.db import dialect_insert, is_sqlite, write_session
from calibrate.judged import judging
from calibrate.judges import extraction, metric_runs
from calibrate.judges.backends import Endpoint, Redactor, make_backend, read_api_key
from calibrate.judges.baseline import BaselineJudge, settings_from
from calibrate.judges.errors import JudgeError, PromptError, RenderError, RunSetupError
from calibrate.judges.execution import (
    Execution,
    Job,
    Outcome,
    RunOptions,
    Totals,
    Writer,
    cache_key,
    owner_fields,
    run_calls,
    run_coroutine,
    write_in_batches,
)
from calibrate.judges.items import Scope, Target, fewshot_keys, item_for, load_items, select_targets, version_context
from calibrate.judges.jobs import task_jobs
from calibrate.judges.parsing import parse_verdict
from calibrate.judges.prices import Price, load_prices, price_for
from calibrate.judges.render import Renderer
from calibrate.judges.runner import (
    CallSpec,
    RunSummary,
    check_endpoint,
    done_keys,
    endpoint_for,
    judge_for,
    skipped_text,
    split_cached,
)
from calibrate.judges.sandbox import DEFAULT_LIMITS, Limits
from calibrate.judges.versions import resolve_version
from calibrate.models import SEGMENTER, Dataset, Judge, JudgeRun, PromptVersion, Sample, Task, Verdict, WatchLease, utcnow
from calibrate.reasons import Reason

DEFAULT_EVERY = 30.0
DEFAULT_LEASE = 60.0
BACKOFF_MAX_PASSES = 32  # a job failing pass after pass is tried again at most every 32 passes (module docstring)


@dataclass
class WatchSpec(CallSpec):
    """What `calibrate watch` asks for: a run's call spec (its options' max_calls and max_tokens are the watcher's
    whole life's), and the pace."""

    extract: str | None = None  # NAME@V of a claim_extraction version, run first on answers without claims
    every: float = DEFAULT_EVERY  # seconds between passes
    once: bool = False
    lease: float = DEFAULT_LEASE  # seconds a claimed job stays this watcher's without a renewal
    batch: int | None = None  # jobs per claim (default: --concurrency)


@dataclass
class PassSummary:
    """One pass: what each version's run did (none when there was nothing to claim)."""

    number: int
    runs: list[RunSummary] = field(default_factory=list)
    pending: int = 0  # jobs without a verdict when the pass looked (its own and other watchers')
    stopped: str = ""  # why the watcher ends after this pass (its budget is spent), else ""
    failed: str = ""  # why a run of the pass failed (the endpoint refused: bad key, unknown model, unreachable)
    skipped: dict[str, int] = field(default_factory=dict)  # metric judges: samples with nothing to measure, by reason
    backed_off: int = 0  # pending jobs left out of this pass: they failed in the passes before (module docstring)

    def lines(self) -> list[str]:
        """Return what `calibrate watch` prints for the pass."""
        waiting = [f"  {self.backed_off} jobs that failed before are backed off (tried again in a later pass)"] \
            if self.backed_off else []
        if not self.runs:
            first = (f"pass {self.number}: nothing to judge ({self.pending} pending jobs held by other watchers)"
                     if self.pending > self.backed_off else f"pass {self.number}: nothing to judge")
            return [first] + ([f"  {skipped_text(self.skipped)}"] if self.skipped else []) + waiting
        out = []
        for summary in self.runs:
            first, *rest = summary.lines()
            out += [f"pass {self.number}: {first}", *rest]
        return out + waiting


# --------------------------------------------------------------------------- the lease table


def owner_token() -> str:
    """Return a new watcher's owner name: host, pid and a random token (a pid is reused, a token is not)."""
    fields = owner_fields()
    return f"{fields['host']}:{fields['pid']}:{uuid.uuid4().hex[:8]}"[:200]


def clock(session: Session) -> float:
    """Return now in seconds since the epoch on the database's clock (PostgreSQL's), so watchers on
    several machines agree on when a lease expires; SQLite's is this machine's."""
    if is_sqlite(session.get_bind()):
        return time.time()
    return float(session.execute(text("SELECT extract(epoch FROM clock_timestamp())")).scalar_one())


def _done_statuses(extracting: bool) -> tuple[str, ...]:
    # An extraction's unparsed answer is taken again (from the cache); an error verdict always is.
    return ("ok",) if extracting else ("ok", "unparsed")


def lease_key(target: Target) -> tuple[str, str]:
    """Return the job a lease row stands for: (target, order). A watcher makes one call per job (sample 0; self-consistency's
    `--samples K` is `judge run`'s), so a lease never needs the sample index that `Target.job` carries."""
    return target.key, target.order_key


def enqueue(engine: Engine, judge: Judge, task: Task, dataset: Dataset, jobs: list[Target], *, extracting: bool = False) -> int:
    """Add a lease row for each pending job that has none; drop rows of jobs judged meanwhile. Return rows added.

    `jobs` was read before this transaction: a job judged (and its row deleted) by another watcher since
    then gets a row again here, so the rows of judged jobs are dropped after the insert, in the same
    transaction (a row a live watcher holds is its own to delete).
    """
    done = _done_statuses(extracting)
    with write_session(engine) as session:
        have = set(session.execute(select(WatchLease.target_key, WatchLease.order_key).where(
            WatchLease.judge_id == judge.id, WatchLease.task_id == task.id)).all())
        rows = [{"judge_id": judge.id, "task_id": task.id, "dataset_id": dataset.id, "sample_id": t.sample_id,
                 "target_key": t.key, "order_key": t.order_key, "owner": "", "expires": 0.0, "created_at": utcnow()}
                for t in jobs if lease_key(t) not in have]
        for start in range(0, len(rows), 500):  # a job another watcher added meanwhile is left alone
            session.execute(dialect_insert(engine, WatchLease.__table__).on_conflict_do_nothing(
                index_elements=["judge_id", "task_id", "target_key", "order_key"]), rows[start:start + 500])
        session.execute(delete(WatchLease).where(
            WatchLease.judge_id == judge.id, WatchLease.task_id == task.id, WatchLease.expires < clock(session),
            exists().where(Verdict.judge_id == WatchLease.judge_id, Verdict.task_id == WatchLease.task_id,
                           Verdict.target_key == WatchLease.target_key, Verdict.order_key == WatchLease.order_key,
                           col(Verdict.status).in_(done))))
    return len(rows)


def claim(engine: Engine, judge_id: int, task_id: int, owner: str, n: int, lease: float, *,
          extracting: bool = False) -> list[tuple[int, str, str]]:
    """Claim up to n free or expired jobs that still have no verdict; return their (lease id, target key, order key)."""
    done = _done_statuses(extracting)
    with write_session(engine) as session:
        now = clock(session)
        picked = (select(WatchLease.id, WatchLease.target_key, WatchLease.order_key)
                  .where(WatchLease.judge_id == judge_id, WatchLease.task_id == task_id, WatchLease.expires < now,
                         ~exists().where(Verdict.judge_id == WatchLease.judge_id, Verdict.task_id == WatchLease.task_id,
                                         Verdict.target_key == WatchLease.target_key,
                                         Verdict.order_key == WatchLease.order_key, col(Verdict.status).in_(done)))
                  .order_by(WatchLease.id).limit(n).with_for_update(skip_locked=True, of=WatchLease))
        rows = [tuple(row) for row in session.execute(picked).all()]
        if rows:
            session.execute(update(WatchLease).where(col(WatchLease.id).in_([row[0] for row in rows]))
                            .values(owner=owner, expires=now + lease))
    return rows


def renew(engine: Engine, owner: str, lease: float) -> None:
    """Extend every lease this watcher holds (its calls are still in flight)."""
    with write_session(engine) as session:
        session.execute(update(WatchLease).where(WatchLease.owner == owner, WatchLease.expires > 0)
                        .values(expires=clock(session) + lease))


def free_leases(engine: Engine, owner: str) -> None:
    """Give back the jobs this watcher claimed but did not judge (a stop, a budget): others take them at once."""
    with write_session(engine) as session:
        session.execute(update(WatchLease).where(WatchLease.owner == owner).values(owner="", expires=0.0))


def release_held(session: Session, lease_ids: list[int]) -> None:
    """Delete these lease rows (the caller stores their verdicts in the same transaction)."""
    for start in range(0, len(lease_ids), 500):
        session.execute(delete(WatchLease).where(col(WatchLease.id).in_(lease_ids[start:start + 500])))


# --------------------------------------------------------------------------- one version's pass


@dataclass
class _Version:
    """A version the watcher runs, resolved once: prompt, task, judge, endpoint."""

    ref: str
    version: PromptVersion
    task: Task
    judge_id: int
    judge: str
    endpoint: Endpoint
    extracting: bool


class Watcher:
    """One watcher process: `passes(stop)` judges what is pending, pass after pass."""

    def __init__(self, engine: Engine, spec: WatchSpec, *, prices: dict[str, Price] | None = None,
                 limits: Limits = DEFAULT_LIMITS, transport: Any = None, seed: int | None = None) -> None:
        self.engine = engine
        self.spec = spec
        self.prices = prices if prices is not None else load_prices()
        self.limits = limits
        self.transport = transport
        self.seed = seed
        self.owner = owner_token()
        self.calls = 0  # this watcher's calls and tokens so far: the budgets are its whole life's
        self.tokens = 0
        self.number = 0  # the pass under way
        # (judge, target key, order key) → [failures in a row, the first pass it may be tried again]
        self.failing: dict[tuple[int, str, str], list[int]] = {}
        self.check()

    # ---- setup
    def check(self) -> None:
        """Refuse what cannot work before any pass (one-line errors, as `judge run`)."""
        spec = self.spec
        if spec.options.concurrency < 1:
            raise RunSetupError("--concurrency must be at least 1")
        if spec.every <= 0 or spec.lease <= 0:
            raise RunSetupError("--every and --lease must be more than 0 seconds")
        with write_session(self.engine) as session:
            self.dataset_id = lookup.dataset(session, spec.dataset).id
            self.main = self._resolve(session, spec.prompt, extracting=False)
            self.extract = self._resolve(session, spec.extract, extracting=True) if spec.extract else None

    def _resolve(self, session: Session, ref: str, *, extracting: bool) -> _Version:
        prompt, version = resolve_version(session, ref)
        task = session.get(Task, prompt.task_id)
        if extracting and not judging(task).kind.extraction:
            raise RunSetupError(f"--extract {ref} is a prompt of task {task.name}: it needs a prompt of task claim_extraction")
        if not extracting and judging(task).kind.extraction:
            raise RunSetupError(f"{ref} extracts claims: give it as --extract, with the prompt that judges the claims as --prompt")
        endpoint = endpoint_for(self.spec, version)
        check_endpoint(task, version, endpoint)
        part = metric_runs.fitted_part(task, version, endpoint) if judging(task).metric else None
        if part is not None:  # its scores depend on the samples judged together: never equal to `judge run`'s
            raise RunSetupError(Reason(f"watch_metric_{part}", ref=ref, task=task.name))
        judge = judge_for(session, prompt, version)
        return _Version(ref, version, task, judge.id, judge.name, endpoint, extracting)

    # ---- passes
    def passes(self, stop: threading.Event | None = None) -> Iterator[PassSummary]:
        """Yield one PassSummary per pass: until --once, `stop` is set, or the budget is spent."""
        stop = stop or threading.Event()
        number = 0
        while not stop.is_set():
            number += 1
            summary = self.one_pass(number, stop)
            yield summary
            if self.spec.once or summary.stopped or stop.is_set():
                return
            stop.wait(self.spec.every)

    def one_pass(self, number: int, stop: threading.Event) -> PassSummary:
        """Judge what is pending now: the extraction first (with --extract), then the prompt version."""
        summary = PassSummary(number)
        self.number = number
        waiting: set[int] = set()
        for current in ([self.extract] if self.extract else []) + [self.main]:
            if stop.is_set():
                break
            skipped: dict[str, int] = {}
            with Session(self.engine, expire_on_commit=False) as session:
                jobs, _ = self._pending(session, current, waiting, skipped)
            summary.pending += len(jobs)
            due = [t for t in jobs if self.failing.get((current.judge_id, *lease_key(t)), (0, 0))[1] <= number]
            summary.backed_off += len(jobs) - len(due)
            jobs = due
            if not current.extracting:
                summary.skipped = skipped
            run = self._version_pass(current, jobs, stop, skipped) if jobs else None
            if current.extracting:  # answers still without the extraction's claims are not judged on the segmenter's
                with Session(self.engine, expire_on_commit=False) as session:
                    _, waiting = self._pending(session, current, set())
            if run is None:
                continue
            summary.runs.append(run)
            if run.status == "failed":  # the next pass tries again: an endpoint that was down may be back
                summary.failed = run.error
                break
            if run.status == "stopped" and self._budget_spent():
                summary.stopped = run.error
                break
        return summary

    def _budget_spent(self) -> bool:
        options = self.spec.options
        return ((options.max_calls is not None and self.calls >= options.max_calls)
                or (options.max_tokens is not None and self.tokens >= options.max_tokens))

    def _pending(self, session: Session, current: _Version, waiting: set[int],
                 skipped: dict[str, int] | None = None) -> tuple[list[Target], set[int]]:
        """Return the version's jobs without a verdict (and, for an extraction, the samples it has still to do).

        A metric version's samples with nothing to measure are left out, as by `judge run`, and counted by
        reason in `skipped` (they are looked at again every pass: an answer may gain claims or contexts).
        """
        dataset = session.get(Dataset, self.dataset_id)
        judge = session.get(Judge, current.judge_id)
        targets = select_targets(session, dataset, current.task, Scope(), exclude=fewshot_keys(session, current.version))
        if current.extracting:
            sources = dict(session.exec(select(Sample.id, Sample.claim_source).where(
                Sample.dataset_id == dataset.id)).all())
            targets = [t for t in targets if base_source(sources.get(t.sample_id, "")) in (SEGMENTER, current.judge)]
            targets, _ = extraction.eligible(session, targets, force=False)
            done = {(key, "", 0) for key in extraction.applied_keys(session, judge, targets)}
            pending = [t for t in targets if t.job not in done]
            return pending, {t.sample_id for t in pending}

        def keep(jobs: list[Target]) -> list[Target]:  # not waiting for claims, not judged
            jobs = [t for t in jobs if t.sample_id not in waiting] if waiting else jobs
            done = done_keys(session, judge, current.task, {t.key for t in jobs})
            return [t for t in jobs if t.job not in done]

        jobs = task_jobs(session, current.task, targets, keep=keep)
        pending = jobs.targets
        if skipped is not None:
            skipped.update(jobs.skipped)
        return pending, set()

    def _version_pass(self, current: _Version, jobs: list[Target], stop: threading.Event,
                      skipped: dict[str, int]) -> RunSummary | None:
        """Enqueue the jobs, claim and judge them batch by batch in one run; None when another watcher holds them all."""
        with Session(self.engine, expire_on_commit=False) as session:
            judge = session.get(Judge, current.judge_id)
            dataset = session.get(Dataset, self.dataset_id)
        enqueue(self.engine, judge, current.task, dataset, jobs, extracting=current.extracting)
        options = self._pass_options()
        size = self.spec.batch or max(options.concurrency, 1)
        pass_ = _Pass(self, current, {lease_key(t): t for t in jobs}, size)
        first = pass_.claim_next()
        if not first:
            return None
        started = time.perf_counter()
        run_id = pass_.run_id = self._new_run(current, options, pass_.claimed, skipped)
        with Session(self.engine, expire_on_commit=False) as session:
            run = session.get(JudgeRun, run_id)
        apply = extraction.Applier(current.judge, force=False) if current.extracting else None
        writer = Writer(self.engine, run, current.task, rerun=False, base=Totals(), apply=apply,
                        replace=apply is not None, release=pass_.release)
        writer.backend_name, writer.model = current.endpoint.backend, current.endpoint.model
        pass_.writer = writer
        status, error, priced, call_seconds = "done", "", True, 0.0
        try:
            if judging(current.task).metric:
                status, error, priced, call_seconds = pass_.run_metric(first, options, stop)
            elif current.endpoint.backend == "baseline":
                pass_.run_baseline(first, options, stop, pass_.baseline_outcomes)
                if stop.is_set():
                    status, error = "stopped", STOPPED
            else:
                status, error, priced, call_seconds = pass_.run_http(first, options, stop)
        except (JudgeError, PromptError) as exc:
            status, error = "failed", str(exc)
        finally:
            free_leases(self.engine, self.owner)
        self.calls += writer.totals.calls
        self.tokens += writer.totals.input_tokens + writer.totals.output_tokens
        with write_session(self.engine) as session:
            row = session.get(JudgeRun, run_id)
            row.n_total = pass_.claimed
            row.n_done = min(row.n_done, row.n_total)
            row.status, row.error, row.finished_at = status, error[:2000], utcnow()
            row.params = {**(row.params or {}), "priced": priced}
            session.add(row)
        t = writer.totals
        return RunSummary(run_id, current.judge, status, pass_.claimed, t.n_done, t.n_ok, t.n_unparsed, t.n_errors,
                          t.n_cached, t.calls, t.retries, t.input_tokens, t.output_tokens, t.cost,
                          time.perf_counter() - started, error, priced, call_seconds, dict(skipped))

    def _pass_options(self) -> RunOptions:
        """Return the run options of the next pass: the budgets less what earlier passes spent."""
        options = self.spec.options
        return replace(options, max_calls=None if options.max_calls is None else max(options.max_calls - self.calls, 0),
                       max_tokens=None if options.max_tokens is None else max(options.max_tokens - self.tokens, 0))

    def _new_run(self, current: _Version, options: RunOptions, claimed: int, skipped: dict[str, int]) -> int:
        ep = current.endpoint
        with write_session(self.engine) as session:
            # "watch" in the scope: `judge run` never takes a watcher's run up as its own (prepare_run compares scopes).
            params = {"scope": {**Scope().as_dict(), "watch": True}, "rerun": False, "options": asdict(options),
                      "skipped": dict(skipped),
                      "endpoint": {"backend": ep.backend, "base_url": ep.base_url, "model": ep.model,
                                   "api_key_env": ep.api_key_env},
                      "watch": {"owner": self.owner, "every": self.spec.every, "lease": self.spec.lease},
                      **owner_fields()}
            if judging(current.task).reads_claims:
                samples = session.exec(select(Sample.id).where(Sample.dataset_id == self.dataset_id)).all()
                params["claim_sources"] = source_counts(session, set(samples))
            run = JudgeRun(judge_id=current.judge_id, dataset_id=self.dataset_id, status="running", backend=ep.backend,
                           model=ep.model, base_url=ep.base_url, params=params, started_at=utcnow(), n_total=claimed)
            session.add(run)
            session.flush()
            return run.id


STOPPED = "stopped: the watcher was asked to stop (SIGTERM or Ctrl+C); the calls in flight were written"


class _Pass:
    """One version's pass of one watcher: the claimed jobs, rendered and fed to the run's workers."""

    def __init__(self, watcher: Watcher, current: _Version, known: dict[tuple[str, str], Target], size: int) -> None:
        self.watcher = watcher
        self.current = current
        self.known = known
        self.size = size
        self.held: dict[tuple[str, str], int] = {}  # job → lease id, until its verdict is written
        self.claimed = 0
        self.writer: Writer | None = None
        self.run_id: int | None = None
        self.exhausted = False

    def claim_next(self) -> list[Target]:
        """Claim the next batch; return its targets (a lease whose target is gone — a retired claim — is dropped)."""
        w = self.watcher
        while True:
            rows = claim(w.engine, self.current.judge_id, self.current.task.id, w.owner, self.size, w.spec.lease,
                         extracting=self.current.extracting)
            if not rows:
                self.exhausted = True
                return []
            unknown = [row for row in rows if (row[1], row[2]) not in self.known]
            if unknown:  # another watcher saw samples this one has not: look again
                with Session(w.engine, expire_on_commit=False) as session:
                    jobs, _ = w._pending(session, self.current, set())
                self.known.update({lease_key(t): t for t in jobs})
                gone = [row[0] for row in unknown if (row[1], row[2]) not in self.known]
                if gone:
                    with write_session(w.engine) as session:
                        release_held(session, gone)
            out = []
            for lease_id, key, order_key in rows:
                target = self.known.get((key, order_key))
                if target is not None:
                    self.held[lease_key(target)] = lease_id
                    out.append(target)
            self.claimed += len(out)
            if out and self.run_id is not None:  # the run's n_total: the jobs its pass claimed so far
                with write_session(w.engine) as session:
                    session.execute(update(JudgeRun).where(JudgeRun.id == self.run_id).values(n_total=self.claimed))
            if out:
                return out

    def release(self, session: Session, outcomes: list[Outcome]) -> None:
        """The writer's hook: delete the leases of the jobs it stores (in its transaction); count the failed ones."""
        ids = [self.held.pop(lease_key(o.target)) for o in outcomes if lease_key(o.target) in self.held]
        release_held(session, ids)
        done, w = _done_statuses(self.current.extracting), self.watcher
        for outcome in outcomes:
            key = (self.current.judge_id, *lease_key(outcome.target))
            if outcome.status in done:
                w.failing.pop(key, None)
                continue
            failures = w.failing.get(key, [0, 0])[0] + 1
            w.failing[key] = [failures, w.number + min(2 ** (failures - 1), BACKOFF_MAX_PASSES)]

    # ---- offline
    def run_baseline(self, first: list[Target], options: RunOptions, stop: threading.Event,
                     outcomes: Callable[[list[Target], dict[int, dict[str, Any]]], Iterator[Outcome]]) -> None:
        """Judge batch after batch offline: `outcomes(batch, samples)` answers a claimed batch."""
        batch = first
        while batch and not stop.is_set():
            with Session(self.watcher.engine) as session:
                samples = load_items(session, {t.sample_id for t in batch})
            write_in_batches(self.writer, outcomes(batch, samples), max(options.batch_size, 50))
            batch = self.claim_next()

    def baseline_outcomes(self, batch: list[Target], samples: dict[int, dict[str, Any]]) -> Iterator[Outcome]:
        """Yield the baseline's outcomes of a label version's batch (the batch's samples are its relevance corpus)."""
        task = self.current.task
        corpus = [item["question"] for item in samples.values()] + [c["text"] for item in samples.values() for c in item["contexts"]]
        judge = BaselineJudge(task, settings_from(self.current.version.params), corpus=corpus)
        for target in batch:
            raw = judge.answer(item_for(target, samples))
            parsed = parse_verdict(task, raw, target.order)
            yield Outcome(target, parsed.status, parsed.value, parsed.reason, raw, parsed.error, 0.0, 0, 0)

    # ---- metric versions: metric_runs' pieces, batch by batch
    def run_metric(self, first: list[Target], options: RunOptions, stop: threading.Event) -> tuple[str, str, bool, float]:
        """Judge a metric version's claimed samples as `judge run` does (steps, cache, guard, scores); return how it ended.

        Nothing is fitted on the pass's samples: the watcher refused the versions that would be (metric_runs.fitted_part).
        """
        w, current = self.watcher, self.current
        with Session(w.engine) as session:
            context = version_context(session, current.version, current.task)
        setup = metric_runs.metric_setup(current.task, current.version, context, current.endpoint, [], prices=w.prices,
                                         limits=w.limits)

        def items_of(batch: list[Target], samples: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
            return {t.sample_id: item_for(t, samples) for t in batch}

        if setup.backend is None:
            self.run_baseline(first, options, stop, lambda batch, samples: setup.baseline_outcomes(batch, items_of(batch, samples)))
            return ("stopped", STOPPED, True, 0.0) if stop.is_set() else ("done", "", True, 0.0)
        with Session(w.engine, expire_on_commit=False) as session:
            run = session.get(JudgeRun, self.writer.run_id)
        execution = setup.execution(w.engine, run, self.writer, options, {}, sleep=asyncio.sleep, seed=w.seed)

        def prepare(batch: list[Target]) -> tuple[list[Job], list[Outcome]]:
            """Render a claimed batch's steps and read their cached answers (in a thread: renders and reads block).
            The cache rows are added before the batch's jobs are queued, so no call looks for them earlier."""
            with Session(w.engine) as session:
                samples = load_items(session, {t.sample_id for t in batch})
            jobs, refused = setup.jobs(batch, items_of(batch, samples))
            execution.cache.update(setup.cached(w.engine, jobs))
            return jobs, refused

        self.drive(execution, prepare, first, setup.api_key, options, stop)
        return metric_runs.ended(setup, execution, self.writer)

    # ---- over HTTP
    def run_http(self, first: list[Target], options: RunOptions, stop: threading.Event) -> tuple[str, str, bool, float]:
        w, current = self.watcher, self.current
        endpoint = current.endpoint
        api_key = read_api_key(endpoint)
        redact = Redactor(api_key)
        backend = make_backend(endpoint, current.version.params, redact=redact, max_answer_bytes=w.limits.max_answer_bytes)
        price = price_for(w.prices, endpoint.model)
        with Session(w.engine) as session:
            context = version_context(session, current.version, current.task)
        renderer = Renderer(current.version.system, current.version.template, context, w.limits)
        with Session(w.engine, expire_on_commit=False) as session:
            run = session.get(JudgeRun, self.writer.run_id)
        execution = Execution(w.engine, run, current.task, options, self.writer, backend=backend, price=price,
                              sleep=asyncio.sleep, rng=random.Random(w.seed))

        def prepare(batch: list[Target]) -> tuple[list[Job], list[Outcome]]:
            """Render a claimed batch; answer what the cache holds (in a thread: renders and reads block)."""
            with Session(w.engine) as session:
                samples = load_items(session, {t.sample_id for t in batch})
            jobs, ready = [], []
            for target in batch:
                try:
                    rendered = renderer.render(item_for(target, samples))
                except RenderError as exc:
                    ready.append(Outcome(target, "error", error=str(exc)))
                    continue
                jobs.append(Job(target, rendered, cache_key(backend, rendered)))
            left, cached = split_cached(w.engine, current.task, jobs)
            return left, ready + cached

        self.drive(execution, prepare, first, api_key, options, stop)
        call_seconds = getattr(execution, "call_seconds", 0.0)
        if execution.fatal:
            return "failed", redact(execution.fatal), price is not None, call_seconds
        if execution.stopped:
            return "stopped", execution.stopped, price is not None, call_seconds
        return "done", "", price is not None, call_seconds

    def drive(self, execution: Execution, prepare: Callable[[list[Target]], tuple[list[Any], list[Outcome]]],
              first: list[Target], api_key: str | None, options: RunOptions, stop: threading.Event) -> None:
        """Run the calls: `prepare(batch)` turns a claimed batch into jobs to call and outcomes ready to write; when
        the workers run out of jobs the next batch is claimed; the leases are renewed while calls are in flight."""
        w = self.watcher
        execution.stop_event, execution.stop_message = stop, STOPPED
        lock = asyncio.Lock()

        async def refill(queue: deque[Any]) -> bool:
            async with lock:
                while not queue:
                    if execution.fatal or execution.stopped or not execution.budget_left() or self.exhausted:
                        return False
                    batch = await asyncio.to_thread(self.claim_next)
                    if not batch:
                        return False
                    left, ready = await asyncio.to_thread(prepare, batch)
                    for outcome in ready:
                        await execution.results.put(outcome)
                    queue.extend(left)
                return True

        async def renew_leases() -> None:
            """Renew this watcher's leases while its calls run (a third of the lease at a time)."""
            while True:
                await asyncio.sleep(w.spec.lease / 3)
                await asyncio.to_thread(renew, w.engine, w.owner, w.spec.lease)

        async def main() -> None:
            left, ready = await asyncio.to_thread(prepare, first)
            for outcome in ready:
                await execution.results.put(outcome)
            execution.refill = refill
            guard = asyncio.create_task(renew_leases())
            try:
                await run_calls(execution, self.current.endpoint, api_key, options, w.transport, deque(left))
            finally:
                guard.cancel()

        run_coroutine(main())
