"""Golden sets: named, versioned, hashed lists of a dataset's samples with their gold (docs/loop.md, "Golden sets").

A golden set is a name per dataset; each version is immutable: the list of its members (samples)
with their gold at the time, and the sha256 of that list (`canonical_items`, `items_hash`). A
member's life is a `GoldenMember` row: the version it joined (`added_in`), left (`retired_in`)
and became an anchor in (`anchor_in`; anchors are never retired), and the production trace it
came from. The members of version v are those with `added_in <= v` and no `retired_in <= v`, so
an old version's membership never changes when a refresh makes a new one.

- `create_golden` (`calibrate golden create`): version 1 from a split or a WHERE;
- `show_golden`, `list_golden`, `golden_status`: what a version holds, how old and how renewed;
- `golden_scope` (`--golden NAME[@v]` of report, gate, compare, estimate, alt-test): the
  members' sample ids and the citation {name, version, hash} every decision carries;
- `refresh_golden`: the next version by the rule of `stats.refresh` (anchors kept, the oldest of
  over-represented strata retired, production drawn by largest remainder), the new members
  queued to two experts each;
- `golden_drift`: the version against production (`stats.drift`): categorical fields, lengths,
  the question text, and the judge's agreement on audit labels vs on the golden set;
- `retained_vs_new`: the judge's kappa on retained vs new members (after a refresh).

Few-shot examples: a current member is refused as an example (judges/versions.py), a sample
that is an example of any prompt version is refused by `create_golden` and never drawn by a
refresh, so no version a golden set evaluates has seen its items. Production's samples can be
examples, and a former member can become one: the judge's figures (`golden_drift --judge`,
`retained_vs_new`) leave out every pair whose target is an example of the judge's prompt version
and count them (`n_fewshot`), by the report's rule (`calibrate.calibration.fewshot_keys`).
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from calibrate import lookup
from calibrate.calibration import fewshot_keys, stream_assignments, stream_labels
from calibrate.db import read_frame
from calibrate.errors import GoldenError, NotFound
from calibrate.gold import gold_frame
from calibrate.models import (
    EXTRACTION,
    LABEL_KINDS,
    Assignment,
    Claim,
    Context,
    Dataset,
    FewShot,
    GoldenMember,
    GoldenSet,
    GoldenVersion,
    Judge,
    Label,
    Sample,
    Task,
    User,
    Verdict,
    utcnow,
)
from calibrate.reasons import Reason
from calibrate.stats import drift as drift_stats
from calibrate.stats import refresh as refresh_stats
from calibrate.task_values import format_number
from calibrate.where import WHERE_MAX, Where, metadata_value, parse, select_ids

NAME_MAX = 100
MAX_AGE_DAYS = 90
MIN_RENEWAL = 0.2
EXPERTS_PER_ITEM = 2
FIELDS_MAX = WHERE_MAX  # the dataset page's drift fields: as long as a WHERE
CHUNK = 500  # ids per IN list (SQLite's parameter limit)
ALPHA = 0.05  # the family-wise level of `golden drift`'s Holm decision


# --------------------------------------------------------------------------- names and WHERE


def parse_ref(ref: str) -> tuple[str, int | None]:
    """Return (name, version) of `NAME[@v]` (version None: the latest)."""
    text = (ref or "").strip()
    name, sep, number = text.rpartition("@") if "@" in text else (text, "", "")
    if sep and not (number.isascii() and number.isdigit() and 0 < int(number) < 10**9):
        raise GoldenError(Reason("golden_ref_shape", ref=text))
    check_name(name)
    return name, (int(number) if sep else None)


def check_name(name: str) -> str:
    """Refuse a name that is empty, too long, multi-line or contains '@'."""
    if not name or len(name) > NAME_MAX or "@" in name or not name.isprintable() or name != name.strip():
        raise GoldenError(Reason("golden_name_invalid", name=name, limit=NAME_MAX))
    return name


def stratum_of(meta: Any, field: str | None) -> str:
    """Return a sample's stratum under `metadata.PATH` as text ("" when absent or no field)."""
    if not field:
        return ""
    value = metadata_value(meta, field.removeprefix("metadata."))
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def parse_where(where: str, option: str = "--where") -> Where:
    """Return a parsed WHERE (calibrate/where.py's grammar); GoldenError naming the term and `option` when it does not parse."""
    return parse(where, option=option, error=GoldenError)


def where_samples(session: Session, dataset: Dataset, where: str | Where, *, now: datetime | None = None) -> list[int]:
    """Return the ids of the dataset's samples matching WHERE (calibrate/where.py's grammar), in id order."""
    return select_ids(session, dataset, where, now=now, error=GoldenError)


# --------------------------------------------------------------------------- gold and hash


