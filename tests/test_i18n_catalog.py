"""The message catalogs: every marked string has Spanish, the shipped .mo is the .po, and the formats per locale.

Extraction uses Babel's API with the project's own map (babel.cfg) — the same as
`pybabel extract -F babel.cfg` (docs/i18n.md) — so a string marked with `_()`, `N_()`,
`gettext` or `ngettext` in calibrate/ or templates/ and missing from the Spanish catalog fails here.
"""

from __future__ import annotations

import re
from configparser import ConfigParser
from datetime import datetime

import pytest
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po

from calibrate import PROJECT_ROOT, i18n

TRANSLATIONS = PROJECT_ROOT / "calibrate" / "translations"
PLACEHOLDER = re.compile(r"%\([a-z_]+\)s|\{[a-z_]+\}")


def method_map() -> list[tuple[str, str]]:
    """Return babel.cfg's [method: pattern] sections as Babel's method map."""
    config = ConfigParser()
    config.read(PROJECT_ROOT / "babel.cfg")
    pairs = []
    for section in config.sections():
        method, _, pattern = section.partition(":")
        pairs.append((pattern.strip(), method.strip()))
    return pairs


@pytest.fixture(scope="module")
def extraction() -> list[tuple]:
    """Return (file, line, msgid, context) of every string marked in the code and the templates."""
    return [(filename, lineno, message, context) for filename, lineno, message, _comments, context in extract_from_dir(
            str(PROJECT_ROOT), method_map(), keywords={**DEFAULT_KEYWORDS, "N_": None})]


@pytest.fixture(scope="module")
def extracted(extraction) -> dict:
    """Return {msgid: [where it is marked]} of every string marked in the code and the templates."""
    found: dict = {}
    for filename, lineno, message, _context in extraction:
        found.setdefault(message, []).append(f"{filename}:{lineno}")
    return found


def key(message_id) -> str:
    """Return the key a catalog files a message under (a plural message: its singular)."""
    return message_id[0] if isinstance(message_id, (tuple, list)) else message_id


