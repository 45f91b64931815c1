"""The item an annotator labels: its targets, one *cell* per (task, target), and how complete it is.

A cell is the unit of keyboard focus: a claim's claim_support, the answer's answer_quality, a
context's context_relevance, and the same for custom tasks by their target. Each task gets a
*widget* by kind: buttons (categorical labels, and ordinal scales of at most ten whole
numbers) with their keys, or a number field (other scales, continuous values).

Completeness: an item is *complete* when every required cell has a current label of mine
(`REQUIRED_TASKS`, by default claim_support on every claim and answer_quality, and every
pairwise task of a pairwise item); a label made under an older guideline or flagged stale is
still mine (blind rules count it), but must be confirmed before the item can be submitted.

A pairwise item (a sample with two or more responses) gets a cell per pairwise task; its
responses are shown in an order of the annotator's own (`presentation_order`: shuffled by a
hash of user and sample, so the same every time), its buttons pick a response by the position
it is shown in (keys 1–9; tie: 3 with two responses, and t), and the label records that order.
Sample tasks about the answer (answer_quality…) appear only on samples that have an answer.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

from sqlalchemy import and_, func
from sqlalchemy import select as sa_select
from sqlmodel import Session

from calibrate.annotation import AnnotationError, NotFound
from calibrate.annotation.guidelines import rubric_levels
from calibrate.datasets import AnswerPiece, answer_pieces
from calibrate.db import Statement
from calibrate.i18n import N_, _, current
from calibrate.judged import TargetKind, judging, ordered_targets, target_kind
from calibrate.models import (
    TIE,
    Assignment,
    Claim,
    Context,
    Dataset,
    Guideline,
    Label,
    Sample,
    Task,
    TaskDataset,
    User,
    target_key,
)
from calibrate.reasons import Reason
from calibrate.task_values import negative_label
from calibrate.tasks import BUILTIN_TASKS, JUDGE_ONLY_TASKS, display_name, guideline_text, level_text, task_title
from calibrate.text.sentences import segment
from calibrate.trajectories import timeline

REQUIRED_TASKS = ("claim_support", "answer_quality")

# A step's kind and its parts as the timeline names them (models.STEP_KINDS; trajectories.timeline's parts).
STEP_KIND_NAMES = {"agent": N_("agent"), "chain": N_("chain"), "llm": N_("model call"), "tool": N_("tool"),
                   "retriever": N_("retrieval"), "embedding": N_("embedding"), "reranker": N_("reranking"),
                   "guardrail": N_("guardrail"), "evaluator": N_("evaluator"), "other": N_("other")}
STEP_PART_NAMES = {"input": N_("input"), "arguments": N_("arguments"), "result": N_("result"), "output": N_("output")}
# The built-in error taxonomy's names (tasks.STEP_ERROR_TYPES); the engineer's own error types are shown as stored.
ERROR_TYPE_NAMES = {"wrong_tool": N_("wrong tool"), "wrong_arguments": N_("wrong arguments"),
                    "misread_result": N_("misread result"), "unsupported_claim": N_("unsupported claim"),
                    "unsafe_advice": N_("unsafe advice"), "missed_step": N_("missed step"), "other": N_("other")}


def step_kind_name(kind: str) -> str:
    """Return a step's kind in the reader's language (an unknown kind as stored)."""
    return _(STEP_KIND_NAMES[kind]) if kind in STEP_KIND_NAMES else kind


def step_part_name(part: str) -> str:
    """Return the name of a step's unfolded part (input, arguments, result, output) in the reader's language."""
    return _(STEP_PART_NAMES[part]) if part in STEP_PART_NAMES else part


def error_type_name(error_type: str | None) -> str:
    """Return an error type as people read it: a built-in one in the reader's language, another with its underscores as
    spaces ("" for none)."""
    if not error_type:
        return ""
    return _(ERROR_TYPE_NAMES[error_type]) if error_type in ERROR_TYPE_NAMES else error_type.replace("_", " ")


class TaskNotOffered(AnnotationError):
    """A label posted on a task scoped to other datasets than the item's (HTTP 400 on the workbench, naming `task`)."""

