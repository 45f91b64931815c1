"""Sampling: seeded draws, stratification, negatives first, overlap, idempotency, splits, errors, CLI."""

from __future__ import annotations

import itertools
import math
import random
import re
from collections import Counter, defaultdict
from fractions import Fraction

import pytest
from sqlmodel import select

from calibrate.errors import NotFound
from calibrate.ingest.allocation import allocate_strata, combination_cycle, largest_remainder
from calibrate.ingest.sampling import (
    MISSING,
    PRIORITY_NEGATIVE,
    PRIORITY_NORMAL,
    SamplingError,
    SamplingSummary,
    parse_split_spec,
    sample_dataset,
)
from calibrate.models import Assignment, Dataset, Sample, User

# --------------------------------------------------------------------------- helpers


def make_dataset(session, name, count, *, meta=None, feedback=None, split=None, order=None, prefix="s"):
    """Insert a dataset of `count` samples directly (external ids s0000…); commit."""
    dataset = Dataset(name=name)
    session.add(dataset)
    session.flush()
    indexes = list(range(count)) if order is None else order
    for i in indexes:
        session.add(Sample(
            dataset_id=dataset.id, external_id=f"{prefix}{i:04d}", question=f"q{i}", answer=f"a{i}",
            content_hash=f"{name}-{i}", meta=meta(i) if meta else {}, feedback=feedback(i) if feedback else None,
            split=split(i) if split else None,
        ))
    session.commit()
    return dataset


def make_users(session, *names, active=True, role="annotator"):
    users = [User(username=name, role=role, active=active) for name in names]
    session.add_all(users)
    session.commit()
    return users


def assignments_of(session, dataset):
    """Return {external_id: [assignment, …]} for the dataset."""
    rows = session.exec(
        select(Sample.external_id, Assignment).join(Assignment, Assignment.sample_id == Sample.id)
        .join(Dataset, Dataset.id == Sample.dataset_id).where(Dataset.name == dataset)
    ).all()
    out = defaultdict(list)
    for external_id, assignment in rows:
        out[external_id].append(assignment)
    return out


def splits_of(session, dataset):
    rows = session.exec(select(Sample.external_id, Sample.split).join(Dataset).where(Dataset.name == dataset)).all()
    return dict(rows)


def usernames(session):
    return {user.id: user.username for user in session.exec(select(User))}


# --------------------------------------------------------------------------- pure helpers


@pytest.mark.parametrize(("total", "weights", "expected"), [
    (10, [47, 33, 20], [5, 3, 2]),
    (7, [47, 33, 20], [3, 2, 2]),          # plain rounding would give 3, 2, 1
    (10, [1, 1, 1], [4, 3, 3]),            # tie: equal weights, first position
    (10, [50, 30, 15, 5], [5, 3, 2, 0]),   # tie .5/.5: the larger weight wins
    (0, [3, 4], [0, 0]),
    (5, [0, 2], [0, 5]),
    (10, [Fraction(1, 4), Fraction(1, 4), Fraction(1, 2)], [3, 2, 5]),
])
def test_largest_remainder(total, weights, expected):
    assert largest_remainder(total, weights) == expected
    assert sum(expected) == total


@pytest.mark.parametrize(("n", "sizes", "expected"), [
    (10, {"a": 47, "b": 33, "c": 20}, {"a": 5, "b": 3, "c": 2}),
    (7, {"a": 47, "b": 33, "c": 20}, {"a": 3, "b": 2, "c": 2}),
    # largest remainder gives d nothing; d gets one, from c (the most over its quota 1.5)
    (10, {"a": 50, "b": 30, "c": 15, "d": 5}, {"a": 5, "b": 3, "c": 1, "d": 1}),
    (4, {"a": 97, "b": 1, "c": 1, "d": 1}, {"a": 1, "b": 1, "c": 1, "d": 1}),
    (200, {"a": 47, "b": 33}, {"a": 47, "b": 33}),  # more than there is: everything
])
def test_allocate_strata_is_proportional_with_one_each(n, sizes, expected):
    assert allocate_strata(n, sizes) == expected


def test_allocate_strata_refuses_fewer_draws_than_strata():
    with pytest.raises(SamplingError, match="4 strata"):
        allocate_strata(3, {"a": 5, "b": 5, "c": 5, "d": 5})