def _gold_by_sample(session: Session, sample_ids: list[int]) -> dict[int, dict[str, dict[str, Any]]]:
    """Return per sample {task: {target: gold}} by the one gold rule; target "" (sample), "claim N", "context N"."""
    if not sample_ids:
        return {}
    wanted = set(sample_ids)
    tasks = {t.id: t for t in session.exec(select(Task)) if t.kind != EXTRACTION}
    query = (sa_select(Label.task_id, Label.target_key, Label.sample_id, Label.value, Label.adjudicated, Label.stale,
                       Label.updated_at, Label.id).join(Sample, Sample.id == Label.sample_id)
             .where(Sample.dataset_id == session.get(Sample, sample_ids[0]).dataset_id))
    labels = read_frame(session, query, ["task_id", "target_key", "sample_id", "value", "adjudicated", "stale",
                                         "updated_at", "label_id"])
    labels = labels[labels["sample_id"].isin(wanted)].astype({"adjudicated": bool, "stale": bool})
    names = _target_names(session, wanted)
    out: dict[int, dict[str, dict[str, Any]]] = {sid: {} for sid in sample_ids}
    for task_id, part in labels.groupby("task_id"):
        task = tasks.get(int(task_id))
        if task is None:
            continue
        gold = gold_frame(part.drop(columns="task_id").reset_index(drop=True), task.kind)
        for key, sid, value in zip(gold["target_key"], gold["sample_id"], gold["gold"], strict=True):
            if value is not None and not (isinstance(value, float) and math.isnan(value)) and task.kind not in LABEL_KINDS:
                value = format_number(float(value))
            elif isinstance(value, float) and math.isnan(value):
                value = None
            out[int(sid)].setdefault(task.name, {})[names.get(key, key)] = value
    return out


def _target_names(session: Session, sample_ids: set[int]) -> dict[str, str]:
    """Return target key → the portable name of the target within its sample ("" for the sample itself)."""
    names: dict[str, str] = {f"sample:{sid}": "" for sid in sample_ids}
    ordered = sorted(sample_ids)
    for start in range(0, len(ordered), CHUNK):
        part = ordered[start:start + CHUNK]
        for cid, index in session.execute(sa_select(Claim.id, Claim.index).where(col(Claim.sample_id).in_(part))):
            names[f"claim:{cid}"] = f"claim {index}"
        for cid, rank in session.execute(sa_select(Context.id, Context.rank).where(col(Context.sample_id).in_(part))):
            names[f"context:{cid}"] = f"context {rank}"
    return names


