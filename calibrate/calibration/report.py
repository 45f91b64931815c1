"""Build the Report: labels and a judge's verdicts → gold, exclusions, arrays → statistics.

One function, `build_report`, makes the `Report` that every output renders (JSON, HTML,
Markdown, CSV, the web dashboard and `calibrate gate`), so they never disagree.

Per task and target:

- **Human gold**: gold.py's rule (docs/statistics.md). Stale labels (their claim
  or context changed after labelling) are left out.
- **Excluded and counted**: targets whose verdict has no usable value (`n_unparsed`), targets
  with a verdict but no gold (`n_no_gold`, ties included), targets whose gold is a label the
  task excludes from statistics such as `not_applicable` (`n_excluded_label`), and targets
  used as few-shot examples of the judged prompt version (`n_fewshot`).
- **Scored as misses, counted**: the judge's abstentions, a verdict outside the statistics'
  labels (its `not_applicable`) on a target whose gold is checkable (`n_abstained`).
- **Uncertainty**: a bootstrap that resamples samples (answers), not claims, because the
  claims of one answer are not independent.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import select as sa_select
from sqlmodel import Session, select

from calibrate import __version__, lookup
from calibrate.calibration.alttest import alt_test_block
from calibrate.calibration.budget import cap_to_dataset, targets_in_dataset
from calibrate.calibration.consistency import self_consistency_block
from calibrate.calibration.decision import overall as overall_decision
from calibrate.calibration.decision import rule_of
from calibrate.calibration.estimate import estimate_block
from calibrate.calibration.frames import (
    IdIndex,
    coded_frames,
    external_ids,
    fewshot_keys,
    frame_columns,
    has_rows,
    join_target,
    labels_frame,
    part_totals,
    sample_field_values,
    target_positions,
    verdict_columns,
)
from calibrate.calibration.localisation import localisation_block
from calibrate.calibration.options import Options
from calibrate.calibration.pairwise import (
    apply_order_rule,
    first_shown,
    human_first_position,
    position_section,
    position_summary,
    split_orders,
)
from calibrate.calibration.rag import (
    DERIVED_GOLD,
    annotator_metric_labels,
    context_precision_section,
    faithfulness_section,
    gold_relevance,
    gold_rows,
    metric_scores,
    missing_gold_note,
    task_gold,
)
from calibrate.calibration.raters import judge_as_rater
from calibrate.calibration.retrieval import (
    retrieval_section,
)
from calibrate.calibration.sections import (
    categorical_section,
    human_block,
    numeric_section,
    score_agrees,
    score_tolerance,
)
from calibrate.claimsets import expert_changes, source_counts
from calibrate.datasets import split_samples
from calibrate.db import read_frame
from calibrate.errors import CalibrationError
from calibrate.gold import GOLD_RULE
from calibrate.judged import CATEGORICAL_SECTION, PAIRWISE_SECTION, judging
from calibrate.judges.families import (
    self_preference_warnings,
)
from calibrate.models import (
    Claim,
    Dataset,
    Judge,
    Sample,
    Task,
    Verdict,
)
from calibrate.reasons import Reason, noted


@dataclass
class ItemRow:
    """One target of one task: what each annotator said, the gold, the judge, and whether they agree."""

    task: str
    target: str
    sample_id: str
    claim: int | None
    context: int | None
    humans: dict[str, str]
    gold: str | None
    gold_source: str
    judge: str | None
    judge_status: str
    agree: bool | None
    excluded: str = ""
    group: str | None = None
    step: int | None = None


@dataclass
class Report:
    """Everything a calibration report says; `data` has exactly the JSON shape of docs/report.md.

    `rows` (one `ItemRow` per target, for the CSV and the item views) is built on first use:
    the JSON report and the gate never pay for it.
    """

    data: dict[str, Any]
    adjudication: dict[str, list[str]] = field(default_factory=dict)
    row_builders: dict[str, Any] = field(default_factory=dict, repr=False)
    _rows: dict[str, list[ItemRow]] | None = field(default=None, repr=False)

    @property
    def rows(self) -> dict[str, list[ItemRow]]:
        """Return the per-target rows of every task."""
        if self._rows is None:
            self._rows = {name: build() for name, build in self.row_builders.items()}
        return self._rows

    @property
    def passed(self) -> bool | None:
        return self.data.get("passed")


def build_report(session: Session, dataset_name: str, judge_name: str | None = None, *,
                 options: Options | None = None, tasks: list[str] | None = None) -> Report:
    """Build the calibration report of a judge (or, without one, the human-only parts) on a dataset."""
    options = options or Options()
    dataset = lookup.dataset(session, dataset_name)
    judge = lookup.judge(session, judge_name) if judge_name else None
    scope = _Scope(session, dataset, judge, options, asked=tasks or [],
                   groups=sample_field_values(session, dataset, options.group_by) if options.group_by else None,
                   fewshot=fewshot_keys(session, judge), external=external_ids(session, dataset),
                   in_split=options.restrict(split_samples(session, dataset, options.split) if options.split else None))
    report = Report(data=_header(scope))
    data = report.data
    relevance = None
    for task in _report_tasks(session, tasks):
        frames = _task_frames(scope, task)
        if frames is None:
            continue  # a task with no data in this dataset gets no section
        section, merged, scored = _task_section(scope, task, frames)
        if judging(task).kind.orders:
            data["method"]["order_rule"] = options.order_rule
        _judge_blocks(scope, task, frames, section, scored)
        if judging(task).target.sequence and frames.verdicts is not None and not scope.light:
            # a step task: does the judge find where each trajectory first goes wrong? (localisation.py)
            block = localisation_block(task, merged, target_positions(frames.labels, frames.verdicts), options)
            if block is not None:
                section["localisation"] = block
        _counts(scope, task, frames, section)
        data["tasks"][task.name] = section
        report.row_builders[task.name] = functools.partial(_item_rows, task, frames.labels, frames.verdicts, merged,
                                                           scope.external, scope.groups)
        report.adjudication[task.name] = sorted(merged.loc[merged.get("gold_source") == "tie", "target_key"].tolist()) \
            if "gold_source" in merged else []
        found = None if scope.light else _rag_blocks(scope, task, frames, merged, data["rag"], section)
        relevance = found if found is not None else relevance
    judged = [s for s in data["tasks"].values() if "alignment" in s]
    if judge is not None:
        data["passed"] = all(s.get("passed") is True for s in judged) if judged else False
        data["decision"] = overall_decision(judged)
    if scope.light:
        data["method"]["decision_only"] = True
        return report
    _dataset_blocks(scope, data, relevance)
    return report


@dataclass
class _Scope:
    """What every section of one report is computed on: the dataset, the judge, the options and the samples."""

    session: Session
    dataset: Dataset
    judge: Judge | None
    options: Options
    asked: list[str]  # the tasks asked for by name (none: every task with data)
    groups: dict[int, str | None] | None  # sample id → its group (--group-by)
    fewshot: set[str]
    external: dict[int, str]
    in_split: set[int] | None

    @property
    def light(self) -> bool:
        """The gate's report: what a decision needs, nothing else (Options.decision_only)."""
        return self.options.decision_only


