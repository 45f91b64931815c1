"""SQLModel tables: the whole data model of calibrate.

Over 800 lines because it is the one place the schema is declared: Alembic's autogenerate and
the tests that compare the models with the migrations read one metadata, and a table split off
into another module would be one more import that every table's relations must follow.

Relations (see docs/architecture.md):

    Dataset ─< Sample ─< Context
                      ─< Claim
                      ─< ClaimEdit (an expert's split, merge or edit of the claims)
                      ─< Response (pairwise items: two or more responses, by the user's ids)
    Task ─< Guideline
    Sample ─< Assignment >─ User
    Task, Sample/Claim/Context, User ─< Label ─< LabelRevision
    Prompt(task) ─< PromptVersion ─< FewShot
    Judge(prompt version | imported) ─< JudgeRun ─< Verdict
    ResponseCache (keyed by the hash of a rendered request)
    User ─< LoginSession; LoginThrottle (failed logins by account and by address)
    ImportBatch ─< StagedLabel, StagedVerdict, ImportStep; Dataset.import_batch_id (hidden until published)
    Dataset ─< GoldenSet ─< GoldenVersion (immutable: its items and their gold, hashed)
                        ─< GoldenMember >─ Sample (added_in, retired_in, anchor_in: version numbers)
    Dataset ─ QueuePolicy (the saved `calibrate queue auto`); Dataset ─< AuditDraw (one per sample drawn or passed over)
    Dataset ─< IngestToken ─< StagedSpan, StagedTrace (keyed by dataset and trace id), StagedFeedback
    Sample ─< StaleVerdict (sample-level verdicts on content since changed: history, read by no figure)
    Dataset ─< Optimisation (`calibrate optimise`) ─< PromptVersion (its candidates: optimisation_id, their origin)
    Sample ─< Step (an agent's trajectory: its spans in start order, `parent` an earlier step's index)

A label or a verdict points at one *target*: a sample, a claim, a context or a step, named by the
task's target kind.  ``target_key`` ("sample:ID", "claim:ID", "context:ID", "step:ID") is stored beside
the foreign keys so that "one current label per (task, target, annotator)" and "one verdict
per (judge, task, target)" are plain unique constraints (SQL treats NULLs as distinct, so a
constraint over the three nullable foreign keys would not hold).

Values are stored as text in their canonical form (a label string, or a number written by
``calibrate.task_values.canonical_value``); the task's kind says how to read them back. A value of a
*pairwise* task names a response by its id (``Response.key``) or is ``tie``, never a position;
the presentation order a judge or an annotator saw is recorded beside it (``order``, the
response ids in the order shown). A judge may have one verdict per order on a target, so the
verdict's unique key includes ``order_key``: the order as the responses' 0-based import
positions ("1,0"), "" when no order applies (docs/formats.md, "Pairwise").
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Column, Index, Integer, Text, UniqueConstraint
from sqlmodel import Field, SQLModel, col

ROLES = ("annotator", "engineer", "admin")
TARGETS = ("sample", "claim", "context", "step")
# What a step of a trajectory is (docs/formats.md, "Steps"): OpenInference's span kinds, lower case, and `other`.
STEP_KINDS = ("agent", "chain", "llm", "tool", "retriever", "embedding", "reranker", "guardrail", "evaluator", "other")
STEP_STATUSES = ("ok", "error")
KINDS = ("categorical", "ordinal", "continuous", "pairwise")
# Kinds whose values are labels (agreement statistics: kappa, confusion); pairwise labels are response ids and tie.
LABEL_KINDS = ("categorical", "pairwise")
TIE = "tie"  # the value of a pairwise task that prefers no response (when the task declares it)
MAX_RESPONSES = 9  # responses of one sample: one key each (1–9) in the workbench
MAX_RESPONSE_ID_CHARS = 64
# The kind of claim_extraction only (no custom task has it): its value is a JSON list of claims,
# and it is never calibrated (no agreement statistics).
EXTRACTION = "extraction"
# The kind of instruction_rewrite only: its value is a judge's rewritten instructions (a system template), asked for by
# `calibrate optimise` (loop/optimise.py); never run over a dataset, never calibrated.
REWRITE = "rewrite"
# Claim sources (Sample.claim_source, Claim.origin; calibrate/claimsets.py says what they mean).
SEGMENTER = "segmenter"
IMPORT = "import"
EXPERT = "expert"
EDITED = "+edited"
SPLITS = ("train", "dev", "test")


def utcnow() -> datetime:
    """Return the current time, timezone-aware in UTC."""
    return datetime.now(UTC)


# The largest integer a row id may be: SQLite's INTEGER and PostgreSQL's bigint stop at 2⁶³−1.
# A larger number in a URL, a form or a target key names nothing (views/fields.py).
MAX_ID = 2**63 - 1


def target_key(target: str, target_id: int) -> str:
    """Return the stable key of a label or verdict target ("claim:42")."""
    return f"{target}:{target_id}"


def parse_target_key(key: str) -> tuple[str, int] | None:
    """Return (kind, id) of a target key such as "claim:42", or None when it is not one (an id over MAX_ID included)."""
    kind, _, raw_id = (key or "").partition(":")
    if kind not in TARGETS or not (raw_id.isascii() and raw_id.isdigit()) or len(raw_id) > 19 or int(raw_id) > MAX_ID:
        return None
    return kind, int(raw_id)


class ImportBatch(SQLModel, table=True):
    """An import being written in short transactions (calibrate/ingest/batches.py): nothing of it is
    visible until its last, small transaction publishes it; an unfinished batch is cleaned up."""

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(max_length=20)  # samples | labels | verdicts
    dataset: str = Field(max_length=200)  # the dataset it imports into (one live batch per dataset)
    source: str = Field(default="", max_length=1000)  # the file's name
    state: str = Field(default="writing", max_length=20)  # writing | published
    owner: str = Field(default="", max_length=300)  # "host:pid" of the importing process
    started: int  # Unix seconds
    heartbeat: int  # Unix seconds of its last committed chunk


class Dataset(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True, max_length=200)
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    source: str = Field(default="", max_length=1000)
    is_demo: bool = Field(default=False)
    created_at: datetime = Field(default_factory=utcnow)
    # Set while an import batch writes into the dataset (a new one, or the staging copy of an
    # existing one): hidden from every page, command and lookup until the batch is published.
    # (No foreign key: on SQLite adding one would copy the table, and dropping the old copy
    # would cascade to its samples.)
    import_batch_id: int | None = Field(default=None)


def visible_dataset():
    """Return the condition that a dataset is not an import's unpublished staging (`Dataset.import_batch_id` is NULL)."""
    return col(Dataset.import_batch_id).is_(None)