@pytest.mark.parametrize(("n_users", "k"), [(u, k) for u in range(1, 9) for k in range(1, u + 1)])
def test_combination_cycle_covers_every_group_and_keeps_loads_within_one(n_users, k):
    for seed in (0, 1, 7):
        cycle = combination_cycle(n_users, k, seed)
        assert sorted(cycle) == list(itertools.combinations(range(n_users), k))
        loads = [0] * n_users
        for group in cycle:  # after every prefix, not just at the end
            for user in group:
                loads[user] += 1
            assert max(loads) - min(loads) <= 1, (n_users, k, seed, cycle)
    assert combination_cycle(n_users, k, 3) == combination_cycle(n_users, k, 3)


def test_combination_cycle_is_seeded():
    assert combination_cycle(6, 2, 0) != combination_cycle(6, 2, 1)


# --------------------------------------------------------------------------- split spec


@pytest.mark.parametrize(("text", "expected"), [
    ("train=0.2,dev=0.4,test=0.4", {"train": 0.2, "dev": 0.4, "test": 0.4}),
    (" Train = 0.5 , test=0.5 ", {"train": 0.5, "test": 0.5}),
    ("dev=25%,test=75%", {"dev": 0.25, "test": 0.75}),
    ("test=1", {"test": 1.0}),
    ("train=0.333333,dev=0.333333,test=0.333334", {"train": 0.333333, "dev": 0.333333, "test": 0.333334}),
])
def test_parse_split_spec(text, expected):
    assert parse_split_spec(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty"),
    ("train=0.5,test=0.4", "sum to 1, they sum to 0.9"),
    ("train=0.5,valid=0.5", "unknown split 'valid'"),
    ("train=0.5,train=0.5", "train is given twice"),
    ("train=abc,test=0.5", "train=abc is not a number"),
    ("train=0,test=1", "must be a fraction > 0"),
    ("train=-0.5,test=1.5", "must be a fraction > 0"),
    ("train=nan,test=1", "must be a fraction > 0"),
    ("train0.5,test=0.5", "is not NAME=FRACTION"),
    ("train=0.5,,test=0.5", "is not NAME=FRACTION"),
])
def test_parse_split_spec_errors(text, message):
    with pytest.raises(SamplingError, match=re.escape(message)):
        parse_split_spec(text)


# --------------------------------------------------------------------------- seeded draws


def test_same_seed_same_items_and_unrelated_data_changes_nothing(session):
    make_dataset(session, "d", 200)
    first = sample_dataset(session, "d", n=20, seed=5)
    session.rollback()
    again = sample_dataset(session, "d", n=20, seed=5)
    session.rollback()
    assert again.external_ids == first.external_ids
    assert len(set(first.external_ids)) == 20
    make_dataset(session, "other", 300)  # unrelated samples in another dataset
    assert sample_dataset(session, "d", n=20, seed=5).external_ids == first.external_ids


def test_draw_is_independent_of_insertion_order(session):
    make_dataset(session, "forward", 150)
    make_dataset(session, "backward", 150, order=list(reversed(range(150))))
    shuffled = list(range(150))
    random.Random(3).shuffle(shuffled)
    make_dataset(session, "shuffled", 150, order=shuffled)
    picks = [sample_dataset(session, name, n=15, seed=2, stratify_by=None).external_ids
             for name in ("forward", "backward", "shuffled")]
    assert picks[0] == picks[1] == picks[2]


def test_draw_is_independent_of_existing_assignments(session):
    make_dataset(session, "d", 100)
    make_users(session, "a", "b", "c")
    first = sample_dataset(session, "d", n=10, seed=4, overlap=2, assign=["a", "b", "c"])
    session.commit()
    second = sample_dataset(session, "d", n=10, seed=4)
    assert second.external_ids == first.external_ids


def test_different_seeds_take_different_items(session):
    make_dataset(session, "d", 500)
    picks = {seed: set(sample_dataset(session, "d", n=25, seed=seed).external_ids) for seed in range(4)}
    for a, b in itertools.combinations(picks, 2):
        assert picks[a] != picks[b]


def test_larger_n_with_same_seed_extends_the_sample(session):
    make_dataset(session, "d", 100)
    small = sample_dataset(session, "d", n=10, seed=9).external_ids
    session.rollback()
    large = sample_dataset(session, "d", n=30, seed=9).external_ids
    assert large[:10] == small


