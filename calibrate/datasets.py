"""Read-side queries for browsing datasets and samples (the views render what these return)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session, select

from calibrate.errors import CalibrationError
from calibrate.models import Assignment, Claim, Context, Dataset, Label, Response, Sample, Task, User, visible_dataset
from calibrate.reasons import Reason


@dataclass
class DatasetRow:
    dataset: Dataset
    samples: int
    claims: int
    labels: int
    annotators: int
    assignments_done: int
    assignments: int


def dataset_overview(session: Session) -> list[DatasetRow]:
    """Return every dataset with its counts, newest first."""
    datasets = session.exec(select(Dataset).where(visible_dataset()).order_by(Dataset.created_at.desc(), Dataset.id.desc())).all()
    rows = []
    for ds in datasets:
        samples = session.exec(select(func.count()).select_from(Sample).where(Sample.dataset_id == ds.id)).one()
        claims = session.exec(
            select(func.count()).select_from(Claim).join(Sample).where(Sample.dataset_id == ds.id, Claim.active)
        ).one()
        labels, annotators = session.exec(
            select(func.count(Label.id), func.count(func.distinct(Label.annotator_id))).join(Sample).where(Sample.dataset_id == ds.id)
        ).one()
        done, total = session.exec(
            select(func.count(Assignment.id).filter(Assignment.status == "done"), func.count(Assignment.id))
            .join(Sample).where(Sample.dataset_id == ds.id)
        ).one()
        rows.append(DatasetRow(ds, samples, claims, labels, annotators, done, total))
    return rows


def dataset_names(session: Session) -> list[str]:
    """Return the names of every dataset, sorted."""
    return list(session.exec(select(Dataset.name).where(visible_dataset()).order_by(Dataset.name)).all())


@dataclass
class SampleRow:
    sample: Sample
    claims: int
    labels: int


def sample_page(session: Session, dataset: Dataset, *, page: int = 1, per_page: int = 50,
                split: str | None = None) -> tuple[list[SampleRow], int]:
    """Return one page of a dataset's samples (with counts) and the total number of samples."""
    where = [Sample.dataset_id == dataset.id]
    if split:
        where.append(Sample.split == split)
    total = session.exec(select(func.count()).select_from(Sample).where(*where)).one()
    samples = session.exec(
        select(Sample).where(*where).order_by(Sample.id).offset((page - 1) * per_page).limit(per_page)
    ).all()
    ids = [s.id for s in samples]
    claim_counts = dict(
        session.exec(select(Claim.sample_id, func.count()).where(Claim.sample_id.in_(ids), Claim.active).group_by(Claim.sample_id)).all()
    ) if ids else {}
    label_counts = dict(
        session.exec(select(Label.sample_id, func.count()).where(Label.sample_id.in_(ids)).group_by(Label.sample_id)).all()
    ) if ids else {}
    return [SampleRow(s, claim_counts.get(s.id, 0), label_counts.get(s.id, 0)) for s in samples], total


@dataclass
class AnswerPiece:
    """A run of answer text, either plain (claim None) or the span of one claim."""

    text: str
    claim: int | None = None


@dataclass
class SampleDetail:
    sample: Sample
    contexts: list[Context]
    claims: list[Claim]
    pieces: list[AnswerPiece]
    unplaced: list[Claim]
    labels: list[tuple[Label, User, Task]] = field(default_factory=list)
    responses: list[Response] = field(default_factory=list)


def sample_responses(session: Session, sample_id: int) -> list[Response]:
    """Return a sample's responses in import order (empty for a sample that is not pairwise)."""
    return list(session.exec(select(Response).where(Response.sample_id == sample_id).order_by(Response.position)).all())


def answer_pieces(answer: str, claims: list[Claim]) -> tuple[list[AnswerPiece], list[Claim]]:
    """Split the answer into plain runs and claim spans; return them and the claims without a span."""
    placed = sorted((c for c in claims if 0 <= c.start < c.end <= len(answer)), key=lambda c: (c.start, c.end))
    pieces: list[AnswerPiece] = []
    unplaced = [c for c in claims if not (0 <= c.start < c.end <= len(answer))]
    pos = 0
    for claim in placed:
        if claim.start < pos:  # overlapping spans: show the later claim below the answer instead
            unplaced.append(claim)
            continue
        if claim.start > pos:
            pieces.append(AnswerPiece(answer[pos:claim.start]))
        pieces.append(AnswerPiece(answer[claim.start:claim.end], claim.index))
        pos = claim.end
    if pos < len(answer):
        pieces.append(AnswerPiece(answer[pos:]))
    return pieces, sorted(unplaced, key=lambda c: c.index)


def sample_detail(session: Session, dataset: Dataset, external_id: str, *, with_labels: bool) -> SampleDetail | None:
    """Return a sample with its contexts, claims, highlighted answer and (if asked) everyone's labels."""
    sample = session.exec(
        select(Sample).where(Sample.dataset_id == dataset.id, Sample.external_id == external_id)
    ).first()
    if sample is None:
        return None
    contexts = list(session.exec(select(Context).where(Context.sample_id == sample.id, Context.active).order_by(Context.rank)).all())
    claims = list(session.exec(select(Claim).where(Claim.sample_id == sample.id, Claim.active).order_by(Claim.index)).all())
    pieces, unplaced = answer_pieces(sample.answer, claims)
    labels = []
    if with_labels:
        labels = list(
            session.exec(
                select(Label, User, Task).join(User, Label.annotator_id == User.id).join(Task, Label.task_id == Task.id)
                .where(Label.sample_id == sample.id).order_by(Task.id, Label.target_key, User.username)
            ).all()
        )
    return SampleDetail(sample, contexts, claims, pieces, unplaced, labels, sample_responses(session, sample.id))


def split_samples(session: Session, dataset: Dataset, split: str) -> set[int]:
    """Return the ids of the dataset's samples in `split` (CalibrationError naming the splits if none)."""
    rows = session.execute(sa_select(Sample.id, Sample.split).where(Sample.dataset_id == dataset.id)).all()
    ids = {sid for sid, value in rows if value == split}
    if not ids:
        present = sorted({value for _, value in rows if value})
        if not present:
            raise CalibrationError(Reason("split_empty_none", dataset=dataset.name, split=split))
        raise CalibrationError(Reason("split_empty", dataset=dataset.name, split=split, splits=", ".join(present)))
    return ids
