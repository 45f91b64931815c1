"""Prompts and their immutable, numbered, content-hashed versions (with few-shot examples).

A version's identity is the SHA-256 of its content (template, system text, model, parameters
and few-shot examples, in order); note, author and parent are not content. Saving an edit
creates version N+1; saving content identical to an existing version creates nothing and
returns that version. Few-shot examples are human-labelled targets: their value is the human
gold (gold.py: the one rule the report uses too), they can
never come from the `test` split, and they are never scored for the version that shows them.
For an extraction task (claim_extraction) an example is a sample whose claims an expert
corrected in the workbench (claim source "…+edited"), its value the corrected claim list.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from calibrate import lookup
from calibrate.claimsets import EDITED, active_claims
from calibrate.gold import human_gold
from calibrate.judged import judging, target_kind
from calibrate.judges.errors import PromptError
from calibrate.judges.params import check_params
from calibrate.judges.render import check_template, default_templates
from calibrate.judges.sandbox import DEFAULT_LIMITS, Limits
from calibrate.models import (
    Dataset,
    FewShot,
    GoldenMember,
    GoldenSet,
    Judge,
    JudgeRun,
    Prompt,
    PromptDataset,
    PromptVersion,
    Sample,
    Task,
    User,
    visible_dataset,
)
from calibrate.reasons import Reason
from calibrate.task_scopes import offered_on, scope_datasets, task_scope, tasks_scopes
from calibrate.task_values import canonical_claims

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
DEFAULT_PARAMS: dict[str, Any] = {"temperature": 0}


@dataclass(frozen=True)
class FewShotSpec:
    """A few-shot example as the engineer names it: `SAMPLE[:N]`, optionally with a rationale."""

    ref: str
    rationale: str | None = None


@dataclass
class ExampleRow:
    """A resolved few-shot example, ready to store: its target key ("step:42") names its kind and `part_id` the part."""

    sample_id: int
    part_id: int | None  # the claim, context or step it is (None: the sample itself)
    target_key: str
    value: str
    rationale: str
    ref: str = ""

    @property
    def attach(self) -> dict[str, int | None]:
        """Return the FewShot id columns the example sets (TargetKind.attach: claim_id, context_id, step_id)."""
        return target_kind(self.target_key).attach(self.part_id)


@dataclass
class SaveResult:
    version: PromptVersion
    created: bool
    prompt_created: bool = False

    def line(self, prompt_name: str) -> str:
        """Return what `prompt new` prints."""
        ref = f"{prompt_name}@{self.version.number}"
        return ref if self.created else f"{ref} (unchanged: identical to version {self.version.number})"


# --------------------------------------------------------------------------- names


def parse_ref(text: str) -> tuple[str, int | None]:
    """Split "NAME@N" into (NAME, N); "NAME" alone means the latest version."""
    name, sep, number = (text or "").strip().partition("@")
    if not name:
        raise PromptError(Reason("prompt_ref_shape", text=text))
    if not sep:
        return name, None
    if not (number.isascii() and number.isdigit()) or int(number) < 1:
        raise PromptError(Reason("prompt_ref_version", text=text))
    return name, int(number)


def latest_version(session: Session, prompt: Prompt) -> PromptVersion | None:
    """Return the highest-numbered version of a prompt."""
    return session.exec(
        select(PromptVersion).where(PromptVersion.prompt_id == prompt.id).order_by(PromptVersion.number.desc())
    ).first()


def resolve_version(session: Session, ref: str) -> tuple[Prompt, PromptVersion]:
    """Return the prompt and version named by "NAME@N" (or "NAME": the latest); NotFound names what exists."""
    name, number = parse_ref(ref)
    prompt = lookup.prompt(session, name)
    return prompt, lookup.prompt_version(session, prompt, number)


def judge_name(prompt: Prompt, version: PromptVersion) -> str:
    """Return the name a run of this version has in reports: NAME@N."""
    return f"{prompt.name}@{version.number}"


# --------------------------------------------------------------------------- parameters


def parse_params(pairs: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Parse `key=value` pairs; values are JSON when they parse (0.2, true, [1]) and text otherwise."""
    params: dict[str, Any] = {}
    for pair in pairs:
        pair = pair.strip()
        if not pair or pair.startswith("#"):
            continue
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise PromptError(Reason("param_shape", pair=pair))
        raw = raw.strip()
        try:
            params[key] = json.loads(raw)
        except ValueError:
            params[key] = raw
    return params


