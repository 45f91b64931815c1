"""Claim extraction runs: the `claim_extraction` task through the one runner, and its apply step.

An extraction is a prompt version of the built-in task `claim_extraction` (kind `extraction`:
the verdict's value is the answer's claims as a JSON list). It runs exactly like every judge
run (runner.py on execution.py: backends, cache, retries, budgets, resume); what is its own:

    eligible(...)       which answers it may change: not those whose claims carry expert
                        labels, unless --force
    applied_keys(...)   the answers already done: an `ok` verdict of this version AND the
                        sample's claims are its claims (source NAME@V, or NAME@V+edited)
    Applier             the apply step the run's writer calls in the same transaction as it
                        stores the verdicts: the claims replace the sample's active claims
                        (calibrate.claimsets.replace_claim_sets), so a verdict and its claims are
                        committed together and a kill -9 never leaves one without the other
    outcome_report(...) the summary `calibrate claims extract` and the dataset page print,
                        read from the database (the same after a resume)

An unparseable or empty extraction, or a failed call, is stored as the verdict of its answer
(status unparsed or error, value NULL) and changes no claim. A rerun asks nothing for an
answer already done; one whose extraction failed is taken again (an unparsed answer comes
back from the response cache, a failed call is made again).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from calibrate import lookup
from calibrate.claimsets import base_source, expert_work, replace_claim_sets, verbatim_spans
from calibrate.judges.errors import RunSetupError
from calibrate.judges.items import Scope, Target, fewshot_keys, select_targets
from calibrate.judges.versions import judge_name, resolve_version
from calibrate.models import EXTRACTION, Claim, Dataset, Judge, Label, Prompt, PromptVersion, Sample, Task, Verdict
from calibrate.reasons import Reason
from calibrate.task_values import is_extraction

KEPT = "carry expert labels or corrections"  # why an answer was left out without --force


def stale_reason(judge_name: str) -> str:
    """Return the reason a label gets when --force re-extracts the claims it was on."""
    return f"claims re-extracted by {judge_name}"


def check_task(task: Task, ref: str, *, extraction: bool) -> None:
    """Refuse a prompt of the wrong kind for the command (`claims extract` or `judge run`)."""
    if extraction and not is_extraction(task):
        raise RunSetupError(Reason("extract_wrong_task", ref=ref, task=task.name))
    if not extraction and is_extraction(task):
        raise RunSetupError(Reason("run_extraction_prompt", ref=ref))


def eligible(session: Session, targets: list[Target], *, force: bool) -> tuple[list[Target], int]:
    """Return the answers the extraction may change, and how many were left out for carrying expert work.

    Expert work is a current label on one of the answer's claims, or a claim an expert split,
    merged or edited (claim source "…+edited"): without --force neither is overwritten. An
    answer already carrying this version's claims is kept here (`applied_keys` says it is done).
    """
    if force:
        return targets, 0
    protected = expert_work(session, [t.sample_id for t in targets])
    kept = [t for t in targets if t.sample_id not in protected]
    return kept, len(targets) - len(kept)


def applied_keys(session: Session, judge: Judge | None, targets: list[Target]) -> set[str]:
    """Return the targets done: an ok verdict of the judge, and the sample's claims are its claims."""
    if judge is None or not targets:
        return set()
    ids = sorted({t.sample_id for t in targets})
    done: set[str] = set()
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        ok = set(session.exec(select(Verdict.sample_id).where(Verdict.judge_id == judge.id, Verdict.status == "ok",
                                                               col(Verdict.sample_id).in_(chunk))).all())
        rows = session.exec(select(Sample.id, Sample.claim_source).where(col(Sample.id).in_(chunk))).all()
        done |= {f"sample:{sid}" for sid, source in rows if sid in ok and base_source(source) == judge.name}
    return done


class Applier:
    """The apply step of an extraction run: called by the run's writer with each batch it stores."""

    def __init__(self, judge_name: str, *, force: bool) -> None:
        self.judge_name = judge_name
        self.force = force

    def __call__(self, session: Session, outcomes: list) -> None:
        """Replace the claims of every answer extracted in this batch (inside the writer's transaction)."""
        ok = [o for o in outcomes if o.status == "ok" and o.value]
        if not ok:
            return
        # Labels or corrections may have arrived since the run was prepared: checked again here, in the write lock.
        protected = set() if self.force else expert_work(session, [o.target.sample_id for o in ok])
        todo = {o.target.sample_id: o.value for o in ok if o.target.sample_id not in protected}
        answers = dict(session.execute(sa_select(Sample.id, Sample.answer).where(col(Sample.id).in_(list(todo)))).all()) if todo else {}
        changes = {sid: verbatim_spans(answers[sid], json.loads(value)) for sid, value in todo.items()}
        replace_claim_sets(session, changes, source=self.judge_name, origin=self.judge_name, reason=stale_reason(self.judge_name))


