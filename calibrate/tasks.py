"""Tasks: what is labelled, on which target, with which kind of value.

Three labelling tasks are built in, four metric tasks (`METRIC_TASKS`) that metric judges
score per sample and that annotators never label item by item, and `claim_extraction`, the one
task of kind `extraction` (`EXTRACTION_TASKS`): its value is the answer's claims as a JSON list
of strings, it is run through the judge runner and applied to the sample's claims
(calibrate/judges/extraction.py), and it is never calibrated (no agreement statistics: experts
correct its output in the workbench instead of labelling it). Users add their own with
`calibrate task add`, change them with `calibrate task edit` (description, more labels, a
scale that fits every stored value) and remove them with `calibrate task remove` while nothing
uses them. Every label and every verdict is validated against its task by
`task_values.canonical_value` (calibrate/task_values.py: a task's values and their one stored form).

A *pairwise* task (`--kind pairwise --target sample --labels A,B[,tie]`) is labelled like a
categorical one, but its labels are response ids (plus `tie`, if declared): a value must also
name one of the sample's own responses (`task_values.pairwise_value`).

Labels keep their stored values; how a person sees them is the task's *display names*, per
locale (`calibrate task edit NAME --display es:supported=Respaldada`, the Tasks page):
`label_name` is the one place that words a label for a reader. The built-in tasks come with
English names (in this module, translated by the catalogs) and Spanish display names.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from sqlalchemy import Float, cast, func
from sqlmodel import Session, select

from calibrate import i18n, lookup
from calibrate.errors import TaskError
from calibrate.i18n import N_
from calibrate.judged import TARGET_KINDS, TASK_KINDS
from calibrate.models import (
    EXTRACTION,  # names: the built-ins' definitions and the user's --target/--kind
    KINDS,  # names: the built-ins' definitions and the user's --target/--kind
    MAX_RESPONSE_ID_CHARS,
    METRIC_TASKS,  # names: the built-ins' definitions and the user's --target/--kind
    REWRITE,  # names: the built-ins' definitions and the user's --target/--kind
    TARGETS,  # names: the built-ins' definitions and the user's --target/--kind
    TIE,
    FewShot,
    Guideline,
    Label,
    Prompt,
    PromptVersion,
    Task,
    TaskDataset,
    Verdict,
)
from calibrate.reasons import Reason
from calibrate.task_scopes import scope_datasets, set_task_scope, uses_reason
from calibrate.task_values import MAX_MAGNITUDE, format_number, short_text

NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


@dataclass(frozen=True)
class BuiltinTask:
    name: str
    target: str
    kind: str
    labels: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()
    scale: tuple[float, float] | None = None
    description: str = ""
    guidelines: str = ""
    display: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()  # (locale, ((label, name), …)): Task.display
    error_types: tuple[str, ...] = ()  # Task.error_types: its error taxonomy (the engineer may set another)
    trajectory: bool = False  # made and scoped to a dataset when it first holds trajectories (`ensure_trajectory_tasks`)


# How people read the built-in labels (English, translated by the catalogs) and tasks' names.
BUILTIN_LABEL_NAMES = {
    "supported": N_("Supported"), "unsupported": N_("Unsupported"), "not_applicable": N_("Not a claim"),
    "relevant": N_("Relevant"), "not_relevant": N_("Not relevant"),
}
TASK_TITLES = {
    "claim_support": N_("Claim support"), "answer_quality": N_("Answer quality"), "context_relevance": N_("Context relevance"),
    "step_correctness": N_("Step correctness"), "trajectory_success": N_("Trajectory success"),
}
# step_correctness's error taxonomy until the engineer sets another (`task edit step_correctness --error-types …`):
# what a failed agent step most often did wrong (after TRAIL's reasoning, planning and execution errors).
STEP_ERROR_TYPES = ("wrong_tool", "wrong_arguments", "misread_result", "unsupported_claim", "unsafe_advice", "missed_step",
                    "other")
MAX_DISPLAY_CHARS = 100  # characters of one display name, at most
# A task's description is on every item page and its labels on every button: bounded, so that
# one edit cannot make every page of the workbench megabytes long (docs/security.md).
MAX_DESCRIPTION_CHARS = 2000
MAX_LABEL_CHARS = 100
MAX_LABELS = 50
MAX_LEVEL_CHARS = 300  # one level's text (a rubric line beside a button), at most
LEVELS = "levels"  # the key of task.descriptions that holds the level texts: {locale: {level: text}}, never a locale
BUILTIN_TASKS = (
    BuiltinTask(
        "claim_support",
        "claim",
        "categorical",
        labels=("supported", "unsupported", "not_applicable"),
        excluded=("not_applicable",),
        description=N_("Is each claim of the answer supported by the retrieved contexts?"),
        display=(("es", (("supported", "Respaldada"), ("unsupported", "No respaldada"), ("not_applicable", "No es una afirmación"))),),
        guidelines="\n".join((
            N_("Supported: everything the claim states can be found in, or follows directly from, "
               "the retrieved contexts (numbers, units and conditions included)."),
            N_("Unsupported: any part of the claim is absent from or contradicted by the contexts, "
               "even if it is true in the world (a wrong dose, an invented source, a claim beyond "
               "what the contexts say)."),
            N_("Not a claim: courtesy, advice to see a professional, or a question — nothing that can be checked against the contexts."),
        )),
    ),
    BuiltinTask(
        "answer_quality",
        "sample",
        "ordinal",
        scale=(1, 5),
        description=N_("How good is the answer as a whole, on the rubric scale?"),
        guidelines="\n".join((
            N_("5: correct, complete and fully grounded in the contexts."),
            N_("4: correct and grounded, with a minor omission."),
            N_("3: mostly right, but with an unsupported detail or a notable omission."),
            N_("2: a material error or several unsupported claims."),
            N_("1: wrong, unsafe or unrelated to the question."),
        )),
    ),
    BuiltinTask(
        "context_relevance",
        "context",
        "categorical",
        labels=("relevant", "not_relevant"),
        description=N_("Is each retrieved context relevant to the question?"),
        display=(("es", (("relevant", "Relevante"), ("not_relevant", "No relevante"))),),
        guidelines="\n".join((
            N_("Relevant: the passage helps answer the question (even partly)."),
            N_("Not relevant: the passage does not help answer this question."),
        )),
    ),
    # Trajectory tasks (issue 33): made when a dataset first holds an agent's steps, scoped to such datasets only.
    BuiltinTask(
        "step_correctness",
        "step",
        "categorical",
        labels=("correct", "incorrect", "not_applicable"),
        excluded=("not_applicable",),
        description=N_("Did this step of the agent do the right thing, given the trajectory up to it?"),
        display=(("en", (("correct", "Correct"), ("incorrect", "Incorrect"), ("not_applicable", "Not applicable"))),
                 ("es", (("correct", "Correcto"), ("incorrect", "Incorrecto"), ("not_applicable", "No aplica")))),
        guidelines="\n".join((
            N_("Correct: the step is what a careful clinician's assistant would do here (the right tool with the right "
               "arguments, a result read as it is, a claim the results support)."),
            N_("Incorrect: the step is wrong or harmful; give the error type that fits best."),
            N_("Not applicable: bookkeeping with nothing to judge (a wrapper, an empty step)."),
        )),
        error_types=STEP_ERROR_TYPES,
        trajectory=True,
    ),
    BuiltinTask(
        "trajectory_success",
        "sample",
        "categorical",
        labels=("success", "failure"),
        description=N_("Did the agent reach a correct, safe answer for the user over the whole trajectory?"),
        display=(("en", (("success", "Success"), ("failure", "Failure"))),
                 ("es", (("success", "Éxito"), ("failure", "Fracaso")))),
        guidelines="\n".join((
            N_("Success: the final answer is correct and safe, and no step put the user at risk."),
            N_("Failure: the answer is wrong, unsafe or missing, or the agent gave up."),
        )),
        trajectory=True,
    ),
    # Metric tasks: one score in 0–1 per sample, computed by a metric judge from per-claim,
    # per-context or per-statement steps (calibrate.judges.metrics). Judge-side tasks: no
    # labelling widget and no part in an item's completion; their human gold is derived
    # (faithfulness, context_precision) or imported with `calibrate import labels`.
    BuiltinTask(
        "faithfulness",
        "sample",
        "continuous",
        scale=(0, 1),
        description=N_("Share of the answer's claims supported by the retrieved contexts (0–1)."),
        guidelines=("Supported claims / claims of the answer, leaving out claims that state nothing checkable. "
                    "Gold is derived from the claim_support labels unless a direct value is imported."),
    ),
    BuiltinTask(
        "answer_relevancy",
        "sample",
        "continuous",
        scale=(0, 1),
        description=N_("How well the answer addresses the question (0–1): mean cosine similarity of the question "
                    "with questions the answer would answer."),
        guidelines="0: the answer does not address the question (or is noncommittal); 1: it addresses exactly it.",
    ),
    BuiltinTask(
        "context_precision",
        "sample",
        "continuous",
        scale=(0, 1),
        description=N_("Rank-weighted precision of the retrieved contexts (0–1): (1/R) Σ_k precision@k · rel_k."),
        guidelines=("Relevant contexts ranked first score high. Gold is derived from the context_relevance labels "
                    "unless a direct value is imported."),
    ),
    BuiltinTask(
        "context_recall",
        "sample",
        "continuous",
        scale=(0, 1),
        description=N_("Share of the ground truth's statements that can be attributed to the retrieved contexts (0–1)."),
        guidelines="Attributed statements of the ground truth / its statements.",
    ),
    # The extraction task: an LLM splits the answer into atomic claims (the way RAGAS and TruLens
    # faithfulness start); the claims replace the sample's, experts correct them in the workbench.
    BuiltinTask(
        "claim_extraction",
        "sample",
        EXTRACTION,  # names: the built-in extraction task's own definition
        description=N_("Split the answer into atomic, self-contained claims (the claims the faithfulness judge verifies)."),
        guidelines=("One claim per fact: a number with its unit and condition, a name, a date, a recommendation. "
                    "Resolve pronouns so each claim stands alone, keep the answer's language and wording, add nothing."),
    ),
    # The rewrite task: `calibrate optimise` asks an LLM to rewrite a judge's instructions from a batch of the train
    # split's disagreements (calibrate/judges/rewrite.py); its prompt is versioned and edited like any other.
    BuiltinTask(
        "instruction_rewrite",
        "sample",
        REWRITE,  # names: the built-in rewrite task's own definition
        description=N_("Rewrite a judge's instructions so that it agrees with the experts on the disagreements shown "
                       "(calibrate optimise; never run over a dataset)."),
        guidelines=("Keep every template field and the reply format exactly as they are; change the wording of the "
                    "instructions only: state the rule the experts applied where the judge went wrong."),
    ),
)
BUILTIN_BY_NAME = {spec.name: spec for spec in BUILTIN_TASKS}
EXTRACTION_TASKS = ("claim_extraction",)
REWRITE_TASK = "instruction_rewrite"
# Tasks no annotator labels item by item: judge-side only.
JUDGE_ONLY_TASKS = METRIC_TASKS + EXTRACTION_TASKS + (REWRITE_TASK,)  # names: the built-ins' own definition


def ensure_builtin_tasks(session: Session) -> None:
    """Create the built-in tasks (and their first guideline) where missing; the trajectory tasks wait for a dataset
    with steps (`ensure_trajectory_tasks`): a RAG dataset's workbench never shows them."""
    existing = set(session.exec(select(Task.name)).all())
    for spec in BUILTIN_TASKS:
        if spec.name not in existing and not spec.trajectory:
            _builtin(session, spec)


