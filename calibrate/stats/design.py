"""The one live number: a mean or share of the gold over production traffic, from an audit drawn with known probabilities.

`design_estimate` is the estimator every production figure goes through (docs/statistics.md §18):
the targets the judge attempted in a window (every one weighing w_j = 1/π_t, its trace's probability
of becoming a sample) and the audit-labelled ones among them (w_i = 1/(π_t·π_a), π_a the audit draw's
probability), each target in a cluster (its sample: claims of one answer are not independent draws,
the audit draws answers).

**The estimate** is the two-phase regression (PPI++) estimator of a ratio mean with Hájek weights:

    N̂ = λ·Σ q_j ŶC_j + Σ p_i (YC_i − λ·ŶC_i),   D̂ = λ·Σ q_j Ĉ_j + Σ p_i (C_i − λ·Ĉ_i),   θ̂ = N̂ / D̂

with p, q the two sets' weights normalised to sum 1, C = 1 when the gold is counted (not an excluded
label such as `not_applicable`), Ĉ = 1 when the verdict is counted, YC = Y·C. When every gold and
verdict is counted D̂ = 1 and θ̂ = λ·mean(Ŷ) + mean(Y − λŶ). λ is the regression coefficient of the
linearised gold on the linearised verdict over the labelled set, clipped to [0, 1] (the audit is drawn
from the judged targets: Särndal, Swensson & Wretman 1992, §9.7; for a binary verdict it is the
post-stratified estimator by verdict). λ = 0 is the labels alone (`method` "classical").

**The variance** is the Taylor (linearised) variance of the ratio, with each term's residuals summed
per cluster before squaring (the "ultimate cluster" variance, Särndal et al. 1992 §4.4, §5.6):

    e_i = [(YC_i − θ̂C_i) − λ(ŶC_i − θ̂Ĉ_i)] / D̂,   f_j = (ŶC_j − θ̂Ĉ_j) / D̂,
    V = λ²·v(f; q, clusters) + v(e; p, clusters),   v(x; p, c) = k/(k − 1)·Σ_c (Σ_{i∈c} p_i(x_i − x̄))²

**Rare outcomes and small audits.** A normal interval on V fails exactly where production lives: a
failure rate of 3 % audited with 40 labels often shows no failure and no disagreement, V is then
nearly 0 and the interval a point. For a share (binary gold and verdicts) the labelled set's
cross-classification (gold × verdict class) gets Agresti and Min's pseudo-counts — half an
observation in each cell of a 2×2 table, a mass of 2 spread over the cells — at the audit's effective
number of clusters n_k = (Σ_c W_c)² / Σ_c W_c² (Kish 1965 on the clusters' total weights W_c): the
interval is centred on the adjusted estimate and its variance gains the adjustment's increase,

    extra = max(0, var_p̃(e)/(n_k + 2) − var_p̂(e)/n_k),

which is negligible when the audit holds many events of every kind and about (pseudo-mass)/n_k² when it
holds none. This is Agresti & Min's (2005) adjusted Wald interval for matched proportions (the
rectifier Y − Ŷ is a paired difference), carried to weights and clusters through the effective size as
Korn & Graubard (1998) carry Clopper–Pearson; a share is never a zero-width interval. The interval is
θ̃ ± t·√(V + extra) with Student's t on the design's degrees of freedom (labelled clusters − 1), clipped
to [0, 1] for a share. A mean of scores has no cells: a zero variance is refused (`zero_variance`).

**Too few.** Weights that differ a hundredfold leave a sampling class (a π_t value) that carries much
of the traffic with a handful of audit labels; no interval covers then (bench/results/live_number.md).
Each class of traces with the same π_t (values within 0.1 % are one class; more than ten classes are
merged into ten bins of log π_t) that holds ≥ 5 % of the window's traffic must have ≥ 2 labelled
clusters, and one that holds ≥ 10 % must have ≥ 5; otherwise the result is undefined
(`too_few_audit`) with `labels_needed`, the audit labels (samples drawn uniformly among the judged
samples, as the audit does) that would put enough in every class: max over short classes of
⌈(needed − have) / the class's share of judged samples⌉.

Coverage over the cells of bench/bench_live_number.py (3 % and 30 % failures × 10–200 audit labels ×
no trace sampling, thumbs-down first at 5 %, 100-fold weights × targets, clustered claims, answers) is
at least 0.93 wherever an interval is given (bench/results/live_number.md).

References
----------
.. [1] Agresti, A. and Min, Y. (2005). Simple improved confidence intervals for comparing matched
   proportions. *Statistics in Medicine* 24(5), 729–740.
.. [2] Korn, E. L. and Graubard, B. I. (1998). Confidence intervals for proportions with small expected
   number of positive counts estimated from survey data. *Survey Methodology* 24(2), 193–201.
.. [3] Franco, C., Little, R. J. A., Louis, T. A. and Slud, E. V. (2019). Comparative study of confidence
   intervals for proportions in complex sample surveys. *Journal of Survey Statistics and Methodology*
   7(3), 334–364.
.. [4] Särndal, C.-E., Swensson, B. and Wretman, J. (1992). *Model Assisted Survey Sampling*. Springer.
.. [5] Kish, L. (1965). *Survey Sampling*. Wiley.
.. [6] Angelopoulos, A. N., Duchi, J. C. and Zrnic, T. (2024). PPI++: efficient prediction-powered
   inference. arXiv:2311.01453.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from calibrate.reasons import Reason
from calibrate.stats.result import Estimate

__all__ = ["BIG_CLASS", "MAX_CLASSES", "MIN_PER_CLASS", "PSEUDO_MASS", "TINY_CLASS", "design_estimate", "sampling_classes",
           "snap"]

#: Agresti–Min's pseudo-observations: half a count in each cell of a 2×2 table (spread over the cells there are).
PSEUDO_MASS = 2.0
#: A sampling class holding at least this share of the traffic needs MIN_PER_CLASS labelled clusters…
TINY_CLASS = 0.05
MIN_PER_CLASS = 2
#: …and one holding at least BIG_CLASS[0] needs BIG_CLASS[1].
BIG_CLASS = (0.10, 5)
#: More distinct π_t values than this are merged into this many bins of log π_t.
MAX_CLASSES = 10


def snap(value: float | None, low: float | None = None, high: float | None = None) -> float | None:
    """Return `value` with floating-point noise at a bound removed: -0.0 is 0.0, and within 1e-12 of a bound is the bound."""
    if value is None or not math.isfinite(value):
        return None
    for bound in (low, high, 0.0):
        if bound is not None and abs(value - bound) <= 1e-12:
            return float(bound) + 0.0
    if low is not None and value < low:
        return float(low)
    if high is not None and value > high:
        return float(high)
    return float(value) + 0.0


def sampling_classes(pi: np.ndarray) -> np.ndarray:
    """Return each π_t's sampling class (an int): equal values up to 0.1 %, at most MAX_CLASSES bins of log π_t."""
    pi = np.asarray(pi, dtype=float)
    if pi.size == 0:
        return np.zeros(0, dtype=np.int64)
    logs = np.round(np.log(pi) / math.log(1.001))
    values, codes = np.unique(logs, return_inverse=True)
    if values.size <= MAX_CLASSES:
        return codes.astype(np.int64)
    edges = np.quantile(np.log(pi), np.linspace(0, 1, MAX_CLASSES + 1)[1:-1])
    return np.searchsorted(edges, np.log(pi), side="right").astype(np.int64)


