"""The calibration loop of a prompt engineer: the dashboard of every judge of a dataset and task.

`dashboard` puts every judge on one page — each version of the task's prompts (run or not) and
every imported judge with verdicts on the dataset — with its alignment and CI, n, the excluded
counts, its three-state decision against the threshold, "could it replace an expert?" (the
alt-test) and the cost of its runs, on one split (dev by default: the split engineers iterate
on; test stays frozen, testsplit.py). Every row is scored on the targets common to all of them
(common.py) with the section code of `build_report`; each judge's own figure beside is exactly
that of `calibrate report --split`.

Bad input gives a `message` saying what is missing instead of an empty chart: an unknown
split, a split with no labels for the task, no judge at all; a version without any run on the
dataset is a row with a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
from sqlalchemy import func
from sqlmodel import Session, select

from calibrate import lookup
from calibrate.annotation.items import marked_contexts
from calibrate.annotation.queue import set_status
from calibrate.annotation.uncertainty import queue_mode
from calibrate.calibration import (
    DEFAULT_ALPHA,
    DEFAULT_EPSILON,
    DEFAULT_MIN_ITEMS,
    DERIVED_GOLD,
    MIN_ANNOTATORS,
    Options,
    alignment_frames,
    alt_test_block,
    alt_test_labels,
    apply_order_rule,
    build_report,
    calibrated_task,
    calibrated_task_names,
    check_parameters,
    compare_judges,
    expert_count,
    human_agreement,
    human_gold,
    metadata_fields,
    rule_of,
    run_alt_test,
    sample_field_values,
    score_versions,
)
from calibrate.datasets import sample_responses, split_samples
from calibrate.errors import CalibrationError, NotFound
from calibrate.judges.families import (
    self_preference_warnings,
)
from calibrate.judges.sandbox import DEFAULT_LIMITS, Limits
from calibrate.judges.versions import (
    FewShotSpec,
    diff_versions,
    latest_version,
    save_version,
    stored_examples,
)
from calibrate.loop.testsplit import (
    TEST_SPLIT,
    dataset_splits,
    frozen_test_message,
    frozen_test_reason,
    test_looks,
)
from calibrate.models import (
    Assignment,
    Claim,
    Context,
    Dataset,
    Judge,
    JudgeRun,
    Label,
    Prompt,
    PromptVersion,
    Sample,
    Task,
    Triage,
    User,
    Verdict,
    parse_target_key,
    utcnow,
)
from calibrate.reasons import Reason
from calibrate.reports.summary import ceiling, decision_text, reason_text
from calibrate.targets import target_name, target_names

DEFAULT_SPLIT = "dev"


@dataclass
class JudgeRow:
    """One judge on the dashboard: a prompt version (`version` set) or an imported judge."""

    judge: str
    kind: str
    prompt: str | None = None
    version: int | None = None
    metric: str = ""
    value: float | None = None
    ci: tuple[float, float] | None = None
    n: int = 0
    n_fewshot: int = 0
    n_unparsed: int = 0
    n_no_gold: int = 0
    passed: bool | None = None
    decision: str | None = None  # pass, fail or undecided on the common targets (calibration/decision.py)
    rule: str = "point"
    labels_to_decide: dict | None = None  # for undecided: about how many more labelled targets would settle it
    decision_text: str = ""  # the decision in one sentence (reports.summary.decision_text)
    own: dict | None = None  # its figure on all its own targets (metric, value, n): secondary
    per_group: list[dict] = field(default_factory=list)  # with group_by: each group's value and CI (common targets)
    alt_test: dict | None = None  # the Alternative Annotator Test on the split (calibration/alttest.py)
    cost: float | None = None
    note: str = ""
    ran: bool = False  # the judge has verdicts for the task on the split
    triage: dict[str, int] = field(default_factory=dict)  # triage kind → disagreements so triaged
    test_looks: int = 0  # times its test score was computed ("evaluate on test")
    budget: dict | None = None  # the label budget for the board's CI half-width (calibration.label_budget)
    budget_names: list[str] = field(default_factory=list)  # the budget's candidate targets as people name them
    warnings: list[dict] = field(default_factory=list)  # self-preference (calibration.self_preference_warnings)
    test: object | None = None  # the latest TestEvaluation
    position: dict | None = None  # pairwise tasks: position bias over the judge's two orders (calibration/pairwise.py)
    n_disagree: int | None = None  # categorical tasks: common targets where the verdict differs from the gold (confusion)

    @property
    def own_differs(self) -> bool:
        """Whether its own figure (all its own targets) says something else than the common one, at 3 decimals."""
        if not self.own:
            return False
        text = [None if v is None else f"{v:.3f}" for v in (self.own.get("value"), self.value)]
        return self.own.get("n") != self.n or text[0] != text[1]


@dataclass
class Dashboard:
    dataset: str
    task: str
    split: str | None
    threshold: float
    splits: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    rows: list[JudgeRow] = field(default_factory=list)
    ceiling: float | None = None
    ceiling_name: str = ""
    n_labelled: int = 0
    message: str = ""
    test_looks: int = 0  # every judge's looks at the test split of this dataset and task
    budget_half_width: float = 0.05
    has_test: bool = False
    queue_mode: str = "sampled"  # the order annotators get the dataset's pending items in (annotation.uncertainty)
    rule: str = "point"
    common_targets: int = 0  # N: the targets every listed judge is scored on (calibration/common.py)
    common_note: str = ""
    n_fewshot_common: int = 0  # targets left out as a few-shot example of some listed judge
    group_by: str | None = None
    group_fields: list[str] = field(default_factory=list)  # metadata.FIELD names the group-by selector offers
    epsilon: float = DEFAULT_EPSILON  # the alt-test's ε for the "could replace an expert?" column
    input_errors: list[str] = field(default_factory=list)  # bad query parameters, said on the page (a 400)
    pairwise: bool = False  # the task compares responses: the rows show position bias, the order rule applies
    order_rule: str = "consistent"

    @property
    def scored(self) -> list[JudgeRow]:
        """The rows with a defined alignment (the points of the chart)."""
        return [r for r in self.rows if r.value is not None]


def _judges(session: Session, dataset: Dataset, task: Task) -> list[tuple[Judge | None, Prompt | None, PromptVersion | None]]:
    """Return the versions of the task's prompts (with their judge, if one ran) then the imported judges."""
    judged = set(session.exec(
        select(Verdict.judge_id).join(Sample, Sample.id == Verdict.sample_id)
        .where(Sample.dataset_id == dataset.id, Verdict.task_id == task.id).distinct()
    ).all())
    by_version = {j.prompt_version_id: j for j in session.exec(select(Judge).where(Judge.prompt_version_id.is_not(None))).all()}
    out: list[tuple[Judge | None, Prompt | None, PromptVersion | None]] = []
    versions = session.exec(
        select(Prompt, PromptVersion).join(PromptVersion, PromptVersion.prompt_id == Prompt.id)
        .where(Prompt.task_id == task.id).order_by(Prompt.name, PromptVersion.number)
    ).all()
    for prompt, version in versions:
        out.append((by_version.get(version.id), prompt, version))
    seen = {j.id for j, _, _ in out if j is not None}
    if judged - seen:
        others = session.exec(select(Judge).where(Judge.id.in_(judged - seen)).order_by(Judge.name)).all()
        out += [(j, None, None) for j in others]
    return out


