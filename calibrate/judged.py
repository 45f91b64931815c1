"""What is judged: one registered object per target kind and per task kind (issue 33, docs/architecture.md).

A task is a *target kind* (what a label or verdict is about: the sample, one of its claims, one
of its contexts) and a *task kind* (what its values are: labels, a score, a preferred response, a
claim list, a judge's instructions). Both are closed lists registered here, and the code that
decides what is judged asks this module instead of branching on their names:

- `TargetKind` says which targets of a kind a dataset's samples have and in which order
  (`select`), their stable key ("claim:42", models.target_key) and how people name them
  (`where`: "claim 1", calibrate/targets.py), the template field a judge call sees (`fields`),
  the Label/Verdict column a label and a verdict attach by (`attach`), the rows the workbench
  gives a cell each (`parts`) and in which keyboard order, the cluster of the bootstrap
  (`cluster`: always the sample, so resampling keeps a sample's targets together), how a few-shot
  reference "SAMPLE:N" finds its part and is refused (`find`, `fewshot_missing`, `position_name`), a
  part's text and position for people (`text`, `positions`, `place`), the id column a row attaches by
  (`column`, `part_of`) and the live estimator's levels (`levels`, `answers`: a claim task's answers).
- `TaskKind` says whether the values are labels (κ, confusion, the majority gold) or numbers
  (ρ, the mean gold, `level` for Krippendorff's α and the score tolerance), the workbench widget's
  step, whether a target is judged once per presentation order (pairwise), which section of the
  report it gets (`section`, None: never calibrated), whether it is run over a dataset at all
  (the rewrite is not), whether its value replaces the sample's claims (the extraction), and what a
  custom task of the kind takes (`needs_scale`, `error_types`, `levels` of `--level`).
- `judging(task)` joins the two with what a task's name adds (a metric task's scorer, whether
  its runs read the claims) into the one object the runner, the watcher, the report, few-shots,
  compare, the Alt-Test, the live estimator, adjudication, the gold, the tasks' checks and the
  workbench's item code consult (tests/test_judged.py walks their source for any branch on a
  kind's or target's name).

Adding a target kind or a task kind is one `register_target` / `register_task_kind` call here
plus what is truly new (its rows, its template, its widget): see docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, select

from calibrate.models import EXTRACTION, KINDS, METRIC_TASKS, REWRITE, TARGETS, Claim, Context, Sample, Step, Task, target_key
from calibrate.targets import where as in_words
from calibrate.trajectories import row_entry, step_fields

ANSWERS = "answers"  # the live estimator's level of one target per sample (calibration/live.py)


@dataclass(frozen=True)
class TargetKind:
    """One kind of target: the sample itself, or a part of it (a claim, a context…)."""

    name: str  # the key's prefix and Task.target ("claim")
    order: int  # the workbench's keyboard order of its cells (lower first)
    row: type | None = None  # the part's table (None: the sample itself)
    position: str = ""  # the row's column that places it within its sample (0-based)
    items: str = ""  # the workbench's loaded rows (annotation/items.ItemData attribute) of the sample's parts
    needs_answer: bool = False  # a sample target: judged and labelled only on samples with an answer (labels kinds)
    cluster: str = "sample_id"  # the bootstrap's cluster: a sample's targets are resampled together
    # Template fields built from the target's whole sample beside its own (a step: the trajectory up to it).
    more: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None
    sequence: bool = False  # its parts are a sample's ordered trajectory: a section adds `localisation`
    # The live estimator offers the sample-level aggregation of its parts at the `answers` level (a claim task: an answer
    # counts when every counted claim has the positive label); every part kind has its own level (`items`).
    answers: bool = False
    # A part's text as people read it (few-shot and adjudication views; a step: its text block).
    text: Callable[[Any], str] = lambda row: row.text
    # The reason codes a few-shot reference "SAMPLE:N" is refused with: N names no part / N is not given (what N is).
    fewshot_missing: str = ""
    position_name: str = ""

    @property
    def within(self) -> bool:
        """Whether a target is a part of a sample (a section counts `n_samples` beside `n`)."""
        return self.row is not None

    @property
    def field(self) -> str | None:
        """The template field of one target ("claim") and the Label/Verdict/FewShot column it attaches by (claim_id)."""
        return self.name if self.row is not None else None

    def key(self, target_id: int) -> str:
        return target_key(self.name, target_id)

    @property
    def levels(self) -> tuple[str, ...]:
        """The live estimator's levels of a task on this kind, its default first (calibration/live.py)."""
        if not self.within:
            return (ANSWERS,)
        return (ANSWERS, self.items) if self.answers else (self.items,)

    def aggregates(self, level: str) -> bool:
        """Whether `level` reads this kind's parts one sample at a time (a claim task at `answers`)."""
        return self.within and level == ANSWERS

    def column(self, model: Any) -> Any:
        """Return the Label/Verdict/FewShot column holding a target's id of this kind (its part's id; the sample's)."""
        return getattr(model, f"{self.field}_id") if self.field else model.sample_id

    def part_of(self, row: Any) -> int | None:
        """Return the part id a Label/Verdict/FewShot row attaches by for this kind (None: the sample kind)."""
        return getattr(row, f"{self.field}_id") if self.field else None

    def place(self, position: int | None) -> dict[str, int | None]:
        """Return a row's position columns named by part kind (the report's ItemRow: claim, context, step), like `attach`."""
        return {kind.name: (position if kind is self else None) for kind in TARGET_KINDS.values() if kind.within}

    def find(self, session: Session, sample_id: int, position: int) -> Any | None:
        """Return the active part of this kind at `position` within a sample (None: there is none, or a sample kind)."""
        if self.row is None:
            return None
        row = self.row
        active = [row.active] if hasattr(row, "active") else []
        return session.exec(select(row).where(row.sample_id == sample_id, getattr(row, self.position) == position,
                                              *active)).first()

    def rows(self, session: Session, part_ids: Sequence[int]) -> dict[int, Any]:
        """Return part id → its row, for these ids of this kind (none for the sample kind)."""
        if self.row is None or not part_ids:
            return {}
        ids = sorted(set(part_ids))
        out: dict[int, Any] = {}
        for start in range(0, len(ids), 10_000):
            out.update((r.id, r) for r in session.exec(select(self.row).where(self.row.id.in_(ids[start:start + 10_000]))).all())
        return out

    def positions(self, session: Session, part_ids: Sequence[int]) -> dict[int, int]:
        """Return part id → its 0-based position within its sample (claim index, context rank, step index)."""
        if self.row is None or not part_ids:
            return {}
        ids, column = sorted(set(part_ids)), getattr(self.row, self.position)
        out: dict[int, int] = {}
        for start in range(0, len(ids), 10_000):
            out.update(session.execute(select(self.row.id, column).where(self.row.id.in_(ids[start:start + 10_000]))).all())
        return out

    def where(self, position: int | None) -> str:
        """Return the target's place within its sample as people read it ("claim 1", "the answer")."""
        return in_words(self.name, position)

    def attach(self, target_id: int | None) -> dict[str, int | None]:
        """Return the Label/Verdict id columns a label or verdict on this target sets (every part kind's, others None)."""
        return {f"{kind.field}_id": (target_id if kind is self else None) for kind in TARGET_KINDS.values() if kind.field}

    def select(self, session: Session, where: Sequence[Any], *, needs_answer: bool) -> list[tuple[int, int]]:
        """Return (target id, sample id) of every target of this kind on the samples `where` selects, in a stable order
        (sample, then the part's position); `needs_answer`: only samples with an answer (sample targets)."""
        if self.row is None:
            where = [*where, Sample.answer != ""] if needs_answer else list(where)
            return [(sid, sid) for sid in session.exec(select(Sample.id).where(*where).order_by(Sample.id)).all()]
        row = self.row
        active = [row.active] if hasattr(row, "active") else []
        return [tuple(r) for r in session.exec(select(row.id, row.sample_id).join(Sample, Sample.id == row.sample_id)
                                              .where(*where, *active)
                                              .order_by(row.sample_id, getattr(row, self.position))).all()]

    def fields(self, target_id: int | None, entries: dict[str, Any]) -> dict[str, Any]:
        """Return the template field of one target from its sample's loaded entries (judges/items.load_items)."""
        if self.field is None or target_id is None:
            return {}
        entry = entries[f"_{self.field}s"][target_id]
        return self.more(entry, entries) if self.more is not None else {self.field: entry}

    def parts(self, data: Any, sample_id: int) -> list[tuple[int, int]]:
        """Return (target id, position) of the workbench item's targets of this kind (the sample: itself, 0)."""
        if not self.items:
            return [(sample_id, 0)]
        return [(row.id, getattr(row, self.position)) for row in getattr(data, self.items)]


