"""What the HTML and Markdown reports say, worded once: numbers, statistics, counts and methods.

Both human-readable renderers take their numbers and sentences from here, so a value shown
in the HTML is the same text as in the Markdown (and the JSON value rounded to 3 decimals).
Nothing here escapes: each renderer escapes for its own output.

A note of the JSON is worded from its reason (`reason_text`), never from its English text. The
decisions (pass, fail, undecided, and why) are worded in reports/decisions.py, the RAG and
retrieval metrics in reports/rag_summary.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from calibrate import i18n, reasons
from calibrate.i18n import N_

DIGITS = 3

METRIC_NAMES = {
    "cohen_kappa": N_("Cohen's κ"),
    "percent_agreement": N_("Percent agreement"),
    "spearman_rho": N_("Spearman's ρ"),
    "kendall_tau": N_("Kendall's τ-b"),
    "pearson_r": N_("Pearson's r"),
    "weighted_kappa": N_("Quadratic weighted κ"),
    "fleiss_kappa": N_("Fleiss' κ"),
    "krippendorff_nominal": N_("Krippendorff's α (nominal)"),
    "krippendorff_ordinal": N_("Krippendorff's α (ordinal)"),
    "krippendorff_interval": N_("Krippendorff's α (interval)"),
}

LABEL_KINDS = ("categorical", "pairwise")  # kinds scored with κ (models.LABEL_KINDS: no database import here)

TARGET_NOUNS = {"claim": (N_("claim"), N_("claims")), "context": (N_("context"), N_("contexts")),
                "sample": (N_("answer"), N_("answers"))}

# (label, what it counts); the order is the order of the tables.
COUNTS = (
    ("n", N_("Scored"), N_("targets with both a usable verdict and human gold")),
    ("n_samples", N_("Samples"), N_("answers the scored targets belong to (the unit the bootstrap resamples)")),
    ("n_unparsed", N_("Unparsed verdicts"), N_("the judge gave no usable value (unparseable answer, or a call that failed for good)")),
    ("n_order_miss", N_("No verdict by the order rule"), N_("pairwise: the two presentation orders disagree and the task has no "
                                                      "tie, or one order was not judged")),
    ("n_no_gold", N_("No human gold"), N_("a verdict but no human gold (ties included)")),
    ("n_ties", N_("Ties"), N_("annotators split evenly and nobody adjudicated: no gold, listed for adjudication")),
    ("n_abstained", N_("Abstentions"), N_("the judge declined (such as not_applicable) a target whose gold is a checkable label: "
                                          "scored as a miss, included in Scored")),
    ("n_excluded_label", N_("Excluded label"), N_("the gold is a label left out of statistics (such as not_applicable)")),
    ("n_fewshot", N_("Few-shot examples"), N_("targets shown to the judge as examples in its prompt")),
    ("n_stale", N_("Stale labels"), N_("labels whose claim or context changed after they were given (an --update, a claim "
                                "re-extraction, an expert's claim edit): kept in the history, left out")),
)


# --------------------------------------------------------------------------- reasons


def local_decimals(text: str) -> str:
    """Return a number as a template wrote it ("0.469", "5,000") in the current locale's notation ("0,469", "5.000")."""
    locale = i18n.current().locale
    if locale == i18n.DEFAULT_LOCALE:
        return text
    from babel.numbers import get_decimal_symbol, get_group_symbol  # noqa: PLC0415 - as in i18n.Translator.number

    return "".join(get_decimal_symbol(locale) if c == "." else get_group_symbol(locale) if c == "," else c for c in text)


def reason_text(block: Any, key: str = "note") -> str:
    """Return a JSON block's note in the reader's language, worded from its reason's code and figures.

    `key` names the note (`note`, `judge_note`, …; its reason is the key with `reason` for `note`).
    The English note is shown as it is only when the reason is missing or its code unknown (a report
    written by another version): a note is never parsed, matched or translated as a string.
    """
    if not isinstance(block, dict):
        return ""
    reason = block.get(key[: -len("note")] + "reason")
    if reasons.known(reason):
        catalog = i18n.current().catalog
        return reasons.word(reason, gettext=catalog.gettext, ngettext=catalog.ngettext, localize=local_decimals)
    return str(block.get(key) or "")


# --------------------------------------------------------------------------- numbers


