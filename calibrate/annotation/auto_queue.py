"""Expert queues that fill themselves: `calibrate queue auto`, in two streams kept apart in the data.

A dataset's policy (saved in `QueuePolicy`, applied now and again after each watcher pass through
`apply_saved_policy`) spends a daily budget of assignments (one expert on one sample; counted per
UTC day of the assignment's creation, so running it again the same day adds nothing beyond the
budget) on two streams, marked on the assignment (`Assignment.stream`):

- **audit** (`audit_share` of the budget, rounded): a uniform random draw among the judged samples
  that were never candidates before. Each pass draws `n` of its `M` candidates (a seeded
  permutation taken while the budget lasts, overlap decided per item), records every candidate
  once in `AuditDraw` (drawn or passed over) with the probability `n / M`, and stores that
  probability on the drawn samples' assignments (`audit_prob`). A sample passed over is never a
  candidate again, so `audit_prob` is the chance it had: `calibrate monitor` weighs its labels by
  its inverse. A pass with no audit budget left records nothing (its candidates wait for the next
  day's pass). These are the only labels estimates and the judge's drift use.
- **triage** (the rest): judged samples in no stream yet, thumbs-down (`feedback` −1) first, then the
  judge's least certain ones (annotation/uncertainty.py: an unparsed verdict or a failed call, a
  split between verdicts on the same target, a score at the middle of the scale), most uncertain
  first; samples the judges are sure of are never triaged. For fixing the system and for few-shots,
  never for estimates. A triaged sample stays a candidate of the audit draw (the draw must not
  depend on triage); if drawn, its assignments become audit ones.

"Judged" is a verdict of any judge on any task of the sample, a failed or refused call included (the
estimates count such samples as judged and correct their verdicts through the audit like any other).
Experts are assigned round-robin over `assign`; with `overlap` K and `overlap_share` S, a share S of the
items (a seeded draw) get K distinct experts.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from calibrate import lookup
from calibrate.annotation import AnnotationError
from calibrate.annotation.uncertainty import committee, sample_uncertainty
from calibrate.models import EXTRACTION, Assignment, AuditDraw, Dataset, QueuePolicy, Sample, Task, User, Verdict, utcnow
from calibrate.reasons import Reason

STREAMS = ("triage", "audit")
MAX_DAILY = 100_000


def _share(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 <= value <= 1:
        raise AnnotationError(Reason("auto_share_range", name=name, value=str(value)))
    return float(value)


def check_policy(session: Session, *, daily: Any, assign: list[str], overlap: Any = 1, overlap_share: Any = 0.0,
                 audit_share: Any = 0.5) -> list[User]:
    """Return the experts to assign, or refuse a policy that cannot run (each refusal a Reason)."""
    if isinstance(daily, bool) or not isinstance(daily, int) or not 1 <= daily <= MAX_DAILY:
        raise AnnotationError(Reason("auto_daily_range", limit=MAX_DAILY, value=str(daily)))
    names = list(dict.fromkeys(a.strip() for a in assign if a and a.strip()))
    if not names:
        raise AnnotationError(Reason("auto_needs_experts"))
    users = [lookup.user(session, name) for name in names]
    for user in users:
        if not user.active:
            raise AnnotationError(Reason("auto_expert_inactive", user=user.username))
    if isinstance(overlap, bool) or not isinstance(overlap, int) or overlap < 1 or overlap > len(users):
        raise AnnotationError(Reason("auto_overlap_experts", overlap=str(overlap), given=len(users)))
    _share("overlap-share", overlap_share)
    _share("audit-share", audit_share)
    return users


def save_policy(session: Session, dataset_name: str, *, daily: int, assign: list[str], overlap: int = 1,
                overlap_share: float = 0.0, audit_share: float = 0.5, seed: int = 0, user: User | None = None) -> QueuePolicy:
    """Save (replace) the dataset's queue policy after checking it; return it."""
    dataset = lookup.dataset(session, dataset_name)
    users = check_policy(session, daily=daily, assign=assign, overlap=overlap, overlap_share=overlap_share,
                         audit_share=audit_share)
    policy = session.exec(select(QueuePolicy).where(QueuePolicy.dataset_id == dataset.id)).first() or QueuePolicy(
        dataset_id=dataset.id, daily=daily)
    policy.daily, policy.assign, policy.overlap = daily, [u.username for u in users], overlap
    policy.overlap_share, policy.audit_share, policy.seed = float(overlap_share), float(audit_share), int(seed)
    policy.updated_by_id = user.id if user is not None else None
    policy.updated_at = utcnow()
    session.add(policy)
    session.flush()
    return policy


