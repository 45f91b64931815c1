"""Candidates scored on one split by the dashboard's rule, each with its lower bound adjusted for the looks.

`score_candidates` is what `calibrate optimise` selects with (loop/optimise.py): every candidate
is scored on the targets common to all of them, misses counted (`common.score_versions`, the
dashboard's and `report --versions`' rule, so its value, CI and n are the dashboard's), and gets
`lower_adjusted`: its lower confidence bound adjusted for `looks`, the number of versions ever
scored on that split (the candidates among them). The candidates' values on the common targets
(`common.scored_targets`) are resampled together on one cluster-bootstrap index matrix (the one
`cluster_bootstrap_kappa` draws for the same seed), and `stats.selection_lower_bounds` reads the
adjusted bounds from them (Bonferroni, or the max-statistic bootstrap; docs/statistics.md §19).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sqlmodel import Session

from calibrate import stats
from calibrate.calibration.common import VersionScores, score_versions, scored_targets
from calibrate.calibration.options import Options
from calibrate.calibration.report import alignment_frames
from calibrate.stats import ADJUSTMENTS


@dataclass
class CandidateScores:
    """The candidates on their common targets: the dashboard's figures and each one's adjusted lower bound."""

    scores: VersionScores
    lower_adjusted: dict[str, float | None] = field(default_factory=dict)
    level: float | None = None  # the quantile of each candidate's resamples its bound was read at
    looks: int = 0
    adjustment: str = "max_statistic"
    n_resamples: int = 0


def score_candidates(session: Session, dataset_name: str, task_name: str, judge_names: list[str], *, looks: int,
                     options: Options, adjustment: str = "max_statistic") -> CandidateScores:
    """Score `judge_names` on `options.split` (common targets, misses counted) and adjust their lower bounds for `looks`.

    `looks` is raised to the number of candidates with verdicts when smaller (each is a look).
    A candidate whose statistic is undefined on the common targets has no bound (None).
    """
    if adjustment not in ADJUSTMENTS:
        raise ValueError(f"adjustment must be one of {ADJUSTMENTS}, not {adjustment!r}")
    frames = alignment_frames(session, dataset_name, task_name, judge_names, options)
    scores = score_versions(session, dataset_name, task_name, judge_names, options=options, frames=frames)
    out = CandidateScores(scores, looks=max(looks, len(scores.judges)), adjustment=adjustment)
    scored = scored_targets(frames, judge_names)
    defined = [name for name in scored.values if ((scores.common.get(name) or {}).get("alignment") or {}).get("value") is not None]
    out.lower_adjusted = {name: None for name in scores.judges}
    if not defined or len(scored.keys) == 0:
        return out
    out.n_resamples = stats.resamples_needed(out.looks, confidence=options.confidence, floor=options.bootstrap)
    _, uniques = stats.factorize_clusters(scored.clusters)
    indices = stats.bootstrap_index_matrix(len(uniques), n_resamples=out.n_resamples, seed=options.seed)
    columns = []
    for name in defined:
        if scored.labels is not None:
            code = {label: i for i, label in enumerate(scored.labels)}
            columns.append(stats.kappa_resamples([code[v] for v in scored.gold], [code[v] for v in scored.values[name]],
                                                 scored.clusters, indices, n_labels=len(scored.labels)))
        else:
            columns.append(stats.corr_resamples(scored.gold, scored.values[name].astype(float), scored.clusters, indices,
                                                method="spearman"))
    bounds = stats.selection_lower_bounds(np.column_stack(columns), looks=out.looks, confidence=options.confidence,
                                          method=adjustment)
    out.level = bounds.level
    out.lower_adjusted.update(dict(zip(defined, bounds.lower, strict=True)))
    return out
