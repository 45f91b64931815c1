"""How big a value would print, and how deeply it nests, measured without printing or following it.

The template sandbox (calibrate/judges/sandbox.py) counts every list, tuple, dict and namespace
a template builds against its work budget and depth limit: `printed_size` and `measure` (about the length of
`str(value)`), `nesting_depth` (lists, tuples, sets, dicts and namespaces) and `list_depth` (what
`|pprint` and `|tojson` indent by). Each is iterative and stops at its limit, so a structure
deeper than Python's recursion limit, or a shared or cyclic one, costs a bounded number of steps.
"""

from __future__ import annotations

from collections import abc, deque
from typing import Any

from jinja2.utils import Namespace


def printed_size(value: Any, limit: int, known: dict[int, tuple[Any, int]] | None = None) -> int:
    """Return about how many characters `str(value)` makes, stopping as soon as it exceeds `limit`.

    Iterative (a deeply nested list is no RecursionError) and bounded: every element visited
    adds at least one character, so a shared or cyclic structure costs at most `limit` steps.
    `known` holds sizes already measured (id → (container, size)).
    """
    return measure(value, limit, known)[0]


def measure(value: Any, limit: int, known: dict[int, tuple[Any, int]] | None) -> tuple[int, bool]:
    """Return (printed size, whether a namespace was met: its size may change, so it is not to be remembered)."""
    if type(value) is str:
        return len(value), False
    total = 0
    mutable = False
    stack = [value]
    while stack:
        item = stack.pop()
        hit = known.get(id(item)) if known else None
        scalar = _scalar_size(item)
        if hit is not None and hit[0] is item:
            total += hit[1]
        elif scalar is not None:
            total += scalar
        elif isinstance(item, abc.Mapping):
            total += 2 + 4 * len(item)
            if total <= limit:
                for key, inner in item.items():
                    stack.append(key)
                    stack.append(inner)
        elif isinstance(item, (list, tuple, set, frozenset, deque, abc.MappingView)):
            total += 2 + 2 * len(item)
            if total <= limit:
                stack.extend(item)
        elif isinstance(item, Namespace):  # `{% set ns.x = … %}` changes it after it was measured
            mutable = True
            total += 12
            stack.append(object.__getattribute__(item, "_Namespace__attrs"))
        else:  # ranges, loops, macros, generators, cyclers: their text is short
            total += 32
        if total > limit:
            return total, mutable
    return total, mutable


def _scalar_size(item: Any) -> int | None:
    """Return how many characters a string, bytes, None, a bool or a number prints as (with quotes); None for others."""
    if isinstance(item, str):
        return len(item) + 2
    if isinstance(item, (bytes, bytearray)):
        return 4 * len(item) + 3
    if item is None or isinstance(item, bool):
        return 5
    if isinstance(item, int):
        return item.bit_length() // 3 + 2
    if isinstance(item, float):
        return 24
    return None


def nesting_depth(value: Any, limit: int, known: dict[int, tuple[Any, int]] | None = None, *, steps: int) -> int:
    """Return how deeply lists, tuples, sets, dicts (keys too) and namespaces nest in `value`, stopping beyond
    `limit` levels or `steps` elements visited (then the depth found so far, at least `limit` + 1 for a cycle).

    Iterative, so a structure deeper than Python's own recursion limit is measured, never followed
    by C code that would overflow the stack (hashing, printing, comparing a 160,000-level tuple
    crashes the interpreter). `known`: depths already measured (id → (container, depth)).
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack and steps > 0:
        item, depth = stack.pop()
        steps -= 1
        hit = known.get(id(item)) if known else None
        if hit is not None and hit[0] is item:
            deepest = max(deepest, depth - 1 + hit[1])
        elif isinstance(item, abc.Mapping):
            deepest = max(deepest, depth)
            for key, inner in item.items():
                stack.append((key, depth + 1))
                stack.append((inner, depth + 1))
        elif isinstance(item, (list, tuple, set, frozenset, deque)):
            deepest = max(deepest, depth)
            stack.extend((inner, depth + 1) for inner in item)
        elif isinstance(item, Namespace):
            deepest = max(deepest, depth)
            stack.append((object.__getattribute__(item, "_Namespace__attrs"), depth + 1))
        if deepest > limit:
            return deepest
    return deepest


def list_depth(value: Any, limit: int) -> int:
    """Return how deeply lists and dicts nest in `value` (for |pprint and |tojson, which indent by depth)."""
    deepest = 0
    stack = [(value, 1)]
    steps = 0
    while stack and steps <= limit:
        item, depth = stack.pop()
        steps += 1
        if isinstance(item, abc.Mapping):
            deepest = max(deepest, depth)
            stack.extend((inner, depth + 1) for inner in item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            deepest = max(deepest, depth)
            stack.extend((inner, depth + 1) for inner in item)
    return deepest