@pytest.mark.parametrize(("fraction", "size", "expected"), [
    (0.02, 400, 8),
    (0.05, 50, 3),   # 2.5 rounds half up
    (0.01, 30, 1),   # 0.3 rounds to 0: at least one
    (1.0, 30, 30),
    (0.5, 7, 4),
])
def test_fraction_rounds_half_up_and_takes_at_least_one(session, fraction, size, expected):
    make_dataset(session, "d", size)
    summary = sample_dataset(session, "d", fraction=fraction)
    assert summary.taken == expected
    assert summary.eligible == size


def test_n_larger_than_dataset_takes_everything_and_says_so(session):
    make_dataset(session, "d", 12)
    summary = sample_dataset(session, "d", n=50, seed=1)
    assert summary.taken == 12 and summary.requested == 50
    assert summary.line().startswith("sampled all 12 samples of d (asked for 50; seed 1")


# --------------------------------------------------------------------------- stratification


def test_stratified_allocation_is_exact_largest_remainder(session):
    topics = ["a"] * 47 + ["b"] * 33 + ["c"] * 20
    make_dataset(session, "d", 100, meta=lambda i: {"topic": topics[i]})
    summary = sample_dataset(session, "d", n=7, seed=0, stratify_by="metadata.topic")
    assert summary.strata == {"a": 3, "b": 2, "c": 2}
    taken = Counter(topics[int(x[1:])] for x in summary.external_ids)
    assert taken == {"a": 3, "b": 2, "c": 2}
    assert "stratified by metadata.topic: 3 strata" in summary.line()


def test_every_stratum_gets_one_and_missing_field_is_its_own_stratum(session):
    def meta(i):
        if i < 90:
            return {"topic": "big"}
        if i < 97:
            return {"topic": "mid", "other": 1}
        return {}  # 3 samples without the field

    make_dataset(session, "d", 100, meta=meta)
    summary = sample_dataset(session, "d", n=5, seed=3, stratify_by="metadata.topic")
    assert summary.strata == {"big": 3, "mid": 1, MISSING: 1}
    assert list(summary.strata)[-1] == MISSING


@pytest.mark.parametrize(("field", "values", "expected"), [
    ("feedback", lambda i: -1 if i < 10 else (1 if i < 40 else None), {"-1": 1, "1": 3, MISSING: 6}),
    ("split", lambda i: "test" if i < 50 else "train", {"test": 5, "train": 5}),
    ("metadata.level.name", None, {"x": 5, "y": 5}),  # nested path
    ("metadata.flag", None, {"false": 5, "true": 5}),  # JSON scalars by their JSON text
])
def test_stratify_by_top_level_and_nested_fields(session, field, values, expected):
    kwargs = {}
    if field == "feedback":
        kwargs["feedback"] = values
    elif field == "split":
        kwargs["split"] = values
    else:
        kwargs["meta"] = lambda i: {"level": {"name": "x" if i % 2 else "y"}, "flag": bool(i % 2)}
    make_dataset(session, "d", 100, **kwargs)
    assert sample_dataset(session, "d", n=10, seed=0, stratify_by=field).strata == expected


def test_stratified_draw_is_reproducible(session):
    make_dataset(session, "d", 300, meta=lambda i: {"topic": f"t{i % 7}"})
    one = sample_dataset(session, "d", n=40, seed=11, stratify_by="metadata.topic")
    session.rollback()
    two = sample_dataset(session, "d", n=40, seed=11, stratify_by="metadata.topic")
    assert one.external_ids == two.external_ids
    assert sum(one.strata.values()) == 40 and len(one.strata) == 7


# --------------------------------------------------------------------------- negatives first


def test_negative_first_takes_negatives_before_the_rest(session):
    negatives = {3, 17, 40, 41, 77, 90, 120, 150}
    make_dataset(session, "d", 200, feedback=lambda i: -1 if i in negatives else (1 if i % 3 else 0))
    few = sample_dataset(session, "d", n=5, seed=0, negative_first=True)
    assert all(int(x[1:]) in negatives for x in few.external_ids)
    session.rollback()
    many = sample_dataset(session, "d", n=20, seed=0, negative_first=True)
    ids = [int(x[1:]) for x in many.external_ids]
    assert set(ids[:8]) == negatives and not negatives & set(ids[8:])
    assert many.negatives == 8 and many.negatives_available == 8
    assert "negative feedback first: 8 of 8 taken" in many.line()
    priorities = {x: [a.priority for a in rows] for x, rows in assignments_of(session, "d").items()}
    for external_id in many.external_ids:
        expected = PRIORITY_NEGATIVE if int(external_id[1:]) in negatives else PRIORITY_NORMAL
        assert priorities[external_id] == [expected]