def ensure_trajectory_tasks(session: Session, dataset_id: int) -> None:
    """Offer the built-in trajectory tasks (step_correctness, trajectory_success) on a dataset that holds steps: made
    where missing, scoped to the dataset; a task the engineer made global (`task edit --all-datasets`) stays global."""
    for spec in BUILTIN_TASKS:
        if not spec.trajectory:
            continue
        task = session.exec(select(Task).where(Task.name == spec.name)).first()
        if task is None:
            task = _builtin(session, spec)
        elif not session.exec(select(TaskDataset.task_id).where(TaskDataset.task_id == task.id)).first():
            continue  # global: offered everywhere already
        if session.get(TaskDataset, (task.id, dataset_id)) is None:
            session.add(TaskDataset(task_id=task.id, dataset_id=dataset_id))
            task.revision = (task.revision or 0) + 1  # the workbench's task cache reads the tasks again
            session.add(task)
    session.flush()


def _builtin(session: Session, spec: BuiltinTask) -> Task:
    """Create one built-in task and its first guideline."""
    task = Task(name=spec.name, target=spec.target, kind=spec.kind, labels=list(spec.labels) or None,
                excluded=list(spec.excluded) or None, scale_min=spec.scale[0] if spec.scale else None,
                scale_max=spec.scale[1] if spec.scale else None, description=spec.description, builtin=True,
                display={locale: dict(names) for locale, names in spec.display} or None,
                error_types=list(spec.error_types) or None)
    session.add(task)
    session.flush()
    session.add(Guideline(task_id=task.id, version=1, text=spec.guidelines))
    return task