def canonical_items(items: list[dict]) -> bytes:
    """Return the bytes the hash is taken over: the items sorted by sample id, as compact, key-sorted UTF-8 JSON.

    Each item is {"sample_id": external id, "anchor", "added_in", "source_trace_id", "content": the
    sample's content hash, "gold": {task: {target: value}}} — no database ids and no times, so the
    same content hashes the same in any database.
    """
    ordered = sorted(items, key=lambda item: item["sample_id"])
    return json.dumps(ordered, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def items_hash(items: list[dict]) -> str:
    """Return the sha256 (hex) of `canonical_items(items)`."""
    return hashlib.sha256(canonical_items(items)).hexdigest()


# --------------------------------------------------------------------------- reading


def find_golden(session: Session, dataset: Dataset, name: str) -> GoldenSet:
    """Return the dataset's golden set by name (NotFound naming the existing ones)."""
    found = session.exec(select(GoldenSet).where(GoldenSet.dataset_id == dataset.id, GoldenSet.name == name)).first()
    if found is None:
        names = sorted(session.exec(select(GoldenSet.name).where(GoldenSet.dataset_id == dataset.id)).all())
        raise NotFound(Reason("golden_unknown", name=name, dataset=dataset.name, names=", ".join(names) or "none"))
    return found


def find_version(session: Session, golden: GoldenSet, number: int | None) -> GoldenVersion:
    """Return version `number` of the set (the latest when None)."""
    query = select(GoldenVersion).where(GoldenVersion.golden_set_id == golden.id)
    if number is None:
        found = session.exec(query.order_by(col(GoldenVersion.number).desc())).first()
    else:
        found = session.exec(query.where(GoldenVersion.number == number)).first()
    if found is None:
        latest = session.exec(select(GoldenVersion.number).where(GoldenVersion.golden_set_id == golden.id)
                              .order_by(col(GoldenVersion.number).desc())).first()
        raise NotFound(Reason("golden_no_version", name=golden.name, version=number, latest=latest or 0))
    return found


def members_of(session: Session, golden: GoldenSet, number: int) -> list[GoldenMember]:
    """Return the members of version `number` (joined by then, not retired by then), in sample id order."""
    rows = session.exec(select(GoldenMember).where(GoldenMember.golden_set_id == golden.id,
                                                   GoldenMember.added_in <= number).order_by(GoldenMember.sample_id))
    return [m for m in rows if m.retired_in is None or m.retired_in > number]


def _resolve(session: Session, dataset_name: str, ref: str) -> tuple[Dataset, GoldenSet, GoldenVersion]:
    dataset = lookup.dataset(session, dataset_name)
    name, number = parse_ref(ref)
    golden = find_golden(session, dataset, name)
    return dataset, golden, find_version(session, golden, number)


def citation(golden: GoldenSet, version: GoldenVersion) -> dict:
    """Return what a decision cites: {name, version, hash}."""
    return {"name": golden.name, "version": version.number, "hash": version.hash}


def golden_scope(session: Session, dataset_name: str, ref: str) -> tuple[frozenset[int], dict]:
    """Return the sample ids of `NAME[@v]`'s members and the citation every decision made on them carries.

    The citation is {name, version, hash, n_items, gold_changed}: `gold_changed` counts the
    members whose gold now differs from the version's (labels added, changed or adjudicated since;
    the report uses today's gold, so a non-zero count says the pinned version's answer may differ).
    """
    _dataset, golden, version = _resolve(session, dataset_name, ref)
    members = members_of(session, golden, version.number)
    ids = [m.sample_id for m in members]
    now = _gold_by_sample(session, ids)
    then = {item["sample_id"]: item["gold"] for item in version.items}
    external = _external_ids(session, ids)
    changed = sum(1 for sid in ids if now.get(sid, {}) != then.get(external[sid], {}))
    return frozenset(ids), {**citation(golden, version), "n_items": len(ids), "gold_changed": changed}


def _external_ids(session: Session, ids: list[int]) -> dict[int, str]:
    wanted = set(ids)
    return {sid: ext for sid, ext in session.execute(sa_select(Sample.id, Sample.external_id)) if sid in wanted}


def show_golden(session: Session, dataset_name: str, ref: str) -> dict:
    """Return `golden show NAME[@v] --json`: the version, its hash and every member (labelled or not)."""
    dataset, golden, version = _resolve(session, dataset_name, ref)
    members = members_of(session, golden, version.number)
    ids = [m.sample_id for m in members]
    external = _external_ids(session, ids)
    gold = _gold_by_sample(session, ids)
    items = [{"sample_id": external[m.sample_id], "anchor": m.anchor_in is not None and m.anchor_in <= version.number,
              "labelled": _labelled(gold.get(m.sample_id, {})), "added_in": m.added_in, "retired_in": m.retired_in,
              "source_trace_id": m.source_trace_id} for m in members]
    items.sort(key=lambda item: item["sample_id"])
    return {"dataset": dataset.name, "name": golden.name, "version": version.number, "hash": version.hash,
            "created_at": _iso(version.created_at), "n_items": len(items), "params": version.params, "items": items}


def _labelled(gold: dict) -> bool:
    return any(value is not None for targets in gold.values() for value in targets.values())


def _iso(moment: datetime) -> str:
    return _aware(moment).isoformat(timespec="seconds")


def list_golden(session: Session, dataset_name: str) -> list[dict]:
    """Return the dataset's golden sets: name, latest version, its hash, members and when it was made."""
    dataset = lookup.dataset(session, dataset_name)
    out = []
    for golden in session.exec(select(GoldenSet).where(GoldenSet.dataset_id == dataset.id).order_by(GoldenSet.name)):
        version = find_version(session, golden, None)
        out.append({"name": golden.name, "version": version.number, "hash": version.hash,
                    "n_items": len(version.items), "created_at": _iso(version.created_at)})
    return out


def golden_status(session: Session, dataset_name: str, name: str, *, max_age: int = MAX_AGE_DAYS,
                  min_renewal: float = MIN_RENEWAL, strata: str | None = None, now: datetime | None = None) -> dict:
    """Return `golden status --json`: version, created_at, age_days, n_items, n_labelled, n_anchor,
    renewed_share_90d, strata, stale.

    `age_days`: days since the latest version was made. `renewed_share_90d`: the share of its
    members added by a version made in the last 90 days (version 1 included: a new set is all
    new). `stale`: older than `max_age` days, or less than `min_renewal` of it added in the last
    `max_age` days. `strata` counts the members per value of `strata` (default: the field of the
    last refresh; {} when none).
    """
    if max_age < 1 or not 0 <= min_renewal <= 1:
        raise GoldenError(Reason("golden_status_options"))
    dataset = lookup.dataset(session, dataset_name)
    golden = find_golden(session, dataset, check_name(name))
    version = find_version(session, golden, None)
    now = now or utcnow()
    members = members_of(session, golden, version.number)
    made = {v.number: _aware(v.created_at) for v in session.exec(select(GoldenVersion)
                                                                  .where(GoldenVersion.golden_set_id == golden.id))}

    def renewed(days: int) -> float:
        since = now - timedelta(days=days)
        return sum(1 for m in members if made[m.added_in] >= since) / len(members) if members else 0.0

    ids = [m.sample_id for m in members]
    gold = _gold_by_sample(session, ids)
    field = strata or version.params.get("strata")
    counts: dict[str, int] = {}
    if field:
        metas = dict(session.execute(sa_select(Sample.id, Sample.meta).where(Sample.dataset_id == dataset.id)).all())
        for sid in ids:
            key = stratum_of(metas.get(sid), field)
            counts[key] = counts.get(key, 0) + 1
    age = (now - _aware(version.created_at)).total_seconds() / 86400
    return {"version": version.number, "created_at": _iso(version.created_at), "age_days": round(age, 2),
            "n_items": len(members), "n_labelled": sum(1 for sid in ids if _labelled(gold.get(sid, {}))),
            "n_anchor": sum(1 for m in members if m.anchor_in is not None),
            "renewed_share_90d": round(renewed(90), 4), "strata": dict(sorted(counts.items())),
            "stale": bool(age > max_age or renewed(max_age) < min_renewal)}


# --------------------------------------------------------------------------- writing


def _fewshot_samples(session: Session, dataset: Dataset) -> set[int]:
    rows = session.execute(sa_select(FewShot.sample_id).join(Sample, Sample.id == FewShot.sample_id)
                           .where(Sample.dataset_id == dataset.id)).all()
    return {sid for (sid,) in rows}


def _trace_id(meta: Any) -> str | None:
    value = metadata_value(meta, "trace_id")
    return str(value)[:200] if value is not None else None


def _snapshot(session: Session, golden: GoldenSet, number: int) -> list[dict]:
    members = members_of(session, golden, number)
    ids = [m.sample_id for m in members]
    external = _external_ids(session, ids)
    gold = _gold_by_sample(session, ids)
    # What each member says (the sha256 of its record, `sample.content_hash`): the hash covers the content judged, so
    # a sample changed by an --update import changes the hash of the next version that holds it.
    content: dict[int, str] = {}
    for start in range(0, len(ids), CHUNK):
        part = ids[start:start + CHUNK]
        content.update(session.execute(sa_select(Sample.id, Sample.content_hash).where(col(Sample.id).in_(part))).all())
    return [{"sample_id": external[m.sample_id], "anchor": m.anchor_in is not None and m.anchor_in <= number,
             "added_in": m.added_in, "source_trace_id": m.source_trace_id, "content": content[m.sample_id],
             "gold": gold.get(m.sample_id, {})}
            for m in members]


def _write_version(session: Session, golden: GoldenSet, number: int, params: dict, user: User | None) -> GoldenVersion:
    session.flush()
    items = sorted(_snapshot(session, golden, number), key=lambda item: item["sample_id"])
    version = GoldenVersion(golden_set_id=golden.id, number=number, hash=items_hash(items), items=items, params=params,
                            user_id=user.id if user is not None else None)
    session.add(version)
    session.flush()
    return version


def create_golden(session: Session, dataset_name: str, name: str, *, split: str | None = None, where: str | None = None,
                  user: User | None = None) -> dict:
    """Create golden set `name`, version 1: the dataset's samples of `split` (or matching WHERE; both: both; on a dataset
    without splits, such as production traces, neither: every sample, and `split` is refused).

    Refused when the name exists on the dataset, when nothing matches, and when a chosen sample is
    a few-shot example of a prompt version (a judge must never be evaluated on its own examples).
    """
    dataset = lookup.dataset(session, dataset_name)
    check_name(name)
    if session.exec(select(GoldenSet).where(GoldenSet.dataset_id == dataset.id, GoldenSet.name == name)).first():
        raise GoldenError(Reason("golden_exists", name=name, dataset=dataset.name))
    rows = session.execute(sa_select(Sample.id, Sample.split, Sample.meta, Sample.external_id)
                           .where(Sample.dataset_id == dataset.id).order_by(Sample.id)).all()
    # Production traces have no split: there, --split is refused (it could only match nothing), and no selection is
    # every sample; a dataset with splits still needs one (a golden set of train and dev too is a mistake).
    splits = any(r.split is not None for r in rows)
    if split is not None and not splits:
        raise GoldenError(Reason("golden_no_splits", dataset=dataset.name, split=split))
    if split is None and where is None and splits:
        raise GoldenError(Reason("golden_no_selection"))
    chosen = [r for r in rows if split is None or r.split == split]
    if where is not None:
        matching = set(where_samples(session, dataset, where))
        chosen = [r for r in chosen if r.id in matching]
    if not chosen:
        raise GoldenError(Reason("golden_nothing_chosen", dataset=dataset.name,
                                 selection=" & ".join(s for s in (split and f"split={split}", where) if s)))
    examples = _fewshot_samples(session, dataset) & {r.id for r in chosen}
    if examples:
        names = sorted(r.external_id for r in chosen if r.id in examples)
        raise GoldenError(Reason("golden_fewshot_members", count=len(names), samples=", ".join(names[:10])))
    golden = GoldenSet(dataset_id=dataset.id, name=name)
    session.add(golden)
    session.flush()
    session.add_all([GoldenMember(golden_set_id=golden.id, sample_id=r.id, added_in=1, source_trace_id=_trace_id(r.meta))
                     for r in chosen])
    version = _write_version(session, golden, 1, {"made_by": "create", "split": split, "where": where}, user)
    return {"dataset": dataset.name, "name": name, "version": 1, "hash": version.hash, "n_items": len(chosen)}


def _experts(session: Session) -> list[User]:
    return list(session.exec(select(User).where(col(User.active).is_(True), User.role == "annotator")
                             .order_by(User.username)))


def queue_for_experts(session: Session, sample_ids: list[int], *, seed: int) -> dict:
    """Give each new member to two experts (active annotators), spreading the load; open slots when fewer exist.

    Returns {"experts": [usernames], "assignments": n, "open_slots": n, "items": n, "per_item": 2,
    "already_assigned": n (assignments the items had: fewer are added), "experts_available": n (active
    annotators)}: open slots (no user) are claimed by any two annotators, so the agreement is measured
    either way.
    """
    experts = _experts(session)
    existing: dict[int, list[Assignment]] = {}
    already = 0
    for assignment in session.exec(select(Assignment).where(col(Assignment.sample_id).in_(sample_ids or [-1]))):
        existing.setdefault(assignment.sample_id, []).append(assignment)
    rng = np.random.default_rng([seed, 26])
    load = np.zeros(len(experts), dtype=np.int64)
    added = slots = 0
    for sid in sample_ids:
        present = existing.get(sid, [])
        need = EXPERTS_PER_ITEM - len(present)
        already += min(len(present), EXPERTS_PER_ITEM)
        if need <= 0:
            continue
        taken = {a.user_id for a in present}
        if len(experts) >= EXPERTS_PER_ITEM:
            order = np.lexsort((rng.random(len(experts)), load))
            picks = [int(i) for i in order if experts[int(i)].id not in taken][:need]
            for i in picks:
                session.add(Assignment(sample_id=sid, user_id=experts[i].id, status="pending"))
                load[i] += 1
                added += 1
        else:
            for _ in range(need):
                session.add(Assignment(sample_id=sid, user_id=None, status="pending"))
                slots += 1
    return {"experts": [u.username for u in experts] if len(experts) >= EXPERTS_PER_ITEM else [],
            "assignments": added, "open_slots": slots, "items": len(sample_ids), "per_item": EXPERTS_PER_ITEM,
            "already_assigned": already, "experts_available": len(experts)}


def refresh_golden(session: Session, dataset_name: str, name: str, *, source: str, renew: float = 0.2,
                   anchor_share: float = 0.5, strata: str | None = None, seed: int = 0, user: User | None = None,
                   now: datetime | None = None) -> dict:
    """Make the next version of `name` by the refresh rule (calibrate.stats.refresh.refresh_plan).

    Anchors (kept, topped up to `anchor_share`) never retire; ceil(renew · N) other members retire,
    oldest first within the strata most over-represented against production (`source`: a WHERE);
    as many production samples join, by largest-remainder allocation to production's stratum
    shares, never a sample that is or was a member or is a few-shot example. The new members are
    queued to two experts each (`queue_for_experts`) and count as labelled once their gold exists.
    """
    if not 0 < renew <= 1 or not 0 <= anchor_share < 1:
        raise GoldenError(Reason("golden_refresh_options", renew=renew, anchor_share=anchor_share))
    if strata is not None and not (strata.startswith("metadata.") and len(strata) > len("metadata.")):
        raise GoldenError(Reason("golden_strata_field", field=strata))
    production_where = parse_where(source, "--from")
    dataset = lookup.dataset(session, dataset_name)
    golden = find_golden(session, dataset, check_name(name))
    latest = find_version(session, golden, None)
    number = latest.number + 1
    members = members_of(session, golden, latest.number)
    ever = {m.sample_id for m in session.exec(select(GoldenMember).where(GoldenMember.golden_set_id == golden.id))}
    metas = dict(session.execute(sa_select(Sample.id, Sample.meta).where(Sample.dataset_id == dataset.id)).all())
    production = where_samples(session, dataset, production_where, now=now)
    excluded = ever | _fewshot_samples(session, dataset)
    try:
        plan = refresh_stats.refresh_plan(
            [stratum_of(metas[m.sample_id], strata) for m in members], [m.added_in for m in members],
            [stratum_of(metas[sid], strata) for sid in production], renew=renew, anchor_share=anchor_share,
            anchor=[m.anchor_in is not None for m in members], exclude=[sid in excluded for sid in production], seed=seed)
    except ValueError as exc:
        raise GoldenError(Reason("golden_refresh_impossible", detail=str(exc))) from None
    for i, member in enumerate(members):
        if plan.anchors[i] and member.anchor_in is None:
            member.anchor_in = number
            session.add(member)
    for i in plan.retired:
        members[int(i)].retired_in = number
        session.add(members[int(i)])
    new_ids = [production[int(i)] for i in plan.added]
    session.add_all([GoldenMember(golden_set_id=golden.id, sample_id=sid, added_in=number,
                                  source_trace_id=_trace_id(metas[sid])) for sid in new_ids])
    queued = queue_for_experts(session, new_ids, seed=seed)
    queue_reasons = [Reason("golden_queue_why", count=queued["items"], per_item=queued["per_item"],
                            assignments=queued["assignments"], experts=", ".join(queued["experts"])) if queued["experts"]
                     else Reason("golden_queue_open", experts_available=queued["experts_available"],
                                 per_item=queued["per_item"], open_slots=queued["open_slots"])]
    if queued["already_assigned"]:
        queue_reasons.append(Reason("golden_queue_already", already=queued["already_assigned"]))
    params = {"made_by": "refresh", "from": source, "renew": renew, "anchor_share": anchor_share, "strata": strata,
              "seed": seed, "allocation": plan.allocation, "target": plan.target, "queue": queued,
              "reasons": [note.to_dict() for note in plan.notes]}
    version = _write_version(session, golden, number, params, user)
    return {"dataset": dataset.name, "name": golden.name, "version": number, "hash": version.hash,
            "previous": citation(golden, latest), "n_items": len(version.items), "retired": int(plan.retired.size),
            "added": len(new_ids), "anchors": int(plan.anchors.sum()), "allocation": plan.allocation,
            "target": {k: round(v, 4) for k, v in plan.target.items()}, "queue": queued,
            "queue_notes": [str(r) for r in queue_reasons], "queue_reasons": [r.to_dict() for r in queue_reasons],
            "notes": [str(n) for n in plan.notes], "reasons": [n.to_dict() for n in plan.notes]}


# --------------------------------------------------------------------------- drift and the judge


def top_retrieval_score(meta: Any) -> float | None:
    """Return the score of the first-ranked retrieved document, or None.

    Trace imports keep `retrieval.documents.<i>.document.score` as `metadata.retrieval_scores`,
    a list aligned with the contexts in retrieval order (docs/formats.md); the first finite
    number is the top-ranked document's, whether the retriever scores similarity or distance.
    """
    scores = meta.get("retrieval_scores") if isinstance(meta, dict) else None
    for score in scores if isinstance(scores, list) else []:
        if isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score):
            return float(score)
    return None


