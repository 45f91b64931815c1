"""RAG metrics from per-claim and per-context judgments: faithfulness and context precision.

The judgments can come from the experts (their gold labels) or from a judge (its verdicts);
these functions only see numbers, so both sides are measured the same way.

- **Faithfulness** of an answer = supported claims / claims of the answer (Es et al. 2023).
  The denominator is the answer's claims, not the judgments that happen to exist: a claim
  whose verdict failed or was never given counts as not shown to be supported, so a judge
  cannot raise its score by failing on the hard claims.
- **Context precision** of a ranking of retrieved contexts = (1/R) Σ_k precision@k · rel_k
  over the ranks k, R = relevant contexts retrieved: the mean of precision@k at the ranks of
  the relevant contexts (average precision over the retrieved list, as in RAGAS). An answer
  whose contexts are all irrelevant scores 0: nothing useful was retrieved.

References
----------
.. [1] Es, S., James, J., Espinosa-Anke, L. and Schockaert, S. (2024). RAGAS: automated
   evaluation of retrieval augmented generation. *Proceedings of EACL 2024: System
   Demonstrations*, 150-158 (arXiv:2309.15217, 2023).
.. [2] Manning, C. D., Raghavan, P. and Schütze, H. (2008). *Introduction to Information
   Retrieval*, §8.4 (average precision). Cambridge University Press.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["context_precision", "faithfulness", "faithfulness_counts"]


def faithfulness(supported: Any, total: Any) -> np.ndarray:
    """Return per answer the share of its claims that are supported: ``supported / total``.

    Parameters
    ----------
    supported : array-like of int
        Supported claims per answer.
    total : array-like of int
        Claims per answer (every claim that counts, whether or not it got a usable judgment).

    Returns
    -------
    numpy.ndarray of float
        NaN for an answer with no claim (undefined: there is nothing to be faithful about).

    Raises
    ------
    ValueError
        On different lengths, negative counts, or more supported claims than claims.

    References
    ----------
    .. [1] Es, S. et al. (2024). RAGAS: automated evaluation of retrieval augmented
       generation. *EACL 2024 Demonstrations*, 150-158, section 2 (faithfulness).
    """
    s = np.asarray(supported, dtype=float)
    t = np.asarray(total, dtype=float)
    if s.shape != t.shape or s.ndim != 1:
        raise ValueError("supported and total must be 1-D and of the same length")
    if (s < 0).any() or (t < 0).any():
        raise ValueError("counts must be non-negative")
    if (s > t).any():
        raise ValueError("an answer cannot have more supported claims than claims")
    out = np.full(s.shape, np.nan)
    np.divide(s, t, out=out, where=t > 0)
    return out


def faithfulness_counts(groups: Any, supported: Any, counted: Any, *, n_groups: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Return per answer the supported claims and the claims that count, from one row per claim.

    Parameters
    ----------
    groups : array-like of int
        Answer code (``0..n_groups-1``) of each claim.
    supported : array-like of bool
        The claim is judged supported.
    counted : array-like of bool
        The claim counts in the denominator (false for claims left out, such as those
        judged ``not_applicable``).
    """
    g = np.asarray(groups, dtype=np.int64)
    s = np.asarray(supported, dtype=bool)
    c = np.asarray(counted, dtype=bool)
    if not (g.shape == s.shape == c.shape):
        raise ValueError("groups, supported and counted must have the same length")
    size = int(n_groups if n_groups is not None else (g.max() + 1 if g.size else 0))
    return (np.bincount(g, weights=(s & c).astype(float), minlength=size),
            np.bincount(g, weights=c.astype(float), minlength=size))


def context_precision(relevance: Any) -> np.ndarray:
    """Return the rank-weighted context precision of each ranking: (1/R) Σ_k precision@k · rel_k.

    Parameters
    ----------
    relevance : array-like, shape (n_answers, n_ranks)
        ``relevance[i, k]`` is 1 when the context at rank ``k + 1`` of answer ``i`` is
        relevant, else 0 (pad shorter rankings with 0; a context without a judgment is 0).

    Returns
    -------
    numpy.ndarray of float
        In [0, 1]; 0 for an answer with no relevant context (RAGAS's convention: the
        retrieval gave nothing useful).

    Examples
    --------
    >>> context_precision([[1, 0, 1]]).round(4).tolist()   # (1/2)(1/1 + 2/3)
    [0.8333]

    References
    ----------
    .. [1] Es, S. et al. (2024). RAGAS: automated evaluation of retrieval augmented
       generation. *EACL 2024 Demonstrations*, 150-158 (context precision).
    """
    rel = np.asarray(relevance, dtype=float)
    if rel.ndim != 2:
        raise ValueError("relevance must be a 2-D (answers x ranks) matrix")
    if rel.size and not np.isin(rel, (0.0, 1.0)).all():
        raise ValueError("relevance must hold 0 and 1 only")
    if rel.shape[1] == 0:
        return np.zeros(rel.shape[0])
    precision_at = np.cumsum(rel, axis=1) / np.arange(1, rel.shape[1] + 1)
    weighted = (precision_at * rel).sum(axis=1)
    n_relevant = rel.sum(axis=1)
    out = np.zeros(rel.shape[0])
    np.divide(weighted, n_relevant, out=out, where=n_relevant > 0)
    return out