def test_without_negative_first_negatives_are_not_preferred(session):
    make_dataset(session, "d", 200, feedback=lambda i: -1 if i < 100 else 1)
    summary = sample_dataset(session, "d", n=20, seed=0)
    assert 0 < summary.negatives < 20
    assert {a.priority for rows in assignments_of(session, "d").values() for a in rows} == {PRIORITY_NORMAL}


def test_negative_first_within_each_stratum_allocation(session):
    # a: 60 samples, 10 negatives; b: 40 samples, 1 negative. n=10 → a 6, b 4.
    def feedback(i):
        return -1 if i < 10 or i == 60 else 1

    make_dataset(session, "d", 100, meta=lambda i: {"topic": "a" if i < 60 else "b"}, feedback=feedback)
    summary = sample_dataset(session, "d", n=10, seed=0, stratify_by="metadata.topic", negative_first=True)
    assert summary.strata == {"a": 6, "b": 4}  # stratification wins: still proportional
    taken = [int(x[1:]) for x in summary.external_ids]
    assert sorted(i for i in taken if i < 60) == sorted(i for i in taken if i < 10)  # a: all negatives
    assert 60 in taken  # b's only negative
    assert summary.negatives == 7 and summary.negatives_available == 11


# --------------------------------------------------------------------------- overlap and assignment


def test_open_slots_are_k_per_sample_and_never_more(session):
    make_dataset(session, "d", 50)
    first = sample_dataset(session, "d", n=10, seed=0, overlap=2)
    session.commit()
    assert (first.assignments_added, first.assignments_existing) == (20, 0)
    rows = assignments_of(session, "d")
    assert sorted(rows) == sorted(first.external_ids)
    assert all(len(r) == 2 and all(a.user_id is None and a.status == "pending" for a in r) for r in rows.values())
    again = sample_dataset(session, "d", n=10, seed=0, overlap=2)
    session.commit()
    assert (again.assignments_added, again.assignments_existing) == (0, 20)
    assert "0 assignments added, 20 already there (overlap 2, open slots)" in again.line()
    more = sample_dataset(session, "d", n=10, seed=0, overlap=3)
    session.commit()
    assert (more.assignments_added, more.assignments_existing) == (10, 20)
    assert all(len(r) == 3 for r in assignments_of(session, "d").values())


@pytest.mark.parametrize(("n_users", "k", "n"), [
    (2, 2, 5), (3, 2, 3), (3, 2, 10), (4, 2, 6), (4, 2, 7), (4, 2, 13), (5, 2, 10), (5, 2, 23),
    (6, 2, 15), (7, 2, 30), (4, 3, 5), (5, 3, 10), (6, 3, 20), (6, 3, 27), (5, 4, 7), (8, 3, 60),
    (4, 1, 10), (7, 3, 9),
])
def test_round_robin_every_sample_k_annotators_pairs_share_items_loads_balanced(session, n_users, k, n):
    names = [f"ann{i}" for i in range(n_users)]
    make_users(session, *names)
    make_dataset(session, "d", 100)
    summary = sample_dataset(session, "d", n=n, seed=2, overlap=k, assign=list(reversed(names)))
    session.commit()
    assert summary.assignments_added == n * k and summary.assignees == names
    who = usernames(session)
    rows = assignments_of(session, "d")
    assert sorted(rows) == sorted(summary.external_ids)
    together = Counter()
    loads = Counter({name: 0 for name in names})
    for assignments in rows.values():
        users = sorted(who[a.user_id] for a in assignments)
        assert len(users) == k == len(set(users))  # exactly K distinct annotators
        loads.update(users)
        together.update(itertools.combinations(users, 2))
    assert max(loads.values()) - min(loads.values()) <= 1, loads
    if k >= 2 and n >= math.comb(n_users, k):
        assert all(together[pair] >= 1 for pair in itertools.combinations(names, 2)), together
    assert f"round-robin over {n_users} annotators" in summary.line()