@dataclass
class _Frames:
    """A task's labels and verdicts within the report's samples."""

    labels: pd.DataFrame  # the labels its statistics use (a metric task: the experts' metric values too)
    direct: pd.DataFrame  # the task's own labels
    verdicts: pd.DataFrame | None  # None: no judge, or the judge did not judge this task
    unjudged: bool  # a judge that has no verdicts of this task
    # The task's gold per target (rag.task_gold of `direct`), computed once: the section, the position block and the
    # estimate all use it.
    gold: pd.DataFrame

    totals: dict[type, pd.Series] = field(default_factory=dict, repr=False)

    def parts_per_sample(self, scope: _Scope, row: type) -> pd.Series:
        """Return the active parts per sample of a part table, read once per task (the estimate's answers and
        faithfulness divide by the same counts)."""
        if row not in self.totals:
            self.totals[row] = part_totals(scope.session, scope.dataset, row)
        return self.totals[row]

    @functools.cached_property
    def samples(self) -> set[int]:
        """The samples the task's own labels and the verdicts are on (the section's and faithfulness's claim sources)."""
        return _samples_of(self.direct, self.verdicts)


def _report_tasks(session: Session, names: list[str] | None) -> list[Task]:
    """Return the tasks to report on: those named, else every task (an extraction task makes claims: never calibrated)."""
    tasks = [t for t in session.exec(select(Task).order_by(Task.id)).all() if not judging(t).kind.extraction]
    if not names:
        return tasks
    known = {t.name: t for t in tasks}
    unknown = [t for t in names if t not in known]
    if unknown:
        raise CalibrationError(lookup.not_found("task", unknown[0], list(known)).reason)
    return [known[t] for t in names]


