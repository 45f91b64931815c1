"""Statistics engine of calibrate: agreement, correlation and cluster-bootstrap intervals.

Pure functions: arrays (lists, numpy arrays, pandas Series) in, plain results out.  No I/O,
no database, no Flask.  Every statistic returns an :class:`Estimate`, and every richer result
extends :class:`Result` (value, ci, n, status, reason); undefined statistics are results
(``value=None`` plus ``status`` and ``reason``), never NaN.  See
``docs/statistics.md`` for formulas, conventions and references.

Modules
-------
agreement
    Cohen's kappa (weighted), percent agreement, confusion matrix, per-label P/R/F1,
    pairwise kappa over many raters (every pair, or the pairs that co-occur).
reliability
    Agreement among many raters at once: Fleiss' kappa (unequal raters), Krippendorff's alpha.
correlation
    Spearman, Kendall tau-b, Pearson, grouped (summary-level) correlation.
intervals
    Vectorised cluster bootstrap (percentile and BCa) for kappa and correlations, the
    paired difference of two statistics, and a generic loop-based cluster bootstrap.
retrieval
    Recall@K, Precision@K, F1@K, reciprocal rank and nDCG@K for a batch of queries, from a
    padded relevance matrix.
rag
    Faithfulness (supported / claims) and rank-weighted context precision per answer.
alttest
    The Alternative Annotator Test (Calderon, Reichart & Dror 2025): can a judge replace one
    of the annotators?  Leave-one-annotator-out win rates, one-sided t-tests, BY step-up.
position
    Position bias of a pairwise judge run in both presentation orders, and the
    "consistent" order rule.
drift
    A golden set against production: categorical (chi-squared or permutation, PSI, MDE),
    numeric (KS, normalised Wasserstein), text (domain-classifier AUC), Holm, the judge's
    drift.
refresh
    The golden-set refresh rule: anchors, retire oldest in over-represented strata,
    largest-remainder allocation of new items.
estimation
    The system's mean from many verdicts and few labels: classical, naive judge, PPI, PPI++
    (tuned lambda), Rogan-Gladen with Lee et al.'s interval, labels needed for a width;
    undefined results carry a ``Reason`` whose code ``ESTIMATE_REASONS`` lists.
selection
    Lower bounds adjusted for the number of versions looked at on a split: Bonferroni and the
    max-statistic (min-p) bootstrap over candidates resampled together.
consistency
    Self-consistency of K verdicts per target: flip rate, Fleiss' kappa among runs, majority.
paired
    A/B tests on paired per-question values: paired t-test, Wilcoxon signed-rank, paired
    bootstrap interval of the mean difference, relative improvement.

References
----------
.. [1] Artstein, R. and Poesio, M. (2008). Inter-coder agreement for computational
   linguistics. *Computational Linguistics* 34(4), 555-596.
.. [2] Field, C. A. and Welsh, A. H. (2007). Bootstrapping clustered data. *JRSS B* 69(3),
   369-390.
"""

