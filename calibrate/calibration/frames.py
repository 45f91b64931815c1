"""Read labels, verdicts and sample fields into pandas frames (through `db.read_frame`'s and `db.read_columns`' raw cursor).

Every statistic of the package starts from these frames: one row per label or verdict, with
the target's key ("claim:42"), its sample's primary key and its claim index or context rank
(`position`). Reports read 10^5–10^6 rows, so the reads skip SQLAlchemy's per-row work.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import String, case, cast, exists, func, literal, true
from sqlalchemy import select as sa_select
from sqlmodel import Session, select

from calibrate.db import BOOL, CATEGORY, INFERRED, INT, SHARED_TEXT, read_columns, read_frame
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


def labels_frame(session: Session, dataset: Dataset, task: Task) -> pd.DataFrame:
    """Return the task's labels on the dataset, one row per label (columns LABEL_COLUMNS; the report's read of 10^6 of
    them is `coded_frames`)."""
    query = (
        sa_select(Label.target_key, Label.sample_id, position_column(task), User.username,
                  Label.value, Label.adjudicated, Label.stale, *adjudication_order())
        .join(User, User.id == Label.annotator_id)
        .join(Sample, Sample.id == Label.sample_id)
        .where(Sample.dataset_id == dataset.id, Label.task_id == task.id)
    )
    query = join_target(query, task, Label)
    frame = read_frame(session, query, LABEL_COLUMNS)
    return frame.astype({"adjudicated": bool, "stale": bool})


VERDICT_COLUMNS = ["target_key", "sample_id", "position", "value", "status", "active"]


def verdict_columns(task: Task) -> list:
    """Return the verdict columns a task's frame reads (VERDICT_COLUMNS, and `order_key` for a pairwise task)."""
    columns = [Verdict.target_key, Verdict.sample_id, position_column(task), Verdict.value, Verdict.status, active_column(task)]
    return columns + [Verdict.order_key] if task.kind == "pairwise" else columns


def frame_columns(task: Task) -> list[str]:
    """Return the names of `verdict_columns`."""
    return VERDICT_COLUMNS + ["order_key"] if task.kind == "pairwise" else list(VERDICT_COLUMNS)


def verdicts_frame(session: Session, dataset: Dataset, task: Task, judge: Judge) -> pd.DataFrame:
    """Return the judge's verdicts on the task in the dataset (target_key, sample_id, position, value, status, active).

    A pairwise task's frame also has `order_key` (one verdict per presentation order; pairwise.py
    turns them into one per target).
    """
    frame = read_frame(session, _verdicts_query(dataset, task, judge, verdict_columns(task)), frame_columns(task))
    return _active(frame)


def _verdicts_query(dataset: Dataset, task: Task, judge: Judge, columns: list):
    query = (
        sa_select(*columns)
        .join(Sample, Sample.id == Verdict.sample_id)
        .where(Sample.dataset_id == dataset.id, Verdict.task_id == task.id, Verdict.judge_id == judge.id,
               Verdict.sample_index == 0)  # a self-consistency run's other samples: calibration/consistency.py
    )
    return join_target(query, task, Verdict)


def _active(frame: pd.DataFrame) -> pd.DataFrame:
    # A verdict on a claim or context that an --update retired is kept, but it is not one of the
    # sample's current targets (RAG metrics leave it out).
    frame["active"] = frame["active"].fillna(True).astype(bool)
    return frame