# Labels and keys of the built-in tasks. `u` is undo, so "unsupported" is x (as in a cross).
BUILTIN_CHOICES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "claim_support": (("supported", N_("Supported"), "s"), ("unsupported", N_("Unsupported"), "x"),
                      ("not_applicable", N_("Not a claim"), "n")),
    "context_relevance": (("relevant", N_("Relevant"), "y"), ("not_relevant", N_("Not relevant"), "n")),
}
MAX_DIGIT_CHOICES = 9


@dataclass(frozen=True)
class Choice:
    """One button of a widget: the stored value, its text, its keys and what the level means (a rubric line, a label's text)."""

    value: str
    text: str
    keys: tuple[str, ...]
    hint: str = ""
    submit: str = ""  # what the button posts when it is not the value (a pairwise response's position: ids stay hidden)


@dataclass(frozen=True)
class Widget:
    """How a task is labelled: buttons, or a number field with its range."""

    kind: str  # "choices" | "number"
    choices: tuple[Choice, ...] = ()
    low: float | None = None
    high: float | None = None
    step: str = "any"
    # The task's error types, offered beside its negative label (`negative`: task_values.negative_label); () for none.
    error_types: tuple[str, ...] = ()
    negative: str | None = None


def presentation_order(user_id: int, sample_id: int, ids: list[str] | tuple[str, ...]) -> list[str]:
    """Return the order this annotator sees a sample's responses in: shuffled by a hash of user and sample, stable."""
    seed = int.from_bytes(hashlib.sha256(f"{user_id}:{sample_id}".encode()).digest()[:8], "big")
    shown = list(ids)
    random.Random(seed).shuffle(shown)
    return shown


def pairwise_widget(task: Task, order: list[str]) -> Widget:
    """Return a pairwise cell's buttons: one per response, by the position it is shown in, then tie if the task has it."""
    choices = [Choice(key, f"Response {i + 1}", (str(i + 1),) if i < MAX_DIGIT_CHOICES else (), submit=str(i + 1))
               for i, key in enumerate(order)]
    if TIE in (task.labels or []):
        choices.append(Choice(TIE, N_("Tie"), (str(len(order) + 1), "t") if len(order) == 2 else ("t",), submit=TIE))
    return Widget("choices", tuple(choices))


def shown_positions(session: Session, user_id: int, sample_id: int) -> dict[str, int]:
    """Return response id → the position (1, 2 …) this annotator sees it in: what a blind page names instead of the id."""
    ids = [row.key for row in _RESPONSES_SQL.all(session, {"sample_id": sample_id})]
    return {key: n for n, key in enumerate(presentation_order(user_id, sample_id, ids), start=1)} if len(ids) >= 2 else {}


def choice_text(task, choice: Choice) -> str:
    """Return a button's text in the reader's language: a pairwise response by its position, else the task's display
    name for the value in the current locale, else the default name (translated)."""
    if choice.submit and choice.value != TIE:
        return _("Response %(n)s", n=choice.submit)
    return display_name(task, choice.value) or _(choice.text)


def chosen_response(order: list[str], posted: str | None) -> str | None:
    """Return the response id (or tie) a pairwise button posted as a position ("1", "2"…, "tie"); None for no value.

    The buttons post positions so that the page never carries the ids (model names, say) the
    annotator must not see. Raise AnnotationError for a position the item does not show.
    """
    if posted is None:
        return None
    text = posted.strip()
    if text.casefold() == TIE:
        return TIE
    if text.isascii() and text.isdigit() and 1 <= int(text) <= len(order):
        return order[int(text) - 1]
    raise AnnotationError(Reason("position_unknown", count=len(order), text=text[:20]))


