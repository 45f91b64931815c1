"""The interface's languages without Flask: message catalogs, the current locale, numbers and dates for it.

calibrate speaks English (the source text of every message) and Spanish. The catalogs are
`calibrate/translations/<locale>/LC_MESSAGES/messages.{po,mo}`, shipped compiled (no compile
step at install, no network). How to update them and add a language: docs/i18n.md.

Who says which locale is current:

- a renderer or a command: `with using("es"): …` (the HTML and Markdown reports take a
  `locale` and render inside it);
- the web app: views/i18n.py registers a provider (`set_locale_provider`) that answers with
  the request's locale (the user's setting, else the browser's Accept-Language, else English),
  so a sentence worded by domain code during a request (a refusal, the dashboard's decision)
  comes out in the reader's language;
- otherwise English: the command line, JSON, CSV and every file format stay locale-independent.

Text is marked where it is written with `_` (translated now) or `N_` (only marked: translated
later where it is shown, for constants at module level); Babel's extractor finds both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from datetime import date, datetime
from decimal import Decimal
from gettext import NullTranslations
from pathlib import Path
from typing import Any

LOCALES = ("en", "es")
DEFAULT_LOCALE = "en"
# Each language named in itself (the Account page's choices).
LANGUAGE_NAMES = {"en": "English", "es": "Español"}
TRANSLATIONS = Path(__file__).parent / "translations"
DOMAIN = "messages"


def N_(message: str) -> str:
    """Mark `message` for translation without translating it (it is translated where it is shown)."""
    return message


def supported(locale: str | None) -> str | None:
    """Return the supported locale a language tag names ("es-ES", "es_ES", "ES" → "es"), or None."""
    if not locale:
        return None
    tag = str(locale).strip().replace("_", "-").split("-")[0].casefold()
    return tag if tag in LOCALES else None


@functools.cache
def translations(locale: str) -> NullTranslations:
    """Return the compiled catalog of a supported locale (English, the source language, needs none)."""
    if locale == DEFAULT_LOCALE or locale not in LOCALES:
        return NullTranslations()
    from babel.support import Translations  # noqa: PLC0415 - Babel's catalog loader, only when a translation is asked for

    return Translations.load(str(TRANSLATIONS), [locale], DOMAIN)


class Translator:
    """One locale's words and formats: gettext, ngettext, and numbers, percentages and dates as its readers write them."""

    def __init__(self, locale: str) -> None:
        self.locale = locale if locale in LOCALES else DEFAULT_LOCALE
        self.catalog = translations(self.locale)

    def __repr__(self) -> str:
        return f"Translator({self.locale!r})"

    def gettext(self, message: str, **variables: Any) -> str:
        """Return `message` translated, with `%(name)s` placeholders filled from `variables` (when given)."""
        text = self.catalog.gettext(message)
        return text % variables if variables else text

    def ngettext(self, singular: str, plural: str, n: int, **variables: Any) -> str:
        """Return the singular or plural form for `n` translated; `%(num)s` is `n`."""
        text = self.catalog.ngettext(singular, plural, n)
        return text % {"num": n, **variables}

    def number(self, value: float, digits: int = 3) -> str:
        """Return `value` with `digits` decimals in the locale's notation ("0.861", "0,861"); no grouping."""
        # Rounded once, by Python (as every number of the reports always was), then only written the locale's way.
        text = f"{value:.{digits}f}"
        if self.locale == DEFAULT_LOCALE:
            return text
        from babel.numbers import format_decimal  # noqa: PLC0415 - Babel's number data, loaded by the first page that formats a number

        return format_decimal(Decimal(text), format="0" + ("." + "0" * digits if digits else ""), locale=self.locale)

    def percent(self, proportion: float, digits: int = 1) -> str:
        """Return a proportion as a percentage with `digits` decimals, in the locale's notation ("12.5%", "12,5 %")."""
        text = f"{100 * proportion:.{digits}f}"
        if self.locale == DEFAULT_LOCALE:
            return f"{text}%"
        from babel import Locale  # noqa: PLC0415 - as in number()
        from babel.numbers import format_percent  # noqa: PLC0415 - as in number()

        pattern = Locale.parse(self.locale).percent_formats[None].pattern.replace("#,##0", "0" + ("." + "0" * digits if digits else ""))
        return format_percent(Decimal(text) / 100, format=pattern, locale=self.locale)

    def datetime(self, value: datetime, *, seconds: bool = False) -> str:
        """Return a date and time in the locale's medium date and a 24-hour clock ("Jan 5, 2025 15:04", "5 ene 2025 15:04")."""
        from babel.dates import format_date, format_time  # noqa: PLC0415 - Babel's calendar data, on first use

        return f"{format_date(value, 'medium', locale=self.locale)} {format_time(value, 'HH:mm:ss' if seconds else 'HH:mm', locale=self.locale)}"

    def date(self, value: date) -> str:
        """Return a date in the locale's medium format ("Jan 5, 2025", "5 ene 2025")."""
        from babel.dates import format_date  # noqa: PLC0415 - as in datetime()

        return format_date(value, "medium", locale=self.locale)


@functools.cache
def translator(locale: str) -> Translator:
    """Return the (shared) translator of a locale; an unsupported one gets English."""
    return Translator(supported(locale) or DEFAULT_LOCALE)


_ACTIVE: ContextVar[Translator | None] = ContextVar("calibrate_translator", default=None)
_PROVIDER: list[Callable[[], str | None]] = []


def set_locale_provider(provider: Callable[[], str | None]) -> None:
    """Name the function that says the current locale when no `using` block does (the web app's request locale)."""
    _PROVIDER[:] = [provider]


def current() -> Translator:
    """Return the translator of the current locale: a `using` block's, else the provider's, else English."""
    active = _ACTIVE.get()
    if active is not None:
        return active
    for provider in _PROVIDER:
        locale = provider()
        if locale:
            return translator(locale)
    return translator(DEFAULT_LOCALE)


@contextmanager
def using(locale: str | Translator | None) -> Iterator[Translator]:
    """Make `locale` current inside the block (None: English)."""
    chosen = locale if isinstance(locale, Translator) else translator(locale or DEFAULT_LOCALE)
    token = _ACTIVE.set(chosen)
    try:
        yield chosen
    finally:
        _ACTIVE.reset(token)


def rendering(fmt: str, locale: str | None):
    """Return the block a report renders in: a file format (json, csv) always in English, HTML and Markdown in
    `locale` when given, else in the current locale (the reader's in the web app, English on the command line)."""
    if fmt in ("json", "csv"):
        return using(DEFAULT_LOCALE)
    return using(locale) if locale else nullcontext(current())


def gettext(message: str, **variables: Any) -> str:
    """Return `message` in the current locale (`%(name)s` filled from `variables`)."""
    return current().gettext(message, **variables)


def ngettext(singular: str, plural: str, n: int, **variables: Any) -> str:
    """Return the form of a message for `n` in the current locale (`%(num)s` is `n`)."""
    return current().ngettext(singular, plural, n, **variables)


_ = gettext
