"""`Store`: build a dataset and store labels and verdicts directly, so tests of the statistics,
reports and A/B need no import code. Shared by tests/calibration, tests/reports and test_cli_ab."""

from __future__ import annotations

from sqlmodel import select

from calibrate.accounts import ensure_annotator
from calibrate.models import Claim, Context, Dataset, Judge, Label, Sample, Step, Task, Verdict


class Store:
    """Build a dataset of samples with claims/contexts, and store labels and verdicts on them."""

    def __init__(self, session):
        self.session = session
        self.dataset = Dataset(name="d", source="test")
        session.add(self.dataset)
        session.flush()
        self.samples: dict[str, Sample] = {}
        self.claims: dict[tuple[str, int], Claim] = {}
        self.contexts: dict[tuple[str, int], Context] = {}
        self.steps: dict[tuple[str, int], Step] = {}
        self.judges: dict[str, Judge] = {}

    def task(self, name):
        return self.session.exec(select(Task).where(Task.name == name)).one()

    def sample(self, sid, n_claims=0, n_contexts=0, meta=None, n_steps=0):
        s = Sample(dataset_id=self.dataset.id, external_id=sid, question="q", answer="a", content_hash="h", meta=meta or {})
        self.session.add(s)
        self.session.flush()
        self.samples[sid] = s
        for i in range(n_claims):
            c = Claim(sample_id=s.id, index=i, text=f"c{i}", start=-1, end=-1)
            self.session.add(c)
            self.session.flush()
            self.claims[(sid, i)] = c
        for r in range(n_contexts):
            c = Context(sample_id=s.id, rank=r, text=f"x{r}")
            self.session.add(c)
            self.session.flush()
            self.contexts[(sid, r)] = c
        for i in range(n_steps):
            step = Step(sample_id=s.id, index=i, kind="tool" if i % 2 else "llm", name=f"step{i}", input=f"in{i}",
                        output=f"out{i}")
            self.session.add(step)
            self.session.flush()
            self.steps[(sid, i)] = step
        return s

    def _target(self, task, sid, claim=None, context=None, step=None):
        s = self.samples[sid]
        if task.target == "step":
            row = self.steps[(sid, step)]
            return dict(sample_id=s.id, step_id=row.id, target_key=f"step:{row.id}")
        if task.target == "claim":
            c = self.claims[(sid, claim)]
            return dict(sample_id=s.id, claim_id=c.id, target_key=f"claim:{c.id}")
        if task.target == "context":
            c = self.contexts[(sid, context)]
            return dict(sample_id=s.id, context_id=c.id, target_key=f"context:{c.id}")
        return dict(sample_id=s.id, target_key=f"sample:{s.id}")

    def label(self, task_name, annotator, sid, value, claim=None, context=None, adjudicated=False, step=None):
        task = self.task(task_name)
        user = ensure_annotator(self.session, annotator)
        self.session.add(Label(task_id=task.id, annotator_id=user.id, value=str(value), adjudicated=adjudicated,
                               source="import", **self._target(task, sid, claim, context, step)))

    def verdict(self, judge_name, task_name, sid, value, claim=None, context=None, status="ok", step=None):
        task = self.task(task_name)
        judge = self.judges.get(judge_name)
        if judge is None:
            judge = self.judges[judge_name] = Judge(name=judge_name, kind="imported")
            self.session.add(judge)
            self.session.flush()
        self.session.add(Verdict(judge_id=judge.id, task_id=task.id, value=None if value is None else str(value),
                                 status=status if value is not None else "unparsed", source="import",
                                 **self._target(task, sid, claim, context, step)))

    def commit(self):
        self.session.commit()
