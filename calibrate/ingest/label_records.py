"""A labels or verdicts file's lines, validated: each line's sample, task, target, annotator or judge, value and order.

The validating half of the labels and verdicts imports (ingest/labels.py runs the imports,
ingest/label_upserts.py stages and publishes them): `normalise_line` turns one record into its
`Line`s (two for a pairwise verdict given in both orders), filing every problem with its line
and field, against what `LineContext` read of the database once (the dataset's samples, the
tasks offered on it, the people or judges, a pairwise sample's responses). Formats and rules:
docs/formats.md, "Labels" and "Verdicts".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlmodel import Session

from calibrate import lookup
from calibrate.accounts import AccountError, validate_username
from calibrate.errors import NotFound, TaskError
from calibrate.ingest.fields import RecordCheck, invalid, kind_of
from calibrate.ingest.problems import reject
from calibrate.ingest.readers import Record
from calibrate.models import Judge, Response, Sample, Task, User, order_key
from calibrate.reasons import Reason
from calibrate.task_scopes import tasks_scopes
from calibrate.task_values import canonical_value, is_extraction, is_rewrite, pairwise_value

LABEL_FIELDS = ("sample_id", "annotator", "task", "value", "claim", "context", "step", "rationale", "order")
VERDICT_FIELDS = ("sample_id", "judge", "task", "value", "claim", "context", "step", "reason", "error", "raw",
                  "latency_ms", "input_tokens", "output_tokens", "order", "value_original", "value_swapped")
TWO_ORDERS = ("value_original", "value_swapped")  # a pairwise verdicts line with both orders
_LABEL_KNOWN, _VERDICT_KNOWN = frozenset(LABEL_FIELDS), frozenset(VERDICT_FIELDS)
_SAMPLES, _RESPONSES = Sample.__table__, Response.__table__
ORDER_WORDS = ("original", "swapped")
# Targets named by their 0-based place in the sample, and how a message calls that place.
POSITIONED = {"claim": "claim index", "context": "context rank", "step": "step index"}


@dataclass(slots=True)
class Line:
    """One validated line: its target (not yet resolved to a claim or context row) and content."""

    line: int | None
    sample_id: int
    external_id: str
    task: Task
    claim: int | None
    context: int | None
    step: int | None
    who: str  # annotator or judge name
    value: str | None
    text: str  # rationale (labels) or reason (verdicts)
    extra: dict[str, Any] = field(default_factory=dict)  # verdicts: status, error, raw, latency, tokens
    order: list[str] | None = None  # pairwise: the response ids as shown
    order_key: str = ""  # … as import positions ("1,0"): verdicts are one per order

    def key(self) -> tuple:
        return (self.task.id, self.sample_id, self.claim, self.context, self.step, self.who, self.order_key)

    def position(self) -> tuple[str, int] | None:
        """Return (claim|context|step, its 0-based index or rank) when the target is one of those, else None."""
        for name in POSITIONED:
            if getattr(self, name) is not None:
                return name, getattr(self, name)
        return None


class LineContext:
    """What validation needs to know about the database, loaded once."""

    def __init__(self, session: Session, dataset: str, kind: str, judge: str | None) -> None:
        try:
            self.dataset = lookup.dataset(session, dataset, hint=Reason("hint_import_its_samples"))
        except NotFound as exc:
            raise reject(str(exc)) from exc
        self.kind = kind
        self.judge = judge
        # The tasks offered on this dataset: the global ones and those scoped to it (task add --dataset).
        scopes = tasks_scopes(session)
        self.tasks, self.elsewhere = {}, {}
        for task in session.scalars(select(Task)):
            if task.id in scopes and self.dataset.name not in scopes[task.id]:
                self.elsewhere[task.name] = ", ".join(scopes[task.id])
            else:
                self.tasks[task.name] = task
        self.samples = dict(session.execute(select(_SAMPLES.c.external_id, _SAMPLES.c.id)
                                            .where(_SAMPLES.c.dataset_id == self.dataset.id)).all())
        if kind == "labels":
            self.people = dict(session.execute(select(User.username, User.id)).all())
        else:
            self.people = {name: (pk, kind_) for name, pk, kind_ in session.execute(select(Judge.name, Judge.id, Judge.kind))}
        self.session = session
        self._responses: dict[int, list[str]] | None = None
        self.columns: frozenset[str] = frozenset()  # a CSV file's header (an empty cell of a value column is a null verdict)

    def task_names(self) -> str:
        return ", ".join(sorted(name for name, task in self.tasks.items() if not is_extraction(task) and not is_rewrite(task)))

    def responses(self, sample_id: int) -> list[str]:
        """Return a sample's response ids in import order (read for the whole dataset at the first pairwise line)."""
        if self._responses is None:
            self._responses = {}
            for sid, key in self.session.execute(
                select(_RESPONSES.c.sample_id, _RESPONSES.c.key).join(_SAMPLES, _SAMPLES.c.id == _RESPONSES.c.sample_id)
                .where(_SAMPLES.c.dataset_id == self.dataset.id).order_by(_RESPONSES.c.sample_id, _RESPONSES.c.position)
            ):
                self._responses.setdefault(sid, []).append(key)
        return self._responses.get(sample_id, [])