@dataclass
class ExtractReport:
    """What an extraction did to its answers, read from the database (so a resume reports the same)."""

    judge: str
    dataset: str
    n_answers: int = 0  # the run's answers (its scope), labelled ones included
    extracted: int = 0  # answers whose claims are this version's now
    n_claims: int = 0  # their active claims
    no_span: int = 0  # of which not found verbatim in the answer
    kept_labelled: int = 0  # left out: their claims carry expert labels or corrections (no --force)
    failed: dict[str, list[str]] = field(default_factory=dict)  # unparsed | empty | error → sample ids
    not_done: int = 0  # no verdict yet (the run stopped)
    stale_labels: int = 0  # labels flagged stale by this version's re-extraction

    @property
    def n_failed(self) -> int:
        return sum(len(ids) for ids in self.failed.values())

    def failure_line(self) -> str:
        """Return "3 answers could not be extracted: unparsed" (kinds counted when mixed), or ""."""
        if not self.n_failed:
            return ""
        kinds = sorted(self.failed.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        what = kinds[0][0] if len(kinds) == 1 else ", ".join(f"{len(ids)} {kind}" for kind, ids in kinds)
        ids = [sid for _, names in kinds for sid in names]
        shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
        n = self.n_failed
        return (f"{n} answer{'s' * (n != 1)} could not be extracted: {what} ({shown}); "
                f"{'their' if n != 1 else 'its'} claims are unchanged")

    def lines(self) -> list[str]:
        """Return what `calibrate claims extract` prints after the run's own lines."""
        out = [f"{self.judge} on {self.dataset}: {self.extracted} of {self.n_answers} answers carry its claims "
               f"({self.n_claims} claims, {self.no_span} not found verbatim in the answer)"]
        if self.kept_labelled:
            out.append(f"{self.kept_labelled} answer{'s' * (self.kept_labelled != 1)} kept {'their' if self.kept_labelled != 1 else 'its'} "
                       f"claims: they {KEPT} (--force re-extracts them, flagging those labels stale)")
        if self.stale_labels:
            out.append(f"{self.stale_labels} label{'s' * (self.stale_labels != 1)} flagged stale ({stale_reason(self.judge)})")
        if self.failed:
            out.append(self.failure_line())
        if self.not_done:
            out.append(f"{self.not_done} answer{'s' * (self.not_done != 1)} not extracted yet: run the same command again to continue")
        return out


def failure_kind(status: str, error: str) -> str:
    """Return how an extraction failed: "error" (the call), "empty" (no claims) or "unparsed"."""
    if status == "error":
        return "error"
    return "empty" if (error or "").startswith("empty") else "unparsed"


def extraction_versions(session: Session) -> list[str]:
    """Return every version of every claim_extraction prompt as NAME@V, newest version first per prompt."""
    rows = session.exec(select(Prompt.name, PromptVersion.number).join(PromptVersion, PromptVersion.prompt_id == Prompt.id)
                        .join(Task, Task.id == Prompt.task_id).where(Task.kind == EXTRACTION)
                        .order_by(Prompt.name, col(PromptVersion.number).desc())).all()
    return [f"{name}@{number}" for name, number in rows]


def report_for(session: Session, dataset_name: str, prompt_ref: str, *, limit: int | None = None,
               force: bool = False) -> ExtractReport:
    """Return what extraction `prompt_ref` did on the dataset's answers (`limit`: the first N, as the run's scope)."""
    dataset = lookup.dataset(session, dataset_name)
    prompt, version = resolve_version(session, prompt_ref)
    task = session.get(Task, prompt.task_id)
    name = judge_name(prompt, version)
    targets = select_targets(session, dataset, task, Scope(limit=limit), exclude=fewshot_keys(session, version))
    judge = session.exec(select(Judge).where(Judge.name == name)).first()
    return outcome_report(session, judge or Judge(name=name), dataset, targets, force=force)


def outcome_report(session: Session, judge: Judge, dataset: Dataset, targets: list[Target], *, force: bool) -> ExtractReport:
    """Return what the extraction `judge` did on these answers (the run's scope)."""
    report = ExtractReport(judge.name, dataset.name, n_answers=len(targets))
    sample_ids = sorted({t.sample_id for t in targets})
    if not sample_ids:
        return report
    verdicts: dict[int, tuple[str, str]] = {}
    samples: dict[int, tuple[str, str]] = {}
    for start in range(0, len(sample_ids), 500):
        chunk = sample_ids[start:start + 500]
        verdicts.update({sid: (status, error) for sid, status, error in session.exec(
            select(Verdict.sample_id, Verdict.status, Verdict.error).where(Verdict.judge_id == judge.id,
                                                                         col(Verdict.sample_id).in_(chunk))).all()})
        samples.update({sid: (ext, source) for sid, ext, source in session.exec(
            select(Sample.id, Sample.external_id, Sample.claim_source).where(col(Sample.id).in_(chunk))).all()})
    labelled = set() if force else expert_work(session, sample_ids)
    mine = []
    failed: dict[str, list[str]] = {}
    for sid in sample_ids:
        external, source = samples[sid]
        status, error = verdicts.get(sid, ("", ""))
        if status == "ok" and base_source(source) == judge.name:
            mine.append(sid)
        elif sid in labelled:
            report.kept_labelled += 1
        elif status in ("unparsed", "error"):
            failed.setdefault(failure_kind(status, error), []).append(external)
        else:
            report.not_done += 1
    report.extracted = len(mine)
    report.failed = failed
    for start in range(0, len(mine), 500):
        chunk = mine[start:start + 500]
        total, unplaced = session.execute(
            sa_select(func.count(), func.count().filter(Claim.start < 0))
            .where(col(Claim.sample_id).in_(chunk), col(Claim.active).is_(True))).one()
        report.n_claims += total
        report.no_span += unplaced
    report.stale_labels = session.execute(
        sa_select(func.count()).select_from(Label).join(Sample, Sample.id == Label.sample_id)
        .where(Sample.dataset_id == dataset.id, Label.stale_reason == stale_reason(judge.name))).scalar_one()
    return report