class _Clusters:
    """The clusters of a set of targets coded once (sorted ids: `np.unique`'s), for every sum per cluster over them."""

    def __init__(self, clusters: np.ndarray):
        ids, first, inverse = np.unique(clusters, return_index=True, return_inverse=True)
        self.k, self.first, self.inverse = int(ids.size), first, inverse.ravel()


def _cluster_variance(x: np.ndarray, p: np.ndarray, clusters: _Clusters) -> float:
    """Return the ultimate-cluster variance of the Hájek mean Σ p·x (p sums to 1): k/(k−1)·Σ_c (Σ_{i∈c} p_i(x_i − x̄))²."""
    if x.size == 0:
        return 0.0
    centred = p * (x - float((p * x).sum()))
    k, inverse = clusters.k, clusters.inverse
    if k < 2:
        return 0.0
    totals = np.bincount(inverse, weights=centred, minlength=k)
    return k / (k - 1) * float(((totals - totals.mean()) ** 2).sum())


def _effective_clusters(w: np.ndarray, clusters: _Clusters) -> float:
    """Return Kish's effective number of clusters, (Σ_c W_c)² / Σ_c W_c² with W_c the cluster's total weight."""
    totals = np.bincount(clusters.inverse, weights=w)
    return float(totals.sum() ** 2 / (totals ** 2).sum())