def _numeric_fields(session: Session, ids: list[int]) -> dict[str, list[float | None]]:
    wanted = set(ids)
    rows = {sid: (q, a, meta) for sid, q, a, meta in session.execute(sa_select(Sample.id, Sample.question, Sample.answer,
                                                                                Sample.meta)) if sid in wanted}
    contexts: dict[int, int] = {}
    for sid, active in session.execute(sa_select(Context.sample_id, Context.active)):
        if sid in wanted and active:
            contexts[sid] = contexts.get(sid, 0) + 1
    return {"question_length": [float(len(rows[s][0])) for s in ids],
            "answer_length": [float(len(rows[s][1])) for s in ids],
            "n_contexts": [float(contexts.get(s, 0)) for s in ids],
            "top_retrieval_score": [top_retrieval_score(rows[s][2]) for s in ids]}


def golden_drift(session: Session, dataset_name: str, ref: str, *, against: str, fields: list[str] | None = None,
                 judge: str | None = None, task: str | None = None, seed: int = 0, n_permutations: int = 199,
                 now: datetime | None = None) -> dict:
    """Return `golden drift --json`: the version's samples against production's (`against`, a WHERE).

    Per categorical field (`fields`, metadata.PATH): `stats.drift.categorical_drift` (test, p,
    PSI, mde); numeric (question and answer length, number of contexts, and the top retrieval
    score when both sides carry `metadata.retrieval_scores`): KS and normalised
    Wasserstein; text (the question): the n-gram classifier's AUC and its permutation p. Holm's
    adjustment runs across every p of the comparison (`p_holm`), m = `n_fields`; each `mde` is
    at `alpha / m` (Holm's first step) and the text test runs at least
    `stats.drift.min_permutations(m)` permutations, so its p can fall below that level. With `judge` (and `task`, a
    categorical one): the judge's kappa on production's labelled samples (the audit) minus on the
    golden set, with its CI (`stats.drift.judge_drift`).
    """
    against_where = parse_where(against, "--against")
    dataset, golden, version = _resolve(session, dataset_name, ref)
    golden_ids = [m.sample_id for m in members_of(session, golden, version.number)]
    inside = set(golden_ids)
    production = [sid for sid in where_samples(session, dataset, against_where, now=now) if sid not in inside]
    if not production:
        raise GoldenError(Reason("golden_nothing_chosen", dataset=dataset.name, selection=against))
    metas = dict(session.execute(sa_select(Sample.id, Sample.meta).where(Sample.dataset_id == dataset.id)).all())
    ref_num, cur_num = _numeric_fields(session, golden_ids), _numeric_fields(session, production)
    if not (any(v is not None for v in ref_num["top_retrieval_score"]) and any(v is not None for v in cur_num["top_retrieval_score"])):
        del ref_num["top_retrieval_score"], cur_num["top_retrieval_score"]  # compared only when both sides carry scores
    # Holm decides across every field: the first step is at ALPHA / m, so the categorical MDE is
    # computed there (the shift the decision, not the lone test, sees with 80 % power) and the
    # permutation tests get enough permutations for their p-value floor to sit below it.
    family = len(fields or []) + len(ref_num) + 1
    permutations = drift_stats.min_permutations(family, alpha=ALPHA, requested=n_permutations)
    out: dict[str, Any] = {"dataset": dataset.name, "golden": citation(golden, version), "against": against,
                           "n_golden": len(golden_ids), "n_production": len(production), "alpha": ALPHA,
                           "n_fields": family, "fields": {}}
    for field in fields or []:
        if not (field.startswith("metadata.") and len(field) > len("metadata.")):
            raise GoldenError(Reason("golden_strata_field", field=field))
        path = field.removeprefix("metadata.")
        values = [[metadata_value(metas[s], path) for s in ids] for ids in (golden_ids, production)]
        values = [[None if v is None else (v if isinstance(v, str) else json.dumps(v)) for v in vs] for vs in values]
        out["fields"][field] = {"kind": "categorical",
                                **drift_stats.categorical_drift(*values, alpha=ALPHA / family, seed=seed,
                                                                n_permutations=max(2000, permutations)).to_dict()}
    for field in ref_num:
        out["fields"][field] = {"kind": "numeric", **drift_stats.numeric_drift(ref_num[field], cur_num[field],
                                                                               n_permutations=n_permutations,
                                                                               seed=seed).to_dict()}
    questions = dict(session.execute(sa_select(Sample.id, Sample.question).where(Sample.dataset_id == dataset.id)).all())
    out["fields"]["question"] = {"kind": "text", **drift_stats.text_drift(
        [questions[s] for s in golden_ids], [questions[s] for s in production], n_permutations=permutations,
        seed=seed).to_dict()}
    names = list(out["fields"])
    adjusted = drift_stats.holm_adjust([out["fields"][n].get("p_value") for n in names])
    for name, p in zip(names, adjusted, strict=True):
        out["fields"][name]["p_holm"] = p
    if judge is not None:
        # On a dataset with production queues production's labels are the audit's only (docs/production.md).
        streams = stream_assignments(session, dataset)
        audit = None if streams.empty else streams
        out["judge"] = _judge_drift(session, dataset, judge, task, golden_ids, production, seed, streams=audit,
                                    note=LABELS_NOTES["all" if audit is None else "audit"])
        if version.number > 1:
            out["retained_vs_new"] = retained_vs_new(session, dataset_name, ref, judge=judge, task=task, seed=seed)
    return out


