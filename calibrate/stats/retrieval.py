"""Ranked-retrieval metrics for a batch of queries, vectorised over queries and ranks.

A batch of queries is held as a **relevance matrix**: ``rel[i, j]`` is true when the document
at rank ``j + 1`` of query ``i`` is relevant, with ragged rankings padded by ``False``; beside
it, ``n_relevant[i]`` is the number of distinct relevant documents of the query (the
denominator of recall and the size of the ideal ranking). Every metric is then a handful of
array operations over the whole batch (a cumulative sum, a dot product with the discount
vector, an ``argmax``), whatever the number of queries.

Definitions (ranks ``j = 1..K``, ``rel_j`` in {0, 1}, ``R`` = relevant documents of the query):

- Recall@K = (Σ_{j≤K} rel_j) / R
- Precision@K = (Σ_{j≤K} rel_j) / K: a ranking shorter than K is not padded with relevant
  documents, it simply has fewer hits (trec_eval's ``P_K`` convention);
- F1@K = 2 P R / (P + R), 0 when both are 0;
- reciprocal rank = 1 / (rank of the first relevant document) over the whole ranking, 0 when
  none is retrieved (trec_eval's ``recip_rank``); MRR is its mean over queries;
- nDCG@K = DCG@K / IDCG@K with binary gain and the log2 discount,
  DCG@K = Σ_{j≤K} rel_j / log2(j + 1), and the ideal DCG over min(R, K) relevant documents
  at the top (Järvelin & Kekäläinen 2002).

A query without any relevant document has no recall, and no ranking quality to speak of:
its metrics are undefined (NaN in the per-query arrays), it is left out of every mean and
counted in ``n_no_relevant`` instead of being averaged as zero (trec_eval likewise skips
queries that have no relevance judgments). A document retrieved twice counts once, at its
first rank (trec_eval refuses such runs).

References
----------
.. [1] Järvelin, K. and Kekäläinen, J. (2002). Cumulated gain-based evaluation of IR
   techniques. *ACM Transactions on Information Systems* 20(4), 422-446.
.. [2] Manning, C. D., Raghavan, P. and Schütze, H. (2008). *Introduction to Information
   Retrieval*, chapter 8. Cambridge University Press.
.. [3] Voorhees, E. M. (1999). The TREC-8 question answering track report. *Proceedings of
   TREC-8*, 77-82 (mean reciprocal rank).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calibrate.reasons import Reason
from calibrate.stats.result import Estimate

__all__ = [
    "METRICS",
    "RetrievalMetrics",
    "f1_at_k",
    "mean_defined",
    "ndcg_at_k",
    "per_query_metrics",
    "precision_at_k",
    "ranked_matrix",
    "recall_at_k",
    "reciprocal_rank",
    "relevance_matrix",
    "retrieval_metrics",
    "summarize",
]

#: Metric names, in report order.
METRICS = ("recall", "precision", "f1", "rr", "ndcg")

NO_RELEVANT_NOTE = Reason("no_relevant_query")


def relevance_matrix(retrieved: Sequence[Sequence[Any] | None], relevant: Sequence[Iterable[Any] | None], *,
                     depth: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Return the padded relevance matrix of ragged rankings and the number of relevant documents.

    Parameters
    ----------
    retrieved : sequence of sequences
        Per query, the retrieved document ids in rank order (any hashable ids; ``None`` is an
        empty ranking).
    relevant : sequence of iterables
        Per query, the relevant document ids (``None`` or empty: no relevant document).
        Ids are compared with ``==``: ``"7"`` and ``7`` are different documents.
    depth : int, optional
        Keep only the first ``depth`` ranks (enough for metrics at K ≤ depth; reciprocal
        rank is then computed within those ranks).

    Returns
    -------
    rel : numpy.ndarray of bool, shape (n_queries, max ranking length)
        ``rel[i, j]``: the document at rank ``j + 1`` of query ``i`` is relevant; padding is
        ``False``, and so is every repeat of a document already retrieved at a better rank.
    n_relevant : numpy.ndarray of int64, shape (n_queries,)
        Distinct relevant documents per query (retrieved or not).

    Notes
    -----
    Ids can be any hashable, so there is no array form to vectorise the membership test
    over. Per query, one C-level set intersection finds the relevant documents retrieved and
    ``list.index`` their ranks, so the Python-level work is per relevant document found,
    not per retrieved id (measured on 10^7 string ids: several times faster than a lookup
    per id, and than factorising all ids into integer codes). Everything after it is
    vectorised.
    """
    n = len(retrieved)
    if len(relevant) != n:
        raise ValueError(f"retrieved and relevant must have the same length (retrieved={n}, relevant={len(relevant)})")
    if depth is not None and depth < 1:
        raise ValueError("depth must be a positive integer")
    sets = [set() if r is None else (r if isinstance(r, (set, frozenset)) else set(r)) for r in relevant]
    n_relevant = np.fromiter(map(len, sets), dtype=np.int64, count=n)
    rows = [() if r is None else (r if isinstance(r, (list, tuple)) else list(r)) for r in retrieved]
    if depth is not None:
        rows = [r[:depth] for r in rows]
    width = max(map(len, rows), default=0)
    # Per query, the relevant documents retrieved come from one C-level set intersection, and
    # each one's rank from list.index, which finds its first occurrence: a document retrieved
    # twice counts once, at its best rank. Python-level work is per hit, not per retrieved id.
    hit_rows: list[int] = []
    hit_cols: list[int] = []
    for i, (ranking, wanted) in enumerate(zip(rows, sets, strict=True)):
        if wanted and ranking:
            for doc in wanted.intersection(ranking):
                hit_rows.append(i)
                hit_cols.append(ranking.index(doc))
    rel = np.zeros((n, width), dtype=bool)
    if hit_rows:
        rel[np.asarray(hit_rows, dtype=np.int64), np.asarray(hit_cols, dtype=np.int64)] = True
    return rel, n_relevant