def _arrays(**named: Any) -> dict[str, np.ndarray]:
    out = {}
    for name, value in named.items():
        arr = np.asarray(value, dtype=float) if name not in ("cluster", "cluster_all") else np.asarray(value)
        out[name] = arr
    for name in ("w", "w_all", "pi", "pi_all"):
        arr = out[name]
        if not np.isfinite(arr).all() or (arr <= 0).any():
            raise ValueError(f"{name}: every weight and probability must be a positive finite number")
    for name in ("y", "yhat", "yhat_all"):
        if np.isinf(out[name]).any():
            raise ValueError(f"{name}: values must be finite (NaN marks a value that is not counted)")
    n, big_n = out["y"].shape, out["yhat_all"].shape
    if any(out[k].shape != n for k in ("yhat", "w", "pi", "cluster")) or any(out[k].shape != big_n for k in ("w_all", "pi_all",
                                                                                                           "cluster_all")):
        raise ValueError("one value, weight, probability and cluster per target")
    return out


def _class_check(a: dict[str, np.ndarray], clusters_all: _Clusters) -> tuple[Reason | None, int | None, list[dict]]:
    """Return the too-few reason (or None), the audit labels that would settle it, and each sampling class's figures."""
    codes = sampling_classes(np.concatenate([a["pi_all"], a["pi"]]))  # one coding for both sets
    classes_all, classes_lab = codes[:a["pi_all"].size], codes[a["pi_all"].size:]
    total = float(a["w_all"].sum())
    sample_class = classes_all[clusters_all.first]  # one entry per judged sample: the audit draws samples
    figures, short = [], []
    for code in np.unique(classes_all):
        share = float(a["w_all"][classes_all == code].sum()) / total
        have = int(np.unique(a["cluster"][classes_lab == code]).size)
        need = BIG_CLASS[1] if share >= BIG_CLASS[0] else (MIN_PER_CLASS if share >= TINY_CLASS else 0)
        pi = float(np.median(a["pi_all"][classes_all == code]))
        figures.append({"inclusion_prob": pi, "traffic_share": share, "audit_samples": have, "needed": need})
        if have < need:
            drawn_share = float((sample_class == code).mean())
            short.append((math.ceil((need - have) / max(drawn_share, 1e-12)), pi, share, have, need))
    if not short:
        return None, None, figures
    more, pi, share, have, need = max(short)
    return (Reason("too_few_audit", inclusion_prob=pi, share=round(share, 4), have=have, need=need, more=more),
            more, figures)