def _costs(session: Session, dataset: Dataset) -> dict[int, float]:
    rows = session.exec(select(JudgeRun.judge_id, func.sum(JudgeRun.cost)).where(JudgeRun.dataset_id == dataset.id)
                        .group_by(JudgeRun.judge_id)).all()
    return {judge_id: float(total or 0.0) for judge_id, total in rows}


def _n_labelled(session: Session, dataset: Dataset, task: Task, split: str | None) -> int:
    query = (select(func.count(func.distinct(Label.target_key))).join(Sample, Sample.id == Label.sample_id)
             .where(Sample.dataset_id == dataset.id, Label.task_id == task.id, Label.stale.is_(False)))
    if split:
        query = query.where(Sample.split == split)
    return int(session.exec(query).one())


def dashboard(session: Session, dataset_name: str, *, task: str = "claim_support", split: str | None = DEFAULT_SPLIT,
              options: Options | None = None, group_by: str | None = None, epsilon: float = DEFAULT_EPSILON) -> Dashboard:
    """Return every judge of `task` on the dataset with its alignment on `split` (None: every sample), every judge
    scored on the targets common to all of them (calibration/common.py), with its own figure beside.

    `group_by` (metadata.FIELD) adds each group's value and CI to every row; `epsilon` is the
    alt-test's margin for the "could replace an expert?" column. Raises NotFound for an unknown
    dataset or task, CalibrationError for ε outside (0, 1) or an unknown group-by field; a split
    without labels or a dataset without judges gives a dashboard whose `message` says what is missing.
    """
    base = options or Options()
    dataset = lookup.dataset(session, dataset_name)
    task_row = calibrated_task(session, task)
    input_errors = []
    try:
        check_parameters(epsilon, DEFAULT_ALPHA, None, DEFAULT_MIN_ITEMS)
    except CalibrationError as exc:  # said on the page; the column uses the default
        input_errors.append(f"{exc}; the default {DEFAULT_EPSILON} is used")
        epsilon = DEFAULT_EPSILON
    board = Dashboard(dataset=dataset.name, task=task_row.name, split=split, threshold=base.threshold,
                      budget_half_width=base.budget_half_width, rule=rule_of(base.ci_lower), group_by=group_by or None,
                      epsilon=epsilon, splits=dataset_splits(session, dataset),
                      tasks=calibrated_task_names(session))
    board.group_fields = metadata_fields(session, dataset)
    board.input_errors = input_errors
    board.has_test = TEST_SPLIT in board.splits
    board.pairwise, board.order_rule = task_row.kind == "pairwise", base.order_rule
    board.queue_mode = queue_mode(session, dataset)
    looks = test_looks(session, dataset, task_row)
    board.test_looks = sum(count for count, _ in looks.values())
    frozen = frozen_test_message(dataset.name, split, board.splits)
    if frozen:
        board.message = frozen
        return board
    if split and split not in board.splits:
        board.message = (f"{dataset.name} has no sample in split {split!r} "
                         f"(splits: {', '.join(board.splits) or 'none — assign them with calibrate sample --split'})")
        return board
    board.n_labelled = _n_labelled(session, dataset, task_row, split)
    if task_row.name in DERIVED_GOLD:  # a metric task's gold also comes from the claim or context labels
        board.n_labelled += _n_labelled(session, dataset, lookup.task(session, DERIVED_GOLD[task_row.name]), split)
    if board.n_labelled == 0:
        where = f"in split {split}" if split else "in any split"
        board.message = f"no {task_row.name} labels {where} of {dataset.name}: label some targets first or choose another split"
        return board
    opts = Options(**{**base.__dict__, "split": split, "group_by": None})
    costs = _costs(session, dataset)
    triaged = triage_counts(session, dataset, task_row)
    judges = _judges(session, dataset, task_row)
    names = [j.name for j, _, _ in judges if j is not None]
    groups = None
    if group_by:
        try:
            groups = sample_field_values(session, dataset, group_by)
        except CalibrationError as exc:  # an unknown field: said on the page, the rows without groups
            board.input_errors.append(str(exc))
            board.group_by = None
    frames = alignment_frames(session, dataset.name, task_row.name, names, options=opts)
    scores = score_versions(session, dataset.name, task_row.name, names, options=opts, groups=groups, frames=frames)
    board.common_targets, board.n_fewshot_common = scores.common_targets, scores.n_fewshot
    board.common_note = reason_text({"note": scores.note, "reason": scores.reason.to_dict() if scores.reason else None})
    in_split = split_samples(session, dataset, split) if split else None
    expert_labels = alt_test_labels(session, dataset, task_row, in_split)
    # fewer than 3 experts: the same undefined block for every row, said once (a judge's few-shots only remove labels)
    too_few = alt_test_block(task_row, expert_labels, None, set(), epsilon=board.epsilon) \
        if expert_count(expert_labels) < MIN_ANNOTATORS else None
    for judge, prompt, version in judges:
        row = JudgeRow(judge=judge.name if judge else f"{prompt.name}@{version.number}",
                       kind="prompt" if version is not None else judge.kind,
                       prompt=prompt.name if prompt else None, version=version.number if version else None)
        board.rows.append(row)
        section = scores.common.get(judge.name) if judge is not None else None
        if judge is None:
            row.note = f"no run of this version on {dataset.name}"
            continue
        row.test_looks, row.test = looks.get(judge.id, (0, None))
        row.warnings = self_preference_warnings(session, dataset, judge)
        if section is None:
            row.note = f"no {task_row.name} verdicts of this judge on {dataset.name}" + (f" in split {split}" if split else "")
            continue
        row.ran = True
        row.triage = triaged.get(judge.id, {})
        alignment = section["alignment"]
        row.metric = alignment.get("metric") or ""
        row.value = alignment.get("value")
        ci = alignment.get("ci")
        row.ci = (ci[0], ci[1]) if ci and None not in ci else None
        row.own = scores.own.get(judge.name)
        row.n, row.n_fewshot = int(section.get("n") or 0), int((row.own or {}).get("n_fewshot") or 0)
        row.n_unparsed, row.n_no_gold = int(section.get("n_unparsed") or 0), int((row.own or {}).get("n_no_gold") or 0)
        row.passed, row.decision, row.rule = section.get("passed"), section.get("decision"), section.get("rule") or board.rule
        row.labels_to_decide = section.get("labels_to_decide")
        row.decision_text = decision_text(row.decision or "undefined", row.rule, row.metric, row.value, row.ci, board.threshold,
                                          row.passed, row.labels_to_decide, note=reason_text(section.get(row.metric)))
        row.budget = section.get("budget")
        matrix = (section.get("confusion") or {}).get("matrix")
        if matrix:
            row.n_disagree = int(sum(map(sum, matrix)) - sum(matrix[i][i] for i in range(min(len(matrix), len(matrix[0])))))
        row.per_group = section.get("per_group") or []
        row.alt_test = too_few or alt_test_block(task_row, expert_labels, frames.verdicts.get(judge.name),
                                                 frames.fewshot.get(judge.name, set()), epsilon=board.epsilon)
        row.position = frames.position.get(judge.name)
        row.cost = costs.get(judge.id, 0.0) if row.kind == "prompt" else None
        if row.value is None:
            est = section.get("cohen_kappa") or section.get("spearman_rho") or {}
            row.note = reason_text(est) or "alignment undefined on these targets"
    # The budget's candidates as people read them ("demo-004 · claim 1"), in one query per kind.
    wanted = [key for r in board.rows if r.budget for key in r.budget.get("candidates") or []]
    names = target_names(session, wanted) if wanted else {}
    for r in board.rows:
        if r.budget:
            r.budget_names = [names.get(key, key) for key in r.budget.get("candidates") or []]
    # The human–human ceiling: the annotators' agreement among themselves (no report), the report's figure.
    human_section = human_agreement(session, dataset.name, task_row.name, split=opts.split, options=opts)
    top = ceiling(human_section) if human_section else None
    if top is not None and top.value is not None:
        board.ceiling, board.ceiling_name = top.value, top.name
    if not board.rows:
        board.message = (f"no judge has {task_row.name} verdicts on {dataset.name} yet: create a prompt version and run it, "
                         f"or import a judge's verdicts")
    return board


