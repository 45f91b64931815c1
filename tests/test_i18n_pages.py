"""The pages outside the workbench in the reader's language: login, account, datasets, prompts, tasks, errors."""

from __future__ import annotations

import json

from bs4 import BeautifulSoup
from sqlmodel import select

from calibrate.models import Task, User

SPANISH = {"Accept-Language": "es-ES,es;q=0.9,en;q=0.5"}


def page(response) -> BeautifulSoup:
    return BeautifulSoup(response.data, "html.parser")


def test_a_spanish_browser_gets_the_login_page_in_spanish(client):
    english = page(client.get("/login"))
    assert english.html["lang"] == "en" and english.h1.get_text() == "Log in"
    spanish = page(client.get("/login", headers=SPANISH))
    assert spanish.html["lang"] == "es"
    assert spanish.h1.get_text() == "Iniciar sesión"
    assert spanish.select_one("button[type=submit]").get_text() == "Iniciar sesión"
    assert "Contraseña" in spanish.get_text() and "Password" not in spanish.get_text()
    # The scripts' messages come translated in the page's JSON data block (#calibrate-strings).
    strings = json.loads(spanish.select_one("script#calibrate-strings").string)
    assert strings["saved"] == "✓ guardado"


def test_a_refused_login_says_so_in_spanish(client, make_user):
    make_user("ana", "annotator", "password-123")
    form = page(client.get("/login", headers=SPANISH))
    token = form.select_one("input[name=csrf_token]")["value"]
    refused = client.post("/login", data={"username": "ana", "password": "wrong-password", "csrf_token": token}, headers=SPANISH)
    assert refused.status_code == 401
    assert "Usuario desconocido o contraseña incorrecta." in page(refused).select_one(".flash-error").get_text()


def test_the_account_setting_beats_the_browser(client, login, session):
    token = login("eng", "engineer")
    assert page(client.get("/datasets")).h1.get_text() == "Datasets"
    saved = client.post("/account", data={"csrf_token": token, "locale": "es"}, follow_redirects=True)
    assert "Idioma guardado: Español." in page(saved).get_text()
    assert session.exec(select(User).where(User.username == "eng")).one().locale == "es"
    # An English browser, a Spanish setting: Spanish pages.
    datasets = page(client.get("/datasets", headers={"Accept-Language": "en"}))
    assert datasets.html["lang"] == "es" and datasets.h1.get_text() == "Conjuntos de datos"
    assert "Cola" in datasets.select_one(".topbar nav").get_text()
    assert "Aún no hay conjuntos de datos." in datasets.get_text()
    # "As my browser asks" again: the browser's language.
    client.post("/account", data={"csrf_token": token, "locale": ""})
    assert page(client.get("/datasets", headers={"Accept-Language": "en"})).h1.get_text() == "Datasets"
    assert page(client.get("/datasets", headers=SPANISH)).h1.get_text() == "Conjuntos de datos"


def test_an_unsupported_language_is_refused_in_the_readers_language(client, login):
    token = login("eng", "engineer")
    response = client.post("/account", data={"csrf_token": token, "locale": "fr"}, headers=SPANISH, follow_redirects=True)
    assert "el idioma debe ser uno de en, es" in page(response).get_text()


def test_error_pages_in_spanish(client, login):
    login("eng", "engineer")
    missing = client.get("/datasets/nope/samples/nothing", headers=SPANISH)
    assert missing.status_code == 404
    assert "Volver a los conjuntos de datos" in page(missing).get_text()
    not_found = client.get("/no-such-page", headers=SPANISH)
    assert not_found.status_code == 404 and "No encontrado" in page(not_found).h1.get_text()


def test_the_sample_page_numbers_claims_from_one_and_names_labels(client, login, make_sample):
    login("eng", "engineer")
    make_sample(external_id="s1", answer="Aspirin thins blood. It cures colds.")
    text = page(client.get("/datasets/d/samples/s1", headers=SPANISH))
    marks = text.select("#answer mark.claim")
    assert [m["title"] for m in marks] == ["afirmación 1", "afirmación 2"]
    assert text.select_one("#claims").get("start") is None  # an <ol> from 1, as people count
    assert "2 afirmaciones" in text.get_text()


