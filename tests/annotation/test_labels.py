"""Saving labels (upsert with history), undo, history: the rules that keep work from being lost or doubled."""

from __future__ import annotations

import re

import pytest
from bs4 import BeautifulSoup
from sqlmodel import col, func, select

from calibrate import lookup
from calibrate.accounts import get_user
from calibrate.annotation import AnnotationError, NotFound
from calibrate.annotation.guidelines import save_guideline
from calibrate.annotation.labels import EvidenceError, history, resolve_target, save_label, sentence_evidence, toggle_evidence, undo_last
from calibrate.models import Assignment, Claim, Context, Label, LabelRevision
from calibrate.models import LabelRevision as Rev


def _labels(session, **where):
    query = select(Label).where(col(Label.adjudicated).is_(False))
    for name, value in where.items():
        query = query.where(getattr(Label, name) == value)
    return list(session.exec(query))


def _revisions(session, label_id):
    return list(session.exec(select(Rev).where(Rev.label_id == label_id).order_by(Rev.id)))


@pytest.fixture
def item(work):
    ana = work.user("ana")
    sample = work.sample()
    assignment = work.assign(sample, ana)
    return work, ana, sample, assignment


def _claim_target(work, session, assignment, sample, index=0, task="claim_support"):
    claim = work.claims(sample)[index]
    return resolve_target(session, assignment, task, f"claim:{claim.id}")


def test_first_label_is_created_with_a_revision_and_the_guideline_version(session, item):
    work, ana, sample, assignment = item
    target = _claim_target(work, session, assignment, sample)
    label = save_label(session, assignment, ana, target, value="Supported")
    session.commit()
    assert (label.value, label.annotator_id, label.source, label.guideline_version) == ("supported", ana.id, "ui", 1)
    assert [(r.action, r.value, r.changed_by_id, r.source) for r in _revisions(session, label.id)] == [("create", "supported", ana.id, "ui")]


def test_repeating_the_same_value_changes_nothing(session, item):
    """A double click or a replayed request: one label, one revision."""
    work, ana, sample, assignment = item
    target = _claim_target(work, session, assignment, sample)
    for _ in range(3):
        save_label(session, assignment, ana, target, value="supported")
        session.commit()
    [label] = _labels(session, annotator_id=ana.id)
    assert len(_revisions(session, label.id)) == 1


def test_a_change_keeps_the_previous_value_with_who_and_when(session, item):
    work, ana, sample, assignment = item
    target = _claim_target(work, session, assignment, sample)
    save_label(session, assignment, ana, target, value="supported", rationale="dice 0,4 mg")
    session.commit()
    label = save_label(session, assignment, ana, target, value="unsupported")
    session.commit()
    assert (label.value, label.rationale) == ("unsupported", "dice 0,4 mg")
    revisions = _revisions(session, label.id)
    assert [(r.action, r.value, r.rationale) for r in revisions] == [("create", "supported", "dice 0,4 mg"),
                                                                     ("update", "supported", "dice 0,4 mg")]
    assert revisions[1].changed_by_id == ana.id and revisions[1].changed_at is not None


def test_rationale_and_evidence_need_a_label_first(session, item):
    work, ana, sample, assignment = item
    target = _claim_target(work, session, assignment, sample)
    with pytest.raises(AnnotationError, match="choose a label first"):
        save_label(session, assignment, ana, target, rationale="porque sí")
    with pytest.raises(AnnotationError, match="choose a label first"):
        save_label(session, assignment, ana, target, evidence_toggle=0)
    assert _labels(session) == []


def test_evidence_toggles_context_ranks(session, item):
    work, ana, sample, assignment = item
    target = _claim_target(work, session, assignment, sample)
    save_label(session, assignment, ana, target, value="supported")
    assert save_label(session, assignment, ana, target, evidence_toggle=1).evidence == [1]
    assert save_label(session, assignment, ana, target, evidence_toggle=0).evidence == [0, 1]
    assert save_label(session, assignment, ana, target, evidence_toggle=1).evidence == [0]
    assert save_label(session, assignment, ana, target, evidence_toggle=0).evidence is None
    with pytest.raises(AnnotationError, match="no context #3"):
        save_label(session, assignment, ana, target, evidence_toggle=2)


