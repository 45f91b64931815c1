"""RAG metrics on hand-computed cases: context precision and faithfulness."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibrate.stats import context_precision, faithfulness, faithfulness_counts


@pytest.mark.parametrize(
    ("relevance", "expected"),
    [
        ([1, 0, 1], (1 / 1 + 2 / 3) / 2),          # relevant at ranks 1 and 3
        ([0, 1, 1], (1 / 2 + 2 / 3) / 2),          # relevant at ranks 2 and 3
        ([1, 1, 0, 0], 1.0),                        # every relevant context on top
        ([0, 0, 0, 1], 1 / 4),                      # a single relevant context at rank 4
        ([0, 1, 0, 1, 1], (1 / 2 + 2 / 4 + 3 / 5) / 3),
        ([0, 0, 0], 0.0),                           # nothing useful retrieved: 0 (RAGAS)
        ([1], 1.0),
    ],
)
def test_context_precision_hand_computed(relevance, expected):
    assert context_precision([relevance])[0] == pytest.approx(expected)


def test_context_precision_rows_are_independent_and_padding_is_not_relevant():
    values = context_precision([[1, 0, 1, 0], [0, 1, 0, 0]])
    assert values.tolist() == pytest.approx([(1 + 2 / 3) / 2, 1 / 2])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=12))
def test_context_precision_is_average_precision_over_the_retrieved_list(row):
    ranks = [i + 1 for i, r in enumerate(row) if r]
    expected = sum((j + 1) / rank for j, rank in enumerate(ranks)) / len(ranks) if ranks else 0.0
    value = context_precision([row])[0]
    assert value == pytest.approx(expected) and 0 <= value <= 1


def test_context_precision_refuses_non_binary_and_non_matrix_input():
    with pytest.raises(ValueError, match="0 and 1"):
        context_precision([[0.5, 1]])
    with pytest.raises(ValueError, match="2-D"):
        context_precision([1, 0])


def test_faithfulness_divides_by_the_claims_not_by_the_verdicts_returned():
    # 5 claims; the judge returned 3 verdicts (2 supported) and failed on 2: 2/5, not 2/3
    groups = [0, 0, 0, 0, 0, 1, 1]
    supported = [True, True, False, False, False, True, False]
    counted = [True] * 7
    s, t = faithfulness_counts(groups, supported, counted)
    assert s.tolist() == [2, 1] and t.tolist() == [5, 2]
    assert faithfulness(s, t).tolist() == [0.4, 0.5]


def test_faithfulness_leaves_out_claims_that_do_not_count():
    s, t = faithfulness_counts([0, 0, 0], [True, False, True], [True, True, False])
    assert faithfulness(s, t).tolist() == [0.5]


def test_faithfulness_of_an_answer_without_claims_is_undefined():
    values = faithfulness([0, 3], [0, 4])
    assert np.isnan(values[0]) and values[1] == 0.75


@pytest.mark.parametrize(("supported", "total", "message"), [([3], [2], "more supported"), ([1, 1], [2], "same length"),
                                                             ([-1], [2], "non-negative")])
def test_faithfulness_refuses_impossible_counts(supported, total, message):
    with pytest.raises(ValueError, match=message):
        faithfulness(supported, total)
