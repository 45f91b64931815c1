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
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, select

from calibrate import lookup
from calibrate.annotation.queue import set_status
from calibrate.annotation.uncertainty import queue_mode
from calibrate.calibration import (
    DEFAULT_ALPHA,
    DEFAULT_EPSILON,
    DEFAULT_MIN_ITEMS,
    DERIVED_GOLD,
    MIN_ANNOTATORS,
    AlignmentFrames,
    Options,
    VersionScores,
    alignment_frames,
    alt_test_block,
    alt_test_labels,
    calibrated_task,
    calibrated_task_names,
    check_parameters,
    compare_judges,
    estimate_block,
    expert_count,
    human_agreement,
    metadata_fields,
    rule_of,
    run_alt_test,
    sample_field_values,
    score_versions,
)
from calibrate.datasets import split_samples
from calibrate.errors import CalibrationError, NotFound
from calibrate.judges.families import self_preference_warnings
from calibrate.judges.sandbox import DEFAULT_LIMITS, Limits
from calibrate.judges.versions import (
    FewShotSpec,
    diff_versions,
    example_ref,
    latest_version,
    prompts_scopes,
    save_version,
    stored_examples,
)
from calibrate.loop.disagreements import disagreement_detail, triage_counts
from calibrate.loop.testsplit import (
    DEFAULT_SPLIT,
    TEST_SPLIT,
    Says,
    dataset_splits,
    frozen_test_reason,
    opening_split,
    test_looks,
    unsplit_labelled,
    version_looks,
)
from calibrate.models import (
    Assignment,
    Dataset,
    Judge,
    JudgeRun,
    Label,
    Prompt,
    PromptVersion,
    Sample,
    Task,
    Triage,
    Verdict,
    utcnow,
)
from calibrate.reasons import Reason, join
from calibrate.reports.decisions import decision_text
from calibrate.reports.estimate_summary import section_estimate
from calibrate.reports.summary import ceiling, reason_text
from calibrate.targets import target_names
from calibrate.task_scopes import offered_on, offered_task_names


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
    decision_text: str = ""  # the decision in one sentence (reports.decisions.decision_text)
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
    # The system's mean from its verdicts and the labels on the split (the report's `estimate` block, worded by
    # reports.estimate_summary): shown beside κ, the naive judge number struck through with why.
    estimate: dict | None = None

    @property
    def own_differs(self) -> bool:
        """Whether its own figure (all its own targets) says something else than the common one, at 3 decimals."""
        if not self.own:
            return False
        text = [None if v is None else f"{v:.3f}" for v in (self.own.get("value"), self.value)]
        return self.own.get("n") != self.n or text[0] != text[1]


@dataclass
class Dashboard(Says):
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
    golden: dict | None = None  # the golden version the decisions were made on ({name, version, hash, …}), if any
    golden_sets: list[str] = field(default_factory=list)  # the dataset's golden sets (the filter offers them)
    message_reason: dict | None = None  # the message's reason (Reason.to_dict()): the page words it in the reader's language
    split_looks: int = 0  # versions ever scored on the split shown (testsplit.version_looks: what optimise adjusts for)
    unsplit_labelled: int = 0  # labelled samples (of the task) without a split, when the dataset has splits
    notice: str = ""  # shown above the rows when some labelled samples have no split (English; notice_reason words it)
    notice_reason: dict | None = None

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
    scopes = prompts_scopes(session)  # a prompt made for other datasets is not one of this dataset's judges
    for prompt, version in versions:
        if offered_on(scopes.get(prompt.id), dataset.name):
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


def _n_labelled(session: Session, dataset: Dataset, task: Task, split: str | None,
                samples: frozenset[int] | None = None) -> int:
    """Return the task's labelled targets (in `split`; among `samples`, a golden version's members, when given)."""
    if samples is not None:
        keys = (select(Label.target_key, Label.sample_id).join(Sample, Sample.id == Label.sample_id)
                .where(Sample.dataset_id == dataset.id, Label.task_id == task.id, Label.stale.is_(False)))
        if split:
            keys = keys.where(Sample.split == split)
        return len({key for key, sample_id in session.exec(keys.distinct()) if sample_id in samples})
    query = (select(func.count(func.distinct(Label.target_key))).join(Sample, Sample.id == Label.sample_id)
             .where(Sample.dataset_id == dataset.id, Label.task_id == task.id, Label.stale.is_(False)))
    if split:
        query = query.where(Sample.split == split)
    return int(session.exec(query).one())