def finite(value: Any) -> bool:
    """Return whether `value` is a number that can be shown (not None, a bool, NaN or infinite)."""
    return value is not None and not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def number(value: Any, digits: int = DIGITS) -> str:
    """Return `value` with `digits` decimals in the current locale ("0.861", "0,861"), or "undefined" (translated)."""
    if not finite(value):
        return i18n.gettext("undefined")
    text = f"{value:.{digits}f}"
    if float(text) == 0:  # never show "-0.000"
        text = f"{0:.{digits}f}"
    return i18n.current().number(float(text), digits)


def interval(ci: Any, digits: int = DIGITS) -> str:
    """Return "[low, high]", or "no interval" when there is none (in Spanish the bounds are separated by "; ")."""
    if not ci or len(ci) != 2 or not all(finite(v) for v in ci):
        return i18n.gettext("no interval")
    # A decimal comma would make "[0,1, 0,2]" ambiguous: Spanish separates the bounds with a semicolon.
    separator = ", " if i18n.current().locale == i18n.DEFAULT_LOCALE else "; "
    return f"[{number(ci[0], digits)}{separator}{number(ci[1], digits)}]"


def p_value(p: Any) -> str:
    """Return a p-value as text ("< 0.001" below a thousandth), or "" when there is none."""
    if not finite(p):
        return ""
    return "< " + i18n.current().number(0.001, 3) if p < 0.001 else i18n.current().number(p, 3)


def percent(value: Any) -> str:
    """Return a proportion as a percentage with one decimal, or "undefined"."""
    if not finite(value):
        return i18n.gettext("undefined")
    return i18n.current().percent(value, 1)


def confidence_level(conf: float) -> str:
    """Return a confidence level as a percentage in the reader's notation ("95%", "95 %")."""
    digits = 0 if float(f"{100 * conf:g}").is_integer() else 1
    return i18n.current().percent(conf, digits)


def ci_label(conf: float) -> str:
    """Return a CI's name with its level, e.g. "95% CI" ("IC 95 %")."""
    return i18n.gettext("%(level)s CI", level=confidence_level(conf))


def confidence_text(data: dict) -> str:
    """Return the CI level of a report's bootstrap as text, e.g. "95% CI" ("IC 95 %")."""
    return ci_label((data.get("method") or {}).get("bootstrap", {}).get("confidence", 0.95))


def noun(target: str, count: int | None = None) -> str:
    """Return the word for a task's targets ("claims"), singular when `count` is 1."""
    one, many = TARGET_NOUNS.get(target, (N_("target"), N_("targets")))
    return i18n.gettext(one if count == 1 else many)


# --------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class Stat:
    """One row of a statistics table."""

    key: str
    name: str
    value: str
    ci: str
    p: str
    note: str
    defined: bool
    alignment: bool = False


def _stat(key: str, est: Any, *, name: str | None = None, alignment: bool = False, as_percent: bool = False) -> Stat:
    """Return the table row of an estimate dict ({"value", "ci", "status", "note", "p_value"}) or a bare number."""
    if not isinstance(est, dict):
        est = {"value": est, "status": "ok" if est is not None else "undefined"}
    value = est.get("value")
    text = percent(value) if as_percent else number(value)
    note = reason_text(est)
    if not finite(value) and not note:
        note = i18n.gettext("no data") if est.get("status") == "no_data" else i18n.gettext("the statistic has no value for these data")
    return Stat(key=key, name=name or i18n.gettext(METRIC_NAMES.get(key, key)), value=text,
                ci=interval(est.get("ci")) if "ci" in est else "", p=p_value(est.get("p_value")),
                note=note, defined=finite(value), alignment=alignment)


def statistics(section: dict) -> list[Stat]:
    """Return the judge–gold statistics of a task section, the alignment statistic first."""
    metric = (section.get("alignment") or {}).get("metric")
    rows: list[Stat] = []
    if labelled(section):
        if "cohen_kappa" in section:
            rows.append(_stat("cohen_kappa", section["cohen_kappa"], alignment=metric == "cohen_kappa"))
        if "percent_agreement" in section:
            rows.append(_stat("percent_agreement", section["percent_agreement"], as_percent=True))
    else:
        for key in ("spearman_rho", "kendall_tau", "pearson_r", "weighted_kappa"):
            if key in section:
                rows.append(_stat(key, section[key], alignment=metric == key))
    rows.sort(key=lambda s: not s.alignment)
    return rows


