"""A trajectory as a judge reads it: each step folded into text, and the rule that fits many steps into one call.

`step_entry` is a step's template fields (docs/judges.md, "Steps and trajectories"): index,
kind, name, status, input, output, tool {name, arguments, result} or None, turn, parent, and
`text`, the step as one block (`#3 tool dose_calculator (error)`, then its input, tool
arguments and result, output, each on its own line).

`fit` is the truncation rule, the same for a step's judge (the steps before the judged one)
and a trajectory's (every step): the steps are kept whole or not at all; the first step
(the agent's plan or the user's request as the agent took it) is kept, then the steps nearest
the end (nearest the judged step), going back while they fit in MAX_TRAJECTORY_CHARS; the
steps between are cut and counted ({steps, chars}), and the templates say so. The judged step
itself is never cut.
"""

from __future__ import annotations

import json
from typing import Any

MAX_TRAJECTORY_CHARS = 24_000  # characters of steps one judge call shows, besides the judged step


def _as_text(value: Any) -> str:
    """Return a step's field as text: strings as they are, other JSON values as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def step_entry(index: int, kind: str, name: str, status: str, input_: str | None, output: str | None, *,
               tool_name: str | None = None, tool_arguments: Any = None, tool_result: Any = None,
               turn: int | None = None, parent: int | None = None) -> dict[str, Any]:
    """Return a step's template fields, with its text block (module docstring)."""
    tool = ({"name": tool_name or "", "arguments": tool_arguments, "result": tool_result}
            if tool_name or tool_arguments is not None or tool_result is not None else None)
    head = f"#{index + 1} {kind}" + (f" {name}" if name else "") + (" (error)" if status == "error" else "")
    if turn is not None:
        head += f" [turn {turn + 1}]"
    lines = [head]
    for label, value in (("input", input_), ("arguments", tool["arguments"] if tool else None),
                         ("result", tool["result"] if tool else None), ("output", output)):
        text = _as_text(value)
        if text:
            lines.append(f"  {label}: {text}")
    return {"index": index, "kind": kind, "name": name, "status": status, "input": input_ or "", "output": output or "",
            "tool": tool, "turn": turn, "parent": parent, "text": "\n".join(lines)}


def row_entry(row: Any) -> dict[str, Any]:
    """Return `step_entry` of a stored step (a row with the Step columns: judges' items, few-shot and adjudication views)."""
    return step_entry(row.index, row.kind, row.name, row.status, row.input, row.output, tool_name=row.tool_name,
                      tool_arguments=row.tool_arguments, tool_result=row.tool_result, turn=row.turn, parent=row.parent)


def fit(steps: list[dict[str, Any]], budget: int = MAX_TRAJECTORY_CHARS) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Return the steps shown (in order) and what was cut ({steps, chars}) by the rule in the module docstring."""
    sizes = [len(step["text"]) + 1 for step in steps]
    if sum(sizes) <= budget:
        return list(steps), {"steps": 0, "chars": 0}
    kept = {0} if sizes[0] <= budget else set()
    used = sizes[0] if kept else 0
    for i in range(len(steps) - 1, 0, -1):
        if used + sizes[i] > budget:
            break
        kept.add(i)
        used += sizes[i]
    cut = [i for i in range(len(steps)) if i not in kept]
    return [steps[i] for i in sorted(kept)], {"steps": len(cut), "chars": sum(sizes[i] - 1 for i in cut)}


def step_fields(step: dict[str, Any], steps: list[dict[str, Any]], budget: int = MAX_TRAJECTORY_CHARS) -> dict[str, Any]:
    """Return the template fields of a step target: the step (whole), the steps before it as `fit` keeps them, and the cut."""
    before = [s for s in steps if s["index"] < step["index"]]
    shown, cut = fit(before, budget)
    return {"step": step, "trajectory": shown, "trajectory_cut": cut}


def trajectory_fields(steps: list[dict[str, Any]], budget: int = MAX_TRAJECTORY_CHARS) -> dict[str, Any]:
    """Return the template fields of a whole trajectory (a sample target): every step as `fit` keeps them, and the cut."""
    shown, cut = fit(steps, budget)
    return {"steps_shown": shown, "steps_cut": cut}


FOLD_CHARS = 160  # characters of a step's folded line in the workbench


def _fold(text: str, limit: int = FOLD_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def timeline(rows: list[Any]) -> list[dict[str, Any]]:
    """Return the workbench's timeline of a sample's steps (rows with the Step columns, in index order): per step its
    id, index, kind, name, status, turn, depth (steps above it by `parent`), the folded `line` (tool arguments → result,
    else input → output, on one line) and its unfolded `parts` [(input | arguments | result | output, text)]."""
    depth: dict[int, int] = {}
    out = []
    for row in rows:
        parent = row.parent
        depth[row.index] = depth.get(parent, -1) + 1 if parent is not None else 0
        arguments, result = _as_text(_json(row.tool_arguments)), _as_text(_json(row.tool_result))
        given, got = (arguments, result) if (arguments or result) else (row.input or "", row.output or "")
        line = " → ".join(part for part in (_fold(given, FOLD_CHARS // 2), _fold(got, FOLD_CHARS // 2)) if part)
        parts = [(name, text) for name, text in (("input", row.input or ""), ("arguments", arguments), ("result", result),
                                                 ("output", row.output or "")) if text]
        out.append({"id": row.id, "index": row.index, "kind": row.kind, "name": row.name or (row.tool_name or ""),
                    "status": row.status, "turn": row.turn, "depth": depth[row.index], "line": line, "parts": parts})
    return out


def _json(value: Any) -> Any:
    """Return a JSON column's value as read by a plain statement (SQLite gives its text; PostgreSQL the value)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
