"""Helpers of the calibration-loop tests."""

from __future__ import annotations

from sqlmodel import select

from calibrate.models import Judge, Verdict


def copy_verdicts(session, source, name, version_id=None):
    """Give a judge the verdicts of another one (a run without running): a prompt version's
    judge when `version_id` is given, else an imported judge. Commits; returns the judge."""
    judge = Judge(name=name, kind="prompt", prompt_version_id=version_id) if version_id else Judge(name=name, kind="imported")
    session.add(judge)
    session.flush()
    for v in session.exec(select(Verdict).where(Verdict.judge_id == source.id)).all():
        session.add(Verdict(judge_id=judge.id, task_id=v.task_id, sample_id=v.sample_id, claim_id=v.claim_id,
                            target_key=v.target_key, value=v.value, status=v.status, source="import"))
    session.commit()
    return judge
