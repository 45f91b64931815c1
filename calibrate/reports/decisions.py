"""A judge's decisions in words, worded once: each task's pass/fail line and sentence, and the whole report's.

The decision itself (pass, fail, undecided under the rule) is made once in
calibrate/calibration/decision.py; here it is said: `decision_text` is the one sentence the
report, the dashboard, the gate, the compare page and the test split all show. Numbers,
thresholds and notes are worded by reports/summary.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from calibrate import i18n
from calibrate.i18n import N_
from calibrate.reports.summary import (
    DIGITS,
    LABEL_KINDS,
    METRIC_NAMES,
    Ceiling,
    ceiling,
    finite,
    has_interval,
    interval,
    number,
    reason_text,
    threshold_rule,
    threshold_text,
)


@dataclass(frozen=True)
class Decision:
    """A task's pass/fail line: the alignment statistic against the threshold."""

    task: str
    kind: str
    target: str
    metric: str
    metric_name: str
    value: float | None
    ci: tuple[float, float] | None
    n: int
    outcome: str
    reason: str
    ceiling: Ceiling | None
    state: str = "not judged"  # the three-state decision: pass, fail, undecided; or undefined, not judged
    rule: str = "point"
    text: str = ""  # the decision in one sentence (decision_text)

    @property
    def value_text(self) -> str:
        return number(self.value)

    @property
    def ci_text(self) -> str:
        return interval(self.ci)


def decision(name: str, section: dict, data: dict) -> Decision:
    """Return the decision of one task (outcome: passed, not passed, undefined or not judged)."""
    alignment = section.get("alignment")
    threshold = data.get("threshold")
    kind, target = section.get("kind", ""), section.get("target", "")
    if not alignment:
        default = "cohen_kappa" if kind in LABEL_KINDS else "spearman_rho"
        reason = reason_text(section, "judge_note") or (i18n.gettext("no judge was named: human agreement only") if data.get("judge") is None
                                                        else i18n.gettext("the judge has no verdicts for this task"))
        return Decision(name, kind, target, default, i18n.gettext(METRIC_NAMES.get(default, default)), None, None, int(section.get("n") or 0),
                        "not judged", reason, ceiling(section), rule=data.get("rule") or "point")
    metric = alignment.get("metric") or ""
    metric_name = i18n.gettext(METRIC_NAMES.get(metric, metric))
    value = alignment.get("value")
    ci = alignment.get("ci")
    ci = (ci[0], ci[1]) if ci and len(ci) == 2 and None not in ci else None
    passed = section.get("passed")
    t = threshold_text(threshold)
    if passed is None or not finite(value):
        note = reason_text(section.get(metric)) or i18n.gettext("the statistic has no value")
        outcome, reason = "undefined", i18n.gettext("%(metric)s is undefined: %(note)s", metric=metric_name, note=note)
    elif data.get("ci_lower"):
        if ci is None:
            reason = i18n.gettext("%(metric)s = %(value)s has no confidence interval, so its lower bound cannot reach %(threshold)s",
                                  metric=metric_name, value=number(value), threshold=t)
        else:
            sign = "≥" if passed else "<"
            reason = i18n.gettext("CI lower bound %(bound)s %(sign)s %(threshold)s (%(metric)s = %(value)s)", bound=_beside(ci[0], threshold),
                                  sign=sign, threshold=t, metric=metric_name, value=number(value))
        outcome = "passed" if passed else "not passed"
    else:
        sign = "≥" if passed else "<"
        outcome, reason = ("passed" if passed else "not passed"), f"{metric_name} = {_beside(value, threshold)} {sign} {t}"
    state = section.get("decision") or "undefined"
    rule = section.get("rule") or data.get("rule") or "point"
    text = decision_text(state, rule, metric, value, ci, threshold, passed, section.get("labels_to_decide"),
                         note=reason_text(section.get(metric)))
    return Decision(name, kind, target, metric, metric_name, value, ci, int(section.get("n") or 0), outcome, reason, ceiling(section),
                    state=state, rule=rule, text=text)