class Sample(SQLModel, table=True):
    __table_args__ = (
        UniqueConstraint("dataset_id", "external_id", name="uq_sample_dataset_external"),
        Index("ix_sample_dataset_split", "dataset_id", "split"),
        Index("ix_sample_dataset_content_sha256", "dataset_id", "content_sha256"),
    )
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="dataset.id", ondelete="CASCADE")
    external_id: str = Field(max_length=500)
    question: str = Field(sa_column=Column(Text, nullable=False))
    answer: str = Field(sa_column=Column(Text, nullable=False))
    ground_truth: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # "metadata" is reserved by SQLAlchemy's declarative base: the attribute is `meta`.
    meta: dict[str, Any] = Field(default_factory=dict, sa_column=Column("metadata", JSON, nullable=False))
    feedback: int | None = Field(default=None)
    retrieved_ids: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    relevant_ids: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    content_hash: str = Field(max_length=64)
    segmenter: str = Field(default="", max_length=50)
    # Where the active claims come from: "segmenter", "import" (given in the samples file),
    # "NAME@V" (an LLM extraction by that prompt version), each with "+edited" once an expert
    # split, merged or edited one of them (calibrate/claimsets.py).
    claim_source: str = Field(default="segmenter", max_length=250)
    split: str | None = Field(default=None, max_length=10)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    # A copy of `metadata.content_sha256` (a trace sample's content digest, docs/formats.md) when that is a
    # 64-character string, else NULL; written with the metadata by the samples import. Not `content_hash` (the
    # hash of the whole record): the traces import finds "the same content under another trace id" through
    # the index (dataset_id, content_sha256), so that lookup costs the batch, not the dataset.
    content_sha256: str | None = Field(default=None, max_length=64)


class Context(SQLModel, table=True):
    __table_args__ = (Index("ix_context_sample_rank", "sample_id", "rank"),)
    id: int | None = Field(default=None, primary_key=True)
    sample_id: int = Field(foreign_key="sample.id", ondelete="CASCADE")
    rank: int
    text: str = Field(sa_column=Column(Text, nullable=False))
    doc_id: str | None = Field(default=None, max_length=500)
    # An --update that changes or drops a context retires it instead of deleting it, so the
    # labels made on it survive (flagged stale).
    active: bool = Field(default=True)


class Claim(SQLModel, table=True):
    __table_args__ = (Index("ix_claim_sample_index", "sample_id", "index"),)
    id: int | None = Field(default=None, primary_key=True)
    sample_id: int = Field(foreign_key="sample.id", ondelete="CASCADE")
    index: int
    text: str = Field(sa_column=Column(Text, nullable=False))
    start: int = Field(default=-1)  # -1: an imported claim that is not a substring of the answer
    end: int = Field(default=-1)
    active: bool = Field(default=True)
    # Who made this claim: "segmenter", "import", "NAME@V" (an extraction) or "expert" (an edit).
    origin: str = Field(default="segmenter", max_length=250)


class Step(SQLModel, table=True):
    """One step of a sample's trajectory: a span of an agent's trace (an LLM call, a tool call, a retrieval …).

    `index` is the step's 0-based place in start order (depth first among siblings started
    together), `parent` the index of the step it ran under (None: a root). `external_id` is the
    step's id in the samples file (a span id for a trace). `turn` numbers the traces of a
    conversation (0-based by their start; None outside conversations). Tool steps carry
    `tool_name`, `tool_arguments` and `tool_result` (any JSON value: an object, or the text an
    application sent). Like claims and contexts, an --update that changes a sample's steps retires
    the old ones (`active` False) instead of deleting them, so the labels on them survive (stale).
    Formats and bounds: docs/formats.md, "Steps"; calibrate/ingest/step_records.py.
    """

    __table_args__ = (Index("ix_step_sample_index", "sample_id", "index"),)
    id: int | None = Field(default=None, primary_key=True)
    sample_id: int = Field(foreign_key="sample.id", ondelete="CASCADE")
    index: int
    parent: int | None = Field(default=None)
    external_id: str = Field(default="", max_length=200)
    kind: str = Field(max_length=20)  # STEP_KINDS
    name: str = Field(default="", max_length=500)
    input: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    output: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    status: str = Field(default="ok", max_length=10)  # STEP_STATUSES
    started_at: datetime | None = Field(default=None)
    duration_ms: float | None = Field(default=None)
    tool_name: str | None = Field(default=None, max_length=200)
    tool_arguments: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
    tool_result: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
    turn: int | None = Field(default=None)
    active: bool = Field(default=True)