def format_params(params: dict[str, Any]) -> str:
    """Return parameters as `key=value` lines (the inverse of parse_params)."""
    return "\n".join(f"{key}={json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value}"
                     for key, value in sorted(params.items()))


def parse_few_shot_lines(text: str) -> list[FewShotSpec]:
    """Parse one few-shot per line: `SAMPLE[:N]` optionally followed by `| rationale`."""
    specs = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        ref, sep, rationale = line.partition("|")
        specs.append(FewShotSpec(ref.strip(), rationale.strip() if sep else None))
    return specs


# --------------------------------------------------------------------------- few-shots


def resolve_few_shots(session: Session, task: Task, specs: list[FewShotSpec], *, dataset: str | None = None,
                      within: list[str] | None = None) -> list[ExampleRow]:
    """Turn `SAMPLE[:N]` references into examples with the human gold value and a rationale.

    `dataset` names the dataset of the samples; `within` (a scoped prompt's datasets) bounds where they are looked up.
    """
    rows: list[ExampleRow] = []
    seen: set[str] = set()
    for spec in specs:
        row = _resolve_one(session, task, spec, dataset, within or [])
        if row.target_key in seen:
            raise PromptError(Reason("fewshot_twice", ref=spec.ref))
        seen.add(row.target_key)
        rows.append(row)
    return rows


def _resolve_one(session: Session, task: Task, spec: FewShotSpec, dataset: str | None, within: list[str]) -> ExampleRow:
    """Return the example one `SAMPLE[:N]` reference names, with the human gold value; refuse what cannot be one.

    A part's reference finds the active part at position N of the task's target kind (TargetKind.find): a claim's index,
    a context's rank, a step's index — one path for every kind the registry has."""
    judged = judging(task)
    external, position = _ref_parts(task, spec)
    sample = _example_sample(session, spec, external, dataset, within)
    part_id = None
    if judged.target.within:
        part = judged.target.find(session, sample.id, int(position))
        if part is None:
            raise PromptError(Reason(judged.target.fewshot_missing, ref=spec.ref, sample=external, position=position))
        part_id = part.id
    key = judged.target.key(part_id if part_id is not None else sample.id)
    if judged.kind.extraction:
        return _extraction_example(session, sample, key, spec)
    value, rationale = human_gold(session, task, key)
    if value is None:
        raise PromptError(Reason("fewshot_no_gold", ref=spec.ref, rationale=rationale))
    return ExampleRow(sample.id, part_id, key, value, spec.rationale if spec.rationale is not None else rationale, spec.ref)


def _ref_parts(task: Task, spec: FewShotSpec) -> tuple[str, str]:
    """Return a reference's sample id and its part's position ("" for a sample task)."""
    external, sep, position = spec.ref.rpartition(":") if ":" in spec.ref else (spec.ref, "", "")
    kind = judging(task).target
    if not kind.within:
        return spec.ref, ""  # sample ids may contain ":"; only a trailing number of a part's task is a position
    if not sep:
        raise PromptError(Reason("fewshot_needs_position", ref=spec.ref, task=task.name, target=kind.name,
                                 what=Reason(kind.position_name)))
    if not (position.isascii() and position.isdigit()):
        raise PromptError(Reason("fewshot_not_index", ref=spec.ref, position=position))
    return external, position


def _example_sample(session: Session, spec: FewShotSpec, external: str, dataset: str | None, within: list[str]) -> Sample:
    """Return the one sample a reference names (in `dataset`, else among `within`); never one of the test split or a
    golden set (an example would leak into the figures they give)."""
    query = select(Sample, Dataset.name).join(Dataset).where(Sample.external_id == external, visible_dataset())
    if dataset:
        query = query.where(Dataset.name == dataset)
    elif within:
        query = query.where(Dataset.name.in_(within))
    found = session.exec(query).all()
    if not found:
        if dataset or within:
            raise PromptError(Reason("fewshot_no_sample_in", ref=spec.ref, sample=external, dataset=dataset or ", ".join(within)))
        raise PromptError(Reason("fewshot_no_sample", ref=spec.ref, sample=external))
    if len(found) > 1:
        names = ", ".join(sorted(name for _, name in found))
        raise PromptError(Reason("fewshot_several_datasets", ref=spec.ref, sample=external, datasets=names))
    sample = found[0][0]
    if sample.split == "test":
        raise PromptError(Reason("fewshot_test_split", ref=spec.ref))
    golden = session.exec(select(GoldenSet.name).join(GoldenMember, GoldenMember.golden_set_id == GoldenSet.id)
                          .where(GoldenMember.sample_id == sample.id, col(GoldenMember.retired_in).is_(None))).first()
    if golden is not None:
        raise PromptError(Reason("fewshot_golden", ref=spec.ref, golden=golden))
    return sample