def _header(scope: _Scope) -> dict[str, Any]:
    """Return the report's top-level keys before its sections, in the order docs/report.md lists them."""
    options, dataset, judge = scope.options, scope.dataset, scope.judge
    data: dict[str, Any] = {
        "dataset": dataset.name,
        "judge": judge.name if judge else None,
        "threshold": options.threshold,
        "ci_lower": options.ci_lower,
        "passed": None,
        "decision": None,
        "rule": rule_of(options.ci_lower),
        "tasks": {},
        "rag": {},
        "method": {
            "bootstrap": {"n_resamples": options.bootstrap, "confidence": options.confidence, "seed": options.seed,
                          "method": options.ci_method, "resampled_unit": "sample"},
            "gold": GOLD_RULE,
            "alignment": {"categorical": "cohen_kappa", "pairwise": "cohen_kappa", "ordinal": "spearman_rho",
                          "continuous": "spearman_rho"},
        },
        "generated_at": datetime.now(UTC).replace(microsecond=0).isoformat(),
        "calibrate_version": __version__,
        "provenance": {"source": dataset.source, "description": dataset.description, "is_demo": dataset.is_demo,
                       "n_samples": len(scope.external), "judge_kind": judge.kind if judge else None},
    }
    if options.split:
        data["provenance"]["split"] = options.split  # the judge and human statistics cover this split only
    if options.golden is not None:
        data["golden"] = options.golden  # every decision below was made on this golden version's members
    return data


def _task_frames(scope: _Scope, task: Task) -> _Frames | None:
    """Return a task's labels and verdicts on the report's samples; None when it has neither."""
    session, dataset, in_split = scope.session, scope.dataset, scope.in_split
    metric = task.name in DERIVED_GOLD  # its experts' metric comes from another task's labels (rag.py)
    if not (metric and task.name in scope.asked) and not has_rows(session, dataset, task, scope.judge):
        return None  # nothing to report: one query, no read
    labels, verdicts = coded_frames(session, dataset, task, scope.judge)  # integer codes under the text keys (frames.py)
    if in_split is not None:
        labels = labels[labels["sample_id"].isin(in_split)].reset_index(drop=True)
        if verdicts is not None:
            verdicts = verdicts[verdicts["sample_id"].isin(in_split)].reset_index(drop=True)
    direct = labels
    if metric and (task.name in scope.asked or (verdicts is not None and not verdicts.empty)):
        # asked for, or judged: compare the experts on the metric too (each from their own labels)
        labels = annotator_metric_labels(session, dataset, task, labels, in_split)
    if labels.empty and (verdicts is None or verdicts.empty):
        return None
    unjudged = verdicts is not None and verdicts.empty
    # the judge did not judge this task: a human-only section, not a failure
    gold = task_gold(session, dataset, task, direct, in_split)
    return _Frames(labels, direct, None if unjudged else verdicts, unjudged, gold)


def _task_section(scope: _Scope, task: Task, frames: _Frames) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame | None]:
    """Return a task's section by its kind, the merged per-target frame, and the verdicts scored (one per target)."""
    options, labels, verdicts = scope.options, frames.labels, frames.verdicts
    gold = frames.gold
    section_kind = judging(task).kind.section  # the registered kind's builder (calibrate/judged.py)
    if section_kind == PAIRWISE_SECTION:
        return _pairwise_section(scope.session, scope.dataset, task, labels, verdicts, scope.fewshot, scope.groups, options,
                                 gold)
    if section_kind == CATEGORICAL_SECTION:
        section, merged = categorical_section(task, labels, verdicts, scope.fewshot, scope.groups, options, gold=gold,
                                              light=scope.light)
        return section, merged, verdicts
    section, merged = numeric_section(task, labels, verdicts, scope.fewshot, scope.groups, options, gold=gold,
                                      light=scope.light)
    if gold.empty and verdicts is not None:
        missing = missing_gold_note(task)
        section["gold_note"], section["gold_reason"] = missing.text(), missing.to_dict()
        section["spearman_rho"].update(noted(missing))
    return section, merged, verdicts