def widget_for(task: Task, guideline: Guideline | None) -> Widget:
    """Return the widget of a task: its buttons and keys, or a number field (by its registered kind: calibrate/judged.py)."""
    kind = judging(task).kind
    if kind.labels:  # a per-order (pairwise) cell's buttons are per item: pairwise_widget
        negative = negative_label(task)
        errors = {"error_types": tuple(task.error_types or ()), "negative": negative} if negative and task.error_types else {}
        spec = BUILTIN_CHOICES.get(task.name) if task.builtin else None
        if spec and [value for value, _, _ in spec] == list(task.labels or []):
            return Widget("choices", tuple(Choice(v, text, (str(i + 1), key)) for i, (v, text, key) in enumerate(spec)),
                          **errors)
        labels = list(task.labels or [])
        return Widget("choices", tuple(
            Choice(label, label.replace("_", " "), (str(i + 1),) if i < MAX_DIGIT_CHOICES else (), level_text(task, label))
            for i, label in enumerate(labels)), **errors)
    low, high = task.scale_min, task.scale_max
    if (kind.step == "1" and low is not None and high is not None and float(low).is_integer()
            and float(high).is_integer() and 0 <= low and high <= 9):
        rubric = rubric_levels(guideline_text(task, guideline.text)) if guideline else {}
        values = [str(v) for v in range(int(low), int(high) + 1)]
        return Widget("choices", tuple(Choice(v, v, (v,), level_text(task, v) or rubric.get(v, "")) for v in values), low, high,
                      "1")
    return Widget("number", (), low, high, kind.step)


@dataclass
class Cell:
    """One (task, target) the annotator labels, with my current label on it."""

    task: Task
    widget: Widget
    target: str  # sample | claim | context
    target_id: int
    position: int  # claim index, context rank, 0 for the sample
    label: Label | None
    version: int | None  # the task's current guideline version
    required: bool
    order: list[str] | None = None  # pairwise: the response ids in the order this annotator sees them

    @property
    def key(self) -> str:
        return target_key(self.target, self.target_id)

    @property
    def dom_id(self) -> str:
        return f"cell-{self.task.id}-{self.target}-{self.target_id}"

    @property
    def outdated(self) -> bool:
        """Whether my label was made under an older guideline than the current one."""
        label = self.label
        return (label is not None and label.guideline_version is not None and self.version is not None
                and label.guideline_version < self.version)

    @property
    def needs_confirming(self) -> bool:
        return self.label is not None and (self.outdated or self.label.stale)

    @property
    def state(self) -> str:
        """empty | saved | outdated (shown on the cell and read by the keyboard script)."""
        if self.label is None:
            return "empty"
        return "outdated" if self.needs_confirming else "saved"

    @property
    def where(self) -> str:
        """Return how the annotator names the target ("claim 3", "context #2", "the answer"; calibrate/targets.py)."""
        return judging(self.task).where(self.position, shown=self.order is not None)

    @property
    def part(self) -> bool:
        """Whether the target is a part of the sample (a claim, a context…), not the sample itself."""
        return target_kind(self.target).within


@dataclass
class TaskProgress:
    task: Task
    done: int
    total: int
    required: bool


@dataclass
class ItemStatus:
    """How far the annotator is with an item, and what is missing before it can be submitted."""

    progress: list[TaskProgress]
    missing: list[Cell]
    to_confirm: list[Cell]
    assignment_status: str

    @property
    def complete(self) -> bool:
        """Every required cell has a label of mine (the blind rules open on this)."""
        return not self.missing

    @property
    def submittable(self) -> bool:
        return not self.missing and not self.to_confirm

    def explain(self) -> list[str]:
        """Return, in words, what stands between the annotator and submitting ("Claim support: label claim 2, claim 4")."""
        lines = []
        by_task: dict[str, tuple[object, list[str]]] = {}
        for cell in self.missing:
            by_task.setdefault(cell.task.name, (cell.task, []))[1].append(cell.where)
        for task, places in by_task.values():
            lines.append(_("%(task)s: label %(targets)s", task=task_title(task), targets=_list(places)))
        if self.to_confirm:
            lines.append(_("confirm %(targets)s (made under an older guideline or changed since: press the label's key again)",
                           targets=_list([c.where for c in self.to_confirm])))
        return lines

    def summary(self) -> str:
        """Return what is missing in one line, the targets by name ("claim 2, claim 4 and the answer"), for the notice bar."""
        places = [c.where for c in self.missing] + [c.where for c in self.to_confirm]
        return _list(places, limit=8)


