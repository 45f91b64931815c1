"""The workbench views: item page structure, label/undo/submit actions, security and blind rules."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup
from hostile import XSS_ANSWER, XSS_CONTEXT, XSS_QUESTION
from sqlmodel import func, select

from calibrate.accounts import get_user
from calibrate.models import Assignment, Claim, Context, Judge, Label, LabelRevision, Verdict

HX = {"HX-Request": "true"}


def _soup(response):
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


def _assign(session, sample, user, status="pending"):
    assignment = Assignment(sample_id=sample.id, user_id=user.id, status=status)
    session.add(assignment)
    session.commit()
    return assignment


def _claims(session, sample):
    return list(session.exec(select(Claim).where(Claim.sample_id == sample.id).order_by(Claim.index)))


@pytest.fixture
def item(session, make_sample, login):
    """Ana, logged in, with one assigned item whose text is hostile (two claims, one context)."""
    token = login("ana")
    ana = get_user(session, "ana")
    sample = make_sample()
    assignment = _assign(session, sample, ana)
    return SimpleNamespace(token=token, user=ana, sample=sample, assignment=assignment, url=f"/annotate/{assignment.id}",
                           claims=_claims(session, sample))


def _label(client, item, target, value=None, *, task="claim_support", token=None, headers=HX, **fields):
    data = {"task": task, "target": target, **fields}
    if value is not None:
        data["value"] = value
    return client.post(f"{item.url}/label", data=data, headers={**headers, "X-CSRFToken": token or item.token})


def _label_all(client, item, value="supported", quality="4"):
    for claim in item.claims:
        assert _label(client, item, f"claim:{claim.id}", value).status_code == 200
    assert _label(client, item, f"sample:{item.sample.id}", quality, task="answer_quality").status_code == 200


def _fresh(session):
    """End the test session's read transaction (a WAL snapshot) so it sees what the app wrote."""
    session.commit()
    session.expire_all()


def _count(session, model):
    _fresh(session)
    return session.exec(select(func.count()).select_from(model)).one()


# --------------------------------------------------------------------------- the page


def test_item_page_shows_everything_to_label_with_its_keys(client, item):
    page = _soup(client.get(item.url))
    root = page.select_one("#annotate")
    assert root.has_attr("hx-disable")
    assert page.select_one("#question").get_text() == XSS_QUESTION
    assert [li["data-rank"] for li in page.select("#contexts > li.context")] == ["0"]
    assert page.select_one("#contexts .doc-id").get_text() == "doc-0"
    assert page.select_one("#contexts .ctx-text").get_text() == XSS_CONTEXT
    assert page.select_one("#answer").get_text() == XSS_ANSWER
    assert [m["data-claim"] for m in page.select("#answer mark.claim")] == ["0", "1"]
    rows = page.select("#claims > li.claim-row")
    assert [r.select_one(".claim-text").get_text() for r in rows] == [c.text for c in item.claims]
    cell = rows[0].select_one(".cell")
    assert cell["data-target"] == f"claim:{item.claims[0].id}" and cell["data-state"] == "empty"
    buttons = cell.select("button[name=value]")
    assert [(b["value"], b["data-keys"], [k.get_text() for k in b.select("kbd")]) for b in buttons] == [
        ("supported", "1 s", ["1", "s"]), ("unsupported", "2 x", ["2", "x"]), ("not_applicable", "3 n", ["3", "n"])]
    quality = page.select_one(".whole .cell[data-task=answer_quality]")
    assert [b["value"] for b in quality.select("button[name=value]")] == ["1", "2", "3", "4", "5"]
    assert quality.select_one("button[value='5'] .hint").get_text().startswith("correct, complete")
    assert [c["data-task"] for c in page.select("#contexts .cell")] == ["context_relevance"]
    assert [d["data-task"] for d in page.select("#guidelines details.guideline")] == ["claim_support", "answer_quality", "context_relevance"]
    help_keys = {k.get_text() for k in page.select("#help kbd")}
    assert {"j", "k", "1", "s", "x", "n", "u", "Enter", "?", "r", "e", "h", "g"} <= help_keys
    assert page.select_one("#item-status #submit-button") is not None


