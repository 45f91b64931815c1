"""`calibrate report` and `calibrate gate` through the command line."""

from __future__ import annotations

import json

import pytest

from calibrate.demo import DATASET, TO_LABEL


@pytest.fixture
def demo_with_judges(demo_engine, tmp_path, runner):
    """The demo plus two imported judges: one that copies an expert, one that always says 'supported'."""
    from calibrate.demo import HERE

    good, lazy = [], []
    for line in (HERE / "labels.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["annotator"] != "dra.garcia" or row["task"] != "claim_support":
            continue
        good.append({"sample_id": row["sample_id"], "task": "claim_support", "claim": row["claim"], "value": row["value"]})
        lazy.append({"sample_id": row["sample_id"], "task": "claim_support", "claim": row["claim"], "value": "supported"})
    for name, rows in (("copycat", good), ("lazy", lazy)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
        result = runner.invoke(["import", "verdicts", str(path), "--dataset", DATASET, "--judge", name])
        assert result.exit_code == 0, result.output


def test_report_json_to_stdout(runner, demo_with_judges):
    result = runner.invoke(["report", "--dataset", DATASET, "--judge", "copycat", "--bootstrap", "200", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    section = data["tasks"]["claim_support"]
    assert data["dataset"] == DATASET and data["judge"] == "copycat"
    assert section["cohen_kappa"]["value"] > 0.75 and section["passed"] is True
    assert section["human"]["annotators"] == ["dra.garcia", "matrona.ruiz"]


@pytest.mark.parametrize("fmt", ["json", "html", "md", "csv"])
def test_report_formats_to_file(runner, demo_with_judges, tmp_path, fmt):
    out = tmp_path / f"report.{fmt}"
    result = runner.invoke(["report", "--dataset", DATASET, "--judge", "copycat", "--bootstrap", "200", "--format", fmt, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 200


def test_report_without_judge(runner, demo_with_judges):
    result = runner.invoke(["report", "--dataset", DATASET, "--bootstrap", "200"])
    data = json.loads(result.output)
    assert data["judge"] is None and data["passed"] is None
    assert data["tasks"]["answer_quality"]["human"]["n"] == 40 - len(TO_LABEL)  # the demo leaves TO_LABEL to the experts


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dataset", "nope"], f"unknown dataset 'nope' (datasets: {DATASET}, demo-prenatal-ab, demo-prenatal-agent, demo-prenatal-live)"),
        (["--dataset", DATASET, "--judge", "nope"], "unknown judge 'nope' (judges: copycat, "),
        (["--dataset", DATASET, "--judge", "copycat", "--group-by", "metadata.colour"], "metadata.topic"),
    ],
)
def test_report_bad_input_exit_2(runner, demo_with_judges, args, message):
    result = runner.invoke(["report", *args, "--bootstrap", "200"])
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_gate_passes_and_fails(runner, demo_with_judges):
    ok = runner.invoke(["gate", "--dataset", DATASET, "--judge", "copycat", "--bootstrap", "200"])
    assert ok.exit_code == 0, ok.output
    assert ok.output.startswith("PASS claim_support: cohen_kappa")
    bad = runner.invoke(["gate", "--dataset", DATASET, "--judge", "lazy", "--bootstrap", "200"])
    assert bad.exit_code == 1
    assert bad.output.startswith("FAIL claim_support")


def test_gate_requires_named_tasks(runner, demo_with_judges):
    result = runner.invoke(["gate", "--dataset", DATASET, "--judge", "copycat", "--task", "answer_quality", "--bootstrap", "200"])
    assert result.exit_code == 1
    assert "FAIL answer_quality: judge copycat has no verdicts" in result.output


def test_gate_ci_lower_is_stricter(runner, demo_with_judges):
    loose = runner.invoke(["gate", "--dataset", DATASET, "--judge", "copycat", "--min-kappa", "0.8", "--bootstrap", "200"])
    strict = runner.invoke(["gate", "--dataset", DATASET, "--judge", "copycat", "--min-kappa", "0.8", "--ci-lower", "--bootstrap", "200"])
    assert "CI lower bound" in strict.output
    assert loose.exit_code == 0 or strict.exit_code == 1
    assert strict.exit_code >= loose.exit_code


def test_gate_bad_input(runner, demo_with_judges):
    result = runner.invoke(["gate", "--dataset", DATASET, "--judge", "nope"])
    assert result.exit_code == 2


def test_the_report_commands_take_locale(runner, demo_with_judges, tmp_path):
    for fmt in ("html", "md"):
        out = tmp_path / f"r.{fmt}"
        result = runner.invoke(["report", "--dataset", DATASET, "--judge", "copycat", "--bootstrap", "200",
                                "--format", fmt, "--locale", "es", "-o", str(out)])
        assert result.exit_code == 0, result.output
        assert "Informe de calibración" in out.read_text()
    result = runner.invoke(["report", "--dataset", DATASET, "--judge", "copycat", "--locale", "fr"])
    assert result.exit_code == 2 and "fr" in result.output
    result = runner.invoke(["compare", "--dataset", DATASET, "--judge", "copycat", "--judge", "lazy",
                            "--bootstrap", "200", "--format", "md", "--locale", "es"])
    assert result.exit_code == 0, result.output
    english = runner.invoke(["compare", "--dataset", DATASET, "--judge", "copycat", "--judge", "lazy",
                             "--bootstrap", "200", "--format", "md"])
    assert result.output != english.output


def test_min_shared_lists_only_pairs_sharing_that_many_targets(runner, demo_with_judges):
    def human(*extra):
        result = runner.invoke(["report", "--dataset", DATASET, "--bootstrap", "200", "--task", "claim_support", *extra])
        assert result.exit_code == 0, result.output
        return json.loads(result.output)["tasks"]["claim_support"]["human"]

    listed = human()
    assert [(p["a"], p["b"]) for p in listed["pairwise_kappa"]] == [("dra.garcia", "matrona.ruiz")]
    assert listed["n_pairs_sparse"] == 0
    shared = listed["pairwise_kappa"][0]["n"]
    sparse = human("--min-shared", str(shared + 1))
    assert sparse["pairwise_kappa"] == [] and sparse["n_pairs_sparse"] == 1
    assert sparse["fleiss_kappa"] == listed["fleiss_kappa"]  # the many-rater figures keep every target
    # the one ceiling: the pair's κ while it shares enough targets, the pooled α once it does not
    assert listed["ceiling"]["metric"] == "mean_pairwise_kappa"
    assert listed["ceiling"]["value"] == listed["pairwise_kappa"][0]["value"]
    assert sparse["ceiling"]["metric"] == "krippendorff_alpha_nominal"
    assert sparse["ceiling"]["value"] == sparse["krippendorff_alpha"]["nominal"]["value"]
    result = runner.invoke(["report", "--dataset", DATASET, "--judge", "copycat", "--bootstrap", "200", "--format", "md",
                            "--task", "claim_support", "--min-shared", str(shared + 1)])
    assert result.exit_code == 0, result.output
    assert "Krippendorff's α (nominal)" in result.output.split("## ")[1]  # the headline names the pooled α
    gate = runner.invoke(["gate", "--dataset", DATASET, "--judge", "copycat", "--bootstrap", "200", "--min-shared", "5"])
    assert gate.exit_code == 0, gate.output
    assert runner.invoke(["report", "--dataset", DATASET, "--min-shared", "0"]).exit_code == 2


def test_the_gate_builds_only_what_its_decision_needs_and_decides_as_before(runner, demo_with_judges, demo_engine):
    from sqlmodel import Session, select

    from calibrate.calibration import Options, build_report
    from calibrate.cli.gate import gate_lines
    from calibrate.models import Judge

    with Session(demo_engine) as session:
        names = {j.name for j in session.exec(select(Judge)).all()}
        judges = ["copycat", "lazy", "demo-faithfulness@1"]  # passes, fails (labels), and a score task
        assert set(judges) <= names
        for judge in judges:
            full = build_report(session, DATASET, judge, options=Options(bootstrap=100))
            light = build_report(session, DATASET, judge, options=Options(bootstrap=100, decision_only=True))
            # nothing the decision does not use: no human blocks, per-label, per-annotator, alt-test, RAG or retrieval
            assert light.data["rag"] == {} and "retrieval" not in light.data and "warnings" not in light.data
            for name, section in light.data["tasks"].items():
                assert not {"human", "per_label", "per_annotator", "alt_test", "confusion", "position"} & set(section)
                assert {k: section.get(k) for k in ("n", "alignment", "decision", "passed")} == \
                    {k: full.data["tasks"][name].get(k) for k in ("n", "alignment", "decision", "passed")}
            assert (light.data["passed"], light.data["decision"]) == (full.data["passed"], full.data["decision"])
            ok, lines = gate_lines(full, min_kappa=0.75, min_rho=0.75, ci_lower=False)
            result = runner.invoke(["gate", "--dataset", DATASET, "--judge", judge, "--bootstrap", "100"])
            # the same lines and exit code as the full report gave
            assert (result.exit_code, result.output.splitlines()) == (0 if ok else 1, lines), judge
