"""A version's parameters: which ones calibrate sends to each backend, and their caps.

A version's parameters go into the request body of every call, so they are checked by name and
value: at save time against every backend's allowlist (`check_params`, PromptError), and when a
run starts against its backend's (`check_backend_params`, RunSetupError). Anything else — an
unknown name (`logit_bias`, `stream`), `n` above 1 (calibrate reads one answer and would pay for
64), `max_tokens` of 100,000 — is refused by name, with one line. The table is documented in
docs/judges.md ("Parameters").

Parameters that configure calibrate and are never sent: `json_mode`, the baseline's
`baseline.*` settings, answer relevancy's `n_questions`, `embedder`, `embedding_model`, and
the metric tasks' `leakage_guard`, `leakage_threshold` (their values and the metric they apply
to are checked when a run starts: calibrate.judges.metrics.LeakageGuard).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from calibrate.judges.baseline import PREFIX as BASELINE_PREFIX
from calibrate.judges.baseline import settings_from
from calibrate.judges.errors import PromptError, RunSetupError
from calibrate.reasons import Reason
from calibrate.tasks import METRIC_TASKS

MAX_TOKENS = 16_384
MAX_STOP = 4  # stop sequences
MAX_STOP_CHARS = 200
MAX_OBJECT_CHARS = 20_000  # response_format (a JSON schema)
RESERVED = ("model", "messages", "system", "stream")
LOCAL = ("json_mode",)
METRIC = {"answer_relevancy": ("n_questions", "embedder", "embedding_model")}
EVERY_METRIC = ("leakage_guard", "leakage_threshold")  # any metric task's version may name them
HTTP_BACKENDS = ("openai", "anthropic")


def _number(low: float, high: float) -> Callable[[Any], Reason | None]:
    def check(value: Any) -> Reason | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not low <= value <= high:
            return Reason("param_number_range", low=low, high=high)
        return None
    return check


def _whole(low: int, high: int) -> Callable[[Any], Reason | None]:
    def check(value: Any) -> Reason | None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            return Reason("param_whole_range", low=low, high=high) if low != high else Reason("param_exactly", value=low)
        return None
    return check


def _stops(*, single: bool) -> Callable[[Any], Reason | None]:
    def check(value: Any) -> Reason | None:
        items = [value] if single and isinstance(value, str) else value
        if (not isinstance(items, list) or not 1 <= len(items) <= MAX_STOP
                or not all(isinstance(s, str) and 0 < len(s) <= MAX_STOP_CHARS for s in items)):
            return Reason("param_stops_single" if single else "param_stops", count=MAX_STOP, chars=MAX_STOP_CHARS)
        return None
    return check


def _response_format(value: Any) -> Reason | None:
    if not isinstance(value, dict) or value.get("type") not in ("text", "json_object", "json_schema"):
        return Reason("param_response_format")
    try:
        size = len(json.dumps(value))
    except (TypeError, ValueError, RecursionError):
        return Reason("param_plain_json")
    return None if size <= MAX_OBJECT_CHARS else Reason("param_json_too_long", limit=MAX_OBJECT_CHARS)


def _choice(*options: str) -> Callable[[Any], Reason | None]:
    def check(value: Any) -> Reason | None:
        return None if value in options else Reason("param_choice", options=", ".join(options))
    return check


@dataclass(frozen=True)
class Rule:
    """One model parameter: the backends that take it and its cap on each (None: not taken)."""

    openai: Callable[[Any], Reason | None] | None
    anthropic: Callable[[Any], Reason | None] | None

    def on(self, backend: str) -> Callable[[Any], Reason | None] | None:
        return getattr(self, backend, None)


# name → rule; kept in step with the table in docs/judges.md (a test compares them).
MODEL_PARAMS: dict[str, Rule] = {
    "temperature": Rule(_number(0, 2), _number(0, 1)),
    "top_p": Rule(_number(0, 1), _number(0, 1)),
    "max_tokens": Rule(_whole(1, MAX_TOKENS), _whole(1, MAX_TOKENS)),
    "max_completion_tokens": Rule(_whole(1, MAX_TOKENS), None),
    "n": Rule(_whole(1, 1), None),
    "seed": Rule(_whole(-(2**63), 2**63 - 1), None),
    "stop": Rule(_stops(single=True), None),
    "presence_penalty": Rule(_number(-2, 2), None),
    "frequency_penalty": Rule(_number(-2, 2), None),
    "response_format": Rule(_response_format, None),
    "reasoning_effort": Rule(_choice("minimal", "low", "medium", "high"), None),
    "top_k": Rule(None, _whole(1, 500)),
    "stop_sequences": Rule(None, _stops(single=False)),
}


def _problem(name: str, value: Any, backend: str | None) -> Reason | None:
    """Return why `value` is refused for model parameter `name` (on `backend`, or on the most lenient backend)."""
    rule = MODEL_PARAMS[name]
    backends = (backend,) if backend else HTTP_BACKENDS
    problems = [check(value) for check in (rule.on(b) for b in backends) if check is not None]
    if not problems or any(p is None for p in problems):
        return None
    if backend:
        return Reason("params_value_on", name=name, problem=problems[0], backend=backend, value=_shown(value))
    return Reason("params_value", name=name, problem=problems[0], value=_shown(value))


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_params(params: Any, *, task: str | None = None) -> None:
    """Raise PromptError naming the first parameter that no backend takes or whose value is over its cap."""
    if not isinstance(params, dict):
        raise PromptError(Reason("params_not_object"))
    metric = METRIC.get(task or "", ()) + (EVERY_METRIC if task in METRIC_TASKS else ())
    for key, value in params.items():
        if key in RESERVED:
            raise PromptError(Reason("params_reserved", key=key))
        if key in LOCAL:
            if not isinstance(value, bool):
                raise PromptError(Reason("params_not_boolean", key=key, value=_shown(value)))
        elif key.startswith(BASELINE_PREFIX):
            try:
                settings_from({key: value})
            except RunSetupError as exc:
                raise PromptError(Reason("params_baseline", exc=exc.reason or str(exc))) from None
        elif key in metric:
            problem = _metric_problem(key, value)
            if problem:
                raise PromptError(Reason("params_metric_value", key=key, problem=problem, value=_shown(value)))
        elif key in MODEL_PARAMS:
            problem = _problem(key, value, None)
            if problem:
                raise PromptError(problem)
        else:
            allowed = ", ".join(sorted([*MODEL_PARAMS, *LOCAL, *metric, f"{BASELINE_PREFIX}*"]))
            raise PromptError(Reason("params_unknown", key=key, allowed=allowed))


def _metric_problem(key: str, value: Any) -> Reason | None:
    if key in EVERY_METRIC:
        return None  # checked with the run's metric when it starts (LeakageGuard.from_params)
    if key == "n_questions":
        return _whole(1, 20)(value)
    if key == "embedder":
        return _choice("tfidf", "http")(value)
    if not isinstance(value, str) or not 0 < len(value.strip()) <= 200:
        return Reason("param_model_name", limit=200)
    return None


def check_backend_params(backend: str, params: dict[str, Any]) -> None:
    """Raise RunSetupError naming a parameter `backend` does not take or whose value is over its cap there."""
    if backend not in HTTP_BACKENDS:
        return  # the baseline sends nothing
    for key, value in params.items():
        rule = MODEL_PARAMS.get(key)
        if rule is None:
            continue  # calibrate's own (checked at save time) or a version saved before this check: see below
        if rule.on(backend) is None:
            takers = [b for b in HTTP_BACKENDS if rule.on(b) is not None]
            raise RunSetupError(Reason("params_backend_refuses", backend=backend, key=key, takers=', '.join(takers)))
        problem = _problem(key, value, backend)
        if problem:
            raise RunSetupError(problem)
    unknown = sorted(key for key in params if key not in MODEL_PARAMS and key not in LOCAL
                     and not key.startswith(BASELINE_PREFIX) and key not in METRIC["answer_relevancy"]
                     and key not in EVERY_METRIC)
    if unknown:
        raise RunSetupError(Reason("params_unknown_saved", unknown=unknown[0]))


__all__ = ["MODEL_PARAMS", "check_backend_params", "check_params"]