def alt_test_on_split(session: Session, dataset_name: str, judge_name: str, *, task: str = "claim_support",
                      split: str | None = DEFAULT_SPLIT, **parameters) -> dict:
    """Return `alttest.run_alt_test` on one split for the alt-test page: the frozen test split, and every sample
    (which includes it), are refused as on the dashboard (CalibrationError), as are parameters out of range."""
    dataset = lookup.dataset(session, dataset_name)
    frozen = frozen_test_message(dataset.name, split, dataset_splits(session, dataset))
    if frozen:
        raise CalibrationError(frozen_test_reason(dataset.name, split, dataset_splits(session, dataset)))
    return run_alt_test(session, dataset.name, task, judge_name, split=split, **parameters)


# --------------------------------------------------------------------------- disagreements


@dataclass
class Disagreement:
    """One target where the judge's verdict differs from the human gold."""

    target: str
    sample: str
    position: int | None
    gold: str
    judge: str
    humans: dict[str, str]
    triage: str = ""
    kind: str = "claim"  # what the target is: claim, context, sample (the answer), responses (pairwise)
    text: str = ""  # the target's text (the claim, the context, the answer), for the list; whole on the detail page

    @property
    def where(self) -> str:
        """Return the target as people name it: "demo-004 · claim 1" (calibrate/targets.py)."""
        return target_name(self.sample, self.kind, self.position)

    @property
    def unanimous(self) -> bool:
        return len(set(self.humans.values())) <= 1

    @property
    def pair(self) -> str:
        return f"{self.gold}→{self.judge}"