class ClaimEdit(SQLModel, table=True):
    """One expert change of a sample's claims in the workbench (calibrate/annotation/claim_edits.py).

    `before` and `after` are the claims retired and added, as [{"id", "index", "text", "start",
    "end"}]; `stale_labels` the ids of the labels the change flagged stale (an undo clears them).
    """

    id: int | None = Field(default=None, primary_key=True)
    sample_id: int = Field(foreign_key="sample.id", ondelete="CASCADE", index=True)
    user_id: int = Field(foreign_key="user.id")
    action: str = Field(max_length=20)  # split | merge | edit
    before: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    after: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    source_before: str = Field(default="", max_length=250)
    source_after: str = Field(default="", max_length=250)
    stale_labels: list[int] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    undone_at: datetime | None = Field(default=None)
    created_at: datetime = Field(default_factory=utcnow)


class Response(SQLModel, table=True):
    """One of a pairwise item's responses: `key` is the user's id ("A", "1", a model name), `position` the import order."""

    __table_args__ = (
        UniqueConstraint("sample_id", "key", name="uq_response_sample_key"),
        Index("ix_response_sample_position", "sample_id", "position"),
    )
    id: int | None = Field(default=None, primary_key=True)
    sample_id: int = Field(foreign_key="sample.id", ondelete="CASCADE")
    position: int
    key: str = Field(max_length=MAX_RESPONSE_ID_CHARS)
    text: str = Field(sa_column=Column(Text, nullable=False))
    model: str = Field(default="", max_length=200)
    meta: dict[str, Any] | None = Field(default=None, sa_column=Column("metadata", JSON, nullable=True))


def order_key(positions: list[int] | tuple[int, ...] | None) -> str:
    """Return the key of a presentation order given as 0-based import positions ("1,0"); "" for none."""
    return ",".join(str(p) for p in positions) if positions else ""


class User(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    username: str = Field(index=True, unique=True, max_length=100)
    display_name: str = Field(default="", max_length=200)
    role: str = Field(default="annotator", max_length=20)
    # None: the account exists (named by an import) but cannot log in until an admin sets one.
    password_hash: str | None = Field(default=None, max_length=300)
    active: bool = Field(default=True)
    created_at: datetime = Field(default_factory=utcnow)
    # The interface's language the user chose ("en", "es"; calibrate/i18n.py); None: the browser's Accept-Language.
    locale: str | None = Field(default=None, max_length=10)


class LoginSession(SQLModel, table=True):
    """A logged-in browser: the cookie carries a random token, this row its SHA-256 (calibrate/logins.py).

    Times are Unix seconds (compared on every request; no time zone to get wrong). Logout
    revokes the row; a password change or a deactivation revokes every row of the user.
    """

    __table_args__ = (Index("ix_loginsession_user", "user_id"), Index("ix_loginsession_expires", "expires"))
    id: str = Field(primary_key=True, max_length=64)
    user_id: int = Field(foreign_key="user.id", ondelete="CASCADE")
    created: int
    last_seen: int
    expires: int  # the absolute end (SESSION_ABSOLUTE_LIFETIME after the login)
    revoked: int | None = Field(default=None)
    address: str = Field(default="", max_length=64)


class LoginThrottle(SQLModel, table=True):
    """Recent failed logins of one account ("user:NAME") or one client address ("addr:IP") (calibrate/logins.py)."""

    __table_args__ = (Index("ix_loginthrottle_last_failure", "last_failure"),)
    key: str = Field(primary_key=True, max_length=200)
    failures: int = Field(default=0)
    first_failure: int
    last_failure: int
    locked_until: int = Field(default=0)


class Task(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True, max_length=100)
    target: str = Field(max_length=10)
    kind: str = Field(max_length=20)
    # categorical: the declared labels; `excluded` are valid labels left out of statistics.
    labels: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    excluded: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    scale_min: float | None = Field(default=None)
    scale_max: float | None = Field(default=None)
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    builtin: bool = Field(default=False)
    created_at: datetime = Field(default_factory=utcnow)
    # How its labels are shown to people, per locale: {"es": {"supported": "Respaldada"}}; stored values never change.
    display: dict | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    # Its description in other languages: {"es": "¿Qué respuesta es mejor?"}; `description` is the default language's.
    descriptions: dict | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    # Counts the task's edits: the workbench's task cache (annotation/items.py) keys on the tasks' state.
    revision: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))
    # A categorical task's error taxonomy (`task add/edit --error-types`): a label or verdict may name one of these as
    # what was wrong (step_correctness: wrong_tool, …); None: the task takes no error type.
    error_types: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))


class TaskDataset(SQLModel, table=True):
    """A custom task scoped to a dataset (`calibrate task add --dataset D`, repeatable): the workbench offers it only on
    that dataset's items. A task without a row is global (every built-in task, and custom tasks added without --dataset)."""

    __table_args__ = (Index("ix_taskdataset_dataset", "dataset_id"),)
    task_id: int = Field(foreign_key="task.id", ondelete="CASCADE", primary_key=True)
    dataset_id: int = Field(foreign_key="dataset.id", ondelete="CASCADE", primary_key=True)


class Guideline(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("task_id", "version", name="uq_guideline_task_version"),)
    id: int | None = Field(default=None, primary_key=True)
    task_id: int = Field(foreign_key="task.id", ondelete="CASCADE")
    version: int
    text: str = Field(sa_column=Column(Text, nullable=False))
    author_id: int | None = Field(default=None, foreign_key="user.id")
    created_at: datetime = Field(default_factory=utcnow)


