"""Sampling: choose what experts label, queue it for them, and optionally split it.

`sample_dataset` is the one entry point (`calibrate sample` calls it). It is seeded and
reproducible: the candidates are the dataset's samples sorted by external id, drawn in the
order of `numpy.random.default_rng(seed).permutation(N)`, so the same dataset, seed and options
take the same samples whatever the insertion order in the database and whatever assignments
already exist. Running it again adds nothing that is already there. The caller owns the
transaction and commits after it returns (nothing here commits; it flushes).

Rules and the reasons for them: docs/sampling.md.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from sqlmodel import Session, col, select

from calibrate import lookup
from calibrate.errors import SamplingError
from calibrate.ingest.allocation import allocate_strata, assignee_groups, controlled_rounding, largest_remainder
from calibrate.ingest.bulk import in_parts
from calibrate.models import SPLITS, Assignment, Dataset, Label, Sample, User, utcnow
from calibrate.reasons import Reason, join
from calibrate.where import metadata_value, select_ids

__all__ = [
    "MISSING", "PRIORITY_NEGATIVE", "PRIORITY_NORMAL", "SamplingError", "SamplingSummary",
    "parse_split_spec", "sample_dataset",
]

MISSING = "(missing)"  # the stratum of samples that lack the stratification field
PRIORITY_NEGATIVE = 0  # --negative-first: feedback −1 is served first (lower priority first)
PRIORITY_NORMAL = 1
STRATIFY_TOP_LEVEL = ("feedback", "split")


# --------------------------------------------------------------------------- summary


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else (plural or word + 's')}"


@dataclass
class SamplingSummary:
    """What one `sample_dataset` call did; `line()` is what the CLI prints."""

    dataset: str
    taken: int
    eligible: int
    assignments_added: int
    assignments_existing: int
    strata: dict[str, int]  # stratum → taken (empty when not stratified)
    negatives: int  # taken samples with feedback −1
    splits: dict[str, int]  # split → taken samples in it (empty when no split was asked for)
    overlap: int
    assignees: list[str]  # usernames assigned round-robin (empty: open slots)
    seed: int = 0
    requested: int | None = None  # n asked for (or computed from the fraction)
    fraction: float | None = None
    stratify_by: str | None = None
    negative_first: bool = False
    negatives_available: int = 0  # samples of the dataset with feedback −1
    splits_kept: int = 0  # taken samples that already had a split (never moved)
    slots_filled: int = 0  # open slots given to named annotators (counted in assignments_added)
    external_ids: list[str] = field(default_factory=list)  # taken samples, in queue order
    split_spec: str = ""  # the split asked for, as NAME=FRACTION,… (empty when none was)
    unsplit_labelled: int = 0  # with a split: labelled samples left out of the sample that still have no split
    where: str | None = None  # the WHERE the draw was among (None: the whole dataset)

    def warning(self) -> str:
        """Return the warning the CLI prints when `--split` left labelled samples without a split, else ""."""
        if not self.unsplit_labelled:
            return ""
        return (f"warning: --split split only the {self.taken} sampled samples; "
                f"{_plural(self.unsplit_labelled, 'other labelled sample')} of {self.dataset} still "
                f"{'has' if self.unsplit_labelled == 1 else 'have'} no split, so a report or dashboard on a split "
                f"leaves them out. To split every sample, run `calibrate sample --dataset {self.dataset} --fraction 1 "
                f"--seed {self.seed} --split {self.split_spec}` (splits already given are kept; it also queues "
                f"every sample for annotation)")

    def line(self) -> str:
        """Return a one-line description, e.g. for the CLI."""
        if self.requested is not None and self.requested > self.taken:
            head = f"sampled all {self.taken} samples of {self.dataset} (asked for {self.requested}; seed {self.seed}"
        else:
            head = f"sampled {self.taken} of {self.eligible} samples of {self.dataset} ("
            if self.fraction is not None:
                head += f"fraction {self.fraction:g}, "
            head += f"seed {self.seed}"
        details = [head]
        if self.where:
            details.append(f"among those matching {self.where}")
        if self.stratify_by:
            details.append(f"stratified by {self.stratify_by}: {_plural(len(self.strata), 'stratum', 'strata')}")
        if self.negative_first:
            details.append(f"negative feedback first: {self.negatives} of {self.negatives_available} taken")
        text = ", ".join(details) + ")"
        queued = f"; {_plural(self.assignments_added, 'assignment')} added"
        if self.assignments_existing:
            queued += f", {self.assignments_existing} already there"
        how = [f"overlap {self.overlap}"]
        if self.assignees:
            how.append(f"round-robin over {_plural(len(self.assignees), 'annotator')}")
            if self.slots_filled:
                how.append(f"{_plural(self.slots_filled, 'open slot')} filled")
        else:
            how.append("open slots")
        text += queued + " (" + ", ".join(how) + ")"
        if self.splits:
            text += "; splits " + ", ".join(f"{name} {count}" for name, count in self.splits.items())
            if self.splits_kept:
                text += f" ({self.splits_kept} kept)"
        return text


# --------------------------------------------------------------------------- split spec


def parse_split_spec(text: str) -> dict[str, float]:
    """Parse "train=0.2,dev=0.4,test=0.4" (or "train=20%,...") into {split: fraction}.

    Names are train, dev and test (a subset is fine, e.g. "dev=0.5,test=0.5"); each fraction
    must be > 0 and together they must sum to 1 (within 1e-6). Raise SamplingError otherwise.
    """
    if text is None or not str(text).strip():
        raise SamplingError(Reason("split_spec_empty"))
    parsed: dict[str, float] = {}
    for part in str(text).split(","):
        item = part.strip()
        name, sep, value = item.partition("=")
        name, value = name.strip().lower(), value.strip()
        if not item or not sep or not name or not value:
            raise SamplingError(Reason("split_spec_item", text=text, item=item))
        if name not in SPLITS:
            raise SamplingError(Reason("split_spec_unknown_name", text=text, name=name, splits=', '.join(SPLITS)))
        if name in parsed:
            raise SamplingError(Reason("split_spec_twice", text=text, name=name))
        percent = value.endswith("%")
        try:
            number = float(value[:-1].strip() if percent else value)
        except ValueError:
            raise SamplingError(Reason("split_spec_not_number", text=text, name=name, value=value)) from None
        parsed[name] = number / 100 if percent else number
    _split_fractions(parsed, source=str(text))
    return parsed


def _split_fractions(split: dict[str, float], *, source: str | None = None) -> dict[str, Fraction]:
    """Check a split spec and return exact fractions summing to 1, in the order train, dev, test."""
    where = Reason("split_spec_named", source=source) if source is not None else Reason("split_spec_given")
    if not split:
        raise SamplingError(Reason("split_spec_none", where=where))
    unknown = [name for name in split if name not in SPLITS]
    if unknown:
        raise SamplingError(Reason("split_spec_unknown", where=where, listed=', '.join(map(repr, unknown)),
                                   splits=', '.join(SPLITS)))
    exact: dict[str, Fraction] = {}
    for name in SPLITS:
        if name not in split:
            continue
        value = split[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise SamplingError(Reason("split_spec_fraction", where=where, name=name, value=value))
        exact[name] = Fraction(repr(float(value)))  # repr: 0.2 is 1/5, not the binary double
    total = sum(exact.values())
    if abs(total - 1) > Fraction(1, 10**6):
        shown = ", ".join(f"{name}={split[name]:g}" for name in exact)
        raise SamplingError(Reason("split_spec_sum", where=where, total=float(total), shown=shown))
    return {name: value / total for name, value in exact.items()}


# --------------------------------------------------------------------------- database helpers


def _assignees(session: Session, names: Sequence[str], overlap: int) -> list[User]:
    """Return the named users (deduplicated, sorted by username); all must exist and be active."""
    wanted = sorted({str(name).strip() for name in names if str(name).strip()})
    found = {user.username: user for user in session.exec(select(User).where(col(User.username).in_(wanted)))}
    unknown = [name for name in wanted if name not in found]
    inactive = [name for name in wanted if name in found and not found[name].active]
    if unknown or inactive:
        problems = []
        if unknown:
            problems.append(Reason("assign_unknown_users", count=len(unknown), names=", ".join(unknown)))
        if inactive:
            problems.append(Reason("assign_inactive_users", count=len(inactive), names=", ".join(inactive)))
        annotators = list(session.exec(
            select(User.username).where(col(User.active).is_(True), User.role == "annotator").order_by(User.username)))
        listing = ", ".join(annotators) if annotators else Reason("assign_no_annotators")
        raise SamplingError(Reason("assign_unknown_annotators", problems=join(problems), listing=listing))
    if len(wanted) < overlap:
        raise SamplingError(
            Reason("overlap_too_few_annotators", overlap=overlap, count=len(wanted),
                   wanted=', '.join(wanted)))
    return [found[name] for name in wanted]


@dataclass
class _Candidate:
    id: int
    external_id: str
    feedback: int | None
    split: str | None
    meta: Any
    stratum: str = ""
    draw: int = 0  # position in the seeded draw order
    split_draw: int = 0  # position in the seeded split order


def _stratum_name(value: Any) -> str:
    if value is None:
        return MISSING
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _metadata_fields(candidates: Sequence[_Candidate]) -> list[str]:
    fields: set[str] = set()
    for candidate in candidates:
        if isinstance(candidate.meta, dict):
            fields.update(str(key) for key in candidate.meta)
    return sorted(fields)


def _stratifier(spec: str, candidates: Sequence[_Candidate], dataset: str) -> tuple[str, Callable[[_Candidate], str]]:
    """Return the canonical field name and a function giving each candidate's stratum."""
    text = spec.strip()
    if text in STRATIFY_TOP_LEVEL:
        return text, lambda c: _stratum_name(getattr(c, text))
    for prefix in ("metadata.", "meta."):
        if text.startswith(prefix) and text[len(prefix):]:
            path = text[len(prefix):]
            return f"metadata.{path}", lambda c, path=path: _stratum_name(metadata_value(c.meta, path))
    fields = _metadata_fields(candidates)
    hint = Reason("stratify_did_you_mean", text=text) if text in fields else ""
    raise SamplingError(Reason("stratify_field_invalid", spec=spec, hint=hint,
                               fields=Reason("metadata_fields_of", dataset=dataset, fields=", ".join(fields)) if fields
                               else Reason("no_metadata", dataset=dataset)))