def grouped(section: dict) -> list[Stat]:
    """Return the grouped (averaged over groups) statistics beside nothing else; empty without grouping."""
    info = section.get("grouped")
    if not info:
        return []
    return [_stat(key, info[key]) for key in ("cohen_kappa", "spearman_rho", "kendall_tau", "pearson_r") if key in info]


def per_group(section: dict) -> list[dict]:
    """Return each group's own alignment statistic as text (`grouped.per_group`): group, n, value, CI, note."""
    info = section.get("grouped") or {}
    return [{"group": "(no value)" if g.get("group") is None else str(g["group"]), "n": g.get("n", 0),
             "value": number(g.get("value")), "ci": interval(g.get("ci")) if g.get("ci") else "—",
             "note": reason_text(g)} for g in info.get("per_group") or []]


def pooled(section: dict, key: str) -> str:
    """Return the pooled value of a statistic as text (to show beside its grouped average)."""
    est = section.get(key)
    return percent(est) if key == "percent_agreement" else number(est.get("value") if isinstance(est, dict) else est)


def counts(section: dict) -> list[tuple[str, str, int, str]]:
    """Return (key, label, count, meaning) for the counts present in a section."""
    return [(key, i18n.gettext(label), int(section[key]), i18n.gettext(meaning)) for key, label, meaning in COUNTS
            if key in section and (key != "n_abstained" or "alignment" in section)]  # abstentions: a judge's only


def claim_sources(info: dict) -> str:
    """Return which claim sets a section used, in words ("segmenter: 40 answers; claims@2: 12 answers"), or ""."""
    sources = info.get("claim_sources") or {}
    return "; ".join(f"{source}: " + i18n.ngettext("%(num)s answer", "%(num)s answers", n) for source, n in sources.items())


def excluded_total(section: dict) -> int:
    """Return how many targets with a verdict were left out of the statistics."""
    return sum(int(section.get(k) or 0) for k in ("n_unparsed", "n_order_miss", "n_no_gold", "n_excluded_label", "n_fewshot"))


def labelled(section: dict) -> bool:
    """Whether a section's values are labels scored with κ (categorical and pairwise tasks)."""
    return section.get("kind") in LABEL_KINDS


# --------------------------------------------------------------------------- pairwise: presentation order


ORDER_RULES = {
    "consistent": "consistent: the verdict both presentation orders give; when they disagree, a tie if the task has "
                  "one, else no verdict (Zheng et al. 2023)",
    "original": "original: the verdict in the original presentation order",
}


def localisation(section: dict) -> list[tuple[str, str, str, str]]:
    """Return a step task's `localisation` block as (key, label, value, note) rows; empty for other tasks."""
    block = section.get("localisation")
    if not isinstance(block, dict):
        return []
    rows = []
    for key, label in (("exact", i18n.gettext("Same first wrong step as the experts")),
                       ("within_1", i18n.gettext("First wrong step within one step of the experts'"))):
        share = block.get(key) or {}
        rows.append((key, label, percent(share.get("value")), f"{interval(share.get('ci'))}, n = {share.get('n', 0)}"))
    of = i18n.gettext("of %(n)s trajectories", n=block.get("n_trajectories", 0))
    rows += [("n_only_gold", i18n.gettext("Only the experts found a wrong step"), str(block.get("n_only_gold", 0)), of),
             ("n_only_judge", i18n.gettext("Only the judge found a wrong step"), str(block.get("n_only_judge", 0)), of),
             ("n_neither", i18n.gettext("Neither found a wrong step"), str(block.get("n_neither", 0)), of)]
    return rows