@dataclass
class DisagreementList:
    dataset: str
    judge: str
    task: str
    split: str | None
    items: list[Disagreement]
    total: int  # before the filters
    pairs: list[str]
    message: str = ""
    order_rule: str | None = None  # pairwise tasks: the rule their judge's verdicts were read by


def disagreements(session: Session, dataset_name: str, judge_name: str, *, task: str = "claim_support",
                  split: str | None = DEFAULT_SPLIT, pair: str | None = None, agreement: str | None = None,
                  meta: str | None = None, order_rule: str = "consistent") -> DisagreementList:
    """Return the scored targets where the judge and the human gold differ, filtered.

    `pair` is `GOLD→JUDGE` (or `GOLD->JUDGE`); `agreement` is `unanimous` (every annotator gave
    the same label) or `split`; `meta` is `FIELD=VALUE` on the sample's metadata. Few-shot
    examples of the judge's version, unparsed verdicts and targets without gold are not listed
    (they are not scored). Raises NotFound for an unknown dataset, judge or task, CalibrationError for a split or
    a malformed filter.
    """
    calibrated_task(session, task)
    dataset_row = lookup.dataset(session, dataset_name)
    frozen = frozen_test_message(dataset_row.name, split, dataset_splits(session, dataset_row))
    if frozen:
        return DisagreementList(dataset=dataset_name, judge=judge_name, task=task, split=split, items=[], total=0, pairs=[],
                                message=frozen)
    if agreement not in (None, "", "unanimous", "split"):
        raise CalibrationError(Reason("agreement_unknown", agreement=agreement))
    report = build_report(session, dataset_name, judge_name, options=Options(bootstrap=100, split=split, order_rule=order_rule),
                          tasks=[task])
    section = report.data["tasks"].get(task)
    out = DisagreementList(dataset=dataset_name, judge=judge_name, task=task, split=split, items=[], total=0, pairs=[],
                           order_rule=order_rule if lookup.task(session, task).kind == "pairwise" else None)
    if section is None or "judge_note" in section:
        out.message = f"judge {judge_name} has no {task} verdicts on {dataset_name}" + (f" in split {split}" if split else "")
        return out
    task_row = lookup.task(session, task)
    kind = "responses" if task_row.kind == "pairwise" else task_row.target
    items = [Disagreement(r.target, r.sample_id, r.claim if r.claim is not None else r.context, str(r.gold), str(r.judge), r.humans,
                          kind=kind) for r in report.rows[task] if r.agree is False]

    kinds = triage_of(session, lookup.judge(session, judge_name), lookup.task(session, task))
    for d in items:
        d.triage = kinds.get(d.target, "")
    out.total = len(items)
    out.pairs = sorted({d.pair for d in items})
    if pair:
        wanted = pair.replace("->", "→")
        items = [d for d in items if d.pair == wanted]
    if agreement:
        items = [d for d in items if d.unanimous == (agreement == "unanimous")]
    if meta:
        key, sep, value = meta.partition("=")
        if not sep or not key.strip():
            raise CalibrationError(Reason("metadata_filter_shape", meta=meta))
        dataset = lookup.dataset(session, dataset_name)
        rows = session.exec(select(Sample.external_id, Sample.meta).where(Sample.dataset_id == dataset.id)).all()
        keep = {ext for ext, m in rows if isinstance(m, dict) and str(m.get(key.strip())) == value.strip()}
        items = [d for d in items if d.sample in keep]
    out.items = items
    _fill_texts(session, items)
    return out