def _extraction_example(session: Session, sample: Sample, key: str, spec: FewShotSpec) -> ExampleRow:
    """Return an extraction example: a sample whose claims an expert corrected, its value the claim list."""
    if not sample.claim_source.endswith(EDITED):
        raise PromptError(Reason("fewshot_claims_not_corrected", ref=spec.ref, source=sample.claim_source))
    claims = [claim.text for claim in active_claims(session, sample.id)]
    if not claims:
        raise PromptError(Reason("fewshot_no_claims", ref=spec.ref))
    rationale = spec.rationale if spec.rationale is not None else f"claims corrected by experts ({sample.claim_source})"
    return ExampleRow(sample.id, None, key, canonical_claims(claims), rationale, spec.ref)


# --------------------------------------------------------------------------- saving


def content_hash(*, template: str, system: str, model: str, params: dict[str, Any], examples: list[ExampleRow]) -> str:
    """Return the SHA-256 identity of a version's content."""
    content = {
        "template": template, "system": system, "model": model, "params": params,
        "few_shots": [[row.target_key, row.value, row.rationale] for row in examples],
    }
    blob = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def validate_name(name: str) -> str:
    """Return a valid prompt name or raise PromptError."""
    if not NAME_RE.match(name or ""):
        raise PromptError(Reason("prompt_name_invalid", name=name))
    return name


def stored_examples(session: Session, version: PromptVersion) -> list[ExampleRow]:
    """Return the few-shot examples of a version, in order."""
    shots = session.exec(select(FewShot).where(FewShot.version_id == version.id).order_by(FewShot.order)).all()
    return [ExampleRow(s.sample_id, target_kind(s.target_key).part_of(s), s.target_key, s.value, s.rationale) for s in shots]


@dataclass
class CheckedVersion:
    """A version resolved and checked, not stored (`check_version`; `save_version` stores it)."""

    prompt: Prompt | None
    task: Task
    parent: PromptVersion | None
    template: str
    system: str
    model: str
    params: dict[str, Any]
    examples: list[ExampleRow]
    digest: str
    scope: list[Dataset] = field(default_factory=list)  # a new prompt's datasets (`--dataset`): none for a global one

    @property
    def rendered(self) -> tuple[str, str, str]:
        """What the trial render checked: (task, template, system)."""
        return (self.task.name, self.template, self.system)