class Assignment(SQLModel, table=True):
    __table_args__ = (
        UniqueConstraint("sample_id", "user_id", name="uq_assignment_sample_user"),
        # The queue: "my pending items, by priority, then in the seeded order of creation".
        Index("ix_assignment_queue", "user_id", "status", "priority", "id"),
    )
    id: int | None = Field(default=None, primary_key=True)
    sample_id: int = Field(foreign_key="sample.id", ondelete="CASCADE")
    user_id: int | None = Field(default=None, foreign_key="user.id")
    # pending: queued; done: submitted; skipped (with reason); flagged for review.
    status: str = Field(default="pending", max_length=20)
    note: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    priority: int = Field(default=0)  # lower first; --negative-first puts feedback −1 at 0
    # Set by `calibrate queue auto` (annotation/auto_queue.py): "triage" (never used by estimates) or
    # "audit" (a uniform random draw; its labels are the only ones `calibrate monitor` uses), None otherwise.
    stream: str | None = Field(default=None, max_length=10)
    # An audit assignment's selection probability: the chance its sample was drawn in its pass.
    audit_prob: float | None = Field(default=None)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class Label(SQLModel, table=True):
    __table_args__ = (
        UniqueConstraint("task_id", "target_key", "annotator_id", "adjudicated", name="uq_label_current"),
        Index("ix_label_sample", "sample_id"),
        Index("ix_label_annotator", "annotator_id"),
    )
    id: int | None = Field(default=None, primary_key=True)
    task_id: int = Field(foreign_key="task.id")
    sample_id: int = Field(foreign_key="sample.id", ondelete="CASCADE")
    claim_id: int | None = Field(default=None, foreign_key="claim.id")
    context_id: int | None = Field(default=None, foreign_key="context.id")
    # A step target's Step.id. No foreign key: adding one on SQLite would copy the table (the step
    # is retired, never deleted, while its sample lives; the sample's cascade removes both).
    step_id: int | None = Field(default=None)
    target_key: str = Field(max_length=40)
    annotator_id: int = Field(foreign_key="user.id")
    value: str = Field(max_length=200)
    # One of the task's error types (Task.error_types): what was wrong, beside the value; None when not given.
    error_type: str | None = Field(default=None, max_length=100)
    rationale: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    evidence: list[int] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    guideline_version: int | None = Field(default=None)
    # An adjudicated gold label: its own row, `annotator_id` is who decided.
    adjudicated: bool = Field(default=False)
    # Set when the target changed under the label (an --update of its sample).
    stale: bool = Field(default=False)
    stale_reason: str = Field(default="", max_length=500)
    source: str = Field(default="ui", max_length=20)  # ui | import
    # Pairwise tasks: the response ids in the order the annotator saw them (None: not recorded).
    order: list[str] | None = Field(default=None, sa_column=Column("order", JSON, nullable=True))
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class LabelRevision(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    label_id: int = Field(foreign_key="label.id", ondelete="CASCADE", index=True)
    # create: the new value; update (and stale): the previous value, rationale, evidence, error type and
    # guideline version, so an undo can restore them; undo: the value that was undone.
    action: str = Field(max_length=20)  # create | update | undo | stale
    value: str = Field(max_length=200)
    rationale: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    evidence: list[int] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    guideline_version: int | None = Field(default=None)
    # ui: made in the workbench (only these can be undone there); None: an import or older.
    source: str | None = Field(default=None, max_length=20)
    order: list[str] | None = Field(default=None, sa_column=Column("order", JSON, nullable=True))
    error_type: str | None = Field(default=None, max_length=100)  # the label's error type, kept as its value is
    changed_by_id: int | None = Field(default=None, foreign_key="user.id")
    changed_at: datetime = Field(default_factory=utcnow)


class Prompt(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True, max_length=100)
    task_id: int = Field(foreign_key="task.id")
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    created_at: datetime = Field(default_factory=utcnow)


class PromptDataset(SQLModel, table=True):
    """A prompt scoped to a dataset (`calibrate prompt new NAME --dataset D`, repeatable): the dashboard and the prompts
    page of another dataset do not list it, and it runs only on its datasets. A prompt without a row is global."""

    __table_args__ = (Index("ix_promptdataset_dataset", "dataset_id"),)
    prompt_id: int = Field(foreign_key="prompt.id", ondelete="CASCADE", primary_key=True)
    dataset_id: int = Field(foreign_key="dataset.id", ondelete="CASCADE", primary_key=True)


class PromptVersion(SQLModel, table=True):
    __table_args__ = (
        UniqueConstraint("prompt_id", "number", name="uq_prompt_version_number"),
        UniqueConstraint("prompt_id", "content_hash", name="uq_prompt_version_hash"),
    )
    id: int | None = Field(default=None, primary_key=True)
    prompt_id: int = Field(foreign_key="prompt.id", ondelete="CASCADE")
    number: int
    template: str = Field(sa_column=Column(Text, nullable=False))
    system: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    model: str = Field(default="", max_length=200)
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    content_hash: str = Field(max_length=64)
    parent_id: int | None = Field(default=None, foreign_key="promptversion.id")
    note: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    author_id: int | None = Field(default=None, foreign_key="user.id")
    created_at: datetime = Field(default_factory=utcnow)
    # The optimisation that proposed it (`calibrate optimise`, loop/optimise.py); NULL for a version a person saved.
    optimisation_id: int | None = Field(default=None, foreign_key="optimisation.id", ondelete="SET NULL")


class Optimisation(SQLModel, table=True):
    """One `calibrate optimise` (or the dashboard's Optimise form): what it was asked (`settings`), how far it got
    (`state`: its candidates, runs, calls and cost, kept as it goes so a killed one is taken up), and its result.

    `key` is the digest of the settings that make it the same optimisation (loop/optimise.py): the same command
    run again continues it. Its candidates are prompt versions whose `optimisation_id` names it.
    """

    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="dataset.id", ondelete="CASCADE", index=True)
    task_id: int = Field(foreign_key="task.id")
    key: str = Field(max_length=64, index=True)
    status: str = Field(default="running", max_length=20)  # running | done | failed | cancelled
    settings: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    state: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    result: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    error: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    user_id: int | None = Field(default=None, foreign_key="user.id")
    created_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = Field(default=None)


