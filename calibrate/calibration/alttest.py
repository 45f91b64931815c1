"""The Alternative Annotator Test on calibrate's data: could the judge replace one of the experts?

`calibrate.stats.alttest.alt_test` is the test itself (Calderon, Reichart & Dror, ACL 2025;
docs/statistics.md §10). This module feeds it from the stored labels and verdicts, as
`calibrate alt-test`, the report's `alt_test` block and the dashboard's "could replace an
expert?" column all do:

- **annotators** are the individual experts' current labels of the task: not adjudications
  (an adjudicator decides the gold, they are not one more annotator), not stale labels. For
  faithfulness and context_precision, an expert's value of a sample is computed from their own
  claim or context labels where they gave no direct value (`rag.annotator_metric_labels`, as
  the report's human–human agreement does);
- **the judge's verdicts** are its usable ones (status ok, a value): an unusable verdict leaves
  its item without a judge, so the item is not kept;
- the judge's **few-shot examples** are left out (the judge has seen their gold);
- with a split, only the samples of that split;
- for a pairwise task, the judge's verdict of a target is the one its order rule makes of its
  presentation orders (pairwise.py; `consistent` by default), as in the report;
- **scoring** defaults to `accuracy` for categorical and pairwise tasks and `neg_rmse` for ordinal and
  continuous ones; labels are compared exactly as stored (a categorical task's declared labels,
  `not_applicable` included, are labels like any other).
"""

from __future__ import annotations

import math

import pandas as pd
from sqlmodel import Session

from calibrate import lookup
from calibrate.calibration.calibrated import calibrated_task
from calibrate.calibration.frames import fewshot_keys, labels_frame, verdicts_frame
from calibrate.calibration.pairwise import apply_order_rule
from calibrate.calibration.rag import DERIVED_GOLD, annotator_metric_labels
from calibrate.datasets import split_samples
from calibrate.errors import CalibrationError
from calibrate.judged import judging
from calibrate.models import Task
from calibrate.reasons import Reason
from calibrate.stats.alttest import MIN_ANNOTATORS, SCORINGS, AltTestResult, alt_test

__all__ = ["DEFAULT_ALPHA", "DEFAULT_EPSILON", "DEFAULT_MIN_ITEMS", "EPSILON_HELP", "MIN_ANNOTATORS", "alt_test_block",
           "alt_test_labels", "check_parameters", "default_scoring", "expert_count", "experts", "run_alt_test"]

DEFAULT_EPSILON = 0.2
DEFAULT_ALPHA = 0.05
DEFAULT_MIN_ITEMS = 30
EPSILON_HELP = ("the cost-benefit margin ε in (0, 1); the paper suggests 0.2 for experts (the default), 0.15 for "
                "skilled annotators and 0.1 for crowd workers")


def default_scoring(task: Task) -> str:
    """Return the scoring the test uses by default: accuracy for tasks with labels (categorical, pairwise), neg_rmse for scores."""
    return "accuracy" if judging(task).kind.labels else "neg_rmse"


def check_parameters(epsilon: float, alpha: float, scoring: str | None, min_items: int) -> None:
    """Raise CalibrationError (one line) unless ε and α lie in (0, 1), the scoring is known and min_items ≥ 1."""
    for name, value in (("epsilon", epsilon), ("alpha", alpha)):
        if not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 < value < 1:
            raise CalibrationError(Reason("epsilon_out_of_range" if name == "epsilon" else "alpha_out_of_range", value=value))
    if scoring is not None and scoring not in SCORINGS:
        raise CalibrationError(Reason("scoring_unknown", scorings=', '.join(SCORINGS), scoring=scoring))
    if isinstance(min_items, bool) or not isinstance(min_items, int) or min_items < 1:
        raise CalibrationError(Reason("min_items_invalid", min_items=min_items))


def _undefined(reason: Reason, *, epsilon: float, alpha: float, scoring: str) -> dict:
    return AltTestResult.undefined(reason, epsilon=epsilon, alpha=alpha, scoring=scoring).to_dict()


def experts(labels: pd.DataFrame) -> pd.DataFrame:
    """Return the labels that are an expert's own opinion: current (not stale), not adjudications."""
    return labels[~labels["stale"] & ~labels["adjudicated"]] if not labels.empty else labels


def expert_count(labels: pd.DataFrame) -> int:
    """Return how many annotators have a current label of their own in `labels`."""
    current = experts(labels)
    return int(current["annotator"].nunique()) if not current.empty else 0