def check_version(
    session: Session,
    name: str,
    *,
    task: str | None = None,
    template: str | None = None,
    system: str | None = None,
    model: str | None = None,
    params: dict[str, Any] | None = None,
    few_shots: list[FewShotSpec] | None = None,
    dataset: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
    checked: CheckedVersion | None = None,
    datasets: list[str] | tuple[str, ...] | None = None,
    base: PromptVersion | None = None,
) -> CheckedVersion:
    """Resolve and check a version of prompt `name` without writing anything; raise PromptError naming the problem.

    `base`: the version of the prompt the new one derives from (its parent, and where fields left as None come
    from); default the latest (`calibrate optimise` derives candidates from the best one so far).

    `datasets` scopes a new prompt to those datasets (within its task's, when the task is scoped); for an existing
    prompt they must be among its own (a prompt's datasets are set when it is created). A scoped prompt's few-shot
    samples are looked up in its datasets.

    The templates' trial render may take up to `limits.seconds`, so callers check in a read
    session first and pass the result to `save_version` as `checked`, which then does not
    render again under the write lock (unless the texts changed meanwhile). Texts unchanged
    from the latest version were checked when it was saved and are not rendered again.
    """
    prompt = session.exec(select(Prompt).where(Prompt.name == name)).first()
    if prompt is None:
        validate_name(name)
        if not task:
            raise PromptError(Reason("prompt_new_needs_task", name=name))
        task_row = lookup.task(session, task)
        parent = None
        scope = scope_datasets(session, datasets)
        task_datasets = task_scope(session, task_row)
        outside = next((d.name for d in scope if task_datasets and d.name not in task_datasets), None)
        if outside:
            raise PromptError(Reason("prompt_outside_task_scope", task=task_row.name, datasets=", ".join(task_datasets),
                                     dataset=outside))
        within = [d.name for d in scope]
    else:
        task_row = session.get(Task, prompt.task_id)
        if task and task != task_row.name:
            raise PromptError(Reason("prompt_other_task", name=name, task_row=task_row.name, task=task))
        parent = base if base is not None and base.prompt_id == prompt.id else latest_version(session, prompt)
        scope, within = [], prompt_scope(session, prompt)
        outside = next((d for d in datasets or () if within and d not in within), None)
        if outside:
            raise PromptError(Reason("prompt_scope_fixed", prompt=prompt.name, datasets=", ".join(within), dataset=outside))
    if parent is None:
        default_system, default_template = default_templates(task_row.name, task_row.target, task_row.kind)
        base = {"template": default_template, "system": default_system, "model": "", "params": dict(DEFAULT_PARAMS)}
        base_examples: list[ExampleRow] = []
    else:
        base = {"template": parent.template, "system": parent.system, "model": parent.model, "params": dict(parent.params)}
        base_examples = stored_examples(session, parent)
    template = base["template"] if template is None else _normalise(template)
    system = base["system"] if system is None else _normalise(system)
    model = base["model"] if model is None else model.strip()
    params = base["params"] if params is None else params
    if not template.strip():
        raise PromptError(Reason("template_empty"))
    unchanged = parent is not None and (template, system) == (parent.template, parent.system)
    if not unchanged and (checked is None or checked.rendered != (task_row.name, template, system)):
        check_template(template, target=task_row.target, part="template", task=task_row.name, limits=limits)
        check_template(system, target=task_row.target, part="system", task=task_row.name, limits=limits)
    check_params(params, task=task_row.name)
    if few_shots and judging(task_row).metric:
        raise PromptError(Reason("fewshot_metric_task", task_row=task_row.name))
    if few_shots and not judging(task_row).kind.runs:
        raise PromptError(Reason("fewshot_rewrite_task", task_row=task_row.name))
    examples = base_examples if few_shots is None else resolve_few_shots(session, task_row, few_shots, dataset=dataset,
                                                                                     within=within)
    digest = content_hash(template=template, system=system, model=model, params=params, examples=examples)
    return CheckedVersion(prompt, task_row, parent, template, system, model, params, examples, digest, scope)


def save_version(
    session: Session,
    name: str,
    *,
    task: str | None = None,
    template: str | None = None,
    system: str | None = None,
    model: str | None = None,
    params: dict[str, Any] | None = None,
    few_shots: list[FewShotSpec] | None = None,
    dataset: str | None = None,
    note: str = "",
    author: User | None = None,
    description: str = "",
    limits: Limits = DEFAULT_LIMITS,
    checked: CheckedVersion | None = None,
    datasets: list[str] | tuple[str, ...] | None = None,
    base: PromptVersion | None = None,
    optimisation_id: int | None = None,
) -> SaveResult:
    """Save a version of prompt `name` (creating the prompt with `task` if new); return it and whether it is new.

    Fields left as None are taken from the latest version (for a new prompt: the task's
    built-in template and system text, no model, temperature 0, no few-shots). `checked`:
    what `check_version` returned for the same arguments before the write transaction. `base`: the version it
    derives from (default the latest); `optimisation_id`: the optimisation that proposes it (its origin).
    """
    draft = check_version(session, name, task=task, template=template, system=system, model=model, params=params,
                          few_shots=few_shots, dataset=dataset, limits=limits, checked=checked, datasets=datasets, base=base)
    prompt, parent, examples, digest = draft.prompt, draft.parent, draft.examples, draft.digest
    prompt_created = prompt is None
    if prompt is not None:
        same = session.exec(select(PromptVersion).where(PromptVersion.prompt_id == prompt.id, PromptVersion.content_hash == digest)).first()
        if same is not None:
            return SaveResult(same, created=False)
    if prompt is None:
        prompt = Prompt(name=name, task_id=draft.task.id, description=description)
        session.add(prompt)
        session.flush()
        session.add_all(PromptDataset(prompt_id=prompt.id, dataset_id=d.id) for d in draft.scope)
    number = (session.exec(select(func.max(PromptVersion.number)).where(PromptVersion.prompt_id == prompt.id)).one() or 0) + 1
    version = PromptVersion(prompt_id=prompt.id, number=number, template=draft.template, system=draft.system,
                            model=draft.model, params=draft.params, content_hash=digest,
                            parent_id=parent.id if parent else None, note=note.strip(), author_id=author.id if author else None,
                            optimisation_id=optimisation_id)
    session.add(version)
    session.flush()
    for order, row in enumerate(examples):
        session.add(FewShot(version_id=version.id, order=order, sample_id=row.sample_id, **row.attach,
                            target_key=row.target_key, value=row.value, rationale=row.rationale))
    session.flush()
    return SaveResult(version, created=True, prompt_created=prompt_created)