def parse_scale(text: str) -> tuple[float, float]:
    """Parse a scale such as "1-5" or "0-1" or "-2-2" into (low, high)."""
    match = re.fullmatch(r"\s*(-?[0-9]+(?:\.[0-9]+)?)\s*-\s*(-?[0-9]+(?:\.[0-9]+)?)\s*", text or "")
    if not match:
        raise TaskError(Reason("scale_shape", given=short_text(text or "")))
    low, high = float(match.group(1)), float(match.group(2))
    if not low < high:
        raise TaskError(Reason("scale_order", given=short_text(text)))
    if max(abs(low), abs(high)) > MAX_MAGNITUDE:
        raise TaskError(Reason("scale_magnitude", limit=MAX_MAGNITUDE, given=short_text(text)))
    return low, high


def add_task(
    session: Session,
    name: str,
    *,
    target: str,
    kind: str,
    labels: list[str] | None = None,
    scale: tuple[float, float] | None = None,
    description: str = "",
    guidelines: str = "",
    descriptions: dict[str, str] | None = None,
    datasets: list[str] | tuple[str, ...] | None = None,
    levels: dict[str, dict[str, str]] | None = None,
    error_types: list[str] | None = None,
) -> Task:
    """Create a custom task after validating its definition (`descriptions`: {locale: text}, from
    `parse_descriptions`, the description in other languages; `datasets`: the datasets it is scoped to,
    none for a global task; `levels`: {locale: {level: text}}, from `parse_levels`, what each label or
    score means, per language; `error_types`: a categorical task's error taxonomy)."""
    if not NAME_RE.match(name or ""):
        raise TaskError(Reason("task_name_invalid", name=name))
    # names: the user's --target and --kind are names, checked against the ones a custom task may take
    if target not in TARGETS:  # names: user input
        raise TaskError(Reason("target_unknown", targets=', '.join(TARGETS), target=target))  # names: the list shown
    if kind in TASK_KINDS and TASK_KINDS[kind].extraction:
        raise TaskError(Reason("extraction_builtin_only"))
    if kind not in KINDS:  # names: user input (the kinds a custom task may be)
        raise TaskError(Reason("kind_unknown", kinds=', '.join(KINDS), kind_=kind))  # names: the list shown
    if session.exec(select(Task).where(Task.name == name)).first() is not None:
        raise TaskError(Reason("task_exists", name=name))
    scope = scope_datasets(session, datasets)
    check_description(description)
    check_labels(labels or [], "--labels")
    task = Task(
        name=name,
        target=target,
        kind=kind,
        labels=_new_labels(kind, target, labels, scale),
        scale_min=scale[0] if scale else None,
        scale_max=scale[1] if scale else None,
        description=description,
    )
    if descriptions:
        _set_descriptions(task, descriptions)
    if levels:
        _set_levels(task, levels)
    if error_types:
        _set_error_types(task, error_types)
    session.add(task)
    session.flush()
    session.add_all(TaskDataset(task_id=task.id, dataset_id=d.id) for d in scope)
    if guidelines:
        session.add(Guideline(task_id=task.id, version=1, text=guidelines))
    session.flush()
    return task


