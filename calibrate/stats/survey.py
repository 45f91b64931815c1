"""PPI++ on a survey sample: production traffic sampled with unequal probabilities, an audit drawn from it.

`hajek_ppi_mean` is the prediction-powered mean of docs/statistics.md §18 with ratio (Hájek) weights:
every judged target j of a window weighs w_j = 1/π_t (its trace sampling probability), every
audit-labelled target i weighs w_i = 1/(π_t·π_a) (π_a: the audit draw's probability), each set's
weights normalised to sum 1 (p_i, q_j). Then

    θ̂ = λ·Σ q_j Ŷ_j + Σ p_i (Y_i − λŶ_i)
    se² = λ²·Σ q_j² (Ŷ_j − m)² + Σ p_i² (R_i − R̄)²,   R = Y − λŶ,

each term the linearised (Taylor) variance of a ratio mean centred on its own weighted mean (each
times m/(m − 1) for its m targets), and the interval θ̂ ± t·se with Student's t at Kish's effective
sample size of the labelled set minus one, n_eff = 1/Σ p_i²: unequal weights leave fewer effective
labels than labels.

The design is two-phase: the audit is drawn from the judged targets, so the labelled set is inside
the set the imputed term averages, not a second independent sample as in PPI++. For equal weights
the variance of θ̂ is then S²_Y/N + (1/n − 1/N)·S²_R, while the se² above estimates
λ²S²_Ŷ/N + S²_R/n, which is that variance plus (2λ/N)·(λS²_Ŷ − C) with C = cov(Y, Ŷ): the two
agree exactly when λ is the regression coefficient λ = C/S²_Ŷ. So λ is tuned as that coefficient, cov_p(Y, Ŷ)/var_p(Ŷ) on the labelled set's weights,
clipped to [0, 1]; it is also the λ of least variance for this design (Särndal, Swensson & Wretman
1992, §9.7: the two-phase regression estimator). PPI++'s λ for an independent unlabelled sample,
cov/((1 + n/N)·var), shrinks λ towards 0 by the audit's share of the judged targets; with it the
se² above misses (2λ/N)·(C − λS²_Ŷ) > 0 and the 95 % interval covered 0.92–0.94 in the simulation
of bench/results/production.md. The se² leaves out the finite-population corrections (traces kept
with π_t = 1 add no sampling variance; the audit may take half the judged targets), which makes it
a little conservative; the exact two-phase variance covered only 0.94 (binary labels whose weights
spread tenfold: the few heavy bad answers make the estimate skewed), so the conservative form is kept.

ppi_mean's weighted form (ppi_py's: w·Y with weights rescaled to mean 1, not centred) is exact for
equal weights but counts the spread of the weights themselves as variance, so with weights spread
tenfold (thumbs-down traces kept always, the rest one in ten) its interval covers the truth nearly
always instead of at the nominal rate (tests/calibration/test_production.py). `lam=0` is the labels
alone (the Hájek mean of the audit labels).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibrate.reasons import Reason
from calibrate.stats.result import Estimate

__all__ = ["hajek_mean", "hajek_ppi_mean"]


def _arrays(*values: Any) -> list[np.ndarray]:
    out = [np.asarray(v, dtype=float) for v in values]
    for arr in out:
        if not np.isfinite(arr).all():
            raise ValueError("values and weights must be finite numbers")
    return out


def hajek_mean(values: Any, weights: Any, *, alpha: float = 0.05) -> Estimate:
    """Return the weighted (Hájek) mean with its linearised normal interval."""
    x, w = _arrays(values, weights)
    if x.size == 0:
        return Estimate.undefined(0, Reason("no_labels"))
    if (w <= 0).any() or w.shape != x.shape:
        raise ValueError("one positive weight per value")
    q = w / w.sum()
    m = float((q * x).sum())
    if x.size < 2:
        return Estimate.undefined(int(x.size), Reason("too_few_labels"))
    se = float(np.sqrt(x.size / (x.size - 1) * (q ** 2 * (x - m) ** 2).sum()))
    from scipy.special import stdtrit  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)
    t = float(stdtrit(max(1.0 / float((q ** 2).sum()) - 1.0, 1.0), 1 - alpha / 2))  # what scipy.stats.t.ppf calls
    return Estimate(value=m, n=int(x.size), ci=(m - t * se, m + t * se))


def hajek_ppi_mean(y: Any, yhat: Any, yhat_all: Any, w: Any, w_all: Any, *, alpha: float = 0.05,
                   lam: float | None = None) -> Estimate:
    """Return PPI++ with Hájek weights (module docstring): the labelled set's gold and verdicts, every target's verdicts.

    The labelled targets are among the targets of `yhat_all` (the audit is drawn from the judged
    targets). `extra` holds `lambda` and `n_effective`. Fewer than two labels: undefined (`too_few_labels`; none: `no_labels`).
    """
    y, yhat, yhat_all, w, w_all = _arrays(y, yhat, yhat_all, w, w_all)
    n, big_n = int(y.size), int(yhat_all.size)
    if n == 0:
        return Estimate.undefined(0, Reason("no_labels"))
    if n < 2:
        return Estimate.undefined(n, Reason("too_few_labels"))
    if yhat.shape != y.shape or w.shape != y.shape or w_all.shape != yhat_all.shape or (w <= 0).any() or (w_all <= 0).any():
        raise ValueError("one positive weight per target, and one verdict per labelled target")
    p, q = w / w.sum(), w_all / w_all.sum()
    m_all = float((q * yhat_all).sum())
    y_bar, yhat_bar = float((p * y).sum()), float((p * yhat).sum())
    if lam is None:  # the regression coefficient of Y on Ŷ over the labelled set (module docstring)
        var_lab = float((p * (yhat - yhat_bar) ** 2).sum())
        cov = float((p * (y - y_bar) * (yhat - yhat_bar)).sum())
        lam = 0.0 if var_lab <= 1e-12 else float(np.clip(cov / var_lab, 0.0, 1.0))
    r = y - lam * yhat
    r_bar = float((p * r).sum())
    value = lam * m_all + r_bar
    var_all = big_n / max(big_n - 1, 1) * float((q ** 2 * (yhat_all - m_all) ** 2).sum())
    var_rect = n / (n - 1) * float((p ** 2 * (r - r_bar) ** 2).sum())
    se = float(np.sqrt(lam ** 2 * var_all + var_rect))
    n_eff = 1.0 / float((p ** 2).sum())  # Kish's effective sample size of the labelled set
    from scipy.special import stdtrit  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)
    t = float(stdtrit(max(n_eff - 1.0, 1.0), 1 - alpha / 2))  # what scipy.stats.t.ppf calls
    return Estimate(value=value, n=n, ci=(value - t * se, value + t * se), extra={"lambda": lam, "n_effective": n_eff})