def test_item_page_has_no_inline_script_style_or_handler(client, item):
    page = _soup(client.get(item.url))
    # scripts come from /static; the one script element without src is the JSON data block of the scripts' strings
    assert all(s.get("src", "").startswith("/static/") for s in page.select("script:not([type='application/json'])"))
    assert [s["id"] for s in page.select("script[type='application/json']")] == ["calibrate-strings"]
    assert page.select("[style]") == [] and page.select("style") == []
    assert [el.name for el in page.find_all(True) if any(attr.startswith("on") for attr in el.attrs)] == []
    assert page.select("#annotate img, #annotate a[href^=javascript]") == []


def test_long_contexts_are_collapsed_and_the_ground_truth_can_be_hidden(client, session, make_sample, login):
    login("ana")
    sample = make_sample(contexts=["corto", "x" * 2000], ground_truth="Respuesta de referencia")
    assignment = _assign(session, sample, get_user(session, "ana"))
    page = _soup(client.get(f"/annotate/{assignment.id}"))
    contexts = page.select("#contexts > li")
    assert contexts[0].select_one("details") is None
    assert contexts[1].select_one("details.long p.ctx-text").get_text() == "x" * 2000
    ground_truth = page.select_one("details#ground-truth")
    assert ground_truth.has_attr("open") and "Respuesta de referencia" in ground_truth.get_text()


def test_a_custom_continuous_task_gets_a_number_field(client, session, make_sample, login):
    from calibrate.tasks import add_task

    add_task(session, "confidence", target="sample", kind="continuous", scale=(0, 1))
    session.commit()
    login("ana")
    assignment = _assign(session, make_sample(), get_user(session, "ana"))
    cell = _soup(client.get(f"/annotate/{assignment.id}")).select_one(".cell[data-task=confidence]")
    field = cell.select_one("input[type=number][name=value]")
    assert (field["min"], field["max"], field["step"]) == ("0.0", "1.0", "any")


# --------------------------------------------------------------------------- labelling


def test_a_label_answers_with_its_cell_and_the_item_status(client, session, item):
    target = f"claim:{item.claims[0].id}"
    response = _label(client, item, target, "unsupported")
    assert response.status_code == 200
    assert "HX-Request" in response.headers["Vary"]
    page = _soup(response)
    cell = page.select_one(".cell")
    assert f"#{cell['id']}" == response.headers["HX-Retarget"]
    assert (cell["data-target"], cell["data-state"], cell["data-value"]) == (target, "saved", "unsupported")
    assert page.select_one("button[aria-pressed=true]")["value"] == "unsupported"
    assert cell.select_one(".save-state").get_text(strip=True) == "✓ saved"
    status = page.select_one("#item-status")
    assert status["hx-swap-oob"] == "true"
    progress = {li["data-task"]: li.select_one(".count").get_text() for li in status.select(".task-progress li")}
    assert progress == {"claim_support": "1/2", "answer_quality": "0/1", "context_relevance": "0/1"}
    _fresh(session)
    label = session.exec(select(Label)).one()
    assert (label.value, label.annotator_id, label.source) == ("unsupported", item.user.id, "ui")


def test_a_label_from_a_plain_form_redirects_back(client, item):
    target = f"claim:{item.claims[0].id}"
    response = client.post(f"{item.url}/label", data={"task": "claim_support", "target": target, "value": "supported",
                                                      "csrf_token": item.token})
    assert response.status_code == 303
    assert response.headers["Location"].startswith(f"{item.url}#cell-")
    page = _soup(client.get(item.url))
    assert page.select_one(f".cell[data-target='{target}']")["data-state"] == "saved"


def test_a_double_post_never_duplicates(client, session, item):
    target = f"claim:{item.claims[0].id}"
    for _ in range(3):
        assert _label(client, item, target, "supported").status_code == 200
    assert _count(session, Label) == 1
    assert _count(session, LabelRevision) == 1


