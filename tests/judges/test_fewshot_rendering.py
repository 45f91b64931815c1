"""Few-shot examples as the judge reads them: a custom task without a description has no empty "Task:" line, an
example from an imported label (no rationale) carries no `"reason": ""`, and a claim task's example shows its claim
(in the rendered system text and in the prompt editor's preview)."""

from __future__ import annotations

from bs4 import BeautifulSoup
from sqlmodel import select

from calibrate.accounts import ensure_annotator
from calibrate.db import write_session
from calibrate.judges import FewShotSpec, save_version
from calibrate.judges.items import version_context
from calibrate.judges.render import Renderer
from calibrate.models import Claim, Label, PromptVersion, Task
from calibrate.tasks import add_task


def _custom_claim_prompt(engine, session, make_sample, rationale=""):
    sample = make_sample(external_id="s1", claims=["Tome 0,4 mg al día.", "Consulte a su médico."])
    claim = session.exec(select(Claim).where(Claim.sample_id == sample.id, Claim.index == 0)).one()
    with write_session(engine) as s:
        task = add_task(s, "checkable", target="claim", kind="categorical", labels=["yes", "no"])  # no description
        user = ensure_annotator(s, "imported-expert")
        s.add(Label(task_id=task.id, sample_id=sample.id, claim_id=claim.id, target_key=f"claim:{claim.id}",
                    annotator_id=user.id, value="yes", rationale=rationale, source="import"))
    with write_session(engine) as s:
        save_version(s, "check", task="checkable", few_shots=[FewShotSpec("s1:0")])
    session.rollback()
    version = session.exec(select(PromptVersion)).one()
    return version, session.exec(select(Task).where(Task.name == "checkable")).one()


def test_the_system_text_of_a_custom_claim_task(engine, session, make_sample):
    version, task = _custom_claim_prompt(engine, session, make_sample)
    system = Renderer(version.system, version.template, version_context(session, version, task)).system
    assert "Task:" not in system  # no description: no empty "Task: " line
    assert 'You are a judge for the task "checkable".\n\nReply with one JSON object' in system
    example = system[system.index("Example 1"):]
    assert "Claim: Tome 0,4 mg al día." in example  # the claim the label is on
    assert example.rstrip().endswith('Reply: {"verdict": "yes"}')  # an imported label without rationale: no "reason": ""
    assert '"reason": ""' not in system


def test_an_example_with_a_rationale_keeps_its_reason(engine, session, make_sample):
    version, task = _custom_claim_prompt(engine, session, make_sample, rationale="La fuente da 0,4 mg.")
    system = Renderer(version.system, version.template, version_context(session, version, task)).system
    assert system.rstrip().endswith('Reply: {"verdict": "yes", "reason": "La fuente da 0,4 mg."}')


def test_the_prompt_editor_previews_the_examples_with_their_claim(engine, session, make_sample, client, login):
    _custom_claim_prompt(engine, session, make_sample)
    login("eng", "engineer")
    page = BeautifulSoup(client.get("/prompts/check/1/edit").data, "html.parser")
    row = page.select_one("#few-shot-preview tbody tr")
    cells = [td.get_text(strip=True) for td in row.select("td")]
    assert cells[:3] == ["s1:0", "Tome 0,4 mg al día.", "yes"] and "verdict only" in cells[3]
    spanish = BeautifulSoup(client.get("/prompts/check/1/edit", headers={"Accept-Language": "es"}).data, "html.parser")
    assert "solo el veredicto" in spanish.select_one("#few-shot-preview tbody tr").get_text()
    shown = BeautifulSoup(client.get("/prompts/check/1").data, "html.parser")
    assert "Tome 0,4 mg al día." in shown.select_one("#few-shots").get_text()