class FewShot(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    version_id: int = Field(foreign_key="promptversion.id", ondelete="CASCADE", index=True)
    order: int
    sample_id: int = Field(foreign_key="sample.id")
    claim_id: int | None = Field(default=None, foreign_key="claim.id")
    context_id: int | None = Field(default=None, foreign_key="context.id")
    # A step target's Step.id. No foreign key: adding one on SQLite would copy the table (the step
    # is retired, never deleted, while its sample lives; the sample's cascade removes both).
    step_id: int | None = Field(default=None)
    target_key: str = Field(max_length=40)
    # Text: an extraction example's value is a claim list (JSON).
    value: str = Field(sa_column=Column(Text, nullable=False))
    rationale: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))


class Judge(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True, max_length=200)
    kind: str = Field(default="imported", max_length=20)  # prompt | imported
    prompt_version_id: int | None = Field(default=None, foreign_key="promptversion.id")
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    created_at: datetime = Field(default_factory=utcnow)


class JudgeRun(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    judge_id: int = Field(foreign_key="judge.id", index=True)
    dataset_id: int = Field(foreign_key="dataset.id")
    status: str = Field(default="pending", max_length=20)  # pending|running|done|failed|stopped
    backend: str = Field(default="", max_length=50)
    model: str = Field(default="", max_length=200)
    base_url: str = Field(default="", max_length=500)
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    n_total: int = Field(default=0)
    n_done: int = Field(default=0)
    n_errors: int = Field(default=0)
    n_cached: int = Field(default=0)
    input_tokens: int = Field(default=0)
    output_tokens: int = Field(default=0)
    cost: float = Field(default=0.0)
    error: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    started_at: datetime | None = Field(default=None)
    finished_at: datetime | None = Field(default=None)
    created_at: datetime = Field(default_factory=utcnow)


class Verdict(SQLModel, table=True):
    __table_args__ = (
        UniqueConstraint("judge_id", "task_id", "target_key", "order_key", "sample_index", name="uq_verdict_target_order_sample"),
        Index("ix_verdict_sample", "sample_id"),
    )
    id: int | None = Field(default=None, primary_key=True)
    judge_id: int = Field(foreign_key="judge.id")
    run_id: int | None = Field(default=None, foreign_key="judgerun.id")
    task_id: int = Field(foreign_key="task.id")
    sample_id: int = Field(foreign_key="sample.id", ondelete="CASCADE")
    claim_id: int | None = Field(default=None, foreign_key="claim.id")
    context_id: int | None = Field(default=None, foreign_key="context.id")
    # A step target's Step.id. No foreign key: adding one on SQLite would copy the table (the step
    # is retired, never deleted, while its sample lives; the sample's cascade removes both).
    step_id: int | None = Field(default=None)
    target_key: str = Field(max_length=40)
    # Pairwise tasks: the response ids in the order the judge saw them, and that order as import
    # positions ("1,0"; "" when no order applies), part of the unique key: one verdict per order.
    order: list[str] | None = Field(default=None, sa_column=Column("order", JSON, nullable=True))
    order_key: str = Field(default="", max_length=40)
    # Self-consistency (`judge run --samples K`): the K calls on one target are samples 0..K-1, part of
    # the unique key. Sample 0 is the verdict: every "one verdict per target" read keeps to it.
    sample_index: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))
    # None: the call gave no usable verdict (status unparsed or error): counted, never scored.
    # Text: an extraction's verdict is its claim list (JSON).
    value: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    error_type: str | None = Field(default=None, max_length=100)  # as a label's (Task.error_types)
    status: str = Field(default="ok", max_length=20)  # ok | unparsed | error
    reason: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    raw: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    error: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    latency_ms: float | None = Field(default=None)
    input_tokens: int | None = Field(default=None)
    output_tokens: int | None = Field(default=None)
    cached: bool = Field(default=False)
    source: str = Field(default="run", max_length=20)  # run | import
    created_at: datetime = Field(default_factory=utcnow)


class StaleVerdict(SQLModel, table=True):
    """A sample-level verdict made on content that has since changed (an `--update` import, a replayed trace).

    Moved here from `verdict` by the publish of the samples import that changed the sample's
    question, answer, ground truth, contexts or responses (ingest/samples.py), as the labels on
    it are flagged stale: kept as history (`verdict_id` its id there, every field as it was),
    read by no figure, and its target is pending again, so the next pass (`judge run`, a
    watcher) judges the new content.
    """

    __table_args__ = (Index("ix_staleverdict_sample", "sample_id"),)
    id: int | None = Field(default=None, primary_key=True)
    verdict_id: int
    judge_id: int
    run_id: int | None = Field(default=None)
    task_id: int
    sample_id: int = Field(foreign_key="sample.id", ondelete="CASCADE")
    target_key: str = Field(max_length=40)
    order: list[str] | None = Field(default=None, sa_column=Column("order", JSON, nullable=True))
    order_key: str = Field(default="", max_length=40)
    sample_index: int = Field(default=0)
    value: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    status: str = Field(default="ok", max_length=20)
    reason: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    raw: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    error: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    latency_ms: float | None = Field(default=None)
    input_tokens: int | None = Field(default=None)
    output_tokens: int | None = Field(default=None)
    cached: bool = Field(default=False)
    source: str = Field(default="run", max_length=20)
    created_at: datetime  # when the verdict was made
    stale_at: datetime = Field(default_factory=utcnow)
    stale_reason: str = Field(default="", max_length=500)


