"""Retrieval metrics: worked examples, scikit-learn's nDCG, a per-query loop, and properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import ndcg_score

from calibrate.stats import (
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
from calibrate.stats.retrieval import f1_at_k

FAST = settings(max_examples=60, deadline=None)


def reference(ranking, relevant, k):
    """The textbook definitions, one query at a time, in plain Python."""
    relevant = set(relevant)
    if not relevant:
        return None
    seen, gains = set(), []
    for doc in ranking:
        gains.append(1 if doc in relevant and doc not in seen else 0)
        seen.add(doc)
    hits = sum(gains[:k])
    recall, precision = hits / len(relevant), hits / k
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    rr = next((1 / (i + 1) for i, g in enumerate(gains) if g), 0.0)
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains[:k]))
    idcg = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return {"recall": recall, "precision": precision, "f1": f1, "rr": rr, "ndcg": dcg / idcg}


# --------------------------------------------------------------------------- worked examples


def test_worked_example_from_the_issue():
    m = retrieval_metrics([["d1", "d3", "d5", "d7", "d9"]], [{"d3", "d7", "d12"}], k=5)
    assert m.means["recall"].value == pytest.approx(2 / 3)
    assert m.means["precision"].value == pytest.approx(0.4)
    assert m.means["rr"].value == pytest.approx(0.5)
    assert m.means["f1"].value == pytest.approx(2 * 0.4 * (2 / 3) / (0.4 + 2 / 3))
    # DCG = 1/log2(3) + 1/log2(5); ideal over min(3, 5) = 3 relevant documents
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert m.means["ndcg"].value == pytest.approx(dcg / idcg)


def test_ndcg_at_3_of_relevance_1_0_1_with_two_relevant_documents_is_0_920():
    value = ndcg_at_k([[True, False, True]], [2], k=3)[0]
    assert value == pytest.approx((1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3)))
    assert round(value, 3) == 0.920


def test_ideal_dcg_is_over_min_of_relevant_and_k():
    # 5 relevant documents, K = 2, both top ranks relevant: perfect at K = 2
    assert ndcg_at_k([[True, True, False]], [5], k=2)[0] == pytest.approx(1.0)
    # a relevant document not retrieved keeps nDCG below 1
    assert ndcg_at_k([[True, False, False]], [2], k=3)[0] == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_precision_of_a_short_ranking_divides_by_k():
    rel, nr = relevance_matrix([["a"]], [{"a"}])
    assert precision_at_k(rel, nr, k=10)[0] == pytest.approx(0.1)
    assert recall_at_k(rel, nr, k=10)[0] == 1.0


def test_reciprocal_rank_uses_the_whole_ranking_and_is_zero_when_nothing_relevant_is_retrieved():
    rel, nr = relevance_matrix([["a", "b", "c", "d"], ["x", "y"]], [{"d"}, {"z"}])
    assert reciprocal_rank(rel, nr).tolist() == [0.25, 0.0]
    assert per_query_metrics(rel, nr, k=2)["rr"].tolist() == [0.25, 0.0]


def test_query_without_relevant_documents_is_undefined_not_zero():
    m = retrieval_metrics([["a", "b"], ["c", "d"], ["e"]], [{"b"}, set(), None], k=2)
    assert m.n_queries == 3 and m.n_no_relevant == 2 and m.n == 1
    for name, values in m.per_query.items():
        assert values[0] == pytest.approx(reference(["a", "b"], {"b"}, 2)[name])
        assert np.isnan(values[1:]).all(), name
        est = m.means[name]
        assert est.n == 1 and est.extra["n_no_relevant"] == 2
    assert m.means["recall"].value == 1.0  # not (1 + 0 + 0) / 3


def test_no_query_with_relevant_documents_gives_undefined_means_with_a_note():
    m = retrieval_metrics([["a"]], [[]], k=1)
    assert m.means["ndcg"].status == "undefined" and m.means["ndcg"].value is None
    assert "no query has a relevant document" in m.means["ndcg"].note
    empty = retrieval_metrics([], [], k=1)
    assert empty.means["recall"].status == "no_data"


def test_a_document_retrieved_twice_counts_once_at_its_first_rank():
    rel, nr = relevance_matrix([["a", "x", "a", "b", "b"]], [{"a", "b"}])
    assert rel.tolist() == [[True, False, False, True, False]]
    assert recall_at_k(rel, nr, k=5)[0] == 1.0
    assert precision_at_k(rel, nr, k=5)[0] == pytest.approx(0.4)


def test_ids_compare_exactly_and_relevant_counts_distinct_ids():
    rel, nr = relevance_matrix([["7", 7]], [[7, 7, "8"]])
    assert rel.tolist() == [[False, True]] and nr.tolist() == [2]


def test_depth_truncates_the_rankings():
    rel, nr = relevance_matrix([["a", "b", "c"]], [{"c"}], depth=2)
    assert rel.shape == (1, 2) and reciprocal_rank(rel, nr)[0] == 0.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: relevance_matrix([["a"]], []), "same length"),
        (lambda: relevance_matrix([["a"]], [["a"]], depth=0), "depth"),
        (lambda: recall_at_k([[True]], [1], k=0), "k must be"),
        (lambda: recall_at_k([True], [1], k=1), "2-D"),
        (lambda: ndcg_at_k([[True]], [1, 2], k=1), "one entry per query"),
        (lambda: ranked_matrix([0, 0], [1, 1], [1, 0]), "share"),
    ],
)
def test_programming_errors_raise(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_ranked_matrix_scatters_by_group_and_position():
    m = ranked_matrix([0, 1, 0], [2, 0, 0], [1, 1, 0], n_groups=3)
    assert m.tolist() == [[0, 0, 1], [1, 0, 0], [0, 0, 0]]


def test_mean_defined_leaves_out_nan_and_counts_it():
    est = mean_defined([1.0, np.nan, 0.0])
    assert est.value == 0.5 and est.n == 2 and est.extra["n_undefined"] == 1


# --------------------------------------------------------------------------- cross-checks


rankings = st.lists(
    st.tuples(st.lists(st.integers(0, 30), max_size=15), st.sets(st.integers(0, 30), max_size=8)),
    min_size=1, max_size=12,
)


@FAST
@given(rankings, st.integers(1, 20))
def test_vectorised_metrics_equal_a_per_query_loop(queries, k):
    retrieved = [r for r, _ in queries]
    relevant = [s for _, s in queries]
    rel, nr = relevance_matrix(retrieved, relevant)
    got = per_query_metrics(rel, nr, k=k)
    for i, (ranking, rels) in enumerate(queries):
        want = reference(ranking, rels, k)
        for name in got:
            if want is None:
                assert np.isnan(got[name][i])
            else:
                assert got[name][i] == pytest.approx(want[name], abs=1e-12), (name, ranking, rels, k)
    assert np.array_equal(f1_at_k(rel, nr, k=k), got["f1"], equal_nan=True)
    assert np.array_equal(ndcg_at_k(rel, nr, k=k), got["ndcg"], equal_nan=True)


@FAST
@given(st.lists(st.lists(st.booleans(), min_size=1, max_size=12), min_size=1, max_size=10), st.integers(1, 15))
def test_ndcg_equals_sklearn_when_every_relevant_document_is_ranked(rows, k):
    # scikit-learn's ideal ranking is over the scored items only: the definitions coincide
    # when every relevant document appears in the ranking (and the scores have no ties).
    for row in rows:
        if not any(row):
            continue
        rel = np.array([row])
        ours = ndcg_at_k(rel, [sum(row)], k=k)[0]
        scores = np.arange(len(row), 0, -1)[None, :]
        if len(row) == 1:
            assert ours == 1.0  # scikit-learn refuses a single document
            continue
        assert ours == pytest.approx(ndcg_score(rel.astype(float), scores, k=k), abs=1e-12)


@FAST
@given(rankings, st.integers(1, 10))
def test_metrics_are_proportions_and_recall_grows_with_k(queries, k):
    retrieved = [r for r, _ in queries]
    relevant = [s for _, s in queries]
    rel, nr = relevance_matrix(retrieved, relevant)
    now, later = per_query_metrics(rel, nr, k=k), per_query_metrics(rel, nr, k=k + 1)
    for name, values in now.items():
        ok = values[~np.isnan(values)]
        assert ((ok >= 0) & (ok <= 1 + 1e-12)).all(), name
    defined = nr > 0
    assert (later["recall"][defined] >= now["recall"][defined]).all()


@FAST
@given(rankings, st.integers(1, 10), st.randoms(use_true_random=False))
def test_query_order_does_not_matter(queries, k, rnd):
    order = list(range(len(queries)))
    rnd.shuffle(order)
    first = retrieval_metrics([q[0] for q in queries], [q[1] for q in queries], k=k)
    second = retrieval_metrics([queries[i][0] for i in order], [queries[i][1] for i in order], k=k)
    for name in first.per_query:
        # Not exact equality: a query's row position changes how numpy's SIMD loops group the
        # sums, which can move the last bit; the metric of a query must not depend on it.
        assert np.allclose(first.per_query[name][order], second.per_query[name], rtol=1e-12, atol=1e-15, equal_nan=True)
        a, b = first.means[name].value, second.means[name].value
        assert (a is None and b is None) or a == pytest.approx(b)


@FAST
@given(st.integers(1, 8), st.integers(0, 6), st.integers(1, 10))
def test_relevant_documents_first_is_the_ideal_ranking(n_rel_retrieved, n_other, k):
    ranking = [f"r{i}" for i in range(n_rel_retrieved)] + [f"o{i}" for i in range(n_other)]
    rel, nr = relevance_matrix([ranking], [{f"r{i}" for i in range(n_rel_retrieved)}])
    assert ndcg_at_k(rel, nr, k=k)[0] == pytest.approx(1.0)
    assert reciprocal_rank(rel, nr)[0] == 1.0
