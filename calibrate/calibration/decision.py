"""The decision of a task in three states: pass, fail, or undecided while the CI straddles the threshold.

With the alignment's confidence interval [lo, hi] and the threshold t:

- `pass` when lo ≥ t (the whole interval is at or above t);
- `fail` when hi < t (the whole interval is below t);
- `undecided` otherwise: the interval straddles t, so the data do not settle it yet.

The *rule* says what the boolean `passed` (the contract of `calibrate gate`'s exit code)
follows: `point` (the default) compares the estimate with t, `ci_lower` (`--ci-lower`, or the
app's `CI_LOWER` setting) compares lo with t. The three-state decision does not depend on the
rule when there is an interval; the rule only says how an undecided task is counted by `passed`.
Without an interval (the bootstrap is undefined), rule `point` decides on the estimate alone and
rule `ci_lower` leaves the task undecided, each with a note. An undefined statistic gives no
decision (`None`), as it gives no `passed`. docs/statistics.md §12 states the rule for users.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from calibrate.calibration.budget import labels_needed
from calibrate.reasons import Reason, noted

RULES = ("point", "ci_lower")
DECISIONS = ("pass", "fail", "undecided")


@dataclass(frozen=True)
class Decided:
    """A task's decision under a rule: the three-state `decision`, the boolean `passed`, and why (for special cases)."""

    decision: str | None
    rule: str
    passed: bool | None
    reason: Reason | None = None

    @property
    def note(self) -> str:
        """Return why, in English ("" when there is nothing special to say)."""
        return self.reason.text() if self.reason else ""


def rule_of(ci_lower: bool) -> str:
    """Return the rule's name: `ci_lower` when the CI lower bound must reach the threshold, else `point`."""
    return "ci_lower" if ci_lower else "point"


def usable_ci(ci: Any) -> tuple[float, float] | None:
    """Return the interval as two finite numbers, or None when there is none."""
    if not ci or len(ci) != 2 or any(v is None or not math.isfinite(v) for v in ci):
        return None
    return float(ci[0]), float(ci[1])


def decide(value: float | None, ci: Any, threshold: float, *, rule: str) -> Decided:
    """Return the three-state decision of an estimate and its CI against `threshold` under `rule`."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, not {rule!r}")
    if value is None or not math.isfinite(value):
        return Decided(None, rule, None, Reason("alignment_undefined"))
    interval = usable_ci(ci)
    if interval is None:
        if rule == "point":
            return Decided("pass" if value >= threshold else "fail", rule, value >= threshold,
                           Reason("no_ci_point"))
        return Decided("undecided", rule, False,
                       Reason("no_ci_ci_lower"))
    lo, hi = interval
    decision = "pass" if lo >= threshold else "fail" if hi < threshold else "undecided"
    passed = lo >= threshold if rule == "ci_lower" else value >= threshold
    return Decided(decision, rule, passed)


def labels_to_settle(n: int, value: float | None, ci: Any, threshold: float) -> dict | None:
    """Return about how many more labelled targets would settle a task whose CI straddles the threshold (lo < t ≤ hi),
    else None.

    The estimate of `budget.labels_needed` (the CI shrinks as 1/√n around an unchanged estimate),
    applied to the side of the interval that faces the threshold: a bootstrap interval is often
    lopsided (κ 0.861 [0.748, 0.966]), and it is the distance from the estimate to the bound on the
    threshold's side that must shrink below the distance to the threshold. Returns `more_targets`
    (at least 1: the task is not settled yet; None when the estimate is too close to the threshold
    for labels to settle it) and a `note`.
    """
    interval = usable_ci(ci)
    if interval is None or value is None or n <= 0:
        return None
    lo, hi = interval
    if not lo < threshold <= hi:
        return None
    half = value - lo if value >= threshold else hi - value  # the side that faces the threshold
    needed = labels_needed(n, (value - half, value + half), value, threshold)
    if needed is None:  # the estimate lies outside its own interval: nothing sensible to extrapolate
        return {"more_targets": None, **noted(Reason("outside_interval"))}
    more = needed.get("more_targets")
    if more is None:  # on (or a hair from) the threshold: labels_needed says why
        return needed
    more = max(more, 1)
    side = "lower" if value >= threshold else "upper"
    return {"more_targets": more, **noted(Reason("straddles", low=lo, high=hi, threshold=float(threshold), more=more, total=n + more,
                                                  value=float(value), side=side, half=float(half)))}


def labels_to_decide(decided: Decided, n: int, value: float | None, ci: Any, threshold: float) -> dict | None:
    """Return, for an undecided task, about how many more labelled targets would settle it (`labels_to_settle`);
    None for a decided task. Without an interval there is nothing to extrapolate from: `more_targets` is None."""
    if decided.decision != "undecided":
        return None
    if usable_ci(ci) is None:
        return {"more_targets": None, **noted(Reason("no_interval"))}
    return labels_to_settle(n, value, ci, threshold) or {
        "more_targets": None, **noted(Reason("outside_interval"))}


def decide_section(section: dict, threshold: float, rule: str) -> None:
    """Set `passed`, `decision`, `rule`, `decision_note` and `labels_to_decide` of a section that has an `alignment`."""
    alignment = section["alignment"]
    decided = decide(alignment.get("value"), alignment.get("ci"), threshold, rule=rule)
    section["passed"] = decided.passed
    section["decision"] = decided.decision
    section["rule"] = decided.rule
    section["decision_note"] = decided.note
    if decided.reason is not None:
        section["decision_reason"] = decided.reason.to_dict()
    section["labels_to_decide"] = labels_to_decide(decided, int(section.get("n") or 0), alignment.get("value"),
                                                   alignment.get("ci"), threshold)


def overall(sections: list[dict]) -> str:
    """Return the whole judge's decision from its tasks' decisions: fail if one fails, pass if all pass, else undecided.

    A task whose statistic is undefined leaves the judge undecided (it cannot pass). No judged
    task at all is `fail`, as `passed` is false then.
    """
    decisions = [s.get("decision") for s in sections]
    if not decisions or "fail" in decisions:
        return "fail"
    return "pass" if all(d == "pass" for d in decisions) else "undecided"
