"""The bounded Jinja2 sandbox judge templates render in: every render has a time limit and a
size limit, and no operation of a template can build more text than the limits allow.

    Limits              the two settings a render runs under (PROMPT_RENDER_SECONDS,
                        PROMPT_RENDER_MAX_CHARS; docs/security.md)
    BoundedEnvironment  ImmutableSandboxedEnvironment with the checks below
    render(template, context, limits, part=...)
                        the one way to render: streams the output, raises RenderError

Jinja's sandbox keeps a template away from Python's internals but not from the machine's time
and memory: `range(100000)` nested twice runs for minutes, and `question.center(500000000)`
allocates gigabytes in one call. A time limit checked between operations cannot stop a single
huge allocation, so the two are closed differently:

- **Time.** A deadline is checked at every step of every `{% for %}` (the code generator wraps
  each loop's iterable, so loops that make no calls — three nested loops over `question` — are
  stopped too), at every call, filter, intercepted operator, `~` and output chunk. Recursion
  (a macro calling itself) ends in RecursionError, reported as such.
- **Size.** Operations whose result size follows from their arguments are checked *before* they
  run: padding (`center`, `ljust`, `rjust`, `zfill`, `|center`, `|indent`, format widths and
  precisions, `%` widths), repetition (`*`), `**`, `replace`, `expandtabs`, `translate`, `join`,
  `|wordwrap`, `|batch`, `|slice`, `|tojson`, `|pprint`, `|urlize`, `lipsum`, `int.to_bytes`,
  and `range` (at most `MAX_RANGE` numbers). Every text a template builds (`~`, `+`, a filter,
  a method, a `{% set %}` block, a macro's output) is counted against a work budget of
  `WORK_FACTOR` × the output limit, so many moderate values cannot add up to gigabytes either.
  Lists, tuples and dicts a template builds may not print as more than that budget (checked
  when they are built, so `[x, x]` doubled in a loop is refused long before anything compares,
  hashes or prints it). The output is streamed through `generate()` and counted.
- **Depth.** Lists, tuples, dicts and namespaces a template builds may nest at most
  `Limits.max_depth` levels (PROMPT_RENDER_MAX_DEPTH, `nesting_depth`): deeper ones crash the C
  code that hashes, prints or compares them (a 160,000-level tuple and `|unique`: SIGSEGV).
- **Costly filters** (`COSTLY_FILTERS`: `|batch`, `|striptags`, `|sort`…) are refused on more
  than PROMPT_RENDER_MAX_CHARS characters or elements before they run: their cost grows faster
  than their input, or one regular expression over the whole text cannot be interrupted.
- **Shared context.** The environment is immutable (`ImmutableSandboxedEnvironment`): a template
  cannot `append` to `task.labels` or `update` the metadata another item will see.

How big a value would print, and how deeply it nests, is measured without printing or following
it (calibrate/judges/value_sizes.py). Data passed in (the sample's question, contexts…) is not
built by the template and is bounded by
the importer's limits; only what the template makes of it is counted.
And whatever these checks miss, the process pays for: renders of user templates run in worker
processes (calibrate.judges.render_pool) unless `Limits.isolated` is False (inside a worker).
"""

from __future__ import annotations

import functools
import inspect
import re
import time
import types
from collections import abc
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from jinja2 import Template, nodes, pass_environment, pass_eval_context
from jinja2.compiler import CodeGenerator, Frame
from jinja2.filters import make_attrgetter
from jinja2.runtime import Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEscapeFormatter, SandboxedFormatter
from jinja2.utils import generate_lorem_ipsum
from markupsafe import Markup

from calibrate.judges.errors import RenderError
from calibrate.judges.value_sizes import list_depth, measure, nesting_depth, printed_size
from calibrate.reasons import Reason

