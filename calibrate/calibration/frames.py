"""Read labels, verdicts and sample fields into pandas frames (through `db.read_frame`'s raw cursor).

Every statistic of the package starts from these frames: one row per label or verdict, with
the target's key ("claim:42"), its sample's primary key and its claim index or context rank
(`position`). Reports read 10^5–10^6 rows, so the reads skip SQLAlchemy's per-row work.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import case, func, literal, true
from sqlalchemy import select as sa_select
from sqlmodel import Session, select

from calibrate.db import read_frame
from calibrate.errors import CalibrationError
from calibrate.judged import judging
from calibrate.models import (
    Claim,
    Dataset,
    FewShot,
    Judge,
    Label,
    Sample,
    Task,
    User,
    Verdict,
)
from calibrate.reasons import Reason

LABEL_COLUMNS = ["target_key", "sample_id", "position", "annotator", "value", "adjudicated", "stale", "updated_at", "label_id"]


def adjudication_order() -> tuple:
    """Return the columns gold.py orders adjudications by (`updated_at`, `label_id`): set on adjudicated rows only.

    NULL elsewhere, so the reads of 10^5 ordinary labels carry no timestamps they never use.
    """
    adjudicated = Label.adjudicated.is_(True)
    return (case((adjudicated, Label.updated_at), else_=None).label("updated_at"),
            case((adjudicated, Label.id), else_=None).label("label_id"))


def labels_frame(session: Session, dataset: Dataset, task: Task, *, categorical: bool = False) -> pd.DataFrame:
    """Return the task's labels on the dataset, one row per label (columns LABEL_COLUMNS).

    `categorical` (the report's read of 10^6 labels): `target_key`, `annotator` and `value` as pandas categoricals,
    read in bounded chunks (db.read_frame), so the frame holds codes, not millions of strings.
    """
    query = (
        sa_select(Label.target_key, Label.sample_id, position_column(task), User.username,
                  Label.value, Label.adjudicated, Label.stale, *adjudication_order())
        .join(User, User.id == Label.annotator_id)
        .join(Sample, Sample.id == Label.sample_id)
        .where(Sample.dataset_id == dataset.id, Label.task_id == task.id)
    )
    query = join_target(query, task, Label)
    frame = read_frame(session, query, LABEL_COLUMNS,
                       categorical=("target_key", "annotator", "value") if categorical else ())
    return frame.astype({"adjudicated": bool, "stale": bool})


VERDICT_COLUMNS = ["target_key", "sample_id", "position", "value", "status", "active"]


def verdict_columns(task: Task) -> list:
    """Return the verdict columns a task's frame reads (VERDICT_COLUMNS, and `order_key` for a pairwise task)."""
    columns = [Verdict.target_key, Verdict.sample_id, position_column(task), Verdict.value, Verdict.status, active_column(task)]
    return columns + [Verdict.order_key] if task.kind == "pairwise" else columns


def frame_columns(task: Task) -> list[str]:
    """Return the names of `verdict_columns`."""
    return VERDICT_COLUMNS + ["order_key"] if task.kind == "pairwise" else list(VERDICT_COLUMNS)


def verdicts_frame(session: Session, dataset: Dataset, task: Task, judge: Judge, *, categorical: bool = False) -> pd.DataFrame:
    """Return the judge's verdicts on the task in the dataset (target_key, sample_id, position, value, status, active).

    A pairwise task's frame also has `order_key` (one verdict per presentation order; pairwise.py
    turns them into one per target). `categorical`: `target_key` as a categorical, read in chunks (labels_frame).
    """
    query = (
        sa_select(*verdict_columns(task))
        .join(Sample, Sample.id == Verdict.sample_id)
        .where(Sample.dataset_id == dataset.id, Verdict.task_id == task.id, Verdict.judge_id == judge.id,
               Verdict.sample_index == 0)  # a self-consistency run's other samples: calibration/consistency.py
    )
    query = join_target(query, task, Verdict)
    frame = read_frame(session, query, frame_columns(task), categorical=("target_key",) if categorical else ())
    # A verdict on a claim or context that an --update retired is kept, but it is not one of the
    # sample's current targets (RAG metrics leave it out).
    frame["active"] = frame["active"].fillna(True).astype(bool)
    return frame


def position_column(task: Task):
    """Return the column giving a target's place in its sample (claim index, context rank, step index; NULL for the
    sample itself), by its registered target kind (calibrate/judged.py)."""
    kind = judging(task).target
    return getattr(kind.row, kind.position) if kind.within else literal(None)


def join_target(query, task: Task, model):
    """Join the part of the sample a label's or verdict's target is (for its position and whether it is active)."""
    kind = judging(task).target
    if not kind.within:
        return query
    return query.outerjoin(kind.row, kind.row.id == getattr(model, f"{kind.field}_id"))


def active_column(task: Task):
    """Return the column saying whether a verdict's part of the sample is still active (TRUE for sample targets)."""
    kind = judging(task).target
    return kind.row.active if kind.within else true()


def fewshot_keys(session: Session, judge: Judge | None) -> set[str]:
    if judge is None or judge.prompt_version_id is None:
        return set()
    return set(session.exec(select(FewShot.target_key).where(FewShot.version_id == judge.prompt_version_id)).all())


def sample_field_values(session: Session, dataset: Dataset, field_name: str) -> dict[int, str | None]:
    """Return sample id → the value of `metadata.FIELD` (or a top-level field) as text."""
    key = field_name.removeprefix("metadata.")
    if field_name.startswith("metadata."):
        rows = session.execute(sa_select(Sample.id, Sample.meta).where(Sample.dataset_id == dataset.id)).all()
        values = {sid: (None if not isinstance(meta, dict) or meta.get(key) is None else str(meta.get(key))) for sid, meta in rows}
        if all(v is None for v in values.values()):
            present = sorted({k for _, meta in rows if isinstance(meta, dict) for k in meta})
            raise CalibrationError(
                Reason("group_field_missing", dataset=dataset.name, field_name=field_name,
                       fields=", ".join("metadata." + k for k in present)) if present
                else Reason("group_field_missing_none", dataset=dataset.name, field_name=field_name)
            )
        return values
    if field_name in ("split", "feedback"):
        column = getattr(Sample, field_name)
        rows = session.execute(sa_select(Sample.id, column).where(Sample.dataset_id == dataset.id)).all()
        return {sid: (None if v is None else str(v)) for sid, v in rows}
    raise CalibrationError(Reason("group_field_invalid", field_name=field_name))


METADATA_FIELDS_SCANNED = 5000


def metadata_fields(session: Session, dataset: Dataset) -> list[str]:
    """Return `metadata.KEY` for every metadata key of the dataset's first 5,000 samples, sorted (what a group-by offers).

    Bounded so a page of a 10^6-sample dataset does not parse every sample's JSON; a key that only
    later samples carry can still be asked for by name.
    """
    rows = session.execute(sa_select(Sample.meta).where(Sample.dataset_id == dataset.id).order_by(Sample.id)
                           .limit(METADATA_FIELDS_SCANNED)).all()
    return sorted({f"metadata.{key}" for (meta,) in rows if isinstance(meta, dict) for key in meta})


def external_ids(session: Session, dataset: Dataset) -> dict[int, str]:
    """Return sample id → the user's sample id (read through the raw cursor: 10^5 rows in a report)."""
    frame = read_frame(session, sa_select(Sample.id, Sample.external_id).where(Sample.dataset_id == dataset.id), ["id", "external_id"])
    return dict(zip(frame["id"].tolist(), frame["external_id"].tolist(), strict=True))


def claim_totals(session: Session, dataset: Dataset) -> pd.Series:
    """Return sample id → number of active claims (the denominator of faithfulness)."""
    return part_totals(session, dataset, Claim)


def part_totals(session: Session, dataset: Dataset, row: type) -> pd.Series:
    """Return sample id → number of its active parts of one kind (a TargetKind's `row`: Claim, Context, Step)."""
    query = (sa_select(row.sample_id, func.count())
             .join(Sample, Sample.id == row.sample_id)
             .where(Sample.dataset_id == dataset.id, row.active.is_(True))
             .group_by(row.sample_id))
    frame = read_frame(session, query, ["sample_id", "n"])
    return pd.Series(frame["n"].to_numpy(dtype=np.int64), index=frame["sample_id"].to_numpy(dtype=np.int64))


def per_sample(sample_ids: np.ndarray, values: np.ndarray) -> pd.Series:
    """Return the values by sample id, in id order.

    The order rows come back in is the database's (PostgreSQL's hash joins differ from
    SQLite's loops); sorting here keeps means and correlations identical to the last digit.
    """
    series = pd.Series(np.asarray(values, dtype=float), index=pd.Index(np.asarray(sample_ids, dtype=np.int64), name="sample_id"))
    return series.sort_index()


def target_positions(labels: pd.DataFrame, verdicts: pd.DataFrame | None) -> dict[str, int]:
    """Return target_key → claim index or context rank."""
    out: dict[str, int] = {}
    for frame in (labels, verdicts):
        if frame is not None and not frame.empty and frame["position"].notna().any():
            out.update(zip(frame["target_key"], frame["position"].astype("Int64"), strict=True))
    return out


def require_verdicts(session: Session, dataset: Dataset, task: Task, judge: Judge) -> pd.DataFrame:
    verdicts = verdicts_frame(session, dataset, task, judge)
    if verdicts.empty:
        raise CalibrationError(Reason("judge_no_task_verdicts", judge=judge.name, task=task.name, dataset=dataset.name))
    return verdicts


def shared_keys(*frames: pd.DataFrame | None) -> list[pd.DataFrame | None]:
    """Return the frames with `target_key` as one pandas Categorical over the sorted keys of them all.

    The report reads a task's labels and verdicts once and groups, joins and filters them by target
    many times (the gold, the human agreement, the judge as a rater, per annotator, the estimate):
    on text keys each of those hashes and sorts 10^6 strings again; on a categorical shared by every
    frame they work on integer codes. The categories are sorted so that anything ordered by key is
    ordered as the text is; `tolist()`, `isin` and `map` give and take the text keys unchanged.
    """
    present = [f["target_key"] for f in frames if f is not None and not f.empty]
    if not present:
        return list(frames)
    keys = pd.unique(np.concatenate([k.cat.categories.to_numpy(dtype=object) if isinstance(k.dtype, pd.CategoricalDtype)
                                     else k.to_numpy(dtype=object) for k in present]))
    dtype = pd.CategoricalDtype(np.sort(keys.astype(str)))
    return [f if f is None or f.empty else f.assign(target_key=pd.Categorical(f["target_key"], dtype=dtype))
            for f in frames]