# Both kappas of a judge drift are unweighted: the golden set's members are no random draw, so its kappa cannot be
# weighted to stand for the traffic, and weighting only production's side would make the two describe different things.
UNWEIGHTED = ("Kappa is unweighted on both sides, as on the golden set, whose members are no random draw: the two kappas "
              "describe the labelled samples alike, not all of production's traffic.")
LABELS_NOTES = {
    "audit": ("Production's side uses the audit labels only (an expert's label on a sample she has an audit assignment "
              "for, and adjudications of such samples): triage labels were chosen on purpose. "),
    "all": "This dataset has no production queues: every label on production's samples counts. ",
    "members": "Both sides are golden members, each with its gold from all its labels. ",
}


def _pairs(session: Session, dataset: Dataset, judge: Judge, task: Task, ids: list[int], counted: list[str], *,
           fewshot: set[str] = frozenset(), streams: pd.DataFrame | None = None) -> tuple[pd.DataFrame, int, int]:
    """Return the judge's (gold, verdict) pairs on the samples `ids`, sorted by target, and how many were left out:
    (pairs, with an excluded label, as a few-shot example).

    The gold is the one rule's (calibrate/gold.py) over the samples' labels; with `streams` (the dataset's stream
    assignments) over the audit's labels only (`calibrate.calibration.stream_labels`). A pair whose target key is one
    of `fewshot` (the judge's prompt version's few-shot examples: the judge saw it with its answer) is left out and
    counted first, whatever its labels, as the report's rule does (`calibration/sections.join_verdicts`); a pair
    whose gold or verdict is not one of the `counted` labels (an excluded label such as `not_applicable`) is left
    out and counted next. Each pair is counted once.
    """
    wanted = set(ids)
    labels = read_frame(session, sa_select(Label.target_key, Label.sample_id, User.username, Label.value, Label.adjudicated,
                                           Label.stale, Label.updated_at, Label.id)
                        .join(Sample, Sample.id == Label.sample_id).join(User, User.id == Label.annotator_id)
                        .where(Sample.dataset_id == dataset.id, Label.task_id == task.id),
                        ["target_key", "sample_id", "annotator", "value", "adjudicated", "stale", "updated_at", "label_id"])
    labels = labels[labels["sample_id"].isin(wanted)].astype({"adjudicated": bool, "stale": bool})
    if streams is not None:
        labels = stream_labels(labels, streams, "audit")
    gold = gold_frame(labels.reset_index(drop=True), task.kind)
    verdicts = read_frame(session, sa_select(Verdict.target_key, Verdict.sample_id, Verdict.value)
                          .join(Sample, Sample.id == Verdict.sample_id)
                          .where(Sample.dataset_id == dataset.id, Verdict.task_id == task.id, Verdict.judge_id == judge.id,
                                 Verdict.order_key == "", Verdict.sample_index == 0),
                          ["target_key", "sample_id", "verdict"])
    verdicts = verdicts[verdicts["sample_id"].isin(wanted) & verdicts["verdict"].notna()]
    both = gold[gold["gold"].notna()].merge(verdicts[["target_key", "verdict"]], on="target_key")
    both = both.sort_values(["sample_id", "target_key"], kind="stable").reset_index(drop=True)
    shown = both["target_key"].astype(str).isin(fewshot) if fewshot else pd.Series(False, index=both.index)
    usable = ~shown & both["gold"].isin(counted) & both["verdict"].isin(counted)
    return both[usable], int((~shown & ~usable).sum()), int(shown.sum())