def test_rationale_and_evidence(client, session, item):
    target = f"claim:{item.claims[0].id}"
    assert _label(client, item, target, rationale="antes de etiquetar").status_code == 422
    _label(client, item, target, "supported")
    page = _soup(_label(client, item, target, rationale="<b>dice</b> 0,4 mg"))
    assert page.select_one("textarea[name=rationale]").get_text() == "<b>dice</b> 0,4 mg"
    page = _soup(_label(client, item, target, evidence="0"))
    assert [b["value"] for b in page.select(".evidence button[aria-pressed=true]")] == ["0"]
    assert _label(client, item, target, evidence="5").status_code == 422
    _fresh(session)
    label = session.exec(select(Label)).one()
    assert (label.rationale, label.evidence) == ("<b>dice</b> 0,4 mg", [0])


@pytest.mark.parametrize(("task", "target", "value", "status"), [
    ("claim_support", "claim:{claim}", "maybe", 422),
    ("answer_quality", "sample:{sample}", "9", 422),
    ("claim_support", "sample:{sample}", "supported", 422),
    ("claim_support", "nonsense", "supported", 422),
    ("no_such_task", "claim:{claim}", "supported", 404),
])
def test_bad_labels_are_refused_and_nothing_is_saved(client, session, item, task, target, value, status):
    target = target.format(claim=item.claims[0].id, sample=item.sample.id)
    response = _label(client, item, target, value, task=task)
    assert response.status_code == status
    assert _count(session, Label) == 0


def test_undo(client, session, item):
    target = f"claim:{item.claims[1].id}"
    _label(client, item, target, "supported")
    _label(client, item, target, "unsupported")
    response = client.post(f"{item.url}/undo", headers={**HX, "X-CSRFToken": item.token})
    cell = _soup(response).select_one(".cell")
    assert (cell["data-target"], cell["data-value"]) == (target, "supported")
    response = client.post(f"{item.url}/undo", headers={**HX, "X-CSRFToken": item.token})
    assert _soup(response).select_one(".cell")["data-state"] == "empty"
    assert _count(session, Label) == 0
    nothing = client.post(f"{item.url}/undo", headers={**HX, "X-CSRFToken": item.token})
    assert (nothing.status_code, nothing.headers.get("X-Nothing")) == (200, "1")
    assert nothing.get_data(as_text=True) == "Nothing to undo on this item."
    # The script shows the answer's text in the notice bar: in the reader's language.
    spanish = client.post(f"{item.url}/undo", headers={**HX, "X-CSRFToken": item.token, "Accept-Language": "es"})
    assert spanish.get_data(as_text=True) == "No hay nada que deshacer en este ítem."


def test_history_lists_my_changes(client, item):
    target = f"claim:{item.claims[0].id}"
    _label(client, item, target, "supported")
    _label(client, item, target, "not_applicable")
    page = _soup(client.get(f"{item.url}/history", query_string={"task": "claim_support", "target": target}, headers=HX))
    rows = [[td.get_text() for td in tr.select("td")][1:4] for tr in page.select("#history tbody tr")]
    assert rows == [["ana", "changed from", "Supported"], ["ana", "created as", "Supported"]]


# --------------------------------------------------------------------------- submit, skip, flag


def test_submit_explains_what_is_missing(client, session, item):
    _label(client, item, f"claim:{item.claims[0].id}", "supported")
    response = client.post(f"{item.url}/submit", headers={**HX, "X-CSRFToken": item.token})
    assert response.status_code == 422 and response.headers["HX-Retarget"] == "#item-status"
    missing = [li.get_text() for li in _soup(response).select("#item-status .missing li")]
    assert missing == ["Claim support: label claim 2", "Answer quality: label the answer"]
    _fresh(session)
    assert session.get(Assignment, item.assignment.id).status == "pending"