def _fill_texts(session: Session, items: list[Disagreement]) -> None:
    """Give each listed disagreement its target's text: the claim, the context or the answer (pairwise: none)."""
    ids: dict[str, list[int]] = {}
    for d in items:
        parsed = parse_target_key(d.target)
        if parsed is not None:
            ids.setdefault(parsed[0], []).append(parsed[1])
    texts: dict[str, str] = {}
    for kind, model, column in (("claim", Claim, Claim.text), ("context", Context, Context.text), ("sample", Sample, Sample.answer)):
        wanted = ids.get(kind)
        for start in range(0, len(wanted or []), 500):  # bounded IN lists
            rows = session.exec(select(model.id, column).where(model.id.in_(wanted[start:start + 500]))).all()
            texts.update({f"{kind}:{row_id}": text for row_id, text in rows})
    for d in items:
        d.text = "" if d.kind == "responses" else texts.get(d.target, "")


@dataclass
class HumanLabel:
    annotator: str
    value: str
    rationale: str
    adjudicated: bool
    evidence: list | None = None  # Label.evidence: context ranks and sentences


@dataclass
class DisagreementDetail:
    """One target as the engineer opens it: the item, the humans, the judge's verdict and raw response."""

    dataset: str
    judge: Judge
    task: Task
    target: str
    sample: Sample
    target_text: str
    position: int | None
    labels: list[HumanLabel]
    gold: str | None
    gold_rationale: str
    verdict: Verdict | None
    prompt: str | None  # the judge's prompt, when it is a prompt version (few-shots can be added)
    fewshot_refusal: str = ""  # why this target cannot become a few-shot example, if it cannot
    triage: str = ""
    # Pairwise tasks: the sample's responses (import order), the judge's verdict in each presentation
    # order, the verdict the order rule makes of them, and the order each annotator saw.
    responses: list = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    judge_value: str | None = None
    order_rule: str = ""
    orders_seen: dict[str, list[str]] = field(default_factory=dict)
    # The sample's retrieved contexts, each with the evidence the experts marked in it (annotation.items.marked_contexts).
    contexts: list = field(default_factory=list)

    @property
    def where(self) -> str:
        """Return the target as people name it: "demo-004 · claim 1" (calibrate/targets.py)."""
        kind = "responses" if self.responses else self.task.target
        return target_name(self.sample.external_id, kind, self.position)