def _judge_blocks(scope: _Scope, task: Task, frames: _Frames, section: dict[str, Any], scored: pd.DataFrame | None) -> None:
    """Add what a judge's verdicts tell beyond the alignment: the alt-test, the judge as a rater, self-consistency, the
    estimate; or why there is none (the judge has no verdicts of the task)."""
    session, dataset, judge, options = scope.session, scope.dataset, scope.judge, scope.options
    if frames.unjudged:
        unjudged = Reason("judge_no_verdicts", judge=judge.name)
        section["judge_note"], section["judge_reason"] = unjudged.text(), unjudged.to_dict()
        return
    if frames.verdicts is None or scope.light:
        return
    # could the judge replace one of the experts? (the test's defaults)
    section["alt_test"] = alt_test_block(task, frames.labels, scored, scope.fewshot)
    section["human"].update(judge_as_rater(task, frames.labels, scored, scope.fewshot))  # raters.py
    consistency = self_consistency_block(session, dataset, task, judge, frames.direct, scope.fewshot, scope.in_split)
    if consistency is not None:  # a run with --samples K (consistency.py)
        section["self_consistency"] = consistency
    # the system's mean from verdicts and labels (estimate.py): only when some judged target has no gold
    if section.get("n_no_gold"):
        estimate = estimate_block(session, dataset.name, task, judge.name, split=options.split, confidence=options.confidence,
                                  order_rule=options.order_rule, frames=(frames.verdicts, frames.direct, frames.gold),
                                  totals=functools.partial(frames.parts_per_sample, scope))
        if estimate is not None:
            section["estimate"] = estimate


def _counts(scope: _Scope, task: Task, frames: _Frames, section: dict[str, Any]) -> None:
    """Add a section's counts: stale labels, the claim sets used, the label budget capped to the dataset's targets."""
    direct = frames.direct
    # Labels whose claim or context changed under them (an --update, a re-extraction, an
    # expert's claim edit): left out of every statistic, counted here.
    section["n_stale"] = int(direct["stale"].sum()) if not direct.empty else 0
    if not scope.light and judging(task).reads_claims:
        section["claim_sources"] = source_counts(scope.session, frames.samples)
    if any((section.get(key) or {}).get("more_targets") for key in ("labels_to_decide", "labels_needed", "budget")):
        cap_to_dataset(section, targets_in_dataset(scope.session, scope.dataset.id, task.target, scope.in_split))


def _rag_blocks(scope: _Scope, task: Task, frames: _Frames, merged: pd.DataFrame, rag: dict[str, Any],
                section: dict[str, Any]) -> pd.DataFrame | None:
    """Add the RAG metric a task's gold gives (claim_support: faithfulness; context_relevance: context precision);
    return the gold relevance of the contexts, which the retrieval metrics may use. The claim sources of the task's
    own samples are its section's (`_counts` counted them)."""
    session, dataset, judge, options, verdicts = scope.session, scope.dataset, scope.judge, scope.options, frames.verdicts
    if task.name == "claim_support":  # names: this built-in task's gold gives faithfulness (not a kind of task)
        metric = metric_scores(session, dataset, judge, "faithfulness", scope.in_split) if verdicts is None else None
        rag["faithfulness"] = faithfulness_section(gold_rows(merged), verdicts, frames.parts_per_sample(scope, Claim),
                                                   set(task.excluded or []), scope.fewshot, metric, options=options)
        if metric is None and "claim_sources" in section:
            rag["faithfulness"]["claim_sources"] = dict(section["claim_sources"])
        else:
            used = frames.samples | (set(metric.index.tolist()) if metric is not None else set())
            rag["faithfulness"]["claim_sources"] = source_counts(session, used)
    if task.name == "context_relevance":  # names: this built-in task's gold gives context precision
        relevance = gold_relevance(gold_rows(merged), target_positions(frames.labels, verdicts))
        metric = metric_scores(session, dataset, judge, "context_precision", scope.in_split) if verdicts is None else None
        rag["context_precision"] = context_precision_section(relevance, verdicts, metric, options=options)
        return relevance
    return None


def _dataset_blocks(scope: _Scope, data: dict[str, Any], relevance: pd.DataFrame | None) -> None:
    """Add what covers the whole dataset: warnings, retrieval metrics and claim sets (`retrieval` and `claim_sets`
    follow `rag` in the JSON: docs/report.md lists the keys in order)."""
    session, dataset, in_split = scope.session, scope.dataset, scope.in_split
    data["warnings"] = self_preference_warnings(session, dataset, scope.judge, in_split)
    retrieval = retrieval_section(session, dataset, scope.options.k, relevance, len(scope.external))
    claim_sets = {"sources": source_counts(session, in_split) if in_split is not None else source_counts(session, dataset=dataset),
                  "expert_changes": expert_changes(session, dataset, sample_ids=in_split)}
    items = list(data.items())
    data.clear()
    for key, value in items:
        data[key] = value
        if key == "rag":
            if retrieval is not None:
                data["retrieval"] = retrieval
            data["claim_sets"] = claim_sets