def ranked_matrix(groups: Any, positions: Any, values: Any, *, n_groups: int | None = None,
                  width: int | None = None) -> np.ndarray:
    """Scatter per-item values into a padded ``n_groups x width`` matrix by (group, 0-based position).

    Parameters
    ----------
    groups : array-like of int
        Row (query or sample code, ``0..n_groups-1``) of each item.
    positions : array-like of int
        0-based rank of each item within its row.
    values : array-like
        The item's value (for example 1 for a relevant context, 0 otherwise).
    n_groups, width : int, optional
        Matrix shape; default one more than the largest group and position.

    Returns
    -------
    numpy.ndarray of float
        Zero where no item was given. Two items at the same (group, position) raise
        ``ValueError``.
    """
    g = np.asarray(groups, dtype=np.int64)
    p = np.asarray(positions, dtype=np.int64)
    v = np.asarray(values, dtype=float)
    if not (g.shape == p.shape == v.shape) or g.ndim != 1:
        raise ValueError("groups, positions and values must be 1-D and of the same length")
    if g.size and (g.min() < 0 or p.min() < 0):
        raise ValueError("groups and positions must be non-negative")
    rows = int(n_groups if n_groups is not None else (g.max() + 1 if g.size else 0))
    cols = int(width if width is not None else (p.max() + 1 if p.size else 0))
    out = np.zeros((rows, cols))
    if g.size:
        flat = g * cols + p
        if np.unique(flat).size != flat.size:
            raise ValueError("two items share a (group, position)")
        out[g, p] = v
    return out


def _check(rel: Any, n_relevant: Any, k: int | None) -> tuple[np.ndarray, np.ndarray]:
    r = np.asarray(rel)
    if r.ndim != 2:
        raise ValueError("rel must be a 2-D (queries x ranks) matrix")
    r = r.astype(bool, copy=False)
    nr = np.asarray(n_relevant, dtype=np.int64)
    if nr.shape != (r.shape[0],):
        raise ValueError(f"n_relevant must have one entry per query ({r.shape[0]}), got shape {nr.shape}")
    if k is not None and (int(k) != k or k < 1):
        raise ValueError("k must be a positive integer")
    return r, nr