def _categorical_task(session: Session, name: str | None) -> Task:
    if name is None:
        task = session.exec(select(Task).where(Task.name == "claim_support")).first()
    else:
        task = session.exec(select(Task).where(Task.name == name)).first()
    if task is None or task.kind != "categorical":
        raise GoldenError(Reason("golden_task_categorical", task=name or "claim_support"))
    return task


def _judge_drift(session: Session, dataset: Dataset, judge_name: str, task_name: str | None, first_ids: list[int],
                 second_ids: list[int], seed: int, *, note: str, streams: pd.DataFrame | None = None) -> dict:
    """Return the judge's kappa on `second_ids` minus on `first_ids` (stats.drift.judge_drift), unweighted.

    With `streams` the second side's gold comes from the audit's labels only (`labels` "audit"), else from all of
    them ("all"); `note` says whose labels and why (LABELS_NOTES). Pairs whose target is a few-shot example of the
    judge's prompt version (`n_fewshot`) and pairs with an excluded label (`n_excluded`) are left out and counted, both
    sides together, as everywhere else in calibrate (`_pairs`).
    """
    judge = lookup.judge(session, judge_name)
    task = _categorical_task(session, task_name)
    counted = [lab for lab in (task.labels or []) if lab not in set(task.excluded or [])]
    shown = fewshot_keys(session, judge)  # the report's rule: none for an imported judge
    first, n_first, shown_first = _pairs(session, dataset, judge, task, first_ids, counted, fewshot=shown)
    second, n_second, shown_second = _pairs(session, dataset, judge, task, second_ids, counted, fewshot=shown,
                                            streams=streams)
    found = drift_stats.judge_drift(first["gold"].tolist(), first["verdict"].tolist(), second["gold"].tolist(),
                                    second["verdict"].tolist(), labels=counted, seed=seed)
    return {"judge": judge.name, "task": task.name, "labels": "all" if streams is None else "audit", "weighted": False,
            "labels_note": note + UNWEIGHTED, "n_excluded": n_first + n_second, "n_fewshot": shown_first + shown_second,
            **{k: v.to_dict() for k, v in found.items()}}