@pytest.mark.parametrize(
    ("task", "kind", "value", "message"),
    [
        ("claim_support", "claim", "maybe", "not a label of task claim_support"),
        ("answer_quality", "sample", "7", "outside the scale"),
        ("answer_quality", "sample", "good", "must be a number"),
        ("context_relevance", "claim", "relevant", "labels contexts, not claims"),
        ("claim_support", "sample", "supported", "labels claims, not samples"),
    ],
)
def test_values_and_targets_must_fit_the_task(session, item, task, kind, value, message):
    work, ana, sample, assignment = item
    target_id = {"claim": work.claims(sample)[0].id, "sample": sample.id}[kind]
    with pytest.raises(AnnotationError, match=message):
        target = resolve_target(session, assignment, task, f"{kind}:{target_id}")
        save_label(session, assignment, ana, target, value=value)


@pytest.mark.parametrize("kind", ["claim", "context", "sample"])
def test_a_target_of_another_sample_is_not_found(session, item, kind):
    """Guessing ids: a claim, context or sample of another item cannot be labelled through this assignment."""
    work, ana, sample, assignment = item
    other = work.sample("s2")
    target_id = {"claim": work.claims(other)[0].id, "context": work.contexts(other)[0].id, "sample": other.id}[kind]
    task = {"claim": "claim_support", "context": "context_relevance", "sample": "answer_quality"}[kind]
    with pytest.raises(NotFound):
        resolve_target(session, assignment, task, f"{kind}:{target_id}")


def test_a_retired_claim_cannot_be_labelled(session, item):
    work, ana, sample, assignment = item
    claim = work.claims(sample)[0]
    claim.active = False
    session.add(claim)
    session.commit()
    with pytest.raises(NotFound):
        resolve_target(session, assignment, "claim_support", f"claim:{claim.id}")


# --------------------------------------------------------------------------- undo

UNDO_CASES = [
    # (actions on claims 0/1 as (claim, value), number of undos, expected {claim: value} afterwards)
    ([(0, "supported")], 1, {}),
    ([(0, "supported"), (1, "unsupported")], 1, {0: "supported"}),
    ([(0, "supported"), (1, "unsupported")], 2, {}),
    ([(0, "supported"), (0, "unsupported")], 1, {0: "supported"}),
    ([(0, "supported"), (0, "unsupported"), (0, "not_applicable")], 2, {0: "supported"}),
    ([(0, "supported"), (0, "unsupported")], 2, {}),
    ([(0, "supported"), (1, "supported"), (0, "unsupported")], 2, {0: "supported"}),
    ([(0, "supported")], 3, {}),  # more undos than changes: nothing left, no error
]


@pytest.mark.parametrize(("actions", "undos", "expected"), UNDO_CASES)
def test_undo_steps_back_through_my_changes(session, item, actions, undos, expected):
    work, ana, sample, assignment = item
    claims = work.claims(sample)
    for index, value in actions:
        save_label(session, assignment, ana, resolve_target(session, assignment, "claim_support", f"claim:{claims[index].id}"), value=value)
        session.commit()
    for _ in range(undos):
        undo_last(session, assignment, ana)
        session.commit()
    by_claim = {c.id: i for i, c in enumerate(claims)}
    assert {by_claim[label.claim_id]: label.value for label in _labels(session)} == expected


def test_undo_after_an_undo_and_a_new_change(session, item):
    """set A, change A, undo (A back), change A again, undo: A is back to the first value again."""
    work, ana, sample, assignment = item
    target = _claim_target(work, session, assignment, sample)
    for value in ("supported", "unsupported"):
        save_label(session, assignment, ana, target, value=value)
    undo_last(session, assignment, ana)
    save_label(session, assignment, ana, target, value="not_applicable")
    undone = undo_last(session, assignment, ana)
    assert undone.label.value == "supported"
    undo_last(session, assignment, ana)
    assert _labels(session) == []
    assert undo_last(session, assignment, ana) is None


def test_undo_restores_rationale_and_evidence(session, item):
    work, ana, sample, assignment = item
    target = _claim_target(work, session, assignment, sample)
    save_label(session, assignment, ana, target, value="supported", rationale="primero")
    save_label(session, assignment, ana, target, evidence_toggle=1)
    save_label(session, assignment, ana, target, rationale="segundo")
    assert undo_last(session, assignment, ana).label.rationale == "primero"
    label = undo_last(session, assignment, ana).label
    assert (label.rationale, label.evidence) == ("primero", None)


