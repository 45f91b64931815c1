"""The wording of an estimate of the system's mean (a report section's `estimate` block, `calibrate estimate`).

Shared by the HTML and Markdown reports, `calibrate estimate`'s renderer (estimate_report.py) and
the dashboard: the estimate with its interval, the naive judge number (struck through by the
renderers) and the one sentence saying why it is not to be trusted. Worded in the current locale.
"""

from __future__ import annotations

from typing import Any

from calibrate import i18n
from calibrate.i18n import gettext
from calibrate.reports.summary import ci_label, reason_text

METHOD_NAMES = {"ppi++": "PPI++", "ppi": "PPI", "classical": "classical", "rogan-gladen": "Rogan–Gladen"}


def number(value: float | None) -> str:
    return "—" if value is None else i18n.current().number(value, 3)


def interval(ci: list | None) -> str:
    return "—" if not ci else f"[{number(ci[0])}, {number(ci[1])}]"


def what(block: dict) -> str:
    """Return what is estimated, from the block's `estimand` {level, positive, metric} and `target` (the task's)."""
    estimand = block.get("estimand") or {"level": "answers" if block.get("unit") == "answer" else None,
                                         "positive": block.get("positive"), "metric": "share" if block.get("positive") else "mean"}
    level, label = estimand.get("level"), estimand.get("positive")
    if estimand.get("metric") == "mean":
        return {"answers": gettext("mean score of the answers"), "claims": gettext("mean score of the claims"),
                "contexts": gettext("mean score of the contexts")}.get(level, gettext("mean score"))
    if level == "answers" and block.get("target") == "claim":
        if label == "supported":  # claim support's answers: faithfulness = 1
            return gettext("share of faithful answers (every counted claim supported)")
        return gettext("share of answers whose every counted claim is %(label)s", label=label)
    if level == "claims":
        return gettext("share of claims labelled %(label)s", label=label)
    if level == "contexts":
        return gettext("share of contexts labelled %(label)s", label=label)
    return gettext("share of answers labelled %(label)s", label=label)


def naive_why() -> str:
    """Return why the judge's own number is struck through."""
    return gettext("biased by the judge's errors, however many verdicts")


def section_estimate(block: Any) -> dict | None:
    """Return what a report section or the dashboard shows of an `estimate` block (None without one).

    Keys: `title`, `method`, `ok`, `estimate`, `ci`, `ci_label`, `naive`, `naive_ci`, `why` (the naive number's
    sentence), `counts` (labelled and unlabelled, one sentence), `note` (why there is no estimate).
    """
    if not isinstance(block, dict):
        return None
    naive = block.get("naive_judge") or {}
    ok = block.get("status") == "ok" and block.get("estimate") is not None
    n_labelled, n_unlabelled = int(block.get("n_labelled") or 0), int(block.get("n_unlabelled") or 0)
    return {
        "title": gettext("Estimate of the %(what)s", what=what(block)),
        "method": METHOD_NAMES.get(block.get("method"), block.get("method")),
        "ok": ok,
        "estimate": number(block.get("estimate")),
        "ci": interval(block.get("ci")),
        "ci_label": ci_label(1 - float(block.get("alpha") or 0.05)),
        "naive": number(naive.get("estimate")),
        "naive_ci": interval(naive.get("ci")),
        "why": naive_why(),
        "counts": gettext("from %(labelled)s expert-labelled and %(unlabelled)s judge-only targets",
                          labelled=n_labelled, unlabelled=n_unlabelled),
        "note": "" if ok else reason_text(block),
    }


def level_name(level: str | None) -> str:
    """Return a level of measurement's name in the current locale."""
    names = {"nominal": gettext("nominal"), "ordinal": gettext("ordinal"), "interval": gettext("interval")}
    return names.get(level or "nominal", level or "")


def rater_rows(section: dict) -> list[dict]:
    """Return the judge-as-one-more-rater rows of a section's human block: who, statistic, value, note (empty without them)."""
    human = section.get("human") or {}
    rows = []
    for key, who in (("krippendorff_alpha_experts", gettext("Experts alone")),
                     ("krippendorff_alpha_with_judge", gettext("Experts with the judge as one more rater"))):
        block = human.get(key)
        if isinstance(block, dict):
            rows.append({"key": key, "who": who, "name": gettext("Krippendorff's α (%(level)s)", level=level_name(block.get("level"))),
                         "value": number(block.get("value")), "defined": block.get("value") is not None,
                         "note": reason_text(block) or gettext("over %(n)s shared targets", n=block.get("n") or 0)})
    return rows


def consistency_text(section: dict) -> str:
    """Return the self-consistency sentence of a section (a run with --samples K), or ""."""
    block = section.get("self_consistency")
    if not isinstance(block, dict):
        return ""

    def value(key: str) -> str:
        est = block.get(key) or {}
        return number(est.get("value")) if est.get("value") is not None else reason_text(est) or "—"

    flips = block.get("flip_rate") or {}
    return gettext("Self-consistency over %(k)s samples per target (%(n)s targets): flip rate %(flips)s %(ci)s; Fleiss' κ "
                   "among the runs %(fleiss)s; Cohen's κ with the gold of one sample %(single)s, of the majority %(majority)s",
                   k=block.get("k"), n=block.get("n_targets"), flips=value("flip_rate"), ci=interval(flips.get("ci")),
                   fleiss=value("fleiss_kappa"), single=value("kappa_single"), majority=value("kappa_majority"))