DEFAULT_SECONDS = 2.0
DEFAULT_MAX_CHARS = 200_000
WORK_FACTOR = 20  # the text a render may build, as a multiple of its output limit
MAX_RANGE = 10_000  # numbers one range() may produce
MAX_INT_BITS = 10_000  # about 3,000 digits: more than any prompt needs, far below a slow multiplication
# What a limit names when it is not the template's own code: made once, as every printed value and block is counted.
PRINTING, BLOCK, LIST_OR_DICT = Reason("render_of_printing"), Reason("render_of_block"), Reason("render_of_list_or_dict")
DEFAULT_MAX_DEPTH = 100  # how deeply the lists, tuples and dicts a template builds may nest
DEFAULT_MEMORY_MB = 512  # the address space of a render worker process
DEFAULT_WORKERS = 2  # render worker processes per server or command
DEFAULT_MAX_ANSWER_BYTES = 1024 * 1024  # JUDGE_MAX_ANSWER_BYTES (calibrate.judges.backends reads answers)
# Filters whose cost grows faster than their input or that no deadline can interrupt (one regex over
# the whole text): refused on a text of more than PROMPT_RENDER_MAX_CHARS characters, or a list of
# more than that many elements, before they run.
COSTLY_FILTERS = frozenset({"batch", "slice", "list", "striptags", "urlize", "wordwrap", "unique", "sort", "groupby",
                            "dictsort", "title", "capitalize", "wordcount", "tojson", "pprint", "xmlattr", "reverse"})


@dataclass(frozen=True)
class Limits:
    """What one render may use: wall time in seconds, output size in characters, the nesting depth of
    what it builds; and where it runs: `isolated` renders go to a worker process
    (calibrate.judges.render_pool) of at most `memory_mb` MiB, up to `workers` of them.

    The run's other bound on untrusted input rides along, since every caller already builds
    this from the settings: `max_answer_bytes`, the largest judge answer read (decoded).
    """

    seconds: float = DEFAULT_SECONDS
    max_chars: int = DEFAULT_MAX_CHARS
    max_depth: int = DEFAULT_MAX_DEPTH
    memory_mb: int = DEFAULT_MEMORY_MB
    workers: int = DEFAULT_WORKERS
    isolated: bool = True
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES  # not a render's: the largest judge answer a run reads
    wait: bool = True  # False: refused (Busy, 503) at once when every render worker is busy (a web request's trial)

    @classmethod
    def from_settings(cls, settings: abc.Mapping[str, Any]) -> Limits:
        """Return the limits configured by the PROMPT_RENDER_* settings (a Flask config; docs/security.md)."""
        return cls(float(settings.get("PROMPT_RENDER_SECONDS", DEFAULT_SECONDS)),
                   int(settings.get("PROMPT_RENDER_MAX_CHARS", DEFAULT_MAX_CHARS)),
                   int(settings.get("PROMPT_RENDER_MAX_DEPTH", DEFAULT_MAX_DEPTH)),
                   int(settings.get("PROMPT_RENDER_MEMORY_MB", DEFAULT_MEMORY_MB)),
                   int(settings.get("PROMPT_RENDER_WORKERS", DEFAULT_WORKERS)),
                   max_answer_bytes=int(settings.get("JUDGE_MAX_ANSWER_BYTES", DEFAULT_MAX_ANSWER_BYTES)))

    @property
    def work_chars(self) -> int:
        return self.max_chars * WORK_FACTOR


DEFAULT_LIMITS = Limits()


class _Budget:
    """The running account of one render: its deadline, the output and work still allowed."""

    __slots__ = ("deadline", "depths", "limits", "output_left", "sizes", "work_left")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.seconds
        self.output_left = limits.max_chars
        self.work_left = limits.work_chars
        # Printed sizes of the containers this render built (id → (container, size)): a template
        # cannot change a list or dict once built (only a namespace, never remembered), so `[x, x]`
        # costs the size of x once, not a walk.
        self.sizes: dict[int, tuple[Any, int]] = {}
        self.depths: dict[int, tuple[Any, int]] = {}  # nesting depths of the containers built, likewise

    def size(self, value: Any, limit: int | None = None) -> int:
        """Return `printed_size(value)`, stopping beyond `limit` (default: the work left)."""
        return printed_size(value, self.work_left if limit is None else limit, self.sizes)

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise RenderError(Reason("render_too_slow", seconds=self.limits.seconds))

    def allow(self, chars: int, what: Reason | str) -> None:
        """Refuse an operation that would build `chars` characters when less work is left."""
        if chars > self.work_left:
            work = self.limits.work_chars
            spent = work - self.work_left
            raise RenderError(Reason("render_work_already", what=what, chars=chars, spent=spent, work=work, factor=WORK_FACTOR)
                              if spent else Reason("render_work", what=what, chars=chars, work=work, factor=WORK_FACTOR))

    def spend(self, chars: int, what: Reason | str) -> None:
        self.allow(chars, what)
        self.work_left -= chars

    def output(self, chars: int) -> None:
        self.output_left -= chars
        if self.output_left < 0:
            raise RenderError(Reason("render_too_long", limit=self.limits.max_chars))