def _normalise(text: str) -> str:
    # Browsers send CRLF; the same template typed twice must hash the same.
    return text.replace("\r\n", "\n").replace("\r", "\n").strip("\n")


# --------------------------------------------------------------------------- reading


@dataclass
class PromptRow:
    prompt: Prompt
    task: str
    versions: int
    latest: int | None
    runs: int
    scope: list[str] = field(default_factory=list)  # the datasets it is scoped to (empty: global)


def prompt_scope(session: Session, prompt: Prompt) -> list[str]:
    """Return the names of the datasets a prompt is scoped to (empty: a global prompt)."""
    return list(session.exec(select(Dataset.name).join(PromptDataset, PromptDataset.dataset_id == Dataset.id)
                             .where(PromptDataset.prompt_id == prompt.id).order_by(Dataset.name)).all())


def prompts_scopes(session: Session) -> dict[int, list[str]]:
    """Return prompt id → the names of its datasets, for the scoped prompts only (one query)."""
    out: dict[int, list[str]] = {}
    for prompt_id, name in session.exec(select(PromptDataset.prompt_id, Dataset.name)
                                        .join(Dataset, Dataset.id == PromptDataset.dataset_id).order_by(Dataset.name)).all():
        out.setdefault(prompt_id, []).append(name)
    return out


def check_prompt_on_dataset(session: Session, prompt: Prompt, dataset: str) -> None:
    """Refuse (PromptError) to run a prompt scoped to other datasets on `dataset`."""
    scope = prompt_scope(session, prompt)
    if not offered_on(scope, dataset):
        raise PromptError(Reason("prompt_not_on_dataset", prompt=prompt.name, datasets=", ".join(scope), dataset=dataset))


def list_prompts(session: Session, dataset: str | None = None) -> list[PromptRow]:
    """Return every prompt with its task, version count and number of runs, and its datasets (`scope`; empty: global).

    `dataset`: only the prompts shown on that dataset: the global ones and those scoped to it, of tasks offered there.
    """
    scopes = prompts_scopes(session)
    task_scopes = tasks_scopes(session) if dataset else {}
    rows = []
    for prompt, task_name in session.exec(select(Prompt, Task.name).join(Task).order_by(Prompt.name)).all():
        if dataset and not (offered_on(scopes.get(prompt.id), dataset) and offered_on(task_scopes.get(prompt.task_id), dataset)):
            continue
        versions, latest = session.exec(
            select(func.count(PromptVersion.id), func.max(PromptVersion.number)).where(PromptVersion.prompt_id == prompt.id)
        ).one()
        runs = session.exec(
            select(func.count(JudgeRun.id)).join(Judge).join(PromptVersion, PromptVersion.id == Judge.prompt_version_id)
            .where(PromptVersion.prompt_id == prompt.id)
        ).one()
        rows.append(PromptRow(prompt, task_name, versions, latest, runs, scopes.get(prompt.id, [])))
    return rows


def versions_of(session: Session, prompt: Prompt) -> list[PromptVersion]:
    """Return a prompt's versions, newest first."""
    return list(session.exec(select(PromptVersion).where(PromptVersion.prompt_id == prompt.id).order_by(PromptVersion.number.desc())).all())


@dataclass
class ExampleView:
    order: int
    ref: str
    target_key: str
    value: str
    rationale: str
    text: str
    question: str


@dataclass
class VersionView:
    prompt: Prompt
    version: PromptVersion
    task: Task
    examples: list[ExampleView]
    author: str
    parent: int | None
    runs: list[JudgeRun] = field(default_factory=list)

    @property
    def ref(self) -> str:
        return f"{self.prompt.name}@{self.version.number}"


