"""Input coercion shared by the statistics modules (private).

Everything here turns "array-like" input (lists, tuples, numpy arrays, pandas Series)
into plain Python lists or float arrays and knows what counts as a missing value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd


def is_missing(value: Any) -> bool:
    """Return ``True`` for ``None``, float NaN, ``pandas.NA`` and ``NaT``."""
    if value is None:
        return True
    if isinstance(value, (float, np.floating)):
        return math.isnan(value)
    return type(value).__name__ in ("NAType", "NaTType")


def to_list(values: Any) -> list:
    """Return ``values`` as a Python list (numpy scalars converted to Python scalars)."""
    if values is None:
        return []
    if hasattr(values, "to_numpy") and not isinstance(values, np.ndarray):
        values = values.to_numpy(dtype=object)
    if isinstance(values, np.ndarray):
        return values.tolist()
    if isinstance(values, (str, bytes)):
        raise TypeError("expected a sequence of values, got a string")
    return list(values)


def factor_codes(values: Any, *, sort: bool = False) -> tuple[np.ndarray, list]:
    """Return ``pandas.factorize``'s (codes, distinct values) of ``values``: -1 for a missing one, the distinct values
    in order of first appearance (``sort``: sorted).

    A pandas categorical (the report's 10^6 labels) is factorized through its integer codes, its strings never
    listed; anything else as a list of Python values.
    """
    dtype = getattr(values, "dtype", None)
    if isinstance(dtype, pd.CategoricalDtype) and (not sort or dtype.categories.is_monotonic_increasing):
        codes = values.cat.codes.to_numpy() if hasattr(values, "cat") else np.asarray(values.codes)
        present = codes >= 0
        ids, used = pd.factorize(codes[present], sort=sort)
        out = np.full(len(codes), -1, dtype=np.int64)
        out[present] = ids
        return out, dtype.categories.take(used).tolist()
    if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype.kind in "iu":
        # integer codes already (a categorical's, filtered): factorized as numbers, not as 10^6 Python objects
        codes, uniques = pd.factorize(values, sort=sort)
        return codes.astype(np.int64), uniques.tolist()
    codes, uniques = pd.factorize(pd.Series(to_list(values), dtype=object), sort=sort)
    return codes.astype(np.int64), list(uniques)


def factor_ids(values: Any, *, first_seen: bool = True) -> np.ndarray:
    """Return codes that are equal where ``values`` are equal, -1 for a missing one, without listing the distinct
    values: ``factor_codes``'s codes (``first_seen``: numbered in order of first appearance), or, where the numbering
    does not matter (``first_seen=False``), a pandas categorical's own codes, neither factorized nor its strings read.
    """
    dtype = getattr(values, "dtype", None)
    if not isinstance(dtype, pd.CategoricalDtype):
        return factor_codes(values)[0]
    codes = (values.cat.codes.to_numpy() if hasattr(values, "cat") else np.asarray(values.codes)).astype(np.int64)
    if first_seen:
        present = codes >= 0
        codes[present] = pd.factorize(codes[present])[0]
    return codes


def check_same_length(**named: Sequence) -> int:
    """Raise ``ValueError`` unless every sequence has the same length; return it."""
    lengths = {name: len(seq) for name, seq in named.items()}
    if len(set(lengths.values())) > 1:
        desc = ", ".join(f"{k}={v}" for k, v in lengths.items())
        raise ValueError(f"inputs must have the same length ({desc})")
    return next(iter(lengths.values()), 0)


def ordered_labels(values: Iterable) -> list:
    """Return the distinct values, sorted when they are mutually comparable.

    Falls back to order of first appearance for mixed types that cannot be sorted.
    """
    seen: dict = {}
    for v in values:
        if v not in seen:
            seen[v] = None
    labels = list(seen)
    try:
        return sorted(labels)
    except TypeError:
        return labels


def validate_labels(labels: Any) -> list:
    """Return ``labels`` as a list, rejecting duplicates and missing values."""
    out = to_list(labels)
    if any(is_missing(v) for v in out):
        raise ValueError("labels must not contain missing values")
    if len(set(out)) != len(out):
        raise ValueError("labels must be distinct")
    return out


def encode(values: list, index: dict, what: str) -> np.ndarray:
    """Map each value to its code through ``index``; unknown values raise ``ValueError``.

    Through one hash table built in C (pandas' ``Index.get_indexer``, the same hash and equality
    as the dict's) instead of a dict lookup per value: a report's 10^6 labels are encoded several
    times.
    """
    if not len(values):
        return np.zeros(0, dtype=np.int64)
    keys = list(index)
    found = pd.Index(keys, dtype=object).get_indexer(np.asarray(values, dtype=object) if not isinstance(values, np.ndarray)
                                                      or values.dtype != object else values)
    if (found < 0).any():
        raise ValueError(f"{what} contains {values[int(np.flatnonzero(found < 0)[0])]!r}, which is not in labels")
    codes = np.asarray([index[key] for key in keys], dtype=np.int64)
    return codes[found]


def is_numeric_label(value: Any) -> bool:
    """Return ``True`` for real numbers usable as points on a scale."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def as_float_array(values: Any, what: str) -> np.ndarray:
    """Return a 1-D float array; ``None``/NA become NaN; non-numeric values raise."""
    items = to_list(values)
    try:
        arr = np.array([np.nan if is_missing(v) else v for v in items], dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be numeric") from None
    if arr.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional")
    return arr
