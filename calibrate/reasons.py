"""Why a result is undefined, or what to know about it, as data: a stable code plus the figures it needs.

A statistic, a report section or a refusal that has something to say carries a `Reason`:
`Reason("single_label", label="supported")`. Its English sentence (the report JSON's `note`,
word for word what it always was) is the code's template in `TEMPLATES` filled with the figures;
the JSON also carries the reason itself (`"reason": {"code": "single_label", "label": "supported"}`),
so that the HTML, Markdown and web pages word it again in the reader's language from the code
(`word`), and never parse, match or translate the English note.

Figures stay data: numbers stay numbers (a renderer formats them per locale, the template says how
many digits), labels and names stay as given, and a figure may itself be a reason (a note made of
several parts joined by "; " is the reason `several`), or a list of reasons worded each and joined by ", ".

Standard library only, like errors.py: the statistics (calibrate/stats/) import it, and it
imports nothing of calibrate but its own table, calibrate/reason_templates.py (docs/architecture.md,
"Layers"). The templates are marked with `N_` so that `pybabel extract -k N_` puts them in the catalog
(docs/i18n.md, "Reasons").
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable, Mapping
from typing import Any

# The table of codes and their English templates lives in its own data module (it grows with every code).
from calibrate.reason_templates import N_, TEMPLATES, TRANSLATED_FIGURES, WORDS

# A note made of several reasons: each worded, joined by "; " (the English notes always were).
SEVERAL = "several"


class Reason:
    """A stable code and the figures its sentence needs; `str()` is the English sentence."""

    __slots__ = ("code", "figures")

    def __init__(self, code: str, /, **figures: Any) -> None:
        if code != SEVERAL and code not in TEMPLATES:
            raise ValueError(f"unknown reason code {code!r}")
        if "code" in figures:
            raise ValueError("a figure cannot be named 'code' (the reason's own key)")
        self.code = code
        self.figures = figures

    def __repr__(self) -> str:
        return f"Reason({self.code!r}, {self.figures!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reason) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(self.code)

    def __str__(self) -> str:
        return self.text()

    def text(self) -> str:
        """Return the English sentence (the JSON's `note`)."""
        return word(self.to_dict())

    def to_dict(self) -> dict:
        """Return `{"code": …, figure: value, …}`: flat, JSON-safe when the figures are."""
        return {"code": self.code, **{k: _plain(v) for k, v in self.figures.items()}}

    @property
    def parts(self) -> list[Reason]:
        """Return the reasons this one joins (itself when it is one)."""
        return list(self.figures["parts"]) if self.code == SEVERAL else [self]


def _plain(value: Any) -> Any:
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, (str, list, tuple, dict)):
        value = value.item()  # a numpy scalar: a plain number (this floor imports no numpy)
    if isinstance(value, Reason):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def join(reasons: Iterable[Reason | None]) -> Reason | None:
    """Return the reasons given as one (None for none, the reason itself for one; "several" joins them with "; ")."""
    parts = [p for r in reasons if r is not None for p in r.parts]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else Reason(SEVERAL, parts=parts)


def noted(reason: Reason | None) -> dict:
    """Return `{"note": English sentence, "reason": {...}}` for a JSON block (`{"note": ""}` without a reason)."""
    return {"note": reason.text(), "reason": reason.to_dict()} if reason is not None else {"note": ""}


def known(reason: Any) -> bool:
    """Return whether `reason` (a JSON block's `reason`) has a code this version can word, parts included."""
    if not isinstance(reason, Mapping) or not isinstance(reason.get("code"), str):
        return False
    if reason["code"] == SEVERAL:
        parts = reason.get("parts")
        return isinstance(parts, list) and bool(parts) and all(known(p) for p in parts)
    return reason["code"] in TEMPLATES


def _local(value: int | float, localize: Callable[[str], str]) -> Any:
    """Return a number that formats as the template says (digits), then is written the reader's way (decimal sign)."""
    base = float if isinstance(value, float) else int

    class Local(base):  # type: ignore[misc, valid-type]
        def __format__(self, spec: str) -> str:
            return localize(format(base(self), spec))

    return Local(value)


def _english_plural(singular: str, plural: str, n: int) -> str:
    return singular if n == 1 else plural


def word(reason: Mapping, *, gettext: Callable[[str], str] = N_,
         ngettext: Callable[[str, str, int], str] = _english_plural,
         localize: Callable[[str], str] | None = None) -> str:
    """Return the sentence of a reason (`Reason.to_dict()`) in a language.

    `gettext` translates a template (and the WORDS figures), `ngettext` a singular/plural pair for
    the `count` figure; `localize` rewrites a number as formatted by the template ("0.469") the
    reader's way ("0,469"). English by default. Raises KeyError for an unknown code (`known` says
    beforehand).
    """
    code = reason["code"]
    if code == SEVERAL:
        return "; ".join(word(p, gettext=gettext, ngettext=ngettext, localize=localize) for p in reason["parts"])
    figures = {}
    for key, value in reason.items():
        if key == "code":
            continue
        if isinstance(value, Mapping) and "code" in value:
            value = word(value, gettext=gettext, ngettext=ngettext, localize=localize)
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) and "code" in v for v in value):
            value = ", ".join(word(v, gettext=gettext, ngettext=ngettext, localize=localize) for v in value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and localize is not None:
            value = _local(value, localize)
        elif isinstance(value, str) and value in WORDS and key in TRANSLATED_FIGURES:
            value = gettext(WORDS[value])
        figures[key] = value
    template = TEMPLATES[code]
    if isinstance(template, tuple):
        return ngettext(*template, int(reason["count"])).format(**figures)
    return gettext(template).format(**figures)


def fields(template: str) -> set[str]:
    """Return the names a template fills (to check that a translation keeps them)."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def english_templates() -> list[str]:
    """Return every English template, both forms of a pair."""
    return [form for template in TEMPLATES.values() for form in (template if isinstance(template, tuple) else (template,))]
