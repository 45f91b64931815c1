"""Calibration: labels and judges' verdicts → gold, statistics, the Report and comparisons (computation only).

The public API: every module outside this package imports these names from
`calibrate.calibration` (tests/test_layers.py checks it). Each name's module is loaded on
first use (calibrate/lazy.py), so naming one does not load pandas and SciPy for the rest:

    build_report(session, dataset, judge, options=, tasks=) → Report     report.py
    Options, Report, ItemRow, alignment_sections, alignment_frames,       options.py, report.py
    AlignmentFrames
    human_agreement(session, dataset, task, split=)                       report.py (the human–human figures alone)
    gold_frame, categorical_gold, numeric_gold, human_gold, GOLD_RULE     calibrate/gold.py (the one gold rule)
    task_gold, DERIVED_GOLD                                               rag.py   (metric tasks' gold)
    labels_needed, label_budget                                           budget.py
    decide, rule_of, Decided, labels_to_decide                            decision.py (pass / fail / undecided)
    score_versions, VersionScores                                         common.py (versions on common targets)
    score_candidates, CandidateScores                                     selection.py (lower bounds adjusted for looks)
    run_alt_test, alt_test_block, alt_test_labels, check_parameters, …    alttest.py (the Alternative Annotator Test)
    compare_judges                                                        compare.py (`calibrate compare`)
    compare_systems, sample_metric, ABOptions, ABResult                   ab.py    (`calibrate ab`)
    apply_order_rule, ORDER_RULES                                         pairwise.py (the order rule)
    metadata_fields, sample_field_values                                  frames.py (a dataset's metadata fields)
    fewshot_keys                                                          frames.py (a judge's few-shot targets, left out)
    calibrated_task, calibrated_task_names                                calibrated.py
    Estimand, estimand_for, live_targets, estimate_targets, LEVELS,       live.py  (the one live estimator: what every production figure uses)
    levels_of
    monitor, production_gate                                              production.py (`calibrate monitor`, gate --production)
    run_estimate, estimate_block                                          estimate.py (`calibrate estimate`; a section's `estimate` block)
    stream_assignments, stream_labels, audit_probabilities                streams.py (the production queues' streams)
    CalibrationError, ABError                                             calibrate/errors.py

Modules, in the order data flows: frames (read labels and verdicts into frames), budget,
decision, sections (a task's statistics), pairwise, rag and retrieval (the RAG system's own
metrics), alttest, report (build_report), common, compare, ab. The application over it (the
dashboard, triage, few-shots, the frozen test split) is calibrate/loop/; the gate's wording
is cli/gate.py; model families and the self-preference guard are judges/families.py.
"""

from __future__ import annotations

from calibrate import lazy
from calibrate.errors import ABError, CalibrationError

_API = {
    "Options": "options",
    "Report": "report", "ItemRow": "report", "build_report": "report", "alignment_sections": "report",
    "alignment_frames": "report", "AlignmentFrames": "report", "human_agreement": "report",
    "gold_frame": "calibrate.gold", "categorical_gold": "calibrate.gold", "numeric_gold": "calibrate.gold",
    "human_gold": "calibrate.gold", "GOLD_RULE": "calibrate.gold",
    "task_gold": "rag", "DERIVED_GOLD": "rag",
    "labels_needed": "budget", "label_budget": "budget",
    "decide": "decision", "rule_of": "decision", "Decided": "decision", "labels_to_decide": "decision",
    "score_versions": "common", "VersionScores": "common",
    "score_candidates": "selection", "CandidateScores": "selection",
    "run_alt_test": "alttest", "alt_test_block": "alttest", "alt_test_labels": "alttest", "check_parameters": "alttest",
    "expert_count": "alttest", "DEFAULT_ALPHA": "alttest", "DEFAULT_EPSILON": "alttest", "DEFAULT_MIN_ITEMS": "alttest",
    "MIN_ANNOTATORS": "alttest",
    "compare_judges": "compare",
    "compare_systems": "ab", "sample_metric": "ab", "ABOptions": "ab", "ABResult": "ab",
    "apply_order_rule": "pairwise", "ORDER_RULES": "pairwise",
    "metadata_fields": "frames", "sample_field_values": "frames", "fewshot_keys": "frames",
    "calibrated_task": "calibrated", "calibrated_task_names": "calibrated",
    "Estimand": "live", "estimand_for": "live", "live_targets": "live", "estimate_targets": "live", "LEVELS": "live",
    "levels_of": "live",
    "monitor": "production", "production_gate": "production",
    "run_estimate": "estimate", "estimate_block": "estimate",
    "stream_assignments": "streams", "stream_labels": "streams", "audit_probabilities": "streams",
}

__all__ = ["ABError", "CalibrationError", *sorted(_API)]

__getattr__ = lazy.api_getattr(__name__, _API)