def _new_labels(kind: str, target: str, labels: list[str] | None, scale: tuple[float, float] | None) -> list[str] | None:
    """Return a new task's labels, stripped (None for a score task); refuse labels or a scale its kind does not take."""
    kind_ = TASK_KINDS[kind]
    if not kind_.labels:
        if labels:
            raise TaskError(Reason("labels_wrong_kind"))
        if kind_.needs_scale and scale is None:
            raise TaskError(Reason("ordinal_needs_scale"))
        return None
    clean = [label.strip() for label in (labels or []) if label.strip()]
    if kind_.orders:
        clean = _pairwise_labels(clean, target)
    if len(clean) < 2:
        raise TaskError(Reason("categorical_needs_labels"))
    if len(set(clean)) != len(clean):
        raise TaskError(Reason("labels_duplicates", clean=', '.join(clean)))
    if scale:
        raise TaskError(Reason("scale_wrong_kind", kind_=kind))
    return clean


def _set_error_types(task: Task, error_types: list[str]) -> list[str]:
    """Set a categorical task's error taxonomy (each once, in the order given; empty: none); return what changed."""
    if not TASK_KINDS[task.kind].error_types:
        raise TaskError(Reason("error_types_wrong_kind", task=task.name))
    clean = list(dict.fromkeys(name.strip() for name in error_types if name.strip()))
    check_labels(clean, "--error-types")
    if clean == (task.error_types or []):
        return []
    task.error_types = clean or None
    return [f"error types: {', '.join(clean) or 'none'}"]


