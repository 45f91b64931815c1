"""`calibrate task edit|remove` and the Tasks page: the same checks, the same one-line refusals."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from sqlmodel import select

from calibrate.models import Guideline, Task
from calibrate.tasks import level_text, task_description


def _task(session, name):
    session.rollback()  # a new transaction: see what the command committed
    session.expire_all()
    return session.exec(select(Task).where(Task.name == name)).first()


@pytest.fixture
def custom(runner):
    assert runner.invoke(["task", "add", "pref", "--target", "sample", "--kind", "categorical", "--labels", "A,B"]).exit_code == 0
    assert runner.invoke(["task", "add", "score", "--target", "sample", "--kind", "ordinal", "--scale", "1-5"]).exit_code == 0


def test_edit_adds_labels_and_changes_the_description(runner, session, custom):
    result = runner.invoke(["task", "edit", "pref", "--add-labels", "tie", "--description", "Which answer is better?"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "task pref: labels now A, B, tie; description changed"
    task = _task(session, "pref")
    assert task.labels == ["A", "B", "tie"] and task.description == "Which answer is better?"
    assert "pref\tsample\tcategorical\tA,B,tie" in runner.invoke(["task", "list"]).output


def test_a_scale_may_change_while_every_stored_value_fits(runner, session, custom, make_sample):
    make_sample(external_id="s1")
    make_sample(external_id="s2")
    from calibrate.accounts import ensure_annotator
    from calibrate.models import Label, Sample

    task = _task(session, "score")
    user = ensure_annotator(session, "ana")
    for sample, value in zip(session.exec(select(Sample).order_by(Sample.id)).all(), ("2", "4"), strict=True):
        session.add(Label(task_id=task.id, sample_id=sample.id, target_key=f"sample:{sample.id}", annotator_id=user.id,
                          value=value, source="import"))
    session.commit()
    assert runner.invoke(["task", "edit", "score", "--scale", "0-10"]).output.strip() == "task score: scale now 0-10"
    narrowed = runner.invoke(["task", "edit", "score", "--scale", "2-4"])
    assert narrowed.exit_code == 0, narrowed.output
    refused = runner.invoke(["task", "edit", "score", "--scale", "3-5"])
    assert refused.exit_code == 2
    assert refused.output.strip() == "error: scale 3-5 would leave out stored values of score (they range from 2 to 4)"
    assert (_task(session, "score").scale_min, _task(session, "score").scale_max) == (2, 4)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["task", "edit", "claim_support", "--add-labels", "maybe"],
         "task claim_support is built in: its labels and scale are fixed (reports and metrics rely on them)"),
        (["task", "edit", "answer_quality", "--scale", "1-10"],
         "task answer_quality is built in: its labels and scale are fixed (reports and metrics rely on them)"),
        (["task", "edit", "pref", "--add-labels", "B"], "task pref already has the label 'B' (labels: A, B)"),
        (["task", "edit", "pref", "--scale", "1-5"], "--scale is for ordinal and continuous tasks; pref is categorical (use --add-labels)"),
        (["task", "edit", "score", "--add-labels", "x"], "--add-labels is for categorical and pairwise tasks; score is ordinal (use --scale)"),
        (["task", "edit", "nope", "--description", "x"], "unknown task 'nope' (tasks: "),
        (["task", "remove", "claim_support"], "task claim_support is built in: it cannot be removed"),
        (["task", "remove", "nope"], "unknown task 'nope' (tasks: "),
        # Bounds (issue 20, finding 8): a 1M-character description made every item page 1.2 MB.
        (["task", "edit", "pref", "--description", "x" * 2001], "the description has 2,001 characters: at most 2,000"),
        (["task", "add", "big", "--target", "sample", "--kind", "categorical", "--labels", "A,B",
          "--description", "y" * 1_000_000], "the description has 1,000,000 characters: at most 2,000"),
        (["task", "edit", "pref", "--description", "es:" + "x" * 2001], "the description has 2,001 characters: at most 2,000"),
        (["task", "edit", "pref", "--description", "es:uno", "--description", "ES:dos"],
         "--description gives the es text twice: 'ES:dos'"),
        (["task", "edit", "pref", "--description", "one", "--description", "en:two"],
         "--description gives the en text twice: 'en:two'"),
        (["task", "edit", "pref", "--add-labels", "z" * 101], "--add-labels: label 'zzzzz"),
        (["task", "add", "big", "--target", "sample", "--kind", "categorical", "--labels", "A," + "b" * 101],
         "--labels: label 'bbbb"),
        (["task", "add", "big", "--target", "sample", "--kind", "categorical", "--labels", ",".join(map(str, range(51)))],
         "--labels: a task has at most 50 labels, this would make 51"),
    ],
)
def test_refusals_are_one_line_with_exit_code_2(runner, custom, args, message):
    result = runner.invoke(args)
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {message}") and result.output.count("\n") == 1


def test_a_custom_tasks_description_per_language_on_the_command_line(runner, session):
    added = runner.invoke(["task", "add", "pref", "--target", "sample", "--kind", "categorical", "--labels", "A,B",
                           "--description", "es:¿Cuál es mejor?", "--description", "Which is better?"])
    assert added.exit_code == 0, added.output
    task = _task(session, "pref")
    assert task.description == "Which is better?" and task.descriptions == {"es": "¿Cuál es mejor?"}
    assert (task_description(task, "es"), task_description(task, "en")) == ("¿Cuál es mejor?", "Which is better?")

    edited = runner.invoke(["task", "edit", "pref", "--description", "es:¿Qué respuesta es mejor?"])
    assert edited.output.strip() == "task pref: es description changed"
    task = _task(session, "pref")
    assert task.description == "Which is better?" and task.descriptions == {"es": "¿Qué respuesta es mejor?"}
    # A plain text that does not start with a locale is the default text, colons and all.
    assert runner.invoke(["task", "edit", "pref", "--description", "Note: A or B"]).exit_code == 0
    assert _task(session, "pref").description == "Note: A or B"
    removed = runner.invoke(["task", "edit", "pref", "--description", "es:"])
    assert removed.output.strip() == "task pref: es description removed"
    task = _task(session, "pref")
    assert task.descriptions is None and task_description(task, "es") == "Note: A or B"


def test_the_tasks_page_sets_the_description_per_language_and_the_workbench_shows_the_readers(
        client, login, session, custom, make_sample):
    from calibrate.accounts import get_user
    from calibrate.models import Assignment

    token = login("eng", role="engineer")
    field = _form(client.get("/tasks"), "tr[data-task=pref] input[name='description.es']")
    assert field is not None and field["value"] == ""
    assert _form(client.get("/tasks"), "tr[data-task=claim_support] input[name='description.es']") is None
    done = client.post("/tasks/pref", data={"csrf_token": token, "description": "Which is better?",
                                            "description.es": "¿Cuál es mejor?"})
    assert done.status_code == 303
    task = _task(session, "pref")
    assert task.description == "Which is better?" and task.descriptions == {"es": "¿Cuál es mejor?"}
    assert _form(client.get("/tasks"), "tr[data-task=pref] input[name='description.es']")["value"] == "¿Cuál es mejor?"

    assignment = Assignment(sample_id=make_sample().id, user_id=get_user(session, "eng").id, status="pending")
    session.add(assignment)
    session.commit()
    shown = {}
    for locale in ("en", "es"):
        page = client.get(f"/annotate/{assignment.id}", headers={"Accept-Language": locale})
        shown[locale] = _form(page, ".cell[data-task=pref] p.task-name").get_text()
    assert shown == {"en": "pref · Which is better?", "es": "pref · ¿Cuál es mejor?"}


def test_edit_without_a_change_is_a_usage_error(runner, custom):
    result = runner.invoke(["task", "edit", "pref"])
    assert result.exit_code == 2
    assert "give --description, --add-labels, --scale, --display, --level, --dataset, --all-datasets or --error-types" in \
        result.output


def test_remove_only_what_nothing_uses(runner, session, custom, make_sample):
    sample = make_sample(external_id="s1")
    from calibrate.accounts import ensure_annotator
    from calibrate.models import Label

    task = _task(session, "pref")
    session.add(Guideline(task_id=task.id, version=1, text="Prefer the grounded answer."))
    session.add(Label(task_id=task.id, sample_id=sample.id, target_key=f"sample:{sample.id}",
                      annotator_id=ensure_annotator(session, "ana").id, value="A", source="import"))
    session.commit()
    refused = runner.invoke(["task", "remove", "pref"])
    assert refused.exit_code == 2
    assert refused.output.strip() == "error: task pref has 1 labels: only a task nothing uses can be removed"
    assert _task(session, "pref") is not None
    removed = runner.invoke(["task", "remove", "score"])
    assert removed.exit_code == 0 and removed.output.strip() == "removed task score"
    assert _task(session, "score") is None


def _form(page, selector):
    soup = BeautifulSoup(page.data, "html.parser")
    return soup.select_one(selector)


def test_tasks_page_edits_and_removes_with_the_same_checks(client, login, session, custom):
    token = login("eng", role="engineer")
    page = client.get("/tasks")
    assert page.status_code == 200
    rows = BeautifulSoup(page.data, "html.parser").select("#tasks tbody tr")
    builtin = next(r for r in rows if r["data-task"] == "claim_support")
    assert builtin.select_one("form.remove-task") is None and builtin.select_one("input[name=add_labels]") is None
    assert _form(page, "tr[data-task=pref] input[name=add_labels]") is not None

    done = client.post("/tasks/pref", data={"csrf_token": token, "description": "", "add_labels": "tie"})
    assert done.status_code == 303 and done.headers["Location"].endswith("/tasks")
    assert _task(session, "pref").labels == ["A", "B", "tie"]
    shown = client.get("/tasks")
    assert BeautifulSoup(shown.data, "html.parser").select_one(".flash-info").get_text() == "task pref: labels now A, B, tie."

    refused = client.post("/tasks/pref", data={"csrf_token": token, "description": "", "add_labels": "A"})
    assert refused.status_code == 303
    message = BeautifulSoup(client.get("/tasks").data, "html.parser").select_one(".flash-error").get_text()
    assert message == "task pref already has the label 'A' (labels: A, B, tie)"

    refused = client.post("/tasks/pref", data={"csrf_token": token, "description": "d" * 1_000_000, "add_labels": ""})
    assert refused.status_code == 303 and _task(session, "pref").description == ""
    message = BeautifulSoup(client.get("/tasks").data, "html.parser").select_one(".flash-error").get_text()
    assert message == "the description has 1,000,000 characters: at most 2,000"

    refused = client.post("/tasks/claim_support/remove", data={"csrf_token": token})
    assert refused.status_code == 303 and _task(session, "claim_support") is not None
    message = BeautifulSoup(client.get("/tasks").data, "html.parser").select_one(".flash-error").get_text()
    assert message == "task claim_support is built in: it cannot be removed"

    assert client.post("/tasks/score/remove", data={"csrf_token": token}).status_code == 303
    assert _task(session, "score") is None


def test_the_tasks_pages_refusals_are_in_the_readers_language(client, login, session, custom):
    """The Tasks page's refusals carry a reason: worded in Spanish on the web, the same English line on the CLI."""
    token = login("eng", role="engineer")
    spanish = {"Accept-Language": "es"}
    cases = [
        ("/tasks/pref", {"description": "", "add_labels": "A"}, "la tarea pref ya tiene la etiqueta 'A' (etiquetas: A, B)"),
        ("/tasks/score", {"description": "", "scale": "5-1"}, "la escala debe ir de menor a mayor; se recibió '5-1'"),
        ("/tasks/pref", {"description": "d" * 3000}, "la descripción tiene 3.000 caracteres: como máximo 2.000"),
        ("/tasks/claim_support/remove", {}, "la tarea claim_support es integrada: no se puede eliminar"),
    ]
    for url, data, message in cases:
        assert client.post(url, data={"csrf_token": token, **data}, headers=spanish).status_code == 303
        page = BeautifulSoup(client.get("/tasks", headers=spanish).data, "html.parser")
        assert page.select_one(".flash-error").get_text() == message
    assert _task(session, "pref").labels == ["A", "B"] and _task(session, "claim_support") is not None