def test_undo_never_touches_imported_labels_or_other_people(session, item, work):
    work_, ana, sample, assignment = item
    claim = work.claims(sample)[0]
    task = work.task("claim_support")
    imported = Label(task_id=task.id, sample_id=sample.id, claim_id=claim.id, target_key=f"claim:{claim.id}",
                     annotator_id=ana.id, value="supported", source="import")
    session.add(imported)
    session.flush()
    session.add(LabelRevision(label_id=imported.id, action="create", value="supported", changed_by_id=ana.id))
    bea = work.user("bea")
    other_assignment = work.assign(sample, bea)
    save_label(session, other_assignment, bea, resolve_target(session, other_assignment, "claim_support", f"claim:{claim.id}"), value="unsupported")
    session.commit()
    assert undo_last(session, assignment, ana) is None
    assert {(label.annotator_id, label.value) for label in _labels(session)} == {(ana.id, "supported"), (bea.id, "unsupported")}


def test_history_shows_only_my_label(session, item, work):
    work_, ana, sample, assignment = item
    bea = work.user("bea")
    other = work.assign(sample, bea)
    target = _claim_target(work, session, assignment, sample)
    save_label(session, other, bea, resolve_target(session, other, "claim_support", target.key), value="unsupported", rationale="secreto")
    label, entries = history(session, target, ana)
    assert label is None and entries == []
    save_label(session, assignment, ana, target, value="supported")
    save_label(session, assignment, ana, target, value="not_applicable")
    label, entries = history(session, target, ana)
    assert label.value == "not_applicable"
    assert [(e.action, e.value, e.who) for e in entries] == [("update", "supported", "ana"), ("create", "supported", "ana")]


# --------------------------------------------------------------------------- guideline versions


def test_labels_record_the_guideline_version_and_a_key_press_confirms_an_outdated_one(session, item, work):
    work_, ana, sample, assignment = item
    target = _claim_target(work, session, assignment, sample)
    label = save_label(session, assignment, ana, target, value="supported", rationale="v1")
    assert label.guideline_version == 1
    save_guideline(session, work.task("claim_support"), "Nueva regla: las cifras deben coincidir.", ana)
    # Editing the rationale is not a confirmation under the new guideline ...
    assert save_label(session, assignment, ana, target, rationale="still v1").guideline_version == 1
    # ... pressing the label's key again is (one more revision, the value unchanged).
    label = save_label(session, assignment, ana, target, value="supported")
    assert (label.value, label.guideline_version) == ("supported", 2)
    assert [r.guideline_version for r in _revisions(session, label.id)] == [1, 1, 1]
    assert undo_last(session, assignment, ana).label.guideline_version == 1


def test_a_key_press_on_a_stale_label_confirms_it(session, item, work):
    work_, ana, sample, assignment = item
    target = resolve_target(session, assignment, "answer_quality", f"sample:{sample.id}")
    label = session.get(Label, save_label(session, assignment, ana, target, value=4).id)
    label.stale, label.stale_reason = True, "the answer changed"
    session.add(label)
    session.commit()
    assert save_label(session, assignment, ana, target, rationale="x").stale is True
    label = save_label(session, assignment, ana, target, value=4)
    assert (label.stale, label.stale_reason) == (False, "")


def test_one_label_per_target_even_when_two_sessions_write_at_once(engine, item):
    """Two concurrent writers (BEGIN IMMEDIATE) saving the same label: still one row."""
    import threading

    from sqlmodel import Session

    from calibrate.db import write_session
    from calibrate.models import Assignment, User

    work, ana, sample, assignment = item
    key = f"claim:{work.claims(sample)[0].id}"
    barrier = threading.Barrier(4)
    errors = []

    def worker(value):
        try:
            barrier.wait()
            with write_session(engine) as s:
                a = s.get(Assignment, assignment.id)
                user = s.get(User, ana.id)
                save_label(s, a, user, resolve_target(s, a, "claim_support", key), value=value)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(v,)) for v in ("supported", "supported", "unsupported", "supported")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(Label)).one() == 1


# --------------------------------------------------------------------------- evidence per sentence

SENTENCES = "Tome 0,4 mg al día. Antes del <script>alert(1)</script> embarazo! ¿Y después? Sí."