def position(section: dict) -> list[tuple[str, str, str, str]]:
    """Return a pairwise section's position block as (key, label, value, note) rows; empty for other tasks."""
    block = section.get("position")
    if not isinstance(block, dict):
        return []
    _ = i18n.gettext
    rows: list[tuple[str, str, str, str]] = []
    orders = block.get("orders") or []
    if "order_rule" in section:
        rows.append(("order_rule", _("Order rule of the alignment"), str(section["order_rule"]),
                     "" if len(orders) > 1 else _("the judge has one order: it is used under either rule")))
    rows.append(("orders", _("Orders judged"), ", ".join(_(order) for order in orders) or _("none"), ""))
    if len(orders) > 1:
        kappa = block.get("kappa") or {}
        flips_p = p_value(block.get("position_p_value"))
        rows += [
            ("n_pairs", _("Pairs"), _("%(n)s of %(total)s", n=block.get("n_pairs", 0), total=block.get("n_targets", 0)),
             _("targets with two responses and a usable verdict in both orders")),
            ("agreement", _("Same verdict in both orders"), percent(block.get("agreement")),
             _("a position-proof judge: %(all)s", all=i18n.current().percent(1.0, 0))),
            ("kappa", _("Cohen's κ between the orders"), number(kappa.get("value")), reason_text(kappa)),
            ("first_position_rate", _("Picks the response shown first"), percent(block.get("first_position_rate")),
             _("of the non-tie verdicts of the pairs; neutral: %(half)s; ties: %(ties)s", half=i18n.current().percent(0.5, 0),
               ties=percent(block.get("tie_rate")))),
            ("flips", _("Same slot twice (first / second)"), f"{block.get('n_first_both', 0)} / {block.get('n_second_both', 0)}",
             _("sign test p = %(p)s", p=flips_p) if flips_p else _("sign test p = undefined (no flips)")),
            ("n_unusable", _("Unusable verdicts"), str(block.get("n_unusable", 0)),
             _("%(original)s original, %(swapped)s swapped: never agreeing", original=block.get("n_unusable_original", 0),
               swapped=block.get("n_unusable_swapped", 0))),
        ]
        for kind, label in (("original", N_("Cohen's κ with the gold, original order")),
                            ("swapped", N_("Cohen's κ with the gold, swapped order"))):
            align = block.get(f"alignment_{kind}") or {}
            rows.append((f"alignment_{kind}", _(label), number(align.get("value")),
                         f"{interval(align.get('ci'))}, n = {align.get('n', 0)}"
                         + (f"; {reason_text(align)}" if align.get("note") else "")))
    elif block.get("note"):
        rows.append(("note", _("Position bias"), _("undefined"), reason_text(block)))
    rows.append(("human_first_position_rate", _("Annotators pick the response shown first"),
                 percent(block.get("human_first_position_rate")),
                 _("of %(n)s non-tie labels made with a recorded order (each annotator sees the responses in an order of "
                   "their own)", n=block.get("n_human_with_order", 0))))
    return rows


def position_methods(data: dict) -> str:
    """Return how pairwise tasks are scored and their position bias measured, or "" when the report has none."""
    rule = (data.get("method") or {}).get("order_rule")
    if not rule:
        return ""
    return i18n.gettext(
        "A pairwise task's value names the better response by its id, or tie. A judge may see the responses in the "
        "original order and in the swapped (reversed) order; its alignment with the gold uses one verdict per target "
        "by the order rule %(rule)s. A judge with verdicts in one order only is scored on that "
        "order under either rule. Targets left without a verdict by the rule are counted, never scored. Position bias "
        "compares the two orders on the targets with two responses and a usable verdict in both (an unusable verdict "
        "never agrees with anything): agreement and Cohen's κ between the orders, the share of non-tie verdicts that "
        "pick the response shown first (pooled over both orders, so a judge without position bias scores 50%%), and an "
        "exact sign test on the pairs where the judge picked the same slot twice. The annotators' own first-position "
        "rate comes from the order each of them was shown.", rule=ORDER_RULES.get(rule, rule))


# --------------------------------------------------------------------------- human ceiling


@dataclass(frozen=True)
class Ceiling:
    """The human–human agreement a task's judge is set beside (the same statistic as its alignment)."""

    name: str
    value: float | None
    note: str
    ci: list | None = None
    why: str = ""  # which figure and why (the reader's language)

    @property
    def text(self) -> str:
        """The value, with its CI when it has one (the pooled α)."""
        return f"{number(self.value)} {interval(self.ci)}" if self.value is not None and self.ci else number(self.value)


CEILING_METRICS = {"mean_pairwise_kappa": N_("mean pairwise Cohen's κ"), "mean_pairwise_spearman": N_("mean pairwise Spearman's ρ"),
                   "krippendorff_alpha_nominal": N_("Krippendorff's α (nominal)"),
                   "krippendorff_alpha_ordinal": N_("Krippendorff's α (ordinal)"),
                   "krippendorff_alpha_interval": N_("Krippendorff's α (interval)")}