# --------------------------------------------------------------------------- sampling


def sample_dataset(session: Session, dataset: str, *, n: int | None = None, fraction: float | None = None, seed: int = 0,
                   stratify_by: str | None = None, negative_first: bool = False, overlap: int = 1,
                   assign: list[str] | None = None, split: dict[str, float] | None = None,
                   where: str | None = None) -> SamplingSummary:
    """Take a seeded sample of `dataset`, queue it for `overlap` annotators each, optionally split it.

    - exactly one of `n` (n larger than the dataset takes all of it, and the summary says so)
      or `fraction` (n = round(fraction × N), halves up, at least 1);
    - `stratify_by` "metadata.FIELD", "feedback" or "split": proportional allocation by
      largest remainder, every stratum at least one; a sample without the field is in "(missing)";
    - `negative_first`: feedback −1 first (within each stratum's allocation when stratified);
      their new assignments get priority 0, every other new assignment priority 1;
    - `assign`: usernames, each group of `overlap` of them in turn (every pair shares items,
      loads within one); without it, `overlap` open slots per sample (user None);
    - `split`: {split: fraction} for the taken samples that have none yet (existing splits
      are kept), by largest remainder over all taken samples, stratified like the draw;
    - `where`: draw only among the samples matching this WHERE (calibrate/where.py; `labelled`: a label of any
      task), refused when none does; `n`, `fraction` and the strata are of those.

    Nothing already there is added again. The caller commits; this only flushes.
    """
    _check_request(n, fraction, seed, overlap)
    seed = int(seed)
    split_fractions = _split_fractions(split) if split is not None else None
    session.flush()
    ds = lookup.dataset(session, dataset, hint=Reason("hint_import_samples"))
    users = _assignees(session, assign, overlap) if assign else []
    chosen = set(select_ids(session, ds, where, error=SamplingError, required=True)) if where is not None else None
    candidates = _candidates(session, ds, seed, with_metadata=stratify_by is not None, chosen=chosen)
    total = len(candidates)
    requested = n if n is not None else max(1, math.floor(Fraction(repr(float(fraction))) * total + Fraction(1, 2)))
    target = min(requested, total)
    field_name = _stratify(candidates, stratify_by, dataset) if stratify_by is not None else None
    members: dict[str, list[_Candidate]] = defaultdict(list)
    for candidate in candidates:
        members[candidate.stratum].append(candidate)
    names = sorted(members, key=lambda s: (s == MISSING, s))
    if target < total and len(names) > target:
        asked = f"n = {target}" if n is not None else f"fraction {fraction:g} of {total} samples gives n = {target}"
        raise SamplingError(Reason("stratify_too_few", field_name=field_name, asked=asked, count=len(names)))
    first_draw = {name: min(c.draw for c in members[name]) for name in names}  # seeded tie-break
    allocation = allocate_strata(target, {name: len(members[name]) for name in names}, first_draw)

    def queue_key(c: _Candidate) -> tuple[int, int]:
        return (0 if negative_first and c.feedback == -1 else 1, c.draw)

    taken: list[_Candidate] = []
    for name in names:
        taken.extend(sorted(members[name], key=queue_key)[: allocation[name]])
    taken.sort(key=queue_key)
    splits_kept, split_counts = _assign_splits(session, taken, names, split_fractions) if split_fractions is not None else (0, {})
    groups = assignee_groups(len(users), overlap, len(taken), seed) if users else []
    added, existing, filled = _queue(session, taken, users, groups, overlap, negative_first)
    session.flush()
    unsplit_labelled = _unsplit_labelled(session, ds.id, taken) if split_fractions is not None and len(taken) < total else 0
    return SamplingSummary(
        dataset=ds.name, taken=len(taken), eligible=total, assignments_added=added, assignments_existing=existing,
        strata={name: sum(1 for c in taken if c.stratum == name) for name in names} if field_name else {},
        negatives=sum(1 for c in taken if c.feedback == -1), splits=split_counts, overlap=overlap,
        assignees=[user.username for user in users], seed=seed, requested=requested, fraction=fraction,
        stratify_by=field_name, negative_first=negative_first,
        negatives_available=sum(1 for c in candidates if c.feedback == -1), splits_kept=splits_kept,
        slots_filled=filled, external_ids=[c.external_id for c in taken],
        split_spec=",".join(f"{name}={float(value):g}" for name, value in split_fractions.items()) if split_fractions else "",
        unsplit_labelled=unsplit_labelled, where=where,
    )


