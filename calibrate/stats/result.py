"""The single result type returned by every statistic in :mod:`calibrate.stats`.

A statistic that cannot be computed is a *result*, not an exception: it comes back as an
:class:`Estimate` whose ``value`` is ``None``, whose ``status`` says why (``"undefined"``
when there is data but the statistic has no value, ``"no_data"`` when there is nothing to
compute it on) and whose ``note`` explains it in words a reviewer can read, worded from its
``reason`` (:class:`calibrate.reasons.Reason`: a stable code plus figures, which renderers word
again in the reader's language).  Estimates are
immutable and :meth:`Estimate.to_dict` is always JSON-safe (no NaN, no infinities, no numpy
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

__all__ = ["Estimate", "STATUSES"]

#: Allowed values of :attr:`Estimate.status`.
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


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its sample size, optional interval, status and caveats.

    Parameters
    ----------
    value : float or None
        The statistic; ``None`` when it is undefined or there is no data.  Non-finite values
        passed in are stored as ``None`` (and the status becomes ``"undefined"``).
    n : int
        Number of units the statistic was computed on (items, pairs, units, groups: each
        function documents what it counts).
    ci : tuple of float, optional
        Confidence interval ``(low, high)``; ``None`` when not computed or not available.
    status : {"ok", "undefined", "no_data"}
        ``"undefined"``: there is data but the statistic has no value (e.g. expected
        agreement is 1, a constant variable, fewer than two units).  ``"no_data"``: the
        input was empty (after dropping missing values).
    note : str or Reason
        Why the value is undefined, or caveats about an ``"ok"`` value. Given a
        :class:`~calibrate.reasons.Reason`, the note is its English sentence and the reason is kept.
    p_value : float, optional
        A p-value when the statistic has a conventional test attached.
    extra : dict
        Method details, e.g. ``{"method": "bca", "n_resamples": 2000, "n_clusters": 40}``.
        Flattened into :meth:`to_dict`.
    reason : Reason, optional
        The note as data (a code and its figures); set from ``note`` when that is a Reason.

    References
    ----------
    .. [1] Wilkinson, L. and the Task Force on Statistical Inference (1999). Statistical
       methods in psychology journals: guidelines and explanations. *American
       Psychologist* 54(8), 594-604 (report effect sizes with intervals and sample sizes).
    """

    value: float | None
    n: int
    ci: tuple[float, float] | None = None
    status: str = "ok"
    note: str = ""
    p_value: float | None = None
    extra: dict = field(default_factory=dict)
    reason: Reason | None = None

    def __post_init__(self) -> None:
        if isinstance(self.note, Reason):
            object.__setattr__(self, "reason", self.note)
            object.__setattr__(self, "note", self.note.text())
        elif self.reason is not None and not self.note:
            object.__setattr__(self, "note", self.reason.text())
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        value = finite_or_none(self.value)
        if value is None and self.value is not None and self.status == "ok":
            object.__setattr__(self, "status", "undefined")
            if not self.note:
                object.__setattr__(self, "reason", Reason("not_finite"))
                object.__setattr__(self, "note", self.reason.text())
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "n", int(self.n))
        object.__setattr__(self, "p_value", finite_or_none(self.p_value))
        if self.ci is not None:
            low, high = (finite_or_none(v) for v in self.ci)
            object.__setattr__(self, "ci", None if low is None or high is None else (low, high))
        object.__setattr__(self, "extra", dict(self.extra))

    @property
    def ok(self) -> bool:
        """``True`` when the statistic has a value."""
        return self.status == "ok"

    def to_dict(self) -> dict:
        """Return a JSON-safe dictionary.

        Returns
        -------
        dict
            ``{"value", "n", "ci", "status", "note"}`` plus ``"reason"`` (the note's code and
            figures) when the note is not empty, plus ``"p_value"`` when set, plus the
            entries of :attr:`extra` (which never override the core keys).  ``ci`` is a
            two-element list or ``None``; non-finite numbers are ``None``.
        """
        out: dict[str, Any] = {
            "value": self.value,
            "n": self.n,
            "ci": list(self.ci) if self.ci is not None else None,
            "status": self.status,
            "note": self.note,
        }
        if self.note and self.reason is not None:
            out["reason"] = self.reason.to_dict()
        if self.p_value is not None:
            out["p_value"] = self.p_value
        for key, val in self.extra.items():
            key = str(key)
            if key not in out:
                out[key] = json_safe(val)
        return json_safe(out)

    def note_fields(self) -> dict:
        """Return ``{"note"}``, plus ``"reason"`` when the note is not empty: what a JSON block copies of an estimate."""
        out: dict[str, Any] = {"note": self.note}
        if self.note and self.reason is not None:
            out["reason"] = self.reason.to_dict()
        return out

    @classmethod
    def undefined(cls, n: int, note: str | Reason, **extra: Any) -> Estimate:
        """Return an estimate for a statistic that has no value on this data.

        Parameters
        ----------
        n : int
            Units available.
        note : str or Reason
            Why the statistic is undefined.
        **extra
            Stored in :attr:`extra`.
        """
        return cls(value=None, n=n, status="undefined", note=note, extra=extra)

    @classmethod
    def no_data(cls, note: str | Reason | None = None, **extra: Any) -> Estimate:
        """Return an estimate for empty input (``n = 0``).

        Parameters
        ----------
        note : str or Reason, optional
            What was missing (default: "no data").
        **extra
            Stored in :attr:`extra`.
        """
        return cls(value=None, n=0, status="no_data", note=Reason("no_data") if note is None else note, extra=extra)