class ResponseCache(SQLModel, table=True):
    key: str = Field(primary_key=True, max_length=64)
    backend: str = Field(max_length=50)
    model: str = Field(default="", max_length=200)
    response: str = Field(sa_column=Column(Text, nullable=False))
    input_tokens: int | None = Field(default=None)
    output_tokens: int | None = Field(default=None)
    created_at: datetime = Field(default_factory=utcnow)


class Triage(SQLModel, table=True):
    """An engineer's verdict on one disagreement between a judge and the human gold (calibrate/loop.py)."""

    __table_args__ = (UniqueConstraint("judge_id", "task_id", "target_key", name="uq_triage_target"),)
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="dataset.id", ondelete="CASCADE", index=True)
    judge_id: int = Field(foreign_key="judge.id", ondelete="CASCADE")
    task_id: int = Field(foreign_key="task.id")
    sample_id: int = Field(foreign_key="sample.id", ondelete="CASCADE")
    target_key: str = Field(max_length=40)
    kind: str = Field(max_length=30)  # judge_error | human_error | ambiguous_guideline
    note: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    user_id: int | None = Field(default=None, foreign_key="user.id")
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class TestEvaluation(SQLModel, table=True):
    """One look at the frozen test split: a judge's score there, computed on demand and recorded (calibrate/loop.py)."""

    __test__ = False  # not a pytest class
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="dataset.id", ondelete="CASCADE", index=True)
    judge_id: int = Field(foreign_key="judge.id", ondelete="CASCADE")
    task_id: int = Field(foreign_key="task.id")
    metric: str = Field(default="", max_length=30)
    value: float | None = Field(default=None)
    ci_low: float | None = Field(default=None)
    ci_high: float | None = Field(default=None)
    n: int = Field(default=0)
    passed: bool | None = Field(default=None)
    # The three-state decision of that look (pass, fail, undecided; calibration/decision.py), under which rule and
    # threshold: kept with the look, so a later change of the threshold does not rewrite what was seen. NULL on
    # looks recorded before revision 0005.
    decision: str | None = Field(default=None, max_length=10)
    rule: str | None = Field(default=None, max_length=10)
    threshold: float | None = Field(default=None)
    user_id: int | None = Field(default=None, foreign_key="user.id")
    created_at: datetime = Field(default_factory=utcnow)


class ImportStep(SQLModel, table=True):
    """One change an `--update` samples import staged, applied when its batch is published (ingest/batches.py).

    action: "sample" (row_id: the stored sample; other_id: the hidden copy holding its new
    fields; key/note: its labels' target key and stale reason, if they go stale), "activate"
    (a new context or claim row written inactive), "retire" (an old row; note: why its labels
    go stale), "keep" (a kept row whose doc_id or span changes: data).
    """

    __table_args__ = (Index("ix_importstep_batch", "batch_id", "action"),)
    id: int | None = Field(default=None, primary_key=True)
    batch_id: int = Field(foreign_key="importbatch.id", ondelete="CASCADE")
    action: str = Field(max_length=20)
    target: str = Field(default="", max_length=10)  # context | claim (for activate, retire, keep)
    row_id: int
    other_id: int | None = Field(default=None)
    key: str = Field(default="", max_length=40)
    note: str = Field(default="", max_length=500)
    data: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))


class StagedLabel(SQLModel, table=True):
    """A label line of an import batch, resolved and checked, waiting for the batch to be published."""

    __table_args__ = (Index("ix_stagedlabel_batch", "batch_id"),)
    id: int | None = Field(default=None, primary_key=True)
    batch_id: int = Field(foreign_key="importbatch.id", ondelete="CASCADE")
    task_id: int
    sample_id: int
    claim_id: int | None = Field(default=None)
    context_id: int | None = Field(default=None)
    step_id: int | None = Field(default=None)
    target_key: str = Field(max_length=40)
    annotator: str = Field(max_length=100)
    value: str = Field(max_length=200)
    error_type: str | None = Field(default=None, max_length=100)
    rationale: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    guideline_version: int | None = Field(default=None)
    # Pairwise: the order shown, as the JSON text a label's `order` holds; NULL: the line gave none.
    order: str | None = Field(default=None, sa_column=Column("order", Text, nullable=True))


class StagedVerdict(SQLModel, table=True):
    """A verdict line of an import batch, resolved and checked, waiting for the batch to be published."""

    __table_args__ = (Index("ix_stagedverdict_batch", "batch_id"),)
    id: int | None = Field(default=None, primary_key=True)
    batch_id: int = Field(foreign_key="importbatch.id", ondelete="CASCADE")
    judge: str = Field(max_length=200)
    task_id: int
    sample_id: int
    claim_id: int | None = Field(default=None)
    context_id: int | None = Field(default=None)
    step_id: int | None = Field(default=None)
    target_key: str = Field(max_length=40)
    order_key: str = Field(default="", max_length=40)
    order: str | None = Field(default=None, sa_column=Column("order", Text, nullable=True))  # JSON text, as above
    value: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    error_type: str | None = Field(default=None, max_length=100)
    status: str = Field(default="ok", max_length=20)
    reason: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    raw: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    error: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    latency_ms: float | None = Field(default=None)
    input_tokens: int | None = Field(default=None)
    output_tokens: int | None = Field(default=None)


