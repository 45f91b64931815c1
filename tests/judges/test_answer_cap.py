"""Judge answers are read with a size cap (issue 20, finding 4): JUDGE_MAX_ANSWER_BYTES, 1 MiB decoded
by default, checked while the body streams and while it is decompressed, so a 3 MiB answer and a
gzip bomb (about 1 MB on the wire, 1 GiB inflated) are each one item's error naming the size, and
nothing of them is stored. Both transports: the h11 one (http://) and httpx's default one (the
https:// path), against a real local server."""

from __future__ import annotations

import asyncio
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from judge_helpers import fast_options
from sqlmodel import select

from calibrate.judges import RunSpec, run_judge
from calibrate.judges.backends import Endpoint, build_client, make_backend
from calibrate.judges.errors import RequestRejected
from calibrate.judges.render import Rendered
from calibrate.judges.sandbox import Limits
from calibrate.models import ResponseCache, Verdict

MIB = 1024 * 1024


def test_a_huge_answer_and_a_gzip_bomb_are_item_errors_naming_the_size_and_nothing_huge_is_stored(
        engine, session, fake_llm, claims_dataset, claims_prompt):
    fake_llm.script = ["huge", "gzip_bomb"]
    claims_dataset(n_samples=2, claims_per_sample=2)
    spec = RunSpec(dataset="many", prompt=claims_prompt(), backend="openai", base_url=fake_llm.openai_base,
                   api_key_env="", options=fast_options(concurrency=1))
    summary = run_judge(engine, spec)
    assert summary.status == "done" and summary.n_ok == 2 and summary.n_errors == 2
    errors = sorted(v.error for v in session.exec(select(Verdict).where(Verdict.status == "error")).all())
    base = fake_llm.openai_base + "/chat/completions"
    assert errors == [
        f"the answer from {base} was refused: the answer decompresses to more than 1,048,576 bytes; answers may have "
        "at most 1,048,576 bytes (JUDGE_MAX_ANSWER_BYTES)",
        f"the answer from {base} was refused: the answer is more than 2,097,152 bytes on the wire; answers may have "
        "at most 1,048,576 bytes (JUDGE_MAX_ANSWER_BYTES)",
    ]
    assert fake_llm.stats()["requests"] == 4  # refused, not retried: the same call would answer the same
    stored = [len(v.raw or "") for v in session.exec(select(Verdict)).all()]
    stored += [len(r.response or "") for r in session.exec(select(ResponseCache)).all()]
    assert max(stored) < 10_000


def test_the_cap_is_a_setting(engine, session, fake_llm, claims_dataset, claims_prompt):
    fake_llm.huge_bytes = 300_000
    fake_llm.script = ["huge"]
    claims_dataset(n_samples=1, claims_per_sample=2)
    spec = RunSpec(dataset="many", prompt=claims_prompt(), backend="openai", base_url=fake_llm.openai_base,
                   api_key_env="", options=fast_options(concurrency=1))
    summary = run_judge(engine, spec, limits=Limits.from_settings({"JUDGE_MAX_ANSWER_BYTES": 100_000}))
    assert summary.n_errors == 1 and summary.n_ok == 1
    error = session.exec(select(Verdict.error).where(Verdict.status == "error")).one()
    assert "at most 100,000 bytes (JUDGE_MAX_ANSWER_BYTES)" in error


@pytest.mark.parametrize(("fault", "message"), [
    ("huge", "the answer is more than 1,048,576 bytes"),
    ("gzip_bomb", "the answer decompresses to more than 1,048,576 bytes"),
])
def test_httpx_default_transport_is_capped_too(fake_llm, fault, message):
    """The https:// path: httpx's own transport streams the body, read_capped stops it at the cap."""
    fake_llm.script = [fault]
    endpoint = Endpoint("openai", fake_llm.openai_base, "fake-model", None)
    backend = make_backend(endpoint, {})

    async def call() -> None:
        async with build_client(endpoint, transport=httpx.AsyncHTTPTransport()) as client:
            await backend.complete(client, Rendered("system", "Claim: x"))

    tracemalloc.start()
    try:
        # A thread of its own: the browser tests' Playwright keeps an event loop running in this one.
        with pytest.raises(RequestRejected) as info, ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, call()).result()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert message in str(info.value) and "(JUDGE_MAX_ANSWER_BYTES)" in str(info.value)
    assert peak < 32 * MIB  # the bomb was not inflated (1 GiB), nor the 3 MiB answer read whole