def _list(items: list[str], limit: int = 6) -> str:
    shown = items[:limit]
    text = ", ".join(shown)
    return text + (_(" and %(n)s more", n=len(items) - limit) if len(items) > limit else "")


@dataclass
class ItemView:
    """Everything the item page shows (and nothing of other people's labels: see review.py)."""

    assignment: Assignment
    sample: Sample
    dataset: Dataset
    contexts: list[Context]
    claims: list[Claim]
    pieces: list[AnswerPiece]
    unplaced: list[Claim]
    cells: list[Cell]  # in keyboard order: claims, the answer, the responses, contexts
    guidelines: list[tuple[Task, Guideline]]
    status: ItemStatus
    by_target: dict[str, list[Cell]] = field(default_factory=dict)
    responses: list = field(default_factory=list)  # pairwise: (position 1…, response row) in the order shown to me
    steps: list = field(default_factory=list)  # the trajectory's timeline (trajectories.timeline), when a task labels steps

    def cells_of(self, target: str, target_id: int) -> list[Cell]:
        """Return the cells of one target, in task order."""
        return self.by_target.get(target_key(target, target_id), [])

    @property
    def sample_cells(self) -> list[Cell]:
        return [c for c in self.cells if not c.part and c.order is None]

    @property
    def pairwise_cells(self) -> list[Cell]:
        return [c for c in self.cells if c.order is not None]

    def cell(self, task_id: int, key: str) -> Cell | None:
        """Return the cell of a task on a target."""
        return next((c for c in self.by_target.get(key, []) if c.task.id == task_id), None)

    def context_pieces(self, context) -> list[ContextPiece]:
        """Return a context's text as plain runs and numbered sentences (the page marks evidence on these).

        Computed when the page asks (never on a label POST): segmenting is for showing.
        """
        return context_pieces(context.text)


@dataclass(frozen=True)
class ContextPiece:
    """A run of a context's text: between sentences (sentence None), or sentence `sentence` (0-based)."""

    text: str
    sentence: int | None = None


def context_pieces(text: str) -> list[ContextPiece]:
    """Split a context into the sentences `segment` finds (the indexes evidence refers to) and the runs between."""
    pieces: list[ContextPiece] = []
    pos = 0
    for index, span in enumerate(segment(text)):
        if span.start > pos:
            pieces.append(ContextPiece(text[pos:span.start]))
        pieces.append(ContextPiece(span.text, index))
        pos = span.end
    if pos < len(text):
        pieces.append(ContextPiece(text[pos:]))
    return pieces


@dataclass(frozen=True)
class MarkedPiece:
    """A run of a context's text with the people who marked it as evidence (a sentence; whole contexts: MarkedContext)."""

    text: str
    sentence: int | None
    marked_by: tuple[str, ...] = ()


@dataclass
class MarkedContext:
    """A retrieved context as the engineer deciding a disagreement reads it: rank, doc id, text, and who marked what."""

    id: int
    rank: int  # 0-based; people read `number`
    doc_id: str | None
    text: str
    marked_by: list[str]  # who marked the whole context as evidence
    pieces: list[MarkedPiece]
    is_target: bool = False  # the context the label is about (context tasks)

    @property
    def number(self) -> int:
        return self.rank + 1

    @property
    def sentence_markers(self) -> list[str]:
        """Everyone who marked one of this context's sentences, in order of appearance."""
        names: list[str] = []
        for piece in self.pieces:
            names += [n for n in piece.marked_by if n not in names]
        return names

    @property
    def who(self) -> list[str]:
        """Everyone who marked this context or one of its sentences, in order of appearance."""
        names = list(self.marked_by)
        for piece in self.pieces:
            names += [n for n in piece.marked_by if n not in names]
        return names