_ACTIVE: ContextVar[_Budget | None] = ContextVar("calibrate_render_budget", default=None)


def _budget() -> _Budget:
    budget = _ACTIVE.get()
    if budget is None:
        # Jinja folds constants at compile time; an error there defers the expression to the render.
        raise RenderError(Reason("render_unbounded"))
    return budget


def render(template: Template, context: dict[str, Any], limits: Limits, *, part: str = "template") -> str:
    """Render a template of `BoundedEnvironment` within `limits`; RenderError("{part} refused: …") if it hits one.

    Other errors of the template (an undefined name, a filter given the wrong type) propagate
    as they are, for the caller to report.
    """
    budget = _Budget(limits)
    token = _ACTIVE.set(budget)
    try:
        pieces = []
        for piece in template.generate(context):
            budget.tick()
            budget.output(len(piece))
            pieces.append(piece)
        return "".join(pieces)
    except RenderError as exc:
        raise RenderError(Reason("render_refused", part=part, refusal=exc.reason if exc.reason is not None else str(exc))) from None
    except RecursionError:
        raise RenderError(Reason("render_recursion", part=part)) from None
    except MemoryError:  # the checks above should make this unreachable; never let it take the process down
        raise RenderError(Reason("render_memory", part=part)) from None
    finally:
        _ACTIVE.reset(token)