def test_assignment_is_idempotent_and_says_so(session):
    make_users(session, "a", "b", "c")
    make_dataset(session, "d", 60)
    first = sample_dataset(session, "d", n=12, seed=1, overlap=2, assign=["a", "b", "c"])
    session.commit()
    count = len(session.exec(select(Assignment)).all())
    again = sample_dataset(session, "d", n=12, seed=1, overlap=2, assign=["c", "a", "b"])  # order of names irrelevant
    session.commit()
    assert first.assignments_added == 24
    assert (again.assignments_added, again.assignments_existing) == (0, 24)
    assert len(session.exec(select(Assignment)).all()) == count
    assert "0 assignments added, 24 already there" in again.line()


def test_named_assignment_fills_open_slots_instead_of_adding_more(session):
    make_users(session, "a", "b")
    make_dataset(session, "d", 30)
    sample_dataset(session, "d", n=6, seed=0, overlap=2)
    session.commit()
    summary = sample_dataset(session, "d", n=6, seed=0, overlap=2, assign=["a", "b"])
    session.commit()
    assert (summary.assignments_added, summary.slots_filled) == (12, 12)
    assert "12 open slots filled" in summary.line()
    who = usernames(session)
    for assignments in assignments_of(session, "d").values():
        assert sorted(who[a.user_id] for a in assignments) == ["a", "b"]
    # and open slots after named ones add nothing either
    assert sample_dataset(session, "d", n=6, seed=0, overlap=2).assignments_added == 0


# --------------------------------------------------------------------------- splits


def test_split_fractions_are_exact_and_reproducible(session):
    make_dataset(session, "d", 400)
    summary = sample_dataset(session, "d", n=40, seed=0, split={"train": 0.2, "dev": 0.4, "test": 0.4})
    session.commit()
    assert summary.splits == {"train": 8, "dev": 16, "test": 16}
    assert summary.line().endswith("splits train 8, dev 16, test 16")
    first = splits_of(session, "d")
    assert Counter(v for v in first.values() if v) == {"train": 8, "dev": 16, "test": 16}
    assert {x for x, v in first.items() if v} == set(summary.external_ids)  # only the taken samples

    make_dataset(session, "d2", 400)
    sample_dataset(session, "d2", n=40, seed=0, split={"train": 0.2, "dev": 0.4, "test": 0.4})
    session.commit()
    assert splits_of(session, "d2") == first  # same seed, same splits per sample


@pytest.mark.parametrize(("n", "spec", "expected"), [
    (10, {"train": 0.25, "dev": 0.25, "test": 0.5}, {"train": 3, "dev": 2, "test": 5}),  # tie → train
    (7, {"train": 0.2, "dev": 0.4, "test": 0.4}, {"train": 1, "dev": 3, "test": 3}),    # 1.4, 2.8, 2.8
    (9, {"dev": 0.5, "test": 0.5}, {"dev": 5, "test": 4}),
    (3, {"test": 1.0}, {"test": 3}),
])
def test_split_counts_by_largest_remainder(session, n, spec, expected):
    make_dataset(session, "d", 50)
    assert sample_dataset(session, "d", n=n, seed=0, split=spec).splits == expected


def test_existing_splits_are_kept_and_totals_still_exact(session):
    make_dataset(session, "d", 100, split=lambda i: "test" if i < 30 else None)
    summary = sample_dataset(session, "d", n=100, seed=0, split={"train": 0.5, "dev": 0.2, "test": 0.3})
    session.commit()
    assert summary.splits == {"train": 50, "dev": 20, "test": 30} and summary.splits_kept == 30
    assert "(30 kept)" in summary.line()
    after = splits_of(session, "d")
    assert all(after[f"s{i:04d}"] == "test" for i in range(30))  # a frozen test split never moves
    again = sample_dataset(session, "d", n=100, seed=5, split={"train": 0.1, "dev": 0.1, "test": 0.8})
    session.commit()
    assert splits_of(session, "d") == after and again.splits_kept == 100


