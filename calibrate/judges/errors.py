"""Exceptions of the judges package (under calibrate.errors.CalibrateError, the root of every error).

    JudgeError                      anything in calibrate.judges that the caller should report
    ├── PromptError                 a prompt or version that cannot be saved or found
    │                               (unknown field in a template, syntax error, bad few-shot,
    │                               unknown NAME@N) — raised at save time, never at run time
    ├── NothingToDo                 every target in scope already has a verdict of this judge
    │                               (not a failure: the CLI and the Run button say so and stop)
    ├── RunSetupError               a run that cannot start (unknown dataset, missing API-key
    │                               variable, a task the baseline cannot judge, a live run,
    │                               a parameter the backend does not take)
    ├── RenderError                 a template that could not be rendered for one item: a limit
    │                               of calibrate.judges.sandbox (time, size, an unbounded
    │                               operation, recursion) or an error of the template; at save
    │                               time it becomes a PromptError, in a run the item's error
    └── BackendError                a call to a judge endpoint that gave no answer
        ├── FatalBackendError       stops the whole run at once: bad credentials (401/403),
        │                           unknown model or URL (404), unreachable base URL before
        │                           any call succeeded
        ├── RequestRejected         this request is wrong (400, 413, 422…): recorded as the
        │                           item's error, never retried
        └── RetryableError          408/409/429/5xx, timeouts, dropped connections: retried
            │                       with backoff
            ├── MalformedResponse   a 200 whose body is not the API's format (not JSON, nested
            │                       too deeply, a field of the wrong type): retried like a 5xx,
            │                       then the item's error; never cached
            ├── RateLimited         429 (also lowers the concurrency)
            └── Unreachable         connection refused, unknown host: fatal while no call
                                    of the run has succeeded yet, retried afterwards

`BackendError` messages never contain the API key: backends pass every text that could echo
it through `redact` before raising, and every answer before returning it.
"""

from __future__ import annotations

from calibrate.errors import CalibrateError


class JudgeError(CalibrateError):
    """Base of every error the judges package raises on purpose."""


class PromptError(JudgeError, ValueError):
    """A prompt or version that cannot be saved or resolved; the message names the field."""


class RunSetupError(JudgeError, ValueError):
    """A run that cannot start; the message says what to fix."""


class RenderError(JudgeError):
    """A template render that failed for one item; the message names the limit it hit, if any."""


class BackendError(JudgeError):
    """A judge call that gave no answer."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class FatalBackendError(BackendError):
    """An error every further call would repeat: stop the run."""


class RequestRejected(BackendError):
    """The endpoint refused this request (400/422…): not retried, recorded on the item."""


class RetryableError(BackendError):
    """A transient failure: retry after `retry_after` seconds if the server said so."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message, status=status)
        self.retry_after = retry_after


class MalformedResponse(RetryableError):
    """A 200 whose body is not what the API promises: retried a bounded number of times, never cached."""


class RateLimited(RetryableError):
    """HTTP 429: retry later and lower the concurrency."""


class Unreachable(RetryableError):
    """The base URL could not be reached (connection refused, unknown host, connect timeout)."""


class NothingToDo(JudgeError):
    """Every target in scope already has a verdict of this judge."""