def dashboard(session: Session, dataset_name: str, *, task: str = "claim_support", split: str | None = ...,
              options: Options | None = None, group_by: str | None = None, epsilon: float = DEFAULT_EPSILON) -> Dashboard:
    """Return every judge of `task` on the dataset with its alignment on `split` (None: every sample; left out: the
    split the page opens on, testsplit.opening_split), every judge scored on the targets common to all of them
    (calibration/common.py), with its own figure beside.

    `group_by` (metadata.FIELD) adds each group's value and CI to every row; `epsilon` is the
    alt-test's margin for the "could replace an expert?" column. Raises NotFound for an unknown
    dataset or task, CalibrationError for ε outside (0, 1) or an unknown group-by field; a split
    without labels or a dataset without judges gives a dashboard whose `message` says what is missing.
    """
    base = options or Options()
    dataset = lookup.dataset(session, dataset_name)
    task_row = calibrated_task(session, task)
    looks = test_looks(session, dataset, task_row)
    board = _board(session, dataset, task_row, base, split, group_by, epsilon)
    board.test_looks = sum(count for count, _ in looks.values())
    board.split_looks = version_looks(session, dataset, task_row, board.split) if board.split and board.split != TEST_SPLIT else 0
    gold_tasks = [task_row]
    if task_row.name in DERIVED_GOLD:  # a metric task's gold also comes from the claim or context labels
        gold_tasks.append(lookup.task(session, DERIVED_GOLD[task_row.name]))
    if not _has_labels(session, board, dataset, task_row, gold_tasks, base):
        return board
    opts = Options(**{**base.__dict__, "split": board.split, "group_by": None})
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
    rows = _RowMaker(session, board, dataset, task_row, opts, frames, scores, looks)
    board.rows = [rows.make(judge, prompt, version) for judge, prompt, version in judges]
    _name_budget_candidates(session, board)
    # The human–human ceiling: the annotators' agreement among themselves (no report), the report's figure.
    human_section = human_agreement(session, dataset.name, task_row.name, split=opts.split, options=opts)
    top = ceiling(human_section) if human_section else None
    if top is not None and top.value is not None:
        board.ceiling, board.ceiling_name = top.value, top.name
    if not board.rows:
        board.say(Reason("dashboard_no_judges", task=task_row.name, dataset=dataset.name))
    return board


def _board(session: Session, dataset: Dataset, task_row: Task, base: Options, split: str | None, group_by: str | None,
           epsilon: float) -> Dashboard:
    """Return the dashboard's frame: the dataset's splits and tasks, the options, what the page says of its input."""
    input_errors = []
    try:
        check_parameters(epsilon, DEFAULT_ALPHA, None, DEFAULT_MIN_ITEMS)
    except CalibrationError as exc:  # said on the page; the column uses the default
        input_errors.append(f"{exc}; the default {DEFAULT_EPSILON} is used")
        epsilon = DEFAULT_EPSILON
    splits = dataset_splits(session, dataset)
    board = Dashboard(dataset=dataset.name, task=task_row.name, split=opening_split(splits) if split is ... else split,
                      threshold=base.threshold, budget_half_width=base.budget_half_width, rule=rule_of(base.ci_lower),
                      group_by=group_by or None, epsilon=epsilon, splits=splits,
                      tasks=offered_task_names(session, dataset.name, calibrated_task_names(session)))
    board.group_fields = metadata_fields(session, dataset)
    board.input_errors = input_errors
    board.has_test = TEST_SPLIT in board.splits
    board.pairwise, board.order_rule = task_row.kind == "pairwise", base.order_rule
    board.golden = base.golden
    board.queue_mode = queue_mode(session, dataset)
    return board


