"""The calibration loop of a prompt engineer: the dashboard of every judge of a dataset and task.

`dashboard` puts every judge on one page — each version of the task's prompts (run or not) and
every imported judge with verdicts on the dataset — with its alignment and CI, n, the excluded
counts, pass/fail against the threshold and the cost of its runs, on one split (dev by default:
the split engineers iterate on; test stays frozen). Each row is the task section of the same
`build_report` the reports use, so the dashboard never disagrees with `calibrate report --split`.

Bad input gives a `message` saying what is missing instead of an empty chart: an unknown
split, a split with no labels for the task, no judge at all; a version without any run on the
dataset is a row with a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import func
from sqlmodel import Session, select

from calibrate import lookup
from calibrate.annotation.queue import set_status
from calibrate.annotation.uncertainty import queue_mode
from calibrate.calibration.compare import compare_judges
from calibrate.calibration.gold import (
    human_gold,
)
from calibrate.calibration.options import Options
from calibrate.calibration.rag import (
    DERIVED_GOLD,
)
from calibrate.calibration.report import (
    alignment_sections,
    build_report,
)
from calibrate.errors import CalibrationError, NotFound
from calibrate.judges.families import (
    self_preference_warnings,
)
from calibrate.judges.versions import (
    FewShotSpec,
    diff_versions,
    latest_version,
    save_version,
    stored_examples,
)
from calibrate.models import (
    EXTRACTION,
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
    TestEvaluation,
    Triage,
    User,
    Verdict,
    utcnow,
)
from calibrate.reports.summary import ceiling

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
    cost: float | None = None
    note: str = ""
    ran: bool = False  # the judge has verdicts for the task on the split
    triage: dict[str, int] = field(default_factory=dict)  # triage kind → disagreements so triaged
    test_looks: int = 0  # times its test score was computed ("evaluate on test")
    budget: dict | None = None  # the label budget for the board's CI half-width (calibration.label_budget)
    warnings: list[dict] = field(default_factory=list)  # self-preference (calibration.self_preference_warnings)
    test: object | None = None  # the latest TestEvaluation


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


def calibrated_task_names(session: Session) -> list[str]:
    """Return the names of the tasks a judge is calibrated on (every task but the extraction)."""
    return list(session.exec(select(Task.name).where(Task.kind != EXTRACTION).order_by(Task.id)).all())


def calibrated_task(session: Session, name: str) -> Task:
    """Return a task by name (NotFound), refusing claim_extraction: it has no agreement statistics."""
    task = lookup.task(session, name)
    if task.kind == EXTRACTION:
        raise CalibrationError(f"task {task.name} extracts claims and is not calibrated against labels: its quality is "
                               "how many claims experts changed (the dataset page)")
    return task


def _splits(session: Session, dataset: Dataset) -> list[str]:
    values = session.exec(select(Sample.split).where(Sample.dataset_id == dataset.id, Sample.split.is_not(None)).distinct()).all()
    order = {"train": 0, "dev": 1, "test": 2}
    return sorted(values, key=lambda s: (order.get(s, 3), s))


def _n_labelled(session: Session, dataset: Dataset, task: Task, split: str | None) -> int:
    query = (select(func.count(func.distinct(Label.target_key))).join(Sample, Sample.id == Label.sample_id)
             .where(Sample.dataset_id == dataset.id, Label.task_id == task.id, Label.stale.is_(False)))
    if split:
        query = query.where(Sample.split == split)
    return int(session.exec(query).one())


def dashboard(session: Session, dataset_name: str, *, task: str = "claim_support", split: str | None = DEFAULT_SPLIT,
              options: Options | None = None) -> Dashboard:
    """Return every judge of `task` on the dataset with its alignment on `split` (None: every sample).

    Raises NotFound for an unknown dataset or task; a split without labels or a
    dataset without judges gives a dashboard whose `message` says what is missing.
    """
    base = options or Options()
    dataset = lookup.dataset(session, dataset_name)
    task_row = calibrated_task(session, task)
    board = Dashboard(dataset=dataset.name, task=task_row.name, split=split, threshold=base.threshold,
                      budget_half_width=base.budget_half_width,
                      splits=_splits(session, dataset),
                      tasks=calibrated_task_names(session))
    board.has_test = TEST_SPLIT in board.splits
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
    sections = alignment_sections(session, dataset.name, task_row.name, [j.name for j, _, _ in judges if j is not None], options=opts)
    for judge, prompt, version in judges:
        row = JudgeRow(judge=judge.name if judge else f"{prompt.name}@{version.number}",
                       kind="prompt" if version is not None else judge.kind,
                       prompt=prompt.name if prompt else None, version=version.number if version else None)
        board.rows.append(row)
        section = sections.get(judge.name) if judge is not None else None
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
        row.n, row.n_fewshot = int(section.get("n") or 0), int(section.get("n_fewshot") or 0)
        row.n_unparsed, row.n_no_gold = int(section.get("n_unparsed") or 0), int(section.get("n_no_gold") or 0)
        row.passed = section.get("passed")
        row.budget = section.get("budget")
        row.cost = costs.get(judge.id, 0.0) if row.kind == "prompt" else None
        if row.value is None:
            est = section.get("cohen_kappa") or section.get("spearman_rho") or {}
            row.note = est.get("note") or "alignment undefined on these targets"
    # The human–human ceiling: the human-only section (no bootstrap needed for it).
    human_opts = Options(**{**opts.__dict__, "bootstrap": 100})
    human_section = build_report(session, dataset.name, None, options=human_opts, tasks=[task_row.name]).data["tasks"].get(task_row.name)
    top = ceiling(human_section) if human_section else None
    if top is not None and top.value is not None:
        board.ceiling, board.ceiling_name = top.value, top.name
    if not board.rows:
        board.message = (f"no judge has {task_row.name} verdicts on {dataset.name} yet: create a prompt version and run it, "
                         f"or import a judge's verdicts")
    return board


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


def disagreements(session: Session, dataset_name: str, judge_name: str, *, task: str = "claim_support",
                  split: str | None = DEFAULT_SPLIT, pair: str | None = None, agreement: str | None = None,
                  meta: str | None = None) -> DisagreementList:
    """Return the scored targets where the judge and the human gold differ, filtered.

    `pair` is `GOLD→JUDGE` (or `GOLD->JUDGE`); `agreement` is `unanimous` (every annotator gave
    the same label) or `split`; `meta` is `FIELD=VALUE` on the sample's metadata. Few-shot
    examples of the judge's version, unparsed verdicts and targets without gold are not listed
    (they are not scored). Raises NotFound for an unknown dataset, judge or task, CalibrationError for a split or
    a malformed filter.
    """
    calibrated_task(session, task)
    dataset_row = lookup.dataset(session, dataset_name)
    frozen = frozen_test_message(dataset_row.name, split, _splits(session, dataset_row))
    if frozen:
        return DisagreementList(dataset=dataset_name, judge=judge_name, task=task, split=split, items=[], total=0, pairs=[],
                                message=frozen)
    if agreement not in (None, "", "unanimous", "split"):
        raise CalibrationError(f"agreement must be unanimous or split, not {agreement!r}")
    report = build_report(session, dataset_name, judge_name, options=Options(bootstrap=100, split=split), tasks=[task])
    section = report.data["tasks"].get(task)
    out = DisagreementList(dataset=dataset_name, judge=judge_name, task=task, split=split, items=[], total=0, pairs=[])
    if section is None or "judge_note" in section:
        out.message = f"judge {judge_name} has no {task} verdicts on {dataset_name}" + (f" in split {split}" if split else "")
        return out
    items = [Disagreement(r.target, r.sample_id, r.claim if r.claim is not None else r.context, str(r.gold), str(r.judge), r.humans)
             for r in report.rows[task] if r.agree is False]

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
            raise CalibrationError(f"metadata filter must be FIELD=VALUE, not {meta!r}")
        dataset = lookup.dataset(session, dataset_name)
        rows = session.exec(select(Sample.external_id, Sample.meta).where(Sample.dataset_id == dataset.id)).all()
        keep = {ext for ext, m in rows if isinstance(m, dict) and str(m.get(key.strip())) == value.strip()}
        items = [d for d in items if d.sample in keep]
    out.items = items
    return out


@dataclass
class HumanLabel:
    annotator: str
    value: str
    rationale: str
    adjudicated: bool


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


def disagreement_detail(session: Session, dataset_name: str, judge_name: str, target: str,
                        *, task: str = "claim_support") -> DisagreementDetail:
    """Return one target of a dataset with its human labels, the gold and the judge's verdict."""

    dataset = lookup.dataset(session, dataset_name)
    judge = lookup.judge(session, judge_name)
    task_row = calibrated_task(session, task)
    kind, _, raw_id = target.partition(":")
    if kind != task_row.target or not raw_id.isdigit():
        raise CalibrationError(f"{target!r} is not a {task_row.target} target of task {task_row.name}")
    position, text, sample = None, "", None
    if kind == "claim":
        claim = session.get(Claim, int(raw_id))
        sample = session.get(Sample, claim.sample_id) if claim else None
        position, text = (claim.index, claim.text) if claim else (None, "")
    elif kind == "context":
        context = session.get(Context, int(raw_id))
        sample = session.get(Sample, context.sample_id) if context else None
        position, text = (context.rank, context.text) if context else (None, "")
    else:
        sample = session.get(Sample, int(raw_id))
        text = sample.answer if sample else ""
    if sample is None or sample.dataset_id != dataset.id:
        raise CalibrationError(f"no target {target} in dataset {dataset.name}")
    labels = [HumanLabel(username, label.value, label.rationale, label.adjudicated) for label, username in session.exec(
        select(Label, User.username).join(User, User.id == Label.annotator_id)
        .where(Label.task_id == task_row.id, Label.target_key == target, Label.stale.is_(False)).order_by(Label.adjudicated, User.username)
    ).all()]
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
    return DisagreementDetail(dataset.name, judge, task_row, target, sample, text, position, labels, gold, rationale,
                              verdict, prompt, refusal, triage_of(session, judge, task_row).get(target, ""))