def check_header(kind: str, judge: str | None) -> Callable[[list[str]], list[tuple[str | None, str]]]:
    """Return the CSV header check of a labels or verdicts file."""
    fields = LABEL_FIELDS if kind == "labels" else VERDICT_FIELDS
    required = ["sample_id", "task", "value", "annotator" if kind == "labels" else "judge"]
    if kind == "verdicts" and judge:
        required.remove("judge")

    def check(columns: list[str]) -> list[tuple[str | None, str]]:
        problems: list[tuple[str | None, str]] = []
        for name in required:
            if name == "value" and kind == "verdicts" and any(c in columns for c in TWO_ORDERS):
                continue  # a pairwise file with both orders on each line
            if name not in columns:
                hint = " (or give --judge NAME)" if name == "judge" else ""
                problems.append((name, f"the header has no column {name!r}{hint}; required: {', '.join(required)}"))
        for name in columns:
            if name not in fields:
                problems.append((name, f"unknown column (columns: {', '.join(fields)})"))
        return problems

    return check


def normalise_line(record: Record, check: RecordCheck, ctx: LineContext) -> list[Line] | None:
    """Validate one labels/verdicts record; return its Lines (two for a verdict in both orders), or None after filing problems."""
    data = record.fields
    verdicts = ctx.kind == "verdicts"
    check.unknown(data, _VERDICT_KNOWN if verdicts else _LABEL_KNOWN)
    external_id = check.identifier(data, "sample_id")
    sample_id = None
    if external_id is not None:
        sample_id = ctx.samples.get(external_id)
        if sample_id is None:
            check.bad("sample_id", f"no sample {external_id!r} in dataset {ctx.dataset.name!r}")
    task = _task(data, check, ctx)
    who = _judge(data, check, ctx) if verdicts else _annotator(data, check)
    claim = check.integer(data, "claim", minimum=0, what="a claim index (0, 1, 2, …)")
    context = check.integer(data, "context", minimum=0, what="a context rank (0, 1, 2, …)")
    step = check.integer(data, "step", minimum=0, what="a step index (0, 1, 2, …)")
    if task is not None:
        _check_target(task, data, check)
    pairwise = task is not None and task.kind == "pairwise"
    ids = ctx.responses(sample_id) if pairwise and sample_id is not None else []
    if pairwise and sample_id is not None and not ids:
        check.bad("sample_id", f"sample {external_id!r} has no responses, and task {task.name} compares responses")
    order = _order(data, check, task, ids) if task is not None and check.ok else None
    if verdicts:
        values = _verdict_values(data, check, ctx, task, ids, order)
    else:
        value = None
        if data.get("value") is None:
            check.bad("value", "is missing")
        elif task is not None:
            value = _label_value(task, data["value"], check, ids, "value")
        values = [(value, {}, order)]
    text = check.text(data, "reason" if verdicts else "rationale", required=False, empty_ok=True) or ""
    if not check.ok:
        return None
    out = []
    for value, extra, positions in values:
        shown = [ids[p] for p in positions] if positions is not None else None
        # One verdict per order; one label per annotator, whatever order it was made in.
        key = order_key(positions) if positions is not None and verdicts else ""
        out.append(Line(record.line, sample_id, external_id, task, claim if task.target == "claim" else None,
                        context if task.target == "context" else None, step if task.target == "step" else None, who,
                        value, text, extra, shown, key))
    return out