def test_submit_goes_to_the_next_item_then_back_to_the_queue(client, session, make_sample, item):
    second = _assign(session, make_sample(external_id="s2"), item.user)
    _label_all(client, item)
    response = client.post(f"{item.url}/submit", headers={**HX, "X-CSRFToken": item.token})
    assert response.status_code == 204 and response.headers["HX-Redirect"] == f"/annotate/{second.id}"
    _fresh(session)
    assert session.get(Assignment, item.assignment.id).status == "done"
    # a second submit (double Enter) changes nothing and still moves on
    again = client.post(f"{item.url}/submit", data={"csrf_token": item.token})
    assert again.status_code == 303 and again.headers["Location"] == f"/annotate/{second.id}"
    item2 = SimpleNamespace(**{**vars(item), "sample": session.get(type(item.sample), second.sample_id),
                               "url": f"/annotate/{second.id}", "claims": _claims(session, session.get(type(item.sample), second.sample_id))})
    _label_all(client, item2)
    last = client.post(f"{item2.url}/submit", data={"csrf_token": item.token})
    assert last.headers["Location"] == "/annotate"
    assert "Nothing left to label" in _soup(client.get("/annotate")).select_one(".flash").get_text()


@pytest.mark.parametrize(("action", "status"), [("skip", "skipped"), ("flag", "flagged")])
def test_skip_and_flag_need_a_note_and_move_on(client, session, item, action, status):
    refused = client.post(f"{item.url}/{action}", data={"note": ""}, headers={**HX, "X-CSRFToken": item.token})
    assert refused.status_code == 422
    response = client.post(f"{item.url}/{action}", data={"note": "contexto truncado"}, headers={**HX, "X-CSRFToken": item.token})
    assert response.status_code == 204 and response.headers["HX-Redirect"] == "/annotate"
    _fresh(session)
    assignment = session.get(Assignment, item.assignment.id)
    assert (assignment.status, assignment.note) == (status, "contexto truncado")
    parked = _soup(client.get("/annotate")).select("#parked tbody tr")
    assert [tr.select("td")[1].get_text() for tr in parked] == [status]


# --------------------------------------------------------------------------- queue


def test_the_queue_page_and_next_item(client, session, make_sample, login):
    login("ana")
    ana = get_user(session, "ana")
    first = _assign(session, make_sample(external_id="s1"), ana)
    _assign(session, make_sample(external_id="s2"), ana, status="done")
    open_slot = Assignment(sample_id=make_sample(external_id="s3").id, user_id=None)
    session.add(open_slot)
    session.commit()
    page = _soup(client.get("/annotate"))
    row = page.select_one("#my-progress tr[data-dataset=d]")
    assert row.select_one(".done-count").get_text() == "1/2" and row.select_one(".pending").get_text() == "1"
    start = page.select_one("#start")
    assert start.find_parent("form")["action"] == "/annotate/next" and start.find_parent("form")["method"] == "post"
    assert client.get("/annotate/next").headers["Location"] == f"/annotate/{first.id}"
    token = page.select_one("form.start-form input[name=csrf_token]")["value"]
    assert client.post("/annotate/next", data={"csrf_token": token}).headers["Location"] == f"/annotate/{first.id}"
    session.delete(session.get(Assignment, first.id))
    session.commit()
    # Nothing of mine left: GET offers the open slot and takes nothing; POST claims it for me.
    offer = client.get("/annotate/next?dataset=d")
    assert offer.status_code == 200
    form = _soup(offer).select_one("#start").find_parent("form")
    assert form["method"] == "post" and form.select_one("input[name=dataset]")["value"] == "d"
    _fresh(session)
    assert session.get(Assignment, open_slot.id).user_id is None
    taken = client.post("/annotate/next", data={"csrf_token": token, "dataset": "d"})
    assert taken.status_code == 303 and taken.headers["Location"] == f"/annotate/{open_slot.id}"
    _fresh(session)
    assert session.get(Assignment, open_slot.id).user_id == ana.id
    assert client.get("/annotate/next?dataset=nope").status_code == 404