def saved_policy(session: Session, dataset: Dataset) -> QueuePolicy | None:
    """Return the dataset's saved policy, or None."""
    return session.exec(select(QueuePolicy).where(QueuePolicy.dataset_id == dataset.id)).first()


def policy_dict(policy: QueuePolicy) -> dict:
    """Return the policy as the summary's `policy` (the command's option names)."""
    return {"daily": policy.daily, "assign": list(policy.assign), "overlap": policy.overlap,
            "overlap_share": policy.overlap_share, "audit_share": policy.audit_share, "seed": policy.seed}


def _judged_samples(session: Session, dataset: Dataset) -> list[int]:
    """Return the ids of the dataset's samples the judges attempted (any verdict, a failed or refused call too), in id order.

    A failed call is judged for the audit: leaving such samples out of the draw would leave out exactly the answers the
    judge cannot handle (a 250,000-character answer whose render is refused at every pass), and the estimate with them.
    """
    extraction = sa_select(Task.id).where(Task.kind == EXTRACTION)
    rows = session.execute(
        sa_select(Verdict.sample_id).join(Sample, Sample.id == Verdict.sample_id)
        .where(Sample.dataset_id == dataset.id, col(Verdict.task_id).not_in(extraction))
        .distinct()).all()
    return sorted(int(r[0]) for r in rows)


def _used_today(session: Session, dataset: Dataset, day_start: datetime) -> dict[str, int]:
    rows = session.execute(
        sa_select(Assignment.stream, func.count()).join(Sample, Sample.id == Assignment.sample_id)
        .where(Sample.dataset_id == dataset.id, col(Assignment.stream).is_not(None), Assignment.created_at >= day_start,
               Assignment.created_at < day_start + timedelta(days=1))
        .group_by(Assignment.stream)).all()
    used = dict.fromkeys(STREAMS, 0)
    used.update({stream: int(n) for stream, n in rows})
    return used


def _uncertainty(session: Session, dataset: Dataset) -> dict[int, float]:
    """Return sample id → the judges' largest uncertainty over the tasks with verdicts (annotation/uncertainty.py)."""
    task_ids = session.execute(
        sa_select(Verdict.task_id).join(Sample, Sample.id == Verdict.sample_id)
        .where(Sample.dataset_id == dataset.id).distinct()).all()
    out: dict[int, float] = {}
    for (task_id,) in task_ids:
        task = session.get(Task, task_id)
        if task is None or task.kind == EXTRACTION:
            continue
        for sample_id, value in sample_uncertainty(session, dataset, task, committee(session, dataset, task)).items():
            out[int(sample_id)] = max(out.get(int(sample_id), 0.0), float(value))
    return out