def disagreement_detail(session: Session, dataset_name: str, judge_name: str, target: str,
                        *, task: str = "claim_support", options: Options | None = None) -> DisagreementDetail:
    """Return one target of a dataset with its human labels, the gold and the judge's verdict."""

    dataset = lookup.dataset(session, dataset_name)
    judge = lookup.judge(session, judge_name)
    task_row = calibrated_task(session, task)
    parsed = parse_target_key(target)
    if parsed is None and target.partition(":")[0] == task_row.target and target.partition(":")[2].isdigit():
        raise NotFound(Reason("no_such_target", target=target, dataset=dataset.name))  # an id larger than any row can have
    if parsed is None or parsed[0] != task_row.target:
        raise CalibrationError(Reason("target_wrong_kind", target=target, target2=task_row.target, task_row=task_row.name))
    kind, target_id = parsed
    position, text, sample = None, "", None
    if kind == "claim":
        claim = session.get(Claim, target_id)
        sample = session.get(Sample, claim.sample_id) if claim else None
        position, text = (claim.index, claim.text) if claim else (None, "")
    elif kind == "context":
        context = session.get(Context, target_id)
        sample = session.get(Sample, context.sample_id) if context else None
        position, text = (context.rank, context.text) if context else (None, "")
    else:
        sample = session.get(Sample, target_id)
        text = sample.answer if sample else ""
    if sample is None or sample.dataset_id != dataset.id:
        raise CalibrationError(Reason("no_such_target", target=target, dataset=dataset.name))
    rows = session.exec(
        select(Label, User.username).join(User, User.id == Label.annotator_id)
        .where(Label.task_id == task_row.id, Label.target_key == target, Label.stale.is_(False)).order_by(Label.adjudicated, User.username)
    ).all()
    labels = [HumanLabel(username, label.value, label.rationale, label.adjudicated, label.evidence) for label, username in rows]
    gold, rationale = human_gold(session, task_row, target)
    verdict = session.exec(select(Verdict).where(Verdict.judge_id == judge.id, Verdict.task_id == task_row.id,
                                                 Verdict.target_key == target)).first()
    prompt = None
    refusal = ""
    if judge.prompt_version_id is not None:
        version = session.get(PromptVersion, judge.prompt_version_id)
        prompt = session.get(Prompt, version.prompt_id).name
    else:
        refusal = "this judge is imported, not a prompt version: there is no prompt to add an example to"
    if sample.split == "test":
        refusal = "the sample is in the test split, which is never shown to a judge"
    elif gold is None:
        refusal = f"no human gold label ({rationale})"
    detail = DisagreementDetail(dataset.name, judge, task_row, target, sample, text, position, labels, gold, rationale,
                                verdict, prompt, refusal, triage_of(session, judge, task_row).get(target, ""))
    contexts = session.exec(select(Context).where(Context.sample_id == sample.id, Context.active.is_(True))
                            .order_by(Context.rank)).all()
    detail.contexts = marked_contexts(contexts, [(h.annotator, h.evidence) for h in labels if not h.adjudicated],
                                      target_id=target_id if kind == "context" else None)
    if task_row.kind == "pairwise":
        detail.responses = sample_responses(session, sample.id)
        detail.verdicts = list(session.exec(select(Verdict).where(
            Verdict.judge_id == judge.id, Verdict.task_id == task_row.id, Verdict.target_key == target)
            .order_by(Verdict.order_key)).all())
        detail.order_rule = (options or Options()).order_rule
        frame = pd.DataFrame([{"target_key": v.target_key, "sample_id": v.sample_id, "value": v.value, "status": v.status,
                               "order_key": v.order_key} for v in detail.verdicts],
                             columns=["target_key", "sample_id", "value", "status", "order_key"])
        by_rule, _ = apply_order_rule(task_row, frame, detail.order_rule)
        detail.judge_value = by_rule["value"].iloc[0] if len(by_rule) and by_rule["status"].iloc[0] == "ok" else None
        detail.orders_seen = {username: label.order for label, username in rows if label.order}
    return detail


def add_fewshot(session: Session, dataset_name: str, judge_name: str, target: str, rationale: str, *,
                task: str = "claim_support", author=None, limits: Limits = DEFAULT_LIMITS):
    """Create the next version of the judge's prompt with `target` (its gold label, `rationale`) appended
    to the latest version's few-shot examples; return the judges module's SaveResult.

    `limits` (PROMPT_RENDER_SECONDS, PROMPT_RENDER_MAX_CHARS) bound the save's trial render, as for
    every other save (the template is the latest version's, so usually nothing is rendered again).

    Raises CalibrationError when the judge is imported, and the judges module's PromptError when the
    target cannot be an example (test split, no gold, already an example).
    """

    detail = disagreement_detail(session, dataset_name, judge_name, target, task=task)
    if detail.prompt is None:
        raise CalibrationError(Reason("fewshot_imported_judge"))
    prompt = session.exec(select(Prompt).where(Prompt.name == detail.prompt)).one()
    specs = []
    for row in stored_examples(session, latest_version(session, prompt)):
        sample = session.get(Sample, row.sample_id)
        if row.claim_id is not None:
            ref = f"{sample.external_id}:{session.get(Claim, row.claim_id).index}"
        elif row.context_id is not None:
            ref = f"{sample.external_id}:{session.get(Context, row.context_id).rank}"
        else:
            ref = sample.external_id
        specs.append(FewShotSpec(ref, row.rationale))
    ref = detail.sample.external_id if detail.position is None else f"{detail.sample.external_id}:{detail.position}"
    specs.append(FewShotSpec(ref, rationale.strip() or detail.gold_rationale))
    note = f"few-shot example {ref} added from a disagreement of {judge_name}"
    return save_version(session, prompt.name, few_shots=specs, dataset=detail.dataset, note=note, author=author,
                        limits=limits)