def _check_request(n: int | None, fraction: float | None, seed: int, overlap: int) -> None:
    """Refuse a request without exactly one of n and fraction, or with one of them, the seed or the overlap out of range."""
    if (n is None) == (fraction is None):
        raise SamplingError(Reason("sample_size_one"))
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise SamplingError(Reason("sample_n_invalid", n=n))
    if fraction is not None and (isinstance(fraction, bool) or not isinstance(fraction, int | float)
                                 or not math.isfinite(fraction) or not 0 < fraction <= 1):
        raise SamplingError(Reason("sample_fraction_invalid", fraction=fraction))
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise SamplingError(Reason("sample_seed_invalid", seed=seed))
    if isinstance(overlap, bool) or not isinstance(overlap, int) or overlap < 1:
        raise SamplingError(Reason("overlap_invalid", overlap=overlap))


def _candidates(session: Session, ds: Dataset, seed: int, *, with_metadata: bool,
                chosen: set[int] | None = None) -> list[_Candidate]:
    """Return the dataset's samples (of `chosen`, a WHERE's, when given) sorted by external id, each with its place in
    the seeded draw and split orders."""
    columns = [Sample.id, Sample.external_id, Sample.feedback, Sample.split]
    if with_metadata:
        columns.append(Sample.meta)
    rows = [row for row in session.exec(select(*columns).where(Sample.dataset_id == ds.id)).all()
            if chosen is None or row[0] in chosen]
    if not rows:
        raise SamplingError(Reason("dataset_no_samples", dataset=ds.name))
    candidates = sorted((_Candidate(row[0], row[1], row[2], row[3], row[4] if len(row) > 4 else None) for row in rows),
                        key=lambda c: c.external_id)
    for position, index in enumerate(np.random.default_rng(seed).permutation(len(candidates))):
        candidates[int(index)].draw = position
    for position, index in enumerate(np.random.default_rng([seed, 1]).permutation(len(candidates))):
        candidates[int(index)].split_draw = position
    return candidates