class _Assigner:
    """Round-robin over the experts, continuing where the dataset's stream assignments left off."""

    def __init__(self, session: Session, dataset: Dataset, users: list[User], policy: QueuePolicy, rng: np.random.Generator,
                 now: datetime):
        self.session, self.users, self.policy, self.rng, self.now = session, users, policy, rng, now
        self.turn = int(session.execute(
            sa_select(func.count()).select_from(Assignment).join(Sample, Sample.id == Assignment.sample_id)
            .where(Sample.dataset_id == dataset.id, col(Assignment.stream).is_not(None))).scalar_one())

    def size(self) -> int:
        """Return how many experts the next item gets (the overlap draw)."""
        if self.policy.overlap > 1 and self.rng.random() < self.policy.overlap_share:
            return self.policy.overlap
        return 1

    def prefetch(self, sample_ids: list[int]) -> None:
        """Read the assignments the samples already have, in one query (per sample it would be one query each)."""
        self.existing: dict[int, dict[int | None, Assignment]] = {}
        for start in range(0, len(sample_ids), 500):
            chunk = sample_ids[start:start + 500]
            for a in self.session.exec(select(Assignment).where(col(Assignment.sample_id).in_(chunk))).all():
                self.existing.setdefault(a.sample_id, {})[a.user_id] = a

    def assign(self, sample_id: int, k: int, stream: str, prob: float | None, priority: int) -> int:
        """Give the sample to k experts in this stream; return how many assignments were created or moved into it."""
        existing = self.existing.setdefault(sample_id, {})
        if stream == "audit":  # every assignment of a drawn sample is an audit one (its labels are audit labels)
            for a in existing.values():
                a.stream, a.audit_prob, a.updated_at = "audit", prob, utcnow()
                self.session.add(a)
        count = 0
        for _ in range(k):
            user = self.users[self.turn % len(self.users)]
            self.turn += 1
            if user.id in existing:
                if existing[user.id].stream != stream:
                    existing[user.id].stream, existing[user.id].audit_prob = stream, prob
                    self.session.add(existing[user.id])
                count += 1
                continue
            existing[user.id] = Assignment(sample_id=sample_id, user_id=user.id, stream=stream, audit_prob=prob, priority=priority,
                                           created_at=self.now, updated_at=self.now)
            self.session.add(existing[user.id])
            count += 1
        return count


def apply_policy(session: Session, dataset: Dataset, policy: QueuePolicy, *, now: datetime | None = None) -> dict:
    """Fill the dataset's queues by its policy for the UTC day of `now` (default: now); return the summary.

    Summary keys: dataset, day, policy, audit {budget, used_before, added, candidates, drawn, probability},
    triage {budget, used_before, added, thumbs_down, uncertain}.
    """
    now = (now or utcnow()).astimezone(UTC)
    day_start = datetime(now.year, now.month, now.day, tzinfo=UTC)
    users = check_policy(session, daily=policy.daily, assign=list(policy.assign), overlap=policy.overlap,
                         overlap_share=policy.overlap_share, audit_share=policy.audit_share)
    used = _used_today(session, dataset, day_start)
    audit_budget = int(round(policy.daily * policy.audit_share))
    triage_budget = policy.daily - audit_budget
    n_draws = int(session.execute(sa_select(func.count()).select_from(AuditDraw).where(AuditDraw.dataset_id == dataset.id)).scalar_one())
    rng = np.random.default_rng([policy.seed, int(dataset.id or 0), day_start.toordinal(), n_draws])
    assigner = _Assigner(session, dataset, users, policy, rng, now)
    judged = _judged_samples(session, dataset)

    # Audit: a uniform draw among the judged samples never drawn before.
    drawn_before = {int(s) for (s,) in session.execute(sa_select(AuditDraw.sample_id).where(AuditDraw.dataset_id == dataset.id)).all()}
    candidates = [s for s in judged if s not in drawn_before]
    left = audit_budget - used["audit"]
    audit = {"budget": audit_budget, "used_before": used["audit"], "added": 0, "candidates": len(candidates), "drawn": 0,
             "probability": None}
    if left > 0 and candidates:
        chosen: list[tuple[int, int]] = []
        cost = 0
        for index in rng.permutation(len(candidates)):
            k = assigner.size()
            if cost + k > left:
                break
            chosen.append((candidates[int(index)], k))
            cost += k
        assigner.prefetch([s for s, _ in chosen])
        if chosen:
            prob = len(chosen) / len(candidates)
            picked = {s for s, _ in chosen}
            for sample_id in candidates:
                session.add(AuditDraw(dataset_id=dataset.id, sample_id=sample_id, drawn=sample_id in picked, probability=prob, created_at=now))
            for sample_id, k in chosen:
                audit["added"] += assigner.assign(sample_id, k, "audit", prob, priority=1)
            audit.update(drawn=len(chosen), probability=prob)
            session.flush()

    # Triage: thumbs-down first, then the least certain; samples already in a stream are left alone.
    in_stream = {int(s) for (s,) in session.execute(
        sa_select(Assignment.sample_id).join(Sample, Sample.id == Assignment.sample_id)
        .where(Sample.dataset_id == dataset.id, col(Assignment.stream).is_not(None)).distinct()).all()}
    left = triage_budget - used["triage"]
    triage = {"budget": triage_budget, "used_before": used["triage"], "added": 0, "thumbs_down": 0, "uncertain": 0}
    if left > 0:
        open_ids = [s for s in judged if s not in in_stream]
        down = {int(s) for (s,) in session.execute(
            sa_select(Sample.id).where(Sample.dataset_id == dataset.id, Sample.feedback == -1)).all()}
        ranked = [(0, 0.0, s) for s in open_ids if s in down]
        if len(ranked) < left:  # the thumbs-down alone do not fill the budget: the least certain next
            scores = _uncertainty(session, dataset)
            ranked += [(1, -scores[s], s) for s in open_ids if s not in down and scores.get(s, 0.0) > 0]
        ranked.sort()
        assigner.prefetch([s for _, _, s in ranked[:left]])
        for group, _, sample_id in ranked:
            k = assigner.size()
            if triage["added"] + k > left:
                break
            triage["added"] += assigner.assign(sample_id, k, "triage", None, priority=0 if group == 0 else 1)
            triage["thumbs_down" if group == 0 else "uncertain"] += 1
    session.flush()
    return {"dataset": dataset.name, "day": day_start.date().isoformat(), "policy": policy_dict(policy), "audit": audit,
            "triage": triage}