def check_description(description: str | None) -> None:
    """Refuse a description longer than MAX_DESCRIPTION_CHARS (it is shown on every item page)."""
    if description is not None and len(description) > MAX_DESCRIPTION_CHARS:
        raise TaskError(Reason("description_too_long", count=len(description), limit=MAX_DESCRIPTION_CHARS))


def check_labels(labels: list[str], option: str, *, existing: int = 0) -> None:
    """Refuse a label longer than MAX_LABEL_CHARS, or more than MAX_LABELS labels in all."""
    for label in labels:
        if len(label.strip()) > MAX_LABEL_CHARS:
            raise TaskError(Reason("label_too_long", option=option, label=short_text(label.strip()), count=len(label.strip()),
                                   limit=MAX_LABEL_CHARS))
    if existing + len(labels) > MAX_LABELS:
        raise TaskError(Reason("too_many_labels", option=option, limit=MAX_LABELS, count=existing + len(labels)))


def _pairwise_labels(labels: list[str], target: str) -> list[str]:
    """Check the labels of a pairwise task: two or more response ids, then `tie` if declared (spelled "tie")."""
    if TARGET_KINDS[target].within:  # its target is the sample (its responses), never a part of it
        raise TaskError(Reason("pairwise_target", target=target))
    ids = [label for label in labels if label.casefold() != TIE]
    if len(ids) < 2:
        raise TaskError(Reason("pairwise_needs_labels"))
    for label in ids:
        if len(label) > MAX_RESPONSE_ID_CHARS:
            raise TaskError(Reason("response_id_too_long", label=short_text(label), max_response_id_chars=MAX_RESPONSE_ID_CHARS))
    return ids + ([TIE] if len(ids) < len(labels) else [])


@dataclass
class TaskChange:
    """What `edit_task` changed, in words (the CLI prints it; the Tasks page flashes it)."""

    task: Task
    changes: list[str]

    def line(self) -> str:
        """Return the one line the CLI prints."""
        if not self.changes:
            return f"task {self.task.name}: nothing to change"
        return f"task {self.task.name}: {'; '.join(self.changes)}"


def _value_range(session: Session, task: Task) -> tuple[float | None, float | None]:
    """Return the lowest and highest value stored for the task: labels, verdicts and few-shot examples."""
    low, high = None, None
    for model in (Label, Verdict, FewShot):
        number = cast(model.value, Float)
        query = select(func.min(number), func.max(number)).where(model.value.is_not(None))
        if model is FewShot:
            query = query.join(PromptVersion, PromptVersion.id == FewShot.version_id).join(
                Prompt, Prompt.id == PromptVersion.prompt_id).where(Prompt.task_id == task.id)
        else:
            query = query.where(model.task_id == task.id)
        found_low, found_high = session.exec(query).one()
        if found_low is not None:
            low = found_low if low is None else min(low, found_low)
            high = found_high if high is None else max(high, found_high)
    return low, high


def edit_task(session: Session, name: str, *, description: str | None = None, add_labels: list[str] | None = None,
              scale: tuple[float, float] | None = None, display: dict[str, dict[str, str]] | None = None,
              descriptions: dict[str, str] | None = None, levels: dict[str, dict[str, str]] | None = None,
              datasets: list[str] | tuple[str, ...] | None = None, error_types: list[str] | None = None) -> TaskChange:
    """Change a task's description, add labels to a categorical task, set the scale of a score task, or set how
    its labels are shown per locale (`display`: {locale: {label: name}}, from `parse_display`; an empty name
    removes one: the label is shown by its default name again), or set its description in other languages
    (`descriptions`: {locale: text}, from `parse_descriptions`; an empty text removes one), or what its labels or
    scores mean per language (`levels`: {locale: {level: text}}, from `parse_levels`; an empty text removes one),
    or the datasets it is scoped to (`datasets`, replacing them; empty: global again; task_scopes.set_task_scope),
    or a categorical task's error taxonomy (`error_types`, replacing it; empty: none; stored error types stay as they are).

    Refused (TaskError, one line): labels or a scale for a built-in task (the statistics rely
    on them), labels for a score task or a scale for a categorical one, a label that exists,
    and a scale some stored value (a label, a verdict, a few-shot example) falls outside.
    Labels are only ever added: removing one would orphan the values that use it.
    """
    task = lookup.task(session, name)
    changes: list[str] = []
    if (add_labels or scale) and task.builtin:
        raise TaskError(Reason("builtin_labels_fixed", task=task.name))
    if add_labels:
        changes.append(_add_labels(task, add_labels))
    if scale is not None:
        changes.append(_set_scale(session, task, scale))
    check_description(description)
    if description is not None and description != task.description:
        task.description = description
        changes.append("description changed")
    if descriptions:
        changes += _set_descriptions(task, descriptions)
    if display:
        changes += _set_display(task, display)
    if levels:
        changes += _set_levels(task, levels)
    if datasets is not None:
        changes += set_task_scope(session, task, datasets)
    if error_types is not None:
        changes += _set_error_types(task, error_types)
    if changes:
        task.revision = (task.revision or 0) + 1  # the workbench's task cache reads the tasks again
    session.add(task)
    session.flush()
    return TaskChange(task, changes)