SYMBOLS = {"cohen_kappa": "κ", "spearman_rho": "ρ"}

# The decision states as people read them (marked: each renderer translates the word it shows).
STATE_WORDS = {"pass": N_("pass"), "fail": N_("fail"), "undecided": N_("undecided"), "undefined": N_("no decision"),
               "not judged": N_("not judged")}


def rule_text(rule: str, threshold: Any) -> str:
    """Return the rule in words: "rule: point, the estimate must reach 0.75" or "rule: ci_lower, the CI lower bound must …"."""
    t = threshold_text(threshold)
    if rule == "ci_lower":
        return i18n.gettext("rule: %(rule)s, the CI lower bound must reach %(threshold)s", rule=rule, threshold=t)
    return i18n.gettext("rule: %(rule)s, the estimate must reach %(threshold)s", rule=rule, threshold=t)


def decision_reason(state: str, rule: str, threshold: Any, passed: bool | None, ci: Any, to_decide: dict | None,
                    *, note: str = "") -> str:
    """Return what the decision says beside the estimate: where the CI lies against the threshold, what `passed` is
    under the rule, and for an undecided task the labels that would settle it ("straddles 0.75; passes on …")."""
    gettext = i18n.gettext
    t = threshold_text(threshold)
    has_ci = has_interval(ci)
    rule_words = rule_text(rule, threshold)
    if state == "undefined":
        if note:
            return gettext("is undefined: %(note)s (%(rule)s)", note=note, rule=rule_words)
        return gettext("is undefined (%(rule)s)", rule=rule_words)
    if state in ("pass", "fail") and not has_ci:
        sign = "≥" if state == "pass" else "<"
        return gettext("has no CI: decided on the point estimate alone, %(sign)s %(threshold)s (%(rule)s)", sign=sign, threshold=t,
                       rule=rule_words)
    if state == "pass":
        return gettext("lies at or above %(threshold)s over its whole CI (%(rule)s)", threshold=t, rule=rule_words)
    if state == "fail":
        return gettext("lies below %(threshold)s over its whole CI (%(rule)s)", threshold=t, rule=rule_words)
    if not has_ci:
        text = gettext("has no CI, so its lower bound cannot be checked against %(threshold)s; does not pass (%(rule)s)",
                       threshold=t, rule=rule_words)
    elif rule == "ci_lower":
        text = (gettext("straddles %(threshold)s; passes on the CI lower bound (%(rule)s)", threshold=t, rule=rule_words) if passed
                else gettext("straddles %(threshold)s; does not pass on the CI lower bound (%(rule)s)", threshold=t, rule=rule_words))
    else:
        text = (gettext("straddles %(threshold)s; passes on the point estimate (%(rule)s)", threshold=t, rule=rule_words) if passed
                else gettext("straddles %(threshold)s; does not pass on the point estimate (%(rule)s)", threshold=t, rule=rule_words))
    more = (to_decide or {}).get("more_targets")
    if more is not None:
        text += i18n.ngettext("; label ≈ %(num)s more target to settle", "; label ≈ %(num)s more targets to settle", more)
    elif to_decide:
        text += gettext("; more labels are not expected to settle it")
    return text


def decision_text(state: str, rule: str, metric: str, value: Any, ci: Any, threshold: Any, passed: bool | None,
                  to_decide: dict | None, *, note: str = "") -> str:
    """Return a decision in one sentence, e.g. "undecided — κ 0.861 [0.739, 0.965] straddles 0.75; passes on the point
    estimate (rule: point); label ≈ 40 more targets to settle"."""
    symbol = SYMBOLS.get(metric, i18n.gettext(METRIC_NAMES.get(metric, metric)))
    if state == "undefined":
        return f"{i18n.gettext('no decision')} — {symbol} {decision_reason(state, rule, threshold, passed, ci, to_decide, note=note)}"
    estimate = f"{symbol} {number(value)}" + (f" {interval(ci)}" if has_interval(ci) else "")
    return (f"{i18n.gettext(STATE_WORDS.get(state, state))} — {estimate} "
            f"{decision_reason(state, rule, threshold, passed, ci, to_decide, note=note)}")


