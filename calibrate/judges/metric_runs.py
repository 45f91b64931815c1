"""Metric judges' runs: one job per sample made of its step calls (calibrate/judges/metrics.py
says which steps and how they score), executed with the shared run machinery of execution.py
(cache, retries, budgets, concurrency: `Execution`) and written as one verdict per sample by
its `Writer`.

runner.py calls `check_metric_setup`, `measurable` and `run_metric` for a metric task;
everything else about a run (setup, resume, stopping) is the runner's. `calibrate watch`
(watch.py) judges metric tasks with the same pieces batch by batch: `metric_setup` once per
pass, then `MetricSetup.jobs` / `.cached` / `.baseline_outcomes` for each claimed batch, the
same `MetricExecution`, and `ended`; it refuses the versions `fitted_part` names (a score that
depends on which other samples were judged with it cannot equal `judge run`'s). context_recall's leakage
guard (metrics.LeakageGuard) decides some steps before any call: those steps are never asked,
never cached, and cost nothing; the sample's score reads their answers like any other.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
from sqlalchemy import Engine
from sqlmodel import Session

from calibrate.judges import metrics
from calibrate.judges.backends import Endpoint, HTTPBackend, Redactor, make_backend, read_api_key
from calibrate.judges.baseline import settings_from
from calibrate.judges.embeddings import Embedded, EmbeddingClient, TfidfEmbedder, decode, embedding_cache_key, encode
from calibrate.judges.errors import RenderError
from calibrate.judges.execution import (
    CacheEntry,
    Execution,
    Job,
    Outcome,
    RunOptions,
    Writer,
    cache_key,
    cached_responses,
    run_calls,
    run_coroutine,
    write_in_batches,
)
from calibrate.judges.items import Target, item_for, load_items
from calibrate.judges.prices import Price, load_prices, price_for
from calibrate.judges.render import Renderer, stop_if_the_template_fails
from calibrate.judges.sandbox import DEFAULT_LIMITS, Limits
from calibrate.models import JudgeRun, PromptVersion, ResponseCache, Task


def check_metric_setup(task: Task, version: PromptVersion, endpoint: Endpoint) -> None:
    """Refuse, before any call, a metric version whose parameters cannot run on this backend."""
    if endpoint.backend == "baseline":
        settings_from(version.params)
    if task.name == "answer_relevancy":
        metrics.n_questions(version.params)
        metrics.embedder_choice(version.params, endpoint.backend)
    metrics.LeakageGuard.from_params(task.name, version.params)


def measurable(session: Session, task: Task, targets: list[Target]
               ) -> tuple[list[Target], dict[str, int], dict[int, dict[str, Any]]]:
    """Return the samples a metric can measure, the skipped ones counted by reason, and the
    items read to decide (sample id → fields: a run reuses them instead of reading them again)."""
    items = load_items(session, {t.sample_id for t in targets})
    kept, skipped = [], {}
    for target in targets:
        reason = metrics.skip_reason(task.name, items[target.sample_id])
        if reason is None:
            kept.append(target)
        else:
            skipped[reason] = skipped.get(reason, 0) + 1
    return kept, skipped, items


@dataclass
class MetricJob:
    """One sample of an HTTP metric run: its fields, its steps, and their calls (rendered, with cache keys)."""

    target: Target
    item: dict[str, Any]
    steps: list[metrics.Step]
    jobs: list[Job]  # the calls: one per step the leakage guard did not decide
    decided: dict[int, str] = field(default_factory=dict)  # step index → the guard's answer (no call)

    def merged(self, answers: list[Outcome]) -> list[Outcome]:
        """Return every step's answer in step order: the calls' and the guard's (no tokens, no cost, not cached)."""
        asked = iter(answers)
        return [Outcome(self.target, "ok", raw=self.decided[i], input_tokens=0, output_tokens=0) if i in self.decided
                else next(asked) for i in range(len(self.steps))]


def metric_outcome(task: Task, target: Target, score: metrics.Score, steps: list[Outcome]) -> Outcome:
    """Return the sample's outcome from its score and its step calls (tokens, cost and latency summed).

    Tokens are those of the calls made for it; a sample answered wholly from the cache carries
    the tokens the cache recorded, and counts as cached.
    """
    cached = all(o.cached for o in steps)
    spent = steps if cached else [o for o in steps if not o.cached]
    latency = None if cached else sum(o.latency_ms or 0.0 for o in spent)
    return Outcome(target, "ok" if score.value is not None else "unparsed", score.text, score.reason,
                   score.raw(task.name), "" if score.value is not None else score.reason, latency,
                   sum(o.input_tokens or 0 for o in spent), sum(o.output_tokens or 0 for o in spent), cached=cached,
                   cost=sum(o.cost for o in spent),
                   step_cache=[e for o in steps if not o.cached for e in o.cache_entries()])


