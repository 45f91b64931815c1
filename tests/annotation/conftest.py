"""Fixtures for the annotation domain: samples with claims and contexts, users, assignments."""

from __future__ import annotations

import pytest
from sqlmodel import select

from calibrate.models import Assignment, Claim, Context, Sample, Task


class Work:
    """Build items and queue them, straight into the database (no import code involved)."""

    def __init__(self, session, make_sample, make_user):
        self.session = session
        self._make_sample = make_sample
        self._make_user = make_user

    def user(self, name="ana", role="annotator"):
        return self._make_user(name, role)

    def sample(self, external_id="s1", *, dataset="d", claims=("Uno.", "Dos.", "Tres."), contexts=("ctx A", "ctx B"), **fields):
        answer = " ".join(claims) if claims else "Sin afirmaciones"
        return self._make_sample(dataset=dataset, external_id=external_id, question="¿Pregunta?", answer=answer,
                                 contexts=contexts, claims=list(claims), **fields)

    def assign(self, sample, user=None, *, status="pending", priority=1):
        assignment = Assignment(sample_id=sample.id, user_id=user.id if user else None, status=status, priority=priority)
        self.session.add(assignment)
        self.session.commit()
        return assignment

    def task(self, name):
        return self.session.exec(select(Task).where(Task.name == name)).one()

    def claims(self, sample):
        return list(self.session.exec(select(Claim).where(Claim.sample_id == sample.id).order_by(Claim.index)))

    def contexts(self, sample):
        return list(self.session.exec(select(Context).where(Context.sample_id == sample.id).order_by(Context.rank)))

    def reload(self, sample):
        return self.session.get(Sample, sample.id)


@pytest.fixture
def work(session, make_sample, make_user):
    return Work(session, make_sample, make_user)