def ceiling(section: dict) -> Ceiling | None:
    """Return the task's human–human ceiling (`human.ceiling`), or None without humans.

    The report computes the one figure (calibration/sections.py, `human_ceiling`): the mean
    pairwise Cohen's κ (Spearman's ρ for scores) when every annotator pair shares at least
    `--min-shared` targets, else the pooled Krippendorff's α at the task's level of measurement.
    A report without `human.ceiling` (older JSON) falls back to the mean of the listed pairs.
    """
    human = section.get("human")
    if not human:
        return None
    block = human.get("ceiling")
    if isinstance(block, dict):
        metric = str(block.get("metric") or "")
        name = i18n.gettext(CEILING_METRICS[metric]) if metric in CEILING_METRICS else metric
        value = block["value"] if finite(block.get("value")) else None
        return Ceiling(name=name, value=value, note=reason_text(block, "why") if value is None else "", ci=block.get("ci"),
                       why=reason_text(block, "why"))
    categorical = labelled(section)
    pairs = human.get("pairwise_kappa" if categorical else "pairwise_spearman") or []
    values = [p["value"] for p in pairs if finite(p.get("value"))]
    stat = i18n.gettext("Cohen's κ") if categorical else i18n.gettext("Spearman's ρ")
    if values:
        return Ceiling(name=i18n.ngettext("mean pairwise %(stat)s (%(num)s pair)", "mean pairwise %(stat)s (%(num)s pairs)",
                                          len(values), stat=stat), value=sum(values) / len(values), note="")
    note = reason_text(human) or i18n.gettext("no pair of annotators shares a target")
    return Ceiling(name=i18n.gettext("pairwise %(stat)s", stat=stat), value=None, note=note)


def human_statistics(section: dict) -> list[Stat]:
    """Return the human–human agreement statistics of a section (Fleiss, Krippendorff)."""
    human = section.get("human") or {}
    rows = []
    if "fleiss_kappa" in human:
        rows.append(_stat("fleiss_kappa", human["fleiss_kappa"]))
    for level in ("nominal", "ordinal", "interval"):
        est = (human.get("krippendorff_alpha") or {}).get(level)
        if est is not None:
            rows.append(_stat(f"krippendorff_{level}", est))
    return rows


def pairwise(section: dict) -> list[dict]:
    """Return the annotator pairs with their agreement as text (κ for categories, ρ for scores)."""
    human = section.get("human") or {}
    pairs = human.get("pairwise_kappa") if labelled(section) else human.get("pairwise_spearman")
    return [{"a": p.get("a"), "b": p.get("b"), "n": p.get("n", 0), "value": number(p.get("value")),
             "note": reason_text(p)} for p in pairs or []]


def per_annotator(section: dict) -> list[dict]:
    """Return each annotator's agreement with the judge as text."""
    key = "cohen_kappa" if labelled(section) else "spearman_rho"
    out = []
    for row in section.get("per_annotator") or []:
        est = row.get(key) or {}
        out.append({"annotator": row.get("annotator"), "n": row.get("n", 0), "value": number(est.get("value")),
                    "note": reason_text(est), "percent_agreement": percent(row.get("percent_agreement"))
                    if "percent_agreement" in row else ""})
    return out


def judge_note(section: dict, data: dict) -> str:
    """Return why the judge cannot be compared on a task (no verdicts, none usable), or ""."""
    if data.get("judge") is None:
        return ""
    if section.get("judge_note"):
        return reason_text(section, "judge_note")
    metric = (section.get("alignment") or {}).get("metric") or ("cohen_kappa" if labelled(section) else "spearman_rho")
    estimate = section.get(metric) if isinstance(section.get(metric), dict) else {}
    return reason_text(estimate) if estimate.get("status") == "no_data" else ""


# --------------------------------------------------------------------------- thresholds (the decisions' wording: reports/decisions.py)


def has_interval(ci: Any) -> bool:
    """Return whether `ci` is an interval that can be shown (two finite bounds)."""
    return bool(ci) and len(ci) == 2 and all(finite(v) for v in ci)


def threshold_text(threshold: Any) -> str:
    """Return a threshold as written ("0.75"; "0,75" in Spanish), with no trailing zeros."""
    if not finite(threshold):
        return str(threshold)
    text = f"{threshold:g}"
    return text if i18n.current().locale == i18n.DEFAULT_LOCALE else text.replace(".", ",")