def alt_test_block(task: Task, labels: pd.DataFrame, verdicts: pd.DataFrame | None, fewshot: set[str], *,
                   epsilon: float = DEFAULT_EPSILON, alpha: float = DEFAULT_ALPHA, scoring: str | None = None,
                   min_items: int = DEFAULT_MIN_ITEMS) -> dict:
    """Return the `alt_test` block of a task: `AltTestResult.to_dict()`, undefined (status, note) when it cannot run.

    `labels`: the task's label frame (frames.labels_frame, with annotator_metric_labels applied for a
    metric task); `verdicts`: the judge's verdicts frame. Never raises for data it cannot test:
    fewer than three annotators, no kept item, values neg_rmse cannot read are an undefined block.
    """
    scoring = scoring or default_scoring(task)
    current = experts(labels)
    if fewshot and not current.empty:
        current = current[~current["target_key"].isin(fewshot)]
    n_annotators = int(current["annotator"].nunique()) if not current.empty else 0
    if n_annotators < MIN_ANNOTATORS:  # said here, before reading 10^5 labels into the test
        return _undefined(Reason("alt_test_too_few_annotators", count=n_annotators, min=MIN_ANNOTATORS),
                          epsilon=epsilon, alpha=alpha, scoring=scoring)
    if verdicts is None or verdicts.empty:
        return _undefined(Reason("alt_test_no_verdicts"), epsilon=epsilon, alpha=alpha, scoring=scoring)
    usable = verdicts[(verdicts["status"] == "ok") & verdicts["value"].notna() & ~verdicts["target_key"].isin(fewshot)]
    human_values, judge_values = current["value"], usable["value"]
    if scoring == "neg_rmse":
        human_values = pd.to_numeric(human_values, errors="coerce")
        judge_values = pd.to_numeric(judge_values, errors="coerce")
        if human_values.isna().any() or judge_values.isna().any():
            return _undefined(Reason("neg_rmse_not_numeric", task=task.name, label=current["value"].iloc[0]), epsilon=epsilon, alpha=alpha, scoring=scoring)
    try:
        # the columns as they are: the report's categorical keys and labels go the test's integer-code way
        result = alt_test(current["target_key"], current["annotator"], human_values, usable["target_key"], judge_values,
                          epsilon=epsilon, alpha=alpha, scoring=scoring, min_items=min_items)
    except ValueError as exc:  # duplicates cannot occur (one current label per annotator and target); said, not raised
        return _undefined(Reason("unexpected", message=str(exc)), epsilon=epsilon, alpha=alpha, scoring=scoring)
    return result.to_dict()


def alt_test_labels(session: Session, dataset, task: Task, in_split: set[int] | None) -> pd.DataFrame:
    """Return the labels the test compares the judge with: the task's, in the split, each expert's metric values added."""
    labels = labels_frame(session, dataset, task)
    if in_split is not None:
        labels = labels[labels["sample_id"].isin(in_split)].reset_index(drop=True)
    if task.name in DERIVED_GOLD:
        labels = annotator_metric_labels(session, dataset, task, labels, in_split)
    return labels


def run_alt_test(session: Session, dataset_name: str, task_name: str, judge_name: str, *,
                 epsilon: float = DEFAULT_EPSILON, alpha: float = DEFAULT_ALPHA, scoring: str | None = None,
                 min_items: int = DEFAULT_MIN_ITEMS, split: str | None = None, order_rule: str = "consistent",
                 samples: frozenset[int] | None = None, golden: dict | None = None) -> dict:
    """Return what `calibrate alt-test` writes: the dataset, task, judge and split, then the test's keys.

    `samples` and `golden` (--golden NAME[@v]): only those samples, and the golden version cited as `golden`.

    Raises NotFound for an unknown dataset, task or judge, CalibrationError for a parameter out
    of range or a split without samples. An undefined result (fewer than three annotators, …) is
    returned with its status and note: the caller decides whether that is an error. A pairwise
    task's verdicts are read by `order_rule` (its result then says which).
    """
    check_parameters(epsilon, alpha, scoring, min_items)
    dataset = lookup.dataset(session, dataset_name)
    task = calibrated_task(session, task_name)
    judge = lookup.judge(session, judge_name)
    in_split = split_samples(session, dataset, split) if split else None
    if samples is not None:
        in_split = set(samples) if in_split is None else in_split & samples
    labels = alt_test_labels(session, dataset, task, in_split)
    verdicts = verdicts_frame(session, dataset, task, judge)
    if in_split is not None:
        verdicts = verdicts[verdicts["sample_id"].isin(in_split)].reset_index(drop=True)
    rule = {}
    if judging(task).kind.orders:  # one verdict per target, as the report scores it
        verdicts, _ = apply_order_rule(task, verdicts, order_rule)
        rule = {"order_rule": order_rule}
    block = alt_test_block(task, labels, verdicts, fewshot_keys(session, judge), epsilon=epsilon, alpha=alpha,
                           scoring=scoring, min_items=min_items)
    cited = {"golden": golden} if golden else {}
    return {"dataset": dataset.name, "task": task.name, "judge": judge.name, "split": split, **cited, **rule, **block}
