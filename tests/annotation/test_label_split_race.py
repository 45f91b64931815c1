"""A claim split racing a label (issue 20, finding 3): the label never lands, current, on a retired claim.

The red team ran 160 simultaneous pairs (expert A splits a claim while expert B labels it):
111 succeeded both, leaving B's label on the retired claim, not stale, and `export labels`
wrote it under the old index, which by then named another claim. The label save now checks
the target again inside the write transaction; a lost race answers 409 and reloads the item.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from sqlmodel import Session, select

import calibrate.annotation.label_posts as label_posts
from calibrate.accounts import get_user
from calibrate.annotation.claim_edits import split_claim
from calibrate.models import Assignment, Claim, Label, Sample

ANSWER_CLAIMS = ("Tome 0,4 mg al día y hasta la semana 12.", "Consulte a su médico.")
SPLIT_AT = len("Tome 0,4 mg al día ")


def _token(client, username):
    page = client.get("/login")
    token = BeautifulSoup(page.data, "html.parser").select_one("input[name=csrf_token]")["value"]
    assert client.post("/login", data={"username": username, "password": "password-123", "csrf_token": token}).status_code == 303
    page = client.get("/datasets")
    return BeautifulSoup(page.data, "html.parser").select_one(".whoami input[name=csrf_token]")["value"]


def _hx(token):
    return {"HX-Request": "true", "X-CSRFToken": token}


@pytest.fixture
def pairs(app, session, make_sample, make_user):
    """`n` samples, each assigned to both ana (labels) and bea (splits); their clients logged in."""
    make_user("ana")
    make_user("bea")
    ana, bea = get_user(session, "ana"), get_user(session, "bea")

    def build(n):
        out = []
        for i in range(n):
            sample = make_sample(external_id=f"s{i}", answer=" ".join(ANSWER_CLAIMS), claims=list(ANSWER_CLAIMS))
            mine, theirs = Assignment(sample_id=sample.id, user_id=ana.id), Assignment(sample_id=sample.id, user_id=bea.id)
            session.add_all([mine, theirs])
            session.commit()
            claim = session.exec(select(Claim).where(Claim.sample_id == sample.id, Claim.index == 0)).one()
            out.append((sample.id, mine.id, theirs.id, claim.id))
        clients = {}
        for name in ("ana", "bea"):
            client = app.test_client()
            clients[name] = (client, _token(client, name))
        return out, clients

    return build


def _label(client, token, assignment_id, claim_id, value="supported"):
    return client.post(f"/annotate/{assignment_id}/label", headers=_hx(token),
                       data={"task": "claim_support", "target": f"claim:{claim_id}", "value": value})


def _split(client, token, assignment_id, claim_id):
    return client.post(f"/annotate/{assignment_id}/claims", headers=_hx(token),
                       data={"change": "split", "claim": str(claim_id), "at": str(SPLIT_AT)})


def _no_current_label_on_a_retired_claim(session):
    session.rollback()
    session.expire_all()
    orphans = session.exec(select(Label).join(Claim, Claim.id == Label.claim_id)
                           .where(Claim.active.is_(False), Label.stale.is_(False))).all()
    assert orphans == []


def _exported_labels_name_their_claims(runner, session):
    """Every exported label's (sample, index) is the active claim the label is on."""
    out = runner.invoke(["export", "labels", "--dataset", "d"])
    assert out.exit_code == 0, out.output
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    session.rollback()
    for row in rows:
        sample = session.exec(select(Sample).where(Sample.external_id == row["sample_id"])).one()
        claim = session.exec(select(Claim).where(Claim.sample_id == sample.id, Claim.index == row["claim"],
                                                 Claim.active.is_(True))).one()
        label = session.exec(select(Label).where(Label.claim_id == claim.id, Label.stale.is_(False))).all()
        assert [lab.value for lab in label] == [row["value"]]
    return rows