def _beside(value: float, threshold: float) -> str:
    """Return `value` with enough decimals (3 to 6) that it does not look equal to the threshold."""
    for digits in range(DIGITS, 7):
        if float(f"{value:.{digits}f}") != threshold or value == threshold:
            return number(value, digits)
    return number(value, 6)


def decisions(data: dict) -> list[Decision]:
    """Return the decision of every task of the report, in report order."""
    return [decision(name, section, data) for name, section in (data.get("tasks") or {}).items()]


def overall(data: dict) -> tuple[str, str]:
    """Return the report's outcome ("passed", "not passed", "undefined" or "not judged") and why (in the current locale)."""
    gettext = i18n.gettext
    if data.get("judge") is None:
        return "not judged", gettext("No judge was named: this report shows human agreement only and makes no pass/fail decision.")
    found = decisions(data)
    rule = threshold_rule(data)
    if not found:
        return "not passed", gettext("The dataset has no task with data, so nothing could be checked.")
    failed = [d.task for d in found if d.outcome == "not passed"]
    undefined = [d.task for d in found if d.outcome == "undefined"]
    unjudged = [d.task for d in found if d.outcome == "not judged"]
    aside = (" " + gettext("Not judged (no verdicts, so not part of the decision): %(tasks)s.", tasks=", ".join(unjudged))
             if unjudged else "")
    if data.get("passed"):
        return "passed", f"{gettext('Every judged task passed.')}{aside} {rule}"
    if not failed and not undefined:
        return "not passed", f"{gettext('The judge has no verdicts on any task of this dataset.')}{aside} {rule}"
    parts = []
    if failed:
        parts.append(gettext("not passed: %(tasks)s", tasks=", ".join(failed)))
    if undefined:
        parts.append(gettext("undefined: %(tasks)s", tasks=", ".join(undefined)))
    return "not passed", f"{gettext('Every judged task must pass (%(failures)s).', failures='; '.join(parts))}{aside} {rule}"


def overall_decision(data: dict) -> tuple[str, str]:
    """Return the whole judge's three-state decision (pass, fail, undecided; "not judged" without a judge) and why."""
    gettext = i18n.gettext
    if data.get("judge") is None:
        return "not judged", gettext("No judge was named: no decision.")
    state = data.get("decision") or "fail"
    rule = data.get("rule") or "point"
    found = [d for d in decisions(data) if d.outcome != "not judged"]
    if not found:
        return state, gettext("No task was judged, so the judge does not pass (rule: %(rule)s).", rule=rule)
    by_state: dict[str, list[str]] = {}
    for d in found:
        by_state.setdefault(d.state, []).append(d.task)
    parts = "; ".join(f"{gettext(STATE_WORDS.get(k, k))}: {', '.join(v)}" for k, v in by_state.items())
    lead = {"pass": N_("Every judged task passes over its whole CI"),
            "fail": N_("At least one task fails over its whole CI"),
            "undecided": N_("Not settled yet: no task fails, but not every task passes over its whole CI")}.get(state, state)
    if data.get("passed"):
        return state, gettext("%(lead)s (%(tasks)s). Under rule %(rule)s the judge passes (what calibrate gate's exit code follows).",
                              lead=gettext(lead), tasks=parts, rule=rule)
    return state, gettext("%(lead)s (%(tasks)s). Under rule %(rule)s the judge does not pass (what calibrate gate's exit code follows).",
                          lead=gettext(lead), tasks=parts, rule=rule)
