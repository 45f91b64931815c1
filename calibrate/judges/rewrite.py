"""The instruction rewrite: an LLM reads a judge's instructions and a batch of disagreements and rewrites them.

The rewrite prompt is a version of a prompt of the built-in task `instruction_rewrite` (kind
`rewrite`), saved, versioned and edited like any other (`calibrate prompt new NAME --task
instruction_rewrite`); `calibrate optimise` names one with `--rewriter NAME@V` or makes
`instruction-rewrite@1` from the task's built-in templates on first use (`default_rewriter`).
Its templates see `task` (the task whose judge is rewritten, with its guidelines),
`instructions` (the judge version's system text, a Jinja template) and `disagreements` (sample_id,
question, text, gold, verdict, rationale, reason: the caller passes train items only). It answers
`{"instructions": "…"}` (parsing.parse_instructions).

`ask_rewrites` sends the requests through the run machinery (execution.py): the response cache
first (an answered request is never asked again, so a resumed optimisation repeats nothing),
then the calls with retries and the caller's budget (max_calls, max_cost: the optimisation's
remainder). Its answers are not verdicts: an `AnswerWriter` caches them and reports its counters
to the caller in the same transaction.

`check_rewrite` is what a rewrite may not change (a candidate that changes it is refused with the
reason): the template's constructs (every `{{ … }}` and `{% … %}`: its variables, the examples
block, the control flow) as a multiset, and the reply-format lines (those naming a reply key,
`"verdict"` or `"winner"`), in order; and the result must pass the template check of any save.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from sqlalchemy import Engine
from sqlmodel import Session, select

from calibrate.judges.backends import Endpoint, Redactor, make_backend, read_api_key
from calibrate.judges.errors import JudgeError, PromptError, RenderError
from calibrate.judges.execution import (
    AnswerWriter,
    Execution,
    Job,
    RunOptions,
    Totals,
    cache_key,
    cached_responses,
    run_calls,
    run_coroutine,
)
from calibrate.judges.items import Target, task_fields
from calibrate.judges.parsing import parse_verdict
from calibrate.judges.prices import Price
from calibrate.judges.render import Renderer, check_template
from calibrate.judges.sandbox import DEFAULT_LIMITS, Limits
from calibrate.judges.versions import latest_version, save_version
from calibrate.models import Prompt, PromptVersion, Task
from calibrate.reasons import Reason
from calibrate.tasks import REWRITE_TASK

DEFAULT_REWRITER = "instruction-rewrite"
CONSTRUCT_RE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)
REPLY_KEYS = ('"verdict"', '"winner"')


@dataclass(frozen=True)
class Answer:
    """One rewrite request's outcome: `value` the new instructions (status ok), else why not."""

    status: str  # ok | unparsed | error | not_asked (the budget or a stop came first)
    value: str | None = None
    error: str = ""
    cached: bool = False


def default_rewriter(session: Session) -> tuple[Prompt, PromptVersion]:
    """Return the latest version of `instruction-rewrite`, creating it (version 1, the built-in templates) if missing."""
    prompt = session.exec(select(Prompt).where(Prompt.name == DEFAULT_REWRITER)).first()
    if prompt is None:
        save_version(session, DEFAULT_REWRITER, task=REWRITE_TASK,
                     note="the built-in instruction rewrite (made by calibrate optimise on first use)")
        prompt = session.exec(select(Prompt).where(Prompt.name == DEFAULT_REWRITER)).one()
    return prompt, latest_version(session, prompt)


def constructs(source: str) -> Counter:
    """Return the template's `{{ … }}` and `{% … %}` constructs, whitespace inside them collapsed, counted."""
    return Counter(re.sub(r"\s+", " ", match) for match in CONSTRUCT_RE.findall(source or ""))


def reply_lines(source: str) -> list[str]:
    """Return the lines of a template that state its reply format (they name a reply key), stripped, in order."""
    return [line.strip() for line in (source or "").splitlines() if any(key in line for key in REPLY_KEYS)]


def check_rewrite(old: str, new: str, *, target: str, task: str, limits: Limits = DEFAULT_LIMITS) -> Reason | None:
    """Return why `new` may not replace the instructions `old` (None when it may)."""
    if new.strip() == old.strip():
        return Reason("rewrite_unchanged")
    before, after = constructs(old), constructs(new)
    if before != after:
        removed, added = sorted((before - after).elements()), sorted((after - before).elements())
        return Reason("rewrite_fields_changed", removed=", ".join(removed) or "—", added=", ".join(added) or "—")
    if reply_lines(old) != reply_lines(new):
        return Reason("rewrite_reply_changed", lines=" | ".join(reply_lines(old)) or "—")
    try:
        check_template(new, target=target, part="system", task=task, limits=limits)
    except PromptError as exc:
        return Reason("rewrite_template_refused", why=str(exc))
    return None


def ask_rewrites(engine: Engine, *, rewriter: PromptVersion, rewrite_task: Task, judged_task: Task, endpoint: Endpoint,
                 requests: list[dict[str, Any]], options: RunOptions, price: Price | None,
                 on_write: Callable[[Session, Totals], bool] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None, limits: Limits = DEFAULT_LIMITS,
                 seed: int | None = None) -> tuple[list[Answer], Totals]:
    """Ask the rewriter once per request (`instructions`, `disagreements`); return each answer, in order, and the totals.

    Cached answers cost nothing; the calls keep to `options` (concurrency, retries, max_calls,
    max_cost). A request not asked because the budget or a stop came first is `not_asked`.
    Raises JudgeError when the backend refuses for good (bad key, unknown model, unreachable).
    """
    with Session(engine) as session:
        context = {"task": task_fields(session, judged_task), "examples": []}
    api_key = read_api_key(endpoint)
    redact = Redactor(api_key)
    backend = make_backend(endpoint, rewriter.params, redact=redact, max_answer_bytes=limits.max_answer_bytes)
    renderer = Renderer(rewriter.system, rewriter.template, context, limits)
    jobs = []
    answers: list[Answer | None] = [None] * len(requests)
    for i, request in enumerate(requests):
        try:
            rendered = renderer.render(request)
        except RenderError as exc:
            answers[i] = Answer("error", error=str(exc))
            continue
        jobs.append(Job(Target(f"rewrite:{i}", 0), rendered, cache_key(backend, rendered)))
    writer = AnswerWriter(engine, backend_name=endpoint.backend, model=endpoint.model, on_write=on_write)
    hits = cached_responses(engine, {job.cache_key for job in jobs})
    left = []
    for job in jobs:
        row = hits.get(job.cache_key)
        if row is None:
            left.append(job)
            continue
        parsed = parse_verdict(rewrite_task, row.response)
        answers[int(job.target.key.split(":")[1])] = Answer(parsed.status, parsed.value, parsed.error, cached=True)
    execution = Execution(engine, None, rewrite_task, options, writer, backend=backend, price=price,
                          sleep=asyncio.sleep, rng=random.Random(seed))
    if left:
        run_coroutine(run_calls(execution, endpoint, api_key, options, transport, deque(left)))
        if execution.fatal:
            raise JudgeError(redact(execution.fatal))
    for outcome in writer.outcomes:
        answers[int(outcome.target.key.split(":")[1])] = Answer(outcome.status, outcome.value, outcome.error)
    return [a if a is not None else Answer("not_asked", error=execution.stopped) for a in answers], writer.totals