def test_the_tasks_page_edits_display_names_per_language(client, login, session):
    token = login("eng", "engineer")
    tasks = page(client.get("/tasks", headers=SPANISH))
    assert tasks.h1.get_text() == "Tareas"
    row = tasks.select_one("tr[data-task=claim_support]")
    spanish_names = {field["name"]: field["value"] for field in row.select("fieldset[lang=es] input")}
    assert sorted(spanish_names.values()) == ["No es una afirmación", "No respaldada", "Respaldada"]
    task = session.exec(select(Task).where(Task.name == "claim_support")).one()
    index = task.labels.index("supported")
    done = client.post("/tasks/claim_support", data={"csrf_token": token, "description": task.description,
                                                     f"display.es.{index}": "Con respaldo", f"display.en.{index}": ""})
    assert done.status_code == 303
    session.rollback()  # a new read transaction: the app wrote on its own connection
    task = session.exec(select(Task).where(Task.name == "claim_support")).one()
    assert task.display["es"]["supported"] == "Con respaldo" and task.labels[index] == "supported"
    # A name that is too long is refused with the task edit's one line, nothing saved.
    refused = client.post("/tasks/claim_support", data={"csrf_token": token, "description": task.description,
                                                        f"display.es.{index}": "x" * 101}, follow_redirects=True)
    assert "at most 100 characters" in page(refused).get_text()
    session.rollback()  # a new read transaction: the app wrote on its own connection
    assert session.exec(select(Task).where(Task.name == "claim_support")).one().display["es"]["supported"] == "Con respaldo"
    # An empty name goes back to the default one.
    client.post("/tasks/claim_support", data={"csrf_token": token, "description": task.description, f"display.es.{index}": ""})
    session.rollback()  # a new read transaction: the app wrote on its own connection
    assert "supported" not in (session.exec(select(Task).where(Task.name == "claim_support")).one().display or {}).get("es", {})


def test_the_prompts_pages_in_spanish(client, login):
    token = login("eng", "engineer")
    index = page(client.get("/prompts", headers=SPANISH))
    assert index.h1.get_text() == "Prompts del juez"
    created = client.post("/prompts", data={"csrf_token": token, "name": "p1", "task": "claim_support"}, headers=SPANISH,
                          follow_redirects=True)
    assert created.status_code == 200
    shown = page(created)
    assert "Nueva versión a partir de esta" in shown.get_text() and "Hash del contenido" in shown.get_text()
    bad = client.get("/prompts/p1/diff", headers=SPANISH)
    assert bad.status_code == 400 and "Elija dos versiones para comparar (a y b)." in page(bad).get_text()


def test_the_alt_test_page_in_spanish(demo_engine, client, login):
    """Its title, heading, way back, scoring choice and explanation were English text in the template, on Spanish pages
    too; a pairwise judge's order-rule sentence as well."""
    from calibrate.demo import DATASET, PREFERENCE

    login("eng", "engineer")
    base = f"/datasets/{DATASET}/calibration/judges/demo-claims@2/alt-test?task=claim_support&split=dev"
    english = page(client.get(base))
    assert english.h1.get_text() == "Could demo-claims@2 replace an expert on claim_support?"
    assert english.title.get_text().startswith("Could demo-claims@2 replace an expert? · ")
    spanish = page(client.get(base, headers=SPANISH))
    assert spanish.h1.get_text() == "¿Podría demo-claims@2 sustituir a un experto en claim_support?"
    assert spanish.title.get_text().startswith("¿Podría demo-claims@2 sustituir a un experto? · ")
    assert spanish.select_one("main p a").get_text() == f"← Calibración de claim_support en {DATASET}"
    assert spanish.select_one("select[name=scoring] option[value='']").get_text() == "la de la tarea"
    assert spanish.select_one("input[name=epsilon]")["title"].startswith("0,2 para expertos")
    text = spanish.select_one("#alt-test-explained").get_text(" ", strip=True)
    assert text.startswith("Muestras: partición dev.") and "ε es la ventaja" in text
    pairwise = page(client.get(f"/datasets/{DATASET}-ab/calibration/judges/demo-preference@1/alt-test?task={PREFERENCE}"
                               "&split=dev&order_rule=consistent", headers=SPANISH))
    explained = pairwise.select_one("#alt-test-explained").get_text(" ", strip=True)
    assert "por la regla de orden consistent (por pares)" in explained and "order rule" not in explained