# --------------------------------------------------------------------------- triage

TRIAGE_KINDS = ("judge_error", "human_error", "ambiguous_guideline")


@dataclass
class TriageResult:
    triage: object  # models.Triage
    flagged: bool  # human_error: an assignment of the sample was flagged for the adjudication page


def triage(session: Session, dataset_name: str, judge_name: str, target: str, kind: str, *, task: str = "claim_support",
           note: str = "", user=None) -> TriageResult:
    """Record (or change) the engineer's triage of one disagreement.

    `human_error` also flags one of the sample's done assignments (of an annotator who labelled the
    target) through the annotation queue's `set_status`, which puts the sample in the "flagged for
    review" list of the adjudication page; when no such assignment exists (labels imported without
    a queue), the triage is still recorded and `flagged` is False.
    """

    if kind not in TRIAGE_KINDS:
        raise CalibrationError(Reason("triage_unknown", triage_kinds=', '.join(TRIAGE_KINDS), kind_=kind))
    detail = disagreement_detail(session, dataset_name, judge_name, target, task=task)
    row = session.exec(select(Triage).where(Triage.judge_id == detail.judge.id, Triage.task_id == detail.task.id,
                                            Triage.target_key == target)).first()
    if row is None:
        row = Triage(dataset_id=detail.sample.dataset_id, judge_id=detail.judge.id, task_id=detail.task.id,
                     sample_id=detail.sample.id, target_key=target, kind=kind)
        session.add(row)
    row.kind, row.note, row.updated_at = kind, note.strip(), utcnow()
    row.user_id = user.id if user is not None else None
    session.flush()
    flagged = False
    if kind == "human_error":
        labellers = select(Label.annotator_id).where(Label.task_id == detail.task.id, Label.target_key == target)
        assignment = session.exec(select(Assignment).where(Assignment.sample_id == detail.sample.id,
                                                           Assignment.user_id.in_(labellers)).order_by(Assignment.id)).first()
        if assignment is not None:
            ref = detail.sample.external_id if detail.position is None else f"{detail.sample.external_id}:{detail.position}"
            why = f"{judge_name} disagreed on {ref} ({target}) and the engineer judged the human label wrong"
            set_status(session, assignment, "flagged", f"{why}: {row.note}" if row.note else why)
            flagged = True
    return TriageResult(row, flagged)


def triage_counts(session: Session, dataset: Dataset, task: Task) -> dict[int, dict[str, int]]:
    """Return judge id → {triage kind: count} for a dataset and task."""

    out: dict[int, dict[str, int]] = {}
    rows = session.exec(select(Triage.judge_id, Triage.kind, func.count()).where(Triage.dataset_id == dataset.id, Triage.task_id == task.id)
                        .group_by(Triage.judge_id, Triage.kind)).all()
    for judge_id, kind, n in rows:
        out.setdefault(judge_id, {})[kind] = int(n)
    return out


def triage_of(session: Session, judge: Judge, task: Task) -> dict[str, str]:
    """Return target key → triage kind of a judge's triaged disagreements."""

    return dict(session.exec(select(Triage.target_key, Triage.kind).where(Triage.judge_id == judge.id, Triage.task_id == task.id)).all())


# --------------------------------------------------------------------------- the report's versions section