def version_view(session: Session, prompt: Prompt, version: PromptVersion) -> VersionView:
    """Return what `prompt show` and the version page display."""
    task = session.get(Task, prompt.task_id)
    examples = [example_view(session, order, row) for order, row in enumerate(stored_examples(session, version))]
    author = session.get(User, version.author_id).username if version.author_id else ""
    parent = session.get(PromptVersion, version.parent_id).number if version.parent_id else None
    judge = session.exec(select(Judge).where(Judge.prompt_version_id == version.id)).first()
    runs = list(session.exec(select(JudgeRun).where(JudgeRun.judge_id == judge.id).order_by(JudgeRun.id.desc())).all()) if judge else []
    return VersionView(prompt, version, task, examples, author, parent, runs)


def example_view(session: Session, order: int, row: ExampleRow) -> ExampleView:
    """Describe one few-shot example with its sample id, target position and text (a part's: TargetKind.text)."""
    sample = session.get(Sample, row.sample_id)
    return ExampleView(order, example_ref(session, row, sample), row.target_key, row.value, row.rationale,
                       _example_text(session, row, sample), sample.question)


def example_ref(session: Session, row: ExampleRow, sample: Sample | None = None) -> str:
    """Return the reference an example is written with: "SAMPLE", or "SAMPLE:N" with its part's position."""
    sample = sample or session.get(Sample, row.sample_id)
    if row.part_id is None:
        return sample.external_id
    kind = target_kind(row.target_key)
    return f"{sample.external_id}:{kind.positions(session, [row.part_id])[row.part_id]}"


def _example_text(session: Session, row: ExampleRow, sample: Sample) -> str:
    if row.part_id is None:
        return sample.answer
    kind = target_kind(row.target_key)
    return kind.text(kind.rows(session, [row.part_id])[row.part_id])


# --------------------------------------------------------------------------- diff


@dataclass
class DiffRow:
    tag: str  # equal | replace | delete | insert
    left_no: int | None
    left: str
    right_no: int | None
    right: str


@dataclass
class VersionDiff:
    a: VersionView
    b: VersionView
    fields: dict[str, list[DiffRow]]
    changed: list[str]


def side_by_side(left: str, right: str) -> list[DiffRow]:
    """Return a line-by-line side-by-side diff (the rows a two-column view shows)."""
    a, b = left.splitlines(), right.splitlines()
    rows: list[DiffRow] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            rows += [DiffRow("equal", i1 + k + 1, a[i1 + k], j1 + k + 1, b[j1 + k]) for k in range(i2 - i1)]
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            li, rj = i1 + k, j1 + k
            left_line = a[li] if li < i2 else None
            right_line = b[rj] if rj < j2 else None
            kind = "replace" if left_line is not None and right_line is not None else ("delete" if right_line is None else "insert")
            rows.append(DiffRow(kind, li + 1 if left_line is not None else None, left_line or "",
                                rj + 1 if right_line is not None else None, right_line or ""))
    return rows


def _examples_text(view: VersionView) -> str:
    return "\n".join(f"{e.ref} = {e.value}" + (f" | {e.rationale}" if e.rationale else "") for e in view.examples)


def diff_versions(session: Session, prompt: Prompt, a: PromptVersion, b: PromptVersion) -> VersionDiff:
    """Compare two versions field by field: template, system, model, params, few-shots."""
    va, vb = version_view(session, prompt, a), version_view(session, prompt, b)
    texts = {
        "template": (a.template, b.template),
        "system": (a.system, b.system),
        "model": (a.model, b.model),
        "params": (format_params(a.params), format_params(b.params)),
        "few-shots": (_examples_text(va), _examples_text(vb)),
    }
    fields = {name: side_by_side(left, right) for name, (left, right) in texts.items()}
    changed = [name for name, (left, right) in texts.items() if left != right]
    return VersionDiff(va, vb, fields, changed)


def unified_diff(session: Session, prompt: Prompt, a: PromptVersion, b: PromptVersion) -> str:
    """Return a unified diff of two versions (what `prompt diff` prints)."""
    va, vb = version_view(session, prompt, a), version_view(session, prompt, b)
    parts = []
    for name, left, right in (
        ("template", a.template, b.template), ("system", a.system, b.system), ("model", a.model, b.model),
        ("params", format_params(a.params), format_params(b.params)), ("few-shots", _examples_text(va), _examples_text(vb)),
    ):
        lines = list(difflib.unified_diff(left.splitlines(), right.splitlines(), f"{va.ref} {name}", f"{vb.ref} {name}", lineterm=""))
        parts.extend(lines)
    return "\n".join(parts) if parts else f"{va.ref} and {vb.ref} have the same content"