@pytest.fixture
def evidence_item(work):
    ana = work.user("ana")
    sample = work.sample(contexts=(SENTENCES, "Otra fuente. Con dos frases."))
    assignment = work.assign(sample, ana)
    return work, ana, sample, assignment


def test_sentence_evidence_names_the_sentence_by_index_span_and_text(session, evidence_item):
    work, _ana, sample, _assignment = evidence_item
    first, second = work.contexts(sample)
    entry = sentence_evidence([first, second], first.id, 1)
    assert entry == {"context": 0, "sentence": 1, "start": 20, "end": 65,
                     "text": "Antes del <script>alert(1)</script> embarazo!"}
    assert SENTENCES[entry["start"]:entry["end"]] == entry["text"]
    assert sentence_evidence([first, second], second.id, 1)["text"] == "Con dos frases."


@pytest.mark.parametrize("which, index, message", [
    ("first", 4, "context #1 has 4 sentence(s), not a sentence 5"),
    ("second", 2, "context #2 has 2 sentence(s), not a sentence 3"),
    ("other", 0, "is not one of this item's contexts"),
])
def test_sentence_evidence_refuses_what_the_item_does_not_have(session, evidence_item, work, which, index, message):
    _work, _ana, sample, _assignment = evidence_item
    contexts = work.contexts(sample)
    other = work.contexts(work.sample("s2", contexts=("Ajena. Del todo.",)))[0]
    context = {"first": contexts[0], "second": contexts[1], "other": other}[which]
    with pytest.raises(EvidenceError, match=re.escape(message)) as caught:
        sentence_evidence(contexts, context.id, index)
    assert caught.value.field == "evidence_sentence"
    assert str(caught.value).startswith("evidence_sentence: ")


def test_sentence_evidence_toggles_beside_whole_contexts_and_old_values_stay_readable(session, evidence_item):
    work, ana, sample, assignment = evidence_item
    contexts = work.contexts(sample)
    target = _claim_target(work, session, assignment, sample)
    save_label(session, assignment, ana, target, value="supported")
    # An old, context-only value (a list of ranks) as stored before sentences existed.
    label = _labels(session)[0]
    label.evidence = [1]
    session.add(label)
    session.flush()
    s2 = sentence_evidence(contexts, contexts[0].id, 2)
    s0 = sentence_evidence(contexts, contexts[0].id, 0)
    assert save_label(session, assignment, ana, target, evidence_toggle=s2).evidence == [s2, 1]
    assert save_label(session, assignment, ana, target, evidence_toggle=0).evidence == [0, s2, 1]
    assert save_label(session, assignment, ana, target, evidence_toggle=s0).evidence == [0, s0, s2, 1]
    assert save_label(session, assignment, ana, target, evidence_toggle=s2).evidence == [0, s0, 1]
    session.commit()
    stored = _labels(session)[0]
    session.refresh(stored)
    assert stored.evidence == [0, s0, 1]
    # Each toggle is a change kept in history (the previous evidence), and undo restores it.
    assert [r.evidence for r in _revisions(session, stored.id)][-1] == [0, s0, s2, 1]
    undo_last(session, assignment, ana)
    session.commit()
    session.refresh(stored)
    assert stored.evidence == [0, s0, s2, 1]


def test_toggle_evidence_treats_a_sentence_and_its_whole_context_apart():
    sentence = {"context": 0, "sentence": 0, "start": 0, "end": 3, "text": "Uno"}
    assert toggle_evidence(None, sentence) == [sentence]
    assert toggle_evidence([sentence], 0) == [0, sentence]
    assert toggle_evidence([0, sentence], dict(sentence)) == [0]
    assert toggle_evidence([0], 0) is None


# The workbench view (Flask test client, real SQLite file).

def _hx(token):
    return {"HX-Request": "true", "X-CSRFToken": token}


@pytest.fixture
def web_item(session, make_sample, login):
    token = login("ana")
    ana = get_user(session, "ana")
    sample = make_sample(contexts=(SENTENCES, "Otra fuente. Con dos frases."))
    other = make_sample(external_id="s2", contexts=("Ajena. Del todo.",))
    assignment = Assignment(sample_id=sample.id, user_id=ana.id, status="pending")
    session.add(assignment)
    session.commit()
    claim = session.exec(select(Claim).where(Claim.sample_id == sample.id).order_by(Claim.index)).first()
    contexts = list(session.exec(select(Context).where(Context.sample_id == sample.id).order_by(Context.rank)))
    foreign = session.exec(select(Context).where(Context.sample_id == other.id)).one()
    return token, f"/annotate/{assignment.id}", f"claim:{claim.id}", contexts, foreign