def retained_vs_new(session: Session, dataset_name: str, ref: str, *, judge: str, task: str | None = None,
                    seed: int = 0) -> dict:
    """Return the judge's kappa on the version's new members minus on its retained ones, with the CI of the difference.

    `conclusion`: "inconclusive" when the interval spans 0 (or is undefined), else "lower" or
    "higher" (the new members' kappa against the retained ones').
    """
    dataset, golden, version = _resolve(session, dataset_name, ref)
    members = members_of(session, golden, version.number)
    retained = [m.sample_id for m in members if m.added_in < version.number]
    new = [m.sample_id for m in members if m.added_in == version.number]
    found = _judge_drift(session, dataset, judge, task, retained, new, seed, note=LABELS_NOTES["members"])
    kappa = found["kappa"]
    ci = kappa.get("ci")
    if ci is None or ci[0] is None or ci[0] <= 0 <= ci[1]:
        conclusion, reason = "inconclusive", Reason("interval_spans_zero")
    else:
        conclusion, reason = ("higher" if ci[0] > 0 else "lower"), None
    return {"golden": citation(golden, version), "judge": judge, "task": found["task"], "n_retained": len(retained),
            "n_new": len(new),
            **{key: found[key] for key in ("labels", "weighted", "labels_note", "n_excluded", "n_fewshot")},
            "kappa_new_minus_retained": kappa, "conclusion": conclusion,
            "note": str(reason) if reason else "", **({"reason": reason.to_dict()} if reason else {})}
