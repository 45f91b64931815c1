"""Import experts' labels and judges' verdicts on the samples of a dataset, all or nothing.

Three modules, one import: ingest/label_records.py validates a line, this module runs the
import's two passes, ingest/label_upserts.py stages the lines and publishes them.

A line names its target by the sample's id and, as its task requires, a claim index (claim
tasks), a context rank (context tasks) or a step index (step tasks), counted among the sample's
active claims, contexts and steps. The first pass validates every line and keeps only the key of each target (to find
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

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select
from sqlmodel import Session

from calibrate.ingest.batches import Writes
from calibrate.ingest.bulk import in_parts
from calibrate.ingest.fields import RecordCheck
from calibrate.ingest.label_records import POSITIONED, Line, LineContext, check_header, normalise_line
from calibrate.ingest.label_upserts import LabelStager, Stager, VerdictStager
from calibrate.ingest.problems import ImportSummary, Problems, TooManyProblems, reject
from calibrate.ingest.readers import Progress, Record, read_records
from calibrate.models import Assignment, Claim, Context, Sample, Step, User, target_key

# The rows a positioned target resolves to, and the column that is its place in the sample.
_POSITIONS = {"claim": (Claim.__table__, Claim.__table__.c.index), "context": (Context.__table__, Context.__table__.c.rank),
              "step": (Step.__table__, Step.__table__.c.index)}


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


@dataclass
class _FirstPass:
    """What validating a file found: its line count, the samples whose targets are claims or contexts, the verdicts
    without a value, then the targets read and the stager ready for pass 2."""

    count: int = 0
    samples_of: dict[str, set[int]] = field(default_factory=lambda: {name: set() for name in POSITIONED})
    no_value: int = 0
    no_value_errors: int = 0
    # claim|context|step → (sample id, index or rank) → row id
    rows: dict[str, dict[tuple[int, int], int]] = field(default_factory=dict)
    stager: Stager | None = None
    audit: set[tuple[int, str]] | None = None  # (sample id, expert) of the audit assignments; None: no production queues
    outside_audit: int = 0  # labels of the file that are not audit labels (pass 2 counts them)

    def count_line(self, line: Line, *, verdicts: bool) -> None:
        if verdicts and line.value is None:
            self.no_value += 1
            self.no_value_errors += line.extra.get("status") == "error"
        place = line.position()
        if place is not None:
            self.samples_of[place[0]].add(line.sample_id)


class _Import:
    def __init__(self, writes: Writes, source: str | Path, fmt: str, kind: str, dataset: str,
                 judge: str | None, progress, max_errors: int, max_field_chars: int) -> None:
        self.writes = writes
        self.source = source
        self.fmt = fmt
        self.kind = kind
        with writes.read() as session:
            self.ctx = LineContext(session, dataset, kind, judge)
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
        first = self._first_pass()
        try:
            stager = self._second_pass(first)
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
                             no_value=first.no_value, no_value_errors=first.no_value_errors,
                             created_accounts=sorted(stager.created),
                             outside_audit=None if first.audit is None else first.outside_audit)

    def _first_pass(self) -> _FirstPass:
        """Validate every line (its own problems, duplicates), then read the targets and stored rows of its samples."""
        problems, first = self.problems, _FirstPass()
        seen: dict[tuple, int | None] = {}
        last_line: int | None = -1
        with self.writes.read() as session:
            self.ctx.session = session  # a pairwise line reads the dataset's responses (once)
            try:
                for line in self.lines(problems):
                    if isinstance(line, Record):
                        first.count += not line.whole_file
                        continue
                    first.count += line.line != last_line  # a line with both orders gives two verdicts
                    last_line = line.line
                    if line.key() in seen:
                        problems.add(line.line, line.task.target if line.task.target in POSITIONED else "sample_id",
                                     f"duplicate: line {seen[line.key()]} already gives {self._what(line)}")
                        continue
                    seen[line.key()] = line.line
                    first.count_line(line, verdicts=self.kind == "verdicts")
            except TooManyProblems:
                raise problems.rejected(first.count) from None
            self.tick.flush()
            first.rows = {name: self._targets(session, *_POSITIONS[name], first.samples_of[name]) for name in POSITIONED}
            samples = {sample_id for _, sample_id, *_ in seen}
            first.stager = (LabelStager if self.kind == "labels" else VerdictStager)(self, session, samples)
            first.audit = _audit_pairs(session, self.ctx.dataset.id, samples) if self.kind == "labels" else None
            self.writes.end_read(session)
        return first

    def _second_pass(self, first: _FirstPass) -> Stager:
        """Resolve each line's target and stage the lines that change something, chunk by chunk, while the file has no
        problem (what was staged is removed if one turns up); pass 1 has filed the lines' own problems already."""
        problems, stager = self.problems, first.stager
        writing = not problems
        try:
            for line in self.lines(Problems(1 << 30)):
                if isinstance(line, Record):
                    continue
                first.outside_audit += first.audit is not None and (line.sample_id, line.who) not in first.audit
                target = self._resolve(line, first.rows)
                if target is None:
                    writing = False
                elif writing:
                    stager.add(line, *target)
        except TooManyProblems:
            raise problems.rejected(first.count) from None
        if problems:
            raise problems.rejected(first.count)
        stager.flush()
        return stager

    def _what(self, line: Line) -> str:
        place = line.position()
        target = f"{place[0]} {place[1]} of" if place is not None else ""
        by = "annotator" if self.kind == "labels" else "judge"
        shown = f" in the order {', '.join(line.order)}" if line.order_key and line.order else ""
        return (f"a {line.task.name} {self.kind[:-1]} on {target} sample {line.external_id!r} by {by} {line.who!r}"
                f"{shown}").replace("on  ", "on ")

    def _targets(self, session: Session, table, position, sample_ids: set[int]) -> dict[tuple[int, int], int]:
        """Return (sample id, index or rank) -> row id of the active claims, contexts or steps of the samples."""
        out: dict[tuple[int, int], int] = {}
        for chunk in in_parts(sorted(sample_ids)):
            for sample_id, at, pk in session.execute(
                select(table.c.sample_id, position, table.c.id)
                .where(table.c.sample_id.in_(chunk), table.c.active.is_(True))
            ):
                out[(sample_id, at)] = pk
        return out

    def _resolve(self, line: Line, rows: dict[str, dict]) -> tuple[int | None, int | None, int | None, str] | None:
        """Return (claim id, context id, step id, target key) of a line, or None after filing a problem."""
        place = line.position()
        if place is None:
            return None, None, None, target_key("sample", line.sample_id)
        name, index = place
        pk = rows[name].get((line.sample_id, index))
        if pk is None:
            known = sum(1 for sample_id, _ in rows[name] if sample_id == line.sample_id)
            have = f"{known} {name}{'' if known == 1 else 's'} (0–{known - 1})" if known else f"no {name}s"
            self.problems.add(line.line, name, f"{POSITIONED[name]} {index} is out of range: sample {line.external_id!r} "
                                               f"has {have}")
            return None
        return (pk if name == "claim" else None, pk if name == "context" else None, pk if name == "step" else None,
                target_key(name, pk))


def _audit_pairs(session: Session, dataset_id: int, sample_ids: set[int]) -> set[tuple[int, str]] | None:
    """Return (sample id, expert) of the audit assignments on these samples; None when the dataset has no production queues.

    The rule of `calibrate.calibration.stream_labels`: an expert's label is an audit label when she has an audit
    assignment for its sample (docs/production.md); no other label ever feeds an estimate.
    """
    queued = session.execute(select(Assignment.id).join(Sample, Sample.id == Assignment.sample_id)
                             .where(Sample.dataset_id == dataset_id, Assignment.stream.is_not(None)).limit(1)).first()
    if queued is None:
        return None
    pairs: set[tuple[int, str]] = set()
    for chunk in in_parts(sorted(sample_ids)):
        pairs.update((sample_id, name) for sample_id, name in session.execute(
            select(Assignment.sample_id, User.username).join(User, User.id == Assignment.user_id)
            .where(Assignment.sample_id.in_(chunk), Assignment.stream == "audit")))
    return pairs