def _task(data: dict[str, Any], check: RecordCheck, ctx: LineContext) -> Task | None:
    """Return the line's task, or None after filing why it is not one of the dataset's (an extraction or the instruction rewrite never is)."""
    task_name = check.text(data, "task", required=True, max_chars=100)
    if task_name is None:
        return None
    name = task_name.strip()
    task = ctx.tasks.get(name)
    if task is None and name in ctx.elsewhere:
        check.bad("task", f"task {name} is scoped to {ctx.elsewhere[name]}: it is not "
                          f"labelled or judged on {ctx.dataset.name} (tasks: {ctx.task_names()})")
    elif task is None:
        check.bad("task", f"unknown task {task_name!r} (tasks: {ctx.task_names()})")
    elif is_extraction(task):
        check.bad("task", f"task {task.name} is an extraction: it has no {ctx.kind} (its claims are made with "
                          f"`calibrate claims extract` and corrected in the workbench; tasks: {ctx.task_names()})")
        return None
    elif is_rewrite(task):
        check.bad("task", f"task {task.name} is the instruction rewrite: it has no {ctx.kind} (`calibrate optimise` "
                          f"runs it; tasks: {ctx.task_names()})")
        return None
    return task


def _verdict_values(data: dict[str, Any], check: RecordCheck, ctx: LineContext, task: Task | None, ids: list[str],
                    order: list[int] | None) -> list[tuple[str | None, dict[str, Any], list[int] | None]]:
    """Return a verdicts line's (value, other columns, order as positions): one, or one per order given on the line."""
    pairwise = task is not None and task.kind == "pairwise"
    two = [name for name in TWO_ORDERS if name in data or (check.cells and name in ctx.columns)]
    if not two:
        value, extra = _verdict_value(data, check, task, ids if pairwise else None)
        # A pairwise verdict without `order` was judged in the original (import) order: one key per order.
        return [(value, extra, order if order is not None or not pairwise else list(range(len(ids))))]
    if not pairwise:
        check.bad(two[0], f"is for pairwise tasks (both presentation orders on one line); task "
                          f"{task.name if task else '?'} is {task.kind if task else 'unknown'}: give 'value'")
    elif "value" in data:
        check.bad("value", f"give either 'value' (with 'order') or {' and '.join(repr(n) for n in two)}, not both")
    elif data.get("order") is not None:
        check.bad("order", f"is implied by {two[0]!r}: leave it out")
    else:
        values = []
        for name in two:
            positions = list(range(len(ids))) if name == "value_original" else list(range(len(ids)))[::-1]
            value, extra = _verdict_value(data, check, task, ids, field=name)
            values.append((value, extra, positions))
        return values
    return []


def _label_value(task: Task, value: object, check: RecordCheck, ids: list[str], field: str) -> str | None:
    """Return a label's (or verdict's) value for its task and sample, or None after filing the problem."""
    try:
        return pairwise_value(task, value, ids) if task.kind == "pairwise" else canonical_value(task, value)
    except TaskError as exc:
        check.bad(field, str(exc))
        return None


