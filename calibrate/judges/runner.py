"""Judge runs: send a prompt version over a dataset's targets and store one verdict per target.

    prepare_run(engine, spec)   checks everything that can be checked offline, creates the
                                judge NAME@N and a JudgeRun (or picks up an interrupted one)
    execute_run(engine, run_id) judges what is still pending: cache first, then HTTP with
                                bounded, adaptive concurrency and retries; commits in batches
    run_judge(engine, spec)     both, for the CLI, the demo and the benchmarks

Guarantees (each tested in tests/judges):

- One verdict per (judge, task, target) — per (judge, task, target, presentation order) for
  a pairwise task, judged in the orders `--orders` asks for (items.expand_orders): the writer
  checks inside a BEGIN IMMEDIATE transaction, so a resumed or doubled run never duplicates one.
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
import os
import random
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import Engine
from sqlmodel import Session, func, select

from calibrate import lookup
from calibrate.claimsets import source_counts
from calibrate.db import write_session
from calibrate.judged import judging
from calibrate.judges import extraction, metric_runs
from calibrate.judges.backends import (
    DEFAULT_BASE_URLS,
    DEFAULT_KEY_ENV,
    Endpoint,
    Redactor,
    make_backend,
    read_api_key,
)
from calibrate.judges.baseline import BaselineJudge, settings_from
from calibrate.judges.errors import (
    JudgeError,
    NothingToDo,
    PromptError,
    RenderError,
    RunSetupError,
)
from calibrate.judges.execution import (
    Execution,
    Job,
    Outcome,
    RunOptions,
    Totals,
    Writer,
    cache_key,
    cached_responses,
    owner_fields,
    run_calls,
    run_coroutine,
    write_in_batches,
)
from calibrate.judges.items import (
    ORDERS,
    Scope,
    Target,
    expand_samples,
    fewshot_keys,
    item_for,
    load_items,
    select_targets,
    version_context,
)
from calibrate.judges.jobs import WITHOUT_TWO_RESPONSES, Jobs, task_jobs
from calibrate.judges.params import check_backend_params
from calibrate.judges.parsing import parse_verdict
from calibrate.judges.prices import Price, load_prices, price_for
from calibrate.judges.render import Renderer, stop_if_the_template_fails
from calibrate.judges.sandbox import DEFAULT_LIMITS, Limits
from calibrate.judges.versions import check_prompt_on_dataset, judge_name, resolve_version
from calibrate.models import Dataset, Judge, JudgeRun, Prompt, PromptVersion, Task, Verdict, utcnow
from calibrate.reasons import Reason
from calibrate.task_scopes import check_task_on_dataset

LIVE_SECONDS = 120  # a run whose heartbeat is older than this is taken as dead
MAX_SAMPLES = 20  # --samples K: at most this many calls per target
BACKENDS = ("openai", "anthropic", "baseline")


@dataclass
class CallSpec:
    """What a judge run and a watcher both ask for: the dataset, the prompt version (NAME@N) and where its calls go
    (the key is only named, never held)."""

    dataset: str
    prompt: str
    backend: str = "baseline"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    options: RunOptions = field(default_factory=RunOptions)


@dataclass
class RunSpec(CallSpec):
    """What `calibrate judge run` and the Run button ask for."""

    split: str | None = None
    labelled_only: bool = False
    limit: int | None = None
    rerun: bool = False
    orders: str | None = None  # pairwise tasks: original | swapped | both (None: both); others: None
    # `calibrate claims extract`: the prompt must be a claim_extraction one (and only then may
    # it be); `force` re-extracts answers whose claims carry expert labels or corrections.
    extraction: bool = False
    force: bool = False
    # Self-consistency: K calls per target (samples 0..K-1, K verdicts; the report's `self_consistency`).
    samples: int = 1


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
    orders: str | None = None  # pairwise runs: original | swapped | both (n_total counts target × order)
    # A resumed run: targets judged by earlier attempts, and earlier errors this attempt judged again.
    # The counts above (verdicts … calls, tokens) are this attempt's; n_done/n_total the whole run's.
    earlier: int = 0
    retried_errors: int = 0
    samples: int = 1  # self-consistency: calls per target (n_total counts target × sample)

    def _before(self) -> str:
        parts = [f"{self.earlier} judged before"] if self.earlier else []
        if self.retried_errors:
            parts.append(f"{self.retried_errors} earlier error{'s' if self.retried_errors != 1 else ''} judged again")
        return "; " + ", ".join(parts) if parts else ""

    def lines(self) -> list[str]:
        """Return what `calibrate judge run` prints."""
        cost = f"${self.cost:.4f}" if self.priced else "cost unknown (no price for the model: see docs/judges.md)"
        out = [
            f"{self.judge}: run {self.run_id} {self.status} — {self.n_done}/{self.n_total} targets judged "
            f"({self.n_ok} verdicts, {self.n_unparsed} unparsed, {self.n_errors} errors, {self.n_cached} from the cache"
            f"{self._before()})",
            f"  {self.calls} calls ({self.retries} retries), {self.input_tokens} input + {self.output_tokens} output tokens, "
            f"{cost}, {self.seconds:.1f} s",
        ]
        if self.orders:
            both = "both presentation orders" if self.orders == "both" else f"the {self.orders} order"
            out.append(f"  pairwise: each target judged in {both}; one verdict per target and order")
        if self.samples > 1:
            out.append(f"  self-consistency: {self.samples} samples per target (sample 0 is the target's verdict)")
        if self.skipped:
            out.append(f"  {skipped_text(self.skipped)}")
        if self.error:
            out.append(f"  {self.error}")
        return out


def skipped_reason(skipped: dict[str, int]) -> Reason:
    """Return the reason saying which samples a metric run skipped and why (its English text is the run's line)."""
    counts = [Reason("skipped_count", count=n, skip=why) for why, n in sorted(skipped.items())]
    return Reason("skipped_nothing_to_measure", total=sum(skipped.values()), counts=counts)


def skipped_text(skipped: dict[str, int]) -> str:
    """Return the line saying which samples a metric run skipped and why."""
    return skipped_reason(skipped).text()


# --------------------------------------------------------------------------- setup


def endpoint_for(spec: CallSpec, version: PromptVersion) -> Endpoint:
    """Return where the run's calls go, checking the backend options."""
    if spec.backend not in BACKENDS:
        raise RunSetupError(Reason("backend_unknown", backends=', '.join(BACKENDS), backend=spec.backend))
    if spec.backend == "baseline":
        return Endpoint("baseline", "", "baseline", None)
    model = version.model
    if spec.model and version.model and spec.model != version.model:
        raise RunSetupError(Reason("run_model_differs", model=version.model, model2=spec.model))
    model = model or (spec.model or "")
    if not model:
        raise RunSetupError(Reason("run_no_model"))
    base_url = (spec.base_url or DEFAULT_BASE_URLS[spec.backend]).rstrip("/")
    if not base_url.startswith(("http://", "https://")):
        raise RunSetupError(Reason("base_url_scheme", base_url=base_url))
    key_env = spec.api_key_env if spec.api_key_env is not None else DEFAULT_KEY_ENV[spec.backend]
    return Endpoint(spec.backend, base_url, model, key_env or None)


def _targets(session: Session, dataset: Dataset, task: Task, version: PromptVersion, scope: Scope,
             force: bool) -> tuple[list[Target], int]:
    """Return the run's targets, and (extraction) how many answers were left out for carrying expert labels."""
    targets = select_targets(session, dataset, task, scope, exclude=fewshot_keys(session, version))
    if judging(task).kind.extraction:
        return extraction.eligible(session, targets, force=force)
    return targets, 0


def run_is_live(run: JudgeRun) -> bool:
    """Return whether a pending or running run still has a process behind it."""
    if run.status not in ("pending", "running"):
        return False
    params = run.params or {}
    beat = params.get("heartbeat")
    try:
        fresh = beat is not None and (datetime.now(UTC) - datetime.fromisoformat(beat)).total_seconds() < LIVE_SECONDS
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


DEAD_RUN_ERROR = "interrupted: its process ended before it finished; run it again to resume where it stopped"


def settle_dead_runs(session: Session, runs: list[JudgeRun] | None = None) -> list[int]:
    """Mark `failed` (resumable: prepare_run takes it up) every pending or running run with no live process
    behind it (`run_is_live`), so a killed server or command never leaves a run `running`; return their ids.

    `runs`: the runs to look at (default: all pending or running ones). The caller commits.
    """
    if runs is None:
        runs = list(session.exec(select(JudgeRun).where(JudgeRun.status.in_(("pending", "running")))).all())
    settled = []
    for run in runs:
        if run.status in ("pending", "running") and not run_is_live(run):
            run.status, run.error, run.finished_at = "failed", DEAD_RUN_ERROR, run.finished_at or utcnow()
            session.add(run)
            settled.append(run.id)
    return settled


def prepare_run(engine: Engine, spec: RunSpec) -> int:
    """Check the request, create the judge and a run (or take up an interrupted one); return the run id.

    Raises RunSetupError (or PromptError) with a one-line reason, NotFound for an unknown
    dataset or prompt, NothingToDo when every target already has a verdict.
    """
    if spec.options.concurrency < 1:
        raise RunSetupError(Reason("concurrency_too_low"))
    if spec.split not in (None, "train", "dev", "test"):
        raise RunSetupError(Reason("run_split_unknown", split=spec.split))
    with write_session(engine) as session:
        setup = _setup(session, spec)
        targets, skipped, kept = _run_targets(session, setup, spec)
        judge = judge_for(session, setup.prompt, setup.version)
        runs = session.exec(select(JudgeRun).where(JudgeRun.judge_id == judge.id).order_by(JudgeRun.id.desc())).all()
        for run in runs:
            if run.status in ("pending", "running") and run_is_live(run):
                raise RunSetupError(Reason("run_in_progress", run_id=run.id, name=judge.name))
        settle_dead_runs(session, runs)
        pending = _pending(session, setup.task, judge, targets, rerun=spec.rerun, kept=kept)
        settings = _settings(session, setup, spec, targets, skipped, kept)
        run = _resumable(runs, setup.dataset, settings, spec.rerun)
        if run is not None:
            params = dict(run.params or {})
            params.update(settings, **owner_fields())
            run.params, run.status, run.error, run.finished_at = params, "pending", "", None
        else:
            endpoint = setup.endpoint
            run = JudgeRun(judge_id=judge.id, dataset_id=setup.dataset.id, status="pending", backend=endpoint.backend,
                           model=endpoint.model, base_url=endpoint.base_url, params={**settings, **owner_fields()})
        run.n_total = len(targets)
        run.n_done = len(targets) - len(pending)
        session.add(run)
        session.flush()
        return run.id


@dataclass
class _Setup:
    """A run's request, checked: what it runs, on what, and where its calls go."""

    dataset: Dataset
    prompt: Prompt
    version: PromptVersion
    task: Task
    endpoint: Endpoint
    orders: str | None  # pairwise tasks: original | swapped | both; others: None
    scope: Scope


def _setup(session: Session, spec: RunSpec) -> _Setup:
    """Check the request against the database (dataset, prompt, task scope, endpoint, samples, orders); raise what is wrong."""
    dataset = lookup.dataset(session, spec.dataset)
    prompt, version = resolve_version(session, spec.prompt)
    task = session.get(Task, prompt.task_id)
    check_prompt_on_dataset(session, prompt, dataset.name)  # a prompt (or its task) made for other datasets
    check_task_on_dataset(session, task, dataset)
    judged = judging(task)
    if not judged.kind.runs:
        raise RunSetupError(Reason("rewrite_not_run", prompt=spec.prompt, task=task.name))
    extraction.check_task(task, spec.prompt, extraction=spec.extraction)
    endpoint = endpoint_for(spec, version)
    check_endpoint(task, version, endpoint)
    if not isinstance(spec.samples, int) or not 1 <= spec.samples <= MAX_SAMPLES:
        raise RunSetupError(Reason("samples_range", max_samples=MAX_SAMPLES, samples=spec.samples))
    if spec.samples > 1 and (judged.metric or judged.kind.extraction):
        raise RunSetupError(Reason("samples_metric_task" if judged.metric else "samples_extraction_task", task=task.name))
    if not judged.kind.orders and spec.orders is not None:
        raise RunSetupError(Reason("orders_not_pairwise", task=task.name, kind_=task.kind))
    orders = (spec.orders or "both") if judged.kind.orders else None
    if orders is not None and orders not in ORDERS:
        raise RunSetupError(Reason("orders_unknown", orders=', '.join(ORDERS), orders2=orders))
    return _Setup(dataset, prompt, version, task, endpoint, orders, Scope(spec.split, spec.labelled_only, spec.limit))


def check_endpoint(task: Task, version: PromptVersion, endpoint: Endpoint) -> None:
    """Refuse now what would fail at the first call: a parameter the backend does not take, a missing key variable,
    a metric judge's setup, a task the offline baseline cannot judge."""
    check_backend_params(endpoint.backend, version.params)  # never send a parameter the backend does not take
    read_api_key(endpoint)  # fail now, not at the first call, when the variable is missing
    if judging(task).metric:
        metric_runs.check_metric_setup(task, version, endpoint)
    elif endpoint.backend == "baseline":
        BaselineJudge(task, settings_from(version.params), corpus=[])  # refuses tasks it cannot judge


def _run_targets(session: Session, setup: _Setup, spec: RunSpec) -> tuple[list[Target], dict[str, int], int]:
    """Return the run's jobs (targets in their orders and samples), what was skipped and why, and the labelled answers an
    extraction keeps; refuse a run with nothing to judge."""
    task, dataset = setup.task, setup.dataset
    targets, kept = _targets(session, dataset, task, setup.version, setup.scope, spec.force)
    if not targets and kept:
        raise NothingToDo(Reason("nothing_to_do_kept", kept=kept))
    if not targets:
        raise RunSetupError(Reason("nothing_to_judge", target=task.target, dataset=dataset.name, task=task.name))
    jobs = task_jobs(session, task, targets, orders=setup.orders)
    targets, skipped = jobs.targets, run_skipped(jobs)
    if jobs.without_orders and not targets:
        raise RunSetupError(Reason("no_sample_two_responses", dataset=dataset.name, task=task.name))
    if jobs.skipped and not targets:
        raise RunSetupError(Reason("nothing_to_measure", task=task.name, dataset=dataset.name, value=skipped_reason(skipped)))
    return expand_samples(targets, spec.samples), skipped, kept


def run_skipped(jobs: Jobs) -> dict[str, int]:
    """Return what a run records as skipped: the samples without two responses, or those with nothing to measure."""
    return {WITHOUT_TWO_RESPONSES: jobs.without_orders} if jobs.without_orders else dict(jobs.skipped)


def judge_for(session: Session, prompt: Prompt, version: PromptVersion) -> Judge:
    """Return the judge of a prompt version (PROMPT@N), made on its first run; refuse a judge of that name that is not."""
    name = judge_name(prompt, version)
    judge = session.exec(select(Judge).where(Judge.name == name)).first()
    if judge is None:
        judge = Judge(name=name, kind="prompt", prompt_version_id=version.id,
                      description=f"runs of prompt {prompt.name} version {version.number}")
        session.add(judge)
        session.flush()
    elif judge.kind != "prompt" or judge.prompt_version_id != version.id:
        raise RunSetupError(Reason("judge_name_taken", name=name))
    return judge


def _done_jobs(session: Session, task: Task, judge: Judge, targets: list[Target], *, rerun: bool) -> set[tuple[str, str, int]]:
    """Return the (target, order, sample) jobs the run need not judge: an extraction's applied answers, else those with
    a verdict (none for a rerun)."""
    if judging(task).kind.extraction:
        return {(key, "", 0) for key in extraction.applied_keys(session, judge, targets)}
    return set() if rerun else done_keys(session, judge, task, {t.key for t in targets})


def _pending(session: Session, task: Task, judge: Judge, targets: list[Target], *, rerun: bool, kept: int) -> list[Target]:
    """Return the jobs left to judge; raise NothingToDo when there are none."""
    done = _done_jobs(session, task, judge, targets, rerun=rerun)
    pending = [t for t in targets if t.job not in done]
    if not pending and judging(task).kind.extraction:
        raise NothingToDo(Reason("nothing_to_do_extracted_kept", count=len(targets), name=judge.name, kept=kept) if kept
                          else Reason("nothing_to_do_extracted", count=len(targets), name=judge.name))
    if not pending:
        raise NothingToDo(Reason("nothing_to_do_judged", count=len(targets), name=judge.name))
    return pending


def _settings(session: Session, setup: _Setup, spec: RunSpec, targets: list[Target], skipped: dict[str, int],
              kept: int) -> dict[str, Any]:
    """Return what a run records of its request in `JudgeRun.params` (never the key), so it can be taken up again."""
    endpoint, orders = setup.endpoint, setup.orders
    settings = {
        "scope": setup.scope.as_dict(), "rerun": spec.rerun, "options": asdict(spec.options), "skipped": skipped,
        **({"orders": orders} if orders is not None else {}), **({"samples": spec.samples} if spec.samples > 1 else {}),
        "endpoint": {"backend": endpoint.backend, "base_url": endpoint.base_url, "model": endpoint.model,
                     "api_key_env": endpoint.api_key_env},
    }
    if judging(setup.task).kind.extraction:
        settings.update(force=spec.force, kept_labelled=kept)
    if judging(setup.task).reads_claims:
        # Which claim sets the targets had when the run was set up (segmenter, import, NAME@V…).
        settings["claim_sources"] = source_counts(session, {t.sample_id for t in targets})
    return settings


def _resumable(runs: list[JudgeRun], dataset: Dataset, settings: dict[str, Any], rerun: bool) -> JudgeRun | None:
    """Return the judge's latest run when it stopped or failed on the same request (taken up again), else None."""
    keys = ("scope", "endpoint", "orders", "samples")
    same = [r for r in runs if r.dataset_id == dataset.id and r.status in ("stopped", "failed")
            and all((r.params or {}).get(key) == settings.get(key) for key in keys) and not rerun]
    return same[0] if same and same[0].id == (runs[0].id if runs else None) else None


def done_keys(session: Session, judge: Judge, task: Task, keys: set[str]) -> set[tuple[str, str, int]]:
    """Return the (target, order, sample) jobs that already have a usable or unparsed verdict (errors are judged again)."""
    rows = session.exec(select(Verdict.target_key, Verdict.order_key, Verdict.sample_index, Verdict.status)
                        .where(Verdict.judge_id == judge.id, Verdict.task_id == task.id)).all()
    return {(key, order, index) for key, order, index, status in rows if status != "error" and key in keys}


def execute_run(engine: Engine, run_id: int, *, transport: httpx.AsyncBaseTransport | None = None,
                prices: dict[str, Price] | None = None, progress: Callable[[int, int], object] | None = None,
                sleep: Callable[[float], Awaitable[Any]] | None = None, seed: int | None = None,
                limits: Limits = DEFAULT_LIMITS) -> RunSummary:
    """Judge whatever the run still lacks; return its summary. Never raises for item failures.

    `limits` bound every template render (PROMPT_RENDER_SECONDS, PROMPT_RENDER_MAX_CHARS): an
    item whose render hits one is that item's error.
    """
    started = time.perf_counter()
    with Session(engine, expire_on_commit=False) as session:
        work = _work(session, run_id)
    run, task, params = work.run, work.task, work.params
    run.n_total = len(work.targets)
    apply = extraction.Applier(work.judge.name, force=bool(params.get("force"))) if judging(task).kind.extraction else None
    writer = Writer(engine, run, task, rerun=work.rerun, base=work.base, progress=progress, apply=apply,
                    replace=apply is not None)
    writer.backend_name, writer.model = work.endpoint.backend, work.endpoint.model
    _mark(engine, run_id, status="running", n_total=len(work.targets), n_done=work.base.n_done,
          attempts=int(params.get("attempts", 0)) + 1)
    status, error, call_seconds = "done", "", 0.0
    try:
        if judging(task).metric:
            status, error, work.priced, call_seconds = metric_runs.run_metric(
                engine, run, writer, task, work.version, work.context, work.endpoint, work.samples, work.pending,
                work.options, transport=transport, prices=prices, sleep=sleep, seed=seed, limits=limits)
        elif work.endpoint.backend == "baseline":
            _run_baseline(writer, task, work.version, work.samples, work.pending, work.options)
        else:
            status, error, call_seconds = _run_http(engine, work, writer, transport=transport, prices=prices, sleep=sleep,
                                                    seed=seed, limits=limits)
    except (JudgeError, PromptError) as exc:
        status, error = "failed", str(exc)
    except BaseException as exc:
        _finish(engine, run_id, "stopped" if isinstance(exc, KeyboardInterrupt) else "failed",
                "interrupted" if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {exc}", work.priced)
        raise
    if status == "done":
        still = len(work.pending) - writer.totals.n_done
        if still > 0:
            status, error = "stopped", f"{still} targets not judged; run again to continue"
    _finish(engine, run_id, status, error, work.priced)
    with Session(engine) as session:
        final = session.get(JudgeRun, run_id)
        t = writer.totals
        return RunSummary(run_id, work.judge.name, final.status, final.n_total, final.n_done, t.n_ok, t.n_unparsed,
                          t.n_errors, t.n_cached, t.calls, t.retries, t.input_tokens, t.output_tokens, t.cost,
                          time.perf_counter() - started, final.error, work.priced, call_seconds, work.skipped,
                          params.get("orders") if judging(task).kind.orders else None,
                          earlier=work.base.n_done, retried_errors=t.n_retried_errors, samples=int(params.get("samples", 1)))


@dataclass
class _Work:
    """What a run still has to do, read once from the database: its jobs, their items, and what earlier attempts counted."""

    run: JudgeRun
    judge: Judge
    version: PromptVersion
    task: Task
    params: dict[str, Any]
    options: RunOptions
    rerun: bool
    endpoint: Endpoint
    targets: list[Target]
    skipped: dict[str, int]
    pending: list[Target]
    samples: dict[int, dict[str, Any]]
    context: Any
    base: Totals
    priced: bool = True  # whether the model has a price (set once the calls are set up)


def _work(session: Session, run_id: int) -> _Work:
    """Read a run's request back from its params and return what it still lacks (the same jobs a resume judges)."""
    run = session.get(JudgeRun, run_id)
    if run is None:
        raise RunSetupError(Reason("no_such_run", run_id=run_id))
    judge = session.get(Judge, run.judge_id)
    version = session.get(PromptVersion, judge.prompt_version_id)
    task = session.get(Task, session.get(Prompt, version.prompt_id).task_id)
    params = dict(run.params or {})
    rerun = bool(params.get("rerun"))
    ep = params.get("endpoint", {})
    endpoint = Endpoint(ep.get("backend", "baseline"), ep.get("base_url", ""), ep.get("model", ""), ep.get("api_key_env"))
    targets, _ = _targets(session, session.get(Dataset, run.dataset_id), task, version, Scope(**params.get("scope", {})),
                          bool(params.get("force")))
    jobs = task_jobs(session, task, targets, orders=params.get("orders"))  # the orders asked for: a resume judges the same
    targets, skipped, loaded = jobs.targets, run_skipped(jobs), jobs.loaded
    targets = expand_samples(targets, int(params.get("samples", 1)))
    done = _done_jobs(session, task, judge, targets, rerun=rerun)
    pending = [t for t in targets if t.job not in done]
    samples = ({t.sample_id: loaded[t.sample_id] for t in pending} if loaded is not None
               else load_items(session, {t.sample_id for t in pending}))
    base = Totals(n_done=len(targets) - len(pending), n_errors=0, n_cached=run.n_cached, input_tokens=run.input_tokens,
                  output_tokens=run.output_tokens, cost=run.cost, calls=int(params.get("calls", 0)),
                  retries=int(params.get("retries", 0)),
                  # an extraction takes its unparsed answers again: they are counted anew
                  n_unparsed=0 if judging(task).kind.extraction else int(params.get("n_unparsed", 0)))
    base.n_errors = session.exec(select(func.count()).select_from(Verdict).where(
        Verdict.judge_id == judge.id, Verdict.task_id == task.id, Verdict.status == "error",
        Verdict.target_key.in_(sorted({t.key for t in targets})))).one() if not rerun else 0
    return _Work(run, judge, version, task, params, RunOptions(**params.get("options", {})), rerun, endpoint, targets,
                 skipped, pending, samples, version_context(session, version, task), base)


def _run_http(engine: Engine, work: _Work, writer: Writer, *, transport: httpx.AsyncBaseTransport | None,
              prices: dict[str, Price] | None, sleep: Callable[[float], Awaitable[Any]] | None, seed: int | None,
              limits: Limits) -> tuple[str, str, float]:
    """Render the pending jobs, answer what the cache holds, call the endpoint for the rest; return
    (status, error, seconds in calls)."""
    endpoint, version, options = work.endpoint, work.version, work.options
    api_key = read_api_key(endpoint)
    redact = Redactor(api_key)
    backend = make_backend(endpoint, version.params, redact=redact, max_answer_bytes=limits.max_answer_bytes)
    price = price_for(prices if prices is not None else load_prices(), endpoint.model)
    work.priced = price is not None
    renderer = Renderer(version.system, version.template, work.context, limits)
    jobs, refused = [], []
    rendered_once: dict[tuple[str, str], Any] = {}  # --samples K: a target's K calls send the same messages
    for target in work.pending:
        try:
            rendered = rendered_once.get((target.key, target.order_key))
            if rendered is None:
                rendered = rendered_once[(target.key, target.order_key)] = renderer.render(item_for(target, work.samples))
        except RenderError as exc:
            refused.append(Outcome(target, "error", error=str(exc)))
            stop_if_the_template_fails(refused, len(jobs))
            continue
        jobs.append(Job(target, rendered, cache_key(backend, rendered, target.sample_index)))
    write_in_batches(writer, refused, 500)
    jobs = _answer_from_cache(engine, writer, work.task, jobs, options)
    execution = Execution(engine, work.run, work.task, options, writer, backend=backend, price=price,
                          sleep=sleep or asyncio.sleep, rng=random.Random(seed))
    run_coroutine(run_calls(execution, endpoint, api_key, options, transport, deque(jobs)))
    call_seconds = getattr(execution, "call_seconds", 0.0)
    if execution.fatal:
        return "failed", redact(execution.fatal), call_seconds
    if execution.stopped:
        return "stopped", execution.stopped, call_seconds
    return "done", "", call_seconds


def split_cached(engine: Engine, task: Task, jobs: list[Job]) -> tuple[list[Job], list[Outcome]]:
    """Return the jobs the response cache does not answer, and its answers to the others as outcomes (no HTTP)."""
    hits = cached_responses(engine, {job.cache_key for job in jobs})
    left, answered = [], []
    for job in jobs:
        row = hits.get(job.cache_key)
        if row is None:
            left.append(job)
            continue
        parsed = parse_verdict(task, row.response, job.target.order)
        answered.append(Outcome(job.target, parsed.status, parsed.value, parsed.reason, row.response, parsed.error,
                                None, row.input_tokens, row.output_tokens, cached=True, cache_key=job.cache_key))
    return left, answered


def _answer_from_cache(engine: Engine, writer: Writer, task: Task, jobs: list[Job], options: RunOptions) -> list[Job]:
    """Store verdicts for every job the cache answers (no HTTP); return the jobs left to call."""
    left, answered = split_cached(engine, task, jobs)
    for start in range(0, len(answered), 500):
        writer.write(answered[start:start + 500])
    return left


def _run_baseline(writer: Writer, task: Task, version: PromptVersion, samples: dict[int, dict[str, Any]],
                  pending: list[Target], options: RunOptions) -> None:
    corpus = [item["question"] for item in samples.values()] + [c["text"] for item in samples.values() for c in item["contexts"]]
    judge = BaselineJudge(task, settings_from(version.params), corpus=corpus)

    def outcomes() -> Iterator[Outcome]:
        for target in pending:
            started = time.perf_counter()
            raw = judge.answer(item_for(target, samples))
            parsed = parse_verdict(task, raw, target.order)
            yield Outcome(target, parsed.status, parsed.value, parsed.reason, raw, parsed.error,
                          (time.perf_counter() - started) * 1000, 0, 0)

    write_in_batches(writer, outcomes(), max(options.batch_size, 50))


def _mark(engine: Engine, run_id: int, *, status: str, n_total: int, n_done: int, attempts: int) -> None:
    with write_session(engine) as session:
        run = session.get(JudgeRun, run_id)
        run.status, run.n_total, run.n_done, run.error = status, n_total, n_done, ""
        run.started_at = run.started_at or utcnow()
        run.finished_at = None
        params = dict(run.params or {})
        params.update(owner_fields(), attempts=attempts, stop_requested=False)
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