def design_estimate(y: Any, yhat: Any, w: Any, pi: Any, cluster: Any, yhat_all: Any, w_all: Any, pi_all: Any,
                    cluster_all: Any, *, binary: bool, alpha: float = 0.05, lam: float | None = None) -> Estimate:
    """Return the gold's mean (a share when `binary`) over the traffic from an audit (module docstring).

    Parameters
    ----------
    y, yhat : array
        The audit-labelled targets' gold and the judge's verdict as numbers (a share: 1 for the positive
        label); NaN where the gold, or the verdict, is not counted (an excluded label such as
        `not_applicable`). A failed or unparsed verdict is given a value by the caller (counted).
    w, pi, cluster : array
        Their weights 1/(π_t·π_a), their trace sampling probabilities π_t and their clusters (sample ids).
    yhat_all, w_all, pi_all, cluster_all : array
        The same for every target the judge attempted (the labelled ones among them), w_all = 1/π_t.
    binary : bool
        Values are 0 or 1: a share, with Agresti–Min pseudo-counts and an interval within [0, 1].
    alpha : float
        The interval covers 1 − alpha.
    lam : float, optional
        None tunes λ (PPI++); 1 is PPI; 0 the labels alone.

    Returns
    -------
    Estimate
        ``value`` the estimate, ``ci`` the interval; ``extra``: ``method`` (classical | ppi | ppi++),
        ``lambda``, ``n_clusters``, ``n_effective``, ``df``, ``judge_only`` and ``judge_only_ci``, ``classes``,
        and when undefined for too few labels ``labels_needed``. Undefined (reason): ``no_labels``,
        ``too_few_labels`` (fewer than two labelled clusters), ``too_few_audit``, ``zero_variance``.
    """
    a = _arrays(y=y, yhat=yhat, w=w, pi=pi, cluster=cluster, yhat_all=yhat_all, w_all=w_all, pi_all=pi_all,
                cluster_all=cluster_all)
    y, yhat, w, clusters = a["y"], a["yhat"], a["w"], a["cluster"]
    counted_all = ~np.isnan(a["yhat_all"])
    q = a["w_all"] / a["w_all"].sum() if a["w_all"].size else a["w_all"]
    # each set's clusters coded once, for every per-cluster sum below (10^5 answers: one sort each, not three)
    coded_all = _Clusters(a["cluster_all"])
    judge = _judge_only(a, q, counted_all, binary, alpha, coded_all)
    n = int(y.size)
    if n == 0 or not (~np.isnan(y)).any():
        return Estimate.undefined(n, Reason("no_labels"), **judge)
    coded = _Clusters(clusters)
    k = coded.k
    reason, needed, classes = _class_check(a, coded_all)
    if k < 2:
        return Estimate.undefined(n, Reason("too_few_labels"), labels_needed=2 - k, classes=classes, **judge)
    if reason is not None:
        return Estimate.undefined(n, reason, labels_needed=needed, classes=classes, **judge)

    c, chat = (~np.isnan(y)).astype(float), (~np.isnan(yhat)).astype(float)
    yc, yhatc = np.nan_to_num(y) * c, np.nan_to_num(yhat) * chat
    yhat_all_c = np.nan_to_num(a["yhat_all"]) * counted_all
    p = w / w.sum()
    tuned = lam is None
    if lam is None:  # the regression coefficient of the linearised gold on the linearised verdict
        theta0 = float((p * yc).sum() / max(float((p * c).sum()), 1e-300))
        u, uhat = yc - theta0 * c, yhatc - theta0 * chat
        uhat_bar = float((p * uhat).sum())
        var_hat = float((p * (uhat - uhat_bar) ** 2).sum())
        cov = float((p * (u - float((p * u).sum())) * (uhat - uhat_bar)).sum())
        lam = 0.0 if var_hat <= 1e-12 else float(np.clip(cov / var_hat, 0.0, 1.0))
    m_n, m_d = float((q * yhat_all_c).sum()), float((q * counted_all).sum())
    big_n = lam * m_n + float((p * (yc - lam * yhatc)).sum())
    big_d = lam * m_d + float((p * (c - lam * chat)).sum())
    if big_d <= 1e-12:
        return Estimate.undefined(n, Reason("no_labels"), **judge)
    theta = big_n / big_d
    e = ((yc - theta * c) - lam * (yhatc - theta * chat)) / big_d
    f = (yhat_all_c - theta * counted_all) / big_d
    variance = lam ** 2 * _cluster_variance(f, q, coded_all) + _cluster_variance(e, p, coded)
    n_eff = _effective_clusters(w, coded)
    shift, extra = 0.0, 0.0
    if binary:
        shift, extra = _pseudo_cells(y, yhat, a["yhat_all"], p, theta=theta, lam=lam, big_d=big_d, n_eff=n_eff)
    elif variance <= 1e-15:
        return Estimate.undefined(n, Reason("zero_variance"), classes=classes, **judge)
    df = k - 1
    half = quantile(alpha, df) * math.sqrt(variance + extra)
    bounds = (0.0, 1.0) if binary else (None, None)
    ci = (snap(theta + shift - half, *bounds), snap(theta + shift + half, *bounds))
    method = "classical" if lam == 0 else ("ppi++" if tuned else "ppi")
    return Estimate(value=snap(theta, *bounds), n=n, ci=ci,
                    extra={"method": method, "lambda": snap(lam, 0.0, 1.0), "n_clusters": k, "n_effective": n_eff, "df": df,
                           "interval": "t-agresti-min" if binary else "t", "classes": classes, **judge})