def _stratify(candidates: list[_Candidate], stratify_by: str, dataset: str) -> str:
    """Put each candidate in its stratum; return the field's name. Refuse a field no candidate has."""
    field_name, stratum_of = _stratifier(stratify_by, candidates, dataset)
    for candidate in candidates:
        candidate.stratum = stratum_of(candidate)
    if all(c.stratum == MISSING for c in candidates):
        if field_name.startswith("metadata."):
            fields = _metadata_fields(candidates)
            raise SamplingError(Reason("stratify_field_missing", dataset=dataset, field_name=field_name,
                                       fields=Reason("metadata_fields", fields=", ".join(fields)) if fields
                                       else Reason("no_metadata", dataset=dataset)))
        raise SamplingError(Reason("stratify_field_unset", dataset=dataset, field_name=field_name))
    return field_name


def _unsplit_labelled(session: Session, dataset_id: int, taken: list[_Candidate]) -> int:
    """Return how many labelled samples without a split the draw did not take (they stay in no split's view)."""
    taken_ids = {c.id for c in taken}
    labelled = session.exec(select(Label.sample_id).join(Sample, col(Sample.id) == col(Label.sample_id))
                            .where(Sample.dataset_id == dataset_id, col(Sample.split).is_(None)).distinct()).all()
    return sum(1 for sample_id in labelled if sample_id not in taken_ids)