def _add_labels(task: Task, add_labels: list[str]) -> str:
    """Add labels to a label task (never removed: values use them); return the change in words."""
    if not TASK_KINDS[task.kind].labels:
        raise TaskError(Reason("add_labels_score_task", task=task.name, kind=task.kind))
    clean = [label.strip() for label in add_labels if label.strip()]
    check_labels(clean, "--add-labels", existing=len(task.labels or []))
    if TASK_KINDS[task.kind].orders:
        clean = [TIE if label.casefold() == TIE else label for label in clean]
        if any(len(label) > MAX_RESPONSE_ID_CHARS for label in clean):
            raise TaskError(Reason("add_labels_response_id_long", limit=MAX_RESPONSE_ID_CHARS))
    existing = [label for label in clean if label in (task.labels or [])]
    if existing:
        raise TaskError(Reason("label_exists", task=task.name, label=existing[0], labels=", ".join(task.labels or [])))
    if len(set(clean)) != len(clean):
        raise TaskError(Reason("add_labels_duplicates", labels=", ".join(clean)))
    task.labels = [*(task.labels or []), *clean]
    return f"labels now {', '.join(task.labels)}"


def _set_scale(session: Session, task: Task, scale: tuple[float, float]) -> str:
    """Set a score task's scale, refused when a stored value falls outside it; return the change in words."""
    if TASK_KINDS[task.kind].labels:
        raise TaskError(Reason("scale_label_task", task=task.name, kind=task.kind))
    low, high = _value_range(session, task)
    if low is not None and (low < scale[0] or high > scale[1]):
        raise TaskError(Reason("scale_leaves_out", low=scale[0], high=scale[1], task=task.name, stored_low=low,
                               stored_high=high))
    task.scale_min, task.scale_max = scale
    return f"scale now {scale[0]:g}-{scale[1]:g}"


def parse_display(items: list[str] | tuple[str, ...]) -> dict[str, dict[str, str]]:
    """Return `--display` values (`LOCALE:LABEL=NAME`, e.g. `es:supported=Respaldada`) as {locale: {label: name}}.

    Raises TaskError naming the value that does not have that shape or names an unsupported locale.
    """
    out: dict[str, dict[str, str]] = {}
    for item in items:
        head, sep, name = item.partition("=")
        locale, colon, label = head.partition(":")
        if not sep or not colon or not label.strip():
            raise TaskError(Reason("display_shape", item=item[:80]))
        if i18n.supported(locale) != locale.strip().casefold():
            raise TaskError(Reason("display_locale", item=item[:80], listed=', '.join(i18n.LOCALES)))
        out.setdefault(locale.strip().casefold(), {})[label.strip()] = name.strip()
    return out


def parse_descriptions(items: list[str] | tuple[str, ...]) -> tuple[str | None, dict[str, str]]:
    """Return `--description` values as (the default language's text or None, {locale: text}).

    `LOCALE:TEXT` (e.g. `es:¿Qué respuesta es mejor?`, LOCALE one of i18n.LOCALES) is the text in that
    language, `en:TEXT` (the default language) or a plain TEXT the default text. Raises TaskError when
    two values give the same language.
    """
    default: str | None = None
    texts: dict[str, str] = {}
    for item in items:
        head, colon, rest = item.partition(":")
        locale = head.strip().casefold() if colon and head.strip().casefold() in i18n.LOCALES else None
        text = rest.strip() if locale else item
        if locale in (None, i18n.DEFAULT_LOCALE):
            if default is not None:
                raise TaskError(Reason("description_twice", locale=i18n.DEFAULT_LOCALE, item=item[:80]))
            default = text
        elif locale in texts:
            raise TaskError(Reason("description_twice", locale=locale, item=item[:80]))
        else:
            texts[locale] = text
    return default, texts