def _undefined_where(values: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
    values[n_relevant <= 0] = np.nan
    return values


def recall_at_k(rel: Any, n_relevant: Any, *, k: int) -> np.ndarray:
    """Return Recall@K per query: relevant documents in the top K / all relevant documents.

    Parameters
    ----------
    rel : array-like of bool, shape (n_queries, n_ranks)
        The relevance matrix (see :func:`relevance_matrix`).
    n_relevant : array-like of int, shape (n_queries,)
        Relevant documents per query.
    k : int
        Cut-off.

    Returns
    -------
    numpy.ndarray of float
        NaN for a query with no relevant document (undefined, not zero).

    References
    ----------
    .. [1] Manning, Raghavan and Schütze (2008), *Introduction to Information Retrieval*, §8.3.
    """
    r, nr = _check(rel, n_relevant, k)
    hits = np.count_nonzero(r[:, :k], axis=1).astype(float)
    return _undefined_where(hits / np.maximum(nr, 1), nr)


def precision_at_k(rel: Any, n_relevant: Any, *, k: int) -> np.ndarray:
    """Return Precision@K per query: relevant documents in the top K / K.

    A ranking shorter than K counts its missing ranks as not relevant (trec_eval's ``P_K``).
    NaN for a query with no relevant document, like the other metrics, so that every mean
    is over the same queries.

    References
    ----------
    .. [1] Manning, Raghavan and Schütze (2008), *Introduction to Information Retrieval*, §8.4.
    """
    r, nr = _check(rel, n_relevant, k)
    hits = np.count_nonzero(r[:, :k], axis=1).astype(float)
    return _undefined_where(hits / k, nr)


def f1_at_k(rel: Any, n_relevant: Any, *, k: int) -> np.ndarray:
    """Return F1@K per query, the harmonic mean of Precision@K and Recall@K (0 when both are 0).

    References
    ----------
    .. [1] van Rijsbergen, C. J. (1979). *Information Retrieval*, 2nd ed., chapter 7. Butterworths.
    """
    p = precision_at_k(rel, n_relevant, k=k)
    r = recall_at_k(rel, n_relevant, k=k)
    total = p + r
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(total > 0, 2 * p * r / np.where(total > 0, total, 1), 0.0)
    f1[np.isnan(total)] = np.nan
    return f1


def reciprocal_rank(rel: Any, n_relevant: Any) -> np.ndarray:
    """Return the reciprocal rank of the first relevant document per query (0 if none is retrieved).

    Computed over the whole ranking in ``rel`` (no cut-off), as trec_eval's ``recip_rank``;
    the mean over queries is the MRR. NaN for a query with no relevant document.

    References
    ----------
    .. [1] Voorhees, E. M. (1999). The TREC-8 question answering track report. *Proceedings
       of TREC-8*, 77-82.
    """
    r, nr = _check(rel, n_relevant, None)
    if r.shape[1] == 0:
        return _undefined_where(np.zeros(r.shape[0]), nr)
    found = r.any(axis=1)
    first = r.argmax(axis=1)
    rr = np.where(found, 1.0 / (first + 1.0), 0.0)
    return _undefined_where(rr, nr)


def _discounts(k: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=float))


def ndcg_at_k(rel: Any, n_relevant: Any, *, k: int) -> np.ndarray:
    """Return nDCG@K per query with binary gain and the log2 discount.

    DCG@K = Σ_{j=1..K} rel_j / log2(j + 1); the ideal DCG puts min(R, K) relevant documents
    at the top, R being the query's relevant documents whether retrieved or not. So a query
    whose relevant documents were not all retrieved cannot reach 1.

    Returns
    -------
    numpy.ndarray of float
        In [0, 1]; NaN for a query with no relevant document.

    References
    ----------
    .. [1] Järvelin, K. and Kekäläinen, J. (2002). Cumulated gain-based evaluation of IR
       techniques. *ACM Transactions on Information Systems* 20(4), 422-446.
    """
    r, nr = _check(rel, n_relevant, k)
    top = r[:, :k]
    disc = _discounts(k)
    dcg = top.astype(float) @ disc[: top.shape[1]]
    ideal = np.concatenate([[0.0], np.cumsum(disc)])[np.minimum(nr, k)]
    with np.errstate(invalid="ignore", divide="ignore"):
        ndcg = dcg / ideal
    return _undefined_where(ndcg, nr)


