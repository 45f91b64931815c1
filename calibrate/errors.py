"""The errors calibrate raises on purpose: one root, so the CLI and the views each catch them in one place.

    CalibrateError                  the root: a request that cannot be carried out; str() is the
    │                               one line to show the user (the CLI: "error: …", exit 2;
    │                               the views: a flash message, or the error page on GET)
    ├── NotFound                    a name or id that does not exist, or that this user may not
    │                               see (lookup.py; HTTP 404). Names what exists when it can.
    ├── TaskError                   a task definition or a value that does not fit its task
    ├── AccountError                an account request (username, password, role)
    ├── AnnotationError             an annotation action refused (HTTP 422 for scripts)
    │   ├── Incomplete              annotation/queue.py: submit with required cells missing
    │   └── EvidenceError           annotation/labels.py: a bad evidence span
    ├── ImportRejected              a file rejected whole, with its problems by line and field
    ├── SamplingError               a sampling request (sizes, strata, annotators)
    ├── CalibrationError            a report request (a field to group by, a split, a metric)
    ├── ABError                     an A/B request (values of --by, no pairs)
    ├── GoldenError                 a golden-set request (loop/golden.py: a name, a WHERE, a refresh)
    ├── WhereError                  a WHERE expression (where.py) that does not parse or matches nothing;
    │                               a command may raise its own kind instead (golden: GoldenError)
    ├── Busy                        too much of this work at once (the prompt editor's trial renders):
    │                               HTTP 429 (the user's share) or 503 (everyone's), with Retry-After
    └── JudgeError                  judges/errors.py draws its own tree (PromptError,
                                    RunSetupError, BackendError and its kinds, NothingToDo)

A refusal a web user meets is raised with a `Reason` (calibrate/reasons.py: a code and its figures)
instead of a string: str() is still the English line (the command line prints it), and the web
(views/errors.py) words it from the code in the reader's language. A refusal raised with a string
has no code and is shown as it is (docs/i18n.md lists which remain English, and why).

The domain errors keep their ValueError base (callers and tests catch them as such). Each
module that raises one imports it from here; the old import paths (`calibrate.tasks.TaskError`,
`calibrate.annotation.AnnotationError`, …) still name the same classes.
"""

from __future__ import annotations

from typing import Any

from calibrate.reasons import Reason


class CalibrateError(Exception):
    """Base of every error calibrate raises on purpose; the message is one line for the user.

    Raised with a `Reason`, the message is its English sentence and `reason` keeps the code and figures.
    """

    reason: Reason | None = None

    def __init__(self, message: Any = "", *args: Any) -> None:
        if isinstance(message, Reason):
            self.reason = message
            message = message.text()
        super().__init__(message, *args)

    @classmethod
    def carrying(cls, exc: Exception) -> CalibrateError:
        """Return this kind of error with another refusal's message, and its reason when it has one (a re-raise)."""
        reason = getattr(exc, "reason", None)
        return cls(reason if reason is not None else str(exc))

    def details(self) -> list[str]:
        """Return the lines shown before the message (an import's problems, one a line); usually none."""
        return []

    def headline(self) -> str:
        """Return the one line the command line prints after `error: `."""
        return str(self)


class NotFound(CalibrateError, LookupError):
    """Something that does not exist, or that this user may not see (HTTP 404, never which)."""


class TaskError(CalibrateError, ValueError):
    """A task definition or a value that does not fit its task."""


class AccountError(CalibrateError, ValueError):
    """An account request that cannot be carried out."""


class AnnotationError(CalibrateError, ValueError):
    """A request that cannot be carried out as asked; the message says why (HTTP 422)."""


class SamplingError(CalibrateError, ValueError):
    """A sampling request that cannot be carried out; the message says why and what to do."""


class CalibrationError(CalibrateError, ValueError):
    """A report request that cannot be answered (a field, split, task or metric the data does not have)."""


class GoldenError(CalibrateError, ValueError):
    """A golden-set request that cannot be carried out: a name, a WHERE, a refresh the data cannot give."""


class WhereError(CalibrateError, ValueError):
    """A WHERE expression that does not parse, or that no sample matches where one must (where.py)."""


class Busy(CalibrateError):
    """Too much of this work is running already: try again in `retry_after` seconds (HTTP `status`: 429 when it is the
    user's own share, 503 when it is everyone's; the views send Retry-After)."""

    def __init__(self, message: Any = "", *, status: int = 503, retry_after: int = 1) -> None:
        super().__init__(message)
        self.status, self.retry_after = status, retry_after


class ABError(CalibrateError, ValueError):
    """An A/B request that cannot be answered: an unknown value, a bad metric, or no pairs."""
