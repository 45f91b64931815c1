"""What a run judges: the targets of a task in a dataset, and the fields templates see.

A pairwise task's target is judged once per presentation order (`expand_orders`): `original`
shows the responses in import order, `swapped` in reverse order (for two responses, the other
one first; for more, the last one first and so on), `both` does both. Each such job is a
`Target` with its `order`; the runner stores one verdict per (target, order).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sqlmodel import Session, select

from calibrate.judged import TARGET_KINDS, judging, target_kind
from calibrate.judges.render import Metadata
from calibrate.judges.versions import stored_examples
from calibrate.models import (
    TIE,
    Claim,
    Context,
    Dataset,
    FewShot,
    Label,
    PromptVersion,
    Response,
    Sample,
    Step,
    Task,
    order_key,
)
from calibrate.tasks import current_guideline
from calibrate.trajectories import row_entry, trajectory_fields

ORDERS = ("original", "swapped", "both")


@dataclass(frozen=True)
class Target:
    key: str  # its target key ("claim:42"): its kind is the registered target kind of the prefix (calibrate/judged.py)
    sample_id: int
    order: tuple[str, ...] | None = None  # pairwise: the response ids in the order shown
    order_key: str = ""  # … as import positions ("1,0"): verdicts are one per (key, order_key)
    sample_index: int = 0  # self-consistency (`--samples K`): the call's index 0..K-1; 0 is the target's verdict

    @property
    def part_id(self) -> int | None:
        """Return the id of the part of the sample this target is (its claim, context…; None: the sample itself)."""
        kind, _, raw = self.key.partition(":")
        return int(raw) if kind in TARGET_KINDS and TARGET_KINDS[kind].within else None

    @property
    def attach(self) -> dict[str, int | None]:
        """Return the id columns its verdict sets (claim_id, context_id…: TargetKind.attach; none for a rewrite's job)."""
        kind = TARGET_KINDS.get(self.key.partition(":")[0])
        return kind.attach(self.part_id) if kind is not None else {}

    @property
    def job(self) -> tuple[str, str, int]:
        """Return what a verdict is unique by within a judge and task: (target key, order key, sample index)."""
        return self.key, self.order_key, self.sample_index


def expand_samples(targets: list[Target], k: int) -> list[Target]:
    """Return each target K times, as samples 0..K-1 (K = 1: the targets themselves)."""
    if k <= 1:
        return targets
    return [replace(target, sample_index=index) for target in targets for index in range(k)]


def presentation_orders(ids: list[str], orders: str) -> list[tuple[tuple[str, ...], str]]:
    """Return the (response ids as shown, order key) of `orders` (original, swapped, both) for responses in import order."""
    positions = list(range(len(ids)))
    chosen = {"original": [positions], "swapped": [positions[::-1]], "both": [positions, positions[::-1]]}[orders]
    return [(tuple(ids[p] for p in shown), order_key(shown)) for shown in chosen]


def expand_orders(session: Session, targets: list[Target], orders: str) -> tuple[list[Target], int]:
    """Return one target per presentation order of each sample with two or more responses, and how many samples had fewer."""
    responses = response_ids(session, {t.sample_id for t in targets})
    out: list[Target] = []
    skipped = 0
    for target in targets:
        ids = responses.get(target.sample_id, [])
        if len(ids) < 2:
            skipped += 1
            continue
        out.extend(Target(target.key, target.sample_id, order=shown, order_key=key) for shown, key in presentation_orders(ids, orders))
    return out, skipped


def response_ids(session: Session, sample_ids: set[int] | list[int]) -> dict[int, list[str]]:
    """Return sample id → its response ids in import order (samples without responses are absent)."""
    ids = sorted(set(sample_ids))
    out: dict[int, list[str]] = {}
    for start in range(0, len(ids), 500):
        for sid, key in session.exec(select(Response.sample_id, Response.key).where(Response.sample_id.in_(ids[start:start + 500]))
                                     .order_by(Response.sample_id, Response.position)).all():
            out.setdefault(sid, []).append(key)
    return out


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
    judged = judging(task)
    targets = [Target(judged.target.key(target_id), sample_id) for target_id, sample_id in judged.select(session, where)]
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
                           "responses": [], "steps": [], "_contexts": {}, "_claims": {}, "_steps": {}}
        for c in session.exec(select(Context).where(Context.sample_id.in_(chunk), Context.active).order_by(Context.sample_id, Context.rank)).all():
            entry = {"rank": c.rank, "text": c.text, "doc_id": c.doc_id or ""}
            items[c.sample_id]["contexts"].append(entry)
            items[c.sample_id]["_contexts"][c.id] = entry
        for c in session.exec(select(Claim).where(Claim.sample_id.in_(chunk), Claim.active).order_by(Claim.sample_id, Claim.index)).all():
            entry = {"index": c.index, "text": c.text}
            items[c.sample_id]["claims"].append(entry)
            items[c.sample_id]["_claims"][c.id] = entry
        for r in session.exec(select(Response).where(Response.sample_id.in_(chunk)).order_by(Response.sample_id, Response.position)).all():
            entry = {"position": r.position + 1, "id": r.key, "text": r.text, "model": r.model or ""}
            items[r.sample_id]["responses"].append(entry)
        for st in session.exec(select(Step).where(Step.sample_id.in_(chunk), Step.active).order_by(Step.sample_id, Step.index)).all():
            entry = row_entry(st)
            items[st.sample_id]["steps"].append(entry)
            items[st.sample_id]["_steps"][st.id] = entry
    for item in items.values():  # a trajectory judge's view of every step (trajectories.fit)
        item.update(trajectory_fields(item["steps"]))
    return items


def item_for(target: Target, samples: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Return the template fields of one target."""
    base = samples[target.sample_id]
    item = {k: v for k, v in base.items() if not k.startswith("_")}
    item.update(target_kind(target.key).fields(target.part_id, base))
    if target.order is not None:
        by_id = {r["id"]: r for r in base["responses"]}
        item["responses"] = [dict(by_id[key], position=i + 1) for i, key in enumerate(target.order)]
    return item


def winner_position(responses: list[dict[str, Any]], value: str) -> str:
    """Return a pairwise value as the position ("1", "2"…) of its response among `responses` as shown, "tie", or "" if neither."""
    if value == TIE:
        return TIE
    return next((str(r["position"]) for r in responses if r["id"] == value), "")


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
        example = item_for(Target(row.target_key, row.sample_id), samples)
        example.update(verdict=row.value, rationale=row.rationale, winner=winner_position(example["responses"], row.value))
        examples.append(example)
    return {"task": task_fields(session, task), "examples": examples}

