"""The judge as one more rater: `krippendorff_alpha_experts` / `krippendorff_alpha_with_judge` in a section's `human` block,
equal to the `krippendorff` package on the same reliability data."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from bs4 import BeautifulSoup
from prompt_helpers import prompt_version
from sqlmodel import select

from calibrate.calibration import Options, build_report
from calibrate.models import FewShot, Judge
from calibrate.reports import render

FAST = Options(bootstrap=50)
LABELS = ["pass", "fail"]


def _package(matrix: np.ndarray, level: str, domain: list) -> float:
    return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=level, value_domain=domain))


@pytest.fixture
def binary(runner):
    result = runner.invoke(["task", "add", "ok_task", "--target", "sample", "--kind", "categorical", "--labels", "pass,fail"])
    assert result.exit_code == 0, result.output


def test_nominal_alpha_with_and_without_the_judge_equals_the_krippendorff_package(binary, session, store):
    rng = np.random.default_rng(3)
    n = 60
    experts = ["ana", "bea", "cai"]
    matrix = np.full((4, n), np.nan)  # experts' rows, then the judge's, on the units the report uses
    keep = []
    for i in range(n):
        store.sample(f"s{i}")
        truth = int(rng.integers(2))
        raters = rng.choice(3, int(rng.integers(1, 4)), replace=False)
        for r in raters:
            value = truth if rng.random() < 0.8 else 1 - truth
            store.label("ok_task", experts[r], f"s{i}", LABELS[value])
            matrix[r, i] = value
        judged = i % 7 != 0  # no usable verdict on some: those units are left out of both figures
        verdict = truth if rng.random() < 0.7 else 1 - truth
        store.verdict("J", "ok_task", f"s{i}", LABELS[verdict] if judged else None)
        matrix[3, i] = verdict
        keep.append(len(raters) >= 2 and judged)
    store.commit()
    human = build_report(session, "d", "J", options=FAST).data["tasks"]["ok_task"]["human"]
    units = matrix[:, np.array(keep)]
    expected_experts = _package(units[:3], "nominal", [0, 1])
    expected_with = _package(units, "nominal", [0, 1])
    assert human["krippendorff_alpha_experts"]["value"] == pytest.approx(expected_experts, abs=1e-9)
    assert human["krippendorff_alpha_with_judge"]["value"] == pytest.approx(expected_with, abs=1e-9)
    assert human["krippendorff_alpha_experts"]["n"] == sum(keep) and human["krippendorff_alpha_with_judge"]["level"] == "nominal"
    assert expected_with < expected_experts  # a judge worse than the experts lowers alpha
    report = build_report(session, "d", "J", options=FAST)
    html = BeautifulSoup(render(report, "html", "es"), "html.parser")
    row = html.select_one('tr[data-stat="krippendorff_alpha_with_judge"]')
    assert "el juez como un evaluador más" in row.get_text() and f"{expected_with:.3f}".replace(".", ",") in row.get_text()
    assert f"Experts alone: Krippendorff's α (nominal) {expected_experts:.3f}" in render(report, "md")


def test_ordinal_alpha_at_the_tasks_level_and_few_shots_left_out(session, store):
    rng = np.random.default_rng(5)
    n = 40
    matrix = np.full((3, n), np.nan)
    for i in range(n):
        store.sample(f"s{i}")
        truth = int(rng.integers(1, 6))
        for r, name in enumerate(["ana", "bea"]):
            value = int(np.clip(truth + rng.integers(-1, 2), 1, 5))
            store.label("answer_quality", name, f"s{i}", value)
            matrix[r, i] = value
        verdict = int(np.clip(truth + rng.integers(-2, 3), 1, 5))
        store.verdict("J", "answer_quality", f"s{i}", verdict)
        matrix[2, i] = verdict
    version = prompt_version(session, "answer_quality")
    shot = store.samples["s0"]
    session.add(FewShot(version_id=version.id, order=0, sample_id=shot.id, target_key=f"sample:{shot.id}", value="3"))
    session.exec(select(Judge).where(Judge.name == "J")).one().prompt_version_id = version.id
    store.commit()
    human = build_report(session, "d", "J", options=FAST).data["tasks"]["answer_quality"]["human"]
    units = matrix[:, 1:]
    domain = sorted(set(units[~np.isnan(units)].tolist()))
    assert human["krippendorff_alpha_experts"]["value"] == pytest.approx(_package(units[:2], "ordinal", domain), abs=1e-9)
    assert human["krippendorff_alpha_with_judge"]["value"] == pytest.approx(_package(units, "ordinal", domain), abs=1e-9)
    assert human["krippendorff_alpha_with_judge"]["level"] == "ordinal" and human["krippendorff_alpha_experts"]["n"] == n - 1


def test_without_two_experts_both_figures_say_why(binary, session, store):
    for i in range(5):
        store.sample(f"s{i}")
        store.label("ok_task", "ana", f"s{i}", "pass")
        store.verdict("J", "ok_task", f"s{i}", "pass")
    store.commit()
    human = build_report(session, "d", "J", options=FAST).data["tasks"]["ok_task"]["human"]
    for key in ("krippendorff_alpha_experts", "krippendorff_alpha_with_judge"):
        assert human[key]["value"] is None and human[key]["reason"]["code"] == "no_two_annotators"