def add_fewshot(session: Session, dataset_name: str, judge_name: str, target: str, rationale: str, *,
                task: str = "claim_support", author=None):
    """Create the next version of the judge's prompt with `target` (its gold label, `rationale`) appended
    to the latest version's few-shot examples; return the judges module's SaveResult.

    Raises CalibrationError when the judge is imported, and the judges module's PromptError when the
    target cannot be an example (test split, no gold, already an example).
    """

    detail = disagreement_detail(session, dataset_name, judge_name, target, task=task)
    if detail.prompt is None:
        raise CalibrationError(detail.fewshot_refusal)
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
    return save_version(session, prompt.name, few_shots=specs, dataset=detail.dataset, note=note, author=author)


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
        raise CalibrationError(f"triage must be one of {', '.join(TRIAGE_KINDS)}, not {kind!r}")
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


# --------------------------------------------------------------------------- the frozen test split

TEST_SPLIT = "test"


def frozen_test_message(dataset: str, split: str | None, splits: list[str]) -> str:
    """Return why a view may not show scores on `split` (empty when it may)."""
    if TEST_SPLIT not in splits:
        return ""
    if split == TEST_SPLIT:
        return (f"the test split of {dataset} is frozen: its scores are computed only on demand, one judge at a time, "
                f"with \u201cEvaluate on test\u201d (each look is recorded)")
    if split is None:
        return f"all samples of {dataset} include the frozen test split: choose train or dev"
    return ""