def _has_labels(session: Session, board: Dashboard, dataset: Dataset, task_row: Task, gold_tasks: list[Task],
                base: Options) -> bool:
    """Return whether the split has labels to score judges on; if not, the board says why (the frozen test split, a
    split that does not exist, no labels) and has no rows."""
    split = board.split
    # `calibrate sample --split` splits only the samples it takes: labelled samples left without a split are in no
    # split's view, and "all samples" is refused when a test split exists. Said on the page, with how to split the rest.
    unsplit = None
    if board.splits:
        board.unsplit_labelled = unsplit_labelled(session, dataset, gold_tasks)
        if board.unsplit_labelled:
            unsplit = Reason("unsplit_labelled", count=board.unsplit_labelled, dataset=dataset.name)
    frozen = frozen_test_reason(dataset.name, split, board.splits)
    if frozen is not None:
        board.say(join([frozen, unsplit]) if split is None else frozen)
        return False
    if split and split not in board.splits:
        board.say(Reason("dashboard_no_split", dataset=dataset.name, split=split, splits=", ".join(board.splits))
                  if board.splits else Reason("dashboard_no_split_none", dataset=dataset.name, split=split))
        return False
    if unsplit is not None and split is not None:
        board.notice, board.notice_reason = unsplit.text(), unsplit.to_dict()
    board.n_labelled = sum(_n_labelled(session, dataset, t, split, base.sample_ids) for t in gold_tasks)
    if board.n_labelled == 0:
        board.say(Reason("dashboard_no_labels_split", task=task_row.name, split=split, dataset=dataset.name) if split
                  else Reason("dashboard_no_labels", task=task_row.name, dataset=dataset.name))
        return False
    return True


class _RowMaker:
    """Makes the dashboard's row of each judge from what the board read once (scores, frames, costs, triage, experts)."""

    def __init__(self, session: Session, board: Dashboard, dataset: Dataset, task_row: Task, opts: Options,
                 frames: AlignmentFrames, scores: VersionScores, looks: dict[int, tuple[int, Any]]) -> None:
        self.session, self.board, self.dataset, self.task_row, self.opts = session, board, dataset, task_row, opts
        self.frames, self.scores, self.looks = frames, scores, looks
        self.costs = _costs(session, dataset)
        self.triaged = triage_counts(session, dataset, task_row)
        in_split = split_samples(session, dataset, board.split) if board.split else None
        self.expert_labels = alt_test_labels(session, dataset, task_row, in_split)
        # fewer than 3 experts: the same undefined block for every row, said once (a judge's few-shots only remove labels)
        self.too_few = alt_test_block(task_row, self.expert_labels, None, set(), epsilon=board.epsilon) \
            if expert_count(self.expert_labels) < MIN_ANNOTATORS else None

    def make(self, judge: Judge | None, prompt: Prompt | None, version: PromptVersion | None) -> JudgeRow:
        """Return a judge's row: its alignment on the common targets and its own, decision, budget, alt-test, cost."""
        board, dataset, task_row, split = self.board, self.dataset, self.task_row, self.board.split
        row = JudgeRow(judge=judge.name if judge else f"{prompt.name}@{version.number}",
                       kind="prompt" if version is not None else judge.kind,
                       prompt=prompt.name if prompt else None, version=version.number if version else None)
        if judge is None:
            row.note = f"no run of this version on {dataset.name}"
            return row
        row.test_looks, row.test = self.looks.get(judge.id, (0, None))
        row.warnings = self_preference_warnings(self.session, dataset, judge)
        section = self.scores.common.get(judge.name)
        if section is None:
            row.note = f"no {task_row.name} verdicts of this judge on {dataset.name}" + (f" in split {split}" if split else "")
            return row
        row.ran = True
        row.triage = self.triaged.get(judge.id, {})
        self._alignment(row, section, self.scores.own.get(judge.name))
        row.alt_test = self.too_few or alt_test_block(task_row, self.expert_labels, self.frames.verdicts.get(judge.name),
                                                      self.frames.fewshot.get(judge.name, set()), epsilon=board.epsilon)
        row.position = self.frames.position.get(judge.name)
        row.estimate = section_estimate(estimate_block(self.session, dataset.name, task_row, judge.name, split=split,
                                                       confidence=self.opts.confidence, order_rule=self.opts.order_rule))
        row.cost = self.costs.get(judge.id, 0.0) if row.kind == "prompt" else None
        if row.value is None:
            est = section.get("cohen_kappa") or section.get("spearman_rho") or {}
            row.note = reason_text(est) or "alignment undefined on these targets"
        return row

    def _alignment(self, row: JudgeRow, section: dict[str, Any], own: dict[str, Any] | None) -> None:
        """Fill a row's alignment on the common targets: value, CI, counts, decision and its sentence, budget, disagreements."""
        alignment = section["alignment"]
        row.metric = alignment.get("metric") or ""
        row.value = alignment.get("value")
        ci = alignment.get("ci")
        row.ci = (ci[0], ci[1]) if ci and None not in ci else None
        row.own = own
        row.n, row.n_fewshot = int(section.get("n") or 0), int((own or {}).get("n_fewshot") or 0)
        row.n_unparsed, row.n_no_gold = int(section.get("n_unparsed") or 0), int((own or {}).get("n_no_gold") or 0)
        row.passed, row.decision, row.rule = section.get("passed"), section.get("decision"), section.get("rule") or self.board.rule
        row.labels_to_decide = section.get("labels_to_decide")
        row.decision_text = decision_text(row.decision or "undefined", row.rule, row.metric, row.value, row.ci,
                                          self.board.threshold, row.passed, row.labels_to_decide,
                                          note=reason_text(section.get(row.metric)))
        row.budget = section.get("budget")
        matrix = (section.get("confusion") or {}).get("matrix")
        if matrix:
            row.n_disagree = int(sum(map(sum, matrix)) - sum(matrix[i][i] for i in range(min(len(matrix), len(matrix[0])))))
        row.per_group = section.get("per_group") or []