def _samples_of(labels: pd.DataFrame, verdicts: pd.DataFrame | None) -> set[int]:
    """Return the samples a section's labels and verdicts are on (distinct ids of 10^6 rows: IdIndex, not a set of all)."""
    arrays = [f["sample_id"].to_numpy(dtype=np.int64) for f in (labels, verdicts) if f is not None and not f.empty]
    return set(IdIndex(np.concatenate(arrays)).ids.tolist()) if arrays else set()


def human_agreement(session: Session, dataset_name: str, task_name: str, *, split: str | None = None,
                    options: Options | None = None) -> dict | None:
    """Return a task's human-only figures, `{"kind", "human"}` as in its report section, or None without labels.

    What the dashboard's ceiling needs, without building the report: the same labels (a metric
    task's from each expert's own labels), the same split, the same `human` block.
    """
    dataset, task = lookup.dataset(session, dataset_name), lookup.task(session, task_name)
    labels = labels_frame(session, dataset, task)
    in_split = split_samples(session, dataset, split) if split else None
    if in_split is not None:
        labels = labels[labels["sample_id"].isin(in_split)].reset_index(drop=True)
    if task.name in DERIVED_GOLD:
        labels = annotator_metric_labels(session, dataset, task, labels, in_split)
    if labels.empty:
        return None
    return {"kind": task.kind, "human": human_block(task, labels, options=options)}


def _pairwise_section(session: Session, dataset, task: Task, labels: pd.DataFrame, verdicts: pd.DataFrame | None,
                      fewshot: set[str], groups, options: Options,
                      gold: pd.DataFrame) -> tuple[dict, pd.DataFrame, pd.DataFrame | None]:
    """Return a pairwise task's section (the categorical statistics of one verdict per target by the order rule, and
    `position`), its merged rows, and those verdicts (one per target)."""
    orders = split_orders(verdicts)
    per_target = apply_order_rule(task, verdicts, options.order_rule, orders=orders)[0] if verdicts is not None else None
    section, merged = categorical_section(task, labels, per_target, fewshot, groups, options, gold=gold,
                                          light=options.decision_only)
    if verdicts is not None:
        section["order_rule"] = options.order_rule
    if options.decision_only:  # the gate: no position block
        return section, merged, per_target
    human = human_first_position(session, dataset, task, options.split, options.sample_ids)  # --golden: its members only
    first = first_shown(session, dataset) if verdicts is not None else None
    section["position"] = position_section(task, orders, first, gold, fewshot, options, human)
    return section, merged, per_target


def _item_rows(task: Task, labels: pd.DataFrame, verdicts: pd.DataFrame | None, merged: pd.DataFrame,
               external: dict[int, str], groups: dict[int, str | None] | None) -> list[ItemRow]:
    positions = target_positions(labels, verdicts)
    humans: dict[str, dict[str, str]] = {}
    if not labels.empty:
        current = labels[~labels["stale"] & ~labels["adjudicated"]]
        for key, annotator, value in zip(current["target_key"], current["annotator"], current["value"], strict=True):
            humans.setdefault(key, {})[annotator] = value
    rows = []
    judged = judging(task)
    numeric = not judged.kind.labels
    if numeric:  # scores agree within the task's tolerance, as compare's fixed/broken flips
        tolerance = score_tolerance(task, merged.loc[merged["scored"], "gold"].astype(float).to_numpy())
    for rec in merged.sort_values(["sample_id", "target_key"]).itertuples(index=False):
        gold = None if pd.isna(rec.gold) else rec.gold
        judge = None if rec.judge is None or (isinstance(rec.judge, float) and math.isnan(rec.judge)) else rec.judge
        status = rec.status if isinstance(rec.status, str) else "none"
        agree = None
        if gold is not None and judge is not None and rec.excluded == "":
            agree = bool(score_agrees(task, [float(gold)], [float(judge)], tolerance)[0]) if numeric else (gold == judge)
        if numeric and gold is not None:
            gold = _fmt_number(float(gold))
        sample_id = int(rec.sample_id)
        pos = positions.get(rec.target_key)
        rows.append(ItemRow(
            task=task.name, target=rec.target_key, sample_id=external.get(sample_id, str(sample_id)),
            **judged.target.place(pos),
            humans=humans.get(rec.target_key, {}), gold=gold,
            gold_source=rec.gold_source if isinstance(rec.gold_source, str) else "none",
            judge=judge, judge_status=status, agree=agree, excluded=rec.excluded,
            group=groups.get(sample_id) if groups else None,
        ))
    return rows