def test_get_next_never_writes(client, session, make_sample, login, engine):
    """A GET (a prefetch, a crawler, a reload) hands no item out and changes no row (issue 14, point 10)."""
    login("ana")
    slots = [Assignment(sample_id=make_sample(external_id=f"s{i}").id, user_id=None) for i in range(3)]
    session.add_all(slots)
    session.commit()
    before = [(a.id, a.user_id, a.status, a.updated_at) for a in session.exec(select(Assignment).order_by(Assignment.id))]
    for path in ("/annotate/next", "/annotate/next?dataset=d", "/annotate"):
        assert client.get(path).status_code == 200
    _fresh(session)
    after = [(a.id, a.user_id, a.status, a.updated_at) for a in session.exec(select(Assignment).order_by(Assignment.id))]
    assert after == before


# --------------------------------------------------------------------------- security


def test_a_post_without_csrf_token_is_rejected_and_saves_nothing(client, session, item):
    target = f"claim:{item.claims[0].id}"
    assert client.post(f"{item.url}/label", data={"task": "claim_support", "target": target, "value": "supported"}).status_code == 400
    assert client.post(f"{item.url}/label", data={"task": "claim_support", "target": target, "value": "supported"},
                       headers={**HX, "X-CSRFToken": "forged"}).status_code == 400
    assert _count(session, Label) == 0


def test_an_expired_session_asks_a_script_to_log_in_and_saves_nothing(app, session, item):
    """No cookie any more: the script gets 401 and where to log in (and then come back), not a 400."""
    fresh = app.test_client()
    target = f"claim:{item.claims[0].id}"
    response = fresh.post(f"{item.url}/label", data={"task": "claim_support", "target": target, "value": "supported"},
                          headers={**HX, "X-CSRFToken": item.token, "HX-Current-URL": f"http://localhost{item.url}"})
    assert response.status_code == 401
    assert response.headers["HX-Redirect"] == f"/login?next={item.url}"
    assert _count(session, Label) == 0
    assert fresh.post(f"{item.url}/label", data={"task": "claim_support"}).status_code == 400  # a plain form: CSRF as before
    assert fresh.get(item.url).headers["Location"] == f"/login?next={item.url}"


ENDPOINTS = [
    ("get", ""), ("post", "/label"), ("post", "/undo"), ("post", "/submit"), ("post", "/skip"), ("post", "/flag"),
    ("get", "/history?task=claim_support&target=claim:{claim}"), ("get", "/review"),
]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_another_annotators_assignment_is_not_found(client, session, make_sample, make_user, login, method, path):
    token = login("ana")
    bea = make_user("bea")
    sample = make_sample()
    theirs = _assign(session, sample, bea)
    claim = _claims(session, sample)[0]
    url = f"/annotate/{theirs.id}{path.format(claim=claim.id)}"
    data = {"task": "claim_support", "target": f"claim:{claim.id}", "value": "supported", "note": "x"}
    response = client.get(url) if method == "get" else client.post(url, data=data, headers={**HX, "X-CSRFToken": token})
    assert response.status_code == 404
    assert _count(session, Label) == 0
    _fresh(session)
    assert session.get(Assignment, theirs.id).status == "pending"


def test_guessing_the_target_of_another_item_is_not_found(client, session, make_sample, make_user, item):
    other = make_sample(external_id="s2")
    bea = make_user("bea")
    _assign(session, other, bea)
    for kind, target_id, task in (("claim", _claims(session, other)[0].id, "claim_support"),
                                  ("sample", other.id, "answer_quality"),
                                  ("context", session.exec(select(Context.id).where(Context.sample_id == other.id)).first(), "context_relevance")):
        value = {"claim_support": "supported", "answer_quality": "3", "context_relevance": "relevant"}[task]
        assert _label(client, item, f"{kind}:{target_id}", value, task=task).status_code == 404
        response = client.get(f"{item.url}/history", query_string={"task": task, "target": f"{kind}:{target_id}"})
        assert response.status_code == 404
    assert _count(session, Label) == 0


# --------------------------------------------------------------------------- blind rules


