"""Real Chromium on a pairwise item: keyboard only — pick a response by its position, tie, undo, rationale, submit."""

from __future__ import annotations

from browser_helpers import eventually
from hostile import XSS_ANSWER, XSS_CONTEXT
from playwright.sync_api import expect
from sqlmodel import select

from calibrate.accounts import get_user
from calibrate.annotation.items import presentation_order
from calibrate.models import Assignment, Label, LabelRevision, Response
from calibrate.tasks import add_task

IDS = ("rag-v1", "rag-v2")


def _label(session):
    session.commit()
    session.expire_all()
    return session.exec(select(Label)).first()


def test_label_a_pairwise_item_with_the_keyboard_only(page, live_server, session, make_sample, make_user):
    make_user("ana")
    ana = get_user(session, "ana")
    sample = make_sample(external_id="ab-1", question="¿Cuánto ácido fólico?", answer="", claims=[],
                         contexts=("Se recomienda 0,4 mg diarios.",))
    texts = {IDS[0]: XSS_ANSWER, IDS[1]: XSS_CONTEXT}  # hostile model text: shown as text, never run
    for position, key in enumerate(IDS):
        session.add(Response(sample_id=sample.id, position=position, key=key, text=texts[key]))
    add_task(session, "pref", target="sample", kind="pairwise", labels=[*IDS, "tie"])
    assignment = Assignment(sample_id=sample.id, user_id=ana.id, status="pending")
    session.add(assignment)
    session.commit()
    order = presentation_order(ana.id, sample.id, list(IDS))

    page.goto(f"{live_server}/login")
    page.fill("input[name=username]", "ana")
    page.fill("input[name=password]", "password-123")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server}/annotate")
    page.keyboard.press("Enter")  # "Start labelling"
    page.wait_for_url(f"{live_server}/annotate/{assignment.id}")
    # the responses side by side, in this annotator's order, as text
    expect(page.locator("#responses .response")).to_have_count(2)
    assert page.locator("#responses .response-text").all_inner_texts() == [texts[key] for key in order]
    cell = page.locator(".pairwise .cell")
    expect(cell).to_have_class("cell focused")  # the only cell to label has the focus

    page.keyboard.press("2")  # the response shown second
    expect(cell.locator(".save-state[data-state=saved]")).to_have_count(1)
    label = eventually(lambda: _label(session))
    assert (label.value, label.order) == (order[1], order)

    page.keyboard.press("j")  # back to the cell, the first (a complete item hands the focus on to submitting)
    page.keyboard.press("t")  # tie
    expect(cell).to_have_attribute("data-value", "tie")
    expect(cell.locator(".save-state[data-state=saved]")).to_have_count(1)
    assert eventually(lambda: _label(session).value == "tie")

    page.keyboard.press("j")
    page.keyboard.press("1")
    assert eventually(lambda: _label(session).value == order[0])
    page.keyboard.press("u")  # undo: back to tie
    assert eventually(lambda: _label(session).value == "tie")
    expect(page.locator("#notice")).to_contain_text("Undone: the responses")  # and the cell has the focus again
    page.keyboard.press("3")  # with two responses, 3 is tie too: nothing changes
    page.keyboard.press("u")  # undo the tie: back to the second response
    assert eventually(lambda: _label(session).value == order[1])
    assert _label(session).order == order
    # the database has it before the page does: wait until the undo's answer gave the cell the focus back
    # ("3" had handed it on to Submit), or "r" and the typing would go to no cell
    expect(cell).to_have_class("cell focused")

    page.keyboard.press("r")
    page.keyboard.type("más completa")
    page.keyboard.press("Enter")
    assert eventually(lambda: _label(session).rationale == "más completa")
    revisions = session.exec(select(LabelRevision).order_by(LabelRevision.id)).all()
    assert all(r.order == order for r in revisions if r.action in ("create", "update"))

    page.keyboard.press("Enter")  # submit: the queue is empty afterwards
    page.wait_for_url(f"{live_server}/annotate")
    session.commit()
    session.expire_all()
    assert session.get(Assignment, assignment.id).status == "done"
