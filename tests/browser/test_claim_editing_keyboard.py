"""Real Chromium: an expert splits a claim at the caret, merges it back and undoes both, by keyboard only."""

from __future__ import annotations

import re

from playwright.sync_api import expect
from sqlmodel import select

from calibrate.accounts import get_user
from calibrate.models import Assignment, Claim, ClaimEdit, Sample

ANSWER = "Tome 0,4 mg al día y hasta la semana 12. Gracias."


def _active(session, sample_id):
    session.commit()
    session.expire_all()
    return [(c.id, c.text) for c in session.exec(select(Claim).where(Claim.sample_id == sample_id, Claim.active)
                                                 .order_by(Claim.index))]


def test_split_merge_and_undo_a_claim_by_keyboard(page, live_server, session, make_sample, browser_login):
    browser_login("ana")
    sample = make_sample(external_id="s1", question="¿Ácido fólico?", answer=ANSWER, contexts=("Se recomiendan 0,4 mg.",),
                         claims=["Tome 0,4 mg al día y hasta la semana 12.", "Gracias."])
    assignment = Assignment(sample_id=sample.id, user_id=get_user(session, "ana").id)
    session.add(assignment)
    session.commit()
    original = _active(session, sample.id)
    page.goto(f"{live_server}/annotate/{assignment.id}")
    claims = page.locator("#claims .claim-row .claim-text")
    expect(claims).to_have_text(["Tome 0,4 mg al día y hasta la semana 12.", "Gracias."])
    expect(page.locator("#claims .claim-row").first.locator(".cell")).to_have_class(re.compile("focused"))

    # Shift+D opens the editor on the focused claim; the caret goes after "día ", Enter splits there.
    page.keyboard.press("Shift+D")
    editor = page.locator("#claims .claim-row").first.locator("textarea[data-claim-editor]")
    expect(editor).to_be_focused()
    page.keyboard.press("Control+Home")
    for _ in range(len("Tome 0,4 mg al día ")):
        page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")
    expect(claims).to_have_text(["Tome 0,4 mg al día", "y hasta la semana 12.", "Gracias."])
    expect(page.locator("#claim-source")).to_have_text("segmenter+edited")
    expect(page.locator("#answer mark.claim")).to_have_text(["Tome 0,4 mg al día", "y hasta la semana 12.", "Gracias."])
    assert [text for _, text in _active(session, sample.id)] == ["Tome 0,4 mg al día", "y hasta la semana 12.", "Gracias."]
    # The focus is on the first part: Shift+M merges it with the next, taking the answer's own words between them.
    expect(page.locator("#claims .claim-row").first.locator(".cell")).to_have_class(re.compile("focused"))
    page.keyboard.press("Shift+M")
    expect(claims).to_have_text(["Tome 0,4 mg al día y hasta la semana 12.", "Gracias."])
    # The page was drawn again: its script is running once it has put the focus on the claim.
    expect(page.locator("#claims .claim-row .cell.focused")).to_have_count(1)
    session.commit()  # a new read transaction: it sees the merge
    assert [e.action for e in session.exec(select(ClaimEdit).order_by(ClaimEdit.id))] == ["split", "merge"]

    # u undoes the merge, u again the split: the original claims (the same rows) are back.
    page.keyboard.press("u")
    expect(claims).to_have_text(["Tome 0,4 mg al día", "y hasta la semana 12.", "Gracias."])
    expect(page.locator(".flash")).to_contain_text("Undone: the merge of claim 1 and claim 2")
    expect(page.locator("#claims .claim-row .cell.focused")).to_have_count(1)
    page.keyboard.press("u")
    expect(claims).to_have_text(["Tome 0,4 mg al día y hasta la semana 12.", "Gracias."])
    assert _active(session, sample.id) == original
    expect(page.locator("#claim-source")).to_have_text("segmenter")
    assert session.get(Sample, sample.id).claim_source == "segmenter"
    # The history keeps both changes, marked undone.
    expect(page.locator("#claim-history tbody tr.undone")).to_have_count(2)


def test_escape_leaves_the_editor_without_a_change_and_a_text_edit_saves(page, live_server, session, make_sample,
                                                                         browser_login):
    browser_login("ana")
    sample = make_sample(external_id="s1", answer=ANSWER, contexts=("c",), claims=["Tome 0,4 mg al día y hasta la semana 12.",
                                                                                   "Gracias."])
    assignment = Assignment(sample_id=sample.id, user_id=get_user(session, "ana").id)
    session.add(assignment)
    session.commit()
    page.goto(f"{live_server}/annotate/{assignment.id}")
    expect(page.locator("#claims .claim-row .cell.focused")).to_have_count(1)
    page.keyboard.press("j")  # the second claim
    page.keyboard.press("Shift+T")
    editor = page.locator("#claims .claim-row").nth(1).locator("textarea[data-claim-editor]")
    expect(editor).to_be_focused()
    page.keyboard.press("Escape")
    expect(editor).to_be_hidden()
    session.commit()
    assert not session.exec(select(ClaimEdit)).all()
    page.keyboard.press("Shift+T")
    editor.fill("Muchas gracias por preguntar.")
    page.keyboard.press("Enter")
    claims = page.locator("#claims .claim-row .claim-text")
    expect(claims).to_have_text(["Tome 0,4 mg al día y hasta la semana 12.", "Muchas gracias por preguntar."])
    # Not in the answer verbatim: shown on its own line under the answer.
    expect(page.locator("#unplaced li")).to_contain_text(["Muchas gracias por preguntar."])
