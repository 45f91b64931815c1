"""The options of a calibration report (`calibrate report`, `gate`, `compare`, the dashboard)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Options:
    """What a report computes and how: the pass threshold, the bootstrap, grouping, the split, the label budget."""

    threshold: float = 0.75
    ci_lower: bool = False
    group_by: str | None = None
    bootstrap: int = 2000
    confidence: float = 0.95
    seed: int = 0
    ci_method: str = "percentile"
    k: int = 10
    split: str | None = None  # only the samples of this split (train, dev, test); None: every sample
    # Annotator pairs sharing fewer targets are counted (human.n_pairs_sparse), not listed.
    min_shared: int = 10
    budget_half_width: float = 0.05  # the CI half-width the label budget aims at
    # Pairwise tasks: a judge's one verdict per target from its two presentation orders
    # (calibration/pairwise.py): "consistent" (both orders agree, else tie or a miss) or "original".
    order_rule: str = "consistent"
    # --golden NAME[@v] (calibrate/loop/golden.py): only the samples of that version's members, and the citation
    # {name, version, hash, n_items, gold_changed} every decision made on them carries (the report's `golden`).
    sample_ids: frozenset[int] | None = None
    golden: dict | None = None

    # Only what a decision needs (`calibrate gate`): each task's n, counts, alignment with its CI and decision.
    # build_report then skips the human–human blocks, per-label, per-annotator and grouped figures, the other
    # correlations, the alt-test, the position block, the RAG, retrieval and claim-set sections and the warnings.
    decision_only: bool = False

    def restrict(self, in_split: set[int] | None) -> set[int] | None:
        """Return the samples a computation covers: the split's (None: every sample), within the golden members."""
        if self.sample_ids is None:
            return in_split
        return set(self.sample_ids) if in_split is None else in_split & self.sample_ids