def marked_contexts(contexts, marks, *, target_id: int | None = None) -> list[MarkedContext]:
    """Return a sample's contexts with the evidence each person marked: `marks` is (who, Label.evidence) pairs.

    Evidence names whole contexts by rank and sentences as {"context": rank, "sentence": index}
    (the sentences `context_pieces` finds, as the workbench numbers them).
    """
    whole: dict[int, list[str]] = {}
    sentences: dict[tuple[int, int], list[str]] = {}
    for who, evidence in marks:
        for entry in evidence or []:
            if isinstance(entry, dict) and isinstance(entry.get("context"), int) and isinstance(entry.get("sentence"), int):
                names = sentences.setdefault((entry["context"], entry["sentence"]), [])
            elif isinstance(entry, int) and not isinstance(entry, bool):
                names = whole.setdefault(entry, [])
            else:
                continue
            if who not in names:
                names.append(who)
    out = []
    for context in contexts:
        pieces = [MarkedPiece(p.text, p.sentence, tuple(sentences.get((context.rank, p.sentence), ())) if p.sentence is not None else ())
                  for p in context_pieces(context.text)]
        out.append(MarkedContext(context.id, context.rank, context.doc_id, context.text, whole.get(context.rank, []), pieces,
                                 is_target=context.id == target_id))
    return out


_TASKS, _GUIDELINES, _TASK_DATASETS = Task.__table__, Guideline.__table__, TaskDataset.__table__


# The statements below run on every keystroke of every annotator: they are written once, as
# text, and on SQLite run on the driver itself (see Statement: SQLAlchemy's work per execution
# cost several times the queries). Plain SQL that SQLite and PostgreSQL both read.
_STAMP = "(SELECT max(id) FROM task) AS task_max, (SELECT count(*) FROM task) AS task_count, " \
         "(SELECT coalesce(sum(revision), 0) FROM task) AS task_edits, (SELECT max(id) FROM guideline) AS guideline_max"
_ASSIGNMENT_SQL = Statement("SELECT a.id, a.sample_id, a.user_id, a.status, a.note, a.priority, s.dataset_id, "
                            "CASE WHEN s.answer = '' THEN 0 ELSE 1 END AS has_answer, " + _STAMP +
                            " FROM assignment a JOIN sample s ON s.id = a.sample_id WHERE a.id = :id AND a.user_id = :user_id")
_STAMP_SQL = Statement("SELECT " + _STAMP)
_CLAIMS_SQL = Statement('SELECT id, sample_id, "index", text, start, "end" FROM claim '
                        'WHERE sample_id = :sample_id AND active ORDER BY "index"')
_CONTEXTS_SQL = Statement("SELECT id, sample_id, rank, text, doc_id FROM context WHERE sample_id = :sample_id AND active "
                          "ORDER BY rank")
_RESPONSES_SQL = Statement("SELECT id, sample_id, position, key, text, model FROM response WHERE sample_id = :sample_id "
                           "ORDER BY position")
# The parts of a sample read only when one of the item's tasks labels them (claims and contexts are always shown).
_PART_SQL = {"steps": Statement("SELECT id, sample_id, \"index\", parent, kind, name, input, output, status, tool_name, "
                                "tool_arguments, tool_result, turn FROM step WHERE sample_id = :sample_id AND active "
                                'ORDER BY "index"')}
LABEL_COLUMNS = "id, task_id, sample_id, claim_id, context_id, target_key, annotator_id, value, rationale, evidence, " \
                'guideline_version, stale, stale_reason, source, "order", error_type'
# What the item page shows of the sample and its dataset.
_SAMPLE_SQL = Statement("SELECT id, dataset_id, external_id, question, answer, ground_truth, claim_source FROM sample "
                        "WHERE id = :id")
_DATASET_SQL = Statement("SELECT id, name, is_demo FROM dataset WHERE id = :id")
_MY_LABELS_SQL = Statement(f"SELECT {LABEL_COLUMNS} FROM label WHERE sample_id = :sample_id AND annotator_id = :user_id "
                           "AND NOT adjudicated", json_fields=("evidence", "order"))


