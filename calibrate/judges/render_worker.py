"""A render worker process: `python -m calibrate.judges.render_worker` (started by
calibrate.judges.render_pool, never by hand).

It reads length-prefixed JSON requests on stdin and answers each on stdout:

    {"op": "check", "source", "target", "part", "task", "limits"}  →  {"ok": true} | {"error": "…"}
    {"op": "render", "source", "part", "context", "limits"}          →  {"text": "…"} | {"error": "…"}

Before each request it sets its own limits: RLIMIT_AS to `limits.memory_mb` MiB (an allocation
beyond it is a MemoryError, answered as the item's error, after which the worker retires) and
RLIMIT_CPU to the CPU seconds it has used plus the render's limit and a second (beyond it the
kernel ends it with SIGXCPU). Inside, the render runs in the same bounded sandbox as ever
(calibrate.judges.sandbox), with `isolated=False`. It exits when its stdin closes.
"""

from __future__ import annotations

import math
import resource
import sys
from typing import Any

MIB = 1024 * 1024


def _set_limits(limits: dict[str, Any]) -> None:
    memory = int(limits.get("memory_mb") or 0)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if memory > 0:
        wanted = memory * MIB if hard == resource.RLIM_INFINITY else min(memory * MIB, hard)
        resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = math.ceil(usage.ru_utime + usage.ru_stime + float(limits.get("seconds") or 0)) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu if hard == resource.RLIM_INFINITY else min(cpu, hard), hard))


def handle(message: dict[str, Any]) -> dict[str, Any]:
    """Answer one request (see the module docstring)."""
    from calibrate.judges.errors import PromptError, RenderError  # noqa: PLC0415 - loaded after the limits are in place
    from calibrate.judges.render import check_in_process, render_in_process, restore_context  # noqa: PLC0415
    from calibrate.judges.sandbox import Limits  # noqa: PLC0415

    given = message.get("limits") or {}
    limits = Limits(float(given.get("seconds", 2)), int(given.get("max_chars", 200_000)),
                    int(given.get("max_depth", 100)), isolated=False)
    part = message.get("part") or "template"
    try:
        if message.get("op") == "check":
            check_in_process(message["source"], target=message["target"], part=part, task=message.get("task"), limits=limits)
            return {"ok": True}
        if message.get("op") == "render":
            return {"text": render_in_process(message["source"], restore_context(message.get("context") or {}), limits, part)}
        return {"error": f"unknown request {message.get('op')!r}"}
    except (PromptError, RenderError) as exc:  # the reason too, so that the page words it in the reader's language
        return {"error": str(exc), **({"reason": exc.reason.to_dict()} if exc.reason is not None else {})}


def main() -> None:
    """Serve requests until stdin closes."""
    from calibrate.judges.render_pool import read_frame, write_frame  # noqa: PLC0415

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash is reported, not dumped (a core takes seconds to write)
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing a template or library prints may corrupt the answers
    import calibrate.judges.render  # noqa: F401, PLC0415 - load everything before the first request's limits

    write_frame(answers, {"ready": True})
    while True:
        message = read_frame(requests)
        if message is None:
            return
        retire = False
        try:
            _set_limits(message.get("limits") or {})
            answer = handle(message)
        except MemoryError:
            answer, retire = {"error": f"{message.get('part') or 'template'} refused: the render ran out of memory "
                                       "(PROMPT_RENDER_MEMORY_MB)"}, True
        except RecursionError:
            answer = {"error": f"{message.get('part') or 'template'} refused: it recurses too deeply"}
        except Exception as exc:  # a bug here must answer, not leave the caller waiting for the time limit
            answer, retire = {"error": f"{message.get('part') or 'template'} refused: {type(exc).__name__}: {exc}"}, True
        if retire:
            answer["retire"] = True
        try:
            write_frame(answers, answer)
        except MemoryError:
            return
        if retire:
            return


if __name__ == "__main__":
    main()