@pytest.fixture
def others(session, make_sample, make_user):
    """A sample another annotator labelled (with a rationale) and a judge saw (with a reason)."""
    sample = make_sample(external_id="shared")
    bea = make_user("bea")
    claims = _claims(session, sample)
    from calibrate import lookup

    task = lookup.task(session, "claim_support")
    for claim in claims:
        session.add(Label(task_id=task.id, sample_id=sample.id, claim_id=claim.id, target_key=f"claim:{claim.id}",
                          annotator_id=bea.id, value="unsupported", rationale="BEA-SECRET-RATIONALE", source="import"))
    judge = Judge(name="judge-x")
    session.add(judge)
    session.flush()
    session.add(Verdict(judge_id=judge.id, task_id=task.id, sample_id=sample.id, claim_id=claims[0].id,
                        target_key=f"claim:{claims[0].id}", value="supported", reason="JUDGE-SECRET-REASON"))
    session.commit()
    return sample


def _assigned(session, sample, username):
    """Assign the sample to a (logged-in) user; return what the label helpers need."""
    user = get_user(session, username)
    assignment = _assign(session, sample, user)
    url = f"/annotate/{assignment.id}"
    return SimpleNamespace(url=url, sample=sample, claims=_claims(session, sample), assignment=assignment, user=user)


def _text(response):
    return response.get_data(as_text=True)


def test_an_annotator_never_sees_others_labels_or_verdicts(client, session, login, others):
    token = login("ana")
    item = _assigned(session, others, "ana")
    item.token = token
    assert "SECRET" not in _text(client.get(item.url))
    _label_all(client, item)
    page = client.get(item.url)
    assert "SECRET" not in _text(page) and "judge-x" not in _text(page)
    assert client.get(f"{item.url}/review").status_code == 403
    assert client.post("/annotate/review-mode", data={"on": "1", "csrf_token": token}).status_code == 403


def test_an_engineer_in_review_mode_sees_them_once_their_labels_are_complete(client, session, login, others):
    token = login("eng", "engineer")
    item = _assigned(session, others, "eng")
    item.token = token
    client.post("/annotate/review-mode", data={"on": "1", "back": item.url, "csrf_token": token})
    assert "SECRET" not in _text(client.get(item.url))
    assert client.get(f"{item.url}/review").status_code == 403
    responses = [_label(client, item, f"claim:{c.id}", "supported") for c in item.claims]
    responses.append(_label(client, item, f"sample:{item.sample.id}", "4", task="answer_quality"))
    # the status that completes the item offers the reveal; the ones before do not
    assert [bool(_soup(r).select("#item-status [data-review]")) for r in responses] == [False] * len(item.claims) + [True]
    review = _soup(client.get(f"{item.url}/review", headers=HX))
    assert {td.get_text() for td in review.select("tr.other-label td")} >= {"bea", "Unsupported", "BEA-SECRET-RATIONALE"}
    assert {td.get_text() for td in review.select("tr.verdict td")} >= {"judge judge-x", "Supported", "JUDGE-SECRET-REASON"}
    page = _soup(client.get(item.url))
    assert page.select_one("#review tr.verdict") is not None
    client.post("/annotate/review-mode", data={"on": "0", "back": item.url, "csrf_token": token})
    assert "SECRET" not in _text(client.get(item.url))


# --------------------------------------------------------------------------- correcting claims


def _claim_change(client, item, action, claim_id, headers=HX, **fields):
    data = {"change": action, "claim": str(claim_id), **fields}
    return client.post(f"{item.url}/claims", data=data, headers={**headers, "X-CSRFToken": item.token})