def get_assignment(session: Session, user: User, assignment_id: int):
    """Return the user's own assignment (a row), or raise NotFound (also for someone else's)."""
    row = _ASSIGNMENT_SQL.first(session, {"id": assignment_id, "user_id": user.id})
    if row is None:
        raise NotFound(Reason("no_such_assignment", assignment_id=assignment_id))
    return row


# Tasks and guidelines are only added or edited (an edit bumps the task's `revision`; saving a
# guideline adds a version; a task's datasets are written with the task, and changing them is an edit), so (largest task id,
# number of tasks, sum of the tasks' revisions, largest guideline id) names their state: the rows
# are read again only when it changes, and every other request pays one tiny query.
_TASK_CACHE: dict[str, tuple[tuple, list, dict, dict]] = {}
_TASK_CACHE_LOCK = threading.Lock()


def tasks_and_guidelines(session: Session, stamp: tuple | None = None) -> tuple[list, dict[int, object]]:
    """Return every task (built-in first) and the current guideline of each task that has one.

    `stamp`: the (task_max, task_count, task_edits, guideline_max) the caller has just read, if it has.
    """
    tasks, guidelines, _ = _cached_tasks(session, stamp)
    return tasks, guidelines


def _cached_tasks(session: Session, stamp: tuple | None) -> tuple[list, dict[int, object], dict[int, frozenset[int]]]:
    conn = session.connection()
    if stamp is None:
        stamp = tuple(_STAMP_SQL.first(session, {}))
    key = str(conn.engine.url)
    cached = _TASK_CACHE.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1], cached[2], cached[3]
    tasks, guidelines = _read_tasks_and_guidelines(conn)
    scopes: dict[int, set[int]] = {}
    for task_id, dataset_id in conn.execute(sa_select(_TASK_DATASETS.c.task_id, _TASK_DATASETS.c.dataset_id)).all():
        scopes.setdefault(task_id, set()).add(dataset_id)
    frozen = {task_id: frozenset(ids) for task_id, ids in scopes.items()}
    with _TASK_CACHE_LOCK:
        _TASK_CACHE[key] = (stamp, tasks, guidelines, frozen)
    return tasks, guidelines, frozen


def tasks_of_dataset(tasks: list, scopes: dict[int, frozenset[int]], dataset_id: int) -> list:
    """Return the tasks an item of the dataset offers: the global ones and those scoped to it (the list itself
    when no task is scoped, so the widgets' cache keeps its key)."""
    if not scopes:
        return tasks
    return [task for task in tasks if task.id not in scopes or dataset_id in scopes[task.id]]


def _read_tasks_and_guidelines(conn) -> tuple[list, dict[int, object]]:
    newest = (sa_select(_GUIDELINES.c.task_id, func.max(_GUIDELINES.c.version).label("version"))
              .group_by(_GUIDELINES.c.task_id).subquery())
    rows = conn.execute(
        sa_select(_TASKS, _GUIDELINES.c.id.label("g_id"), _GUIDELINES.c.version.label("g_version"),
                  _GUIDELINES.c.text.label("g_text"), _GUIDELINES.c.created_at.label("g_created_at"))
        .select_from(_TASKS.outerjoin(newest, newest.c.task_id == _TASKS.c.id)
                     .outerjoin(_GUIDELINES, and_(_GUIDELINES.c.task_id == _TASKS.c.id, _GUIDELINES.c.version == newest.c.version)))
    ).all()
    order = {spec.name: i for i, spec in enumerate(BUILTIN_TASKS)}
    # Metric tasks are scored per sample by metric judges, claim_extraction makes the claims: not labelled here.
    rows = sorted((t for t in rows if t.name not in JUDGE_ONLY_TASKS), key=lambda t: (order.get(t.name, len(order)), t.name))
    guidelines = {t.id: SimpleNamespace(id=t.g_id, task_id=t.id, version=t.g_version, text=t.g_text, created_at=t.g_created_at)
                  for t in rows if t.g_id is not None}
    return rows, guidelines