def test_annotators_get_403(client, login):
    login("ann", role="annotator")
    assert client.get("/tasks").status_code == 403


def test_a_custom_tasks_level_texts_per_language_on_the_command_line(runner, session):
    added = runner.invoke(["task", "add", "grade", "--target", "sample", "--kind", "ordinal", "--scale", "1-3",
                           "--level", "3=correct and complete", "--level", "es:3=correcta y completa",
                           "--level", "1=wrong: unrelated to the question"])
    assert added.exit_code == 0, added.output
    task = _task(session, "grade")
    assert task.descriptions == {"levels": {"en": {"3": "correct and complete", "1": "wrong: unrelated to the question"},
                                            "es": {"3": "correcta y completa"}}}
    assert (level_text(task, 3, "es"), level_text(task, "3", "en")) == ("correcta y completa", "correct and complete")
    assert level_text(task, 1, "es") == "wrong: unrelated to the question"  # no Spanish text: the default language's
    assert level_text(task, 2, "es") == "" and task_description(task, "es") == ""

    edited = runner.invoke(["task", "edit", "grade", "--level", "es:1=incorrecta", "--level", "es:3=", "--level", "2.0=partly"])
    assert edited.exit_code == 0, edited.output
    assert edited.output.strip() == "task grade: es: level 1 text changed; es: level 3 text removed; en: level 2 text changed"
    task = _task(session, "grade")
    assert task.descriptions["levels"] == {"en": {"3": "correct and complete", "1": "wrong: unrelated to the question",
                                                  "2": "partly"}, "es": {"1": "incorrecta"}}
    # The description per language shares the column and is unaffected.
    assert runner.invoke(["task", "edit", "grade", "--description", "es:¿Qué tal?"]).exit_code == 0
    task = _task(session, "grade")
    assert task.descriptions["es"] == "¿Qué tal?" and task.descriptions["levels"]["es"] == {"1": "incorrecta"}
    assert runner.invoke(["task", "edit", "grade", "--description", "es:"]).exit_code == 0
    assert runner.invoke(["task", "edit", "grade", "--level", "es:1=", "--level", "1=", "--level", "2=", "--level", "3="]).exit_code == 0
    assert _task(session, "grade").descriptions is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["task", "edit", "answer_quality", "--level", "es:5=perfecta"],
         "task answer_quality is built in: its levels are described by its guideline, in every language"),
        (["task", "edit", "pref", "--level", "C=maybe"], "--level: task pref has no label 'C' (labels: A, B)"),
        (["task", "edit", "score", "--level", "6=beyond"], "--level: '6' is not a whole score of task score (1–5)"),
        (["task", "edit", "score", "--level", "2.5=half"], "--level: '2.5' is not a whole score of task score (1–5)"),
        (["task", "edit", "score", "--level", "good"],
         "--level 'good' must look like [LOCALE:]LEVEL=TEXT, e.g. 5=correct and complete or es:5=correcta y completa"),
        (["task", "edit", "score", "--level", "es:2=a", "--level", "es:2=b"], "--level gives the es text of level 2 twice"),
        (["task", "edit", "score", "--level", "2=" + "x" * 301],
         "--level: the text of level 2 must be one line of at most 300 characters"),
        (["task", "edit", "score", "--level", "2=two\nlines"], "--level: the text of level 2 must be one line of at most 300 characters"),
    ],
)
def test_level_texts_are_refused_with_one_line(runner, session, custom, args, message):
    result = runner.invoke(args)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"error: {message}"