@dataclass(frozen=True)
class TaskKind:
    """One kind of task value."""

    name: str  # Task.kind
    labels: bool = False  # values are labels (κ, confusion, the majority gold); else numbers (ρ, the mean gold)
    level: str = "nominal"  # the level of measurement (Krippendorff's α of the human ceiling)
    step: str = "any"  # the workbench's number step ("1": whole numbers, buttons for a short scale)
    tolerance: float | None = None  # how close a score must be to the gold to count as right (None: by the scale)
    orders: bool = False  # judged once per presentation order of the sample's responses (one target per sample)
    section: str | None = None  # the report's section builder: categorical | pairwise | numeric (None: not calibrated)
    runs: bool = True  # run over a dataset's targets (the rewrite is asked for by `calibrate optimise` only)
    extraction: bool = False  # its value is a claim list that replaces the sample's claims (never calibrated)
    needs_scale: bool = False  # a task of this kind is created with a scale (`--scale LOW-HIGH`)
    error_types: bool = False  # a task of this kind may carry an error taxonomy (`--error-types`)
    levels: str = ""  # what `--level` describes: "labels" (each label), "scores" (each whole score), "" (refused)

    @property
    def alignment(self) -> str | None:
        """The statistic the report aligns judge and gold by."""
        if self.section is None:
            return None
        return "cohen_kappa" if self.labels else "spearman_rho"