def test_a_claim_split_by_script_reloads_the_item_focused_on_the_new_claim(client, session, item):
    first = item.claims[0]
    response = _claim_change(client, item, "split", first.id, at="4")
    assert response.status_code == 200, response.data
    _fresh(session)
    active = [c for c in _claims(session, item.sample) if c.active]
    assert [c.text for c in active][:2] == [first.text[:4].strip(), first.text[4:].strip()]
    assert response.headers["HX-Redirect"] == f"{item.url}?claim={active[0].id}"
    page = _soup(client.get(response.headers["HX-Redirect"]))
    assert page.select_one("#claim-source").get_text() == "segmenter+edited"
    rows = page.select("#claim-history tbody tr")
    assert len(rows) == 1 and "split" in rows[0].get_text() and "ana" in rows[0].get_text()
    # Every claim row carries its editor (hidden until Shift+D or Shift+T), escaped like all model text.
    editors = page.select(".claim-row form.claim-edit[hidden] textarea[data-claim-editor]")
    assert len(editors) == len(active)
    # A plain form post (no script) gets a 303 back to the item.
    plain = _claim_change(client, item, "merge", active[0].id, headers={})
    assert plain.status_code == 303 and plain.headers["Location"].startswith(f"{item.url}?claim=")


def test_u_undoes_a_claim_edit_and_says_so(client, session, item):
    before = [(c.id, c.text) for c in item.claims]
    _claim_change(client, item, "edit", item.claims[1].id, text="Otra afirmación.")
    response = client.post(f"{item.url}/undo", headers={**HX, "X-CSRFToken": item.token})
    assert response.status_code == 200 and response.headers["HX-Redirect"] == f"{item.url}?claim={item.claims[1].id}"
    _fresh(session)
    assert [(c.id, c.text) for c in _claims(session, item.sample) if c.active] == before
    page = _soup(client.get(response.headers["HX-Redirect"]))
    assert "Undone: the edit of claim 2." in page.select_one(".flash").get_text()


@pytest.mark.parametrize(("fields", "status", "field"), [
    ({"change": "explode", "claim": "1"}, 400, "change"),
    ({"change": "split", "claim": "x"}, 400, "claim"),
    ({"change": "split", "claim": "{first}"}, 400, "at"),
    ({"change": "split", "claim": "{first}", "at": "0"}, 422, None),
    ({"change": "edit", "claim": "{first}", "text": "  "}, 422, None),
    ({"change": "edit", "claim": "999999", "text": "x"}, 422, None),
])
def test_bad_claim_changes_are_refused_with_a_message(client, session, item, fields, status, field):
    data = {k: v.format(first=item.claims[0].id) for k, v in fields.items()}
    response = client.post(f"{item.url}/claims", data=data, headers={**HX, "X-CSRFToken": item.token})
    assert response.status_code == status, response.data
    assert response.headers.get("X-Invalid-Field") == field
    _fresh(session)
    assert all(c.active for c in _claims(session, item.sample))


def test_claims_of_someone_elses_item_are_not_found(client, session, item, make_user, make_sample):
    make_user("bea")
    sample = make_sample(external_id="s2")
    other = _assign(session, sample, get_user(session, "bea"))
    claim = _claims(session, sample)[0]
    response = client.post(f"/annotate/{other.id}/claims", data={"change": "merge", "claim": str(claim.id)},
                           headers={**HX, "X-CSRFToken": item.token})
    assert response.status_code == 404
    _fresh(session)
    assert all(c.active for c in _claims(session, sample))


def test_a_refusal_is_worded_in_the_readers_language_from_its_code(client, item):
    """The web words a refusal from its reason's code (views/errors.py); the English is the command line's."""
    url, headers = f"{item.url}/skip", {**HX, "X-CSRFToken": item.token}
    spanish = client.post(url, data={"note": ""}, headers={**headers, "Accept-Language": "es-ES,es;q=0.9"})
    assert spanish.status_code == 422 and spanish.get_data(as_text=True) == "diga por qué: el motivo para omitirlo"
    english = client.post(url, data={"note": ""}, headers={**headers, "Accept-Language": "en"})
    assert english.get_data(as_text=True) == "say why: the reason for skipping"
    long = client.post(f"{item.url}/flag", data={"note": "x" * 1001}, headers={**headers, "Accept-Language": "es"})
    assert long.get_data(as_text=True) == "la nota supera los 1.000 caracteres"  # the figure written the Spanish way
