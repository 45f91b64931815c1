"""Split a RAG answer into atomic claims, each with its character span in the answer.

When an imported sample brings no explicit ``claims``, its answer is segmented here into
sentences and list items. Every result is a `ClaimSpan` with ``answer[start:end] == text``;
the text is stripped of surrounding whitespace and of list markers, and the span covers
exactly the kept text. Explicit claims are mapped onto the answer by `locate_claims`.

Algorithm (`SentenceSegmenter`, deterministic, standard library only):

1. Line breaks (anything `str.splitlines` breaks on) are hard boundaries, so blank lines,
   list items and headings never merge with their neighbours.
2. A leading list marker is dropped from each line: bullets (``-``, ``*``, ``+``, ``•``,
   ``–``, ``—``, ...), numbers (``1.``, ``2)``, ``(3)``, ``1.2.``), letters and small roman
   numerals (``a)``, ``(b)``, ``iv)``), Markdown headings (``##``) and quotes (``>``).
   Markers only count when followed by whitespace, so ``1.000 pacientes`` or ``-5 °C`` stay.
3. Within a line, a candidate sentence end is a whitespace-delimited token ending in a run
   of terminators (``. ! ? … ‽`` and their full-width forms) optionally followed by closing
   quotes or brackets (``" ' ” ’ » › ) ] }``). Requiring whitespace after the candidate is
   what keeps decimals (``12.5``, ``0,4``), thousands (``1.000``, ``1,000.50``), versions
   (``v1.2.3``), URLs and e-mail addresses whole.
4. A candidate is rejected when the next word starts in lowercase (``etc. and``, ``¿cuándo?
   y``, ``Esperó... y``), unless the whole answer is lowercase. A lone ``.`` is further
   checked against the abbreviation tables below; ``?``, ``!``, ellipses and runs of
   terminators are otherwise accepted.
5. Fragments without a single letter or digit (``...``, ``---``, a bare ``:``) are dropped,
   so a line such as ``Los síntomas son:`` is kept as its own claim while a lone ``:`` is not.

Every pattern is precompiled, uses possessive quantifiers where backtracking could compound,
and is matched once per line, so the run time is linear in the answer length and there is no
recursion; 10 MB of text is fine.

Known limits: a period is only a sentence end when followed by whitespace (``Hola.Adiós`` is
one claim); an abbreviation missing from the tables ends the sentence when a capitalised word
follows; a sentence that genuinely ends in an initial or a dotted acronym (``vitamina A.``,
``the U.S.``) is only split off when the next word is a common sentence opener
(`SENTENCE_STARTERS`); sentences that start with a lowercase letter are merged with the
previous one in mixed-case text; inline lists (``son: - fiebre - dolor``) are not split.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "ABBREVIATIONS",
    "NUMBER_ABBREVIATIONS",
    "SENTENCE_STARTERS",
    "WEAK_ABBREVIATIONS",
    "ClaimSpan",
    "Segmenter",
    "SentenceSegmenter",
    "locate_claims",
    "segment",
]


@dataclass(frozen=True, slots=True)
class ClaimSpan:
    """One claim and its half-open character span ``[start, end)`` in the answer."""

    text: str
    start: int
    end: int


@runtime_checkable
class Segmenter(Protocol):
    """Anything that splits an answer into claims; `name` is stored with the claims."""

    name: str

    def segment(self, answer: str) -> list[ClaimSpan]:
        """Return the claims of `answer`, in order, with spans into it."""
        ...


#: Abbreviations after which a period never ends a sentence (English and Spanish),
#: lowercase and without their final period; internal periods are kept (``"e.g"``).
#: Titles precede a name, reference words precede a number, and Latin/Spanish connectives
#: (``e.g.``, ``i.e.``, ``p. ej.``, ``vs.``, ``aprox.``) sit mid-sentence by nature.
ABBREVIATIONS: frozenset[str] = frozenset(
    {
        # English titles and ranks
        "mr", "mrs", "ms", "messrs", "dr", "drs", "prof", "profs", "rev", "hon", "st",
        "sen", "rep", "gov", "lt", "sgt", "capt", "cmdr", "adm", "maj", "mt",
        # Spanish titles and forms of address
        "sr", "sra", "srta", "sres", "sras", "dra", "dres", "dras", "dña", "lic", "lcdo",
        "lcda", "ing", "arq", "profa", "ud", "uds", "vd", "vds", "sto", "sta", "fr", "mons",
        "excmo", "excma", "ilmo", "ilma", "gral",
        # references that precede a number or a name
        "fig", "figs", "eq", "eqs", "ref", "refs", "vol", "vols", "ch", "chap", "sec",
        "secs", "secc", "art", "arts", "pp", "pág", "págs", "pag", "pags", "núm",
        "núms", "num", "nro", "tel", "telf", "avda", "av", "apdo", "dpto", "depto", "cap",
        # connectives and qualifiers that introduce something
        "e.g", "i.e", "eg", "ie", "vs", "v.s", "cf", "cfr", "viz", "approx", "aprox",
        "ca", "incl", "ej", "p.ej", "ee",
    }
)

#: Abbreviations that may close a sentence: a period after them ends one only when the next
#: word is capitalised (``etc. Then`` splits, ``etc. and`` or ``et al. (2020)`` do not).
WEAK_ABBREVIATIONS: frozenset[str] = frozenset(
    {"etc", "al", "inc", "ltd", "co", "corp", "llc", "plc", "jr", "cía", "ee.uu", "uu"}
)

#: Abbreviations that are ordinary words too (``No.`` vs ``No. 5``, ``nos.``): the period
#: ends a sentence unless a number follows.
NUMBER_ABBREVIATIONS: frozenset[str] = frozenset({"no", "nos"})

#: Common words that open a sentence; after an initial or a dotted acronym (``J.``,
#: ``U.S.``, ``vitamina B.``) a sentence ends only when one of these follows, because a
#: capitalised word after an initial is usually a name (``J. Smith``, ``U.S. Army``).
SENTENCE_STARTERS: frozenset[str] = frozenset(
    {
        # English
        "the", "this", "that", "these", "those", "it", "its", "he", "she", "they", "we",
        "you", "there", "then", "thus", "however", "but", "and", "so", "also", "in", "on",
        "at", "for", "from", "with", "after", "before", "during", "if", "when", "while",
        "although", "as", "because", "since", "what", "which", "who", "how", "why", "all",
        "each", "some", "many", "most", "no", "not", "yes", "our", "their", "his", "her",
        "my", "both", "further", "furthermore", "moreover", "therefore", "here", "is",
        "are", "was", "were", "do", "does", "can", "should", "may",
        # Spanish
        "el", "la", "los", "las", "lo", "un", "una", "unos", "unas", "este", "esta",
        "estos", "estas", "esto", "ese", "esa", "esos", "esas", "eso", "ello", "él",
        "ella", "ellos", "ellas", "en", "con", "sin", "por", "para", "de", "del", "al",
        "desde", "durante", "tras", "según", "si", "sí", "se", "es", "son", "fue", "hay",
        "pero", "también", "además", "asimismo", "así", "cuando", "como", "aunque",
        "porque", "ya", "luego", "después", "antes", "entonces", "su", "sus", "cada",
        "todos", "todas", "otro", "otra", "qué", "cómo", "cuándo", "dónde", "cuál",
        "nuestro", "nuestra",
    }
)

_TERMINATORS = ".!?…‽。！？"
_CLOSERS = "\"'”’»›)]}"
_OPENERS = "\"'“‘«‹([{¿¡"

# Everything str.splitlines() breaks on, so "line" means the same thing everywhere.
_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"

# Longer tokens cannot be abbreviations, so looking further back for one is wasted work.
_TOKEN_WINDOW = 24

# Repeated so nested Markdown ("> - item", "## 1. Title") loses every marker.
_MARKER = re.compile(
    r"""
    (?:
        \s*+
        (?:
            [-*+•‣◦▪▫·–—]
          | \(?\d{1,3}(?:\.\d{1,3})*[.)]
          | \(?[A-Za-z]\)
          | \(?(?:ii|iii|iv|vi|vii|viii|ix|xi|xii)\)
          | \#{1,6}
          | >
        )
        \s++
    )+
    """,
    re.VERBOSE,
)

# A candidate sentence end: a run of terminators and closing quotes or brackets followed by
# whitespace; the lookahead captures the next word (skipping opening punctuation) without
# consuming it, or leaves `next` unset when only whitespace remains. The pattern opens with
# a character class so the engine can skip ahead to the next terminator, and the lookbehind
# anchors it at the start of a run, so a long run of periods is consumed once instead of once
# per position (which would be quadratic).
_CANDIDATE = re.compile(
    r"""
    (?P<term>[{t}](?<![{t}][{t}])[{t}]*+)
    [{c}]*+
    (?=\s*+\Z|\s++[^\w\s]*+(?P<next>\w*))
    """.format(t=re.escape(_TERMINATORS), c=re.escape(_CLOSERS)),
    re.VERBOSE,
)

_INITIALS = re.compile(r"[^\W\d_](?:\.[^\W\d_])*")
_HAS_WORD = re.compile(r"[^\W_]")
_WHITESPACE_RUN = re.compile(r"\s+")


class SentenceSegmenter:
    """Deterministic sentence and list-item segmenter; see the module docstring."""

    name = "sentence-v1"

    __slots__ = ("_abbreviations",)

    def __init__(self, *, extra_abbreviations: Iterable[str] = ()) -> None:
        """Build a segmenter, optionally treating more abbreviations as never final."""
        extra = {a.strip().rstrip(".").lower() for a in extra_abbreviations}
        self._abbreviations = ABBREVIATIONS | extra if extra else ABBREVIATIONS

    def segment(self, answer: str) -> list[ClaimSpan]:
        """Split `answer` into sentence and list-item claims with exact spans."""
        claims: list[ClaimSpan] = []
        if not answer:
            return claims
        # An all-lowercase answer has no capitalisation to go by.
        cased = not answer.islower()
        offset = 0
        for line in answer.splitlines(True):
            line_start = offset
            offset += len(line)
            line_end = line_start + len(line.rstrip(_LINE_BREAKS))
            if line_end == line_start:
                continue
            marker = _MARKER.match(answer, line_start, line_end)
            start = marker.end() if marker else line_start
            for candidate in _CANDIDATE.finditer(answer, start, line_end):
                term, word = candidate.group("term", "next")
                if word is None:
                    break
                # The cheap test first: it settles most abbreviations ("p. ej.", "etc. y").
                if cased and word[:1].islower():
                    continue
                if term == "." and not self._period_ends(answer, start, candidate.start(), word):
                    continue
                end = candidate.end()
                _emit(answer, start, end, claims)
                start = end
            _emit(answer, start, line_end, claims)
        return claims

    def _period_ends(self, answer: str, start: int, period: int, word: str) -> bool:
        """Decide whether the lone period at `period`, followed by `word`, ends a sentence."""
        raw = _token_before(answer, start, period).lstrip(_OPENERS)
        key = raw.lower()
        if key in self._abbreviations:
            return False
        if key in WEAK_ABBREVIATIONS:
            return word[:1].isupper()
        if key in NUMBER_ABBREVIATIONS:
            return not word[:1].isdigit()
        # Initials are capitals ("J. Smith", "U.S."); a lone lowercase letter is a unit ("4 g.").
        if _INITIALS.fullmatch(key) and raw[:1].isupper():
            return word.lower() in SENTENCE_STARTERS
        return True


def _token_before(answer: str, start: int, end: int) -> str:
    """Return the whitespace-delimited token ending at `end`, or "" if it is too long."""
    low = max(start, end - _TOKEN_WINDOW)
    head = answer[low:end]
    if not head or head[-1].isspace():
        return ""
    token = head.rsplit(None, 1)[-1]
    if low > start and len(token) == len(head):
        return ""
    return token


def _emit(answer: str, start: int, end: int, claims: list[ClaimSpan]) -> None:
    """Append the stripped fragment ``answer[start:end]`` if it has a letter or digit."""
    fragment = answer[start:end]
    left = fragment.lstrip()
    text = left.rstrip()
    if text and _HAS_WORD.search(text):
        begin = start + len(fragment) - len(left)
        claims.append(ClaimSpan(text, begin, begin + len(text)))


_DEFAULT = SentenceSegmenter()


def segment(answer: str) -> list[ClaimSpan]:
    """Segment `answer` with the shared default `SentenceSegmenter`."""
    return _DEFAULT.segment(answer)


class _CollapsedWhitespace:
    """The answer with whitespace runs collapsed to one space, mapped back to true offsets."""

    __slots__ = ("text", "_collapsed", "_original", "_length")

    def __init__(self, answer: str) -> None:
        """Collapse `answer`, recording where each run starts on both sides."""
        parts: list[str] = []
        # Parallel anchors: a run starting at collapsed[i] starts at original[i].
        self._collapsed: list[int] = []
        self._original: list[int] = []
        size = 0
        previous = 0
        for run in _WHITESPACE_RUN.finditer(answer):
            begin, finish = run.span()
            if begin > previous:
                self._collapsed.append(size)
                self._original.append(previous)
                parts.append(answer[previous:begin])
                size += begin - previous
            self._collapsed.append(size)
            self._original.append(begin)
            parts.append(" ")
            size += 1
            previous = finish
        if previous < len(answer):
            self._collapsed.append(size)
            self._original.append(previous)
            parts.append(answer[previous:])
            size += len(answer) - previous
        self._length = size
        self.text = "".join(parts)

    def to_original(self, index: int) -> int:
        """Map a collapsed offset to the original offset of the same character."""
        k = bisect_right(self._collapsed, index) - 1
        return self._original[k] + (index - self._collapsed[k])

    def to_collapsed(self, offset: int) -> int:
        """Map an original offset to the first collapsed offset at or after it."""
        k = bisect_right(self._original, offset) - 1
        if k < 0:
            return 0
        run_end = self._collapsed[k + 1] if k + 1 < len(self._collapsed) else self._length
        return min(self._collapsed[k] + (offset - self._original[k]), run_end)

    def find(self, needle: str, offset: int) -> tuple[int, int]:
        """Find collapsed `needle` from original `offset`; return its true span or (-1, -1)."""
        at = self.text.find(needle, self.to_collapsed(offset))
        if at < 0:
            return -1, -1
        return self.to_original(at), self.to_original(at + len(needle) - 1) + 1


def locate_claims(answer: str, claims: Sequence[str]) -> list[ClaimSpan]:
    """Find the spans of explicitly given claims in `answer`, keeping the claims' order.

    Each claim, stripped of surrounding whitespace, is searched for from the end of the
    previous match, so repeated claims map to successive occurrences; failing that, it is
    searched for with every run of whitespace collapsed to one space on both sides (the span
    is mapped back to true offsets and covers the answer's own whitespace). Only then are
    both searches repeated from the start of the answer, for claims given out of order.

    The returned ``text`` is always the claim exactly as given. For a found claim,
    ``answer[start:end]`` equals the stripped claim, up to whitespace when the collapsed
    search matched. A claim that cannot be found (or is blank) gets ``start = end = -1``:
    the UI lists it below the answer instead of highlighting it, and it does not move the
    search cursor.
    """
    located: list[ClaimSpan] = []
    cursor = 0
    collapsed: _CollapsedWhitespace | None = None
    for claim in claims:
        needle = claim.strip()
        start = end = -1
        if needle:
            for offset in (cursor, 0) if cursor else (0,):
                start = answer.find(needle, offset)
                if start >= 0:
                    end = start + len(needle)
                    break
                if collapsed is None:
                    collapsed = _CollapsedWhitespace(answer)
                start, end = collapsed.find(" ".join(needle.split()), offset)
                if start >= 0:
                    break
        if start >= 0:
            cursor = end
        located.append(ClaimSpan(claim, start, end))
    return located