def _assign_splits(session: Session, taken: list[_Candidate], strata: list[str],
                   fractions: dict[str, Fraction]) -> tuple[int, dict[str, int]]:
    """Give a split to the taken samples that have none; return (kept, counts per split)."""
    kept = sum(1 for c in taken if c.split is not None)
    names = list(fractions)
    base = sum(1 for c in taken if c.split is None or c.split in fractions)
    targets = largest_remainder(base, [fractions[s] for s in names], [SPLITS.index(s) for s in names])
    present = Counter(c.split for c in taken if c.split in fractions)
    need = [max(0, t - present[s]) for s, t in zip(names, targets, strict=True)]
    open_ = [c for c in taken if c.split is None]
    if open_:
        if sum(need) != len(open_):
            need = largest_remainder(len(open_), need, [SPLITS.index(s) for s in names])
        by_stratum = {name: sorted((c for c in open_ if c.stratum == name), key=lambda c: c.split_draw) for name in strata}
        rows = [name for name in strata if by_stratum[name]]
        table = controlled_rounding([len(by_stratum[name]) for name in rows], need)
        changes: dict[int, str] = {}
        for name, counts in zip(rows, table, strict=True):
            queue = iter(by_stratum[name])
            for split_name, count in zip(names, counts, strict=True):
                for _ in range(count):
                    candidate = next(queue)
                    candidate.split = split_name
                    changes[candidate.id] = split_name
        ids = sorted(changes)
        for chunk in in_parts(ids):
            for sample in session.exec(select(Sample).where(col(Sample.id).in_(chunk))):
                sample.split = changes[sample.id]
                session.add(sample)
    counts = Counter(c.split for c in taken)
    ordered = {s: counts[s] for s in SPLITS if counts[s] or s in fractions}
    ordered.update({s: counts[s] for s in sorted(k for k in counts if k not in SPLITS and k is not None)})
    return kept, ordered


def _queue(session: Session, taken: list[_Candidate], users: list[User], groups: list[tuple[int, ...]],
           overlap: int, negative_first: bool) -> tuple[int, int, int]:
    """Create the assignments; return (added, already there, open slots filled)."""
    existing: dict[int, list[Assignment]] = defaultdict(list)
    ids = [c.id for c in taken]
    for chunk in in_parts(ids):
        for assignment in session.exec(select(Assignment).where(col(Assignment.sample_id).in_(chunk))
                                       .order_by(col(Assignment.id))):
            existing[assignment.sample_id].append(assignment)
    added = already = filled = 0
    new: list[Assignment] = []
    for index, candidate in enumerate(taken):
        priority = PRIORITY_NEGATIVE if negative_first and candidate.feedback == -1 else PRIORITY_NORMAL
        present = existing[candidate.id]
        if not users:
            have = min(len(present), overlap)
            already += have
            for _ in range(overlap - have):
                new.append(Assignment(sample_id=candidate.id, user_id=None, status="pending", priority=priority))
                added += 1
            continue
        assigned = {a.user_id for a in present if a.user_id is not None}
        open_slots = [a for a in present if a.user_id is None and a.status == "pending"]
        for u in groups[index]:
            user_id = users[u].id
            if user_id in assigned:
                already += 1
                continue
            if open_slots:
                slot = open_slots.pop(0)
                slot.user_id = user_id
                slot.priority = priority
                slot.updated_at = utcnow()
                session.add(slot)
                filled += 1
            else:
                new.append(Assignment(sample_id=candidate.id, user_id=user_id, status="pending", priority=priority))
            assigned.add(user_id)
            added += 1
    session.add_all(new)
    return added, already, filled