def queue_auto(session: Session, dataset_name: str, *, daily: int, assign: list[str], overlap: int = 1,
               overlap_share: float = 0.0, audit_share: float = 0.5, seed: int = 0, user: User | None = None,
               now: datetime | None = None) -> dict:
    """Save the dataset's policy and apply it now (`calibrate queue auto`, the dataset page's form)."""
    policy = save_policy(session, dataset_name, daily=daily, assign=assign, overlap=overlap, overlap_share=overlap_share,
                         audit_share=audit_share, seed=seed, user=user)
    dataset = lookup.dataset(session, dataset_name)
    return apply_policy(session, dataset, policy, now=now)


def apply_saved_policy(session: Session, dataset: Dataset | str, *, now: datetime | None = None) -> dict | None:
    """Apply the dataset's saved policy (the watcher calls this after each pass); None when none is saved."""
    if isinstance(dataset, str):
        dataset = lookup.dataset(session, dataset)
    policy = saved_policy(session, dataset)
    if policy is None:
        return None
    return apply_policy(session, dataset, policy, now=now)


def summary_line(summary: dict) -> str:
    """Return the command's one line."""
    a, t = summary["audit"], summary["triage"]
    prob = f", probability {a['probability']:.3f}" if a["probability"] is not None else ""
    return (f"{summary['dataset']} {summary['day']}: audit +{a['added']} ({a['used_before'] + a['added']}/{a['budget']} today; "
            f"{a['drawn']} of {a['candidates']} new judged samples drawn{prob}); triage +{t['added']} "
            f"({t['used_before'] + t['added']}/{t['budget']} today; {t['thumbs_down']} thumbs-down, {t['uncertain']} uncertain).")


def stream_counts(session: Session, dataset: Dataset) -> dict[str, int]:
    """Return the dataset's assignments per stream (for the dataset page)."""
    rows = session.execute(
        sa_select(Assignment.stream, func.count()).join(Sample, Sample.id == Assignment.sample_id)
        .where(Sample.dataset_id == dataset.id, col(Assignment.stream).is_not(None)).group_by(Assignment.stream)).all()
    return {**dict.fromkeys(STREAMS, 0), **{s: int(n) for s, n in rows}}


__all__ = ["MAX_DAILY", "STREAMS", "apply_policy", "apply_saved_policy", "check_policy", "policy_dict", "queue_auto",
           "save_policy", "saved_policy", "stream_counts", "summary_line"]
