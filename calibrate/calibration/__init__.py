"""Calibration: labels and judges' verdicts → gold, statistics, the Report, comparisons and the loop.

The public API (import these names from `calibrate.calibration`; the modules are loaded on
first use, so naming one API does not load pandas and SciPy for the rest):

    build_report(session, dataset, judge, options=, tasks=) → Report     report.py
    Options, Report, ItemRow, alignment_sections                          options.py, report.py
    gold_frame, categorical_gold, numeric_gold, human_gold, GOLD_RULE     gold.py  (the one gold rule)
    task_gold, DERIVED_GOLD                                               rag.py   (metric tasks' gold)
    labels_needed, label_budget                                           budget.py
    decide, rule_of, Decided                                              decision.py (pass / fail / undecided)
    score_versions, VersionScores                                         common.py (versions on common targets)
    run_alt_test, alt_test_block                                          alttest.py (the Alternative Annotator Test)
    compare_judges                                                        compare.py (`calibrate compare`)
    compare_systems, sample_metric, ABOptions, ABResult                   ab.py    (`calibrate ab`)
    dashboard, disagreements, versions_section, …                         loop.py  (the engineer's loop)
    evaluate_on_test, test_look_preview, look_text                        testsplit.py (the frozen test split)
    CalibrationError, ABError                                             calibrate/errors.py

Modules, in the order data flows: frames (read labels and verdicts into frames), gold,
budget, decision, sections (a task's statistics), rag and retrieval (the RAG system's own
metrics), alttest, report (build_report), common, compare, ab, loop. The gate's PASS/FAIL wording is cli/gate.py;
model families and the self-preference guard are judges/families.py.
"""

from __future__ import annotations

import importlib
from typing import Any

from calibrate.errors import ABError, CalibrationError

_API = {
    "Options": "options",
    "Report": "report", "ItemRow": "report", "build_report": "report", "alignment_sections": "report",
    "gold_frame": "calibrate.gold", "categorical_gold": "calibrate.gold", "numeric_gold": "calibrate.gold",
    "human_gold": "calibrate.gold", "GOLD_RULE": "calibrate.gold",
    "task_gold": "rag", "DERIVED_GOLD": "rag",
    "labels_needed": "budget", "label_budget": "budget",
    "decide": "decision", "rule_of": "decision", "Decided": "decision",
    "score_versions": "common", "VersionScores": "common", "alignment_frames": "report",
    "run_alt_test": "alttest", "alt_test_block": "alttest",
    "compare_judges": "compare",
    "compare_systems": "ab", "sample_metric": "ab", "ABOptions": "ab", "ABResult": "ab",
}

__all__ = ["ABError", "CalibrationError", *sorted(_API)]


def __getattr__(name: str) -> Any:
    """Load the module of a public name on first use (PEP 562)."""
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module if "." in module else f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