def _whole(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be a whole number, got {type(value).__name__}")
    return value


def _check_int(budget: _Budget, value: Any, what: Reason | str) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        raise RenderError(Reason("render_int_bits", what=what, bits=MAX_INT_BITS))


def _replace_size(text: str | bytes, old: Any, new: Any, count: Any) -> int:
    if not isinstance(old, type(text)) or not isinstance(new, type(text)):
        return len(text)  # str.replace raises TypeError itself
    hits = len(text) + 1 if not old else text.count(old)
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        hits = min(hits, count)
    return len(text) + max(0, hits * (len(new) - len(old)))


_PERCENT = re.compile(r"%(?:\(([^)]*)\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?(.)", re.DOTALL)
_DIGITS = re.compile(r"\d+")


def _percent_size(budget: _Budget, fmt: str | bytes, args: Any) -> int:
    """Return an upper bound of the size of `fmt % args`, refusing `*` widths (their width comes from data)."""
    text = fmt.decode("latin-1") if isinstance(fmt, (bytes, bytearray)) else fmt
    items = args if isinstance(args, tuple) else (args,)
    total, position = len(text), 0
    limit = budget.work_left
    for match in _PERCENT.finditer(text):
        key, width, precision, conversion = match.groups()
        if conversion == "%":
            continue
        if width == "*" or precision == "*":
            raise RenderError(Reason("render_star_width"))
        if key is not None and isinstance(args, abc.Mapping):
            value = args.get(key)
        else:
            value = items[position] if position < len(items) else None
            position += 1
        total += max(int(width or 0), int(precision or 0)) + budget.size(value, limit) + 8
        if total > limit:
            break
    return total


# --------------------------------------------------------------------------- checked operations


def bounded_range(*args: Any) -> range:
    """range(), refused beyond MAX_RANGE numbers."""
    numbers = range(*args)
    if len(numbers) > MAX_RANGE:
        raise RenderError(Reason("render_range", count=len(numbers), limit=MAX_RANGE))
    return numbers


def bounded_lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    """lipsum(), refused when it would build more text than the render may."""
    budget = _budget()
    budget.allow(_whole(n, "lipsum's n") * _whole(max, "lipsum's max") * 12, f"lipsum({n}, max={max})")
    return generate_lorem_ipsum(n=n, html=html, min=min, max=max)


class _Ticking:
    """A `{% for %}` loop's iterable that checks the deadline at every step (keeps len() for loop.length)."""

    __slots__ = ("iterable",)

    def __init__(self, iterable: Any) -> None:
        self.iterable = iterable

    def __iter__(self) -> abc.Iterator[Any]:
        budget = _budget()
        for item in self.iterable:
            budget.tick()
            yield item

    def __len__(self) -> int:
        return len(self.iterable)


def _check_method(budget: _Budget, method: Any, args: tuple, kwargs: dict) -> tuple:
    """Refuse a call of a built-in method that would build too much; return its arguments (join's, materialized)."""
    owner, name = getattr(method, "__self__", None), getattr(method, "__name__", "")
    if isinstance(owner, (str, bytes, bytearray)):
        what = f"{name}()"
        if name in ("center", "ljust", "rjust", "zfill"):
            width = args[0] if args else kwargs.get("width", 0)
            budget.allow(max(len(owner), _whole(width, f"{name}'s width")), f"{name}({width})")
        elif name == "expandtabs":
            size = args[0] if args else kwargs.get("tabsize", 8)
            budget.allow(len(owner) + owner.count("\t" if isinstance(owner, str) else b"\t") * max(0, _whole(size, "tabsize")),
                         f"expandtabs({size})")
        elif name == "replace":
            old = args[0] if args else kwargs.get("old")
            new = args[1] if len(args) > 1 else kwargs.get("new")
            count = args[2] if len(args) > 2 else kwargs.get("count", -1)
            budget.allow(_replace_size(owner, old, new, count), what)
        elif name == "translate" and args:
            table = args[0]
            values = table.values() if isinstance(table, abc.Mapping) else table if isinstance(table, (list, tuple)) else ()
            longest = max((len(v) for v in values if isinstance(v, (str, bytes))), default=1)
            budget.allow(len(owner) * max(1, longest), what)
        elif name == "join" and len(args) == 1 and not kwargs:
            parts = []
            total = 0
            for part in args[0]:
                budget.tick()
                total += (len(part) if isinstance(part, (str, bytes)) else 0) + (len(owner) if parts else 0)
                budget.allow(total, what)
                parts.append(part)
            return (parts,)
    elif isinstance(owner, int) and name == "to_bytes":
        length = args[0] if args else kwargs.get("length", 1)
        budget.allow(_whole(length, "to_bytes' length"), f"to_bytes({length})")
    return args


def _account(budget: _Budget, result: Any, what: Reason | str, inputs: tuple = ()) -> Any:
    """Count what an operation built against the work budget; refuse containers that print too large."""
    if isinstance(result, (str, bytes)):
        if not any(result is value for value in inputs):
            budget.spend(len(result), what)
    elif isinstance(result, (list, tuple, dict, set, frozenset)):
        size, mutable = measure(result, budget.limits.work_chars, budget.sizes)
        if size > budget.limits.work_chars:
            raise RenderError(Reason("render_prints", what=what, limit=budget.limits.work_chars, factor=WORK_FACTOR))
        depth = nesting_depth(result, budget.limits.max_depth, budget.depths, steps=max(size, 1) * 2)
        if depth > budget.limits.max_depth:
            raise RenderError(Reason("render_nested", what=what, depth=budget.limits.max_depth))
        if not mutable:
            budget.sizes[id(result)] = (result, size)
            budget.depths[id(result)] = (result, depth)
        budget.spend(len(result), what)
    elif isinstance(result, int):
        _check_int(budget, result, what)
    return result


class _BoundedFormatter(SandboxedFormatter):
    """str.format with each field's width and size checked first and the total counted as it grows."""

    def __init__(self, env: Any, budget: _Budget, fmt: str, **kwargs: Any) -> None:
        super().__init__(env, **kwargs)
        self.budget = budget
        self.total = len(fmt)

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        if conversion is not None:
            self.budget.allow(self.total + self.budget.size(value), "format()")
        return super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> Any:
        self.budget.tick()
        widest = max((int(d) for d in _DIGITS.findall(format_spec)), default=0)
        self.budget.allow(self.total + widest + self.budget.size(value) + 8, "format()")
        text = super().format_field(value, format_spec)
        self.total += len(text)
        self.budget.allow(self.total, "format()")
        return text


class _BoundedEscapeFormatter(_BoundedFormatter, SandboxedEscapeFormatter):
    pass


# --------------------------------------------------------------------------- filters


def _filter_checks() -> dict[str, abc.Callable[[_Budget, dict[str, Any]], None]]:
    """Return the checks run before the filters whose result size follows from their arguments."""

    def center(budget: _Budget, a: dict[str, Any]) -> None:
        width = _whole(a.get("width", 80), "|center's width")
        budget.allow(max(width, len(a["value"]) if isinstance(a["value"], str) else 0), f"|center({width})")

    def indent(budget: _Budget, a: dict[str, Any]) -> None:
        width = a.get("width", 4)
        pad = len(width) if isinstance(width, str) else _whole(width, "|indent's width")
        text = a["s"] if isinstance(a["s"], str) else ""
        budget.allow(pad, f"|indent({width!r})")
        budget.allow(len(text) + (text.count("\n") + 2) * max(0, pad), f"|indent({width!r})")

    def format_(budget: _Budget, a: dict[str, Any]) -> None:
        value = a["value"]
        if isinstance(value, str):
            budget.allow(_percent_size(budget, value, a.get("kwargs") or a.get("args", ())), "|format")

    def batch(budget: _Budget, a: dict[str, Any]) -> None:
        if a.get("fill_with") is not None:
            budget.allow(_whole(a["linecount"], "|batch's size"), f"|batch({a['linecount']})")

    def slice_(budget: _Budget, a: dict[str, Any]) -> None:
        budget.allow(_whole(a["slices"], "|slice's count"), f"|slice({a['slices']})")

    def wordwrap(budget: _Budget, a: dict[str, Any]) -> None:
        text = a["s"] if isinstance(a["s"], str) else ""
        width = max(1, _whole(a.get("width", 79), "|wordwrap's width"))
        wrap = a.get("wrapstring")
        lines = 2 * len(text) // width + text.count("\n") + 1
        budget.allow(len(text) + lines * len(wrap if isinstance(wrap, str) else "\n"), "|wordwrap")

    def replace(budget: _Budget, a: dict[str, Any]) -> None:
        text = a["s"]
        if isinstance(text, str):
            count = a.get("count")
            budget.allow(_replace_size(text, a["old"], a["new"], -1 if count is None else count), "|replace")

    def tojson(budget: _Budget, a: dict[str, Any]) -> None:
        indent = a.get("indent")
        step = len(indent) if isinstance(indent, str) else _whole(indent or 0, "|tojson's indent")
        size = budget.size(a["value"])
        # \uXXXX escapes make up to 6 characters of one; an indented line is indented by its depth.
        budget.allow(6 * size + (size * max(0, step) * list_depth(a["value"], size) if step else 0), "|tojson")

    def pprint(budget: _Budget, a: dict[str, Any]) -> None:
        size = budget.size(a["value"])
        budget.allow(2 * size + size * list_depth(a["value"], size), "|pprint")

    def urlize(budget: _Budget, a: dict[str, Any]) -> None:
        text = a["value"] if isinstance(a["value"], str) else ""
        extra = sum(len(str(a.get(key) or "")) for key in ("target", "rel")) + 64
        budget.allow(3 * len(text) + (len(text) // 3 + 1) * extra, "|urlize")

    return {"center": center, "indent": indent, "format": format_, "batch": batch, "slice": slice_,
            "wordwrap": wordwrap, "replace": replace, "tojson": tojson, "pprint": pprint, "urlize": urlize}


@pass_eval_context
def _join(eval_ctx: Any, value: Any, d: str = "", attribute: str | int | None = None) -> str:
    """|join, counting the parts as they come (the items may be any values; each prints to a string)."""
    budget = _budget()
    if attribute is not None:
        value = map(make_attrgetter(eval_ctx.environment, attribute), value)
    sep = str(d)
    parts: list[str] = []
    total = 0
    for item in value:
        budget.tick()
        if not isinstance(item, str):
            budget.allow(total + budget.size(item), "|join")
            item = str(item)
        total += len(item) + (len(sep) if parts else 0)
        budget.allow(total, "|join")
        parts.append(item)
    return sep.join(parts)


@pass_environment
def _sum(environment: Any, iterable: Any, attribute: str | int | None = None, start: Any = 0) -> Any:
    """|sum in linear time: lists and tuples are extended, not re-copied at every step as sum() does."""
    budget = _budget()
    if attribute is not None:
        iterable = map(make_attrgetter(environment, attribute), iterable)
    if not isinstance(start, (list, tuple)):
        total = start
        for item in iterable:
            budget.tick()
            total = total + item
            _check_int(budget, total, "|sum")
        return total
    kind = type(start)
    out = list(start)
    for item in iterable:
        budget.tick()
        if not isinstance(item, kind):
            raise TypeError(f'can only concatenate {kind.__name__} (not "{type(item).__name__}") to {kind.__name__}')
        budget.spend(len(item), "|sum")
        out.extend(item)
    return out if kind is list else tuple(out)


def _check_costly(budget: _Budget, name: str, value: Any) -> None:
    """Refuse a costly filter (COSTLY_FILTERS) on more than PROMPT_RENDER_MAX_CHARS characters or elements."""
    if isinstance(value, (str, bytes)):
        count, code = len(value), "render_filter_chars"
    elif isinstance(value, abc.Sized) and not isinstance(value, range):
        count, code = len(value), "render_filter_elements"
    else:
        return
    if count > budget.limits.max_chars:
        raise RenderError(Reason(code, name=name, count=count, limit=budget.limits.max_chars))


def _checked_filter(name: str, func: abc.Callable[..., Any], check: abc.Callable[..., None] | None) -> abc.Callable[..., Any]:
    signature = inspect.signature(func) if check is not None else None
    # Jinja's async_variant filters (|slice, |list…) take an eval context their signature does not show.
    hidden = 1 if getattr(func, "jinja_async_variant", False) and not hasattr(inspect.unwrap(func), "jinja_pass_arg") else 0

    first = 1 if getattr(func, "jinja_pass_arg", None) is not None else 0  # the value filtered, after any context
    costly = name in COSTLY_FILTERS

    @functools.wraps(func)  # keeps jinja_pass_arg: Jinja passes the context as before
    def checked(*args: Any, **kwargs: Any) -> Any:
        budget = _budget()
        budget.tick()
        if costly and len(args) > first:
            _check_costly(budget, name, args[first])
        if check is not None:
            bound = signature.bind(*args[hidden:], **kwargs)
            check(budget, bound.arguments)
        return _account(budget, func(*args, **kwargs), f"|{name}", args)

    return checked


# --------------------------------------------------------------------------- environment


class _BoundedCodeGenerator(CodeGenerator):
    """Jinja's code generator, with loops that check the deadline and literals and `~` that are counted."""

    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        for loop in node.find_all(nodes.For):
            ticking = nodes.EnvironmentAttribute("checked_iter", lineno=loop.iter.lineno)
            loop.iter = nodes.Call(ticking, [loop.iter], [], None, None, lineno=loop.iter.lineno)
        super().visit_Template(node, frame)

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.checked_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")

    def _checked_literal(self, visit: abc.Callable[[Any, Frame], None], node: nodes.Node, frame: Frame) -> None:
        self.write("environment.checked_value(")
        visit(node, frame)
        self.write(")")

    def visit_List(self, node: nodes.List, frame: Frame) -> None:
        self._checked_literal(super().visit_List, node, frame)

    def visit_Dict(self, node: nodes.Dict, frame: Frame) -> None:
        self._checked_literal(super().visit_Dict, node, frame)

    def visit_Tuple(self, node: nodes.Tuple, frame: Frame) -> None:
        if node.ctx == "load":
            self._checked_literal(super().visit_Tuple, node, frame)
        else:  # an assignment target: `{% for a, b in … %}`
            super().visit_Tuple(node, frame)


def _finalize(value: Any) -> Any:
    """Count what printing a non-text value (`{{ a_list }}`) builds, before it is printed."""
    if type(value) is str:
        return value
    budget = _budget()
    budget.spend(budget.size(value), PRINTING)
    return value


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with time and size limits (see the module docstring); render with `render`."""

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"+", "*", "**", "%"})

    def __init__(self, **options: Any) -> None:
        # No compile-time constant folding: everything a template computes runs inside a budget.
        super().__init__(optimized=False, finalize=_finalize, **options)
        self.globals["range"] = bounded_range
        self.globals["lipsum"] = bounded_lipsum
        self.filters["join"] = _join
        self.filters["sum"] = _sum
        checks = _filter_checks()
        self.filters = {name: _checked_filter(name, func, checks.get(name)) for name, func in self.filters.items()}
        # Macro bodies, {% set %} blocks, call and filter blocks join their output with this.
        self.concat = self.checked_buffer

    def checked_iter(self, iterable: Any) -> _Ticking:
        return _Ticking(iterable)

    def checked_buffer(self, pieces: abc.Iterable[str]) -> str:
        budget = _budget()
        budget.tick()
        pieces = list(pieces)
        size = sum(map(len, pieces))
        budget.spend(size, BLOCK)
        return "".join(pieces)

    def checked_concat(self, values: tuple[Any, ...]) -> str:
        budget = _budget()
        budget.tick()
        size = 0
        for value in values:
            size += budget.size(value)
            budget.allow(size, "~")
        text = "".join(map(str, values))
        budget.spend(len(text), "~")
        return text

    def checked_value(self, value: Any) -> Any:
        budget = _budget()
        budget.tick()
        return _account(budget, value, LIST_OR_DICT)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        budget = _budget()
        budget.tick()
        what = Reason("render_of_operator", operator=operator)
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, (str, bytes, list, tuple)) and isinstance(times, int):
                    budget.allow(budget.size(seq) * max(0, times), Reason("render_of_operator_times", operator=operator,
                                                                                      times=times))
            if isinstance(left, int) and isinstance(right, int) and left.bit_length() + right.bit_length() > MAX_INT_BITS:
                raise RenderError(Reason("render_int_bits", what=what, bits=MAX_INT_BITS))
        elif operator == "**":
            if (isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1
                    and left.bit_length() * right > MAX_INT_BITS):
                raise RenderError(Reason("render_power_bits", left=left, right=right, bits=MAX_INT_BITS))
        elif operator == "+":
            if isinstance(left, (str, bytes, list, tuple)) and isinstance(right, (str, bytes, list, tuple)):
                budget.allow(budget.size(left) + budget.size(right), what)
        elif operator == "%" and isinstance(left, (str, bytes)):
            budget.allow(_percent_size(budget, left, right), what)
        return _account(budget, self.binop_table[operator](left, right), what, (left, right))

    def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        budget = _budget()
        budget.tick()
        if isinstance(obj, (types.BuiltinMethodType, types.MethodType)):
            args = _check_method(budget, obj, args, kwargs)
        result = super().call(context, obj, *args, **kwargs)
        if isinstance(obj, Macro):
            return result  # its output was counted by checked_buffer
        return _account(budget, result, f"{getattr(obj, '__name__', 'a call')}()", (getattr(obj, "__self__", None),))

    def wrap_str_format(self, value: Any) -> abc.Callable[..., str] | None:
        """Return str.format / format_map with bounded widths and output, instead of Jinja's unbounded one."""
        if not isinstance(value, (types.MethodType, types.BuiltinMethodType)) or value.__name__ not in ("format", "format_map"):
            return None
        fmt = value.__self__
        if not isinstance(fmt, str):
            return None
        is_map = value.__name__ == "format_map"
        env = self

        def wrapper(*args: Any, **kwargs: Any) -> str:
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                args, kwargs = (), args[0]
            budget = _budget()
            budget.tick()
            if isinstance(fmt, Markup):
                formatter: _BoundedFormatter = _BoundedEscapeFormatter(env, budget, fmt, escape=fmt.escape)
            else:
                formatter = _BoundedFormatter(env, budget, fmt)
            return type(fmt)(formatter.vformat(fmt, args, kwargs))

        return functools.update_wrapper(wrapper, value)


__all__ = ["DEFAULT_LIMITS", "MAX_RANGE", "WORK_FACTOR", "BoundedEnvironment", "Limits", "printed_size", "render"]
