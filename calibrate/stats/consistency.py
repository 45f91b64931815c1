"""Self-consistency of a judge asked K times per target: flips, agreement among runs, majority vote.

A judge called ``K`` times on the same target (temperature above zero, or a different sample
index) gives ``K`` verdicts.  How often they differ, and how much of their agreement is beyond
chance, says how much a single verdict can be trusted; the majority of the ``K`` verdicts is
often a better rater than one of them (Wang et al. 2023, self-consistency).

For target ``t`` with verdicts ``v_{t,1..K_t}`` (missing runs dropped):

flip rate
    share of targets with ``K_t ≥ 2`` whose verdicts are not all equal, with a Wilson score
    interval.
Fleiss' kappa among the runs
    the ``K`` runs as ``K`` raters (:func:`calibrate.stats.reliability.fleiss_kappa`).
majority
    the most frequent verdict; a tie goes to the tied verdict that came first (with ``K = 2``
    a disagreement keeps the first run's verdict).  ``n_ties`` counts the ties.
first
    the first run's verdict: the one a single call would have given.

``kappa_single`` (first vs gold) and ``kappa_majority`` (majority vs gold) are Cohen's kappa
computed by the caller from ``first`` and ``majority``; :func:`self_consistency` computes them
when ``gold`` is given.

References
----------
.. [1] Wang, X., Wei, J., Schuurmans, D., Le, Q., Chi, E., Narang, S., Chowdhery, A. and Zhou,
   D. (2023). Self-consistency improves chain of thought reasoning in language models. ICLR.
.. [2] Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters.
   *Psychological Bulletin* 76(5), 378-382.
.. [3] Wilson, E. B. (1927). Probable inference, the law of succession, and statistical
   inference. *JASA* 22(158), 209-212.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from calibrate.reasons import Reason
from calibrate.stats._common import is_missing, to_list
from calibrate.stats.agreement import cohen_kappa
from calibrate.stats.reliability import fleiss_kappa
from calibrate.stats.result import Estimate, json_safe

__all__ = ["SelfConsistency", "flip_rate", "majority_vote", "self_consistency"]


def _runs(verdicts: Any) -> list[list]:
    """Return one list of present verdicts per target (missing runs dropped)."""
    return [[v for v in to_list(row) if not is_missing(v)] for row in to_list(verdicts)]


def majority_vote(verdicts: Any) -> tuple[list, int]:
    """Return (majority verdict per target, number of ties).

    Parameters
    ----------
    verdicts : sequence of sequences
        The ``K`` verdicts of each target (missing ones as ``None``/NaN).

    Returns
    -------
    tuple
        The majority verdict of each target (``None`` when it has no verdict; a tie goes to
        the tied verdict that came first) and the number of targets whose top count was tied.
    """
    out: list = []
    ties = 0
    for row in _runs(verdicts):
        if not row:
            out.append(None)
            continue
        counts = Counter(row)
        top = max(counts.values())
        tied = [v for v in counts if counts[v] == top]
        ties += len(tied) > 1
        out.append(next(v for v in row if counts[v] == top))
    return out, ties


def flip_rate(verdicts: Any, *, alpha: float = 0.05) -> Estimate:
    """Return the share of targets whose repeated verdicts are not all equal, with a Wilson interval.

    Parameters
    ----------
    verdicts : sequence of sequences
        The verdicts of each target's runs.
    alpha : float, default 0.05
        Error level of the Wilson score interval.

    Returns
    -------
    Estimate
        ``n`` = targets with at least two verdicts; ``extra``: ``n_flipped``,
        ``n_targets_skipped`` (fewer than two verdicts).  Undefined (``reason``
        ``too_few_runs``) when no target has two verdicts.
    """
    runs = _runs(verdicts)
    used = [row for row in runs if len(row) >= 2]
    skipped = len(runs) - len(used)
    if not used:
        return Estimate.undefined(0, Reason("too_few_runs"), n_targets_skipped=skipped)
    flipped = sum(len(set(row)) > 1 for row in used)
    from scipy import stats as sps  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)
    ci = sps.binomtest(flipped, len(used)).proportion_ci(confidence_level=1.0 - alpha, method="wilson")
    return Estimate(
        value=flipped / len(used),
        n=len(used),
        ci=(float(ci.low), float(ci.high)),
        extra={"n_flipped": flipped, "n_targets_skipped": skipped},
    )


@dataclass(frozen=True)
class SelfConsistency:
    """Self-consistency of K repeated verdicts per target (see the module docstring).

    Attributes
    ----------
    k : int
        The largest number of verdicts of any target.
    n_targets : int
        Targets with at least one verdict.
    flip_rate : Estimate
        :func:`flip_rate`.
    fleiss_kappa : Estimate
        Fleiss' kappa among the runs.
    first, majority : list
        The first run's verdict and the majority verdict per target (``None`` without one).
    n_ties : int
        Targets whose majority was a tie.
    kappa_single, kappa_majority : Estimate or None
        Cohen's kappa of ``first`` / ``majority`` against the gold (when gold was given).
    """

    k: int
    n_targets: int
    flip_rate: Estimate
    fleiss_kappa: Estimate
    first: list = field(repr=False)
    majority: list = field(repr=False)
    n_ties: int = 0
    kappa_single: Estimate | None = None
    kappa_majority: Estimate | None = None

    def to_dict(self) -> dict:
        """Return the report's ``self_consistency`` block (JSON-safe; no per-target lists)."""
        out: dict[str, Any] = {
            "k": self.k,
            "n_targets": self.n_targets,
            "flip_rate": self.flip_rate.to_dict(),
            "fleiss_kappa": self.fleiss_kappa.to_dict(),
            "n_ties": self.n_ties,
        }
        if self.kappa_single is not None:
            out["kappa_single"] = self.kappa_single.to_dict()
        if self.kappa_majority is not None:
            out["kappa_majority"] = self.kappa_majority.to_dict()
        return json_safe(out)


