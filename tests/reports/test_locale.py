"""Reports in the reader's language: HTML and Markdown in Spanish, JSON and CSV the same in every locale."""

from __future__ import annotations

import json

import pytest
from bs4 import BeautifulSoup

from calibrate import i18n
from calibrate.reports import render


def es(value: float, digits: int = 3) -> str:
    """Return a number as the Spanish report writes it (Python's rounding, a decimal comma)."""
    return f"{value:.{digits}f}".replace(".", ",")


def test_the_html_report_in_spanish_speaks_spanish_with_decimal_commas(full_report):
    page = BeautifulSoup(render(full_report, "html", "es"), "html.parser")
    data = full_report.data
    assert page.html["lang"] == "es"
    assert page.title.get_text().startswith("Informe de calibración: d")
    assert page.select_one("#decision-title").get_text() == "Decisión"
    assert "Judge against human gold" not in page.get_text() and "Juez frente a la referencia humana" in page.get_text()
    rows = page.select("#decision table.decisions tbody tr")
    assert rows
    for row in rows:
        section = data["tasks"][row["data-task"]]
        assert row.select_one("td.value").get_text(strip=True) == es(section["alignment"]["value"])
        low, high = section["alignment"]["ci"]
        assert row.select_one("td.ci").get_text(strip=True) == f"[{es(low)}; {es(high)}]"
    # The decision's sentence too: the rule, where the CI lies, in Spanish.
    reasons = " ".join(r.get_text() for r in page.select("#decision .reason"))
    assert "κ de Cohen = 0," in reasons and " 0,75" in reasons and "0.75" not in reasons
    sentences = " ".join(r.get_text() for r in page.select("#decision .decision-text"))
    assert "regla: point, la estimación debe alcanzar 0,75" in sentences and "rule:" not in sentences
    assert "Una tarea supera la calibración cuando su estadístico de alineamiento" in page.select_one("#decision").get_text()
    # The English report is what it always was: no locale is English outside the web app.
    english = render(full_report, "html")
    assert english == render(full_report, "html", "en")
    assert '<html lang="en">' in english and "Calibration report: d" in english


def test_the_markdown_report_in_spanish(full_report):
    text = render(full_report, "md", "es")
    assert text.startswith("# Informe de calibración: d")
    assert "## Decisión: " in text and "## Métodos" in text and "Procedencia:" in text
    value = next(iter(full_report.data["tasks"].values()))["alignment"]["value"]
    assert es(value) in text
    assert render(full_report, "md").startswith("# Calibration report: d")


def test_the_methods_and_the_labels_needed_speak_spanish_and_english_stays_word_for_word(demo_engine, session):
    from calibrate.calibration import Options, build_report
    from calibrate.calibration.decision import labels_to_settle
    from calibrate.demo import DATASET

    report = build_report(session, DATASET, "demo-claims@2", options=Options(bootstrap=200))
    section = report.data["tasks"]["claim_support"]
    # Every claim of the demo is labelled, so the extrapolation's "more targets" do not exist (capped: budget.py);
    # the renderers' wording of an uncapped figure is checked on the figure the report would give a larger dataset.
    assert section["labels_needed"]["capped"] is True and section["labels_needed"]["more_targets"] is None
    capped = section["labels_needed"]
    assert capped["reason"]["code"] == "capped_to_dataset" and "not expected to be enough" in capped["note"]
    words = f"{capped['targets_left']} de ellos aún no contados en n = {section['n']}: no se espera que etiquetarlos todos baste"
    assert words in render(report, "md", "es").replace("\\", "")  # worded from the code, not the English note
    assert words in BeautifulSoup(render(report, "html", "es"), "html.parser").select_one(".labels-needed").get_text(" ")
    alignment = section["alignment"]
    section["labels_needed"] = labels_to_settle(section["n"], alignment["value"], alignment["ci"], report.data["threshold"])
    note = section["labels_needed"]["note"]  # the demo's κ straddles the threshold: the JSON words it in English
    assert section["labels_needed"]["more_targets"] >= 1 and "straddles" in note
    english = render(report, "md")
    assert f"Labels needed: {note}." in english.replace("\\", "")  # worded again from the figures, word for word
    spanish = render(report, "md", "es").replace("\\", "")
    more, n = section["labels_needed"]["more_targets"], section["n"]
    assert "Etiquetas necesarias: el IC [" in spanish and f"unos {more} elementos etiquetados más (n ≈ {n + more})" in spanish
    methods = spanish[spanish.index("## Métodos"):].replace("\xa0", " ")  # Spanish writes "95 %" with a no-break space
    assert methods.startswith("## Métodos\n\nReferencia por elemento: la etiqueta arbitrada")
    assert "Intervalos: bootstrap por conglomerados percentil al 95 % sobre las muestras (respuestas), 200 remuestreos" in methods
    assert "La fidelidad (faithfulness) de una respuesta" in methods and "Recuperación con K = 10" in methods
    for english_words in ("Gold per target", "Mean over", "Faithfulness (share", "Could the judge", "annotator(s)", "straddles"):
        assert english_words not in spanish, english_words
    assert "2 anotadores con etiquetas: el alt-test necesita al menos 3" in spanish
    html = BeautifulSoup(render(report, "html", "es"), "html.parser")
    assert html.select_one(".labels-needed").get_text(" ", strip=True).startswith("Etiquetas necesarias: el IC")
    headings = [h.get_text() for h in html.select("#methods h3")] or [h.get_text() for h in html.select("h3")]
    assert "Intervalos de confianza" in " ".join(headings)
    assert "El bootstrap remuestrea muestras enteras" in html.get_text()


