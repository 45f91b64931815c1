"""Trial renders capped per user and in total (issue 30, finding 7): refused at once with Retry-After, never waited for.

The red team: eight concurrent template saves of one engineer that ran into the 2 s render limit took every request
thread, and label saves went to a p95 of 5.9 s. Now a save whose trial render cannot start at once is answered 429 (the
user's own trials are running: PROMPT_TRIALS_PER_USER) or 503 (everyone's: PROMPT_TRIALS_TOTAL, or every render worker
busy), with Retry-After, and nothing is checked or saved; the request thread is free again.
"""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from prompt_helpers import claims_prompt_edit_form
from sqlmodel import select

from calibrate.accounts import get_user
from calibrate.errors import Busy
from calibrate.judges import render_pool
from calibrate.models import PromptVersion


@pytest.fixture
def edit_form(client, login, engine, make_sample):
    make_sample(external_id="s1", claims=["Tome 0,4 mg al día."])
    data = claims_prompt_edit_form(client, login, engine)
    data["template"] = data["template"].replace("Claim to check", "Claim under review")
    return data


def versions(session) -> int:
    session.rollback()
    return len(session.exec(select(PromptVersion)).all())


def test_a_users_second_trial_is_429_and_a_full_server_503_each_with_retry_after(client, edit_form, session, make_user):
    eng = get_user(session, "eng").id
    with render_pool.TRIALS.slot(eng, per_user=1, total=2, retry_after=3):  # eng's first save is rendering
        response = client.post("/prompts/claims/1/edit", data=edit_form)
        assert (response.status_code, response.headers["Retry-After"]) == (429, "3")
        page = BeautifulSoup(response.data, "html.parser")
        assert "you have 1 trial render(s) running already (PROMPT_TRIALS_PER_USER): try again in 3 s" in page.text
        assert page.select_one("textarea[name=template]").get_text() == edit_form["template"]  # what was typed, kept
    with render_pool.TRIALS.slot("ana", per_user=1, total=2, retry_after=3), \
            render_pool.TRIALS.slot("bea", per_user=1, total=2, retry_after=3):  # two others' trials: the server's two
        response = client.post("/prompts/claims/1/edit", data=edit_form)
        assert (response.status_code, response.headers["Retry-After"]) == (503, "3")
        assert "2 trial renders are running already (PROMPT_TRIALS_TOTAL)" in response.get_data(as_text=True)
        created = client.post("/prompts", data={"name": "other", "task": "claim_support",
                                                "csrf_token": edit_form["csrf_token"]})
        assert created.status_code == 503 and created.headers["Retry-After"] == "3"  # the generic refusal: a page
    assert versions(session) == 1 and render_pool.TRIALS.by_user == {}
    saved = client.post("/prompts/claims/1/edit", data=edit_form)  # the slots are free again: it saves
    assert saved.status_code == 303 and versions(session) == 2


def test_a_trial_never_waits_for_a_busy_render_worker(client, edit_form, session, monkeypatch):
    """Every worker busy (runs rendering): the trial is refused at once, 503, instead of holding its thread in a queue."""
    pool = render_pool.Pool()
    pool.busy = 2  # PROMPT_RENDER_WORKERS, all lent out
    monkeypatch.setattr(render_pool, "POOL", pool)
    response = client.post("/prompts/claims/1/edit", data=edit_form)
    assert (response.status_code, response.headers["Retry-After"]) == (503, "3")
    assert "every render worker is busy (2, PROMPT_RENDER_WORKERS)" in response.get_data(as_text=True)
    assert versions(session) == 1 and render_pool.TRIALS.by_user == {}
    with pytest.raises(Busy):
        pool.call({"op": "check"}, seconds=3, size=2, wait=False)


def test_the_slots_count_per_user_and_in_all_and_free_on_any_exit():
    slots = render_pool.TrialSlots()
    with slots.slot("a", per_user=2, total=3, retry_after=1), slots.slot("a", per_user=2, total=3, retry_after=1):
        with pytest.raises(Busy) as mine:
            slots.slot("a", per_user=2, total=3, retry_after=1).__enter__()
        assert mine.value.status == 429
        with slots.slot("b", per_user=2, total=3, retry_after=1):
            with pytest.raises(Busy) as everyone:
                slots.slot("c", per_user=2, total=3, retry_after=1).__enter__()
            assert everyone.value.status == 503
    with pytest.raises(RuntimeError), slots.slot("a", per_user=1, total=1, retry_after=1):
        raise RuntimeError("the render failed")
    assert slots.by_user == {}
