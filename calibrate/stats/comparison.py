"""Comparing two judges on the same targets: McNemar's exact test on per-target correctness.

Two judges scored against the same gold on the same targets give paired binary outcomes
(right or wrong). Only the discordant targets carry information about which judge is better:
``b01`` targets the first judge got wrong and the second right, ``b10`` the reverse. Under
the null hypothesis of equal accuracy each discordant target is a fair coin, so the exact
two-sided p-value is a binomial tail (McNemar 1947; the exact version of Edwards 1948 /
the mid-sized-sample recommendation of Fagerland, Lydersen and Laake 2013).

References
----------
.. [1] McNemar, Q. (1947). Note on the sampling error of the difference between correlated
   proportions or percentages. *Psychometrika* 12(2), 153-157.
.. [2] Fagerland, M. W., Lydersen, S. and Laake, P. (2013). The McNemar test for binary
   matched-pairs data: mid-p and asymptotic are better than exact conditional. *BMC Medical
   Research Methodology* 13, 91.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibrate.reasons import Reason
from calibrate.stats.result import Estimate

__all__ = ["mcnemar_exact", "discordant_counts"]


def discordant_counts(first_correct: Any, second_correct: Any) -> tuple[int, int, int]:
    """Return (b01, b10, n): targets only the second got right, only the first got right, and all.

    Parameters
    ----------
    first_correct, second_correct : array-like of bool
        Whether each judge agreed with the gold on each target, aligned.

    Returns
    -------
    tuple of int
        ``b01`` = first wrong and second right; ``b10`` = first right and second wrong;
        ``n`` = number of targets.
    """
    a = np.asarray(first_correct, dtype=bool)
    b = np.asarray(second_correct, dtype=bool)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("first_correct and second_correct must be 1-D and aligned")
    return int((~a & b).sum()), int((a & ~b).sum()), int(a.size)


def mcnemar_exact(b01: int, b10: int, *, n: int | None = None) -> Estimate:
    """Return McNemar's exact test of equal accuracy from the discordant counts.

    The exact two-sided p-value is ``min(1, 2 · P(X ≤ min(b01, b10)))`` with
    ``X ~ Binomial(b01 + b10, 1/2)``, the same as statsmodels' ``mcnemar(exact=True)``.

    Parameters
    ----------
    b01, b10 : int
        Discordant counts (see :func:`discordant_counts`).
    n : int, optional
        All targets compared (reported as ``n``; default ``b01 + b10``).

    Returns
    -------
    Estimate
        ``value`` = the test statistic min(b01, b10); ``p_value``; ``extra``: ``b01``, ``b10``,
        ``n_discordant``. Undefined (no p-value) when no target is discordant.

    References
    ----------
    .. [1] McNemar, Q. (1947). Note on the sampling error of the difference between
       correlated proportions or percentages. *Psychometrika* 12(2), 153-157.
    """
    if b01 < 0 or b10 < 0:
        raise ValueError("discordant counts must be non-negative")
    total = b01 + b10
    extra = {"b01": int(b01), "b10": int(b10), "n_discordant": int(total)}
    n = total if n is None else n
    if n == 0:
        return Estimate.no_data(Reason("no_targets_to_compare"), **extra)
    if total == 0:
        return Estimate.undefined(n, Reason("no_discordant_pair"), **extra)
    from scipy import stats as sps  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)
    p = min(1.0, 2.0 * float(sps.binom.cdf(min(b01, b10), total, 0.5)))
    return Estimate(value=float(min(b01, b10)), n=n, p_value=p, extra=extra)