def test_the_demo_report_page_leaves_no_english_name_or_heading_in_spanish(demo_engine, session):
    """The human ceiling's statistic, the judge-as-rater rows' α, the chart's ceiling mark, the rows left out and the RAG
    section were English text inside the Spanish report (the report page a Spanish engineer opens)."""
    from calibrate.calibration import Options, build_report
    from calibrate.demo import DATASET

    report = build_report(session, DATASET, "demo-claims@2", options=Options(bootstrap=200))
    english = BeautifulSoup(render(report, "html", "en"), "html.parser")
    spanish = BeautifulSoup(render(report, "html", "es"), "html.parser")
    text = spanish.get_text(" ")
    for words in ("mean pairwise Cohen's κ", "Krippendorff's α", "human–human agreement", "no gold, excluded label",
                  "RAG metrics from the same labels", "Measured once from the human gold", "For each annotator in turn"):
        assert words in english.get_text(" "), words  # the English report is unchanged
        assert words not in text, words
    assert spanish.select_one("tr.ceiling-row td").get_text() == "κ de Cohen medio por pares"
    assert spanish.select_one("tr[data-stat=krippendorff_alpha_experts] td").get_text() == "α de Krippendorff (nominal)"
    ceiling = spanish.select_one("tr.ceiling-row td.value").get_text(strip=True)
    assert spanish.select_one("svg path.ceiling title").get_text() == f"acuerdo humano–humano: {ceiling}" and "," in ceiling
    assert spanish.select_one("#rag h2").get_text() == "Métricas RAG a partir de las mismas etiquetas"
    assert "sin referencia, etiqueta excluida y few-shot" in spanish.select_one("tr[data-count=excluded] small").get_text()
    method = spanish.select_one(".alt-test-method").get_text()
    assert method.startswith("Para cada anotador") and method.endswith("(ω ≥ 0,5). Calderon, Reichart & Dror, ACL 2025.")


def test_the_report_figures_and_groups_are_explained_in_spanish(demo_engine, session):
    """The confusion matrix's and the scatter's captions, the grouped section's heading and sentences and the ties'
    count were English sentences in the Spanish report."""
    from calibrate.calibration import Options, build_report
    from calibrate.demo import DATASET

    report = build_report(session, DATASET, "demo-claims@2", options=Options(bootstrap=100, group_by="metadata.topic"))
    english = BeautifulSoup(render(report, "html", "en"), "html.parser")
    spanish = BeautifulSoup(render(report, "html", "es"), "html.parser")
    assert english.select_one("figure.confusion figcaption").get_text().startswith("Confusion matrix of the claims scored")
    assert spanish.select_one("figure.confusion figcaption").get_text().startswith("Matriz de confusión sobre afirmaciones:")
    scores = BeautifulSoup(render(build_report(session, DATASET, "demo-quality@1", options=Options(bootstrap=100)), "html", "es"),
                           "html.parser")
    assert scores.select_one("figure.scatter figcaption").get_text().startswith("Un punto por respuesta:")
    text = spanish.get_text(" ")
    for words in ("Within groups of", "groups used", "Each group on its own", "Each dot is one", "have tied labels"):
        assert words in english.get_text(" ") or words in ("Each dot is one", "have tied labels"), words
        assert words not in text, words
    assert "Dentro de los grupos de metadata.topic" in text and "grupos usados" in text
    assert spanish.select("table.per-group thead th")[2].get_text() in ("κ de Cohen", "ρ de Spearman")


def test_the_pairwise_position_table_in_spanish(demo_engine, session):
    """The position-bias rows of a pairwise judge's report (labels and notes) were English inside the Spanish report."""
    from calibrate.calibration import Options, build_report
    from calibrate.demo import DATASET

    report = build_report(session, f"{DATASET}-ab", "demo-preference@1", options=Options(bootstrap=100))
    english = BeautifulSoup(render(report, "html", "en"), "html.parser").select_one("table.position")
    spanish = BeautifulSoup(render(report, "html", "es"), "html.parser").select_one("table.position")
    labels = [th.get_text() for th in english.select("tbody th")]
    assert "Same verdict in both orders" in labels and "Annotators pick the response shown first" in labels
    assert "a position-proof judge: 100%" in english.get_text()  # English unchanged
    text = spanish.get_text(" ")
    for words in ("Same verdict", "Picks the response", "Orders judged", "a position-proof judge", "non-tie", "sign test",
                  "never agreeing", "with the gold", "swapped"):
        assert words not in text, words
    assert "Mismo veredicto en ambos órdenes" in text and "original, invertido" in text
    assert "un juez inmune a la posición: 100 %" in text.replace("\xa0", " ")


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_json_and_csv_do_not_depend_on_the_locale(full_report, fmt):
    english = render(full_report, fmt)
    assert render(full_report, fmt, "es") == english
    with i18n.using("es"):  # a Spanish reader's request, say: files still are the same bytes
        assert render(full_report, fmt) == english
    if fmt == "json":
        assert json.loads(english)["tasks"]


def test_a_report_in_the_current_locale_when_none_is_given(full_report):
    with i18n.using("es"):
        assert render(full_report, "html") == render(full_report, "html", "es")



def test_flipped_targets_are_named_for_people_in_html_and_markdown():
    from calibrate.reports.compare_report import person_target

    assert person_target("demo-001/claim/2") == "demo-001 · claim 3"
    assert person_target("a/b/context/0") == "a/b · context #1"  # an id with a slash keeps it
    assert person_target("demo-001") == "demo-001"
    assert person_target("demo-001/claim/x") == "demo-001/claim/x"
    with i18n.using("es"):
        assert person_target("demo-001/claim/2") == "demo-001 · afirmación 3"
