"""What the HTML and Markdown reports say about the RAG and retrieval metrics, worded once (beside summary.py)."""

from __future__ import annotations

from dataclasses import dataclass

from calibrate import i18n
from calibrate.i18n import N_
from calibrate.reports.summary import claim_sources, has_interval, interval, number, reason_text

RAG_NAMES = {
    "faithfulness": N_("Faithfulness (share of supported claims per answer)"),
    "context_precision": N_("Context precision (rank-weighted, per answer)"),
}

# The metric in the headline sentence ("the judge overstates faithfulness by …").
RAG_WORDS = {"faithfulness": N_("faithfulness"), "context_precision": N_("context precision")}

RETRIEVAL_NAMES = {"recall_at_k": "Recall@K", "precision_at_k": "Precision@K", "f1_at_k": "F1@K", "mrr": "MRR", "ndcg_at_k": "nDCG@K"}

RETRIEVAL_SOURCES = {
    "ids": N_("the samples' retrieved_ids (ranked) and relevant_ids"),
    "context_relevance_gold": N_("the human gold of context_relevance (each answer's retrieved contexts in rank order; "
                                 "recall is relative to the relevant contexts that were retrieved)"),
}


def rag(data: dict) -> list[dict]:
    """Return the RAG metrics measured from the labels and from the judge, as text."""
    out = []
    for key, info in (data.get("rag") or {}).items():
        if not isinstance(info, dict):
            continue
        rho = info.get("spearman_rho")
        notes = [reason_text(rho)] if isinstance(rho, dict) and rho.get("note") else []
        if info.get("n_claims_no_gold"):
            notes.append(i18n.ngettext("%(num)s claim without human gold (ties, unlabelled) left out of the human value",
                                       "%(num)s claims without human gold (ties, unlabelled) left out of the human value",
                                       info["n_claims_no_gold"]))
        if info.get("n_claims_no_verdict"):
            notes.append(i18n.ngettext("%(num)s claim without a usable verdict counted as not supported in the judge's value",
                                       "%(num)s claims without a usable verdict counted as not supported in the judge's value",
                                       info["n_claims_no_verdict"]))
        if info.get("claim_sources"):
            notes.append(i18n.gettext("claim sets: %(sources)s", sources=claim_sources(info)))
        paired = info.get("paired") if isinstance(info.get("paired"), dict) else None
        out.append({
            "key": key, "name": i18n.gettext(RAG_NAMES[key]) if key in RAG_NAMES else key,
            "human": number(info.get("human_mean")), "n_human": info.get("n_human", ""),
            "judge": number(info.get("judge_mean")) if "judge_mean" in info else "",
            "n_judge": info.get("n_judge", ""),
            "n_paired": paired.get("n", 0) if paired else "",
            "difference": (f"{signed(paired.get('difference'))} {interval(paired.get('ci'))}"
                           if paired and paired.get("difference") is not None else ""),
            "headline": headline(key, paired) if paired else "",
            "rho": number(rho.get("value")) if isinstance(rho, dict) else "",
            "rho_note": "; ".join(notes),
        })
    return out


def signed(value: float | None) -> str:
    """Return a difference with its sign ("+0.150", "−0.060")."""
    text = number(value)
    return text if value is None or text.startswith("-") or float(value) == 0 else "+" + text


def headline(key: str, paired: dict) -> str:
    """Return the RAG block's comparison in one sentence, from `paired` (the answers that have both values): does the
    judge overstate or understate the metric, by how much, and is the paired interval clear of 0."""
    n = int(paired.get("n") or 0)
    metric = i18n.gettext(RAG_WORDS[key]) if key in RAG_WORDS else key
    if not n or paired.get("difference") is None:
        return i18n.gettext("No answer has both a human and a judge value of %(metric)s: the two means are not compared.",
                            metric=metric)
    figures = dict(num=n, metric=metric, diff=number(abs(paired["difference"])), ci=interval(paired.get("ci")),
                   judge=number(paired.get("judge_mean")), human=number(paired.get("human_mean")))
    ci = paired.get("ci")
    clear = has_interval(ci) and (ci[0] > 0 or ci[1] < 0)
    if clear and paired["difference"] > 0:
        return i18n.ngettext("On the %(num)s answer with both values, the judge overstates %(metric)s by %(diff)s %(ci)s "
                             "(judge %(judge)s, experts %(human)s).",
                             "On the %(num)s answers with both values, the judge overstates %(metric)s by %(diff)s %(ci)s "
                             "(judge %(judge)s, experts %(human)s).", n, **figures)
    if clear:
        return i18n.ngettext("On the %(num)s answer with both values, the judge understates %(metric)s by %(diff)s %(ci)s "
                             "(judge %(judge)s, experts %(human)s).",
                             "On the %(num)s answers with both values, the judge understates %(metric)s by %(diff)s %(ci)s "
                             "(judge %(judge)s, experts %(human)s).", n, **figures)
    return i18n.ngettext("On the %(num)s answer with both values, the judge's %(metric)s (%(judge)s) and the experts' "
                         "(%(human)s) differ by %(diff)s, an interval %(ci)s that does not settle a direction.",
                         "On the %(num)s answers with both values, the judge's %(metric)s (%(judge)s) and the experts' "
                         "(%(human)s) differ by %(diff)s, an interval %(ci)s that does not settle a direction.", n, **figures)