def evaluate_on_test(session: Session, dataset_name: str, judge_name: str, *, task: str = "claim_support",
                     options: Options | None = None, user=None):
    """Compute a judge's alignment on the test split, record it with a timestamp (TestEvaluation), return the row.

    Raises CalibrationError when the dataset has no test split or the judge no verdicts there.
    """

    dataset = lookup.dataset(session, dataset_name)
    judge = lookup.judge(session, judge_name)
    task_row = calibrated_task(session, task)
    if TEST_SPLIT not in _splits(session, dataset):
        raise CalibrationError(f"{dataset.name} has no test split (splits: {', '.join(_splits(session, dataset)) or 'none'})")
    opts = Options(**{**(options or Options()).__dict__, "split": TEST_SPLIT, "group_by": None})
    section = alignment_sections(session, dataset.name, task_row.name, [judge.name], options=opts)[judge.name]
    if section is None:
        raise CalibrationError(f"judge {judge.name} has no {task_row.name} verdicts in the test split of {dataset.name}: run it there first")
    alignment = section["alignment"]
    ci = alignment.get("ci") or (None, None)
    row = TestEvaluation(dataset_id=dataset.id, judge_id=judge.id, task_id=task_row.id, metric=alignment.get("metric") or "",
                         value=alignment.get("value"), ci_low=ci[0], ci_high=ci[1], n=int(section.get("n") or 0),
                         passed=section.get("passed"), user_id=user.id if user is not None else None)
    session.add(row)
    session.flush()
    return row


