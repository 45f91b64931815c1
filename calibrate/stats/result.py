"""The result types of :mod:`calibrate.stats`: :class:`Result`, the base every statistical result extends, and
:class:`Estimate`, the one every statistic returns.

A :class:`Result` says five things: its ``value``, its interval ``ci``, the ``n`` it was computed on,
its ``status`` and the ``reason`` behind that status (:class:`calibrate.reasons.Reason`: a stable code
plus figures, which renderers word again in the reader's language). A statistic that cannot be
computed is a *result*, not an exception: its ``value`` is ``None``, its ``status`` says why
(``"undefined"`` when there is data but the statistic has no value, ``"no_data"`` when there is
nothing to compute it on) and its ``note`` (the reason's English sentence) explains it in words a
reviewer can read. The results of richer tests extend it with their own fields
(:class:`calibrate.stats.alttest.AltTestResult`, :class:`calibrate.stats.position.PositionResult`),
so a renderer reads status, note and reason the same way from every one (``status_fields``).
Results are immutable and their ``to_dict`` is always JSON-safe (no NaN, no infinities, no numpy
scalars).

Exceptions are reserved for programming errors (mismatched lengths, unknown option values,
labels outside the declared label set).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calibrate.reasons import Reason

__all__ = ["Estimate", "Result", "STATUSES"]

#: Allowed values of :attr:`Result.status`.
STATUSES = ("ok", "undefined", "no_data")


def json_safe(value: Any) -> Any:
    """Return ``value`` converted to plain, finite, JSON-serialisable Python objects.

    Non-finite floats become ``None``; numpy scalars and arrays become Python scalars and
    lists; tuples become lists; mappings are converted recursively (keys to ``str``).
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, np.ndarray):
        return [json_safe(v) for v in value.tolist()]
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    return str(value)


def finite_or_none(value: Any) -> float | None:
    """Return ``value`` as a finite ``float`` or ``None``."""
    if value is None:
        return None
    f = float(value)
    return f if math.isfinite(f) else None


@dataclass(frozen=True, kw_only=True)
class Result:
    """What every statistical result says: its value, interval, size, status and why.

    Extend it (a frozen, keyword-only dataclass) for a result with more to say; the statistic's own
    names of ``value`` and ``n`` may be read-only properties of the subclass.

    Parameters
    ----------
    value : float or None
        The headline figure; ``None`` when it is undefined or there is no data. A non-finite value
        is stored as ``None`` (and an ``"ok"`` status becomes ``"undefined"``, reason ``not_finite``).
    ci : tuple of float, optional
        Confidence interval ``(low, high)``; ``None`` when not computed or not available.
    n : int
        Units the result was computed on (items, pairs, units, groups: each function says which).
    status : {"ok", "undefined", "no_data"}
        ``"undefined"``: there is data but no value; ``"no_data"``: the input was empty.
    reason : Reason, optional
        Why the value is undefined, or a caveat of an ``"ok"`` value: a code and its figures.
    """

    value: float | None = None
    ci: tuple[float, float] | None = None
    n: int = 0
    status: str = "ok"
    reason: Reason | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.reason is not None and not isinstance(self.reason, Reason):
            raise TypeError(f"reason must be a Reason, got {type(self.reason).__name__}")
        value = finite_or_none(self.value)
        if value is None and self.value is not None and self.status == "ok":
            object.__setattr__(self, "status", "undefined")
            if self.reason is None:
                object.__setattr__(self, "reason", Reason("not_finite"))
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "n", int(self.n))
        if self.ci is not None:
            low, high = (finite_or_none(v) for v in self.ci)
            object.__setattr__(self, "ci", None if low is None or high is None else (low, high))

    @property
    def ok(self) -> bool:
        """``True`` when the result has a value (status ``"ok"``)."""
        return self.status == "ok"

    @property
    def note(self) -> str:
        """The reason in English ("" without one): what a reviewer reads in a JSON file."""
        return self.reason.text() if self.reason is not None else ""

    def note_fields(self) -> dict:
        """Return ``{"note"}``, plus ``"reason"`` when there is one: what a JSON block copies of a result."""
        out: dict[str, Any] = {"note": self.note}
        if self.reason is not None:
            out["reason"] = self.reason.to_dict()
        return out

    def status_fields(self) -> dict:
        """Return ``{"status", "note"}``, plus ``"reason"`` when there is one: the last keys of every result's JSON."""
        return {"status": self.status, **self.note_fields()}


@dataclass(frozen=True, kw_only=True)
class Estimate(Result):
    """A point estimate with its sample size, optional interval, status and caveats.

    Parameters
    ----------
    value, ci, n, status, reason
        As :class:`Result`: ``n`` counts what each function documents.
    p_value : float, optional
        A p-value when the statistic has a conventional test attached.
    extra : dict
        Method details, e.g. ``{"method": "bca", "n_resamples": 2000, "n_clusters": 40}``.
        Flattened into :meth:`to_dict`.

    References
    ----------
    .. [1] Wilkinson, L. and the Task Force on Statistical Inference (1999). Statistical
       methods in psychology journals: guidelines and explanations. *American
       Psychologist* 54(8), 594-604 (report effect sizes with intervals and sample sizes).
    """

    p_value: float | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "p_value", finite_or_none(self.p_value))
        object.__setattr__(self, "extra", dict(self.extra))

    def to_dict(self) -> dict:
        """Return a JSON-safe dictionary.

        Returns
        -------
        dict
            ``{"value", "n", "ci", "status", "note"}`` plus ``"reason"`` (the note's code and
            figures) when there is a reason, plus ``"p_value"`` when set, plus the entries of
            :attr:`extra` (which never override the core keys).  ``ci`` is a two-element list or
            ``None``; non-finite numbers are ``None``.
        """
        out: dict[str, Any] = {
            "value": self.value,
            "n": self.n,
            "ci": list(self.ci) if self.ci is not None else None,
            **self.status_fields(),
        }
        if self.p_value is not None:
            out["p_value"] = self.p_value
        for key, val in self.extra.items():
            key = str(key)
            if key not in out:
                out[key] = json_safe(val)
        return json_safe(out)

    @classmethod
    def undefined(cls, n: int, reason: Reason, **extra: Any) -> Estimate:
        """Return an estimate for a statistic that has no value on this data.

        Parameters
        ----------
        n : int
            Units available.
        reason : Reason
            Why the statistic is undefined.
        **extra
            Stored in :attr:`extra`.
        """
        return cls(value=None, n=n, status="undefined", reason=reason, extra=extra)

    @classmethod
    def no_data(cls, reason: Reason | None = None, **extra: Any) -> Estimate:
        """Return an estimate for empty input (``n = 0``).

        Parameters
        ----------
        reason : Reason, optional
            What was missing (default: ``no_data``, "no data").
        **extra
            Stored in :attr:`extra`.
        """
        return cls(value=None, n=0, status="no_data", reason=Reason("no_data") if reason is None else reason, extra=extra)