def test_a_continuous_task_has_no_levels(runner):
    assert runner.invoke(["task", "add", "amount", "--target", "sample", "--kind", "continuous"]).exit_code == 0
    result = runner.invoke(["task", "edit", "amount", "--level", "1=one"])
    assert result.output.strip() == "error: --level is for categorical and ordinal tasks; amount is continuous"


def test_the_workbench_shows_the_readers_level_texts_beside_the_buttons(runner, client, login, session, custom, make_sample):
    from calibrate.accounts import get_user
    from calibrate.models import Assignment

    assert runner.invoke(["task", "edit", "score", "--level", "5=excellent", "--level", "es:5=excelente",
                          "--level", "1=poor"]).exit_code == 0
    assert runner.invoke(["task", "edit", "pref", "--level", "A=the first answer", "--level", "es:A=la primera respuesta"]).exit_code == 0
    login("ana", role="annotator")
    assignment = Assignment(sample_id=make_sample().id, user_id=get_user(session, "ana").id, status="pending")
    session.add(assignment)
    session.commit()
    shown = {}
    for locale in ("en", "es"):
        page = client.get(f"/annotate/{assignment.id}", headers={"Accept-Language": locale})
        assert page.status_code == 200
        soup = BeautifulSoup(page.data, "html.parser")
        shown[locale] = {(cell["data-task"], button["value"]): hint.get_text()
                         for cell in soup.select(".cell[data-task=score], .cell[data-task=pref]")
                         for button in cell.select("button.choice") for hint in button.select(".hint")}
        # A task with level texts and no description shows no empty "·" after its name.
        assert soup.select_one(".cell[data-task=score] p.task-name").get_text() == "score"
    assert shown["en"] == {("score", "5"): "excellent", ("score", "1"): "poor", ("pref", "A"): "the first answer"}
    assert shown["es"] == {("score", "5"): "excelente", ("score", "1"): "poor", ("pref", "A"): "la primera respuesta"}