def _post(client, url, token, target, **fields):
    return client.post(f"{url}/label", data={"task": "claim_support", "target": target, **fields}, headers=_hx(token))


def test_marking_a_sentence_saves_it_and_the_page_shows_it(client, session, web_item):
    token, url, target, contexts, _foreign = web_item
    assert _post(client, url, token, target, value="supported").status_code == 200
    response = _post(client, url, token, target, evidence_sentence=f"{contexts[0].id}:1")
    assert response.status_code == 200
    cell = BeautifulSoup(response.get_data(as_text=True), "html.parser")
    [chip] = cell.select(".evidence .sentence-chip[aria-pressed=true]")
    assert (chip["value"], chip["data-rank"], chip["data-sentence"], chip.get_text()) == (f"{contexts[0].id}:1", "0", "1", "#1.2")
    assert chip["title"] == "Antes del <script>alert(1)</script> embarazo!"
    session.commit()
    [label] = _labels(session)
    assert label.evidence == [{"context": 0, "sentence": 1, "start": 20, "end": 65,
                               "text": "Antes del <script>alert(1)</script> embarazo!"}]
    # The item page: every sentence of every context is a span carrying its index; the text stays escaped.
    page = client.get(url)
    html = page.get_data(as_text=True)
    assert "<script>alert(1)" not in html
    soup = BeautifulSoup(html, "html.parser")
    first = soup.select_one(f"#context-{contexts[0].id}")
    assert [(s["data-sentence"], s.get_text()) for s in first.select(".sentence")] == [
        ("0", "Tome 0,4 mg al día."), ("1", "Antes del <script>alert(1)</script> embarazo!"), ("2", "¿Y después?"), ("3", "Sí.")]
    assert first.select_one(".ctx-text").get_text() == SENTENCES
    assert soup.select_one(f"[data-target='{target}'] .sentence-chip")["data-sentence"] == "1"
    # Pressing the chip again unmarks it.
    _post(client, url, token, target, evidence_sentence=f"{contexts[0].id}:1")
    session.commit()
    session.expire_all()
    assert _labels(session)[0].evidence is None


@pytest.mark.parametrize("value, message", [
    ("{first}:4", "evidence_sentence: context #1 has 4 sentence(s), not a sentence 5"),
    ("{second}:9", "evidence_sentence: context #2 has 2 sentence(s), not a sentence 10"),
    ("{foreign}:0", "evidence_sentence: context {foreign} is not one of this item's contexts"),
    ("1:x", "evidence_sentence must look like CONTEXT_ID:SENTENCE_INDEX"),
    ("7", "evidence_sentence must look like CONTEXT_ID:SENTENCE_INDEX"),
])
def test_a_sentence_the_item_does_not_have_is_400_naming_the_field(client, session, web_item, value, message):
    token, url, target, contexts, foreign = web_item
    ids = {"first": contexts[0].id, "second": contexts[1].id, "foreign": foreign.id}
    assert _post(client, url, token, target, value="supported").status_code == 200
    response = _post(client, url, token, target, evidence_sentence=value.format(**ids))
    assert response.status_code == 400
    assert response.get_data(as_text=True) == message.format(**ids)
    assert response.headers["X-Invalid-Field"] == "evidence_sentence"
    # A plain form post (no script) gets the error page, naming the field too.
    form = client.post(f"{url}/label", data={"task": "claim_support", "target": target, "csrf_token": token,
                                              "evidence_sentence": value.format(**ids)})
    assert form.status_code == 400 and "evidence_sentence" in form.get_data(as_text=True)
    session.commit()
    assert _labels(session)[0].evidence is None


def test_marking_a_sentence_needs_the_csrf_token_and_a_label(client, session, web_item):
    token, url, target, contexts, _foreign = web_item
    refused = client.post(f"{url}/label", data={"task": "claim_support", "target": target,
                                                "evidence_sentence": f"{contexts[0].id}:0"}, headers={"HX-Request": "true"})
    assert refused.status_code == 400 and "security token" in refused.get_data(as_text=True)
    first = _post(client, url, token, target, evidence_sentence=f"{contexts[0].id}:0")
    assert first.status_code == 422 and "choose a label first" in first.get_data(as_text=True)
    session.commit()
    assert _labels(session) == []


