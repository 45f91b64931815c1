"""The frozen test split: a judge's score there is computed only on demand, after a confirmation, and every look
is recorded (`TestEvaluation`, with its three-state decision, rule and threshold).

The dashboard, the disagreement pages and the compare page refuse `?split=test` (and every
sample, which includes it): `frozen_test_reason`. "Evaluate on test…" first shows
`test_look_preview` (how many looks were made, what one costs), and only a confirmed request
calls `evaluate_on_test`. docs/loop.md describes the pages.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, union
from sqlmodel import Session, select

from calibrate import lookup
from calibrate.calibration import (
    Options,
    alignment_sections,
    calibrated_task,
    decide,
    labels_to_decide,
)
from calibrate.errors import CalibrationError
from calibrate.models import Dataset, Label, Sample, StaleVerdict, Task, TestEvaluation, Verdict
from calibrate.reasons import Reason
from calibrate.reports.decisions import decision_text


def dataset_splits(session: Session, dataset: Dataset) -> list[str]:
    """Return the dataset's splits in the order train, dev, test, then the others by name."""
    values = session.exec(select(Sample.split).where(Sample.dataset_id == dataset.id, Sample.split.is_not(None)).distinct()).all()
    order = {"train": 0, "dev": 1, "test": 2}
    return sorted(values, key=lambda s: (order.get(s, 3), s))


TEST_SPLIT = "test"
DEFAULT_SPLIT = "dev"  # the split docs/loop.md names as the default view, when the dataset has it (opening_split)


def opening_split(splits: list[str]) -> str | None:
    """Return the split the calibration pages open on when none is asked for (None: every sample).

    dev when the dataset has one (where engineers iterate; docs/loop.md); else every sample when
    it has no frozen test split (data imported without splits); else its first split other than
    test (None when test is its only one: every other sample is unsplit, and the page says so).
    """
    if "dev" in splits:
        return "dev"
    if TEST_SPLIT not in splits:
        return None
    others = [s for s in splits if s != TEST_SPLIT]
    return others[0] if others else None


def unsplit_labelled(session: Session, dataset: Dataset, tasks: list[Task]) -> int:
    """Return how many samples of the dataset without a split have a current label of one of `tasks` (those
    `calibrate sample --split` left out: no split's view shows them)."""
    query = (select(func.count(func.distinct(Label.sample_id))).join(Sample, Sample.id == Label.sample_id)
             .where(Sample.dataset_id == dataset.id, Sample.split.is_(None), Label.task_id.in_([t.id for t in tasks]),
                    Label.stale.is_(False)))
    return int(session.exec(query).one())


class Says:
    """A page's view-model that can say why it shows nothing: `message` in English, `message_reason` its code and
    figures (the page words it in the reader's language; each dataclass declares both fields)."""

    message: str
    message_reason: dict | None

    def say(self, reason: Reason) -> None:
        """Set the message from a reason."""
        self.message, self.message_reason = reason.text(), reason.to_dict()


def frozen_test_reason(dataset: str, split: str | None, splits: list[str]) -> Reason | None:
    """Return why a view may not show scores on `split` (None when it may)."""
    if TEST_SPLIT not in splits:
        return None
    if split == TEST_SPLIT:
        return Reason("test_split_frozen", dataset=dataset)
    if split is None:
        others = [s for s in splits if s != TEST_SPLIT]
        return Reason("all_samples_include_test", dataset=dataset, splits=", ".join(others) or "—")
    return None


def evaluate_on_test(session: Session, dataset_name: str, judge_name: str, *, task: str = "claim_support",
                     options: Options | None = None, user=None):
    """Compute a judge's alignment on the test split, record it with a timestamp (TestEvaluation), return the row.

    Raises CalibrationError when the dataset has no test split or the judge no verdicts there.
    """

    dataset = lookup.dataset(session, dataset_name)
    judge = lookup.judge(session, judge_name)
    task_row = calibrated_task(session, task)
    if TEST_SPLIT not in dataset_splits(session, dataset):
        splits = ", ".join(dataset_splits(session, dataset))
        raise CalibrationError(Reason("no_test_split", dataset=dataset.name, splits=splits) if splits
                               else Reason("no_test_split_none", dataset=dataset.name))
    opts = Options(**{**(options or Options()).__dict__, "split": TEST_SPLIT, "group_by": None})
    section = alignment_sections(session, dataset.name, task_row.name, [judge.name], options=opts)[judge.name]
    if section is None:
        raise CalibrationError(Reason("no_test_verdicts", judge=judge.name, task=task_row.name, dataset=dataset.name))
    alignment = section["alignment"]
    ci = alignment.get("ci") or (None, None)
    row = TestEvaluation(dataset_id=dataset.id, judge_id=judge.id, task_id=task_row.id, metric=alignment.get("metric") or "",
                         value=alignment.get("value"), ci_low=ci[0], ci_high=ci[1], n=int(section.get("n") or 0),
                         passed=section.get("passed"), decision=section.get("decision"), rule=section.get("rule"),
                         threshold=opts.threshold, user_id=user.id if user is not None else None)
    session.add(row)
    session.flush()
    return row