def _fmt_number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.4g}"


@dataclass
class AlignmentFrames:
    """What the rows of many judges of one task need, read once: the labels, the gold, each judge's verdicts and few-shots."""

    task: Task
    labels: pd.DataFrame
    gold: pd.DataFrame
    verdicts: dict[str, pd.DataFrame | None]  # judge name → its verdicts on the task (None: it has none)
    fewshot: dict[str, set[str]]  # judge name → the target keys of its prompt version's few-shot examples
    # Pairwise tasks: `verdicts` holds the one verdict per target the order rule makes of a judge's
    # orders, and `position` each judge's position statistics over its two orders (pairwise.py).
    position: dict[str, dict] = field(default_factory=dict)


def alignment_frames(session: Session, dataset_name: str, task_name: str, judge_names: list[str],
                     options: Options | None = None) -> AlignmentFrames:
    """Read the labels and the gold once, and every judge's verdicts in one query (on `options.split`)."""
    options = options or Options()
    dataset = lookup.dataset(session, dataset_name)
    task = lookup.task(session, task_name)
    in_split = options.restrict(split_samples(session, dataset, options.split) if options.split else None)
    labels = labels_frame(session, dataset, task)
    if in_split is not None:
        labels = labels[labels["sample_id"].isin(in_split)].reset_index(drop=True)
    gold = task_gold(session, dataset, task, labels, in_split)
    judges = [lookup.judge(session, name) for name in judge_names]
    # One query for every judge's verdicts (the columns of verdicts_frame, plus the judge).
    query = (
        sa_select(Verdict.judge_id, *verdict_columns(task))
        .join(Sample, Sample.id == Verdict.sample_id)
        .where(Sample.dataset_id == dataset.id, Verdict.task_id == task.id, Verdict.sample_index == 0)
    )  # every judge's: read_frame's raw cursor cannot expand an IN list, and the unwanted ones are dropped by the groupby
    every = read_frame(session, join_target(query, task, Verdict), ["judge_id", *frame_columns(task)])
    every["active"] = every["active"].fillna(True).astype(bool)
    if in_split is not None:
        every = every[every["sample_id"].isin(in_split)]
    by_judge = {judge_id: frame.drop(columns=["judge_id"]).reset_index(drop=True) for judge_id, frame in every.groupby("judge_id", sort=False)}
    orders = judging(task).kind.orders  # a pairwise task: one verdict per target, by the order rule
    first = first_shown(session, dataset) if orders else None
    fewshot = {judge.name: fewshot_keys(session, judge) for judge in judges}
    verdicts, position = {}, {}
    for judge in judges:
        found = by_judge.get(judge.id)
        if found is not None and not found.empty and orders:
            shown = split_orders(found)
            position[judge.name] = position_summary(shown, first, fewshot[judge.name])
            found, _ = apply_order_rule(task, found, options.order_rule, orders=shown)
        verdicts[judge.name] = None if found is None or found.empty else found
    return AlignmentFrames(task=task, labels=labels, gold=gold, verdicts=verdicts, fewshot=fewshot, position=position)


def alignment_sections(session: Session, dataset_name: str, task_name: str, judge_names: list[str],
                       options: Options | None = None, *, frames: AlignmentFrames | None = None) -> dict[str, dict | None]:
    """Return judge name → its task section reduced to n, the excluded counts, the alignment and its decision
    (None for a judge without verdicts for the task), each computed exactly as `build_report` does.

    The labels and the gold are loaded once for all judges (`alignment_frames`, or `frames` already
    read): this is what the dashboard of many prompt versions needs, without the per-label,
    per-annotator and human–human parts.
    """
    options = options or Options()
    frames = frames or alignment_frames(session, dataset_name, task_name, judge_names, options)
    section_of = categorical_section if judging(frames.task).kind.labels else numeric_section
    out: dict[str, dict | None] = {}
    for name in judge_names:
        verdicts = frames.verdicts.get(name)
        if verdicts is None:
            out[name] = None
            continue
        out[name], _ = section_of(frames.task, frames.labels, verdicts, frames.fewshot[name], None, options,
                                  gold=frames.gold, light=True)
        if name in frames.position:  # pairwise: the dashboard shows the position statistics beside the alignment
            out[name]["position"] = frames.position[name]
            out[name]["order_rule"] = options.order_rule
    return out