def per_query_metrics(rel: Any, n_relevant: Any, *, k: int) -> dict[str, np.ndarray]:
    """Return every metric per query at cut-off ``k``: ``recall``, ``precision``, ``f1``, ``rr``, ``ndcg``.

    The matrix is validated and the top-K hits counted once for all of them. Values are NaN
    for queries with no relevant document.
    """
    r, nr = _check(rel, n_relevant, k)
    top = r[:, :k]
    hits = np.count_nonzero(top, axis=1).astype(float)
    recall = _undefined_where(hits / np.maximum(nr, 1), nr)
    precision = _undefined_where(hits / k, nr)
    total = precision + recall
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(total > 0, 2 * precision * recall / np.where(total > 0, total, 1), 0.0)
    f1[np.isnan(total)] = np.nan
    disc = _discounts(k)
    ideal = np.concatenate([[0.0], np.cumsum(disc)])[np.minimum(nr, k)]
    with np.errstate(invalid="ignore", divide="ignore"):
        ndcg = _undefined_where((top.astype(float) @ disc[: top.shape[1]]) / ideal, nr)
    return {"recall": recall, "precision": precision, "f1": f1, "rr": reciprocal_rank(r, nr), "ndcg": ndcg}


def mean_defined(values: Any, *, what: str = "the metric", undefined_note: Reason | None = None) -> Estimate:
    """Return the mean of the finite values as an Estimate (``n`` = values averaged).

    NaN marks a unit where the metric is undefined: it is left out and counted in
    ``extra["n_undefined"]``. No finite value gives an undefined estimate with
    ``undefined_note`` (default: "no unit has a defined value"); an empty input gives ``no_data``.
    """
    v = np.asarray(values, dtype=float).ravel()
    if v.size == 0:
        return Estimate.no_data(Reason("no_units_to_average", what=what))
    ok = np.isfinite(v)
    n_undefined = int(v.size - ok.sum())
    if not ok.any():
        return Estimate.undefined(0, undefined_note or Reason("no_unit_defined"), n_undefined=n_undefined)
    return Estimate(value=float(v[ok].mean()), n=int(ok.sum()), extra={"n_undefined": n_undefined})


def summarize(per_query: dict[str, np.ndarray], n_relevant: Any) -> dict[str, Estimate]:
    """Return the mean of each per-query metric over the queries with a relevant document.

    Each Estimate has ``n`` = queries averaged and ``extra["n_no_relevant"]``.
    """
    nr = np.asarray(n_relevant, dtype=np.int64)
    n_none = int(np.count_nonzero(nr <= 0))
    out = {}
    for name, values in per_query.items():
        est = mean_defined(values, what=name, undefined_note=NO_RELEVANT_NOTE)
        out[name] = Estimate(value=est.value, n=est.n, status=est.status, reason=est.reason,
                             extra={"n_no_relevant": n_none, "n_queries": int(nr.size)})
    return out


@dataclass(frozen=True)
class RetrievalMetrics:
    """Retrieval metrics of a batch of queries at one cut-off K.

    ``per_query`` maps each of :data:`METRICS` to an array with one value per query (NaN
    where undefined); ``means`` maps them to the Estimate of the mean over the queries with
    a relevant document.
    """

    k: int
    n_queries: int
    n_no_relevant: int
    per_query: dict[str, np.ndarray] = field(repr=False)
    means: dict[str, Estimate]

    @property
    def n(self) -> int:
        """Queries the means are over (those with at least one relevant document)."""
        return self.n_queries - self.n_no_relevant


def retrieval_metrics(retrieved: Sequence[Sequence[Any] | None], relevant: Sequence[Iterable[Any] | None], *,
                      k: int = 10) -> RetrievalMetrics:
    """Return Recall@K, Precision@K, F1@K, reciprocal rank and nDCG@K per query and averaged.

    Parameters
    ----------
    retrieved : sequence of sequences
        Per query, the ranked document ids.
    relevant : sequence of iterables
        Per query, the relevant document ids.
    k : int
        Cut-off of the @K metrics (reciprocal rank uses the whole ranking).

    Examples
    --------
    >>> m = retrieval_metrics([["d1", "d3", "d5", "d7", "d9"]], [{"d3", "d7", "d12"}], k=5)
    >>> round(m.means["recall"].value, 4), m.means["precision"].value, m.means["rr"].value
    (0.6667, 0.4, 0.5)

    References
    ----------
    .. [1] Järvelin, K. and Kekäläinen, J. (2002). Cumulated gain-based evaluation of IR
       techniques. *ACM TOIS* 20(4), 422-446.
    """
    rel, nr = relevance_matrix(retrieved, relevant)
    per_query = per_query_metrics(rel, nr, k=k)
    return RetrievalMetrics(k=k, n_queries=int(nr.size), n_no_relevant=int(np.count_nonzero(nr <= 0)),
                            per_query=per_query, means=summarize(per_query, nr))
