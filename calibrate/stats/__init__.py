"""Statistics engine of calibrate: agreement, correlation and cluster-bootstrap intervals.

Pure functions: arrays (lists, numpy arrays, pandas Series) in, plain results out.  No I/O,
no database, no Flask.  Every statistic returns an :class:`Estimate`; undefined statistics
are results (``value=None`` plus ``status`` and ``note``), never NaN.  See
``docs/statistics.md`` for formulas, conventions and references.

Modules
-------
agreement
    Cohen's kappa (weighted), percent agreement, confusion matrix, per-label P/R/F1,
    Fleiss' kappa (unequal raters), Krippendorff's alpha, pairwise kappa.
correlation
    Spearman, Kendall tau-b, Pearson, grouped (summary-level) correlation.
intervals
    Vectorised cluster bootstrap (percentile and BCa) for kappa and correlations, the
    paired difference of two statistics, and a generic loop-based cluster bootstrap.

References
----------
.. [1] Artstein, R. and Poesio, M. (2008). Inter-coder agreement for computational
   linguistics. *Computational Linguistics* 34(4), 555-596.
.. [2] Field, C. A. and Welsh, A. H. (2007). Bootstrapping clustered data. *JRSS B* 69(3),
   369-390.
"""

from calibrate.stats.agreement import (
    cohen_kappa,
    confusion_matrix,
    disagreement_weights,
    fleiss_kappa,
    fleiss_kappa_counts,
    kappa_from_tables,
    krippendorff_alpha,
    krippendorff_alpha_counts,
    pairwise_cohen_kappa,
    per_label_prf,
    percent_agreement,
)
from calibrate.stats.correlation import grouped_correlation, kendall_tau_b, pearson_r, spearman_rho
from calibrate.stats.intervals import (
    bootstrap_index_matrix,
    cluster_bootstrap,
    cluster_bootstrap_corr,
    cluster_bootstrap_kappa,
    corr_resamples,
    factorize_clusters,
    kappa_resamples,
    paired_cluster_bootstrap_diff,
)
from calibrate.stats.result import Estimate

__all__ = [
    "Estimate",
    "bootstrap_index_matrix",
    "cluster_bootstrap",
    "cluster_bootstrap_corr",
    "cluster_bootstrap_kappa",
    "cohen_kappa",
    "confusion_matrix",
    "corr_resamples",
    "disagreement_weights",
    "factorize_clusters",
    "fleiss_kappa",
    "fleiss_kappa_counts",
    "grouped_correlation",
    "kappa_from_tables",
    "kappa_resamples",
    "kendall_tau_b",
    "krippendorff_alpha",
    "krippendorff_alpha_counts",
    "paired_cluster_bootstrap_diff",
    "pairwise_cohen_kappa",
    "pearson_r",
    "per_label_prf",
    "percent_agreement",
    "spearman_rho",
]