def threshold_rule(data: dict) -> str:
    """Return the threshold rule of the report in one sentence."""
    t = threshold_text(data.get("threshold"))
    if data.get("ci_lower"):
        return i18n.gettext("A task passes when the lower bound of the confidence interval of its alignment statistic (Cohen's κ for "
                            "categorical and pairwise tasks, Spearman's ρ for ordinal and continuous ones) is at least %(threshold)s.",
                            threshold=t)
    return i18n.gettext("A task passes when its alignment statistic (Cohen's κ for categorical and pairwise tasks, Spearman's ρ for "
                        "ordinal and continuous ones) is at least %(threshold)s.", threshold=t)


# --------------------------------------------------------------------------- the Alternative Annotator Test


def alt_test_verdict(block: dict | None) -> tuple[str, str]:
    """Return the answer to "could the judge replace an expert?" ("yes", "no" or "—") and why, in one sentence."""
    if not block:
        return "—", i18n.gettext("not computed")
    if block.get("status") != "ok":
        return "—", reason_text(block) or i18n.gettext("the alt-test is undefined here")
    rejected = sum(1 for a in block.get("annotators") or [] if a.get("rejected"))
    tested = int(block.get("n_annotators") or 0)
    why = (f"winning rate ω = {number(block.get('winning_rate'))} ({rejected} of {tested} tested annotators beaten at "
           f"ε = {block.get('epsilon'):g}, α = {block.get('alpha'):g}; passes at ω ≥ 0.5); advantage probability "
           f"ρ = {number(block.get('advantage_prob'))}; {block.get('n_items')} items, {block.get('scoring')} scoring")
    return ("yes" if block.get("passed") else "no"), why


def alt_test_rows(block: dict) -> list[dict]:
    """Return each tested annotator's line as text: n, p-value, rejected, the two win rates."""
    return [{"annotator": str(a.get("annotator")), "n": a.get("n"), "p": p_value(a.get("p_value")) or "undefined",
             "rejected": "yes" if a.get("rejected") else "no", "judge": number(a.get("judge_win_rate")),
             "annotator_rate": number(a.get("annotator_win_rate"))} for a in block.get("annotators") or []]


def alt_test_context(block: dict, top: Ceiling | None = None) -> dict:
    """Return what templates/reports/_alt_test_body.html shows for one `alt_test` block.

    `top`: the task's human–human ceiling (`ceiling`), shown beside the test as the report's one figure.
    """
    answer, why = alt_test_verdict(block)
    return {"block": block, "answer": answer, "why": why, "rows": alt_test_rows(block),
            "skipped": int(block.get("n_skipped") or 0), "note": reason_text(block),
            "ceiling": top if top is not None and top.value is not None else None}


# --------------------------------------------------------------------------- methods and provenance


BOOTSTRAP_METHODS = {"percentile": N_("percentile"), "bca": N_("bias-corrected and accelerated (BCa)")}


