"""The "uncertain first" queue mode: annotators get first the samples the judges are least sure of.

Labelling where the judges already agree (with each other, confidently) adds little to the
decision "is this judge good enough"; labelling where they disagree settles it with the fewest
labels. This is query-by-committee active learning (Seung, Opper & Sompolinsky 1992; the vote
entropy of Dagan & Engelson 1995; survey: Settles 2009, "Active Learning Literature Survey",
§3.3), with the dataset's judges as the committee.

Uncertainty of one target, in [0, 1], from the verdicts of the chosen judges for the task:

- any judge's verdict on it unusable (unparsed, or the call failed): 1, the most uncertain
  (the judge could not decide; a human label is the only way to score it);
- categorical, two or more usable verdicts: the vote entropy −Σ p_k ln p_k over the share p_k
  of verdicts per label, divided by its maximum ln(min(m, K)) for m verdicts and K labels of
  the task (so two judges that differ score 1, three judges split 2–1 score 0.918 with two
  labels);
- ordinal or continuous, two or more usable verdicts: the range (max − min) divided by the
  width of the task's scale (its declared range, else the range of every verdict read);
- one usable verdict (one judge, or only one judged that target): the LLM judges here give
  no confidence with a verdict, so nothing measures how sure it was. Categorical: 0 (only an
  unusable verdict ranks first). Scores: closeness to the middle of the scale,
  1 − |v − mid| / (width / 2) — a verdict at the middle is the one a small error moves across
  a pass/fail line, a heuristic rather than a confidence.

A sample's uncertainty is the *mean* over its targets that have verdicts: an annotator labels
every target of a sample, so the mean is the share of their effort spent on contested targets
(the maximum would rank one contested claim out of twenty with one out of one).

Ordering, without a schema change: the queue already serves pending assignments by
`priority` (lower first) then id. `order_queue(mode="uncertain")` rewrites the priority of the
dataset's *pending* assignments (assigned or open slots; done, skipped and flagged ones are never
touched) as

    priority = UNCERTAIN_BASE + bucket · STRIDE + sampled

where bucket = round((1 − uncertainty) · 1000) (0: most uncertain; BUCKET_NO_VERDICT, after
all, for samples no chosen judge has a verdict on) and `sampled` is the priority
`calibrate sample` gave it (0 for --negative-first negatives, else 1). So within a bucket the
sampled order still holds (negative first, then the seeded id order), every value is negative
(below every sampled priority), and `mode="sampled"` restores exactly what `calibrate sample`
set: sampled = (priority − UNCERTAIN_BASE) mod STRIDE. A dataset in uncertain mode also comes
before the annotator's other datasets in the cross-dataset "next item".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sqlalchemy import bindparam, or_, update
from sqlalchemy import select as sa_select
from sqlmodel import Session, select

from calibrate import lookup
from calibrate.annotation import AnnotationError
from calibrate.db import read_frame  # the raw-cursor read: one row per judge and target can be millions
from calibrate.models import LABEL_KINDS, Assignment, Dataset, Judge, Sample, Task, Verdict
from calibrate.reasons import Reason

MODES = ("uncertain", "sampled")
UNCERTAIN_BASE = -1_000_000
STRIDE = 100
RESOLUTION = 1000  # uncertainty is bucketed to 0.001
BUCKET_NO_VERDICT = RESOLUTION + 1


def encode(sampled: int, uncertainty: float | None) -> int:
    """Return the uncertain-mode priority of an assignment whose sampled priority is `sampled`."""
    if not 0 <= sampled < STRIDE:
        raise AnnotationError(Reason("priority_out_of_range", sampled=sampled, value=STRIDE - 1))
    bucket = BUCKET_NO_VERDICT if uncertainty is None else round((1.0 - uncertainty) * RESOLUTION)
    return UNCERTAIN_BASE + bucket * STRIDE + sampled


def sampled_priority(priority: int) -> int:
    """Return the priority `calibrate sample` gave an assignment, whatever mode the queue is in."""
    return (priority - UNCERTAIN_BASE) % STRIDE if priority < 0 else priority


def target_uncertainty(verdicts: pd.DataFrame, *, kind: str, n_labels: int | None = None,
                       scale: tuple[float, float] | None = None) -> pd.Series:
    """Return target_key → uncertainty in [0, 1] from a frame of verdicts (target_key, value, status).

    One row per (judge, target). `n_labels` is the number of labels of a categorical task;
    `scale` the (min, max) of a score task (None: the range of the values in the frame).
    """
    if verdicts.empty:
        return pd.Series(dtype=float)
    usable = (verdicts["status"] == "ok") & verdicts["value"].notna()
    unusable = (~usable).groupby(verdicts["target_key"], sort=False).any()
    ok = verdicts[usable]
    if kind in LABEL_KINDS:
        counts = ok.groupby(["target_key", "value"], sort=False).size()
        m = counts.groupby(level=0).transform("sum")
        p = counts / m
        entropy = (-p * np.log(p)).groupby(level=0).sum()
        n = m.groupby(level=0).first()
        top = np.minimum(n, n_labels or ok["value"].nunique())
        norm = np.log(top.clip(lower=1).astype(float))
        score = (entropy / norm.where(norm > 0)).fillna(0.0)
    else:
        values = ok["value"].astype(float)
        low, high = scale if scale else ((values.min(), values.max()) if len(values) else (0.0, 0.0))
        width = float(high - low)
        per = values.groupby(ok["target_key"], sort=False).agg(["min", "max", "count", "first"])
        if width <= 0:
            score = pd.Series(0.0, index=per.index)
        else:
            spread = (per["max"] - per["min"]) / width
            middle = 1.0 - (per["first"] - (low + high) / 2).abs() / (width / 2)
            score = spread.where(per["count"] >= 2, middle)
    score = score.reindex(unusable.index).fillna(0.0).clip(0.0, 1.0)
    return score.where(~unusable, 1.0)


@dataclass
class QueueOrder:
    """What `order_queue` did: the mode, the committee, how many pending items moved."""

    dataset: str
    task: str
    mode: str
    judges: list[str] = field(default_factory=list)
    pending: int = 0  # pending assignments (assigned and open slots) of the dataset
    changed: int = 0  # of those, how many got a new priority
    without_verdicts: int = 0  # pending samples no chosen judge has a verdict on (served last)
    first: list[tuple[str, float]] = field(default_factory=list)  # the most uncertain pending samples

    def line(self) -> str:
        """Return one sentence for the command line and the flash message."""
        if self.mode == "sampled":
            return f"{self.dataset}: queue back in the sampled order ({self.changed} of {self.pending} pending items moved)."
        top = ", ".join(f"{ext} {score:.2f}" for ext, score in self.first[:5])
        return (f"{self.dataset}: uncertain first on {self.task} by {', '.join(self.judges)} "
                f"({self.changed} of {self.pending} pending items moved; {self.without_verdicts} samples without verdicts go last)"
                + (f"; first: {top}." if top else "."))


def committee(session: Session, dataset: Dataset, task: Task, names: list[str] | None = None) -> list[Judge]:
    """Return the judges whose verdicts decide the order: `names`, else every judge with verdicts for the task on the dataset."""
    judged = session.exec(
        select(Judge).where(Judge.id.in_(
            sa_select(Verdict.judge_id).join(Sample, Sample.id == Verdict.sample_id)
            .where(Sample.dataset_id == dataset.id, Verdict.task_id == task.id).distinct()))
        .order_by(Judge.name)).all()
    if not names:
        if not judged:
            raise AnnotationError(Reason("queue_no_verdicts", task=task.name, dataset=dataset.name))
        return list(judged)
    by_name = {j.name: j for j in judged}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise AnnotationError(Reason("queue_judges_no_verdicts", task=task.name, unknown=', '.join(unknown), dataset=dataset.name,
                                     value=', '.join(by_name) or 'none'))
    return [by_name[n] for n in dict.fromkeys(names)]


def sample_uncertainty(session: Session, dataset: Dataset, task: Task, judges: list[Judge]) -> pd.Series:
    """Return sample id → the mean uncertainty of its targets over the judges' verdicts (samples with verdicts only)."""
    query = (sa_select(Verdict.sample_id, Verdict.target_key, Verdict.value, Verdict.status)
             .join(Sample, Sample.id == Verdict.sample_id)
             .where(Sample.dataset_id == dataset.id, Verdict.task_id == task.id, Verdict.sample_index == 0,
                    or_(*(Verdict.judge_id == j.id for j in judges))))
    frame = read_frame(session, query, ["sample_id", "target_key", "value", "status"])
    if frame.empty:
        return pd.Series(dtype=float)
    scale = (task.scale_min, task.scale_max) if task.scale_min is not None and task.scale_max is not None else None
    per_target = target_uncertainty(frame, kind=task.kind, n_labels=len(task.labels or []) or None, scale=scale)
    samples = frame.drop_duplicates("target_key").set_index("target_key")["sample_id"]
    return per_target.groupby(samples.reindex(per_target.index).to_numpy()).mean()