def test_a_split_committed_between_the_check_and_the_write_answers_409_and_reloads(pairs, engine, session, runner,
                                                                                     monkeypatch):
    """The interleaving forced at the critical point: after the item is read, before the write lock."""
    [(sample_id, mine, theirs, claim_id)], clients = pairs(1)
    real_target_in = label_posts.target_in

    def split_meanwhile(data, task, key):
        target = real_target_in(data, task, key)  # the claim is active here: the old check passes
        with Session(engine) as other:
            split_claim(other, other.get(Sample, sample_id), get_user(other, "bea"), claim_id, SPLIT_AT)
            other.commit()
        return target

    monkeypatch.setattr(label_posts, "target_in", split_meanwhile)
    client, token = clients["ana"]
    response = _label(client, token, mine, claim_id)
    assert response.status_code == 409
    assert response.headers["HX-Redirect"] == f"/annotate/{mine}"
    assert "changed by someone else meanwhile" in response.get_data(as_text=True)
    session.rollback()
    assert session.exec(select(Label)).all() == []
    # The reloaded item says why, and shows the two new claims instead of the old one.
    monkeypatch.setattr(label_posts, "target_in", real_target_in)
    page = BeautifulSoup(client.get(f"/annotate/{mine}").data, "html.parser")
    assert "changed by someone else meanwhile" in page.select_one(".flash-error").get_text()
    assert f"claim:{claim_id}" not in str(page)
    # A page still showing the old claim (loaded before the split) gets the same 409, not a 404.
    again = _label(client, token, mine, claim_id)
    assert again.status_code == 409 and again.headers["HX-Redirect"] == f"/annotate/{mine}"
    _no_current_label_on_a_retired_claim(session)


def test_simultaneous_splits_and_labels_leave_no_current_label_on_a_retired_claim(pairs, session, runner):
    """Real threads against the app on a real SQLite file: each pair races a split against a label."""
    items, clients = pairs(8)
    outcomes: dict[tuple[int, str], int] = {}
    barrier = threading.Barrier(2)

    def run(pair, name, action, assignment_id, claim_id):
        client, token = clients[name]
        barrier.wait(timeout=30)
        outcomes[pair, name] = action(client, token, assignment_id, claim_id).status_code

    for pair, (_sample_id, mine, theirs, claim_id) in enumerate(items):
        threads = [threading.Thread(target=run, args=(pair, "ana", _label, mine, claim_id)),
                   threading.Thread(target=run, args=(pair, "bea", _split, theirs, claim_id))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    results = [(outcomes[pair, "ana"], outcomes[pair, "bea"]) for pair in range(len(items))]
    # Exactly one side wins each pair: the label (and the split is refused: 422, another annotator's
    # label is on the claim), or the split (and the label answers 409). Never both, never a 500.
    assert all(result in ((200, 422), (409, 200)) for result in results), results
    _no_current_label_on_a_retired_claim(session)
    rows = _exported_labels_name_their_claims(runner, session)
    assert len(rows) == sum(label == 200 for label, _ in results)


def test_a_labels_import_racing_a_split_leaves_its_labels_on_the_retired_claim_stale(runner, session, monkeypatch):
    """The import validated against the claim; a split retired it before the publish: the label is flagged stale."""
    from sqlalchemy import update

    import calibrate.ingest.label_upserts as label_upserts

    source = Path(__file__).resolve().parent.parent / "data" / "good"
    assert runner.invoke(["import", "samples", str(source / "samples.jsonl"), "--dataset", "d"]).exit_code == 0
    real_publish = label_upserts.LabelStager.publish

    def split_first(self, db):
        db.execute(update(Claim).where(Claim.index == 0).values(active=False))  # as a split committed meanwhile
        return real_publish(self, db)

    monkeypatch.setattr(label_upserts.LabelStager, "publish", split_first)
    out = runner.invoke(["import", "labels", str(source / "labels.jsonl"), "--dataset", "d"])
    assert out.exit_code == 0, out.output
    _no_current_label_on_a_retired_claim(session)
    stale = session.exec(select(Label).where(Label.stale.is_(True))).all()
    assert stale and {label.stale_reason for label in stale} == {"its claim or context changed during the import"}
    assert "left out: " in runner.invoke(["export", "labels", "--dataset", "d"]).stderr
