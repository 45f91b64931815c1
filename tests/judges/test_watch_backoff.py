"""A watcher backs off a job that fails pass after pass (issue 30, LOW): tried after 1, 2, 4 … passes, not every pass.

The red team's case: an answer whose render is refused at every pass (over PROMPT_RENDER_MAX_CHARS) was asked again each
pass, for ever. Passes are driven one by one (`one_pass`), so no clock is involved.
"""

from __future__ import annotations

import json
import threading

from judge_helpers import fast_options
from sqlmodel import select

from calibrate.db import write_session
from calibrate.ingest import import_file
from calibrate.judges.sandbox import Limits
from calibrate.judges.watch import BACKOFF_MAX_PASSES, Watcher, WatchSpec
from calibrate.models import Verdict


def test_a_job_that_fails_every_pass_is_backed_off_and_a_success_forgets_it(engine, session, fake_llm, claims_prompt,
                                                                            tmp_path):
    long_claim = "Take " + "ten " * 3000 + "mg."  # its render is over the 6,000-character limit below: refused each pass
    rows = [{"id": "short", "question": "How much?", "answer": "Take 10 mg.", "claims": ["Take 10 mg."],
             "contexts": ["Take 10 mg a day."]},
            {"id": "long", "question": "How much?", "answer": long_claim, "claims": [long_claim],
             "contexts": ["Take 10 mg a day."]}]
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with write_session(engine) as s:
        import_file(s, "samples", path, dataset="many")
    spec = WatchSpec("many", claims_prompt(), backend="openai", base_url=fake_llm.openai_base, api_key_env="",
                     options=fast_options(concurrency=2))
    watcher = Watcher(engine, spec, limits=Limits(max_chars=6_000))
    stop = threading.Event()
    tried, backed_off = [], []
    for number in range(1, 11):
        summary = watcher.one_pass(number, stop)
        errors = sum(run.n_errors for run in summary.runs)
        if errors:
            tried.append(number)
        backed_off.append(summary.backed_off)
        if number in (3, 5):
            assert "1 jobs that failed before are backed off" in "\n".join(summary.lines())
    assert tried == [1, 2, 4, 8]  # failures 1, 2, 3, 4: it sits out 0, 1, 3, then 7 passes
    assert backed_off == [0, 0, 1, 0, 1, 1, 1, 0, 1, 1]
    assert fake_llm.stats()["requests"] == 1  # the short one, judged once in pass 1; the long one never reached it
    session.expire_all()
    error = session.exec(select(Verdict).where(Verdict.status == "error")).one()
    assert "longer than the 6,000-character limit" in error.error
    # Once it succeeds (here: the limit lifted), it is forgotten: judged in its next due pass, never backed off again.
    watcher.limits = Limits()
    summary = watcher.one_pass(16, stop)
    assert [run.n_ok for run in summary.runs] == [1] and watcher.failing == {}
    assert BACKOFF_MAX_PASSES == 32
