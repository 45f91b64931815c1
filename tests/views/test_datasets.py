"""Browsing datasets and samples: structure, escaping of hostile text, blind rules."""

from __future__ import annotations

from bs4 import BeautifulSoup
from hostile import XSS_ANSWER, XSS_CONTEXT, XSS_QUESTION


def _page(client, path):
    response = client.get(path)
    assert response.status_code == 200, response.status_code
    return BeautifulSoup(response.data, "html.parser")


def test_empty_state_says_how_to_import(client, login):
    login()
    page = _page(client, "/datasets")
    assert "calibrate import samples" in page.select_one(".empty").get_text()


def test_dataset_list_and_demo_badge(client, login, make_sample):
    make_sample(dataset="demo", is_demo=True)
    make_sample(dataset="real", external_id="r1")
    login()
    page = _page(client, "/datasets")
    rows = {row.select_one("a").get_text(): row for row in page.select("#datasets tbody tr")}
    assert set(rows) == {"demo", "real"}
    assert rows["demo"].select_one(".badge.demo") is not None
    assert rows["real"].select_one(".badge.demo") is None


def test_sample_page_escapes_hostile_text(client, login, make_sample):
    make_sample()
    login()
    response = client.get("/datasets/d/samples/s1")
    html = response.get_data(as_text=True)
    assert "<script>alert" not in html
    assert "<img src=x" not in html
    assert 'href="javascript:' not in html
    page = BeautifulSoup(html, "html.parser")
    assert page.select_one("#question").get_text() == XSS_QUESTION
    assert page.select_one(".ctx-text").get_text() == XSS_CONTEXT
    assert page.select_one("#answer").get_text() == XSS_ANSWER
    # The only scripts are our own static files.
    # scripts come from /static; the one script element without src is the JSON data block of the scripts' strings
    assert all(s.get("src", "").startswith("/static/") for s in page.select("script:not([type='application/json'])"))
    assert [s["id"] for s in page.select("script[type='application/json']")] == ["calibrate-strings"]
    assert page.select_one("article.item").has_attr("hx-disable")


def test_claims_highlighted_in_place(client, login, make_sample):
    make_sample(answer="Primero. Segundo dato. Tercero.", claims=["Primero.", "Segundo dato.", "No está en la respuesta"])
    login()
    page = _page(client, "/datasets/d/samples/s1")
    marks = page.select("#answer mark.claim")
    assert [(m["data-claim"], m.get_text()) for m in marks] == [("0", "Primero."), ("1", "Segundo dato.")]
    assert [li.get_text() for li in page.select("#unplaced li")] == ["No está en la respuesta"]


def test_long_context_collapsed(client, login, make_sample):
    make_sample(contexts=["corto", "x" * 2000])
    login()
    page = _page(client, "/datasets/d/samples/s1")
    contexts = page.select("#contexts li.context")
    assert contexts[0].select_one("details") is None
    assert contexts[1].select_one("details summary") is not None


def test_labels_hidden_from_annotators(client, login, make_sample, session):
    from sqlmodel import select

    from calibrate.accounts import ensure_annotator
    from calibrate.models import Claim, Label, Task

    sample = make_sample()
    other = ensure_annotator(session, "other")
    task = session.exec(select(Task).where(Task.name == "claim_support")).one()
    claim = session.exec(select(Claim).where(Claim.sample_id == sample.id)).first()
    session.add(Label(task_id=task.id, sample_id=sample.id, claim_id=claim.id, target_key=f"claim:{claim.id}",
                      annotator_id=other.id, value="unsupported", source="import"))
    session.commit()
    login("ann", "annotator")
    assert _page(client, "/datasets/d/samples/s1").select_one("#labels") is None


def test_labels_shown_to_engineers(client, login, make_sample, session):
    from sqlmodel import select

    from calibrate.accounts import ensure_annotator
    from calibrate.models import Claim, Label, Task

    sample = make_sample()
    other = ensure_annotator(session, "other")
    task = session.exec(select(Task).where(Task.name == "claim_support")).one()
    claim = session.exec(select(Claim).where(Claim.sample_id == sample.id)).first()
    session.add(Label(task_id=task.id, sample_id=sample.id, claim_id=claim.id, target_key=f"claim:{claim.id}",
                      annotator_id=other.id, value="unsupported", rationale="<b>x</b>", source="import"))
    session.commit()
    login("eng", "engineer")
    table = _page(client, "/datasets/d/samples/s1").select_one("#labels")
    cells = [td.get_text() for td in table.select("tbody td")]
    assert cells[2:5] == ["other", "Unsupported", "<b>x</b>"]


def test_unknown_dataset_and_sample_are_404(client, login, make_sample):
    make_sample()
    login()
    assert client.get("/datasets/nope").status_code == 404
    assert client.get("/datasets/d/samples/nope").status_code == 404