from calibrate.stats.agreement import (
    co_rated_pairs,
    cohen_kappa,
    confusion_matrix,
    crowd_pairwise_kappa,
    disagreement_weights,
    kappa_from_tables,
    pairwise_cohen_kappa,
    per_label_prf,
    percent_agreement,
)
from calibrate.stats.alttest import AltTestResult, alt_test, benjamini_yekutieli
from calibrate.stats.comparison import discordant_counts, mcnemar_exact
from calibrate.stats.consistency import SelfConsistency, flip_rate, majority_vote, self_consistency
from calibrate.stats.correlation import grouped_correlation, kendall_tau_b, pearson_r, spearman_rho
from calibrate.stats.drift import REASONS as DRIFT_REASONS
from calibrate.stats.drift import (
    categorical_drift,
    chi2_mde,
    holm_adjust,
    judge_drift,
    min_permutations,
    numeric_drift,
    psi,
    text_drift,
)
from calibrate.stats.estimation import REASONS as ESTIMATE_REASONS
from calibrate.stats.estimation import (
    classical_mean,
    judge_mean,
    labels_needed,
    ppi_correlation,
    ppi_lambda,
    ppi_mean,
    rogan_gladen,
    rogan_gladen_from_rates,
)
from calibrate.stats.intervals import (
    bootstrap_index_matrix,
    cluster_bootstrap,
    cluster_bootstrap_corr,
    cluster_bootstrap_kappa,
    corr_resamples,
    factorize_clusters,
    kappa_resamples,
    multinomial_bootstrap_kappa,
    paired_cluster_bootstrap_diff,
)
from calibrate.stats.paired import paired_bootstrap_diff, paired_t_test, relative_improvement, wilcoxon_signed_rank
from calibrate.stats.position import PositionResult, consistent_verdicts, position_bias
from calibrate.stats.rag import context_precision, faithfulness, faithfulness_counts
from calibrate.stats.refresh import (
    RefreshPlan,
    largest_remainder_allocation,
    refresh_plan,
    renew_count,
    retire_items,
    select_anchors,
)
from calibrate.stats.reliability import fleiss_kappa, fleiss_kappa_counts, krippendorff_alpha, krippendorff_alpha_counts
from calibrate.stats.result import Estimate, Result
from calibrate.stats.retrieval import (
    RetrievalMetrics,
    mean_defined,
    ndcg_at_k,
    per_query_metrics,
    precision_at_k,
    ranked_matrix,
    recall_at_k,
    reciprocal_rank,
    relevance_matrix,
    retrieval_metrics,
)
from calibrate.stats.selection import ADJUSTMENTS, SelectionBounds, resamples_needed, selection_lower_bounds

__all__ = [
    "ESTIMATE_REASONS",
    "SelfConsistency",
    "classical_mean",
    "flip_rate",
    "judge_mean",
    "labels_needed",
    "majority_vote",
    "ppi_correlation",
    "ppi_lambda",
    "ppi_mean",
    "rogan_gladen",
    "rogan_gladen_from_rates",
    "self_consistency",
    "AltTestResult",
    "DRIFT_REASONS",
    "RefreshPlan",
    "categorical_drift",
    "chi2_mde",
    "holm_adjust",
    "judge_drift",
    "largest_remainder_allocation",
    "min_permutations",
    "numeric_drift",
    "psi",
    "refresh_plan",
    "renew_count",
    "retire_items",
    "select_anchors",
    "text_drift",
    "PositionResult",
    "alt_test",
    "benjamini_yekutieli",
    "consistent_verdicts",
    "position_bias",
    "Estimate",
    "Result",
    "ADJUSTMENTS",
    "SelectionBounds",
    "resamples_needed",
    "selection_lower_bounds",
    "RetrievalMetrics",
    "bootstrap_index_matrix",
    "cluster_bootstrap",
    "cluster_bootstrap_corr",
    "cluster_bootstrap_kappa",
    "cohen_kappa",
    "context_precision",
    "confusion_matrix",
    "corr_resamples",
    "discordant_counts",
    "disagreement_weights",
    "factorize_clusters",
    "faithfulness",
    "faithfulness_counts",
    "fleiss_kappa",
    "fleiss_kappa_counts",
    "grouped_correlation",
    "kappa_from_tables",
    "kappa_resamples",
    "kendall_tau_b",
    "krippendorff_alpha",
    "mean_defined",
    "ndcg_at_k",
    "krippendorff_alpha_counts",
    "mcnemar_exact",
    "multinomial_bootstrap_kappa",
    "paired_bootstrap_diff",
    "paired_cluster_bootstrap_diff",
    "paired_t_test",
    "co_rated_pairs",
    "crowd_pairwise_kappa",
    "pairwise_cohen_kappa",
    "pearson_r",
    "per_label_prf",
    "per_query_metrics",
    "percent_agreement",
    "precision_at_k",
    "ranked_matrix",
    "recall_at_k",
    "reciprocal_rank",
    "relative_improvement",
    "relevance_matrix",
    "retrieval_metrics",
    "spearman_rho",
    "wilcoxon_signed_rank",
]