def _name_budget_candidates(session: Session, board: Dashboard) -> None:
    """Give the budget's candidates as people read them ("demo-004 · claim 1"), in one query per kind."""
    wanted = [key for r in board.rows if r.budget for key in r.budget.get("candidates") or []]
    names = target_names(session, wanted) if wanted else {}
    for r in board.rows:
        if r.budget:
            r.budget_names = [names.get(key, key) for key in r.budget.get("candidates") or []]


def alt_test_on_split(session: Session, dataset_name: str, judge_name: str, *, task: str = "claim_support",
                      split: str | None = DEFAULT_SPLIT, **parameters) -> dict:
    """Return `alttest.run_alt_test` on one split for the alt-test page: the frozen test split, and every sample
    (which includes it), are refused as on the dashboard (CalibrationError), as are parameters out of range."""
    dataset = lookup.dataset(session, dataset_name)
    frozen = frozen_test_reason(dataset.name, split, dataset_splits(session, dataset))
    if frozen is not None:
        raise CalibrationError(frozen)
    return run_alt_test(session, dataset.name, task, judge_name, split=split, **parameters)


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
        specs.append(FewShotSpec(example_ref(session, row), row.rationale))
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
class JudgeComparison(Says):
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
    message_reason: dict | None = None  # the message's reason: the page words it in the reader's language


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
        why = Reason("compare_pick_two")
    elif judge_a == judge_b:
        why = Reason("compare_pick_different", judge=judge_a)
    elif not_run & {judge_a, judge_b}:
        why = join(Reason("compare_not_run", judge=name, dataset=dataset.name) for name in (judge_a, judge_b) if name in not_run)
    else:
        why = frozen_test_reason(dataset.name, split, page.splits)
    if why is not None:
        page.say(why)
        return page
    opts = Options(**{**(options or Options()).__dict__, "split": split, "group_by": None})
    try:
        page.result = compare_judges(session, dataset.name, judge_a, judge_b, task=task_row.name, options=opts)
    except (CalibrationError, NotFound) as exc:  # an unknown judge, nothing in common: said on the page
        page.say(exc.reason if exc.reason is not None else Reason("unexpected", message=str(exc)))  # every one has a code
    return page
