"""The gate's wording: PASS/FAIL per task from a Report (what `calibrate gate` prints)."""

from __future__ import annotations

from calibrate.calibration.report import (
    Report,
)


def gate_lines(report: Report, *, min_kappa: float, min_rho: float, ci_lower: bool,
               required: list[str] | None = None) -> tuple[bool, list[str]]:
    """Return whether every checked task passes its threshold, and one line per task.

    Checked: the tasks in `required` when given (a task without verdicts then fails), else
    every task the judge has verdicts for.
    """
    lines, ok, checked = [], True, 0
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
        if value is None:
            note = section.get(alignment["metric"], {}).get("note", "")
            lines.append(f"FAIL {name}: {alignment['metric']} undefined (n={n}): {note}")
            ok = False
            checked += 1
            continue
        measured = ci[0] if ci_lower and ci else value
        passed = measured >= threshold if not (ci_lower and ci is None) else False
        ci_text = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
        rule = "CI lower bound" if ci_lower else "estimate"
        lines.append(f"{'PASS' if passed else 'FAIL'} {name}: {alignment['metric']} {value:.3f}{ci_text} n={n}, "
                     f"{rule} {'≥' if passed else '<'} {threshold}")
        ok = ok and passed
        checked += 1
    if checked == 0:
        lines.append(f"FAIL: judge {report.data['judge']} has no verdicts on labelled targets of {report.data['dataset']}")
        ok = False
    return ok, lines
