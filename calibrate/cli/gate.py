"""The gate's wording: PASS, FAIL or UNDECIDED per task from a Report (what `calibrate gate` prints).

The state is the three-state decision (calibration/decision.py) against the gate's own
thresholds (`--min-kappa`, `--min-rho`); the exit code follows `passed` under the rule, as
before: an UNDECIDED task counts as passing under rule `point` when its estimate reaches the
threshold, and as failing under rule `ci_lower`. Each line names the rule.
"""

from __future__ import annotations

from calibrate.calibration import (
    Report,
    decide,
    labels_to_decide,
    rule_of,
)
from calibrate.reports.decisions import decision_reason
from calibrate.reports.summary import has_interval, interval


def gate_lines(report: Report, *, min_kappa: float, min_rho: float, ci_lower: bool,
               required: list[str] | None = None) -> tuple[bool, list[str]]:
    """Return whether every checked task passes under the rule (the exit code), and one line per task.

    Checked: the tasks in `required` when given (a task without verdicts then fails), else
    every task the judge has verdicts for.
    """
    lines, ok, checked = [], True, 0
    rule = rule_of(ci_lower)
    for name, section in report.data["tasks"].items():
        alignment = section.get("alignment")
        if alignment is None:
            if required and name in required:
                lines.append(f"FAIL {name}: {section.get('judge_note', 'no judge verdicts')}")
                ok = False
                checked += 1
            continue
        threshold = min_kappa if alignment["metric"] == "cohen_kappa" else min_rho
        value, ci = alignment.get("value"), alignment.get("ci")
        n = section.get("n", 0)
        abstained = int(section.get("n_abstained") or 0)  # scored as misses (calibration/sections.py)
        n_text = f"n={n}" + (f" ({abstained} abstained)" if abstained else "")
        checked += 1
        if value is None:
            note = section.get(alignment["metric"], {}).get("note", "")
            lines.append(f"FAIL {name}: {alignment['metric']} undefined ({n_text}): {note} (rule: {rule})")
            ok = False
            continue
        decided = decide(value, ci, threshold, rule=rule)
        to_decide = labels_to_decide(decided, n, value, ci, threshold)
        ci_text = f" {interval(ci)}" if has_interval(ci) else ""
        reason = decision_reason(decided.decision, rule, threshold, decided.passed, ci, to_decide)
        lines.append(f"{decided.decision.upper()} {name}: {alignment['metric']} {value:.3f}{ci_text} {n_text} {reason}"
                     + ("" if decided.decision != "undecided" else f"; counts as {'passing' if decided.passed else 'failing'}"))
        ok = ok and bool(decided.passed)
    if checked == 0:
        lines.append(f"FAIL: judge {report.data['judge']} has no verdicts on labelled targets of {report.data['dataset']}")
        ok = False
    golden = report.data.get("golden")
    if golden:  # every decision names the golden version it was made on, so a pinned gate cannot drift silently
        cited = f" [golden {golden['name']}@{golden['version']} sha256:{golden['hash']}]"
        lines = [line + cited for line in lines]
        if golden.get("gold_changed"):
            lines.append(f"NOTE golden {golden['name']}@{golden['version']}: the gold of {golden['gold_changed']} of its "
                         f"{golden['n_items']} members changed since the version was made")
    return ok, lines


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def production_json(result: dict, checked: dict) -> dict:
    """Return the JSON of `gate --production`: the check, and what it was checked on (docs/production.md)."""
    return {"dataset": result["dataset"], "judge": result["judge"], "task": result["task"], "estimand": result["estimand"],
            "by_window": result["by_window"], "min": result["min"], "min_agreement": result["min_agreement"],
            "status": checked["status"], "exit": checked["exit"], "checked": checked["checked"], "fallback": checked["fallback"],
            "latest_run": result["latest_run"], "window": checked["window"], "reason": checked["reason"], "note": checked["note"]}


#: The first word of the gate's line per status (exit codes: calibration/production.py EXIT_CODES).
STATE_WORDS = {"ok": "PASS", "alert": "FAIL", "undecided": "UNDECIDED", "too_few": "NO DECISION", "no data": "NO DECISION"}


def production_lines(result: dict, checked: dict) -> list[str]:
    """Return the lines `gate --production` prints: the state of the latest ended window, and any fallback or note."""
    lines = []
    if checked["fallback"] and checked["note"]:
        lines.append(f"FALLBACK: {checked['note']}")
    window = checked["window"]
    state = STATE_WORDS[checked["status"]]
    if window is None:
        lines.append(f"{state} {result['dataset']} ({result['judge']}): {checked['note']}")
        return lines
    ci = window["ci"]
    ci_text = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
    agreement = window["agreement"]
    extra = f"; alerts: {', '.join(window['alerts'])}" if window["alerts"] else ""
    if window["counts"].get("failed"):
        extra += f"; {window['counts']['failed']} failed or refused calls (estimated through the audit)"
    if window["status"] in ("too_few", "no data") and window.get("note"):
        extra += f"; {window['note']}"
    lines.append(f"{state} {result['task']} window {window['window']}: {window['status']}; estimate {_number(window['estimate'])}"
                 f"{ci_text} ({window['method'] or 'no method'}) vs min {result['min']}; judge only {_number(window['judge_only'])}; "
                 f"agreement {_number(agreement['value'])} on {agreement['n']} audit labels (calibration "
                 f"{_number(agreement['calibration'])}){extra}")
    if checked["note"] and not checked["fallback"]:
        lines.append(f"NOTE: {checked['note']}")
    return lines
