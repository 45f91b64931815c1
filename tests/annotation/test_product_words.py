"""Product words in the reader's language: built-in tasks' descriptions, guidelines and rubric levels (issue 21)."""

from __future__ import annotations

from bs4 import BeautifulSoup
from sqlmodel import select

from calibrate import i18n
from calibrate.annotation.guidelines import save_guideline
from calibrate.annotation.items import widget_for
from calibrate.models import Guideline, Task
from calibrate.tasks import BUILTIN_BY_NAME, guideline_text, task_description

SPANISH = {"Accept-Language": "es-ES,es;q=0.9"}


def _task(session, name):
    return session.exec(select(Task).where(Task.name == name)).one()


def test_the_rubric_levels_and_guidelines_are_the_readers_and_a_rewritten_guideline_stays_as_written(work, session):
    task = work.task("answer_quality")
    guideline = session.exec(select(Guideline).where(Guideline.task_id == task.id)).one()
    with i18n.using("es"):
        spanish = widget_for(task, guideline)
        text = guideline_text(task, guideline.text)
    english = widget_for(task, guideline)
    assert english.choices[0].hint == "wrong, unsafe or unrelated to the question."
    assert spanish.choices[0].hint == "incorrecta, insegura o sin relación con la pregunta."
    assert spanish.choices[2].hint.startswith("en general correcta, pero")
    assert "mostly right" not in text and len(text.splitlines()) == 5
    # An engineer's own guideline is the engineer's words, in every language.
    mine = save_guideline(session, task, "5: perfect\n1: useless", work.user("eng", "engineer"))
    with i18n.using("es"):
        assert guideline_text(task, mine.text) == "5: perfect\n1: useless"
        assert widget_for(task, mine).choices[0].hint == "useless"


def test_a_builtin_description_is_translated_until_someone_rewrites_it(session):
    from calibrate.tasks import edit_task, ensure_builtin_tasks

    ensure_builtin_tasks(session)
    task = _task(session, "claim_support")
    assert task.description == BUILTIN_BY_NAME["claim_support"].description
    assert task_description(task, "es") == "¿Está cada afirmación de la respuesta respaldada por los contextos recuperados?"
    edit_task(session, "claim_support", description="Checked against the sources")
    assert task_description(task, "es") == "Checked against the sources"


def test_the_spanish_tasks_page_shows_the_description_translated_and_saving_it_blank_changes_nothing(client, login, session):
    token = login("eng", "engineer")
    page = BeautifulSoup(client.get("/tasks", headers=SPANISH).data, "html.parser")
    field = page.select_one("tr[data-task=answer_quality] input[name=description]")
    assert field["value"] == "" and field["placeholder"] == "¿Qué tan buena es la respuesta en conjunto, según la escala de la rúbrica?"
    assert "How good is the answer" not in page.get_text() + str(page)
    client.post("/tasks/answer_quality", data={"csrf_token": token, "description": ""}, headers=SPANISH)
    session.expire_all()
    assert _task(session, "answer_quality").description == BUILTIN_BY_NAME["answer_quality"].description


def test_the_demos_guideline_ships_in_both_languages_and_a_partly_shipped_text_is_never_mixed():
    from calibrate.demo import PREFERENCE_GUIDELINES
    from calibrate.tasks import shipped_text

    spanish = shipped_text(PREFERENCE_GUIDELINES, "es")
    assert spanish.startswith("Elige la respuesta") and spanish.splitlines()[1].startswith("Empate:")
    assert shipped_text(PREFERENCE_GUIDELINES, "en") == PREFERENCE_GUIDELINES
    mixed = PREFERENCE_GUIDELINES + "\nAsk the team when unsure."
    assert shipped_text(mixed, "es") == mixed