def parse_levels(items: list[str] | tuple[str, ...]) -> dict[str, dict[str, str]]:
    """Return `--level` values (`[LOCALE:]LEVEL=TEXT`, e.g. `5=correct and complete`, `es:5=correcta y completa`) as
    {locale: {level: text}}; without a LOCALE (one of i18n.LOCALES) the text is the default language's.

    Raises TaskError naming the value that has no `=` or no level, or gives a level's text twice in one language.
    """
    out: dict[str, dict[str, str]] = {}
    for item in items:
        head, sep, text = item.partition("=")
        locale, colon, level = head.partition(":")
        if colon and locale.strip().casefold() in i18n.LOCALES:
            locale = locale.strip().casefold()
        else:
            locale, level = i18n.DEFAULT_LOCALE, head
        if not sep or not level.strip():
            raise TaskError(Reason("level_shape", item=item[:80]))
        here = out.setdefault(locale, {})
        if level.strip() in here:
            raise TaskError(Reason("level_twice", locale=locale, level=level.strip()[:80]))
        here[level.strip()] = text.strip()
    return out


def _level_key(task: Task, level: str) -> str:
    """Return a level as the workbench's button names it (a label, or a score in canonical form), or raise TaskError."""
    if task.builtin:
        raise TaskError(Reason("levels_builtin", task=task.name))
    described = TASK_KINDS[task.kind].levels
    if described == "labels":
        if level not in (task.labels or []):
            raise TaskError(Reason("level_not_a_label", task=task.name, level=level, labels=", ".join(task.labels or [])))
        return level
    if described != "scores":
        raise TaskError(Reason("levels_wrong_kind", task=task.name, kind_=task.kind))
    try:
        number = float(level)
    except ValueError:
        number = math.nan
    low, high = task.scale_min, task.scale_max
    if not number.is_integer() or low is None or high is None or not low <= number <= high:
        raise TaskError(Reason("level_not_a_score", task=task.name, level=level, low=format_number(low or 0),
                               high=format_number(high or 0)))
    return format_number(number)


def _set_levels(task: Task, levels: dict[str, dict[str, str]]) -> list[str]:
    """Merge level texts into the task (checked against its labels or scale; an empty text removes one); return what
    changed, in words."""
    descriptions = dict(task.descriptions or {})
    merged = {locale: dict(texts) for locale, texts in (descriptions.get(LEVELS) or {}).items()}
    changes = []
    for locale, texts in levels.items():
        for level, text in texts.items():
            key = _level_key(task, level)
            if len(text) > MAX_LEVEL_CHARS or any(ch < " " for ch in text):
                raise TaskError(Reason("level_text_shape", level=key, limit=MAX_LEVEL_CHARS))
            here = merged.setdefault(locale, {})
            if text and here.get(key) != text:
                here[key] = text
                changes.append(f"{locale}: level {key} text changed")
            elif not text and key in here:
                del here[key]
                changes.append(f"{locale}: level {key} text removed")
    merged = {locale: texts for locale, texts in merged.items() if texts}
    if merged:
        descriptions[LEVELS] = merged
    else:
        descriptions.pop(LEVELS, None)
    task.descriptions = descriptions or None
    return changes


def level_text(task, level: object, locale: str | None = None) -> str:
    """Return what a level (a label, or a score of an ordinal task) of a custom task means in `locale` (default: the
    current one): the text given in that language (`task edit --level es:5=…`), else the default language's, else ""."""
    levels = (getattr(task, "descriptions", None) or {}).get(LEVELS) or {}
    key = str(level)
    return ((levels.get(locale or i18n.current().locale) or {}).get(key)
            or (levels.get(i18n.DEFAULT_LOCALE) or {}).get(key) or "")


def _set_descriptions(task: Task, texts: dict[str, str]) -> list[str]:
    """Merge descriptions in other languages into the task (an empty text removes one); return what changed."""
    merged = dict(task.descriptions or {})
    changes = []
    for locale, text in texts.items():
        check_description(text)
        if text and merged.get(locale) != text:
            merged[locale] = text
            changes.append(f"{locale} description changed")
        elif not text and locale in merged:
            del merged[locale]
            changes.append(f"{locale} description removed")
    task.descriptions = merged or None
    return changes