def methods(data: dict) -> list[tuple[str, str]]:
    """Return the methods text as (heading, paragraph) pairs, with this report's settings."""
    _ = i18n.gettext
    boot = (data.get("method") or {}).get("bootstrap") or {}
    n_res = boot.get("n_resamples", "?")
    conf = boot.get("confidence", 0.95)
    method = _(BOOTSTRAP_METHODS[boot.get("method")]) if boot.get("method") in BOOTSTRAP_METHODS else str(boot.get("method"))
    ci_lower = (" " + _("The lower bound of the confidence interval, not the estimate, must reach the threshold (--ci-lower).")
                if data.get("ci_lower") else "")
    return [
        (_("Human gold"),
         _("Each target (a claim, a retrieved context or a whole answer) gets one gold value. For categorical tasks "
           "it is the adjudicated label when an adjudicator decided one, otherwise the majority of the annotators' "
           "current labels; a tie gives no gold (the target is listed for adjudication and counted under ties). For "
           "ordinal and continuous tasks it is the adjudicated value, otherwise the mean of the annotators' values. "
           "Labels whose claim or context changed after they were given (stale labels) are ignored.")),
        (_("What is excluded, and why"),
         _("A target is scored when it has both a usable verdict and human gold. Left out and counted: verdicts "
           "that could not be parsed or whose call failed (unparsed), since there is no judgement to compare; "
           "targets with a verdict but no gold (no gold, ties included), since there is nothing to compare with; "
           "targets whose gold or verdict is a label the task excludes from statistics, such as not_applicable "
           "(excluded label), since they are not claims that can be checked; and targets shown to the judge as "
           "few-shot examples in its prompt (few-shot), since the judge has seen their answers.")),
        (_("Judge–human agreement"),
         _("Categorical tasks: Cohen's κ between the judge and the gold (chance-corrected agreement), percent "
           "agreement, the confusion matrix and precision, recall and F1 per label. Ordinal and continuous tasks: "
           "Spearman's ρ, Kendall's τ-b and Pearson's r between the judge and the gold, and quadratic weighted κ "
           "when both are integers on the task's scale. With grouping, each statistic is also computed within "
           "every group and averaged over the groups where it is defined (groups where either side is constant are "
           "skipped and counted).")),
        (_("Human–human ceiling"),
         _("Over the targets labelled by two or more annotators: pairwise Cohen's κ (Spearman's ρ for scores), "
           "Fleiss' κ and Krippendorff's α (nominal for categories; ordinal and interval for scores). It shows how "
           "far experts agree with each other, the level a judge can be expected to reach. The judge is compared "
           "with the gold, which pools several annotators and is less noisy than any one of them, so a judge can "
           "exceed the pairwise human figure.")),
        (_("Confidence intervals"),
         _("%(level)s %(method)s bootstrap intervals from %(n)s resamples (seed %(seed)s). "
           "The bootstrap resamples whole samples (answers) with all their claims or contexts, a cluster "
           "bootstrap, because the claims of one answer are not independent. Human–human statistics have no "
           "interval.", level=confidence_level(conf), method=method, n=n_res, seed=boot.get("seed", "?"))),
        (_("Decision"),
         threshold_rule(data) + ci_lower + " "
         + _("A statistic that is undefined gives no decision for its task, and the "
             "report then does not pass. The report passes when every task passes. \"Labels needed\" assumes the "
             "interval's half-width shrinks as 1/√n around an unchanged estimate, and says roughly how many more "
             "labelled targets would be expected to settle a task whose interval straddles the threshold.")),
        *([(_("Pairwise tasks and presentation order"), position_methods(data))] if position_methods(data) else []),
    ]


def labels_needed_text(section: dict) -> str:
    """Return the section's `labels_needed` in the reader's language, worded from its reason ("" when there is none)."""
    needed = section.get("labels_needed")
    return reason_text(needed) if isinstance(needed, dict) else ""


def provenance(data: dict) -> list[tuple[str, str]]:
    """Return the dataset's provenance as (field, text) pairs."""
    prov = data.get("provenance") or {}
    rows = [(i18n.gettext("Dataset"), str(data.get("dataset") or "")),
            (i18n.gettext("Description"), str(prov.get("description") or i18n.gettext("none given"))),
            (i18n.gettext("Source"), str(prov.get("source") or i18n.gettext("not recorded"))),
            (i18n.gettext("Samples in the dataset"), str(prov.get("n_samples", "unknown")))]
    if prov.get("is_demo"):
        rows.append((i18n.gettext("Demo data"), i18n.gettext("yes: bundled synthetic demo data, not a real evaluation")))
    judge = data.get("judge")
    rows.append((i18n.gettext("Judge"), f"{judge} ({prov.get('judge_kind') or 'unknown kind'})" if judge is not None else "none"))
    golden = data.get("golden")
    if golden:  # `--golden`: every decision of the report was made on this version's members
        changed = (f"; {i18n.gettext('the gold of %(n)s of its %(total)s members changed since')}"
                   % {"n": golden.get("gold_changed"), "total": golden.get("n_items")} if golden.get("gold_changed") else "")
        rows.append((i18n.gettext("Golden set"), f"{golden['name']}@{golden['version']} (sha256 {golden['hash']}){changed}"))
    return rows


def scale(bounds: Any) -> str:
    """Return a task's scale as text ("1–5"), or "" without one."""
    if not bounds or len(bounds) != 2 or any(number(v) == "undefined" for v in bounds):
        return ""
    return "–".join(f"{float(v):g}" for v in bounds)


def golden_citation(result: dict) -> str:
    """Return "Golden set NAME@V (sha256 HASH)" of a result made with `--golden`, in the reader's language ("" without)."""
    golden = result.get("golden")
    if not golden:
        return ""
    return f"{i18n.gettext('Golden set')} {golden['name']}@{golden['version']} (sha256 {golden['hash']})"


def md_text(text: Any) -> str:
    """Return text safe in a Markdown table cell or line: Markdown's special characters escaped, on one line."""
    out = str(text)
    for ch in "\\`*_[]<>|":
        out = out.replace(ch, "\\" + ch)
    return out.replace("\n", " ")