def test_review_mode_and_history_show_sentence_evidence_escaped(client, session, web_item, login):
    token, url, target, contexts, _foreign = web_item
    _post(client, url, token, target, value="supported")
    _post(client, url, token, target, evidence_sentence=f"{contexts[0].id}:1")
    _post(client, url, token, target, evidence="1")
    history = BeautifulSoup(client.get(f"{url}/history?task=claim_support&target={target}").get_data(as_text=True), "html.parser")
    assert [li.get_text() for li in history.select("tbody tr")[0].select(".evidence-list li")] == [
        "context #1, sentence 2: Antes del <script>alert(1)</script> embarazo!"]
    # An engineer in review mode, with their own labels on the item complete, sees ana's evidence.
    session.commit()  # end the test session's snapshot before writing
    client.post("/logout", data={"csrf_token": token})
    eng_token = login("eng", "engineer")
    eng = get_user(session, "eng")
    mine = Assignment(sample_id=contexts[0].sample_id, user_id=eng.id, status="pending")
    session.add(mine)
    session.commit()
    eng_url = f"/annotate/{mine.id}"
    client.post("/annotate/review-mode", data={"on": "1", "csrf_token": eng_token})
    for key in BeautifulSoup(client.get(eng_url).get_data(as_text=True), "html.parser").select(".cell[data-required='1']"):
        value = "supported" if key["data-task"] == "claim_support" else "4"
        assert _post_task(client, eng_url, eng_token, key["data-task"], key["data-target"], value).status_code == 200
    review = client.get(f"{eng_url}/review")
    assert review.status_code == 200
    assert "<script>alert(1)" not in review.get_data(as_text=True)
    row = next(tr for tr in BeautifulSoup(review.get_data(as_text=True), "html.parser").select("tr.other-label")
               if tr.select("td")[2].get_text() == "ana" and tr.select("td")[1].get_text() == "Claim support")
    assert [li.get_text() for li in row.select(".evidence-list li")] == [
        "context #1, sentence 2: Antes del <script>alert(1)</script> embarazo!", "context #2"]


def _post_task(client, url, token, task, target, value):
    return client.post(f"{url}/label", data={"task": task, "target": target, "value": value}, headers=_hx(token))


def test_the_adjudication_page_shows_each_annotators_evidence(client, session, make_sample, make_user, login):
    sample = make_sample(contexts=(SENTENCES,))
    claim = session.exec(select(Claim).where(Claim.sample_id == sample.id, Claim.index == 0)).one()
    context = session.exec(select(Context).where(Context.sample_id == sample.id)).one()
    task = lookup.task(session, "claim_support")
    sentence = sentence_evidence([context], context.id, 1)
    for name, value, evidence in (("ana", "supported", [sentence]), ("bea", "unsupported", [0])):
        user = make_user(name)
        session.add(Label(task_id=task.id, sample_id=sample.id, claim_id=claim.id, target_key=f"claim:{claim.id}",
                          annotator_id=user.id, value=value, evidence=evidence, source="ui"))
    session.commit()
    login("eng", "engineer")
    response = client.get("/adjudicate?dataset=d&task=claim_support")
    assert "<script>alert(1)" not in response.get_data(as_text=True)
    rows = BeautifulSoup(response.get_data(as_text=True), "html.parser").select("#disputes .votes tbody tr")
    assert [[li.get_text() for li in tr.select(".evidence-list li")] for tr in rows] == [
        ["context #1, sentence 2: Antes del <script>alert(1)</script> embarazo!"], ["context #1"]]


def test_a_crafted_post_cannot_label_a_metric_task(client, session, web_item):
    """Metric tasks are judge-side: the item has no widget for them, and a hand-made POST is refused."""
    token, url, _target, _contexts, _foreign = web_item
    sample_target = f"sample:{session.exec(select(Assignment)).first().sample_id}"
    response = client.post(f"{url}/label", data={"task": "faithfulness", "target": sample_target, "value": "1"},
                           headers=_hx(token))
    assert response.status_code == 404
    session.rollback()
    assert session.exec(select(Label)).all() == []
