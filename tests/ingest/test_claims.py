"""Tests for the deterministic claim segmenter and for locating explicit claims."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibrate.text.sentences import (
    ABBREVIATIONS,
    ClaimSpan,
    Segmenter,
    SentenceSegmenter,
    locate_claims,
    segment,
)

CLINICAL = (
    "La dosis recomendada es 0,4 mg de ácido fólico al día. "
    "Según la Dra. Pérez, se debe iniciar antes de la concepción."
)


def assert_spans_valid(answer: str, claims: list[ClaimSpan]) -> None:
    """Check every span slices back to its text, in order and without overlap."""
    previous_end = 0
    for claim in claims:
        assert 0 <= previous_end <= claim.start < claim.end <= len(answer)
        assert answer[claim.start : claim.end] == claim.text
        assert claim.text == claim.text.strip()
        previous_end = claim.end


ENGLISH = [
    ("The sky is blue. Grass is green.", ["The sky is blue.", "Grass is green."]),
    ("Dr. Smith prescribed it. The patient improved.", ["Dr. Smith prescribed it.", "The patient improved."]),
    ("Eat fruit, e.g. apples, daily. Drink water.", ["Eat fruit, e.g. apples, daily.", "Drink water."]),
    ("Use a barrier, i.e. a condom. It works.", ["Use a barrier, i.e. a condom.", "It works."]),
    ("Bring gloves, masks, etc. and gowns. Then wash.", ["Bring gloves, masks, etc. and gowns.", "Then wash."]),
    ("Bring gloves, masks, etc. Then wash.", ["Bring gloves, masks, etc.", "Then wash."]),
    ("Aspirin vs. Placebo was tested. No difference.", ["Aspirin vs. Placebo was tested.", "No difference."]),
    ("The dose is approx. 5 mg. Repeat daily.", ["The dose is approx. 5 mg.", "Repeat daily."]),
    ("As Fig. 3 shows, risk rises. See below.", ["As Fig. 3 shows, risk rises.", "See below."]),
    ("Smith et al. reported this. It was confirmed.", ["Smith et al. reported this.", "It was confirmed."]),
    ("Smith et al. (2020) reported this.", ["Smith et al. (2020) reported this."]),
    ("She moved to the U.S. in 2010. She works there.", ["She moved to the U.S. in 2010.", "She works there."]),
    ("The U.S. Army responded. It was fast.", ["The U.S. Army responded.", "It was fast."]),
    ("J. Smith wrote the guideline. It is widely used.", ["J. Smith wrote the guideline.", "It is widely used."]),
    ("Ask for No. 5 on the list. No. It is gone.", ["Ask for No. 5 on the list.", "No.", "It is gone."]),
    ("Mr. and Mrs. Lee met Prof. Jones. They agreed.", ["Mr. and Mrs. Lee met Prof. Jones.", "They agreed."]),
    ("Take vitamin A. The deficiency is common.", ["Take vitamin A.", "The deficiency is common."]),
    ("It happened at 5 p.m. The clinic was closed.", ["It happened at 5 p.m.", "The clinic was closed."]),
    ("Samples were taken at 10 a.m. and tested.", ["Samples were taken at 10 a.m. and tested."]),
    ("The level was 12.5 mg/dL. It dropped.", ["The level was 12.5 mg/dL.", "It dropped."]),
    ("It costs 1,000.50 dollars. Cheap.", ["It costs 1,000.50 dollars.", "Cheap."]),
    ("Give 0.5 mg/kg every 8 hours. Monitor levels.", ["Give 0.5 mg/kg every 8 hours.", "Monitor levels."]),
    ('He said "Stop." Then left.', ['He said "Stop."', "Then left."]),
    ('She asked, "Is it safe?" and waited.', ['She asked, "Is it safe?" and waited.']),
    ("“It works.” The trial confirmed it.", ["“It works.”", "The trial confirmed it."]),
    ("(See table 2.) Doses vary.", ["(See table 2.)", "Doses vary."]),
    ("Wait... What happened?", ["Wait...", "What happened?"]),
    ("It went on… and on.", ["It went on… and on."]),
    ("Is it safe? Yes! It is.", ["Is it safe?", "Yes!", "It is."]),
    ("Really?! Yes.", ["Really?!", "Yes."]),
    (
        "Visit www.example.com for details. Mail info@example.com today.",
        ["Visit www.example.com for details.", "Mail info@example.com today."],
    ),
    ("Upgrade to v1.2.3 now. It fixes bugs.", ["Upgrade to v1.2.3 now.", "It fixes bugs."]),
    ("See https://example.org/a.b?c=1 first. Then go.", ["See https://example.org/a.b?c=1 first.", "Then go."]),
    ("See www.example.com. Then go.", ["See www.example.com.", "Then go."]),
    ("No final punctuation here", ["No final punctuation here"]),
    ("First line\nSecond line", ["First line", "Second line"]),
    ("Para one.\r\n\r\nPara two.", ["Para one.", "Para two."]),
    (
        "Symptoms include:\n- fever\n- headache\n* nausea\n• fatigue",
        ["Symptoms include:", "fever", "headache", "nausea", "fatigue"],
    ),
    (
        "1. Rest. Drink fluids.\n2) Take paracetamol.\na) Call a doctor.",
        ["Rest.", "Drink fluids.", "Take paracetamol.", "Call a doctor."],
    ),
    ("## Dosing\n> - Start low.", ["Dosing", "Start low."]),
    ("1.000 patients enrolled.\n-5 °C is too cold.", ["1.000 patients enrolled.", "-5 °C is too cold."]),
    ("yes. the dose is 5 mg. ok.", ["yes.", "the dose is 5 mg.", "ok."]),
    ("Results:\n\n- Dose: 5 mg.", ["Results:", "Dose: 5 mg."]),
    (":\n- Item", ["Item"]),
    ("Hello.World is one token.", ["Hello.World is one token."]),
    # A lone lowercase letter before a period is a unit, not an initial.
    ("The maximum for adults is 4 g. Doses should be split.", ["The maximum for adults is 4 g.", "Doses should be split."]),
    ("", []),
    ("  \n\t ", []),
    ("...\n---\n* * *\n- ", []),
]

SPANISH = [
    ("No supere los 200 mg. Tome agua con 1 l. Evite el alcohol.", ["No supere los 200 mg.", "Tome agua con 1 l.", "Evite el alcohol."]),
    (CLINICAL, [
        "La dosis recomendada es 0,4 mg de ácido fólico al día.",
        "Según la Dra. Pérez, se debe iniciar antes de la concepción.",
    ]),
    (
        "El Sr. García y la Sra. López asistieron. La consulta fue breve.",
        ["El Sr. García y la Sra. López asistieron.", "La consulta fue breve."],
    ),
    (
        "Se recomiendan frutas, p. ej. naranjas, a diario. También verduras.",
        ["Se recomiendan frutas, p. ej. naranjas, a diario.", "También verduras."],
    ),
    (
        "Ver pág. 12 y núm. 4 del protocolo. Es obligatorio.",
        ["Ver pág. 12 y núm. 4 del protocolo.", "Es obligatorio."],
    ),
    (
        "La dosis es aprox. 3,5 mg al día. Se ajusta por peso.",
        ["La dosis es aprox. 3,5 mg al día.", "Se ajusta por peso."],
    ),
    (
        "Asistieron 1.000 gestantes. El 12,5 % presentó anemia.",
        ["Asistieron 1.000 gestantes.", "El 12,5 % presentó anemia."],
    ),
    ("¿Cuándo? Depende.", ["¿Cuándo?", "Depende."]),
    (
        "¿Es segura la vacuna en el embarazo? Sí. Se recomienda en el tercer trimestre.",
        ["¿Es segura la vacuna en el embarazo?", "Sí.", "Se recomienda en el tercer trimestre."],
    ),
    ("¡Cuidado! La dosis máxima es 4 g al día.", ["¡Cuidado!", "La dosis máxima es 4 g al día."]),
    ("Le pregunté ¿cuándo? y no respondió.", ["Le pregunté ¿cuándo? y no respondió."]),
    ("Depende. ¿Cuándo empezar? Antes.", ["Depende.", "¿Cuándo empezar?", "Antes."]),
    (
        "Los síntomas son:\n- náuseas\n- vómitos\n– cansancio",
        ["Los síntomas son:", "náuseas", "vómitos", "cansancio"],
    ),
    (
        "Pasos:\n1. Lavarse las manos. Secarlas bien.\n2) Aplicar la crema.\na) Esperar 5 min.",
        ["Pasos:", "Lavarse las manos.", "Secarlas bien.", "Aplicar la crema.", "Esperar 5 min."],
    ),
    ("Dijo «Basta.» Luego se fue.", ["Dijo «Basta.»", "Luego se fue."]),
    ("La OMS afirma: «Es eficaz». Además es barata.", ["La OMS afirma: «Es eficaz».", "Además es barata."]),
    ("Esperó... y luego llegó.", ["Esperó... y luego llegó."]),
    ("Esperó… Luego llegó.", ["Esperó…", "Luego llegó."]),
    ("En EE.UU. la pauta es distinta. En España no.", ["En EE.UU. la pauta es distinta.", "En España no."]),
    ("Vive en EE.UU. Trabaja allí.", ["Vive en EE.UU.", "Trabaja allí."]),
    (
        "Es portadora de estreptococo del grupo B. Se administró profilaxis intraparto.",
        ["Es portadora de estreptococo del grupo B.", "Se administró profilaxis intraparto."],
    ),
    (
        "Según J. Pérez, la incidencia es baja. Se revisa cada año.",
        ["Según J. Pérez, la incidencia es baja.", "Se revisa cada año."],
    ),
    (
        "La Dra. Ruiz et al. describieron el caso. Fue en 2019.",
        ["La Dra. Ruiz et al. describieron el caso.", "Fue en 2019."],
    ),
    ("Ref. núm. 5, etc. y otros. Fin.", ["Ref. núm. 5, etc. y otros.", "Fin."]),
    (
        "La presión fue de 140/90 mmHg. Se inició labetalol.",
        ["La presión fue de 140/90 mmHg.", "Se inició labetalol."],
    ),
    ("Semana 12. Ecografía normal.", ["Semana 12.", "Ecografía normal."]),
    (
        "Tome 1 comprimido c/8 h. No exceda la dosis.",
        ["Tome 1 comprimido c/8 h.", "No exceda la dosis."],
    ),
    ("sí. la dosis es 5 mg. gracias.", ["sí.", "la dosis es 5 mg.", "gracias."]),
    ("Visite www.sego.es. Allí está la guía.", ["Visite www.sego.es.", "Allí está la guía."]),
    (
        "Consulte la versión 2.1.3 del documento. Es la vigente.",
        ["Consulte la versión 2.1.3 del documento.", "Es la vigente."],
    ),
    (
        "La hemoglobina bajó a 10,5 g/dl. Se pautó hierro oral",
        ["La hemoglobina bajó a 10,5 g/dl.", "Se pautó hierro oral"],
    ),
    ("— Hola\n— Adiós", ["Hola", "Adiós"]),
    (
        "Factores de riesgo:\n\n• Edad materna > 35 años.\n• Diabetes gestacional (DMG).",
        ["Factores de riesgo:", "Edad materna > 35 años.", "Diabetes gestacional (DMG)."],
    ),
]


@pytest.mark.parametrize(("answer", "expected"), ENGLISH + SPANISH)
def test_segment_table(answer, expected):
    claims = segment(answer)
    assert [c.text for c in claims] == expected
    assert_spans_valid(answer, claims)


def test_table_is_large_enough():
    assert len(ENGLISH) >= 20 and len(SPANISH) >= 20


def test_spans_skip_markers_and_whitespace():
    answer = "Intro:\n  - fever\n  2) pain. Rest."
    assert segment(answer) == [
        ClaimSpan("Intro:", 0, 6),
        ClaimSpan("fever", 11, 16),
        ClaimSpan("pain.", 22, 27),
        ClaimSpan("Rest.", 28, 33),
    ]


def test_clinical_spans_are_exact():
    first, second = segment(CLINICAL)
    assert (first.start, first.end) == (0, CLINICAL.index(" Según"))
    assert second.start == CLINICAL.index("Según") and second.end == len(CLINICAL)


def test_segmenter_interface():
    segmenter = SentenceSegmenter()
    assert segmenter.name == "sentence-v1"
    assert isinstance(segmenter, Segmenter)
    assert segmenter.segment(CLINICAL) == segment(CLINICAL)


def test_claim_span_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ClaimSpan("x", 0, 1).start = 2  # type: ignore[misc]


def test_abbreviation_table_is_lowercase_without_final_period():
    assert {"dr", "dra", "sr", "sra", "e.g", "i.e", "vs", "approx", "aprox", "pág", "núm", "fig"} <= ABBREVIATIONS
    assert all(a == a.lower() and not a.endswith(".") for a in ABBREVIATIONS)


def test_extra_abbreviations():
    answer = "Se usa la amp. Intramuscular diluida."
    assert len(segment(answer)) == 2
    segmenter = SentenceSegmenter(extra_abbreviations=["Amp."])
    assert [c.text for c in segmenter.segment(answer)] == [answer]


LOCATE = [
    # (answer, claims, expected (start, end) per claim)
    ("A is true. B is false.", ["A is true.", "B is false."], [(0, 10), (11, 22)]),
    ("Yes. No. Yes.", ["Yes.", "Yes."], [(0, 4), (9, 13)]),
    ("B first. A later.", ["A later.", "B first."], [(9, 17), (0, 8)]),
    ("La dosis es\n  0,4 mg al día.", ["La dosis es 0,4 mg al día."], [(0, 28)]),
    ("Uno  dos\ttres. Cuatro.", ["  dos tres. ", "Cuatro."], [(5, 14), (15, 22)]),
    ("Nada que ver.", ["Otra cosa.", "  ", ""], [(-1, -1), (-1, -1), (-1, -1)]),
    ("x y. x  y.", ["x y.", "x y."], [(0, 4), (5, 10)]),
]


@pytest.mark.parametrize(("answer", "claims", "expected"), LOCATE)
def test_locate_claims(answer, claims, expected):
    located = locate_claims(answer, claims)
    assert [(c.start, c.end) for c in located] == expected
    assert [c.text for c in located] == claims
    for claim in located:
        if claim.start >= 0:
            assert answer[claim.start : claim.end].split() == claim.text.split()


def test_locate_claims_round_trips_segmentation():
    answer = CLINICAL + "\n- Repetir.\n- Repetir."
    claims = segment(answer)
    assert locate_claims(answer, [c.text for c in claims]) == claims


PARAGRAPH = (
    CLINICAL + " ¿Cuándo suspenderlo? Se mantiene hasta la semana 12, p. ej. en gestantes sanas.\n"
    "- Dr. Smith et al. reported 1,000.50 cases (approx. 12.5%). See www.example.com.\n"
    "1. Revise la pág. 3… Luego continúe.\n\n"
)


# No clock here: a megabyte is the size at which anything quadratic would not finish (10^12
# steps), so these tests prove linearity by completing with the exact result. The timings are
# bench/bench_segment.py's (bench/results/segment.md).


def test_one_megabyte_is_segmented_whole():
    repeats = 1_000_000 // len(PARAGRAPH) + 1
    answer = PARAGRAPH * repeats
    claims = segment(answer)
    assert len(claims) == len(segment(PARAGRAPH)) * repeats == 8 * repeats
    assert_spans_valid(answer, claims)


PATHOLOGICAL = {  # a megabyte that would make a backtracking pattern quadratic → the claims' spans
    "no-space": ("a" * 1_000_000, [(0, 1_000_000)]),
    "dotted": ("a." * 500_000, [(0, 1_000_000)]),
    "period-run": ("." * 1_000_000 + "x", [(0, 1_000_001)]),
    "closer-run": ('a."' + '"' * 1_000_000 + "x", [(0, 1_000_004)]),
    "numbers": ("1." * 500_000 + " x", [(1_000_001, 1_000_002)]),
    "newlines": ("\n" * 1_000_000, []),
    "bullets": ("- " * 500_000, []),
    "abbreviations": ("Dr. " * 250_000, [(0, 999_999)]),
}


@pytest.mark.parametrize("name", PATHOLOGICAL)
def test_pathological_megabyte_is_segmented(name):
    answer, spans = PATHOLOGICAL[name]
    claims = segment(answer)
    assert [(c.start, c.end) for c in claims] == spans
    assert_spans_valid(answer, claims)


_CHARS = list("aAzZ1 9.,;:!?…¿¡\"'«»“”‘’()[]-*•–—#>\n\r\t\u00a0\u2028\x0b\x1c\x1f")
_PIECES = _CHARS + ["Dr", "e.g", "etc", " 1. ", "\n- ", "\n2) ", "www.x.com", "U.S.", "...", "EE.UU.", "Se"]
_TEXT = st.one_of(
    st.lists(st.sampled_from(_PIECES), max_size=80).map("".join),
    st.text(max_size=200),
)
_SHORT = st.lists(st.sampled_from(_PIECES), max_size=8).map("".join)


@settings(deadline=None, database=None, max_examples=300)
@given(_TEXT)
def test_segment_spans_are_well_formed(answer):
    claims = segment(answer)
    assert_spans_valid(answer, claims)
    for claim in claims:
        assert claim.text.splitlines() == [claim.text]
        assert any(ch.isalnum() for ch in claim.text)
    assert segment(answer) == claims


@settings(deadline=None, database=None)
@given(_TEXT)
def test_locating_segmented_claims_gives_matching_spans(answer):
    claims = segment(answer)
    located = locate_claims(answer, [c.text for c in claims])
    previous_end = 0
    for claim in located:
        assert answer[claim.start : claim.end] == claim.text
        assert claim.start >= previous_end
        previous_end = claim.end


@settings(deadline=None, database=None)
@given(_TEXT, st.lists(_SHORT, max_size=6))
def test_locate_claims_is_in_range(answer, claims):
    located = locate_claims(answer, claims)
    assert [c.text for c in located] == claims
    for claim in located:
        if claim.start == -1:
            assert claim.end == -1
        else:
            assert 0 <= claim.start < claim.end <= len(answer)
            assert answer[claim.start : claim.end].split() == claim.text.split()
