"""How a person names a target: one numbering on every screen and in every report a person reads.

Claims and contexts are numbered from 1 (claim 1 is the first claim of its answer; context #1
the first retrieved), always with the sample's own id: "demo-004 · claim 1". Files and JSON
keep their 0-based positions (`claim`, `context` in the report JSON and CSV, the import and
export formats): those are for programs, this is for people.
"""

from __future__ import annotations

from calibrate import i18n


def where(kind: str, position: int | None) -> str:
    """Return a target's place within its sample in words: "claim 1", "context #2", "the answer", "the responses"."""
    if kind == "claim" and position is not None:
        return i18n.gettext("claim %(n)s", n=position + 1)
    if kind == "context" and position is not None:
        return i18n.gettext("context #%(n)s", n=position + 1)
    if kind == "responses":
        return i18n.gettext("the responses")
    return i18n.gettext("the answer")


def target_name(sample: str, kind: str, position: int | None) -> str:
    """Return a target as people name it: "demo-004 · claim 1" (the sample's own id, then `where`)."""
    return f"{sample} · {where(kind, position)}"
