"""Import experts' labels and judges' verdicts on the samples of a dataset, all or nothing.

A line names its target by the sample's id and, as its task requires, a claim index (claim
tasks) or a context rank (context tasks), counted among the sample's active claims and
contexts. The first pass validates every line and keeps only the key of each target (to find
duplicates); the target rows and the stored labels or verdicts of the samples the file names
are then read, and the second pass resolves each line's claim or context and stages the lines
that change something, chunk by chunk, as an import batch (calibrate/ingest/batches.py: each
chunk a short write transaction, invisible until the last small one publishes it with a few
set-based upserts). A problem found in the second pass (an index out of range) stops the
staging, the pass still lists every such problem, and the batch is removed (import_file rolls
back its savepoint in one transaction), so nothing of the file lands.

Labels are upserted on (task, target, annotator): the same value and rationale is unchanged;
another one updates the label and keeps the old one in a LabelRevision("update"). Verdicts
are upserted on (judge, task, target) — with pairwise tasks (judge, task, target, order). `"value": null` records a judge call with no usable
verdict (status "error" when an `error` is given, else "unparsed"); a value that is not
valid for the task is a problem of the file, never an unparsed verdict.

Pairwise tasks: the value must name one of the sample's own responses (or be `tie`, if the task
has it), and `order` records the presentation order the annotator or the judge saw (a list of
the sample's response ids, or `original` / `swapped`). Verdicts are then upserted on (judge,
task, target, order), and a verdicts line may give both orders at once: `value_original` and
`value_swapped` instead of `value` (docs/formats.md, "Pairwise").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Text, and_, case, cast, exists, false, func, insert, literal, null, or_, select, update
from sqlmodel import Session

from calibrate import lookup
from calibrate.accounts import AccountError, ensure_annotator, validate_username
from calibrate.errors import NotFound
from calibrate.ingest.batches import Writes
from calibrate.ingest.bulk import sync_id_sequence
from calibrate.ingest.fields import RecordCheck, invalid, kind_of
from calibrate.ingest.problems import ImportSummary, Problems, TooManyProblems, reject
from calibrate.ingest.readers import Progress, Record, read_records
from calibrate.models import (
    Claim,
    Context,
    ImportBatch,
    Judge,
    Label,
    LabelRevision,
    Response,
    Sample,
    StagedLabel,
    StagedVerdict,
    Task,
    User,
    Verdict,
    order_key,
    target_key,
    utcnow,
)
from calibrate.reasons import Reason
from calibrate.task_scopes import tasks_scopes
from calibrate.task_values import canonical_value, is_extraction, pairwise_value
from calibrate.tasks import TaskError, current_guideline

LABEL_FIELDS = ("sample_id", "annotator", "task", "value", "claim", "context", "rationale", "order")
VERDICT_FIELDS = ("sample_id", "judge", "task", "value", "claim", "context", "reason", "error", "raw",
                  "latency_ms", "input_tokens", "output_tokens", "order", "value_original", "value_swapped")
TWO_ORDERS = ("value_original", "value_swapped")  # a pairwise verdicts line with both orders
_LABEL_KNOWN, _VERDICT_KNOWN = frozenset(LABEL_FIELDS), frozenset(VERDICT_FIELDS)
CHUNK = 500  # ids per IN (...) query

_SAMPLES, _CLAIMS, _CONTEXTS = Sample.__table__, Claim.__table__, Context.__table__
_LABELS, _REVISIONS, _VERDICTS = Label.__table__, LabelRevision.__table__, Verdict.__table__
_RESPONSES = Response.__table__
ORDER_WORDS = ("original", "swapped")


@dataclass(slots=True)
class Line:
    """One validated line: its target (not yet resolved to a claim or context row) and content."""

    line: int | None
    sample_id: int
    external_id: str
    task: Task
    claim: int | None
    context: int | None
    who: str  # annotator or judge name
    value: str | None
    text: str  # rationale (labels) or reason (verdicts)
    extra: dict[str, Any] = field(default_factory=dict)  # verdicts: status, error, raw, latency, tokens
    order: list[str] | None = None  # pairwise: the response ids as shown
    order_key: str = ""  # … as import positions ("1,0"): verdicts are one per order

    def key(self) -> tuple:
        return (self.task.id, self.sample_id, self.claim, self.context, self.who, self.order_key)


class _Context:
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
        return ", ".join(sorted(name for name, task in self.tasks.items() if not is_extraction(task)))

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


def normalise_line(record: Record, check: RecordCheck, ctx: _Context) -> list[Line] | None:
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
    task = None
    task_name = check.text(data, "task", required=True, max_chars=100)
    if task_name is not None:
        task = ctx.tasks.get(task_name.strip())
        if task is None and task_name.strip() in ctx.elsewhere:
            check.bad("task", f"task {task_name.strip()} is scoped to {ctx.elsewhere[task_name.strip()]}: it is not "
                              f"labelled or judged on {ctx.dataset.name} (tasks: {ctx.task_names()})")
        elif task is None:
            check.bad("task", f"unknown task {task_name!r} (tasks: {ctx.task_names()})")
        elif is_extraction(task):
            check.bad("task", f"task {task.name} is an extraction: it has no {ctx.kind} (its claims are made with "
                              f"`calibrate claims extract` and corrected in the workbench; tasks: {ctx.task_names()})")
            task = None
    who = _judge(data, check, ctx) if verdicts else _annotator(data, check)
    claim = check.integer(data, "claim", minimum=0, what="a claim index (0, 1, 2, …)")
    context = check.integer(data, "context", minimum=0, what="a context rank (0, 1, 2, …)")
    if task is not None:
        _check_target(task, data, check)
    pairwise = task is not None and task.kind == "pairwise"
    ids = ctx.responses(sample_id) if pairwise and sample_id is not None else []
    if pairwise and sample_id is not None and not ids:
        check.bad("sample_id", f"sample {external_id!r} has no responses, and task {task.name} compares responses")
    order = _order(data, check, task, ids) if task is not None and check.ok else None
    two = [name for name in TWO_ORDERS if name in data or (check.cells and name in ctx.columns)]
    values: list[tuple[str | None, dict[str, Any], list[str] | None]] = []
    if verdicts and two:
        if not pairwise:
            check.bad(two[0], f"is for pairwise tasks (both presentation orders on one line); task "
                              f"{task.name if task else '?'} is {task.kind if task else 'unknown'}: give 'value'")
        elif "value" in data:
            check.bad("value", f"give either 'value' (with 'order') or {' and '.join(repr(n) for n in two)}, not both")
        elif data.get("order") is not None:
            check.bad("order", f"is implied by {two[0]!r}: leave it out")
        else:
            for name in two:
                positions = list(range(len(ids))) if name == "value_original" else list(range(len(ids)))[::-1]
                value, extra = _verdict_value(data, check, task, ids, field=name)
                values.append((value, extra, positions))
    elif verdicts:
        value, extra = _verdict_value(data, check, task, ids if pairwise else None)
        # A pairwise verdict without `order` was judged in the original (import) order: one key per order.
        values.append((value, extra, order if order is not None or not pairwise else list(range(len(ids)))))
    else:
        value = None
        if data.get("value") is None:
            check.bad("value", "is missing")
        elif task is not None:
            value = _label_value(task, data["value"], check, ids, "value")
        values.append((value, {}, order))
    text = check.text(data, "reason" if verdicts else "rationale", required=False, empty_ok=True) or ""
    if not check.ok:
        return None
    out = []
    for value, extra, positions in values:
        shown = [ids[p] for p in positions] if positions is not None else None
        # One verdict per order; one label per annotator, whatever order it was made in.
        key = order_key(positions) if positions is not None and verdicts else ""
        out.append(Line(record.line, sample_id, external_id, task, claim if task.target == "claim" else None,
                        context if task.target == "context" else None, who, value, text, extra, shown, key))
    return out


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


def _judge(data: dict[str, Any], check: RecordCheck, ctx: _Context) -> str | None:
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
    """A claim task needs `claim`, a context task `context`, a sample task neither."""
    needs = {"claim": "claim", "context": "context"}.get(task.target)
    for name in ("claim", "context"):
        given = data.get(name) is not None
        if name == needs and not given:
            what = "claim index (0-based, among the sample's claims)" if name == "claim" else "context rank (0-based)"
            check.bad(name, f"is missing: task {task.name} judges each {name}, give its {what}")
        elif name != needs and given:
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


# --------------------------------------------------------------------------- the imports


def import_labels(writes: Writes, source: str | Path, fmt: str, *, dataset: str,
                  progress: Callable[[int], object] | None = None, max_errors: int = 50,
                  max_field_chars: int = 1_000_000) -> ImportSummary:
    """Validate then upsert the labels of a file (annotators created without a password), as one import batch."""
    return _Import(writes, source, fmt, "labels", dataset, None, progress, max_errors, max_field_chars).run()


def import_verdicts(writes: Writes, source: str | Path, fmt: str, *, dataset: str, judge: str | None = None,
                    progress: Callable[[int], object] | None = None, max_errors: int = 50,
                    max_field_chars: int = 1_000_000) -> ImportSummary:
    """Validate then upsert the verdicts of a file (the judge created if missing, kind "imported"), as one import batch."""
    if judge is not None and (not judge.strip() or len(judge) > 200):
        raise reject("--judge must be a name of 1 to 200 characters", field="judge")
    return _Import(writes, source, fmt, "verdicts", dataset, judge, progress, max_errors, max_field_chars).run()


def _chunks(items: Iterable[int], size: int = CHUNK) -> Iterator[list[int]]:
    items = sorted(items)
    for start in range(0, len(items), size):
        yield items[start:start + size]


class _Import:
    def __init__(self, writes: Writes, source: str | Path, fmt: str, kind: str, dataset: str,
                 judge: str | None, progress, max_errors: int, max_field_chars: int) -> None:
        self.writes = writes
        self.source = source
        self.fmt = fmt
        self.kind = kind
        with writes.read() as session:
            self.ctx = _Context(session, dataset, kind, judge)
        self.problems = Problems(max_errors)
        self.limit = max_field_chars
        self.tick = Progress(progress)

    def records(self) -> Iterator[Record]:
        header = None
        if self.fmt == "csv":
            check = check_header(self.kind, self.ctx.judge)

            def header(columns: list[str]) -> list[tuple[str | None, str]]:
                self.ctx.columns = frozenset(columns)
                return check(columns)
        return read_records(self.source, self.fmt, header_check=header)

    def lines(self, problems: Problems) -> Iterator[Line | Record]:
        """Yield each valid Line, or the Record of a line with a problem (filed in `problems`)."""
        cells = self.fmt == "csv"
        for record in self.records():
            self.tick()
            if record.problem is not None:
                problems.add_problem(record.problem)
                yield record
                continue
            check = RecordCheck(record.line, cells=cells, problems=problems, limit=self.limit)
            lines = normalise_line(record, check, self.ctx)
            if lines is None:
                yield record
            else:
                yield from lines

    def run(self) -> ImportSummary:
        problems = self.problems
        count = 0
        seen: dict[tuple, int | None] = {}
        claim_samples: set[int] = set()
        context_samples: set[int] = set()
        no_value = no_value_errors = 0
        last_line: int | None = -1
        with self.writes.read() as session:
            self.ctx.session = session  # a pairwise line reads the dataset's responses (once)
            try:
                for line in self.lines(problems):
                    if isinstance(line, Record):
                        count += not line.whole_file
                        continue
                    count += line.line != last_line  # a line with both orders gives two verdicts
                    last_line = line.line
                    key = line.key()
                    first = seen.get(key, -1)
                    if first != -1:
                        problems.add(line.line, {"claim": "claim", "context": "context"}.get(line.task.target, "sample_id"),
                                     f"duplicate: line {first} already gives {self._what(line)}")
                        continue
                    seen[key] = line.line
                    if self.kind == "verdicts" and line.value is None:
                        no_value += 1
                        no_value_errors += line.extra.get("status") == "error"
                    if line.claim is not None:
                        claim_samples.add(line.sample_id)
                    elif line.context is not None:
                        context_samples.add(line.sample_id)
            except TooManyProblems:
                raise problems.rejected(count) from None
            self.tick.flush()
            samples = {sample_id for _, sample_id, *_ in seen}
            del seen
            claims = self._targets(session, _CLAIMS, _CLAIMS.c.index, claim_samples)
            contexts = self._targets(session, _CONTEXTS, _CONTEXTS.c.rank, context_samples)
            stager = (_LabelStager if self.kind == "labels" else _VerdictStager)(self, session, samples)
            self.writes.end_read(session)
        # Pass 2: resolve targets and stage the lines that change something, chunk by chunk, while
        # the file has no problem (what was staged is removed if one turns up). Pass 1 has filed
        # the lines' own problems already.
        writing = not problems
        quiet = Problems(1 << 30)
        try:
            try:
                for line in self.lines(quiet):
                    if isinstance(line, Record):
                        continue
                    target = self._resolve(line, claims, contexts)
                    if target is None:
                        writing = False
                    elif writing:
                        stager.add(line, *target)
            except TooManyProblems:
                raise problems.rejected(count) from None
            if problems:
                raise problems.rejected(count)
            stager.flush()
            added = updated = 0
            if self.writes.batch is not None:
                with self.writes.publish() as session:
                    added, updated = stager.publish(session)
        except BaseException:
            self.writes.abandon()
            raise
        self.writes.finish()
        self.tick.flush()
        unchanged = stager.unchanged + stager.staged - added - updated
        return ImportSummary(self.kind, self.ctx.dataset.name, added, updated, unchanged,
                             no_value=no_value, no_value_errors=no_value_errors,
                             created_accounts=sorted(stager.created))

    def _what(self, line: Line) -> str:
        target = (f"claim {line.claim} of" if line.claim is not None
                  else f"context {line.context} of" if line.context is not None else "")
        by = "annotator" if self.kind == "labels" else "judge"
        shown = f" in the order {', '.join(line.order)}" if line.order_key and line.order else ""
        return (f"a {line.task.name} {self.kind[:-1]} on {target} sample {line.external_id!r} by {by} {line.who!r}"
                f"{shown}").replace("on  ", "on ")

    def _targets(self, session: Session, table, position, sample_ids: set[int]) -> dict[tuple[int, int], int]:
        """Return (sample id, index or rank) -> row id of the active claims or contexts of the samples."""
        out: dict[tuple[int, int], int] = {}
        for chunk in _chunks(sample_ids):
            for sample_id, at, pk in session.execute(
                select(table.c.sample_id, position, table.c.id)
                .where(table.c.sample_id.in_(chunk), table.c.active.is_(True))
            ):
                out[(sample_id, at)] = pk
        return out

    def _resolve(self, line: Line, claims: dict, contexts: dict) -> tuple[int | None, int | None, str] | None:
        """Return (claim id, context id, target key) of a line, or None after filing a problem."""
        if line.claim is not None:
            pk = claims.get((line.sample_id, line.claim))
            if pk is None:
                self._out_of_range(line, "claim", claims)
                return None
            return pk, None, target_key("claim", pk)
        if line.context is not None:
            pk = contexts.get((line.sample_id, line.context))
            if pk is None:
                self._out_of_range(line, "context", contexts)
                return None
            return None, pk, target_key("context", pk)
        return None, None, target_key("sample", line.sample_id)

    def _out_of_range(self, line: Line, name: str, known: dict) -> None:
        n = sum(1 for sample_id, _ in known if sample_id == line.sample_id)
        index = line.claim if name == "claim" else line.context
        have = f"{n} {name}{'' if n == 1 else 's'} (0–{n - 1})" if n else f"no {name}s"
        noun = "claim index" if name == "claim" else "context rank"
        self.problems.add(line.line, name, f"{noun} {index} is out of range: sample {line.external_id!r} has {have}")


class _Stager:
    """Stage the lines of a file that change something, chunk by chunk, in an import batch; publish them.

    Lines equal to what is stored are only counted (`unchanged`): a file imported again stages
    nothing and starts no batch. Publishing upserts the staged rows with a few set-based
    statements, so it stays short however many rows the file has.
    """

    model: Any = None

    def __init__(self, job: _Import) -> None:
        self.job = job
        self.writes = job.writes
        self.unchanged = self.staged = 0
        self.rows: list[dict[str, Any]] = []
        self.created: list[str] = []  # labels: the annotator accounts that publishing created

    def stage(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self.staged += 1
        if len(self.rows) >= self.writes.chunk_size:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        if self.writes.batch is None:
            self.writes.open_batch(self.job.kind, self.job.ctx.dataset.name, Path(self.job.source).name)
        rows, self.rows = [{**row, "batch_id": self.writes.batch.id} for row in self.rows], []
        with self.writes.chunk() as session:
            session.execute(insert(self.model.__table__), rows)


def _order_text(order: list[str] | None) -> str | None:
    """Return a pairwise order as the JSON text it is stored as (None: not given)."""
    return None if order is None else json.dumps(order)


def _as_json(session: Session, expression: Any) -> Any:
    """Return a staged JSON text as a value for a JSON column (PostgreSQL needs the cast; SQLite stores the text)."""
    return cast(expression, JSON) if session.get_bind().dialect.name == "postgresql" else expression


def _json_text(column: Any) -> Any:
    """Return a JSON column as comparable text, JSON null and SQL NULL alike ("null")."""
    return func.coalesce(cast(column, Text), "null")


class _LabelStager(_Stager):
    """Labels: upserted on (task, target, annotator), a LabelRevision for every create and update.

    A line without `order` leaves a recorded order as it is.
    """

    model = StagedLabel

    def __init__(self, job: _Import, session: Session, samples: set[int]) -> None:
        super().__init__(job)
        self.people = job.ctx.people
        self.guidelines: dict[int, int | None] = {}
        for task in job.ctx.tasks.values():
            guideline = current_guideline(session, task)
            self.guidelines[task.id] = guideline.version if guideline is not None else None
        self.existing: dict[tuple[int, str, int], tuple[str, str, list | None]] = {}
        for chunk in _chunks(samples):
            for row in session.execute(
                select(_LABELS.c.task_id, _LABELS.c.target_key, _LABELS.c.annotator_id, _LABELS.c.value, _LABELS.c.rationale,
                       _LABELS.c.order)
                .where(_LABELS.c.sample_id.in_(chunk), _LABELS.c.adjudicated.is_(False))
            ):
                self.existing[(row.task_id, row.target_key, row.annotator_id)] = (row.value, row.rationale, row.order)

    def add(self, line: Line, claim_id: int | None, context_id: int | None, key: str) -> None:
        annotator_id = self.people.get(line.who)
        old = self.existing.get((line.task.id, key, annotator_id)) if annotator_id is not None else None
        if old is not None:
            new_order = line.order if line.order is not None else old[2]
            if old == (line.value, line.text, new_order):
                self.unchanged += 1
                return
        self.stage({"task_id": line.task.id, "sample_id": line.sample_id, "claim_id": claim_id, "context_id": context_id,
                    "target_key": key, "annotator": line.who, "value": line.value, "rationale": line.text,
                    "guideline_version": self.guidelines.get(line.task.id), "order": _order_text(line.order)})

    def publish(self, session: Session) -> tuple[int, int]:
        """Upsert the batch's staged labels (creating the annotators it names); return (added, updated).

        The names of the accounts it creates are kept in `self.created` for the summary.
        """
        batch_id, now = self.writes.batch.id, utcnow()
        staged, users = StagedLabel.__table__, User.__table__
        for name in session.execute(select(staged.c.annotator).where(staged.c.batch_id == batch_id).distinct()).scalars():
            if name not in self.people:  # the users as they were when the import began
                self.created.append(name)
            ensure_annotator(session, name)
        session.flush()
        first_new = (session.execute(select(func.max(_LABELS.c.id))).scalar() or 0) + 1
        match = and_(_LABELS.c.task_id == staged.c.task_id, _LABELS.c.target_key == staged.c.target_key,
                     _LABELS.c.annotator_id == users.c.id, _LABELS.c.adjudicated.is_(False))
        differs = or_(_LABELS.c.value != staged.c.value, _LABELS.c.rationale != staged.c.rationale,
                      and_(staged.c.order.is_not(None), _json_text(_LABELS.c.order) != staged.c.order))
        mine = and_(staged.c.batch_id == batch_id, users.c.username == staged.c.annotator)
        at = literal(now, _REVISIONS.c.changed_at.type)
        # An update keeps what it replaces in a revision: written first, from the label as it is.
        session.execute(insert(_REVISIONS).from_select(
            ["label_id", "action", "value", "rationale", "order", "changed_by_id", "changed_at"],
            select(_LABELS.c.id, literal("update"), _LABELS.c.value, _LABELS.c.rationale, _LABELS.c.order,
                   _LABELS.c.annotator_id, at)
            .select_from(staged.join(users, users.c.username == staged.c.annotator).join(_LABELS, match))
            .where(staged.c.batch_id == batch_id, differs)))
        updated = session.execute(
            update(_LABELS).where(mine, match, differs)
            .values(value=staged.c.value, rationale=staged.c.rationale, stale=False, stale_reason="",
                    guideline_version=staged.c.guideline_version, updated_at=now,
                    order=case((staged.c.order.is_(None), _LABELS.c.order),
                               else_=_as_json(session, staged.c.order)))).rowcount
        stamp = literal(now, _LABELS.c.created_at.type)
        session.execute(insert(_LABELS).from_select(
            ["task_id", "sample_id", "claim_id", "context_id", "target_key", "annotator_id", "value", "rationale",
             "evidence", "guideline_version", "adjudicated", "stale", "stale_reason", "source", "order", "created_at",
             "updated_at"],
            select(staged.c.task_id, staged.c.sample_id, staged.c.claim_id, staged.c.context_id, staged.c.target_key,
                   users.c.id, staged.c.value, staged.c.rationale, null(), staged.c.guideline_version, false(), false(),
                   literal(""), literal("import"), _as_json(session, staged.c.order), stamp, stamp)
            .select_from(staged.join(users, users.c.username == staged.c.annotator))
            .where(staged.c.batch_id == batch_id, ~exists().where(match))))
        # Counted, not taken from the INSERT's rowcount (not reliable for INSERT … SELECT on every driver).
        added = session.execute(select(func.count()).where(_LABELS.c.id >= first_new)).scalar()
        session.execute(insert(_REVISIONS).from_select(
            ["label_id", "action", "value", "rationale", "order", "changed_by_id", "changed_at"],
            select(_LABELS.c.id, literal("create"), _LABELS.c.value, _LABELS.c.rationale, _LABELS.c.order,
                   _LABELS.c.annotator_id, at)
            .where(_LABELS.c.id >= first_new)))
        sync_id_sequence(session, _LABELS)
        # A claim or context retired after validation (an expert split it meanwhile): the labels
        # written onto it are stale, as every other path leaves them (never current on a retired target).
        retired = or_(_LABELS.c.claim_id.in_(select(_CLAIMS.c.id).where(_CLAIMS.c.active.is_(False))),
                      _LABELS.c.context_id.in_(select(_CONTEXTS.c.id).where(_CONTEXTS.c.active.is_(False))))
        session.execute(update(_LABELS).where(
            retired, _LABELS.c.stale.is_(False), _LABELS.c.updated_at == now,
            _LABELS.c.sample_id.in_(select(staged.c.sample_id).where(staged.c.batch_id == batch_id)))
            .values(stale=True, stale_reason="its claim or context changed during the import"))
        session.execute(update(ImportBatch).where(ImportBatch.id == batch_id).values(state="published"))
        return added, updated


_VERDICT_COLUMNS = ("value", "status", "reason", "error", "raw", "latency_ms", "input_tokens", "output_tokens", "order")
_PLAIN_COLUMNS = _VERDICT_COLUMNS[:-1]  # compared as they are; `order` (JSON) as text


class _VerdictStager(_Stager):
    """Verdicts: upserted on (judge, task, target, order)."""

    model = StagedVerdict

    def __init__(self, job: _Import, session: Session, samples: set[int]) -> None:
        super().__init__(job)
        self.judges = {name: pk for name, (pk, _kind) in job.ctx.people.items()}
        self.existing: dict[tuple[int, int, str, str], tuple] = {}
        judge_ids = list(self.judges.values())
        for chunk in _chunks(samples):
            for row in session.execute(
                select(_VERDICTS.c.judge_id, _VERDICTS.c.task_id, _VERDICTS.c.target_key, _VERDICTS.c.order_key,
                       *(_VERDICTS.c[name] for name in _VERDICT_COLUMNS))
                .where(_VERDICTS.c.sample_id.in_(chunk), _VERDICTS.c.judge_id.in_(judge_ids), _VERDICTS.c.sample_index == 0)
            ):
                self.existing[(row.judge_id, row.task_id, row.target_key, row.order_key)] = tuple(
                    row._mapping[name] for name in _VERDICT_COLUMNS)

    def add(self, line: Line, claim_id: int | None, context_id: int | None, key: str) -> None:
        content = {"value": line.value, "reason": line.text, **line.extra, "order": line.order if line.order_key else None}
        judge_id = self.judges.get(line.who)
        old = self.existing.get((judge_id, line.task.id, key, line.order_key)) if judge_id is not None else None
        if old is not None and old == tuple(content[n] for n in _VERDICT_COLUMNS):
            self.unchanged += 1
            return
        self.stage({"judge": line.who, "task_id": line.task.id, "sample_id": line.sample_id, "claim_id": claim_id,
                    "context_id": context_id, "target_key": key, "order_key": line.order_key,
                    **{name: content[name] for name in _PLAIN_COLUMNS}, "order": _order_text(content["order"])})

    def publish(self, session: Session) -> tuple[int, int]:
        """Upsert the batch's staged verdicts (creating the imported judges it names); return (added, updated)."""
        batch_id, now = self.writes.batch.id, utcnow()
        staged, judges = StagedVerdict.__table__, Judge.__table__
        names = session.execute(select(staged.c.judge).where(staged.c.batch_id == batch_id).distinct()).scalars().all()
        known = set(session.execute(select(judges.c.name).where(judges.c.name.in_(names))).scalars())
        for name in sorted(set(names) - known):
            session.add(Judge(name=name, kind="imported", description="created by an import of verdicts"))
        session.flush()
        match = and_(_VERDICTS.c.judge_id == judges.c.id, _VERDICTS.c.task_id == staged.c.task_id,
                     _VERDICTS.c.target_key == staged.c.target_key, _VERDICTS.c.order_key == staged.c.order_key,
                     _VERDICTS.c.sample_index == 0)  # an import is sample 0: a self-consistency run's others stay
        differs = or_(*(_VERDICTS.c[name].is_distinct_from(staged.c[name]) for name in _PLAIN_COLUMNS),
                      _json_text(_VERDICTS.c.order) != func.coalesce(staged.c.order, "null"))
        order = _as_json(session, staged.c.order)
        updated = session.execute(
            update(_VERDICTS).where(staged.c.batch_id == batch_id, judges.c.name == staged.c.judge, match, differs)
            .values(**{name: staged.c[name] for name in _PLAIN_COLUMNS}, order=order, source="import",
                    run_id=None)).rowcount
        first_new = (session.execute(select(func.max(_VERDICTS.c.id))).scalar() or 0) + 1
        session.execute(insert(_VERDICTS).from_select(
            ["judge_id", "run_id", "task_id", "sample_id", "claim_id", "context_id", "target_key", "order_key",
             *_PLAIN_COLUMNS, "order", "cached", "source", "created_at"],
            select(judges.c.id, null(), staged.c.task_id, staged.c.sample_id, staged.c.claim_id, staged.c.context_id,
                   staged.c.target_key, staged.c.order_key, *(staged.c[name] for name in _PLAIN_COLUMNS), order, false(),
                   literal("import"), literal(now, _VERDICTS.c.created_at.type))
            .select_from(staged.join(judges, judges.c.name == staged.c.judge))
            .where(staged.c.batch_id == batch_id, ~exists().where(match))))
        added = session.execute(select(func.count()).where(_VERDICTS.c.id >= first_new)).scalar()
        session.execute(update(ImportBatch).where(ImportBatch.id == batch_id).values(state="published"))
        return added, updated
