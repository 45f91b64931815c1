"""What an import reports: the problems of a rejected file, or the summary of an accepted one."""

from __future__ import annotations

from dataclasses import dataclass, field

from calibrate.bounds import MAX_STEP_TEXT, MAX_STEPS
from calibrate.errors import CalibrateError


@dataclass(frozen=True)
class ImportProblem:
    """One thing wrong with an import file, located by line (1-based) and field where known."""

    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = []
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.field is not None:
            where.append(f"field {self.field!r}")
        return f"{', '.join(where)}: {self.message}" if where else self.message


class ImportRejected(CalibrateError):
    """A file that cannot be imported; nothing of it was written (the caller rolls back)."""

    def __init__(self, problems: list[ImportProblem], *, truncated: bool = False, records: int = 0) -> None:
        self.problems = sorted(problems, key=lambda p: (p.line is not None, p.line or 0))
        self.truncated = truncated
        self.records = records
        self.source = ""  # the file's name, set by import_file
        first = f": {self.problems[0]}{' …' if len(self.problems) > 1 else ''}" if self.problems else ""
        super().__init__(self.summary() + first)

    def details(self) -> list[str]:
        """Return the problems, one line each, prefixed with the file's name."""
        source = self.source or "file"
        lines = [f"{source}: {problem}" for problem in self.problems]
        if self.truncated:
            lines.append(f"{source}: … stopped after {len(self.problems)} problems")
        return lines

    def headline(self) -> str:
        """Return the last line: the file is rejected and nothing of it imported."""
        return f"{self.source or 'file'}: rejected, nothing imported ({self.summary()})"

    def summary(self) -> str:
        """Return one line counting the problems and the records they are in."""
        n = len(self.problems)
        lines = {p.line for p in self.problems if p.line is not None}
        count = f"more than {n:,} problems" if self.truncated else f"{n:,} problem{'' if n == 1 else 's'}"
        if not lines or not self.records:
            return count
        records = f"the first {self.records:,}" if self.truncated else f"{self.records:,}"
        return f"{count} in {len(lines):,} of {records} record{'' if self.records == 1 else 's'}"


@dataclass
class ImportSummary:
    """What an accepted import did; `rejected` stays 0 since a bad file is rejected whole."""

    kind: str
    dataset: str
    added: int
    updated: int
    unchanged: int
    rejected: int = 0
    flagged: int = 0
    stale_verdicts: int = 0  # samples: sample-level verdicts set aside because the content they judged changed
    no_value: int = 0  # verdicts: lines with "value": null (a judge call that gave nothing usable)
    no_value_errors: int = 0  # … of them with an `error` (the call failed), the rest unparsed
    created_accounts: list[str] = field(default_factory=list)  # labels: annotators the import created, no password
    # labels, on a dataset with production queues: the file's labels whose annotator has no audit assignment for
    # their sample (they never feed an estimate); None on a dataset without production queues
    outside_audit: int | None = None
    # samples: what the bounds on a trajectory cut rather than refused ({"steps_cut": n, "step_texts_cut": n}, docs/formats.md)
    cuts: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        """Return the one line the CLI prints."""
        head = f"{self.kind} → {self.dataset}: "
        if self.unchanged and not (self.added or self.updated or self.flagged or self.stale_verdicts or self.rejected):
            noun = "record" if self.unchanged == 1 else "records"
            return head + f"nothing changed: every record was already imported ({self.unchanged:,} {noun})" + self.audit_text()
        text = (f"{self.added:,} added, {self.updated:,} updated, {self.unchanged:,} unchanged, "
                f"{self.rejected:,} rejected")
        if self.flagged:
            text += f", {self.flagged:,} label{'' if self.flagged == 1 else 's'} flagged stale"
        if self.stale_verdicts:
            text += (f", {self.stale_verdicts:,} verdict{'' if self.stale_verdicts == 1 else 's'} set aside as stale "
                     "(the next run judges the new content)")
        return head + text + self.no_value_text() + self.cut_text() + self.audit_text()

    def cut_text(self) -> str:
        """Return what the bounds on trajectories cut (a samples import), or ""."""
        steps, texts = self.cuts.get("steps_cut", 0), self.cuts.get("step_texts_cut", 0)
        parts = ([f"{steps:,} step{'' if steps == 1 else 's'} past {MAX_STEPS:,} a sample left out"] if steps else []) + (
            [f"{texts:,} step text{'' if texts == 1 else 's'} cut to {MAX_STEP_TEXT:,} characters"] if texts else [])
        return "; " + ", ".join(parts) if parts else ""

    def audit_text(self) -> str:
        """Return how many of the file's labels fall outside the audit stream (a dataset with production queues), or ""."""
        if self.outside_audit is None:
            return ""
        n = self.outside_audit
        if not n:
            return "; every label is in the audit stream"
        return (f"; {n:,} of the file's labels {'is' if n == 1 else 'are'} outside the audit stream (no audit assignment "
                f"of {'its' if n == 1 else 'their'} annotator on {'its' if n == 1 else 'their'} sample): "
                f"{'it never feeds' if n == 1 else 'they never feed'} an estimate")

    def no_value_text(self) -> str:
        """Return how many verdicts of the file have no value (counted in reports, never scored), or ""."""
        if not self.no_value:
            return ""
        unparsed, errors = self.no_value - self.no_value_errors, self.no_value_errors
        return (f"; {self.no_value:,} of the file's verdicts have no value ({unparsed:,} unparsed, "
                f"{errors:,} error{'' if errors == 1 else 's'}): counted in reports as n_unparsed, never scored")


class TooManyProblems(Exception):
    """Raised inside a pass when `max_errors` problems are collected and one more arrives."""


class Problems:
    """Collects the problems of one file, stopping the pass once there are too many."""

    def __init__(self, max_errors: int) -> None:
        self.max_errors = max(1, max_errors)
        self.items: list[ImportProblem] = []
        self.truncated = False

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def add(self, line: int | None, field: str | None, message: str) -> None:
        """Record a problem; raise TooManyProblems when there are already `max_errors`."""
        self.add_problem(ImportProblem(line, field, message))

    def add_problem(self, problem: ImportProblem) -> None:
        """Record an ImportProblem; raise TooManyProblems when there are already `max_errors`."""
        if len(self.items) >= self.max_errors:
            self.truncated = True
            raise TooManyProblems
        self.items.append(problem)

    def rejected(self, records: int) -> ImportRejected:
        """Return the exception that rejects the file."""
        return ImportRejected(self.items, truncated=self.truncated, records=records)


def reject(message: str, *, line: int | None = None, field: str | None = None) -> ImportRejected:
    """Return an ImportRejected for a single problem."""
    return ImportRejected([ImportProblem(line, field, message)])