def _order(data: dict[str, Any], check: RecordCheck, task: Task, ids: list[str]) -> list[int] | None:
    """Return the `order` of a pairwise line as import positions: a permutation of the sample's ids, or original/swapped."""
    value = data.get("order")
    if value is None:
        return None
    word = isinstance(value, str) and value.strip().casefold() in ORDER_WORDS
    if not word:
        value = check.structured(data, "order", "a list of the sample's response ids, or original or swapped")
        if invalid(value):
            return None
    if task.kind != "pairwise":
        check.bad("order", f"is for pairwise tasks (the presentation order of the responses); task {task.name} is {task.kind}")
        return None
    if not ids:
        return None
    if word:
        positions = list(range(len(ids)))
        return positions if value.strip().casefold() == "original" else positions[::-1]
    if not isinstance(value, list):
        check.bad("order", f"must be a list of the sample's response ids ({', '.join(ids)}), or original or swapped; "
                           f"found {kind_of(value)}")
        return None
    at = {key: position for position, key in enumerate(ids)}
    folded = {key.casefold(): position for position, key in enumerate(ids)}
    positions = []
    for item in value:
        text = str(item) if isinstance(item, int) and not isinstance(item, bool) else item
        position = at.get(text) if isinstance(text, str) else None
        if position is None and isinstance(text, str):
            position = folded.get(text.strip().casefold())
        if position is None:
            check.bad("order", f"{item!r} is not a response of this sample (responses: {', '.join(ids)})")
            return None
        positions.append(position)
    if sorted(positions) != list(range(len(ids))):
        check.bad("order", f"must list each of the sample's {len(ids)} responses once ({', '.join(ids)}), "
                           f"found {', '.join(map(str, value))}")
        return None
    return positions


def _annotator(data: dict[str, Any], check: RecordCheck) -> str | None:
    name = check.text(data, "annotator", required=True, max_chars=100)
    if name is None:
        return None
    try:
        return validate_username(name)
    except AccountError as exc:
        check.bad("annotator", str(exc))
        return None


def _judge(data: dict[str, Any], check: RecordCheck, ctx: LineContext) -> str | None:
    name = check.text(data, "judge", required=False, max_chars=200)
    if name is None and data.get("judge") is None:
        name = ctx.judge
        if name is None:
            check.bad("judge", "is missing (or give --judge NAME for the whole file)")
            return None
    elif name is not None and ctx.judge is not None and name != ctx.judge:
        check.bad("judge", f"is {name!r} but --judge names {ctx.judge!r}: leave one out, or make them agree")
        return None
    if name is None:
        return None
    known = ctx.people.get(name)
    if known is not None and known[1] != "imported":
        check.bad("judge", f"{name!r} is the judge of a prompt version (its verdicts come from runs): "
                           "import under another name")
        return None
    return name


def _check_target(task: Task, data: dict[str, Any], check: RecordCheck) -> None:
    """A claim task needs `claim`, a context task `context`, a step task `step`, a sample task none of them."""
    for name in POSITIONED:
        given = data.get(name) is not None
        if name == task.target and not given:
            what = {"claim": "claim index (0-based, among the sample's claims)", "context": "context rank (0-based)",
                    "step": "step index (0-based, in the trajectory's start order)"}[name]
            check.bad(name, f"is missing: task {task.name} judges each {name}, give its {what}")
        elif name != task.target and given:
            target = "the whole sample" if task.target == "sample" else f"{task.target}s"
            check.bad(name, f"is not allowed: task {task.name} judges {target}")


def _verdict_value(data: dict[str, Any], check: RecordCheck, task: Task | None, ids: list[str] | None = None, *,
                   field: str = "value") -> tuple[str | None, dict[str, Any]]:
    """Return a verdict's value (of `field`) and its other columns (status, error, raw, latency, tokens)."""
    error = check.text(data, "error", required=False) or ""
    raw_text = check.text(data, "raw", required=False, empty_ok=True) or ""
    extra = {
        "error": error, "raw": raw_text,
        "latency_ms": check.number(data, "latency_ms"),
        "input_tokens": check.integer(data, "input_tokens", minimum=0, what="a count (0 or more)"),
        "output_tokens": check.integer(data, "output_tokens", minimum=0, what="a count (0 or more)"),
    }
    if field not in data and not check.cells:
        check.bad(field, "is missing (null records a judge call that gave no usable verdict)")
        return None, extra
    raw_value = data.get(field)
    if raw_value is None:
        extra["status"] = "error" if error else "unparsed"
        return None, extra
    if error and field == "value":
        check.bad("error", "is only for a verdict whose value is null")
    extra["status"] = "ok"
    if task is None:
        return None, extra
    try:
        return (pairwise_value(task, raw_value, ids) if task.kind == "pairwise" else canonical_value(task, raw_value)), extra
    except TaskError as exc:
        check.bad(field, f"{exc} (a verdict with no usable value is written \"{field}\": null)")
        return None, extra