def _pseudo_cells(y: np.ndarray, yhat: np.ndarray, yhat_all: np.ndarray, p: np.ndarray, *, theta: float, lam: float,
                  big_d: float, n_eff: float) -> tuple[float, float]:
    """Return Agresti–Min's shift of the centre and the variance it adds (module docstring), for binary values.

    The cells are the gold's two classes (0, 1) times the verdict classes the window holds (0, 1, not counted);
    each gets PSEUDO_MASS / cells at the effective size n_eff. Labelled targets whose gold is not counted keep
    their observed share and get no pseudo-count. A class that is not counted is coded -1.
    """
    gold = np.where(np.isnan(y), -1.0, y)
    verdict = np.where(np.isnan(yhat), -1.0, yhat)
    verdict_classes = np.unique(np.concatenate([np.where(np.isnan(yhat_all), -1.0, yhat_all), verdict]))
    pseudo_cells = np.array([(g, v) for g in (0.0, 1.0) for v in verdict_classes])
    cells, inverse = np.unique(np.concatenate([np.column_stack([gold, verdict]), pseudo_cells]), axis=0, return_inverse=True)
    inverse = inverse.ravel()
    p_hat = np.bincount(inverse[:gold.size], weights=p, minlength=len(cells))
    pseudo = np.bincount(inverse[gold.size:], minlength=len(cells)) * (PSEUDO_MASS / len(pseudo_cells))
    g, v = cells[:, 0], cells[:, 1]
    cg, cv = (g >= 0).astype(float), (v >= 0).astype(float)
    r = ((np.maximum(g, 0.0) * cg - theta * cg) - lam * (np.maximum(v, 0.0) * cv - theta * cv)) / big_d
    p_adj = (n_eff * p_hat + pseudo) / (n_eff + PSEUDO_MASS)
    mean_hat, mean_adj = float((p_hat * r).sum()), float((p_adj * r).sum())
    var_hat = float((p_hat * r ** 2).sum()) - mean_hat ** 2
    var_adj = float((p_adj * r ** 2).sum()) - mean_adj ** 2
    return mean_adj - mean_hat, max(0.0, var_adj / (n_eff + PSEUDO_MASS) - var_hat / n_eff)


@functools.lru_cache(maxsize=4096)
def quantile(alpha: float, df: float | None = None) -> float:
    """Return the upper alpha/2 quantile of Student's t with `df` degrees of freedom (the normal's without)."""
    from scipy.special import ndtri, stdtrit  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)
    return float(ndtri(1 - alpha / 2) if df is None else stdtrit(df, 1 - alpha / 2))  # what norm.ppf and t.ppf call


def _judge_only(a: dict[str, np.ndarray], q: np.ndarray, counted: np.ndarray, binary: bool, alpha: float,
                clusters_all: _Clusters) -> dict:
    """Return the judge-only figure: the weighted mean verdict over every attempted target, with a normal interval."""
    if not counted.any():
        return {"judge_only": None, "judge_only_ci": None}
    values = np.nan_to_num(a["yhat_all"]) * counted
    d = float((q * counted).sum())
    mean = float((q * values).sum()) / d
    se = math.sqrt(_cluster_variance((values - mean * counted) / d, q, clusters_all))
    z = quantile(alpha)
    bounds = (0.0, 1.0) if binary else (None, None)
    return {"judge_only": snap(mean, *bounds),
            "judge_only_ci": [snap(mean - z * se, *bounds), snap(mean + z * se, *bounds)]}