def versions_section(session: Session, dataset_name: str, judge_name: str, *, options: Options | None = None) -> dict | None:
    """Return the `versions` section of a prompt-version judge's report: every version of its prompt with its
    alignment, CI and decision on the report's split — every version that ran scored on the targets common to all
    of them (calibration/common.py), its own figure beside —, what changed from the version before, and
    `compare_judges` of the latest two versions that ran, on the same split. None for an imported judge."""

    options = options or Options()
    judge = lookup.judge(session, judge_name)
    if judge.prompt_version_id is None:
        return None
    prompt = session.get(Prompt, session.get(PromptVersion, judge.prompt_version_id).prompt_id)
    task = session.get(Task, prompt.task_id)
    versions = session.exec(select(PromptVersion).where(PromptVersion.prompt_id == prompt.id).order_by(PromptVersion.number)).all()
    judges = {j.prompt_version_id: j for j in session.exec(
        select(Judge).where(Judge.prompt_version_id.in_([v.id for v in versions]))).all()}
    scores = score_versions(session, dataset_name, task.name, [judges[v.id].name for v in versions if v.id in judges],
                            options=Options(**{**options.__dict__, "group_by": None}))
    rows, previous = [], None
    for version in versions:
        judge_row = judges.get(version.id)
        section = scores.common.get(judge_row.name) if judge_row else None
        own = scores.own.get(judge_row.name) if judge_row else None
        alignment = (section or {}).get("alignment") or {}
        rows.append({
            "judge": f"{prompt.name}@{version.number}", "number": version.number, "note": version.note,
            "changed": diff_versions(session, prompt, previous, version).changed if previous else [],
            "value": alignment.get("value"), "ci": alignment.get("ci"), "n": (section or {}).get("n"),
            "n_unparsed": (section or {}).get("n_unparsed"), "n_fewshot": (own or {}).get("n_fewshot"),
            "passed": (section or {}).get("passed"), "decision": (section or {}).get("decision"),
            "rule": (section or {}).get("rule"), "labels_to_decide": (section or {}).get("labels_to_decide"),
            "own": {k: own[k] for k in ("value", "n")} if own else None,
            "status": "ok" if section else "no verdicts on this dataset" + (f" in split {options.split}" if options.split else ""),
        })
        previous = version
    out: dict = {"prompt": prompt.name, "task": task.name, "common_targets": scores.common_targets,
                 "common_note": scores.note, "versions": rows, "comparison": None}
    if scores.reason is not None:
        out["common_reason"] = scores.reason.to_dict()
    ran = [r["judge"] for r in rows if r["status"] == "ok"]
    if len(ran) < 2:
        out["comparison_note"] = f"fewer than two versions of {prompt.name} have verdicts: nothing to compare"
        return out
    try:
        full = compare_judges(session, dataset_name, ran[-2], ran[-1], task=task.name, options=options)
    except CalibrationError as exc:
        out["comparison_note"] = str(exc)
        return out
    out["comparison"] = {"scope": f"the samples of split {options.split}" if options.split else "every sample of the dataset"}
    out["comparison"] |= {k: full.get(k) for k in ("judge_a", "judge_b", "common_n", "metric", "a", "b", "difference",
                                                   "mcnemar", "ttest", "wilcoxon", "reconciliation", "changed")}
    flips = full.get("flips") or {}
    out["comparison"]["flips"] = {"fixed": len(flips.get("fixed") or []), "broken": len(flips.get("broken") or [])}
    return out


# --------------------------------------------------------------------------- compare two judges in the browser


@dataclass
class JudgeComparison:
    """The engineers' compare page: the choices of its form, and `compare_judges` of the two picked (or why not)."""

    dataset: str
    task: str
    split: str | None
    a: str
    b: str
    judges: list[str] = field(default_factory=list)  # every judge of the task, as on the dashboard
    tasks: list[str] = field(default_factory=list)
    splits: list[str] = field(default_factory=list)
    result: dict | None = None
    message: str = ""


def compare_two(session: Session, dataset_name: str, judge_a: str, judge_b: str, *, task: str = "claim_support",
                split: str | None = DEFAULT_SPLIT, options: Options | None = None) -> JudgeComparison:
    """Return `compare_judges` of B against A on one split (what `calibrate compare --split` gives), or a message.

    Raises NotFound only for an unknown dataset or task; every other bad input (no judge
    picked, the same judge twice, an unknown judge, a version without any run, the frozen test
    split, a split without samples, no common targets) gives a `message` saying what is missing.
    """

    dataset = lookup.dataset(session, dataset_name)
    task_row = calibrated_task(session, task)
    page = JudgeComparison(dataset=dataset.name, task=task_row.name, split=split, a=judge_a, b=judge_b,
                           tasks=calibrated_task_names(session), splits=dataset_splits(session, dataset))
    listed = _judges(session, dataset, task_row)
    page.judges = [judge.name if judge else f"{prompt.name}@{version.number}" for judge, prompt, version in listed]
    not_run = {f"{prompt.name}@{version.number}" for judge, prompt, version in listed if judge is None}
    if not (judge_a and judge_b):
        page.message = "pick two judges to compare: A (the baseline) and B"
    elif judge_a == judge_b:
        page.message = f"pick two different judges: A and B are both {judge_a}"
    elif not_run & {judge_a, judge_b}:
        page.message = "; ".join(f"{name} has no run on {dataset.name}: run it first" for name in (judge_a, judge_b) if name in not_run)
    else:
        page.message = frozen_test_message(dataset.name, split, page.splits)
    if page.message:
        return page
    opts = Options(**{**(options or Options()).__dict__, "split": split, "group_by": None})
    try:
        page.result = compare_judges(session, dataset.name, judge_a, judge_b, task=task_row.name, options=opts)
    except (CalibrationError, NotFound) as exc:  # an unknown judge, nothing in common: said on the page
        page.message = str(exc)
    return page