@dataclass
class ItemData:
    """What an item needs from the database, read in a handful of plain queries (rows, not ORM objects)."""

    assignment: object
    tasks: list
    guidelines: dict[int, object]
    claims: list
    contexts: list
    labels: dict[tuple[int, str], object]
    sample: object = None
    dataset: object = None
    responses: list = field(default_factory=list)  # rows in import order (read when a pairwise task exists)
    steps: list = field(default_factory=list)  # the trajectory's active steps in order (read when a task judges them)
    all_tasks: list | None = None  # every task (the widgets' cache); `tasks` are those of the item's dataset
    # When a task is left out: reads (task id → its datasets' names, this dataset's name) for the refusal, only then.
    scope_names: Callable[[], tuple[dict[int, list[str]], str]] | None = None

    def shown_order(self) -> list[str]:
        """Return the sample's response ids in the order this annotator sees them ([] without responses)."""
        ids = [r.key for r in self.responses]
        return presentation_order(self.assignment.user_id, self.assignment.sample_id, ids) if len(ids) >= 2 else []

    def task(self, ref: str | int):
        """Return a task row by name or id; raise TaskNotOffered for a task scoped to other datasets, else NotFound."""
        def named(task) -> bool:
            return task.name == ref or (str(ref).isascii() and str(ref).isdigit() and task.id == int(ref))

        for task in self.tasks:
            if named(task):
                return task
        for task in self.all_tasks or ():
            if named(task) and self.scope_names is not None:
                scopes, dataset = self.scope_names()
                raise TaskNotOffered(Reason("task_not_on_dataset", task=task.name, dataset=dataset,
                                            datasets=", ".join(scopes.get(task.id, []))))
        raise NotFound(Reason("no_such_task", ref=ref))


def load_item(session: Session, user: User, assignment_id: int, *, page: bool = True) -> ItemData:
    """Read one of the user's items: its assignment, tasks, claims, contexts and my labels (and, for the page, the texts).

    Plain statements (rows, not ORM objects): this runs on every keystroke of every annotator,
    and ORM objects would cost several times the queries themselves.
    """
    assignment = get_assignment(session, user, assignment_id)
    sample_id = assignment.sample_id
    every, guidelines, scopes = _cached_tasks(session, (assignment.task_max, assignment.task_count, assignment.task_edits,
                                                        assignment.guideline_max))
    tasks = tasks_of_dataset(every, scopes, assignment.dataset_id)
    claims = _CLAIMS_SQL.all(session, {"sample_id": sample_id})
    contexts = _CONTEXTS_SQL.all(session, {"sample_id": sample_id})
    data = ItemData(assignment, tasks, guidelines, claims, contexts, my_labels(session, sample_id, user.id), all_tasks=every)
    if len(tasks) < len(every):  # a label posted on a task of another dataset is refused naming its datasets
        data.scope_names = lambda: _scope_names(session, scopes, assignment.dataset_id)
    if any(judging(task).kind.orders for task in tasks):
        data.responses = _RESPONSES_SQL.all(session, {"sample_id": sample_id})
    for kind in {judging(task).target for task in tasks}:  # the parts read only when a task labels them
        if kind.items in _PART_SQL:
            setattr(data, kind.items, _PART_SQL[kind.items].all(session, {"sample_id": sample_id}))
    if page:
        data.sample = _SAMPLE_SQL.first(session, {"id": sample_id})
        data.dataset = _DATASET_SQL.first(session, {"id": data.sample.dataset_id})
    return data


def _scope_names(session: Session, scopes: dict[int, frozenset[int]], dataset_id: int) -> tuple[dict[int, list[str]], str]:
    """Return task id → the names of its datasets, and the name of `dataset_id`."""
    wanted = {dataset_id} | {d for ids in scopes.values() for d in ids}
    names = dict(session.execute(sa_select(Dataset.id, Dataset.name).where(Dataset.id.in_(wanted))).all())
    return ({task_id: sorted(names.get(d, str(d)) for d in ids) for task_id, ids in scopes.items()},
            names.get(dataset_id, str(dataset_id)))


def my_labels(session: Session, sample_id: int, user_id: int) -> dict[tuple[int, str], object]:
    """Return my current (not adjudicated) labels on a sample, by (task id, target key)."""
    rows = _MY_LABELS_SQL.all(session, {"sample_id": sample_id, "user_id": user_id})
    return {(row.task_id, row.target_key): row for row in rows}


