"""Samples out: a dataset's samples in the format `calibrate import samples` reads (docs/formats.md).

Each record carries the sample's current claims as `{"text", "start", "end"}` objects (the span
into the answer, -1/-1 when the claim is not in it) and its `claim_source` (segmenter, import,
NAME@V, …+edited), so importing the file into another dataset gives back the same samples
with the same claims and sources, and exporting that dataset gives the same file again (a
test checks the round trip, in both formats). Optional fields without a value are left out.

A stored span that does not match the answer (only possible in data written by hand into the
database) is exported as -1/-1, so the file always imports. A pairwise sample carries its
`responses` ({id, text, model, metadata}, in import order), and its `answer` (with claims) only
when it has one. A sample with a trajectory carries its active `steps` in canonical form
(ingest/step_records.py), which import to the same steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from calibrate import lookup
from calibrate.datasets import split_samples
from calibrate.ingest.sample_records import SAMPLE_FIELDS, response_record
from calibrate.ingest.step_records import STEP_COLUMNS, stored_steps
from calibrate.models import Claim, Context, Response, Sample, Step

# JSON-valued fields: a CSV cell holds their JSON text (what the import decodes).
STRUCTURED = ("contexts", "claims", "metadata", "retrieved_ids", "relevant_ids", "responses", "steps")
BATCH = 500


@dataclass
class SampleExport:
    """The exported records (dicts in SAMPLE_FIELDS order, optional fields without a value left out)."""

    dataset: str
    fields: tuple[str, ...] = SAMPLE_FIELDS
    rows: list[dict[str, Any]] = field(default_factory=list)
    n_unplaced: int = 0  # claims exported without a span

    def summary(self) -> str:
        """Return the line the CLI prints on stderr."""
        claims = sum(len(row.get("claims", [])) for row in self.rows)
        return (f"exported {len(self.rows)} samples of {self.dataset} with {claims} claims "
                f"({self.n_unplaced} not found verbatim in their answer)")


def _span(answer: str, claim: Any) -> tuple[int, int]:
    """Return the claim's span if it marks the claim's text in the answer (up to whitespace), else (-1, -1)."""
    start, end = claim.start, claim.end
    if 0 <= start < end <= len(answer) and answer[start:end].split() == claim.text.split():
        return start, end
    return -1, -1


def export_samples(session: Session, dataset_name: str, *, split: str | None = None) -> SampleExport:
    """Return the dataset's samples (of `split`) in import order (by id), with their active contexts and claims.

    Raises NotFound for an unknown dataset and CalibrationError for a split it does not have.
    """
    dataset = lookup.dataset(session, dataset_name)
    where = [Sample.dataset_id == dataset.id]
    if split:
        split_samples(session, dataset, split)  # a split without samples: an error naming the splits
        where.append(Sample.split == split)
    ids = list(session.execute(sa_select(Sample.id).where(*where).order_by(Sample.id)).scalars())
    out = SampleExport(dataset.name)
    for start in range(0, len(ids), BATCH):
        chunk = ids[start:start + BATCH]
        contexts: dict[int, list] = {}
        for row in session.execute(sa_select(Context.sample_id, Context.text, Context.doc_id)
                                   .where(col(Context.sample_id).in_(chunk), col(Context.active).is_(True))
                                   .order_by(Context.sample_id, Context.rank)):
            contexts.setdefault(row.sample_id, []).append(row.text if row.doc_id is None else {"text": row.text, "doc_id": row.doc_id})
        claims: dict[int, list] = {}
        for row in session.execute(sa_select(Claim.sample_id, Claim.text, Claim.start, Claim.end)
                                   .where(col(Claim.sample_id).in_(chunk), col(Claim.active).is_(True))
                                   .order_by(Claim.sample_id, Claim.index)):
            claims.setdefault(row.sample_id, []).append(row)
        responses: dict[int, list] = {}
        for row in session.execute(sa_select(Response.sample_id, Response.key, Response.text, Response.model, Response.meta)
                                   .where(col(Response.sample_id).in_(chunk)).order_by(Response.sample_id, Response.position)):
            record = response_record(row.key, row.text, row.model, row.meta)
            responses.setdefault(row.sample_id, []).append({k: v for k, v in record.items() if v is not None})
        step_rows: dict[int, list] = {}
        for row in session.execute(sa_select(Step.sample_id, *(getattr(Step, name) for name in STEP_COLUMNS))
                                   .where(col(Step.sample_id).in_(chunk), col(Step.active).is_(True))
                                   .order_by(Step.sample_id, Step.index)):
            step_rows.setdefault(row.sample_id, []).append(row)
        for sample in session.execute(sa_select(Sample).where(col(Sample.id).in_(chunk)).order_by(Sample.id)).scalars():
            placed = []
            for claim in claims.get(sample.id, []):
                begin, end = _span(sample.answer, claim)
                out.n_unplaced += begin < 0
                placed.append({"text": claim.text, "start": begin, "end": end})
            record: dict[str, Any] = {
                "id": sample.external_id, "question": sample.question, "answer": sample.answer,
                "contexts": contexts.get(sample.id, []), "ground_truth": sample.ground_truth, "claims": placed,
                "claim_source": sample.claim_source, "metadata": sample.meta or None, "feedback": sample.feedback,
                "retrieved_ids": sample.retrieved_ids, "relevant_ids": sample.relevant_ids,
                "responses": responses.get(sample.id),
                "steps": stored_steps(step_rows[sample.id]) if sample.id in step_rows else None,
            }
            if record["responses"] and not sample.answer:  # a pairwise sample without an answer: none, nor claims
                record["answer"] = record["claims"] = record["claim_source"] = None
            out.rows.append({name: record[name] for name in SAMPLE_FIELDS if record[name] is not None})
    return out