def queue_mode(session: Session, dataset: Dataset) -> str:
    """Return "uncertain" when the dataset's pending items are in uncertain-first order, else "sampled"."""
    found = session.execute(
        sa_select(Assignment.id).join(Sample, Sample.id == Assignment.sample_id)
        .where(Sample.dataset_id == dataset.id, Assignment.status == "pending", Assignment.priority < 0).limit(1)).first()
    return "uncertain" if found else "sampled"


def order_queue(session: Session, dataset_name: str, *, mode: str, task: str = "claim_support",
                judges: list[str] | None = None) -> QueueOrder:
    """Put the dataset's pending items in uncertain-first order (by `task`'s verdicts of `judges`) or back in the sampled order.

    Writes: call it in a write transaction; the caller commits. Raises NotFound for an unknown
    dataset or task, AnnotationError for an unknown mode or judges without verdicts.
    """
    if mode not in MODES:
        raise AnnotationError(Reason("queue_mode_unknown", modes=', '.join(MODES), mode=mode))
    dataset, task_row = lookup.dataset(session, dataset_name), lookup.task(session, task)
    out = QueueOrder(dataset=dataset.name, task=task_row.name, mode=mode)
    rows = session.execute(
        sa_select(Assignment.id, Assignment.sample_id, Assignment.priority).join(Sample, Sample.id == Assignment.sample_id)
        .where(Sample.dataset_id == dataset.id, Assignment.status == "pending").order_by(Assignment.id)).all()
    out.pending = len(rows)
    if mode == "sampled":
        new = {aid: sampled_priority(priority) for aid, _, priority in rows}
    else:
        chosen = committee(session, dataset, task_row, judges)
        out.judges = [j.name for j in chosen]
        scores = sample_uncertainty(session, dataset, task_row, chosen)
        score_of = {int(k): float(v) for k, v in scores.items()}
        new = {aid: encode(sampled_priority(priority), score_of.get(sample_id)) for aid, sample_id, priority in rows}
        pending_samples = {sample_id for _, sample_id, _ in rows}
        out.without_verdicts = len(pending_samples - set(score_of))
        ranked = sorted((s for s in pending_samples if s in score_of), key=lambda s: (-round(score_of[s], 3), s))[:10]
        external = dict(session.execute(sa_select(Sample.id, Sample.external_id).where(Sample.id.in_(ranked))).all()) if ranked else {}
        out.first = [(external[s], score_of[s]) for s in ranked]
    moved = [{"aid": aid, "p": new[aid]} for aid, _, priority in rows if new[aid] != priority]
    out.changed = len(moved)
    if moved:
        # Only the priority changes: updated_at keeps saying when the annotator last touched the item.
        session.execute(update(Assignment.__table__).where(Assignment.__table__.c.id == bindparam("aid"))
                        .values(priority=bindparam("p")), moved)
    return out