def self_consistency(verdicts: Any, *, gold: Any = None, labels: Any = None, alpha: float = 0.05) -> SelfConsistency:
    """Return the flip rate, Fleiss' kappa among runs and the majority vote of K verdicts per target.

    Parameters
    ----------
    verdicts : sequence of sequences
        For each target, its verdicts in run order (``verdicts[t][s]`` = run ``s``); targets may
        have different numbers of runs; ``None``/NaN = a failed run.
    gold : sequence, optional
        Gold label per target (``None`` = unlabelled); with it, ``kappa_single`` and
        ``kappa_majority`` are Cohen's kappa over the targets with gold and a verdict.
    labels : sequence, optional
        The label set (for Fleiss' and Cohen's kappa).
    alpha : float, default 0.05
        Error level of the flip rate's interval.

    Returns
    -------
    SelfConsistency
    """
    runs = _runs(verdicts)
    majority, ties = majority_vote(runs)
    first = [row[0] if row else None for row in runs]
    kappa = fleiss_kappa(runs, labels=labels) if any(runs) else Estimate.no_data(Reason("no_verdicts"))
    ks = kappa_ms = None
    if gold is not None:
        gold_list = to_list(gold)
        if len(gold_list) != len(runs):
            raise ValueError(f"gold must have one value per target ({len(gold_list)} for {len(runs)})")
        keep = [i for i, g in enumerate(gold_list) if not is_missing(g) and first[i] is not None]
        g = [gold_list[i] for i in keep]
        ks = cohen_kappa(g, [first[i] for i in keep], labels=labels)
        kappa_ms = cohen_kappa(g, [majority[i] for i in keep], labels=labels)
    return SelfConsistency(
        k=max((len(r) for r in runs), default=0),
        n_targets=sum(bool(r) for r in runs),
        flip_rate=flip_rate(runs, alpha=alpha),
        fleiss_kappa=kappa,
        first=first,
        majority=majority,
        n_ties=ties,
        kappa_single=ks,
        kappa_majority=kappa_ms,
    )
