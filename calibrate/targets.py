"""How a person names a target: one numbering on every screen and in every report a person reads.

Claims, contexts and steps are numbered from 1 (claim 1 is the first claim of its answer; context #1
the first retrieved), always with the sample's own id: "demo-004 · claim 1". Files and JSON
keep their 0-based positions (`claim`, `context` in the report JSON and CSV, the import and
export formats): those are for programs, this is for people. A live estimate's level (answers,
claims, contexts, steps) is named here too (`level_name`).
"""

from __future__ import annotations

from sqlmodel import Session, select

from calibrate import i18n
from calibrate.i18n import N_
from calibrate.models import Claim, Context, Sample, Step

# A live estimate's level as people name it (calibration/live.py LEVELS: `answers`, then each part kind's rows, as the
# registry names them): the Production page's choice, in the reader's language. A test checks every level has one.
LEVEL_NAMES = {"answers": N_("answers"), "claims": N_("claims"), "contexts": N_("contexts"),
               "steps": N_("steps")}


def where(kind: str, position: int | None) -> str:
    """Return a target's place within its sample in words: "claim 1", "context #2", "step 3", "the answer", "the responses"."""
    if kind == "claim" and position is not None:
        return i18n.gettext("claim %(n)s", n=position + 1)
    if kind == "context" and position is not None:
        return i18n.gettext("context #%(n)s", n=position + 1)
    if kind == "step" and position is not None:
        return i18n.gettext("step %(n)s", n=position + 1)
    if kind == "responses":
        return i18n.gettext("the responses")
    return i18n.gettext("the answer")


def level_name(level: str) -> str:
    """Return a live estimate's level in the reader's language ("claims", "pasos"); an unknown one as it is."""
    return i18n.gettext(LEVEL_NAMES[level]) if level in LEVEL_NAMES else level


def target_name(sample: str, kind: str, position: int | None) -> str:
    """Return a target as people name it: "demo-004 · claim 1" (the sample's own id, then `where`)."""
    return f"{sample} · {where(kind, position)}"


def target_names(session: Session, keys: list[str]) -> dict[str, str]:
    """Return target key → its name for people ("demo-004 · claim 5"), for a few keys (one query per kind)."""
    ids: dict[str, list[int]] = {}
    for key in keys:
        kind, _, raw = key.partition(":")
        if raw.isascii() and raw.isdigit():
            ids.setdefault(kind, []).append(int(raw))
    out: dict[str, str] = {}
    for kind, model, position in (("claim", Claim, Claim.index), ("context", Context, Context.rank), ("step", Step, Step.index)):
        if ids.get(kind):
            rows = session.exec(select(model.id, Sample.external_id, position).join(Sample, Sample.id == model.sample_id)
                                .where(model.id.in_(ids[kind]))).all()
            out.update({f"{kind}:{row_id}": target_name(external, kind, pos) for row_id, external, pos in rows})
    if ids.get("sample"):
        rows = session.exec(select(Sample.id, Sample.external_id).where(Sample.id.in_(ids["sample"]))).all()
        out.update({f"sample:{row_id}": target_name(external, "sample", None) for row_id, external in rows})
    return out