class GoldenSet(SQLModel, table=True):
    """A named golden set of a dataset (names are per dataset): its versions and members (calibrate/loop/golden.py)."""

    __table_args__ = (UniqueConstraint("dataset_id", "name", name="uq_goldenset_name"),)
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="dataset.id", ondelete="CASCADE", index=True)
    name: str = Field(max_length=100)
    created_at: datetime = Field(default_factory=utcnow)


class GoldenVersion(SQLModel, table=True):
    """One immutable version of a golden set: its items with their gold at the time, and the sha256 of them.

    ``items`` is the canonical list the hash is taken over (docs/loop.md, "Golden sets");
    ``params`` says how the version was made (create: split/where; refresh: from, renew,
    anchor share, strata, seed, the allocation and the experts' assignments).
    """

    __table_args__ = (UniqueConstraint("golden_set_id", "number", name="uq_goldenversion_number"),)
    id: int | None = Field(default=None, primary_key=True)
    golden_set_id: int = Field(foreign_key="goldenset.id", ondelete="CASCADE", index=True)
    number: int
    hash: str = Field(max_length=64)
    items: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    user_id: int | None = Field(default=None, foreign_key="user.id")
    created_at: datetime = Field(default_factory=utcnow)


class GoldenMember(SQLModel, table=True):
    """A sample's life in a golden set: the versions it joined, left and became an anchor in (never deleted)."""

    __table_args__ = (UniqueConstraint("golden_set_id", "sample_id", name="uq_goldenmember_sample"),)
    id: int | None = Field(default=None, primary_key=True)
    golden_set_id: int = Field(foreign_key="goldenset.id", ondelete="CASCADE", index=True)
    sample_id: int = Field(foreign_key="sample.id", ondelete="CASCADE")
    added_in: int
    retired_in: int | None = Field(default=None)
    anchor_in: int | None = Field(default=None)  # the version from which it is an anchor (never retired); None: not one
    source_trace_id: str | None = Field(default=None, max_length=200)  # the production trace it came from (metadata.trace_id)


class QueuePolicy(SQLModel, table=True):
    """A dataset's saved `calibrate queue auto` policy (calibrate/annotation/auto_queue.py): applied again after each watcher pass."""

    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="dataset.id", ondelete="CASCADE", unique=True)
    daily: int  # assignments per UTC day, both streams together
    assign: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    overlap: int = Field(default=1)
    overlap_share: float = Field(default=0.0)
    audit_share: float = Field(default=0.5)
    seed: int = Field(default=0)
    updated_by_id: int | None = Field(default=None, foreign_key="user.id")
    updated_at: datetime = Field(default_factory=utcnow)


class RetentionPolicy(SQLModel, table=True):
    """A dataset's retention of production samples (`calibrate traces retention`, ingest/traces/retention.py): the traces
    server's settler purges samples older than `older_than_days` once a day, as `calibrate traces purge` does."""

    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="dataset.id", ondelete="CASCADE", unique=True)
    older_than_days: int
    updated_at: datetime = Field(default_factory=utcnow)
    applied_at: datetime | None = Field(default=None)  # when the settler last applied it (None: not yet)
    last_result: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))  # that purge's summary


class AuditDraw(SQLModel, table=True):
    """One judged sample's one audit draw: drawn or passed over, with the probability its pass gave every candidate.

    A sample is a candidate once: a sample passed over is never drawn later, so the stored probability is the
    chance it had of carrying audit labels (docs/production.md).
    """

    __table_args__ = (UniqueConstraint("sample_id", name="uq_auditdraw_sample"), Index("ix_auditdraw_dataset", "dataset_id"))
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="dataset.id", ondelete="CASCADE")
    sample_id: int = Field(foreign_key="sample.id", ondelete="CASCADE")
    drawn: bool
    probability: float
    created_at: datetime = Field(default_factory=utcnow)


class IngestToken(SQLModel, table=True):
    """A bearer token of the OTLP/HTTP receiver (`calibrate traces token`): it may only stage spans for one dataset.

    Only the sha256 of the token is stored; the token itself is printed once. The sampling the
    dataset's traces get (rate, salt) is bound here, and so are the counters the dataset page
    shows for the production source (ingest/traces/staging.py).
    """

    id: int | None = Field(default=None, primary_key=True)
    token_hash: str = Field(max_length=64, unique=True, index=True)
    dataset_id: int = Field(foreign_key="dataset.id", ondelete="CASCADE")
    rate: float = Field(default=1.0)
    salt: str = Field(max_length=200)
    # Conversations (`calibrate traces token --sessions`): the traces sharing a session id settle as one sample.
    sessions: bool = Field(default=False, sa_column=Column(Boolean, nullable=False, server_default="0"))
    created_at: datetime = Field(default_factory=utcnow)
    last_used_at: datetime | None = Field(default=None)
    revoked_at: datetime | None = Field(default=None)
    # Counters of the production source (what the receiver and the settler did with this token's spans).
    spans_received: int = Field(default=0)  # new spans staged (a repeated span is not counted)
    spans_repeated: int = Field(default=0)  # spans received again, already staged (nothing changed)
    spans_rejected: int = Field(default=0)  # spans refused one by one (partialSuccess.rejectedSpans)
    traces_settled: int = Field(default=0)  # traces handed to the sampling (root present, quiet for TRACES_SETTLE_S)
    traces_sampled: int = Field(default=0)
    traces_sampled_down: int = Field(default=0)
    traces_dropped: int = Field(default=0)  # rootless traces whose staged spans were older than a day
    spans_dropped: int = Field(default=0)
    skipped: dict[str, int] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))  # reason → traces
    last_received_at: datetime | None = Field(default=None)
    # Feedback received through `POST /v1/feedback`: staged, late (its trace was already a sample), dropped
    # (its trace never settled within ROOTLESS_MAX_AGE, or settled and was not drawn).
    feedback_received: int = Field(default=0)
    feedback_late: int = Field(default=0)
    feedback_dropped: int = Field(default=0)
    # How the sampled traces' upstream sampling probability was read from their tracestate (ingest/traces/upstream.py:
    # with_threshold, no_threshold, invalid_threshold, inconsistent_threshold, mixed_thresholds) → traces.
    upstream: dict[str, int] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False, server_default="{}"))
    # Keys of the applications' own metadata left out (ingest/traces/mapping.py, app_metadata).
    metadata_dropped: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))


