"""Honest numbers about the live system: a mean from many judge verdicts and few expert labels.

The estimand is the mean ``θ = E[Y]`` of a gold value ``Y`` (a binary task's positive share, a
mean score, a faithfulness rate) over every target the judge has a verdict ``Ŷ`` on.  Some
targets are *labelled* (gold and verdict: ``Y_i, Ŷ_i``, ``i = 1..n``), the rest *unlabelled*
(verdict only: ``Ŷ̃_j``, ``j = 1..N``).

Estimators (each returns an :class:`~calibrate.stats.result.Estimate` with a normal interval
at level ``1 - alpha``; ``z = Φ⁻¹(1 - alpha/2)``)

classical
    The labels alone: ``θ̂ = Ȳ``, ``se = sd(Y) / √n`` (``sd`` with divisor ``n``), the
    interval of ppi_py's ``classical_mean_ci``.
naive judge
    The verdicts alone, ``mean(Ŷ)`` over every target: biased by the judge's errors, shown
    as what not to trust.
PPI / PPI++ (Angelopoulos et al. 2023; Angelopoulos, Duchi & Zrnic 2024)
    ``θ̂_λ = λ·mean(Ŷ̃) + mean(Y − λŶ)``,
    ``se² = λ²·var(Ŷ̃)/N + var(Y − λŶ)/n``.  Plain PPI takes ``λ = 1``; PPI++ tunes
    ``λ̂ = cov(Y, Ŷ) / ((1 + n/N)·var(Ŷ ∪ Ŷ̃))`` and clips it to [0, 1], so the interval is
    asymptotically never wider than the classical one (``λ = 0`` is the classical estimate).
Rogan–Gladen (Rogan & Gladen 1978) with the plug-in interval of Lee et al. (2025)
    ``θ̂ = (p + q₀ − 1) / (q₀ + q₁ − 1)`` with ``p`` the judge's positive share on the
    unlabelled targets, ``q₀`` its specificity and ``q₁`` its sensitivity on the labelled ones.

Weights.  A target sampled for labelling with inclusion probability ``π_i`` weighs
``w_i = 1/π_i``.  As in ppi_py, each set's weights are rescaled to mean 1
(``w_i ← n·w_i / Σw``) and enter every mean and standard deviation as the products ``w_i·Y_i``,
``w_i·Ŷ_i`` (so ``θ̂ = mean(w·Y)``, ``se = sd(w·Y)/√n``).

Undefined results carry a ``Reason`` (``Estimate.reason``, a stable code of ``calibrate.reasons.TEMPLATES``);
:data:`REASONS` lists the codes used here.

References
----------
.. [1] Angelopoulos, A. N., Bates, S., Fannjiang, C., Jordan, M. I. and Zrnic, T. (2023).
   Prediction-powered inference. *Science* 382(6671), 669-674.
.. [2] Angelopoulos, A. N., Duchi, J. C. and Zrnic, T. (2024). PPI++: efficient
   prediction-powered inference. arXiv:2311.01453.
.. [3] Rogan, W. J. and Gladen, B. (1978). Estimating prevalence from the results of a
   screening test. *American Journal of Epidemiology* 107(1), 71-76.
.. [4] Lee, C., Zeng, T., Jeong, J., Sohn, J. and Lee, K. (2025). How to correctly report
   LLM-as-a-judge evaluations. arXiv:2511.21140.
.. [5] Broska, D., Howes, M. and van Loon, A. (2024). The mixed subjects design: treating
   large language models as (potentially) informative observations. SocArXiv j3bnt.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calibrate.reasons import TEMPLATES, Reason
from calibrate.stats._common import as_float_array
from calibrate.stats.result import Estimate

__all__ = [
    "REASONS",
    "classical_mean",
    "judge_mean",
    "labels_needed",
    "ppi_correlation",
    "ppi_lambda",
    "ppi_mean",
    "rogan_gladen",
    "rogan_gladen_from_rates",
]

#: Stable codes of undefined estimates (``Estimate.reason.code``) and their English notes: the one table is
#: ``calibrate.reasons.TEMPLATES``; this is the view of the codes these estimators use.
REASONS: dict[str, str] = {code: str(TEMPLATES[code]) for code in (
    "no_labels", "no_target_verdict", "no_unlabelled", "too_few_labels", "constant_gold", "no_gold_positive",
    "no_gold_negative", "not_better_than_chance", "width_unreachable", "too_few_runs")}

#: Methods of :func:`labels_needed`.
POWER_METHODS = ("ppi++", "classical")


def _undefined(code: str, n: int, **extra: Any) -> Estimate:
    """Return an undefined estimate whose reason has the stable code ``code``."""
    return Estimate.undefined(n, Reason(code), **extra)


def _z(alpha: float) -> float:
    if not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    from scipy.special import ndtri  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)
    return float(ndtri(1.0 - float(alpha) / 2.0))  # the normal quantile: what scipy.stats.norm.ppf calls


def _values(values: Any, what: str) -> np.ndarray:
    arr = as_float_array(values, what)
    if not np.isfinite(arr).all():
        raise ValueError(f"{what} must be finite numbers (no missing values)")
    return arr


def _weights(weights: Any, size: int, what: str) -> np.ndarray:
    """Return the weights rescaled to mean 1 (ppi_py's ``construct_weight_vector``); ones when None."""
    if weights is None:
        return np.ones(size)
    w = _values(weights, what)
    if w.shape != (size,):
        raise ValueError(f"{what} must have one weight per target ({w.size} for {size})")
    if size and (w <= 0).any():
        raise ValueError(f"{what} must be positive (1/π of an inclusion probability π in (0, 1])")
    return w / w.sum() * size if size else w


def _is_constant(values: np.ndarray) -> bool:
    return values.size > 0 and bool(np.all(values == values[0]))


def _normal_estimate(value: float, se: float, z: float, n: int, **extra: Any) -> Estimate:
    return Estimate(value=value, n=n, ci=(value - z * se, value + z * se), extra=extra)


def classical_mean(y: Any, *, alpha: float = 0.05, weights: Any = None) -> Estimate:
    """Return the mean of the gold values with its normal (CLT) interval: the labels alone.

    .. math::

        \\hat\\theta = \\frac1n\\sum_i w_i Y_i, \\qquad
        \\widehat{se} = \\frac{\\operatorname{sd}(w Y)}{\\sqrt n}, \\qquad
        \\hat\\theta \\pm z_{1-\\alpha/2}\\,\\widehat{se}

    with ``w`` rescaled to mean 1 and ``sd`` with divisor ``n``: exactly ppi_py's
    ``classical_mean_ci(Y, w=w, alpha=alpha)``.

    Parameters
    ----------
    y : array-like of float
        Gold values of the labelled targets (binary tasks: 1 for the positive label, else 0).
    alpha : float, default 0.05
        Error level of the two-sided interval.
    weights : array-like of float, optional
        ``1/π`` per target (inclusion probabilities of a designed sample).

    Returns
    -------
    Estimate
        ``n`` = labelled targets; ``extra``: ``method`` ``"classical"``, ``n_labelled``.
        Undefined (``reason``): ``no_labels``, ``too_few_labels``, ``constant_gold``.

    References
    ----------
    .. [1] Angelopoulos, A. N. et al. (2023). Prediction-powered inference. *Science* 382,
       669-674 (the classical baseline of its experiments).
    """
    z = _z(alpha)
    y = _values(y, "y")
    w = _weights(weights, y.size, "weights")
    n = int(y.size)
    refusal = _label_refusal(y)
    if refusal:
        return _undefined(refusal, n, method="classical", n_labelled=n)
    wy = w * y
    return _normal_estimate(float(wy.mean()), float(wy.std() / math.sqrt(n)), z, n, method="classical", n_labelled=n)


def judge_mean(yhat: Any, *, alpha: float = 0.05, weights: Any = None) -> Estimate:
    """Return the mean of the judge's verdicts with its normal interval: the naive judge number.

    Same formula as :func:`classical_mean` applied to the verdicts ``Ŷ`` of every target.  It
    estimates ``E[Ŷ]``, not ``E[Y]``: the judge's errors bias it by
    ``E[Ŷ] − E[Y]`` (for a binary judge, ``(1 − q₀)(1 − θ) − (1 − q₁)θ``), and no amount of
    verdicts shrinks that bias.  Reported only as what not to trust.

    Parameters
    ----------
    yhat : array-like of float
        The verdicts as numbers (binary: 1 for the positive label).
    alpha : float, default 0.05
        Error level.
    weights : array-like of float, optional
        ``1/π`` per target.

    Returns
    -------
    Estimate
        ``extra``: ``method`` ``"naive_judge"``.  Undefined: ``no_target_verdict``.
    """
    z = _z(alpha)
    yhat = _values(yhat, "yhat")
    w = _weights(weights, yhat.size, "weights")
    n = int(yhat.size)
    if n == 0:
        return _undefined("no_target_verdict", 0, method="naive_judge")
    wy = w * yhat
    note = Reason("judge_only")
    est = _normal_estimate(float(wy.mean()), float(wy.std() / math.sqrt(n)), z, n, method="naive_judge")
    return Estimate(value=est.value, n=n, ci=est.ci, reason=note, extra=est.extra)


def _label_refusal(y: np.ndarray) -> str | None:
    if y.size == 0:
        return "no_labels"
    if y.size < 2:
        return "too_few_labels"
    if _is_constant(y):
        return "constant_gold"
    return None


def ppi_lambda(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray, w: np.ndarray, w_unlabeled: np.ndarray) -> float | None:
    """Return PPI++'s power-tuning weight clipped to [0, 1] (ppi_py's ``_calc_lam_glm``), or None.

    With the gradients of the squared loss at the plain-PPI estimate ``θ̂₁``,
    ``g = w(Y − θ̂₁)``, ``ĝ = w(Ŷ − θ̂₁)``, ``g̃ = w̃(Ŷ̃ − θ̂₁)``:

    .. math::

        \\hat\\lambda = \\operatorname{clip}_{[0,1]}
        \\frac{\\widehat{\\operatorname{cov}}(g, \\hat g)}
             {(1 + n/N)\\,\\widehat{\\operatorname{var}}(\\hat g \\cup \\tilde g)}

    (covariance with divisor ``n``, variance of the pooled verdict gradients with divisor
    ``n + N − 1``).  ``None`` when the verdicts do not vary (every ``λ`` then gives the same
    estimate and interval).
    """
    n, big_n = y.size, yhat_unlabeled.size
    theta1 = float((w_unlabeled * yhat_unlabeled).mean() + (w * (y - yhat)).mean())
    g = w * (y - theta1)
    g_hat = w * (yhat - theta1)
    g_unl = w_unlabeled * (yhat_unlabeled - theta1)
    cov = float(((g - g.mean()) * (g_hat - g_hat.mean())).sum() / n)
    pooled = np.concatenate([g_hat, g_unl])
    # Constant verdict gradients: cov and var are rounding noise, and λ would be noise too.
    if pooled.size < 2 or np.ptp(pooled) <= 1e-12 * max(1.0, float(np.abs(pooled).max())):
        return None
    var = float(pooled.var(ddof=1))
    return float(np.clip(cov / ((1.0 + n / big_n) * var), 0.0, 1.0))


def ppi_mean(
    y: Any,
    yhat: Any,
    yhat_unlabeled: Any,
    *,
    alpha: float = 0.05,
    lam: float | None = None,
    weights: Any = None,
    weights_unlabeled: Any = None,
) -> Estimate:
    """Return the prediction-powered mean with its interval: PPI++ by default, plain PPI with ``lam=1``.

    .. math::

        \\hat\\theta_\\lambda = \\frac{\\lambda}{N}\\sum_j \\tilde w_j \\tilde{\\hat Y}_j
            + \\frac1n\\sum_i w_i (Y_i - \\lambda \\hat Y_i), \\qquad
        \\widehat{se}^2 = \\frac{\\operatorname{sd}^2(\\lambda \\tilde w \\tilde{\\hat Y})}{N}
            + \\frac{\\operatorname{sd}^2(w (Y - \\lambda \\hat Y))}{n}

    (``sd`` with divisor equal to the set's size), interval ``θ̂ ± z·se``.  With ``lam=None``
    ``λ`` is tuned by :func:`ppi_lambda` (PPI++).  Point estimate and interval equal ppi_py's
    ``ppi_mean_pointestimate`` / ``ppi_mean_ci(Y, Yhat, Yhat_unlabeled, alpha=alpha, lam=lam,
    w=weights, w_unlabeled=weights_unlabeled)`` (tested to 1e-9).

    The rectifier ``mean(Y − λŶ)`` removes the judge's bias on average, so the estimate is
    unbiased whatever the judge's quality; a good judge (verdicts correlated with the gold)
    narrows the interval, a useless one gets ``λ ≈ 0`` and the classical interval.

    Parameters
    ----------
    y : array-like of float
        Gold values of the labelled targets.
    yhat : array-like of float
        The judge's verdicts on the same labelled targets (aligned with ``y``).
    yhat_unlabeled : array-like of float
        The judge's verdicts on the unlabelled targets.
    alpha : float, default 0.05
        Error level of the two-sided interval.
    lam : float, optional
        Fixed weight of the verdicts (1 = plain PPI, 0 = classical).  Default: tuned (PPI++).
    weights, weights_unlabeled : array-like of float, optional
        ``1/π`` per labelled / unlabelled target; each set is rescaled to mean 1.

    Returns
    -------
    Estimate
        ``n`` = labelled + unlabelled targets; ``extra``: ``method`` (``"ppi++"`` or
        ``"ppi"``), ``lambda``, ``n_labelled``, ``n_unlabelled``, ``weighted``.  Undefined
        (``reason``): ``no_labels``, ``too_few_labels``, ``constant_gold``, ``no_unlabelled``.

    References
    ----------
    .. [1] Angelopoulos, A. N., Bates, S., Fannjiang, C., Jordan, M. I. and Zrnic, T. (2023).
       Prediction-powered inference. *Science* 382(6671), 669-674.
    .. [2] Angelopoulos, A. N., Duchi, J. C. and Zrnic, T. (2024). PPI++: efficient
       prediction-powered inference. arXiv:2311.01453, section 2 (mean estimation).
    """
    z = _z(alpha)
    y = _values(y, "y")
    yhat = _values(yhat, "yhat")
    yhat_unl = _values(yhat_unlabeled, "yhat_unlabeled")
    if y.shape != yhat.shape:
        raise ValueError(f"y and yhat must be aligned ({y.size} gold values, {yhat.size} verdicts)")
    if lam is not None and not math.isfinite(float(lam)):
        raise ValueError("lam must be a finite number")
    n, big_n = int(y.size), int(yhat_unl.size)
    w = _weights(weights, n, "weights")
    w_unl = _weights(weights_unlabeled, big_n, "weights_unlabeled")
    method = "ppi++" if lam is None else "ppi"
    meta = {
        "method": method,
        "n_labelled": n,
        "n_unlabelled": big_n,
        "weighted": weights is not None or weights_unlabeled is not None,
    }
    refusal = _label_refusal(y) or (None if big_n else "no_unlabelled")
    if refusal:
        return _undefined(refusal, n + big_n, **meta)
    note: Reason | None = None
    if lam is None:
        tuned = ppi_lambda(y, yhat, yhat_unl, w, w_unl)
        if tuned is None:
            tuned = 0.0
            note = Reason("constant_verdicts")
        lam = tuned
    lam = float(lam)
    value = float((w_unl * lam * yhat_unl).mean() + (w * (y - lam * yhat)).mean())
    imputed_sd = float((w_unl * (lam * yhat_unl)).std()) / math.sqrt(big_n)
    rectifier_sd = float((w * (y - lam * yhat)).std()) / math.sqrt(n)
    se = math.sqrt(imputed_sd**2 + rectifier_sd**2)
    est = _normal_estimate(value, se, z, n + big_n, **meta, **{"lambda": lam})
    return Estimate(value=est.value, n=est.n, ci=est.ci, reason=note, extra=est.extra)


def rogan_gladen_from_rates(p: float, q0: float, q1: float, *, n: int, m0: int, m1: int, alpha: float = 0.05) -> Estimate:
    """Return the Rogan–Gladen corrected share with Lee et al.'s plug-in interval, from rates and counts.

    Point estimate (clipped to [0, 1]):

    .. math:: \\hat\\theta = \\operatorname{clip}_{[0,1]} \\frac{p + q_0 - 1}{q_0 + q_1 - 1}

    Interval (Lee et al. 2025, their ``confidence_interval``): smooth
    ``p̃ = (np + z²/2)/(n + z²)``, ``q̃₀ = (m₀q₀ + 1)/(m₀ + 2)``, ``q̃₁ = (m₁q₁ + 1)/(m₁ + 2)``,
    ``ñ = n + z²``, ``m̃₀ = m₀ + 2``, ``m̃₁ = m₁ + 2``; with ``θ̃ = (p̃ + q̃₀ − 1)/(q̃₀ + q̃₁ − 1)``

    .. math::

        \\widehat{se} = \\frac{\\sqrt{\\tilde p(1-\\tilde p)/\\tilde n
            + (1-\\tilde\\theta)^2 \\tilde q_0(1-\\tilde q_0)/\\tilde m_0
            + \\tilde\\theta^2 \\tilde q_1(1-\\tilde q_1)/\\tilde m_1}}{\\tilde q_0 + \\tilde q_1 - 1},
        \\qquad
        d = 2z^2\\left(-\\frac{(1-\\tilde\\theta)\\tilde q_0(1-\\tilde q_0)}{\\tilde m_0}
            + \\frac{\\tilde\\theta\\, \\tilde q_1(1-\\tilde q_1)}{\\tilde m_1}\\right)

    and the interval ``clip[0,1](θ̃ + d ± z·se)``.

    Parameters
    ----------
    p : float
        The judge's positive share on the ``n`` test (unlabelled) targets.
    q0, q1 : float
        Specificity (verdict negative | gold negative) and sensitivity (verdict positive |
        gold positive) on the calibration (labelled) targets.
    n, m0, m1 : int
        Test targets, gold-negative and gold-positive calibration targets.
    alpha : float, default 0.05
        Error level.

    Returns
    -------
    Estimate
        ``n`` = ``n + m0 + m1``; ``extra``: ``method`` ``"rogan-gladen"``, ``p``, ``specificity``,
        ``sensitivity``, ``n_test``, ``n_negative``, ``n_positive``.  Undefined (``reason``):
        ``no_unlabelled``, ``no_gold_negative``, ``no_gold_positive``, ``not_better_than_chance``.

    References
    ----------
    .. [1] Rogan, W. J. and Gladen, B. (1978). Estimating prevalence from the results of a
       screening test. *American Journal of Epidemiology* 107(1), 71-76.
    .. [2] Lee, C., Zeng, T., Jeong, J., Sohn, J. and Lee, K. (2025). How to correctly report
       LLM-as-a-judge evaluations. arXiv:2511.21140 (reference code:
       UW-Madison-Lee-Lab/LLM-judge-reporting, ``llm_judge_reporting/calibration.py``).
    """
    z = _z(alpha)
    for name, rate in (("p", p), ("q0", q0), ("q1", q1)):
        if not 0.0 <= float(rate) <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {rate!r}")
    for name, count in (("n", n), ("m0", m0), ("m1", m1)):
        if int(count) != count or count < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {count!r}")
    n, m0, m1 = int(n), int(m0), int(m1)
    meta = {
        "method": "rogan-gladen",
        "p": float(p) if n else None,
        "specificity": float(q0) if m0 else None,
        "sensitivity": float(q1) if m1 else None,
        "n_test": n,
        "n_negative": m0,
        "n_positive": m1,
    }
    total = n + m0 + m1
    if m0 + m1 == 0:
        return _undefined("no_labels", total, **meta)
    for code, bad in (("no_gold_negative", m0 == 0), ("no_gold_positive", m1 == 0), ("no_unlabelled", n == 0)):
        if bad:
            return _undefined(code, total, **meta)
    p, q0, q1 = float(p), float(q0), float(q1)
    ps, q0s, q1s = (n * p + z**2 / 2) / (n + z**2), (m0 * q0 + 1) / (m0 + 2), (m1 * q1 + 1) / (m1 + 2)
    if q0 + q1 - 1.0 <= 0.0 or q0s + q1s - 1.0 <= 0.0:
        return _undefined("not_better_than_chance", total, **meta)
    theta = min(1.0, max(0.0, (p + q0 - 1.0) / (q0 + q1 - 1.0)))
    ns, m0s, m1s = n + z**2, m0 + 2, m1 + 2
    th = (ps + q0s - 1.0) / (q0s + q1s - 1.0)
    shift = 2 * z**2 * (-(1 - th) * q0s * (1 - q0s) / m0s + th * q1s * (1 - q1s) / m1s)
    se = math.sqrt(ps * (1 - ps) / ns + (1 - th) ** 2 * q0s * (1 - q0s) / m0s + th**2 * q1s * (1 - q1s) / m1s) / (q0s + q1s - 1.0)
    low = min(1.0, max(0.0, th + shift - z * se))
    high = min(1.0, max(0.0, th + shift + z * se))
    return Estimate(value=theta, n=total, ci=(low, high), extra=meta)


def rogan_gladen(y: Any, yhat: Any, yhat_unlabeled: Any, *, alpha: float = 0.05) -> Estimate:
    """Return the Rogan–Gladen corrected positive share from binary labels and verdicts.

    ``p`` is the share of positive verdicts among the unlabelled targets (Lee et al.'s test
    set); ``q₀`` (specificity) and ``q₁`` (sensitivity) are measured on the labelled targets
    (their calibration set), ``m₀``/``m₁`` = gold-negative/-positive labelled targets.  Then
    :func:`rogan_gladen_from_rates`.

    Parameters
    ----------
    y, yhat : array-like of {0, 1}
        Gold values and verdicts of the labelled targets (1 = the positive label).
    yhat_unlabeled : array-like of {0, 1}
        Verdicts of the unlabelled targets.
    alpha : float, default 0.05
        Error level.

    Returns
    -------
    Estimate
        As :func:`rogan_gladen_from_rates`.
    """
    y = _values(y, "y")
    yhat = _values(yhat, "yhat")
    yhat_unl = _values(yhat_unlabeled, "yhat_unlabeled")
    if y.shape != yhat.shape:
        raise ValueError(f"y and yhat must be aligned ({y.size} gold values, {yhat.size} verdicts)")
    for name, arr in (("y", y), ("yhat", yhat), ("yhat_unlabeled", yhat_unl)):
        if not np.isin(arr, (0.0, 1.0)).all():
            raise ValueError(f"{name} must be binary (0 or 1) for the Rogan-Gladen correction")
    pos, neg = y == 1.0, y == 0.0
    m1, m0 = int(pos.sum()), int(neg.sum())
    q1 = float(yhat[pos].mean()) if m1 else 0.0
    q0 = float(1.0 - yhat[neg].mean()) if m0 else 0.0
    p = float(yhat_unl.mean()) if yhat_unl.size else 0.0
    return rogan_gladen_from_rates(p, q0, q1, n=int(yhat_unl.size), m0=m0, m1=m1, alpha=alpha)


def ppi_correlation(y: np.ndarray, yhat: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """Return (σ², ρ): the gold's variance and the PPI correlation (ppi_py's ``_get_ppi_corr``).

    With ``θ̄ = Σw Y / Σw``, ``g = w(Y − θ̄)``, ``ĝ = w(Ŷ − θ̄)`` (divisors ``n``):
    ``σ² = var(g)``, ``ρ = min(cov(g, ĝ) / √(var(g)·var(ĝ)), 1 − 1/n)``; ``ρ = 0`` when the
    verdicts do not vary.
    """
    theta = float((w * y).sum() / w.sum())
    g = w * (y - theta)
    g_hat = w * (yhat - theta)
    gc, ghc = g - g.mean(), g_hat - g_hat.mean()
    var_g, var_hat = float((gc**2).mean()), float((ghc**2).mean())
    if not var_hat > 0.0 or not var_g > 0.0:
        return var_g, 0.0
    rho = float((gc * ghc).mean()) / math.sqrt(var_g * var_hat)
    return var_g, min(rho, 1.0 - 1.0 / y.size)


def labels_needed(
    y: Any,
    yhat: Any,
    *,
    n_total: int,
    target_width: float = 0.05,
    alpha: float = 0.05,
    method: str = "ppi++",
    weights: Any = None,
) -> Estimate:
    """Return how many expert labels give a confidence-interval half-width of ``target_width``.

    From a pilot of labelled targets, ``σ²`` and the PPI correlation ``ρ`` come from
    :func:`ppi_correlation`.  Classical: the labels alone reach the half-width with

    .. math:: n_0 = \\lceil z^2 \\sigma^2 / h^2 \\rceil, \\qquad h = \\text{target\\_width}.

    PPI++ (power analysis of Angelopoulos, Duchi & Zrnic 2024 and Broska et al. 2024, as in
    ppi_py's ``ppi_mean_power`` with the pool ``n + N = n_total`` fixed): with ``n`` of the
    ``T = n_total`` targets labelled, the tuned estimator's variance is
    ``σ²/n·(1 − ρ₊²·N/(n + N))``, the classical variance of ``n_eff = n·T/(n + (1 − ρ₊²)(T − n))``
    labels (``ρ₊ = max(ρ, 0)``: λ is clipped to [0, 1]).  Solving ``n_eff = n₀``:

    .. math:: n = \\left\\lceil \\frac{n_0^*\\, T\\, (1 - \\rho_+^2)}{T - \\rho_+^2 n_0^*} \\right\\rceil,
        \\qquad n_0^* = z^2 \\sigma^2 / h^2 \\text{ (unrounded)}.

    Parameters
    ----------
    y, yhat : array-like of float
        Gold values and verdicts of the labelled (pilot) targets.
    n_total : int
        Targets with a verdict (labelled + unlabelled): the pool labels are drawn from.
    target_width : float, default 0.05
        The wanted half-width of the interval.
    alpha : float, default 0.05
        Error level.
    method : {"ppi++", "classical"}
        The estimator the labels are for.
    weights : array-like of float, optional
        ``1/π`` per pilot target.

    Returns
    -------
    Estimate
        ``value`` = labels needed (an integer); ``extra``: ``method``, ``target_width``,
        ``n_classical`` (``n₀``), ``ppi_corr`` (``ρ``), ``n_total``.  Undefined (``reason``):
        ``no_labels``, ``too_few_labels``, ``constant_gold``, ``width_unreachable`` (``n₀ > T``).

    References
    ----------
    .. [1] Angelopoulos, A. N., Duchi, J. C. and Zrnic, T. (2024). PPI++: efficient
       prediction-powered inference. arXiv:2311.01453.
    .. [2] Broska, D., Howes, M. and van Loon, A. (2024). The mixed subjects design. SocArXiv
       j3bnt (effective sample size ``n(n+N)/(n + (1−ρ²)N)``).
    """
    if method not in POWER_METHODS:
        raise ValueError(f"method must be one of {POWER_METHODS}, got {method!r}")
    if not float(target_width) > 0.0:
        raise ValueError(f"target_width must be positive, got {target_width!r}")
    z = _z(alpha)
    y = _values(y, "y")
    yhat = _values(yhat, "yhat")
    if y.shape != yhat.shape:
        raise ValueError(f"y and yhat must be aligned ({y.size} gold values, {yhat.size} verdicts)")
    total = int(n_total)
    if total < y.size:
        raise ValueError(f"n_total ({total}) must count the {y.size} labelled targets too")
    w = _weights(weights, y.size, "weights")
    meta: dict[str, Any] = {"method": method, "target_width": float(target_width), "n_total": total}
    refusal = _label_refusal(y)
    if refusal:
        return _undefined(refusal, int(y.size), **meta)
    var, rho = ppi_correlation(y, yhat, w)
    exact = z**2 * var / float(target_width) ** 2  # n₀ before rounding: round once, at the end
    n0 = math.ceil(exact - 1e-9)
    meta.update(n_classical=n0, ppi_corr=rho)
    if n0 > total:
        return _undefined("width_unreachable", int(y.size), **meta)
    if method == "classical":
        return Estimate(value=max(n0, 2), n=int(y.size), extra=meta)
    r2 = max(rho, 0.0) ** 2
    needed = math.ceil(exact * total * (1.0 - r2) / (total - r2 * exact) - 1e-9)
    return Estimate(value=max(min(needed, total), 2), n=int(y.size), extra=meta)