def test_looks(session: Session, dataset: Dataset, task: Task) -> dict[int, tuple[int, object]]:
    """Return judge id → (times its test score was computed, the latest TestEvaluation)."""

    out: dict[int, tuple[int, object]] = {}
    rows = session.exec(select(TestEvaluation).where(TestEvaluation.dataset_id == dataset.id, TestEvaluation.task_id == task.id)
                        .order_by(TestEvaluation.id)).all()
    for row in rows:
        count = out.get(row.judge_id, (0, None))[0]
        out[row.judge_id] = (count + 1, row)
    return out


test_looks.__test__ = False  # not a pytest test


# --------------------------------------------------------------------------- the report's versions section


def versions_section(session: Session, dataset_name: str, judge_name: str, *, options: Options | None = None) -> dict | None:
    """Return the `versions` section of a prompt-version judge's report: every version of its prompt with its
    alignment and CI on the report's split, what changed from the version before, and `compare_judges` of the
    latest two versions that ran, on the same split. None for an imported judge."""

    options = options or Options()
    judge = lookup.judge(session, judge_name)
    if judge.prompt_version_id is None:
        return None
    prompt = session.get(Prompt, session.get(PromptVersion, judge.prompt_version_id).prompt_id)
    task = session.get(Task, prompt.task_id)
    versions = session.exec(select(PromptVersion).where(PromptVersion.prompt_id == prompt.id).order_by(PromptVersion.number)).all()
    judges = {j.prompt_version_id: j for j in session.exec(
        select(Judge).where(Judge.prompt_version_id.in_([v.id for v in versions]))).all()}
    sections = alignment_sections(session, dataset_name, task.name, [judges[v.id].name for v in versions if v.id in judges],
                                  options=Options(**{**options.__dict__, "group_by": None}))
    rows, previous = [], None
    for version in versions:
        judge_row = judges.get(version.id)
        section = sections.get(judge_row.name) if judge_row else None
        alignment = (section or {}).get("alignment") or {}
        rows.append({
            "judge": f"{prompt.name}@{version.number}", "number": version.number, "note": version.note,
            "changed": diff_versions(session, prompt, previous, version).changed if previous else [],
            "value": alignment.get("value"), "ci": alignment.get("ci"), "n": (section or {}).get("n"),
            "n_fewshot": (section or {}).get("n_fewshot"), "passed": (section or {}).get("passed"),
            "status": "ok" if section else "no verdicts on this dataset" + (f" in split {options.split}" if options.split else ""),
        })
        previous = version
    out: dict = {"prompt": prompt.name, "task": task.name, "versions": rows, "comparison": None}
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
                                                   "mcnemar", "ttest", "wilcoxon")}
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
                           tasks=calibrated_task_names(session), splits=_splits(session, dataset))
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