def strings(value) -> tuple:
    """Return a translation's forms as a tuple (one for a plain message, one per plural form)."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def catalog(locale: str):
    with open(TRANSLATIONS / locale / "LC_MESSAGES" / "messages.po", "rb") as f:
        return read_po(f, locale=locale)


def test_every_string_marked_with_a_context_has_its_own_spanish_entry(extraction):
    """pgettext('value to reach', 'Target') is filed apart from 'Target': its own entry must be translated."""
    spanish = catalog("es")
    marked = {(message, context): f"{filename}:{lineno}" for filename, lineno, message, context in extraction if context}
    assert ("Target", "value to reach") in marked
    missing = [f"{context}|{message!r} ({where})" for (message, context), where in marked.items()
               if spanish.get(key(message), context=context) is None
               or not all(strings(spanish.get(key(message), context=context).string))]
    assert not missing, "strings without a Spanish translation in their context:\n" + "\n".join(missing)


def test_the_extraction_map_covers_the_code_and_the_templates(extracted):
    places = {where.split("/")[0] for wheres in extracted.values() for where in wheres}
    assert {"calibrate", "templates"} <= places
    # Strings the web app and the reports are known to show, marked where they are written.
    assert {"Log in", "Queue", "Supported", "Calibration report: %(dataset)s", "Language saved: %(language)s."} <= set(extracted)


def test_every_marked_string_has_a_spanish_entry(extracted):
    spanish = catalog("es")
    missing = [f"{message!r} ({where[0]})" for message, where in extracted.items()
               if spanish.get(key(message)) is None or not all(strings(spanish.get(key(message)).string))]
    assert not missing, "strings without a Spanish translation (docs/i18n.md says how to add them):\n" + "\n".join(missing)


def test_spanish_entries_keep_the_placeholders_and_none_is_fuzzy():
    spanish = catalog("es")
    problems = []
    for message in spanish:
        if not message.id:
            continue
        if message.fuzzy:
            problems.append(f"fuzzy: {message.id!r}")
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        wanted = sorted(set(PLACEHOLDER.findall(ids[-1])))
        for text in strings:
            # A singular form may write the number out ("1 cambio"); every form keeps the named placeholders.
            got = sorted(set(PLACEHOLDER.findall(text)))
            if [p for p in got if p not in wanted] or [p for p in wanted if p not in got and p != "%(num)s"]:
                problems.append(f"placeholders of {message.id!r}: {wanted} → {got} in {text!r}")
    assert not problems, "\n".join(problems)


def test_the_shipped_mo_is_the_compiled_po():
    po = catalog("es")
    with open(TRANSLATIONS / "es" / "LC_MESSAGES" / "messages.mo", "rb") as f:
        mo = read_mo(f)
    in_po = {key(m.id): strings(m.string) for m in po if m.id and not m.fuzzy}
    in_mo = {key(m.id): strings(m.string) for m in mo if m.id}
    assert in_mo == in_po, "the .mo is out of date: run pybabel compile -d calibrate/translations (docs/i18n.md)"


def test_the_template_lists_what_the_code_marks(extracted):
    with open(TRANSLATIONS / "messages.pot", "rb") as f:
        pot = read_po(f)
    assert {m.id for m in pot if m.id} == set(extracted), "messages.pot is stale: run pybabel extract (docs/i18n.md)"


def test_the_catalogs_ship_with_the_package():
    import tomllib

    data = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["calibrate"]
    assert {"translations/*.pot", "translations/*/LC_MESSAGES/*.po", "translations/*/LC_MESSAGES/*.mo"} <= set(data)


def test_glossary_terms_are_used_the_same_way():
    """The docs/i18n.md glossary: the words of the workbench keep one Spanish name each."""
    spanish = {m.id: m.string for m in catalog("es") if m.id and isinstance(m.id, str)}
    assert spanish["Supported"] == "Respaldada"
    assert spanish["Unsupported"] == "No respaldada"
    assert spanish["Not a claim"] == "No es una afirmación"
    assert spanish["Rationale"] == "Justificación"
    assert spanish["Gold"] == "Referencia"
    assert spanish["Judge"] == "Juez"
    assert spanish["claim %(n)s"] == "afirmación %(n)s"
    glossary = (PROJECT_ROOT / "docs" / "i18n.md").read_text()
    for term in ("afirmación", "respaldada", "no respaldada", "no es una afirmación", "justificación", "referencia", "juez",
                 "conjunto de datos", "anotador/a"):
        assert term in glossary


@pytest.mark.parametrize(("locale", "number", "percent"), [("en", "0.861", "12.5%"), ("es", "0,861", "12,5\u00a0%")])
def test_numbers_and_percentages_per_locale(locale, number, percent):
    with i18n.using(locale) as words:
        assert words.number(0.8612) == number
        assert words.percent(0.125, 1) == percent
        assert words.number(-0.0004) in ("-0.000", "-0,000")  # rounding stays Python's; the reports avoid "-0" themselves


def test_dates_per_locale():
    moment = datetime(2025, 1, 5, 15, 4)
    assert i18n.translator("en").datetime(moment) == "Jan 5, 2025 15:04"
    assert i18n.translator("es").datetime(moment) == "5 ene 2025 15:04"


def test_unsupported_locales_fall_back_to_english():
    assert i18n.supported("es-ES") == "es" and i18n.supported("ES_es") == "es"
    assert i18n.supported("fr") is None and i18n.supported("") is None
    assert i18n.translator("fr").gettext("Log in") == "Log in"
    assert i18n.translator("es").gettext("Log in") == "Iniciar sesión"


def test_rendering_keeps_files_in_english_and_words_in_the_locale():
    with i18n.using("es"):
        with i18n.rendering("csv", None):
            assert i18n.current().locale == "en"
        with i18n.rendering("json", "es"):
            assert i18n.current().locale == "en"
        with i18n.rendering("html", None):
            assert i18n.current().locale == "es"
    with i18n.rendering("md", "es"):
        assert i18n.current().locale == "es"