# The report's section builders a task kind names (calibration/report.py `_task_section`; any other: numeric).
CATEGORICAL_SECTION, PAIRWISE_SECTION, NUMERIC_SECTION = "categorical", "pairwise", "numeric"

TARGET_KINDS: dict[str, TargetKind] = {}
TASK_KINDS: dict[str, TaskKind] = {}


def register_target(kind: TargetKind) -> TargetKind:
    """Register a target kind (its name must be in models.TARGETS: the keys and the schema know it)."""
    if kind.name not in TARGETS:
        raise ValueError(f"target kind {kind.name!r} is not in models.TARGETS")
    TARGET_KINDS[kind.name] = kind
    return kind


def register_task_kind(kind: TaskKind) -> TaskKind:
    """Register a task kind (models.KINDS, or the built-in-only extraction and rewrite)."""
    if kind.name not in (*KINDS, EXTRACTION, REWRITE):
        raise ValueError(f"task kind {kind.name!r} is not in models.KINDS")
    TASK_KINDS[kind.name] = kind
    return kind


register_target(TargetKind("claim", 10, Claim, "index", "claims", answers=True, fewshot_missing="fewshot_no_claim",
                           position_name="claim_index"))
register_target(TargetKind("sample", 20, needs_answer=True))
register_target(TargetKind("context", 30, Context, "rank", "contexts", fewshot_missing="fewshot_no_context",
                           position_name="context_rank"))
# A step of the sample's trajectory (issue 33): its judge sees the trajectory up to it (trajectories.step_fields); its
# template fields and built-in templates are judges/render.py's TARGET_FIELDS and TARGET_TEMPLATES.
register_target(TargetKind("step", 40, Step, "index", "steps",
                           more=lambda entry, entries: step_fields(entry, entries["steps"]), sequence=True,
                           text=lambda row: row_entry(row)["text"], fewshot_missing="fewshot_no_step",
                           position_name="step_index"))

register_task_kind(TaskKind("categorical", labels=True, section=CATEGORICAL_SECTION, error_types=True, levels="labels"))
register_task_kind(TaskKind("ordinal", level="ordinal", step="1", tolerance=0.5, section=NUMERIC_SECTION, needs_scale=True,
                            levels="scores"))
register_task_kind(TaskKind("continuous", level="interval", section=NUMERIC_SECTION))
register_task_kind(TaskKind("pairwise", labels=True, orders=True, section=PAIRWISE_SECTION))
register_task_kind(TaskKind(EXTRACTION, extraction=True))
register_task_kind(TaskKind(REWRITE, runs=False))


def target_kind(name: str) -> TargetKind:
    """Return a registered target kind by name ("claim"), or by a target key's prefix ("claim:42")."""
    return TARGET_KINDS[name.partition(":")[0]]


def task_kind(name: str) -> TaskKind:
    """Return a registered task kind by name."""
    return TASK_KINDS[name]


def ordered_targets() -> list[TargetKind]:
    """Return the target kinds in the workbench's keyboard order."""
    return sorted(TARGET_KINDS.values(), key=lambda kind: kind.order)


# The tasks whose runs read the samples' claims although their target is the sample: faithfulness scores an answer
# from its claims (judges/metrics.py).
READS_CLAIMS = ("faithfulness",)


@dataclass(frozen=True)
class Judging:
    """What judging and labelling a task means: its target kind, its task kind and what its name adds."""

    target: TargetKind
    kind: TaskKind
    metric: bool  # a built-in metric task: its verdicts are computed by a scorer (judges/metric_runs.py)
    reads_claims: bool  # its runs and its section record which claim sets the samples had

    @property
    def needs_answer(self) -> bool:
        """Whether only samples with an answer have this task's targets (a pairwise task's are the responses)."""
        return self.target.needs_answer and not self.kind.orders

    def select(self, session: Session, where: Sequence[Any]) -> list[tuple[int, int]]:
        """Return (target id, sample id) of the task's targets on the samples `where` selects (TargetKind.select)."""
        return self.target.select(session, where, needs_answer=self.needs_answer)

    def where(self, position: int | None, *, shown: bool = False) -> str:
        """Return a target of the task as people name it within its sample; `shown`: a pairwise cell (the responses)."""
        return in_words("responses", None) if shown and self.kind.orders else self.target.where(position)


def judging(task: Task) -> Judging:
    """Return what judging `task` means (module docstring)."""
    target = TARGET_KINDS[task.target]
    kind = TASK_KINDS[task.kind]
    reads = target.field == "claim" or task.name in READS_CLAIMS or kind.extraction
    return Judging(target, kind, task.name in METRIC_TASKS, reads)