class MetricExecution(Execution):
    """A metric run's async part: each job is a sample, judged by its step calls.

    Every step goes through `Execution.call` (retries, Retry-After, budget, adaptive limit);
    steps whose answer is in the cache are not called. A step that ends in an error makes the
    sample's verdict an error (no partial score); a run stopped mid-sample keeps the step
    answers it paid for in the cache and leaves the sample unjudged.
    """

    def __init__(self, *args: Any, cache: dict[str, ResponseCache], embed: TfidfEmbedder | EmbeddingClient | None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cache = cache
        self.embed = embed  # TfidfEmbedder, or EmbeddingClient (answer relevancy over HTTP), or None
        self.leftover: list[CacheEntry] = []

    def outcome(self, job: Job, completion: Any, *, cached: bool) -> Outcome:
        """Return a step's answer unread (the metric reads it); embeddings are stored encoded and never priced."""
        if isinstance(completion, Embedded):
            text = encode(completion.vectors)
            return Outcome(job.target, "ok", raw=text, latency_ms=None, input_tokens=completion.input_tokens,
                           output_tokens=0, cache_key=job.cache_key, cache_text=text)
        cost = 0.0
        if self.price is not None:
            cost = self.price.cost(completion.input_tokens or 0, completion.output_tokens or 0, completion.cached_input_tokens)
        return Outcome(job.target, "ok", raw=completion.text, latency_ms=completion.latency_ms,
                       input_tokens=completion.input_tokens, output_tokens=completion.output_tokens, cost=cost,
                       cache_key=job.cache_key, cache_text=completion.text)

    async def answer(self, jobs: list[Job]) -> list[Outcome] | None:
        """Return the answers of some steps (cache first); None if the run stopped before all were answered."""
        out: list[Outcome | None] = [None] * len(jobs)
        calls = []
        for i, job in enumerate(jobs):
            row = self.cache.get(job.cache_key)
            if row is not None:
                out[i] = Outcome(job.target, "ok", raw=row.response, input_tokens=row.input_tokens,
                                 output_tokens=row.output_tokens, cached=True, cache_key=job.cache_key)
            else:
                calls.append(i)
        if calls and not self.succeeded_once:
            # The first call goes alone: a bad key, model or URL stops the run here.
            first, calls = calls[0], calls[1:]
            out[first] = await Execution.call(self, jobs[first])
            if out[first] is not None and out[first].status == "error":
                # The sample is an error already: its later steps are not called.
                for i in calls:
                    out[i] = Outcome(jobs[i].target, "error", error="not called: an earlier step failed")
                return out
        answered = await asyncio.gather(*(Execution.call(self, jobs[i]) for i in calls))
        for i, outcome in zip(calls, answered, strict=True):
            out[i] = outcome
        if any(o is None for o in out):
            self.leftover += [e for o in out if o is not None and not o.cached for e in o.cache_entries()]
            return None
        return out

    async def call(self, job: MetricJob) -> Outcome | None:  # type: ignore[override]
        """Judge one sample: its steps, then its score; None when the run stops before it is judged."""
        answers = await self.answer(job.jobs)
        if answers is None:
            return None
        answers = job.merged(answers)
        failed = [(step, o) for step, o in zip(job.steps, answers, strict=True) if o.status == "error"]
        if failed:
            return self.failed(job, answers, failed)
        if self.task.name != "answer_relevancy":
            results = [metrics.read_step(self.task.name, step.name, o.raw) for step, o in zip(job.steps, answers, strict=True)]
            return metric_outcome(self.task, job.target, metrics.score_steps(self.task.name, results), answers)
        questions = metrics.read_questions(answers[0].raw)
        if questions.error:
            return metric_outcome(self.task, job.target, metrics.unparsed_questions(questions), answers)
        texts = [job.item["question"], *questions.questions]
        if questions.noncommittal:
            vectors = np.zeros((len(texts), 0))
        elif isinstance(self.embed, EmbeddingClient):
            key = embedding_cache_key(self.embed, texts)
            embed_job = Job(job.target, job.jobs[0].rendered, key, send=lambda client, _rendered: self.embed.embed(client, texts))
            got = await self.answer([embed_job])
            if got is None:
                self.leftover += answers[0].cache_entries() if not answers[0].cached else []
                return None
            if got[0].status == "error":
                return self.failed(job, answers + got, [(metrics.Step("embeddings", {}), got[0])])
            answers += got
            vectors = decode(got[0].raw)
        else:
            vectors = self.embed.embed(texts)
        return metric_outcome(self.task, job.target, metrics.relevancy(vectors[0], vectors[1:], questions), answers)

    def failed(self, job: MetricJob, answers: list[Outcome], failed: list[tuple[metrics.Step, Outcome]]) -> Outcome:
        """Return the error outcome of a sample whose step failed (its other new answers still go to the cache)."""
        step, first = failed[0]
        more = f" (and {len(failed) - 1} more failed steps)" if len(failed) > 1 else ""
        return Outcome(job.target, "error", error=f"{step.name}: {first.error}{more}",
                       step_cache=[e for o in answers if o.status != "error" and not o.cached for e in o.cache_entries()])


@dataclass
class MetricSetup:
    """A metric version ready to judge samples: built once per run (`judge run`) or per pass (`calibrate watch`).

    `fit` (at `metric_setup`) are the samples the parts fitted on a corpus learn from — the TF-IDF
    embedder of answer relevancy, the embedding leakage guard, the baseline's context relevance —
    which `judge run` fits on the samples it judges; `fitted_part` names them (a watcher refuses them).
    """

    task: Task
    version: PromptVersion
    endpoint: Endpoint
    guard: metrics.LeakageGuard | None
    embedder: TfidfEmbedder | EmbeddingClient | None
    api_key: str | None
    redact: Redactor
    answers: metrics.BaselineSteps | None = None  # the offline baseline's step answers
    backend: HTTPBackend | None = None  # None: the offline baseline
    renderer: Renderer | None = None
    price: Price | None = None

    def plan(self, item: dict[str, Any]) -> tuple[list[metrics.Step], dict[int, str]]:
        """Return a sample's steps and the answers the leakage guard gives without a call (step index → answer)."""
        steps = metrics.steps_for(self.task.name, item, self.version.params)
        return steps, self.guard.decided(item, steps) if self.guard else {}

    def jobs(self, pending: list[Target], items: dict[int, dict[str, Any]]) -> tuple[list[MetricJob], list[Outcome]]:
        """Render the steps of these samples (HTTP backends); return their jobs, and an error outcome for each
        sample a step of which could not be rendered (RenderError when the first ones all fail alike)."""
        jobs: list[MetricJob] = []
        refused: list[Outcome] = []
        for target in pending:
            item = items[target.sample_id]
            steps, guarded = self.plan(item)
            try:
                rendered = [self.renderer.render({**item, **step.fields}) for i, step in enumerate(steps) if i not in guarded]
            except RenderError as exc:
                refused.append(Outcome(target, "error", error=str(exc)))
                stop_if_the_template_fails(refused, len(jobs))
                continue
            jobs.append(MetricJob(target, item, steps, [Job(target, r, cache_key(self.backend, r)) for r in rendered], guarded))
        return jobs, refused

    def cached(self, engine: Engine, jobs: list[MetricJob]) -> dict[str, ResponseCache]:
        """Return the response-cache rows of these jobs' steps (and of their embeddings, for answer relevancy)."""
        cache = cached_responses(engine, {job.cache_key for mj in jobs for job in mj.jobs})
        if isinstance(self.embedder, EmbeddingClient):
            # Embeddings of questions already generated (a resumed or repeated run) are looked up too.
            keys = set()
            for mj in jobs:
                row = cache.get(mj.jobs[0].cache_key)
                questions = metrics.read_questions(row.response) if row is not None else None
                if questions is not None and not questions.error and not questions.noncommittal:
                    keys.add(embedding_cache_key(self.embedder, [mj.item["question"], *questions.questions]))
            cache.update(cached_responses(engine, keys))
        return cache

    def baseline_outcomes(self, pending: list[Target], items: dict[int, dict[str, Any]]) -> Iterator[Outcome]:
        """Yield the offline baseline's outcome of each sample: it answers each step, the metric scores them as for an LLM."""
        task = self.task
        for target in pending:
            started = time.perf_counter()
            item = items[target.sample_id]
            steps, guarded = self.plan(item)
            raws = [guarded[i] if i in guarded else self.answers.answer(item, step) for i, step in enumerate(steps)]
            if task.name == "answer_relevancy":
                questions = metrics.read_questions(raws[0])
                if questions.error:
                    score = metrics.unparsed_questions(questions)
                else:
                    vectors = self.embedder.embed([item["question"], *questions.questions])
                    score = metrics.relevancy(vectors[0], vectors[1:], questions)
            else:
                score = metrics.score_steps(task.name, [metrics.read_step(task.name, step.name, raw)
                                                        for step, raw in zip(steps, raws, strict=True)])
            outcome = metric_outcome(task, target, score, [Outcome(target, "ok", raw=raw, input_tokens=0, output_tokens=0)
                                                           for raw in raws])
            outcome.latency_ms = (time.perf_counter() - started) * 1000
            yield outcome

    def execution(self, engine: Engine, run: JudgeRun, writer: Writer, options: RunOptions, cache: dict[str, ResponseCache], *,
                  sleep: Callable[[float], Awaitable[Any]] | None, seed: int | None) -> MetricExecution:
        """Return the async part of an HTTP metric run over these cache rows (more can be added to `.cache`)."""
        return MetricExecution(engine, run, self.task, options, writer, backend=self.backend, price=self.price,
                               sleep=sleep or asyncio.sleep, rng=random.Random(seed), cache=cache, embed=self.embedder)


def fitted_part(task: Task, version: PromptVersion, endpoint: Endpoint) -> str | None:
    """Return which part of this metric version is fitted on the samples of the run, else None: "tfidf_embedder"
    (answer relevancy embedding offline), "embedding_guard" (context recall's leakage guard by embedding) or
    "baseline_relevance" (the baseline's context relevance). A sample's score then depends on the other samples judged
    with it, so only a run over a fixed set of samples (`judge run`) gives it."""
    if task.name == "answer_relevancy" and metrics.embedder_choice(version.params, endpoint.backend) == "tfidf":
        return "tfidf_embedder"
    if task.name == "context_recall" and version.params.get("leakage_guard") == "embedding":
        return "embedding_guard"
    if task.name == "context_precision" and endpoint.backend == "baseline":
        return "baseline_relevance"
    return None


def metric_setup(task: Task, version: PromptVersion, context: dict[str, Any], endpoint: Endpoint,
                 fit: list[dict[str, Any]], *, prices: dict[str, Price] | None, limits: Limits = DEFAULT_LIMITS) -> MetricSetup:
    """Check a metric version against its backend and build what judging its samples needs (see MetricSetup)."""
    check_metric_setup(task, version, endpoint)
    guard = metrics.LeakageGuard.from_params(task.name, version.params, fit)
    api_key = read_api_key(endpoint)
    redact = Redactor(api_key)
    embedder: TfidfEmbedder | EmbeddingClient | None = None
    if task.name == "answer_relevancy":
        embedder = (EmbeddingClient(endpoint, str(version.params["embedding_model"]), redact)
                    if metrics.embedder_choice(version.params, endpoint.backend) == "http"
                    else metrics.tfidf_embedder(fit))
    if endpoint.backend == "baseline":
        corpus = [item["question"] for item in fit] + [c["text"] for item in fit for c in item["contexts"]]
        return MetricSetup(task, version, endpoint, guard, embedder, api_key, redact,
                           answers=metrics.BaselineSteps(task.name, settings_from(version.params), corpus))
    backend = make_backend(endpoint, metrics.chat_params(version.params), redact=redact,
                           max_answer_bytes=limits.max_answer_bytes)
    table = prices if prices is not None else load_prices()
    return MetricSetup(task, version, endpoint, guard, embedder, api_key, redact, backend=backend,
                       renderer=Renderer(version.system, version.template, context, limits),
                       price=price_for(table, endpoint.model))


def ended(setup: MetricSetup, execution: MetricExecution, writer: Writer) -> tuple[str, str, bool, float]:
    """Store the step answers of samples a stop left unjudged (paid: a later run reads them from the cache);
    return the run's (status, error, priced, call seconds)."""
    if execution.leftover:
        writer.write([], cache=execution.leftover)
    status, error = "done", ""
    if execution.fatal:
        status, error = "failed", setup.redact(execution.fatal)
    elif execution.stopped:
        status, error = "stopped", execution.stopped
    return status, error, setup.price is not None, getattr(execution, "call_seconds", 0.0)


def run_metric(engine: Engine, run: JudgeRun, writer: Writer, task: Task, version: PromptVersion, context: dict[str, Any],
                endpoint: Endpoint, samples: dict[int, dict[str, Any]], pending: list[Target], options: RunOptions, *,
                transport: httpx.AsyncBaseTransport | None, prices: dict[str, Price] | None,
                sleep: Callable[[float], Awaitable[Any]] | None, seed: int | None,
                limits: Limits = DEFAULT_LIMITS) -> tuple[str, str, bool, float]:
    """Judge a metric version's pending samples; return (status, error, priced, call seconds).

    A sample whose step cannot be rendered within `limits` is that sample's error. The parts fitted on a
    corpus are fitted on the pending samples.
    """
    items = {t.sample_id: item_for(t, samples) for t in pending}
    setup = metric_setup(task, version, context, endpoint, list(items.values()), prices=prices, limits=limits)
    if setup.backend is None:
        write_in_batches(writer, setup.baseline_outcomes(pending, items), max(options.batch_size, 50))
        return "done", "", True, 0.0
    jobs, refused = setup.jobs(pending, items)
    write_in_batches(writer, refused, 500)
    execution = setup.execution(engine, run, writer, options, setup.cached(engine, jobs), sleep=sleep, seed=seed)
    run_coroutine(run_calls(execution, endpoint, setup.api_key, options, transport, deque(jobs)))
    return ended(setup, execution, writer)