def _set_display(task: Task, display: dict[str, dict[str, str]]) -> list[str]:
    """Merge display names into the task (checked against its labels); return what changed, in words."""
    if not TASK_KINDS[task.kind].labels:
        raise TaskError(Reason("display_score_task", task=task.name, kind=task.kind))
    merged = {locale: dict(names) for locale, names in (task.display or {}).items()}
    changes = []
    for locale, names in display.items():
        for label, name in names.items():
            if label not in (task.labels or []):
                raise TaskError(Reason("display_no_label", task=task.name, label=label, labels=", ".join(task.labels or [])))
            if len(name) > MAX_DISPLAY_CHARS or any(ch < " " for ch in name):
                raise TaskError(Reason("display_name_shape", label=label, limit=MAX_DISPLAY_CHARS))
            here = merged.setdefault(locale, {})
            if name:
                if here.get(label) != name:
                    here[label] = name
                    changes.append(f"{locale}: {label} shown as {name!r}")
            elif label in here:
                del here[label]
                changes.append(f"{locale}: {label} shown by its default name")
    task.display = {locale: names for locale, names in merged.items() if names} or None
    return changes


def display_name(task, value: object, locale: str | None = None) -> str | None:
    """Return the name a task gives a label in `locale` (default: the current one) (`task edit --display`), or None."""
    return ((getattr(task, "display", None) or {}).get(locale or i18n.current().locale) or {}).get(str(value))


def label_name(task, value: object, locale: str | None = None) -> str:
    """Return how a person reads a task's label in `locale` (default: the current one): its display name, else the
    built-in name (translated), else the value as stored. Numbers and response ids are returned as they are."""
    if value is None:
        return ""
    text = str(value)
    locale = locale or i18n.current().locale
    name = display_name(task, text, locale)
    if name:
        return name
    if text == TIE:
        return i18n.translator(locale).gettext("Tie")
    if getattr(task, "builtin", False) and text in BUILTIN_LABEL_NAMES:
        return i18n.translator(locale).gettext(BUILTIN_LABEL_NAMES[text])
    return text


def shipped_text(text: str, locale: str | None = None) -> str:
    """Return a text the product ships (a built-in task's or the demo's description or guideline) in `locale`
    (default: the current one), translated line by line when every line is in the catalogs; else as written.

    A text someone wrote (or rewrote) is not in the catalogs, so it is shown as written in every
    language; nor is a text only partly shipped translated, so a reader never gets a mix.
    """
    if not text:
        return text
    translator = i18n.translator(locale or i18n.current().locale)
    lines = text.split("\n")
    shown = [translator.gettext(line) if line else line for line in lines]
    return "\n".join(shown) if all(new != old for new, old in zip(shown, lines, strict=True) if old) else text


def task_description(task, locale: str | None = None) -> str:
    """Return a task's description in `locale` (default: the current one): the one given in that language
    (`task edit --description es:…`), else a shipped description translated, else as stored."""
    given = (getattr(task, "descriptions", None) or {}).get(locale or i18n.current().locale)
    return (given if isinstance(given, str) else "") or shipped_text(task.description or "", locale)


def guideline_text(task, text: str, locale: str | None = None) -> str:
    """Return a task's guideline text in `locale` (a shipped guideline translated line by line, its rubric levels
    included, else as written)."""
    return shipped_text(text, locale)


def task_title(task) -> str:
    """Return how a person reads a task's name: a built-in task's title (translated), else the task's name."""
    title = TASK_TITLES.get(task.name) if getattr(task, "builtin", False) else None
    return i18n.gettext(title) if title else task.name


def remove_task(session: Session, name: str) -> Task:
    """Remove a custom task that nothing uses yet (no labels, verdicts or prompts), with its guidelines.

    Refused (TaskError, one line) for a built-in task and for a task with labels, verdicts or
    prompts: removing it would lose them.
    """
    task = lookup.task(session, name)
    if task.builtin:
        raise TaskError(Reason("builtin_not_removable", task=task.name))
    uses = []
    for model, what in ((Label, "uses_labels"), (Verdict, "uses_verdicts"), (Prompt, "uses_prompts")):
        n = session.exec(select(func.count()).select_from(model).where(model.task_id == task.id)).one()
        if n:
            uses.append(Reason(what, count=n))
    if uses:  # "3 labels and 1 verdicts": each count worded in the reader's language, joined by "and"
        raise TaskError(Reason("task_in_use", task=task.name, uses=uses_reason(uses)))
    for guideline in session.exec(select(Guideline).where(Guideline.task_id == task.id)).all():
        session.delete(guideline)
    session.delete(task)
    session.flush()
    return task


def current_guideline(session: Session, task: Task) -> Guideline | None:
    """Return the newest guideline version of a task."""
    return session.exec(
        select(Guideline).where(Guideline.task_id == task.id).order_by(Guideline.version.desc())
    ).first()