def test_split_is_stratified_by_the_same_field(session):
    topics = ["a"] * 50 + ["b"] * 30 + ["c"] * 20
    make_dataset(session, "d", 100, meta=lambda i: {"topic": topics[i]})
    spec = {"train": 0.2, "dev": 0.4, "test": 0.4}
    summary = sample_dataset(session, "d", n=100, seed=0, stratify_by="metadata.topic", split=spec)
    session.commit()
    assert summary.splits == {"train": 20, "dev": 40, "test": 40}
    cells = Counter((topics[int(x[1:])], s) for x, s in splits_of(session, "d").items())
    for topic, size in Counter(topics).items():
        for name, share in spec.items():
            quota = size * share
            assert math.floor(quota) <= cells[(topic, name)] <= math.ceil(quota), (topic, name, cells)


# --------------------------------------------------------------------------- errors


@pytest.fixture
def populated(session):
    make_dataset(session, "alpha", 20, meta=lambda i: {"topic": f"t{i % 5}", "lang": "en"})
    make_dataset(session, "beta", 5)
    session.add(Dataset(name="empty"))
    session.commit()
    make_users(session, "ann1", "ann2", "ann3")
    make_users(session, "gone", active=False)
    return session


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"dataset": "empty", "n": 5}, "dataset 'empty' has no samples"),
    ({"dataset": "alpha", "n": 5, "stratify_by": "metadata.colour"}, "no sample of alpha has metadata.colour; metadata fields: lang, topic"),
    ({"dataset": "alpha", "n": 5, "stratify_by": "topic"}, "did you mean metadata.topic?"),
    ({"dataset": "alpha", "n": 5, "stratify_by": "feedback"}, "no sample of alpha has feedback set"),
    ({"dataset": "alpha", "n": 3, "stratify_by": "metadata.topic"}, "n = 3 is fewer than its 5 strata"),
    ({"dataset": "alpha", "fraction": 0.1, "stratify_by": "metadata.topic"}, "fraction 0.1 of 20 samples gives n = 2 is fewer than its 5 strata"),
    ({"dataset": "alpha", "n": 5, "assign": ["ann1", "zed", "ann2", "yan"]}, "unknown users yan, zed; existing annotators: ann1, ann2, ann3"),
    ({"dataset": "alpha", "n": 5, "assign": ["ann1", "gone"]}, "inactive user gone"),
    ({"dataset": "alpha", "n": 5, "overlap": 3, "assign": ["ann1", "ann2"]}, "overlap 3 needs at least 3 annotators, but 2 are named (ann1, ann2)"),
    ({"dataset": "alpha", "n": 5, "split": {"train": 0.5, "test": 0.4}}, "must sum to 1"),
    ({"dataset": "alpha", "n": 5, "split": {"valid": 1.0}}, "unknown split 'valid'"),
    ({"dataset": "alpha"}, "exactly one of n or fraction"),
    ({"dataset": "alpha", "n": 5, "fraction": 0.5}, "exactly one of n or fraction"),
    ({"dataset": "alpha", "n": 0}, "n must be a whole number ≥ 1"),
    ({"dataset": "alpha", "fraction": 1.5}, "fraction must be > 0 and ≤ 1"),
    ({"dataset": "alpha", "n": 5, "seed": -1}, "seed must be a whole number ≥ 0"),
    ({"dataset": "alpha", "n": 5, "overlap": 0}, "overlap must be a whole number ≥ 1"),
])
def test_errors_are_clear(populated, kwargs, message):
    dataset = kwargs.pop("dataset")
    with pytest.raises(SamplingError, match=re.escape(message)):
        sample_dataset(populated, dataset, **kwargs)
    assert populated.exec(select(Assignment)).all() == []


def test_unknown_dataset_names_the_ones_that_exist(populated):
    with pytest.raises(NotFound, match=re.escape("unknown dataset 'nope' (datasets: alpha, beta, empty): import samples first")):
        sample_dataset(populated, "nope", n=5)
    assert populated.exec(select(Assignment)).all() == []


def test_unknown_dataset_when_there_are_none(session):
    with pytest.raises(NotFound, match=re.escape("(datasets: none yet): import samples first")):
        sample_dataset(session, "d", n=1)


def test_summary_line_shape():
    summary = SamplingSummary(
        dataset="demo", taken=40, eligible=400, assignments_added=80, assignments_existing=0,
        strata={f"t{i}": 1 for i in range(7)}, negatives=0, splits={"train": 8, "dev": 16, "test": 16},
        overlap=2, assignees=["a", "b", "c", "d"], stratify_by="metadata.topic",
    )
    assert summary.line() == (
        "sampled 40 of 400 samples of demo (seed 0, stratified by metadata.topic: 7 strata); "
        "80 assignments added (overlap 2, round-robin over 4 annotators); splits train 8, dev 16, test 16"
    )