class StagedSpan(SQLModel, table=True):
    """A span the OTLP/HTTP receiver stored and no settled trace has used yet (ingest/traces/staging.py).

    Keyed by (dataset_id, trace_id, span_id): a span received twice for a dataset is stored once
    (the first), and a trace id is a dataset's own: the same id sent with another dataset's
    token is another trace. `dataset_id` is the dataset of the token that sent it. `span` is the
    decoded span (name, parent, start, attributes, resource) as JSON text, what the file
    import's decoder makes of the same span.
    """

    __table_args__ = (
        UniqueConstraint("dataset_id", "trace_id", "span_id", name="uq_stagedspan_dataset_trace_span"),
        Index("ix_stagedspan_received", "received_at"),
    )
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="dataset.id", ondelete="CASCADE")
    token_id: int = Field(foreign_key="ingesttoken.id", ondelete="CASCADE")
    trace_id: str = Field(max_length=32)
    span_id: str = Field(max_length=16)
    is_root: bool = Field(default=False)
    received_at: float  # Unix seconds (the server's clock) when it was staged
    span: str = Field(sa_column=Column(Text, nullable=False))


class StagedTrace(SQLModel, table=True):
    """One staged trace: what settling asks of its spans, kept up to date by each request that stages some.

    The ready query, the rootless drop and the dataset page read these rows (one per trace,
    found through the index) instead of grouping every staged span, so settling a batch costs
    the batch, not what is staged. Keyed by (dataset_id, trace_id), as its spans are.
    `token_id` is the trace's owner: the token (of that dataset) its root span came with (until a
    root arrives, the token of its first span). Deleted with the trace's spans.

    A trace settling could not map is `quarantined` with its reason: never ready again, counted on
    the dataset page, dropped with the rootless traces a day after its last span.
    """

    __table_args__ = (Index("ix_stagedtrace_ready", "has_root", "quarantined", "last_received_at", "dataset_id", "trace_id"),)
    dataset_id: int = Field(foreign_key="dataset.id", ondelete="CASCADE", primary_key=True)
    trace_id: str = Field(max_length=32, primary_key=True)
    token_id: int = Field(foreign_key="ingesttoken.id", ondelete="CASCADE")
    has_root: bool = Field(default=False)
    last_received_at: float  # Unix seconds when its newest span was staged
    n_spans: int = Field(default=0)
    quarantined: bool = Field(default=False)
    quarantine_reason: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))


class StagedFeedback(SQLModel, table=True):
    """Feedback (`POST /v1/feedback`) for a trace of a dataset that is not a sample (yet): used when the trace settles.

    One row per (dataset, trace id): a later value replaces the earlier one. Dropped and counted
    on the token after ROOTLESS_MAX_AGE (ingest/traces/staging.py).
    """

    __table_args__ = (
        UniqueConstraint("dataset_id", "trace_id", name="uq_stagedfeedback_trace"),
        Index("ix_stagedfeedback_received", "received_at"),
    )
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="dataset.id", ondelete="CASCADE")
    token_id: int = Field(foreign_key="ingesttoken.id", ondelete="CASCADE")
    trace_id: str = Field(max_length=32)  # 32 lowercase hex (the --feedback file's rule makes any id so)
    value: int  # -1 (down), 0, 1 (up): what the --feedback file's values become
    received_at: float  # Unix seconds


class WatchLease(SQLModel, table=True):
    """A job of a watched dataset (`calibrate watch`, judges/watch.py): one (judge, task, target, order)
    without a verdict yet, and which watcher holds it until when.

    A row is added when a watcher's pass finds the job pending, claimed in small batches (owner
    and `expires` set: `FOR UPDATE SKIP LOCKED` on PostgreSQL, under the write lock on SQLite),
    and deleted in the transaction that stores the job's verdict. `expires` is in seconds since
    the epoch on the database's clock (PostgreSQL's `now()`; on SQLite the one machine's): 0 is
    free, a past time an expired lease (its watcher died) that any watcher takes over.
    """

    __table_args__ = (
        UniqueConstraint("judge_id", "task_id", "target_key", "order_key", name="uq_watchlease_job"),
        Index("ix_watchlease_claim", "judge_id", "task_id", "expires"),
        Index("ix_watchlease_owner", "owner"),
    )
    id: int | None = Field(default=None, primary_key=True)
    judge_id: int
    task_id: int
    dataset_id: int
    sample_id: int = Field(foreign_key="sample.id", ondelete="CASCADE")
    target_key: str = Field(max_length=40)
    order_key: str = Field(default="", max_length=40)
    owner: str = Field(default="", max_length=200)  # "host:pid:token" of the watcher holding it; "" when free
    expires: float = Field(default=0.0)
    created_at: datetime = Field(default_factory=utcnow)
