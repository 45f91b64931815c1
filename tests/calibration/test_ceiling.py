"""`human.ceiling`: the one human–human figure (mean pairwise κ for dense pairs, else the pooled α)."""

from __future__ import annotations

import itertools

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from calibrate.calibration.options import Options
from calibrate.calibration.sections import human_block
from calibrate.models import Task
from calibrate.reports.summary import ceiling

LABELS = ["supported", "unsupported", "not_applicable"]
OPTIONS = Options(bootstrap=200)


def frame(rows: list[tuple[str, int, object]]) -> pd.DataFrame:
    """Label rows (annotator, target, value) as labels_frame gives them."""
    return pd.DataFrame({"target_key": [f"claim:{t}" for _, t, _ in rows], "sample_id": [t for _, t, _ in rows],
                         "position": None, "annotator": [a for a, _, _ in rows], "value": [v for _, _, v in rows],
                         "adjudicated": False, "stale": False, "updated_at": None, "label_id": range(len(rows))})


def crowd(values: list, n_targets: int = 120, n_annotators: int = 40, per_target: int = 3, seed: int = 7):
    """Each target labelled by `per_target` of many annotators (most pairs share a target or none), with a truth."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_targets):
        truth = rng.integers(len(values))
        for a in rng.choice(n_annotators, per_target, replace=False):
            rows.append((f"w{a:03d}", t, values[truth if rng.random() < 0.7 else rng.integers(len(values))]))
    return rows


def package_alpha(rows: list, level: str, domain: list) -> float:
    annotators = sorted({a for a, _, _ in rows})
    data = np.full((len(annotators), max(t for _, t, _ in rows) + 1), np.nan)
    for a, t, v in rows:
        data[annotators.index(a), t] = domain.index(v) if level == "nominal" else v
    return krippendorff.alpha(reliability_data=data, level_of_measurement=level,
                              value_domain=list(range(len(domain))) if level == "nominal" else domain)


def test_a_crowd_sharing_few_targets_gets_the_pooled_alpha_of_the_krippendorff_package():
    rows = crowd(["supported", "unsupported"])
    task = Task(name="claim_support", kind="categorical", labels=LABELS, excluded=["not_applicable"])
    human = human_block(task, frame(rows), options=OPTIONS)
    top = human["ceiling"]
    assert human["n_pairs_sparse"] > 0 and top["metric"] == "krippendorff_alpha_nominal"
    assert top["value"] == pytest.approx(package_alpha(rows, "nominal", ["supported", "unsupported"]), abs=1e-9)
    assert top["value"] == pytest.approx(human["krippendorff_alpha"]["nominal"]["value"])
    assert top["ci"][0] < top["value"] < top["ci"][1]
    assert top["reason"]["code"] == "ceiling_pooled" and top["reason"]["pairs"] == 40 * 39 // 2
    assert "Krippendorff's α (nominal) pooled" in top["why"]
    # the mean of the few listed pairs would be another number: the report's figure is the α
    shown = ceiling({"kind": "categorical", "human": human})
    assert shown.value == top["value"] and shown.name == "Krippendorff's α (nominal)" and shown.ci == top["ci"]


@pytest.mark.parametrize("kind,level", [("ordinal", "ordinal"), ("continuous", "interval")])
def test_a_crowd_of_scores_gets_alpha_at_the_tasks_level(kind, level):
    rows = crowd([1, 2, 3, 4, 5], seed=11)
    task = Task(name="quality", kind=kind, scale_min=1, scale_max=5)
    top = human_block(task, frame(rows), options=OPTIONS)["ceiling"]
    assert top["metric"] == f"krippendorff_alpha_{level}"
    assert top["value"] == pytest.approx(package_alpha(rows, level, [1, 2, 3, 4, 5]), abs=1e-9)


def test_annotator_pairs_sharing_enough_targets_get_the_mean_pairwise_kappa():
    rng = np.random.default_rng(3)
    truth = rng.choice(["supported", "unsupported"], 30)
    rows = [(a, t, truth[t] if rng.random() < 0.8 else "unsupported") for a in ("ana", "ben", "eva") for t in range(30)]
    task = Task(name="claim_support", kind="categorical", labels=LABELS, excluded=["not_applicable"])
    human = human_block(task, frame(rows), options=OPTIONS)
    top = human["ceiling"]
    by = {a: [v for b, _, v in rows if b == a] for a in ("ana", "ben", "eva")}
    expected = np.mean([cohen_kappa_score(by[a], by[b]) for a, b in itertools.combinations(by, 2)])
    assert top["metric"] == "mean_pairwise_kappa" and top["value"] == pytest.approx(expected) and top["ci"] is None
    assert top["reason"] == {"code": "ceiling_pairwise", "count": 3, "min_shared": 10, "stat": "Cohen's κ"}
    # the same labels with a --min-shared above what the pairs share: the pooled α instead
    pooled = human_block(task, frame(rows), options=Options(bootstrap=200, min_shared=31))["ceiling"]
    assert pooled["metric"] == "krippendorff_alpha_nominal"
    assert pooled["value"] == pytest.approx(package_alpha(rows, "nominal", ["supported", "unsupported"]), abs=1e-9)


def test_no_two_annotators_no_ceiling_and_why():
    task = Task(name="claim_support", kind="categorical", labels=LABELS, excluded=["not_applicable"])
    top = human_block(task, frame([("ana", 1, "supported"), ("ben", 2, "unsupported")]), options=OPTIONS)["ceiling"]
    assert top["value"] is None and top["ci"] is None
    assert "no target was labelled by two or more annotators" in top["why"]
    assert ceiling({"kind": "categorical", "human": {"ceiling": top, "n": 0}}).note == top["why"]
