"""What a run judges: the targets of a task in a dataset, and the fields templates see."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, select

from calibrate.judges.render import Metadata
from calibrate.judges.versions import stored_examples
from calibrate.models import Claim, Context, Dataset, FewShot, Label, PromptVersion, Sample, Task
from calibrate.tasks import current_guideline


@dataclass(frozen=True)
class Target:
    key: str
    sample_id: int
    claim_id: int | None = None
    context_id: int | None = None


@dataclass(frozen=True)
class Scope:
    """Which targets of the dataset a run judges (stored in the run so a resume judges the same)."""

    split: str | None = None
    labelled_only: bool = False
    limit: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"split": self.split, "labelled_only": self.labelled_only, "limit": self.limit}


def select_targets(session: Session, dataset: Dataset, task: Task, scope: Scope, *, exclude: set[str] = frozenset()) -> list[Target]:
    """Return the run's targets in a stable order (sample, then claim index or context rank)."""
    where = [Sample.dataset_id == dataset.id]
    if scope.split:
        where.append(Sample.split == scope.split)
    if task.target == "claim":
        rows = session.exec(select(Claim.id, Claim.sample_id).join(Sample).where(*where, Claim.active)
                            .order_by(Claim.sample_id, Claim.index)).all()
        targets = [Target(f"claim:{cid}", sid, claim_id=cid) for cid, sid in rows]
    elif task.target == "context":
        rows = session.exec(select(Context.id, Context.sample_id).join(Sample).where(*where, Context.active)
                            .order_by(Context.sample_id, Context.rank)).all()
        targets = [Target(f"context:{cid}", sid, context_id=cid) for cid, sid in rows]
    else:
        rows = session.exec(select(Sample.id).where(*where).order_by(Sample.id)).all()
        targets = [Target(f"sample:{sid}", sid) for sid in rows]
    if scope.labelled_only:
        labelled = set(session.exec(
            select(Label.target_key).join(Sample).where(Sample.dataset_id == dataset.id, Label.task_id == task.id,
                                                       Label.stale.is_(False))
        ).all())
        targets = [t for t in targets if t.key in labelled]
    targets = [t for t in targets if t.key not in exclude]
    if scope.limit is not None:
        targets = targets[: scope.limit]
    return targets


def fewshot_keys(session: Session, version: PromptVersion) -> set[str]:
    """Return the targets shown as examples by a version: never judged, never scored for it."""
    return set(session.exec(select(FewShot.target_key).where(FewShot.version_id == version.id)).all())


def load_items(session: Session, sample_ids: set[int] | list[int]) -> dict[int, dict[str, Any]]:
    """Return sample id → the sample's fields (question, answer, contexts, claims…) for templates."""
    ids = sorted(set(sample_ids))
    items: dict[int, dict[str, Any]] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        for s in session.exec(select(Sample).where(Sample.id.in_(chunk))).all():
            items[s.id] = {"question": s.question, "answer": s.answer, "ground_truth": s.ground_truth or "",
                           "sample_id": s.external_id, "metadata": Metadata(s.meta or {}), "contexts": [], "claims": [],
                           "_contexts": {}, "_claims": {}}
        for c in session.exec(select(Context).where(Context.sample_id.in_(chunk), Context.active).order_by(Context.sample_id, Context.rank)).all():
            entry = {"rank": c.rank, "text": c.text, "doc_id": c.doc_id or ""}
            items[c.sample_id]["contexts"].append(entry)
            items[c.sample_id]["_contexts"][c.id] = entry
        for c in session.exec(select(Claim).where(Claim.sample_id.in_(chunk), Claim.active).order_by(Claim.sample_id, Claim.index)).all():
            entry = {"index": c.index, "text": c.text}
            items[c.sample_id]["claims"].append(entry)
            items[c.sample_id]["_claims"][c.id] = entry
    return items


def item_for(target: Target, samples: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Return the template fields of one target."""
    base = samples[target.sample_id]
    item = {k: v for k, v in base.items() if not k.startswith("_")}
    if target.claim_id is not None:
        item["claim"] = base["_claims"][target.claim_id]
    if target.context_id is not None:
        item["context"] = base["_contexts"][target.context_id]
    return item


def task_fields(session: Session, task: Task) -> dict[str, Any]:
    """Return the `task` fields templates see (with the current guidelines)."""
    guideline = current_guideline(session, task)
    return {"name": task.name, "description": task.description, "kind": task.kind, "target": task.target,
            "labels": list(task.labels or []), "scale_min": task.scale_min, "scale_max": task.scale_max,
            "guidelines": guideline.text if guideline else ""}


def version_context(session: Session, version: PromptVersion, task: Task) -> dict[str, Any]:
    """Return the fields shared by every item of a version: the task and the few-shot examples."""
    rows = stored_examples(session, version)
    samples = load_items(session, {row.sample_id for row in rows})
    examples = []
    for row in rows:
        example = item_for(Target(row.target_key, row.sample_id, row.claim_id, row.context_id), samples)
        example.update(verdict=row.value, rationale=row.rationale)
        examples.append(example)
    return {"task": task_fields(session, task), "examples": examples}