@dataclass(frozen=True)
class Retrieval:
    """The report's retrieval metrics as text, with what they were computed from."""

    k: str
    n: int
    n_no_relevant: int
    n_skipped: int
    source: str
    rows: list[tuple[str, str, str]]

    @property
    def summary(self) -> str:
        """Return one sentence: the source, the samples averaged and those left out."""
        parts = [i18n.ngettext("Mean over %(num)s sample with a relevant document, at K = %(k)s, from %(source)s.",
                               "Mean over %(num)s samples with a relevant document, at K = %(k)s, from %(source)s.",
                               self.n, k=self.k, source=self.source)]
        if self.n_no_relevant:
            parts.append(i18n.ngettext("%(num)s sample has no relevant document: left out of the means (undefined, not zero).",
                                       "%(num)s samples have no relevant document: left out of the means (undefined, not zero).",
                                       self.n_no_relevant))
        if self.n_skipped:
            parts.append(i18n.ngettext("%(num)s sample has no relevance data and is not counted.",
                                       "%(num)s samples have no relevance data and are not counted.", self.n_skipped))
        return " ".join(parts)


def retrieval(data: dict) -> Retrieval | None:
    """Return the retrieval metrics as text (name with K, value, key), or None when the report has none."""
    info = data.get("retrieval")
    if not isinstance(info, dict):
        return None
    k = str(info.get("k", "K"))
    rows = [(name.replace("@K", f"@{k}"), number(info.get(key)), key) for key, name in RETRIEVAL_NAMES.items() if key in info]
    key = info.get("source")
    source = i18n.gettext(RETRIEVAL_SOURCES[key]) if key in RETRIEVAL_SOURCES else str(key or "unknown")
    return Retrieval(k=k, n=int(info.get("n") or 0), n_no_relevant=int(info.get("n_no_relevant") or 0),
                     n_skipped=int(info.get("n_skipped") or 0), source=source, rows=rows)


def rag_methods(data: dict) -> str:
    """Return how the RAG and retrieval metrics are defined, or "" when the report has none."""
    parts = []
    if data.get("rag"):
        parts.append(i18n.gettext(
            "Faithfulness of an answer is its supported claims divided by its claims (Es et al. 2023, RAGAS): for "
            "the judge the denominator is every claim of the answer, so a claim whose verdict failed or is missing "
            "counts as not supported; for the human gold it is the claims with gold (a tie is unknown, not "
            "unsupported). Claims labelled not_applicable and few-shot examples are left out of both. Context "
            "precision is (1/R) Σ_k precision@k · rel_k over the ranks k of the retrieved contexts, R the relevant "
            "ones; a context without a judgement counts as not relevant at its rank, and an answer with no relevant "
            "context scores 0."))
    info = data.get("retrieval")
    if isinstance(info, dict):
        parts.append(i18n.gettext(
            "Retrieval at K = %(k)s: Recall@K = relevant in the top K / relevant; Precision@K = relevant "
            "in the top K / K; F1@K their harmonic mean; MRR the mean of 1 / rank of the first relevant document "
            "over the whole ranking; nDCG@K with binary gain and the log2 discount, the ideal DCG over "
            "min(relevant, K) documents (Järvelin & Kekäläinen 2002). A sample without any relevant document has no "
            "value and is left out of the means (counted).", k=info.get("k")))
    return " ".join(parts)


def methods(data: dict) -> list[tuple[str, str]]:
    """Return the methods paragraph of the RAG and retrieval metrics as (heading, paragraph), none without them."""
    text = rag_methods(data)
    return [(i18n.gettext("RAG and retrieval metrics"), text)] if text else []
