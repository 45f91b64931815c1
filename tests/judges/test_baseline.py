"""The offline baseline judge: its rules, its determinism, and its agreement on the demo."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from calibrate.judges.baseline import BaselineJudge, Settings, names_in, numbers_in, settings_from
from calibrate.judges.errors import RunSetupError
from calibrate.models import Task

CONTEXTS = ["Se recomienda tomar 0,4 mg diarios de ácido fólico desde un mes antes de la concepción hasta la semana 12.",
            "La OMS recomienda yodo durante el embarazo."]


@pytest.fixture
def tasks(session):
    return {t.name: t for t in session.exec(select(Task)).all()}


@pytest.mark.parametrize(
    ("claim", "label", "why"),
    [
        ("Tome 0.4 mg diarios de ácido fólico.", "supported", "appear"),
        ("Tome 4 mg diarios de ácido fólico.", "unsupported", "number 4"),
        ("Mantenga el ácido fólico hasta la semana 20.", "unsupported", "number 20"),
        ("Según un estudio de Harvard, tome ácido fólico.", "unsupported", "harvard"),
        ("La OMS recomienda yodo durante el embarazo.", "supported", "appear"),
        ("Evite el pescado crudo y los embutidos curados.", "unsupported", "words"),
        ("Espero que esto le sirva.", "not_applicable", "nothing"),
        ("¿Tiene más preguntas?", "not_applicable", "nothing"),
    ],
)
def test_claim_rules(tasks, claim, label, why):
    judge = BaselineJudge(tasks["claim_support"], Settings())
    verdict, reason = judge.claim(claim, CONTEXTS)
    assert verdict == label and why in reason.casefold()


def test_numbers_and_names():
    assert numbers_in("0,4 mg y 24–28 semanas") == {0.4, 24.0, 28.0}
    assert names_in("Según la OMS y un estudio de Harvard, tome hierro.") == {"oms", "harvard"}


def test_relevance_and_quality(tasks):
    corpus = ["¿Cuánto ácido fólico?"] + CONTEXTS + ["El hierro se absorbe mejor con vitamina C."]
    judge = BaselineJudge(tasks["context_relevance"], Settings(), corpus=corpus)
    assert judge.relevance("¿Cuánto ácido fólico debo tomar?", CONTEXTS[0])[0] == "relevant"
    assert judge.relevance("¿Cuánto ácido fólico debo tomar?", "El hierro se absorbe mejor con vitamina C.")[0] == "not_relevant"
    quality = BaselineJudge(tasks["answer_quality"], Settings())
    item = {"contexts": [{"text": t} for t in CONTEXTS],
            "claims": [{"text": "Tome 0,4 mg diarios de ácido fólico."}, {"text": "Tome 4 mg diarios de ácido fólico."},
                       {"text": "Espero que le sirva."}]}
    score = json.loads(quality.answer(item))
    assert score["verdict"] == 3 and "1 of 2" in score["reason"]


def test_settings_come_from_baseline_params(tasks):
    assert settings_from({"baseline.min_overlap": 0.3, "temperature": 0}) == Settings(min_overlap=0.3)
    with pytest.raises(RunSetupError, match="baseline.typo"):
        settings_from({"baseline.typo": 1})
    custom = Task(name="preference", target="sample", kind="categorical", labels=["A", "B"])
    with pytest.raises(RunSetupError, match="needs an LLM backend"):
        BaselineJudge(custom, Settings())


def test_on_the_demo_it_agrees_with_the_experts_and_is_deterministic(load_demo_copy, engine, session):
    """The figure docs/judges.md reports: Cohen's kappa on the demo's claim labels."""
    from calibrate.calibration import Options, build_report
    from calibrate.models import Verdict

    load_demo_copy(engine)
    report = build_report(session, "demo-prenatal", "demo-claims@2", options=Options(bootstrap=200))
    section = report.data["tasks"]["claim_support"]
    assert section["n"] >= 120 and section["n_fewshot"] == 2 and section["n_unparsed"] == 0
    assert 0.7 <= section["cohen_kappa"]["value"] <= 0.9
    first = report.data["tasks"]["claim_support"]["cohen_kappa"]["value"]
    v1 = build_report(session, "demo-prenatal", "demo-claims@1", options=Options(bootstrap=200))
    assert v1.data["tasks"]["claim_support"]["cohen_kappa"]["value"] < first  # @2 improves on @1
    values = sorted(session.exec(select(Verdict.target_key, Verdict.value)).all())
    from calibrate.judges import RunSpec, run_judge

    run_judge(engine, RunSpec(dataset="demo-prenatal", prompt="demo-claims@2", rerun=True))
    session.rollback()
    assert sorted(session.exec(select(Verdict.target_key, Verdict.value)).all()) == values