# --------------------------------------------------------------------------- CLI


def test_cli_sample(runner, session):
    make_users(session, "a", "b", "c")
    make_dataset(session, "d", 30)
    args = ["sample", "--dataset", "d", "--n", "10", "--seed", "1", "--overlap", "2",
            "--assign", "a", "--assign", "b", "--assign", "c"]
    result = runner.invoke(args)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == (
        "sampled 10 of 30 samples of d (seed 1); 20 assignments added (overlap 2, round-robin over 3 annotators)")
    again = runner.invoke(args)
    assert again.exit_code == 0
    assert "0 assignments added, 20 already there" in again.output
    session.expire_all()
    assert len(session.exec(select(Assignment)).all()) == 20


@pytest.mark.parametrize(("extra", "message"), [
    (["--n", "5", "--split", "train=0.5,test=0.4"], "must sum to 1"),
    (["--n", "5", "--assign", "nobody"], "unknown user nobody"),
    (["--n", "0"], "--n"),
    (["--n", "5", "--fraction", "0.1"], "exactly one of --n or --fraction"),
    (["--n", "5", "--stratify-by", "metadata.nothing"], "no sample of d has metadata.nothing"),
])
def test_cli_sample_bad_input_exits_2(runner, session, extra, message):
    make_dataset(session, "d", 30, meta=lambda i: {"topic": "x"})
    result = runner.invoke(["sample", "--dataset", "d", *extra])
    assert result.exit_code == 2
    assert message in result.output


def _label_samples(session, dataset, count):
    """Give the first `count` samples of `dataset` (by external id) one answer_quality label each; commit."""
    from calibrate.models import Label, Task

    task = session.exec(select(Task).where(Task.name == "answer_quality")).one()
    (user,) = make_users(session, "labeller")
    samples = session.exec(select(Sample).where(Sample.dataset_id == dataset.id).order_by(Sample.external_id)).all()
    for sample in samples[:count]:
        session.add(Label(task_id=task.id, sample_id=sample.id, target_key=f"sample:{sample.id}", annotator_id=user.id, value="4"))
    session.commit()


def test_split_of_a_few_sampled_items_warns_about_the_labelled_rest_and_says_how_to_split_it(session, runner):
    dataset = make_dataset(session, "claims", 12)
    _label_samples(session, dataset, 10)
    summary = sample_dataset(session, "claims", n=4, seed=3, split={"dev": 0.5, "test": 0.5})
    taken = set(summary.external_ids)
    labelled_left = len({f"s{i:04d}" for i in range(10)} - taken)
    assert summary.unsplit_labelled == labelled_left > 0
    assert summary.warning() == (
        f"warning: --split split only the 4 sampled samples; {labelled_left} other labelled samples of claims still "
        "have no split, so a report or dashboard on a split leaves them out. To split every sample, run "
        "`calibrate sample --dataset claims --fraction 1 --seed 3 --split dev=0.5,test=0.5` (splits already given "
        "are kept; it also queues every sample for annotation)")
    session.rollback()
    result = runner.invoke(["sample", "--dataset", "claims", "--fraction", "1", "--seed", "3", "--split", "dev=0.5,test=0.5"])
    assert result.exit_code == 0 and "warning" not in result.output  # the advice works: every sample has a split now
    assert all(s.split for s in session.exec(select(Sample).where(Sample.dataset_id == dataset.id)))


def test_split_warning_goes_to_stderr_and_not_when_nothing_labelled_is_left_out(session, runner):
    dataset = make_dataset(session, "few", 6)
    assert sample_dataset(session, "few", n=2, seed=0, split={"dev": 0.5, "test": 0.5}).warning() == ""  # nothing labelled
    session.commit()
    _label_samples(session, dataset, 6)
    result = runner.invoke(["sample", "--dataset", "few", "--n", "3", "--seed", "1", "--split", "dev=0.5,test=0.5"])
    assert result.exit_code == 0
    assert "warning: --split split only the 3 sampled samples" in result.stderr
    assert "warning" not in result.stdout
    assert sample_dataset(session, "few", n=3, seed=1).warning() == ""  # no --split: no warning
