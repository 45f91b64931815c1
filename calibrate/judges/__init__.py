"""Judges: versioned prompt templates, backends over httpx, tolerant parsing, runs, the baseline.

Modules, by what they do:

    errors      the exception tree (drawn at its top)
    render      sandboxed Jinja2 templates: fields, save-time checks, built-in defaults
    sandbox     the bounded sandbox every render runs in: time and size limits, immutable context
    render_pool the worker processes user templates render in (a crash costs one item) …
    render_worker … and the worker's side: length-prefixed JSON over pipes, its own rlimits
    params      the per-backend allowlist of version parameters, with caps
    versions    prompts and immutable, content-hashed versions with few-shot examples; diffs
    items       the targets a run judges and the fields templates see
    backends    build_client (the one httpx client factory), OpenAI-compatible and Anthropic
    transport   the lean plain-HTTP/1.1 httpx transport (h11 over asyncio) for http:// endpoints
    parsing     reading a verdict out of an answer, or `unparsed` with the raw text kept
    baseline    the offline, deterministic baseline judge
    prices      the editable per-model price table
    metrics     metric judges (faithfulness, answer relevancy, context precision and recall): steps, scores
    execution   the run machinery: writer, adaptive concurrency, retries, budgets, the event loop
    runner      prepare/execute runs: setup, cache first, resume, stop
    metric_runs a metric judge's run: one job per sample of step calls, on execution's machinery
    rewrite     the instruction rewrite (`calibrate optimise`): requests through the same machinery, what a
                rewrite may not change

Domain code: every function takes a Session or an Engine, never Flask. See docs/judges.md.
"""

from __future__ import annotations

from calibrate import lazy
from calibrate.judges.errors import (
    BackendError,
    FatalBackendError,
    JudgeError,
    MalformedResponse,
    NothingToDo,
    PromptError,
    RateLimited,
    RenderError,
    RequestRejected,
    RetryableError,
    RunSetupError,
    Unreachable,
)

# The rest of the public API loads with its module on first use (PEP 562): naming an error
# does not load httpx, the runner or the metric judges' numpy.
_API = {
    "RunOptions": "execution",
    "RunSpec": "runner", "RunSummary": "runner", "execute_run": "runner", "prepare_run": "runner", "run_judge": "runner",
    "FewShotSpec": "versions", "SaveResult": "versions", "resolve_version": "versions", "save_version": "versions",
}

__all__ = [
    "BackendError", "FatalBackendError", "FewShotSpec", "JudgeError", "MalformedResponse", "NothingToDo", "PromptError",
    "RateLimited", "RenderError", "RequestRejected", "RetryableError", "RunOptions", "RunSetupError", "RunSpec",
    "RunSummary", "SaveResult",
    "Unreachable", "execute_run", "prepare_run", "resolve_version", "run_judge", "save_version",
]

__getattr__ = lazy.api_getattr(__name__, _API)