def look_text(row: TestEvaluation) -> str:
    """Return a recorded look at the test split in words, with its three-state decision (reports.decisions.decision_text).

    Looks recorded before the decision was kept (revision 0004) say passed or not passed only.
    """
    ci = (row.ci_low, row.ci_high) if row.ci_low is not None and row.ci_high is not None else None
    if row.decision is None or row.threshold is None:
        value = "undefined" if row.value is None else f"{row.value:.3f}"
        return f"{row.metric} {value}, {'passed' if row.passed else 'not passed' if row.passed is False else 'no decision'}"
    decided = decide(row.value, ci, row.threshold, rule=row.rule or "point")
    to_decide = labels_to_decide(decided, row.n, row.value, ci, row.threshold)
    return decision_text(row.decision, row.rule or "point", row.metric, row.value, ci, row.threshold, row.passed, to_decide)


@dataclass
class TestLookPreview(Says):
    """What the confirmation before a look at the test split says: how many looks were made, and what one costs."""

    __test__ = False  # not a pytest class
    dataset: str
    judge: str
    task: str
    judge_looks: int  # this judge's looks at the test split of this dataset and task
    all_looks: int  # every judge's
    n_test_samples: int
    last: TestEvaluation | None
    has_verdicts: bool
    message: str = ""  # why the look cannot be made (no test split, no verdicts there)
    message_reason: dict | None = None  # the message's reason: the page words it in the reader's language


def test_look_preview(session: Session, dataset_name: str, judge_name: str, *, task: str = "claim_support") -> TestLookPreview:
    """Return what to say before a look at the test split is recorded (nothing is computed or recorded here)."""
    dataset = lookup.dataset(session, dataset_name)
    judge = lookup.judge(session, judge_name)
    task_row = calibrated_task(session, task)
    looks = test_looks(session, dataset, task_row)
    mine, last = looks.get(judge.id, (0, None))
    n_test = int(session.exec(select(func.count()).select_from(Sample)
                              .where(Sample.dataset_id == dataset.id, Sample.split == TEST_SPLIT)).one())
    has = session.exec(select(Verdict.id).join(Sample, Sample.id == Verdict.sample_id)
                       .where(Verdict.judge_id == judge.id, Verdict.task_id == task_row.id, Sample.dataset_id == dataset.id,
                              Sample.split == TEST_SPLIT).limit(1)).first() is not None
    preview = TestLookPreview(dataset.name, judge.name, task_row.name, mine, sum(c for c, _ in looks.values()), n_test, last, has)
    if n_test == 0:
        splits = ", ".join(dataset_splits(session, dataset))
        preview.say(Reason("no_test_split", dataset=dataset.name, splits=splits) if splits
                    else Reason("no_test_split_none", dataset=dataset.name))
    elif not has:
        preview.say(Reason("no_test_verdicts", judge=judge.name, task=task_row.name, dataset=dataset.name))
    return preview


test_look_preview.__test__ = False  # not a pytest test


def version_looks(session: Session, dataset: Dataset, task: Task, split: str) -> int:
    """Return how many versions (judges) were ever scored on `split` for `task`: those with a verdict of the task on a
    sample of the split, current or set aside as stale (an `--update` that changed the sample moves its verdicts to
    `staleverdict`, but the judge was looked at all the same). The dashboard scores every judge with verdicts, so each
    of them has been looked at there; nothing deletes either, so the count never goes down. `calibrate optimise`
    adjusts its lower bounds for it."""
    def judges(table):
        return (select(table.judge_id).join(Sample, Sample.id == table.sample_id)
                .where(Sample.dataset_id == dataset.id, Sample.split == split, table.task_id == task.id))

    scored = union(judges(Verdict), judges(StaleVerdict)).subquery()  # UNION: each judge once
    return int(session.exec(select(func.count()).select_from(scored)).one())


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