def test_a_run_as_a_table_heading_is_a_noun_in_spanish(demo_engine, client, login):
    """'Run' heads the runs' tables (a judge run: Ejecución) and labels the Run buttons (the verb: Ejecutar)."""
    login("eng", "engineer")
    runs = page(client.get("/runs", headers=SPANISH))
    assert runs.select("table thead th")[0].get_text() == "Ejecución"
    version = page(client.get("/prompts/demo-claims/1", headers=SPANISH))
    assert version.select_one("#run-form button[type=submit]").get_text() == "Ejecutar"
    assert "Ejecución" in [th.get_text() for th in version.select("thead th")]
    assert "Ejecutar" not in [th.get_text() for th in version.select("thead th")]
    assert page(client.get("/runs")).select("table thead th")[0].get_text() == "Run"


def test_the_test_look_confirmation_the_team_and_the_guideline_editor_in_spanish(demo_engine, client, login):
    """The page that asks before a look at the test split, the team page's account states and password boxes, and the
    guideline editor's version, button and count were English text in their templates."""
    from calibrate.demo import DATASET

    login("boss", "admin")
    url = f"/datasets/{DATASET}/calibration/judges/demo-claims@2/evaluate-test?task=claim_support&split=dev"
    english = page(client.get(url))
    assert english.h1.get_text() == "Look at the test split with demo-claims@2?"
    assert english.select_one("#look-count").get_text(" ", strip=True).startswith(f"The test split of {DATASET} (")
    spanish = page(client.get(url, headers=SPANISH))
    assert spanish.title.get_text().startswith("¿Consultar la partición de test? · demo-claims@2")
    assert spanish.h1.get_text() == "¿Consultar la partición de test con demo-claims@2?"
    assert spanish.select_one("main p a").get_text() == f"← Calibración de claim_support en {DATASET}"
    count = spanish.select_one("#look-count").get_text(" ", strip=True)
    assert count.startswith(f"La partición de test de {DATASET} (") and "con este juez" in count and "time" not in count
    assert spanish.select_one("#confirm-look-form button").get_text() == "Sí, consultar la partición de test (consulta 1)"

    team = page(client.get("/admin", headers=SPANISH))
    states = {row["data-user"]: row.select("td")[2].get_text() for row in team.select("tr[data-user]")
              if row.select_one("input[name=password]")}
    assert states["boss"] == "activa" and set(states.values()) <= {"activa", "desactivada", "sin contraseña aún"}
    assert team.select_one("tr[data-user=boss] input[name=password]")["aria-label"] == "nueva contraseña de boss"

    editor = page(client.get("/guidelines/claim_support", headers=SPANISH))
    assert editor.select_one("#edit-guideline button").get_text().startswith("Guardar como v")
    outdated = editor.select_one("#outdated-count").get_text(" ", strip=True)
    assert "claim_support" in outdated and "labels" not in outdated and "version" not in outdated


def test_the_calibration_pages_read_a_decimal_comma(demo_engine, client, login):
    """A Spanish reader types ε 0,15 and α 0,1 as the page writes numbers; they were refused as not numbers."""
    from calibrate.demo import DATASET

    login("eng", "engineer")
    base = f"/datasets/{DATASET}/calibration"
    alt = client.get(f"{base}/judges/demo-claims@2/alt-test?task=claim_support&split=dev&epsilon=0,15&alpha=0,1", headers=SPANISH)
    assert alt.status_code == 200
    board = client.get(f"{base}?task=claim_support&split=dev&epsilon=0,15&budget=0,1", headers=SPANISH)
    assert board.status_code == 200
    assert "±0,1" in page(board).select_one("#judges thead").get_text()