# The widgets of the cached tasks and guidelines (the same list and dict objects until they
# change) in the reader's language (a rubric's level texts): built once, not on every keystroke.
_WIDGETS: tuple[object, object, str, dict[int, Widget]] = (None, None, "", {})


def _widgets(tasks: list, guidelines: dict[int, object]) -> dict[int, Widget]:
    global _WIDGETS
    cached_tasks, cached_guidelines, cached_locale, widgets = _WIDGETS
    locale = current().locale
    if cached_tasks is not tasks or cached_guidelines is not guidelines or cached_locale != locale:
        widgets = {task.id: widget_for(task, guidelines.get(task.id)) for task in tasks}
        _WIDGETS = (tasks, guidelines, locale, widgets)
    return widgets


def item_view(data: ItemData, *, required: tuple[str, ...] | list[str] = REQUIRED_TASKS) -> ItemView:
    """Return the item view of loaded item data."""
    tasks, guidelines, mine = data.tasks, data.guidelines, data.labels
    widgets = _widgets(data.all_tasks or tasks, guidelines)

    order = data.shown_order()
    has_answer = bool(data.assignment.has_answer)

    def cells_for(kind: TargetKind, ids_positions: list[tuple[int, int]], *, pairwise: bool = False) -> list[Cell]:
        out = []
        for target_id, position in ids_positions:
            for task in tasks:
                judged = judging(task)
                if judged.target is not kind or judged.kind.orders != pairwise:
                    continue
                if (judged.needs_answer and not has_answer) or (pairwise and not order):
                    continue
                version = guidelines[task.id].version if task.id in guidelines else None
                label = mine.get((task.id, kind.key(target_id)))
                if pairwise:
                    out.append(Cell(task, pairwise_widget(task, order), kind.name, target_id, position, label, version, True,
                                    order))
                else:
                    out.append(Cell(task, widgets[task.id], kind.name, target_id, position, label, version,
                                    task.name in required))
        return out

    sample_id = data.assignment.sample_id
    # In keyboard order: the target kinds' (claims, the sample, contexts…), the sample's per-order (pairwise) cells
    # after its own.
    cells = [cell for kind in ordered_targets() for pairwise in (False, True)
             for cell in cells_for(kind, kind.parts(data, sample_id), pairwise=pairwise)]
    pieces, unplaced = answer_pieces(data.sample.answer, data.claims) if data.sample is not None else ([], [])
    by_target: dict[str, list[Cell]] = {}
    for cell in cells:
        by_target.setdefault(cell.key, []).append(cell)
    used = {cell.task.id for cell in cells}
    shown_guidelines = [(task, guidelines[task.id]) for task in tasks if task.id in used and task.id in guidelines]
    by_key = {r.key: r for r in data.responses}
    shown = [(i + 1, by_key[key]) for i, key in enumerate(order)]
    return ItemView(data.assignment, data.sample, data.dataset, data.contexts, data.claims, pieces, unplaced, cells,
                    shown_guidelines, status_of(cells, data.assignment), by_target, shown, timeline(data.steps))


def build_item(session: Session, assignment, user: User, *,
               required: tuple[str, ...] | list[str] = REQUIRED_TASKS) -> ItemView:
    """Return the item view of one of the user's assignments."""
    return item_view(load_item(session, user, assignment.id), required=required)


def status_of(cells: list[Cell], assignment) -> ItemStatus:
    """Return the progress per task and what is missing or to confirm."""
    progress: dict[int, TaskProgress] = {}
    for cell in cells:
        entry = progress.setdefault(cell.task.id, TaskProgress(cell.task, 0, 0, cell.required))
        entry.total += 1
        entry.done += cell.label is not None
    missing = [c for c in cells if c.required and c.label is None]
    to_confirm = [c for c in cells if c.required and c.needs_confirming]
    return ItemStatus(list(progress.values()), missing, to_confirm, assignment.status)