def coded_frames(session: Session, dataset: Dataset, task: Task, judge: Judge | None) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Return the task's labels and the judge's verdicts (None without a judge) as labels_frame and verdicts_frame
    do, read for 10^6 rows: the report's read.

    Read as integers in bounded chunks (db.read_columns): the target's id (KEY_COLUMNS), the annotator's id (no user
    join: named from one small user query), `value` coded through one table for the read; a part's position and
    whether it is active from one read of the parts (place_parts). `target_key` of both frames is one pandas
    Categorical over the sorted text keys (`coded_keys`: the text of each target made once, the rows' codes found by
    integer lookups), `annotator` and the labels' `value` categoricals: the frames hold codes, not millions of strings,
    and the gold, the human block, the joins and the estimate group on integers. Sorted categories keep every
    key-ordered result as it is on text keys; `tolist()`, `isin` and `map` give and take the text keys unchanged.
    """
    kind = judging(task).target
    # A part's position and whether it is active come from one read of the parts (place_parts), not a join per row.
    placed = {} if kind.within else {"position": INFERRED}
    span = dense_sample_range(session, dataset)
    query = in_dataset(
        sa_select(*key_columns(task, Label), Label.sample_id, *([] if kind.within else [position_column(task)]),
                  Label.annotator_id, Label.value, Label.adjudicated, Label.stale, *adjudication_order())
        .where(Label.task_id == task.id), Label, dataset, span)
    labels = read_columns(session, query, {
        **KEY_KINDS, "sample_id": INT, **placed, "annotator": INT, "value": CATEGORY, "adjudicated": BOOL,
        "stale": BOOL, "updated_at": INFERRED, "label_id": INFERRED})
    labels["annotator"] = _annotator_names(session, labels["annotator"])
    if labels["annotator"].isna().any():  # a label whose user row is gone (foreign keys off): left out, as labels_frame does
        labels = labels[labels["annotator"].notna()].reset_index(drop=True)
    if judge is None:
        place_parts(session, task, labels)
        return coded_keys(task, labels)[0][LABEL_COLUMNS], None
    columns = [*key_columns(task, Verdict), Verdict.sample_id, *([] if kind.within else [position_column(task)]),
               Verdict.value, Verdict.status, *([] if kind.within else [active_column(task)]),
               *verdict_columns(task)[len(VERDICT_COLUMNS):]]
    query = in_dataset(  # as _verdicts_query, without the join of the part
        sa_select(*columns).where(Verdict.task_id == task.id, Verdict.judge_id == judge.id, Verdict.sample_index == 0),
        Verdict, dataset, span)
    kinds = {**KEY_KINDS, "sample_id": INT, **placed, "value": SHARED_TEXT, "status": SHARED_TEXT,
             **({} if kind.within else {"active": INFERRED})}  # value, status: text as verdicts_frame reads them
    kinds |= dict.fromkeys(frame_columns(task)[len(VERDICT_COLUMNS):], INFERRED)  # a pairwise task's order_key
    verdicts = read_columns(session, query, kinds)
    place_parts(session, task, labels, verdicts)
    verdicts = _active(verdicts)
    labels, verdicts = coded_keys(task, labels, verdicts)
    return labels[LABEL_COLUMNS], verdicts[frame_columns(task)]


def dense_sample_range(session: Session, dataset: Dataset) -> tuple[int, int] | None:
    """Return the least and greatest sample id of the dataset when its ids are exactly that range (every id from one to
    the other is one of its samples, as an import makes them), else None (a gap, or no sample)."""
    low, high, count = session.execute(sa_select(func.min(Sample.id), func.max(Sample.id), func.count())
                                       .where(Sample.dataset_id == dataset.id)).one()
    return (low, high) if count and high - low + 1 == count else None


def in_dataset(query, model, dataset: Dataset, span: tuple[int, int] | None):
    """Return the query of rows of `model` (a table with `sample_id`) restricted to the dataset's samples: by their id
    range when it is dense (`dense_sample_range`: a row is the dataset's exactly when its sample id is in it; no join
    to `sample`), else by the join."""
    if span is not None:
        return query.where(model.sample_id.between(*span))
    return query.join(Sample, Sample.id == model.sample_id).where(Sample.dataset_id == dataset.id)


PARTS_IN_LIST = 500  # part ids per IN (…) list when a frame's targets are too sparse to read their id range


def place_parts(session: Session, task: Task, labels: pd.DataFrame, verdicts: pd.DataFrame | None = None) -> None:
    """Add `position` to the coded frames (and `active` to the verdicts) from one read of their parts, as the outer
    join of join_target gives them: a target whose part is not found has no position (NaN; a frame where none is
    found: None) and counts as active.

    The parts are read by id once, whatever the number of labels and verdicts on each: their id range when the ids
    are dense (a primary-key range scan), else IN lists. A sample target has nothing to place (read as before)."""
    kind = judging(task).target
    if not kind.within:
        return
    frames = [f for f in (labels, verdicts) if f is not None]
    ids = [f["target_id"].to_numpy(dtype=np.int64) for f in frames]
    index = IdIndex(np.concatenate(ids)) if sum(len(i) for i in ids) else None
    wanted = index.ids[index.ids > 0] if index is not None else np.empty(0, dtype=np.int64)  # 0: no part (NULL)
    columns = (kind.row.id, getattr(kind.row, kind.position), kind.row.active)
    kinds = {"id": INT, "position": INT, "active": BOOL}
    if len(wanted) and IdIndex.is_dense(int(wanted[0]), int(wanted[-1]), len(wanted)):
        queries = [sa_select(*columns).where(kind.row.id.between(int(wanted[0]), int(wanted[-1])))]
    else:
        queries = [sa_select(*columns).where(kind.row.id.in_(wanted[start:start + PARTS_IN_LIST].tolist()))
                   for start in range(0, len(wanted), PARTS_IN_LIST)]
    parts = [read_columns(session, query, kinds) for query in queries]
    found = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame({name: [] for name in kinds})
    order = np.argsort(found["id"].to_numpy(dtype=np.int64), kind="stable")
    part_ids = found["id"].to_numpy(dtype=np.int64)[order]
    positions, active = found["position"].to_numpy(dtype=np.int64)[order], found["active"].to_numpy(dtype=bool)[order]
    for frame, target_ids in zip(frames, ids, strict=True):
        at = np.searchsorted(part_ids, target_ids)
        hit = np.zeros(len(target_ids), dtype=bool)
        inside = at < len(part_ids)
        hit[inside] = part_ids[at[inside]] == target_ids[inside]
        if hit.all():
            position = positions[at]
        elif hit.any():
            position = np.full(len(target_ids), np.nan)
            position[hit] = positions[at[hit]]
        else:
            position = np.array([None] * len(frame), dtype=object)
        frame.insert(frame.columns.get_loc("sample_id") + 1, "position", position)
        if frame is verdicts:  # a verdict whose part is not found counts as active, as _active fills the join's NULL
            is_active = np.ones(len(target_ids), dtype=bool)
            is_active[hit] = active[at[hit]]
            frame["active"] = is_active


def has_rows(session: Session, dataset: Dataset, task: Task, judge: Judge | None) -> bool:
    """Return whether the task has a label, or the judge a verdict of it, on the dataset: one query on indexed
    columns (the report's tasks with nothing to report cost this, not a read)."""
    in_dataset = sa_select(Sample.id).where(Sample.dataset_id == dataset.id)
    found = exists().where(Label.task_id == task.id, Label.sample_id.in_(in_dataset))
    if judge is not None:
        found = found | exists().where(Verdict.task_id == task.id, Verdict.judge_id == judge.id, Verdict.sample_id.in_(in_dataset))
    return bool(session.execute(sa_select(found)).scalar())


# The report's read of a target: its id (the part's, or the sample's for a sample target), and the text key only on
# a row whose key is not "<target>:<that id>" (none is written so; but the key is what a label means): coded_keys.
KEY_COLUMNS = ["target_id", "key_text"]
KEY_KINDS = {"target_id": INT, "key_text": CATEGORY}
_POWERS_FROM_ONE = np.uint64(10) ** np.arange(20, dtype=np.uint64)  # 1, 10, …, 10^19 (ids: at most models.MAX_ID)
_POWERS = _POWERS_FROM_ONE[1:]


def key_columns(task: Task, model) -> tuple:
    """Return the columns KEY_COLUMNS of a Label or Verdict query of the task."""
    kind = judging(task).target
    target_id = kind.column(model)
    canonical = model.target_key == literal(f"{kind.name}:") + cast(target_id, String)
    return (func.coalesce(target_id, 0).label("target_id"),
            case((canonical, None), else_=model.target_key).label("key_text"))


def coded_keys(task: Task, *frames: pd.DataFrame) -> list[pd.DataFrame]:
    """Return the frames with KEY_COLUMNS replaced by `target_key`: one Categorical over the sorted text keys of all.

    The text "<target>:<id>" is made once per distinct target, already in its text order: decimal ids sort as text
    by their digits padded on the right, shorter first ("claim:10" < "claim:9"), so no string is sorted or hashed;
    the rows' codes are integer lookups. A row with an odd key (`key_text`) falls back to sorting the text.
    """
    prefix = f"{judging(task).target.name}:"
    ids = [f["target_id"].to_numpy(dtype=np.int64) for f in frames]
    odd = [f["key_text"].notna().to_numpy() for f in frames]
    index = IdIndex(np.concatenate([i[~o] for i, o in zip(ids, odd, strict=True)]))
    unique_ids = index.ids
    extra = pd.unique(pd.concat([f["key_text"][o].astype(object) for f, o in zip(frames, odd, strict=True)]))
    if len(extra):  # the rare odd key: sort every key as text (an odd key may equal a target's own)
        text = np.array([prefix + str(i) for i in unique_ids.tolist()] + [str(t) for t in extra], dtype=str)
        sorted_text, rank = np.unique(text, return_inverse=True)
        categories = sorted_text.tolist()
    else:
        digits = np.searchsorted(_POWERS, unique_ids.astype(np.uint64), side="right") + 1  # of a positive id
        width = int(digits.max()) if len(unique_ids) else 0
        padded = unique_ids.astype(np.uint64) * _POWERS_FROM_ONE[width - digits]
        order = np.lexsort((digits, padded))
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        categories = [prefix + str(i) for i in unique_ids[order].tolist()]
    dtype = pd.CategoricalDtype(pd.Index(categories, dtype="str"))
    extra_index = pd.Index(extra, dtype=object)
    out = []
    for frame, target_ids, is_odd in zip(frames, ids, odd, strict=True):
        codes = np.empty(len(frame), dtype=np.int64)
        codes[~is_odd] = rank[index.places(target_ids[~is_odd])]
        if is_odd.any():
            codes[is_odd] = rank[len(unique_ids) + extra_index.get_indexer(frame["key_text"][is_odd].astype(object))]
        frame = frame.drop(columns=KEY_COLUMNS)
        frame.insert(0, "target_key", pd.Categorical.from_codes(codes, dtype=dtype))
        out.append(frame)
    return out


class IdIndex:
    """The distinct ids of an integer column (sorted, `ids`) and where each id of another column is among them.

    Ids in the database are dense (autoincrement keys): when the largest is within a few times the count, one array
    indexed by id answers (O(n), no sort or hash of 10^6 ids); otherwise a sort and binary searches do.
    """

    DENSE = 4  # an id array of at most DENSE × the rows + SLACK is indexed directly
    SLACK = 1024

    @classmethod
    def is_dense(cls, lowest: int, highest: int, count: int) -> bool:
        """Return whether ids from `lowest` to `highest`, `count` of them, are dense enough to be read or indexed whole."""
        return highest - lowest < cls.DENSE * count + cls.SLACK

    def __init__(self, values: np.ndarray) -> None:
        values = np.asarray(values, dtype=np.int64)
        top = int(values.max()) if len(values) else -1
        self._table = None
        if len(values) and int(values.min()) >= 0 and self.is_dense(0, top, len(values)):
            present = np.zeros(top + 1, dtype=bool)
            present[values] = True
            self.ids = np.flatnonzero(present)
            self._table = np.full(top + 1, -1, dtype=np.int64)
            self._table[self.ids] = np.arange(len(self.ids))
        else:
            self.ids = np.unique(values)

    def places(self, values: np.ndarray) -> np.ndarray:
        """Return each value's place in `ids` (every value must be one of them)."""
        values = np.asarray(values, dtype=np.int64)
        if self._table is not None:
            return self._table[values]
        return np.searchsorted(self.ids, values)


def _annotator_names(session: Session, ids: pd.Series) -> pd.Categorical:
    """Return the annotators' usernames of a column of user ids, as a categorical over the sorted names (missing where
    the user row is gone: the plain read's join leaves such a label out, and so does coded_frames)."""
    ids = ids.to_numpy(dtype=np.int64)
    index = IdIndex(ids)
    found = index.ids
    names = dict(session.execute(sa_select(User.id, User.username).where(User.id.in_(found.tolist()))).all()) if len(found) else {}
    categories = sorted(names.values())
    place = {name: i for i, name in enumerate(categories)}
    code_of = np.array([place[names[i]] if i in names else -1 for i in found.tolist()], dtype=np.int64)
    return pd.Categorical.from_codes(code_of[index.places(ids)] if len(ids) else ids,
                                     dtype=pd.CategoricalDtype(pd.Index(categories, dtype="str")))


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
    """Return the target keys of the few-shot examples of the judge's prompt version (none for an imported judge):
    the targets every agreement figure leaves out and counts (the report, compare, `golden drift --judge`)."""
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
    """Return sample id → number of its active parts of one kind (a TargetKind's `row`: Claim, Context, Step), in id order.

    When the dataset's sample ids are one dense range (every id from the least to the greatest is one of its samples,
    as an import makes them), a part belongs to the dataset exactly when its sample id is in that range: the parts are
    counted in the order of their (sample_id, …) index, without the join to `sample` and a sort for the GROUP BY.
    """
    query = in_dataset(sa_select(row.sample_id, func.count()).where(row.active.is_(True)), row, dataset,
                       dense_sample_range(session, dataset)).group_by(row.sample_id)
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
