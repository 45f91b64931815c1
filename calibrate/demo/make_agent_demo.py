"""Write the agent demo's files (agent.jsonl, agent_labels.jsonl, agent_verdicts.jsonl) from the scenarios below.

Run from the repository's root: `python -m calibrate.demo.make_agent_demo`. Deterministic (no random
numbers): the files it writes are the ones committed. The text is synthetic, written for calibrate
(README.md in this folder, "Agent demo"); not medical advice. Not imported by calibrate itself.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
GUIDE = "guia-prenatal-agente"

# (question, lmp or None, drug or None, topic); the weeks follow from the lmp and the day the question is asked.
SCENARIOS = [
    ("¿De cuántas semanas estoy si mi última regla fue el 10 de agosto?", "2026-08-10", None, "edad gestacional"),
    ("Estoy de 10 semanas, ¿puedo tomar ibuprofeno para el dolor de cabeza?", "2026-08-24", "ibuprofeno", "medicación"),
    ("¿Cuánto ácido fólico debo tomar?", None, "ácido fólico", "suplementos"),
    ("Mi última regla fue el 1 de junio, ¿cuándo me toca la prueba de la glucosa?", "2026-06-01", None, "cribado"),
    ("¿Puedo tomar paracetamol con 30 semanas?", "2026-04-06", "paracetamol", "medicación"),
    ("¿Es seguro el hierro oral en el primer trimestre?", "2026-09-01", "hierro", "suplementos"),
    ("¿Qué vacunas me tocan si mi última regla fue el 15 de abril?", "2026-04-15", None, "vacunas"),
    ("¿Puedo tomar aspirina a dosis bajas? Me dijeron que tengo riesgo de preeclampsia.", "2026-08-01", "aspirina",
     "preeclampsia"),
    ("¿Cuándo es la ecografía de las 20 semanas si mi regla fue el 20 de julio?", "2026-07-20", None, "ecografías"),
    ("Tengo náuseas fuertes con 8 semanas, ¿puedo tomar doxilamina?", "2026-09-07", "doxilamina", "náuseas"),
    ("¿Puedo tomar amoxicilina para una infección de orina con 16 semanas?", "2026-07-13", "amoxicilina", "infecciones"),
    ("¿Cuánto peso debería haber ganado a las 24 semanas?", "2026-05-18", None, "peso"),
    ("¿Puedo tomar ibuprofeno con 32 semanas?", "2026-03-23", "ibuprofeno", "medicación"),
    ("¿Cuántos movimientos fetales son normales a las 28 semanas?", "2026-04-20", None, "movimientos fetales"),
    ("¿Es seguro el café? Estoy de 12 semanas.", "2026-08-10", "cafeína", "alimentación"),
    ("¿Necesito la inmunoglobulina anti-D? Soy Rh negativo y mi regla fue el 1 de mayo.", "2026-05-01", "anti-D",
     "anti-D"),
    ("¿Puedo tomar levotiroxina en el embarazo?", "2026-09-14", "levotiroxina", "tiroides"),
    ("¿Cuándo se hace el cultivo de estreptococo si mi regla fue el 3 de marzo?", "2026-03-03", None, "EGB"),
    ("¿Es seguro viajar en avión con 34 semanas?", "2026-03-09", None, "viajes"),
    ("¿Puedo tomar loratadina para la alergia en el embarazo?", "2026-07-01", "loratadina", "medicación"),
    ("¿Qué hago si tengo contracciones con 33 semanas?", "2026-03-16", None, "parto prematuro"),
    ("¿Cuánto yodo debo tomar?", None, "yodo", "suplementos"),
    ("¿Puedo seguir corriendo con 18 semanas?", "2026-06-29", None, "ejercicio"),
    ("¿Puedo tomar omeprazol para el ardor con 26 semanas?", "2026-05-04", "omeprazol", "digestivo"),
    ("¿Cuándo me toca la vacuna de la tosferina si mi regla fue el 10 de mayo?", "2026-05-10", None, "vacunas"),
    ("¿Puedo tomar metformina si tengo diabetes gestacional?", "2026-05-25", "metformina", "diabetes gestacional"),
    ("¿Es normal sangrar un poco con 7 semanas?", "2026-09-14", None, "sangrado"),
    ("¿Puedo tomar codeína para la tos con 36 semanas?", "2026-02-23", "codeína", "medicación"),
    ("¿De cuántas semanas estoy si mi última regla fue el 5 de octubre?", "2026-10-05", None, "edad gestacional"),
    ("¿Puedo comer queso fresco en el embarazo?", None, None, "listeria"),
]
# The dose check's answer (safe in pregnancy at the weeks asked, with its note) for each drug.
DOSES = {
    "ibuprofeno": (lambda w: w < 20, "AINE: evitar desde la semana 20; en el primer trimestre solo si es imprescindible"),
    "ácido fólico": (lambda w: True, "0,4 mg al día desde antes de la concepción hasta la semana 12"),
    "paracetamol": (lambda w: True, "analgésico de elección, la dosis eficaz más baja"),
    "hierro": (lambda w: True, "solo si hay anemia o ferritina baja"),
    "aspirina": (lambda w: 12 <= w <= 36, "100–150 mg por la noche de la semana 12 a la 36 si hay riesgo de preeclampsia"),
    "doxilamina": (lambda w: True, "doxilamina con piridoxina: primera línea para las náuseas"),
    "amoxicilina": (lambda w: True, "antibiótico seguro en el embarazo"),
    "cafeína": (lambda w: True, "hasta 200 mg al día"),
    "anti-D": (lambda w: 27 <= w <= 29, "inmunoglobulina anti-D a las 28 semanas si es Rh negativo"),
    "levotiroxina": (lambda w: True, "seguir tomándola; suele hacer falta subir la dosis"),
    "loratadina": (lambda w: True, "antihistamínico de segunda generación de elección"),
    "yodo": (lambda w: True, "150 µg al día"),
    "omeprazol": (lambda w: True, "seguro si las medidas posturales no bastan"),
    "metformina": (lambda w: True, "segunda línea tras la dieta; se puede usar con insulina"),
    "codeína": (lambda w: False, "evitar: depresión respiratoria del recién nacido al final del embarazo"),
}
# Which trajectories go wrong, where and how: trajectory index → (step name, error type). The experts' labels and the
# baseline judge's verdicts are derived from these (the judge misses about half, as TRAIL found for long traces).
ERRORS = {
    1: ("dose_check", "wrong_arguments"), 4: ("answer", "unsupported_claim"), 7: ("answer", "misread_result"),
    10: ("plan", "wrong_tool"), 12: ("answer", "unsafe_advice"), 15: ("gestational_age", "wrong_arguments"),
    18: ("answer", "unsupported_claim"), 21: ("plan", "missed_step"), 24: ("guideline_search", "wrong_arguments"),
    27: ("answer", "unsafe_advice"), 29: ("answer", "unsupported_claim"),
}
# Where the two experts disagree (trajectory index → step name): the second expert marks it the other way.
DISAGREE = {2: "answer", 5: "guideline_search", 10: "answer", 13: "plan", 16: "answer", 18: "answer", 22: "plan",
            25: "dose_check"}
JUDGE_MISSES = {4, 12, 18, 21, 24}  # errors the baseline judge calls correct
JUDGE_FALSE_ALARMS = {(3, "answer"), (8, "plan"), (20, "answer")}


def weeks(lmp: str, asked: datetime) -> tuple[int, int]:
    days = (asked.date() - datetime.fromisoformat(lmp).date()).days
    return days // 7, days % 7


def trajectory(n: int) -> dict:
    """Return sample `agent-NN`: its question, answer, contexts and steps (agent, plan, tools, guideline search, answer)."""
    question, lmp, drug, topic = SCENARIOS[n]
    at = START + timedelta(days=n // 3, hours=n % 3)
    clock = [at]

    def step(sid, parent, kind, name, input_=None, output=None, tool=None, ms=40.0, status="ok"):
        clock[0] += timedelta(milliseconds=5)
        return {"id": sid, "parent": parent, "kind": kind, "name": name, "input": input_, "output": output,
                "status": status, "started_at": clock[0].strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "duration_ms": ms,
                "tool": tool}

    error = ERRORS.get(n)
    steps = [step("a", None, "agent", "prenatal-agent", question, None, ms=2400.0)]
    tools = (["gestational_age"] if lmp else []) + (["dose_check"] if drug else [])
    planned = tools if not (error and error == ("plan", "missed_step")) else tools[:1]
    if error == ("plan", "wrong_tool"):
        planned = ["dose_check", *tools]
    steps.append(step("p", "a", "llm", "plan", question, json.dumps({"tools": planned, "search": topic}, ensure_ascii=False)))
    ga = weeks(lmp, at) if lmp else None
    if lmp and "gestational_age" in planned:
        asked_lmp = lmp if error != ("gestational_age", "wrong_arguments") else lmp.replace("-0", "-1", 1)
        result = {"weeks": ga[0], "days": ga[1]} if asked_lmp == lmp else {"weeks": max(ga[0] - 8, 1), "days": ga[1]}
        steps.append(step("g", "a", "tool", "gestational_age", tool={"name": "gestational_age",
                                                                      "arguments": {"lmp": asked_lmp, "today": at.date().isoformat()},
                                                                      "result": result}, ms=3.0))
    query = topic if error != ("guideline_search", "wrong_arguments") else "embarazo"
    passage = f"Guía (demo), {topic}: " + (DOSES[drug][1] if drug in DOSES else f"recomendaciones sobre {topic}.")
    steps.append(step("s", "a", "retriever", "guideline_search", query, json.dumps(
        [{"id": f"{GUIDE}-{n:02d}", "content": passage, "score": 0.82}], ensure_ascii=False), ms=120.0))
    safe = None
    if drug and "dose_check" in planned:
        drug_weeks = ga[0] if ga else 12
        asked_weeks = drug_weeks if error != ("dose_check", "wrong_arguments") else drug_weeks - 20
        rule, note = DOSES.get(drug, (lambda w: True, "sin datos"))
        safe = rule(max(asked_weeks, 0))
        steps.append(step("d", "a", "tool", "dose_check", tool={"name": "dose_check", "arguments": {"drug": drug, "weeks": asked_weeks},
                                                                "result": {"safe": safe, "note": note}}, ms=5.0))
    answer = _answer(n, drug, ga, safe, passage, error)
    steps.append(step("r", "a", "llm", "answer", question, answer, ms=1800.0))
    steps[0]["output"] = answer
    return {"id": f"agent-{n + 1:02d}", "question": question, "answer": answer,
            "contexts": [{"text": passage, "doc_id": f"{GUIDE}-{n:02d}"}],
            "metadata": {"topic": topic, "lang": "es", "system": "prenatal-agent-v1",
                         "started_at": at.strftime("%Y-%m-%dT%H:%M:%SZ")},
            "steps": steps}


def _answer(n: int, drug: str | None, ga: tuple[int, int] | None, safe: bool | None, passage: str,
            error: tuple[str, str] | None) -> str:
    parts = []
    if ga:
        parts.append(f"Está de {ga[0]} semanas y {ga[1]} días.")
    if drug:
        verdict = safe if not (error and error[1] in ("misread_result", "unsafe_advice")) else not safe
        parts.append(f"{drug.capitalize()}: {'se puede tomar' if verdict else 'mejor evitarlo'} ({passage.split(': ', 1)[1]}).")
    else:
        parts.append(passage.split(": ", 1)[1].capitalize())
    if error and error[1] == "unsupported_claim":
        parts.append("Un estudio de 2021 lo confirma sin ninguna duda.")
    parts.append("Consulte con su matrona si tiene dudas.")
    return " ".join(parts)


def labels_and_verdicts(samples: list[dict]) -> tuple[list[dict], list[dict]]:
    """Return the two experts' labels (step_correctness on every step, trajectory_success) and the baseline verdicts."""
    labels, verdicts = [], []
    for n, sample in enumerate(samples):
        error = ERRORS.get(n)
        for index, step in enumerate(sample["steps"]):
            truth = "not_applicable" if step["kind"] == "agent" else (
                "incorrect" if error and step["name"] == error[0] else "correct")
            for expert in ("dra.garcia", "matrona.ruiz"):
                value = truth
                if expert == "matrona.ruiz" and DISAGREE.get(n) == step["name"]:
                    value = "correct" if truth == "incorrect" else "incorrect"
                row = {"sample_id": sample["id"], "annotator": expert, "task": "step_correctness", "step": index,
                       "value": value}
                if value == "incorrect":
                    row["error_type"] = error[1] if error and step["name"] == error[0] else "other"
                labels.append(row)
            judged = truth
            if truth == "incorrect" and n in JUDGE_MISSES:
                judged = "correct"
            elif (n, step["name"]) in JUDGE_FALSE_ALARMS:
                judged = "incorrect"
            verdict = {"sample_id": sample["id"], "task": "step_correctness", "step": index, "value": judged}
            if judged == "incorrect":
                verdict["error_type"] = error[1] if error and step["name"] == error[0] else "other"
            verdicts.append(verdict)
        success = "failure" if error else "success"
        for expert in ("dra.garcia", "matrona.ruiz"):
            labels.append({"sample_id": sample["id"], "annotator": expert, "task": "trajectory_success", "value": success})
        verdicts.append({"sample_id": sample["id"], "task": "trajectory_success",
                         "value": "success" if n in JUDGE_MISSES or not error else "failure"})
    return labels, verdicts


def main() -> None:
    samples = [trajectory(n) for n in range(len(SCENARIOS))]
    labels, verdicts = labels_and_verdicts(samples)
    for name, rows in (("agent.jsonl", samples), ("agent_labels.jsonl", labels), ("agent_verdicts.jsonl", verdicts)):
        (HERE / name).write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")


if __name__ == "__main__":
    main()
