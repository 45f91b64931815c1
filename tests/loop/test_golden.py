"""Golden sets (calibrate/loop/golden.py, `calibrate golden …`, `--golden` on the report commands).

One dataset per test, written in one transaction: 200 expert-labelled samples in split test
(topics a:80 b:60 c:40 d:20) and 300 production traces (metadata.source=live; topics a:60 b:60
c:90 d:90), one claim each; two experts label the golden claims, judge `j` agrees with the
gold on about 85 % of them.
"""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest
from golden_helpers import DS, GOLDEN_TOPICS, REFRESH, build
from prompt_helpers import prompt_version
from sqlmodel import Session, select

from calibrate.db import dispose_engine, get_engine, write_session
from calibrate.errors import GoldenError, NotFound
from calibrate.judges.errors import PromptError
from calibrate.judges.versions import FewShotSpec, resolve_few_shots
from calibrate.loop import golden
from calibrate.models import (
    Assignment,
    Claim,
    Dataset,
    FewShot,
    GoldenMember,
    Judge,
    Label,
    Sample,
    Task,
    User,
    Verdict,
    target_key,
)


@pytest.fixture(scope="module")
def built_db(tmp_path_factory, template_db):
    """Build the dataset once per module; each test gets a copy (building it is the slow part)."""
    path = tmp_path_factory.mktemp("golden") / "calibrate.sqlite"
    shutil.copyfile(template_db, path)
    url = f"sqlite:///{path}"
    engine = get_engine(url)
    build(engine)
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    dispose_engine(url)
    return path


@pytest.fixture
def data(engine, built_db):
    source, target = sqlite3.connect(built_db), sqlite3.connect(engine.url.database)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
    return engine


def make(engine, name="g"):
    with write_session(engine) as session:
        return golden.create_golden(session, DS, name, split="test")


def refresh(engine, name="g", **extra):
    with write_session(engine) as session:
        return golden.refresh_golden(session, DS, name, **{**REFRESH, **extra})


def show(engine, ref):
    with Session(engine) as session:
        return golden.show_golden(session, DS, ref)


def test_create_show_list_and_the_hash(data):
    made = make(data)
    assert made["version"] == 1 and made["n_items"] == 200
    shown = show(data, "g")
    assert shown["hash"] == made["hash"] and len(shown["items"]) == 200
    assert set(shown["items"][0]) == {"sample_id", "anchor", "labelled", "added_in", "retired_in", "source_trace_id"}
    assert all(item["labelled"] and item["added_in"] == 1 and item["retired_in"] is None for item in shown["items"])
    assert shown["items"][0]["source_trace_id"] == "trace-g000"
    with Session(data) as session:
        version = golden.find_version(session, golden.find_golden(session, session.exec(select(Dataset)).one(), "g"), 1)
        # The documented hash: sha256 of the canonical JSON of the items (sorted, compact, key-sorted).
        import hashlib
        expected = hashlib.sha256(json.dumps(sorted(version.items, key=lambda i: i["sample_id"]), sort_keys=True,
                                             separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()
        assert version.hash == expected
        assert version.items[0]["gold"] in ({"claim_support": {"claim 0": "supported"}},
                                            {"claim_support": {"claim 0": "unsupported"}})
        assert golden.list_golden(session, DS)[0]["name"] == "g"
    with write_session(data) as session, pytest.raises(GoldenError, match="already has a golden set"):
        golden.create_golden(session, DS, "g", split="test")
    with Session(data) as session, pytest.raises(NotFound, match="no golden set 'h'"):
        golden.show_golden(session, DS, "h")
    with Session(data) as session, pytest.raises(NotFound, match="no version 5"):
        golden.show_golden(session, DS, "g@5")


def test_the_hash_covers_what_each_member_says(data):
    """The same members and gold on changed content hash differently (issue 30): each item carries its sample's
    content hash, so a version cannot cite a hash that a different text would also give."""
    first = make(data, "g")
    assert make(data, "same")["hash"] == first["hash"]  # a set's name is not part of it
    with Session(data) as session:
        member = session.exec(select(Sample).join(GoldenMember, GoldenMember.sample_id == Sample.id)
                              .order_by(Sample.external_id)).first()
        version = golden.find_version(session, golden.find_golden(session, session.exec(select(Dataset)).one(), "g"), 1)
        item = next(i for i in version.items if i["sample_id"] == member.external_id)
        assert item["content"] == member.content_hash  # (the helper stores short hashes; an import stores sha256s)
    with write_session(data) as session:  # its answer as an --update import would change it: a new content hash
        session.get(Sample, member.id).content_hash = "0" * 64
    changed = make(data, "changed")
    assert changed["hash"] != first["hash"] and show(data, "g")["hash"] == first["hash"]  # version 1 keeps its own


def test_bad_references_and_where_are_refused_and_nothing_written(data):
    for ref in ("", "g@", "g@x", "g@0", "a@b@1", "x" * 101, "tab\there"):
        with Session(data) as session, pytest.raises(GoldenError):
            golden.show_golden(session, DS, ref)
    for where in ("source=live", "metadata.=x", "last=10", "last=xd", "split", "x" * 600, "split=test&"):
        with write_session(data) as session, pytest.raises(GoldenError):
            golden.create_golden(session, DS, "w", where=where)
    with Session(data) as session:
        assert golden.list_golden(session, DS) == []


def test_refresh_must_show(data, tmp_path, built_db):
    """N=200, renew 0.2, anchor share 0.5: 40 retired, 40 added, 100 anchors unchanged, strata ±1, seed → hash."""
    make(data)
    v1 = show(data, "g@1")
    made = refresh(data)
    assert made["version"] == 2 and made["retired"] == 40 and made["added"] == 40 and made["anchors"] == 100
    assert made["n_items"] == 200
    for stratum, seats in made["allocation"].items():
        assert abs(seats - made["target"][stratum]) <= 1
    assert sum(made["allocation"].values()) == 40
    v2 = show(data, "g@2")
    added = [i for i in v2["items"] if i["added_in"] == 2]
    assert len(added) == 40 and all(i["source_trace_id"].startswith("trace-p") and not i["labelled"] for i in added)
    # v1 still lists its 200 members; 40 of them now say they retired in 2.
    v1_again = show(data, "g@1")
    assert v1_again["hash"] == v1["hash"] and len(v1_again["items"]) == 200
    assert sum(1 for i in v1_again["items"] if i["retired_in"] == 2) == 40
    # Anchors: byte-identical from one version to the next (a second refresh never touches them).
    third = refresh(data, seed=8)
    assert third["retired"] == 40 and third["anchors"] == 100
    with Session(data) as session:
        gs = golden.find_golden(session, session.exec(select(Dataset)).one(), "g")
        items = {n: {i["sample_id"]: i for i in golden.find_version(session, gs, n).items} for n in (1, 2, 3)}
    anchors = [sid for sid, item in items[2].items() if item["anchor"]]
    assert len(anchors) == 100 and all(sid in items[3] for sid in anchors)
    for sid in anchors:
        assert golden.canonical_items([items[2][sid]]) == golden.canonical_items([items[3][sid]])
        first = dict(items[1][sid], anchor=True)
        assert golden.canonical_items([first]) == golden.canonical_items([items[2][sid]])
    # New items are queued to two experts each.
    with Session(data) as session:
        new_ids = [m.sample_id for m in session.exec(select(GoldenMember).where(GoldenMember.added_in == 2))]
        assignments = session.exec(select(Assignment)).all()
        per_sample = {}
        for a in assignments:
            per_sample.setdefault(a.sample_id, set()).add(a.user_id)
        assert all(len(per_sample[s]) == 2 and None not in per_sample[s] for s in new_ids)
    # The same seed on the same data gives the same hash; another seed another one.
    other = tmp_path / "other.sqlite"
    shutil.copyfile(built_db, other)
    url = f"sqlite:///{other}"
    try:
        engine = get_engine(url)
        make(engine)
        assert refresh(engine)["hash"] == made["hash"]
        assert refresh(engine, seed=99)["hash"] != third["hash"]
    finally:
        dispose_engine(url)


def test_status_keys_and_staleness(data):
    from datetime import timedelta

    from calibrate.models import utcnow
    make(data)
    with Session(data) as session:
        status = golden.golden_status(session, DS, "g", strata="metadata.topic")
    assert list(status) == ["version", "created_at", "age_days", "n_items", "n_labelled", "n_anchor", "renewed_share_90d",
                            "strata", "stale"]
    assert status["n_items"] == 200 and status["n_labelled"] == 200 and status["n_anchor"] == 0
    assert status["strata"] == GOLDEN_TOPICS and status["renewed_share_90d"] == 1.0 and status["stale"] is False
    with Session(data) as session:
        later = golden.golden_status(session, DS, "g", now=utcnow() + timedelta(days=100))
    assert later["stale"] is True and later["renewed_share_90d"] == 0.0 and later["age_days"] >= 100
    refresh(data)
    with Session(data) as session:
        after = golden.golden_status(session, DS, "g")
    assert after["version"] == 2 and after["n_labelled"] == 160 and after["n_anchor"] == 100
    assert after["strata"] == {k: v for k, v in after["strata"].items()} and sum(after["strata"].values()) == 200


def test_fewshots_are_never_golden(data):
    with write_session(data) as session:
        version = prompt_version(session, "claim_support")
        g5 = session.exec(select(Sample).where(Sample.external_id == "g005")).one()
        p0 = session.exec(select(Sample).where(Sample.external_id == "p000")).one()
        for order, sample in enumerate((g5, p0)):
            claim = session.exec(select(Claim).where(Claim.sample_id == sample.id)).one()
            session.add(FewShot(version_id=version.id, order=order, sample_id=sample.id, claim_id=claim.id,
                                target_key=target_key("claim", claim.id), value="supported"))
    with write_session(data) as session, pytest.raises(GoldenError, match="few-shot example.*g005"):
        golden.create_golden(session, DS, "g", split="test")
    with write_session(data) as session:
        session.exec(select(FewShot)).all()
        for row in session.exec(select(FewShot).where(FewShot.order == 0)):
            session.delete(row)
    make(data)
    refresh(data)
    with Session(data) as session:
        members = {m.sample_id for m in session.exec(select(GoldenMember))}
        p0 = session.exec(select(Sample).where(Sample.external_id == "p000")).one()
        assert p0.id not in members  # an example of a prompt version is never drawn
        task = session.exec(select(Task).where(Task.name == "claim_support")).one()
        newcomer = session.exec(select(Sample).join(GoldenMember, GoldenMember.sample_id == Sample.id)
                                .where(GoldenMember.added_in == 2)).first()
        with pytest.raises(PromptError, match="golden set g"):
            resolve_few_shots(session, task, [FewShotSpec(f"{newcomer.external_id}:0", "")], dataset=DS)


def test_refresh_without_two_experts_leaves_open_slots(data):
    with write_session(data) as session:
        for user in session.exec(select(User)).all():
            if user.username != "ana":
                user.active = False
                session.add(user)
    make(data)
    made = refresh(data)
    assert made["queue"] == {"experts": [], "assignments": 0, "open_slots": 80, "items": 40, "per_item": 2,
                             "already_assigned": 0, "experts_available": 1}
    assert made["queue_notes"] == ["1 active annotators, fewer than 2: 80 open slots that any annotator may claim"]


def test_refresh_refuses_more_than_production_has(data):
    make(data)
    with write_session(data) as session, pytest.raises(GoldenError, match="cannot refresh"):
        golden.refresh_golden(session, DS, "g", source="metadata.topic=d", renew=0.9, anchor_share=0.0)
    with Session(data) as session:
        assert golden.show_golden(session, DS, "g")["version"] == 1


def gate(runner, ref, *extra):
    return runner.invoke(["gate", "--dataset", DS, "--judge", "j", "--bootstrap", "200", "--golden", ref, *extra])


def test_a_pinned_gate_gives_the_same_answer_after_a_refresh(data, runner):
    make(data)
    before = gate(runner, "g@1")
    assert before.exit_code in (0, 1), before.output
    assert "[golden g@1 sha256:" in before.output
    refresh(data)
    # New items get their labels: the latest version's gold moves, the pinned one's does not.
    with write_session(data) as session:
        task = session.exec(select(Task).where(Task.name == "claim_support")).one()
        users = session.exec(select(User)).all()
        for member in session.exec(select(GoldenMember).where(GoldenMember.added_in == 2)):
            claim = session.exec(select(Claim).where(Claim.sample_id == member.sample_id)).one()
            for user in users[:2]:
                session.add(Label(task_id=task.id, sample_id=member.sample_id, claim_id=claim.id,
                                  target_key=target_key("claim", claim.id), annotator_id=user.id, value="unsupported"))
    after = gate(runner, "g@1")
    assert after.exit_code == before.exit_code and after.output == before.output
    latest = gate(runner, "g")
    assert "[golden g@2 sha256:" in latest.output and "NOTE golden g@2: the gold of 40 of its 200 members changed" in latest.output
    report = json.loads(runner.invoke(["report", "--dataset", DS, "--judge", "j", "--bootstrap", "200",
                                       "--golden", "g@1"]).output)
    assert report["golden"]["name"] == "g" and report["golden"]["version"] == 1
    assert report["golden"]["hash"] == show(data, "g@1")["hash"] and report["tasks"]["claim_support"]["n"] == 200
    for fmt in ("md", "html"):  # the written reports cite it too
        written = runner.invoke(["report", "--dataset", DS, "--judge", "j", "--bootstrap", "200", "--golden", "g@1",
                                 "--format", fmt, "--locale", "es"]).output
        assert f"g@1 (sha256 {report['golden']['hash']})" in written and "Conjunto de referencia" in written
    whole = json.loads(runner.invoke(["report", "--dataset", DS, "--judge", "j", "--bootstrap", "200"]).output)
    assert "golden" not in whole and whole["tasks"]["claim_support"]["n"] == 240
    # After the refresh the report on the latest version compares the judge on new vs retained members.
    latest_report = json.loads(runner.invoke(["report", "--dataset", DS, "--judge", "j", "--bootstrap", "200",
                                              "--golden", "g"]).output)
    versus = latest_report["golden"]["retained_vs_new"]
    assert versus["n_new"] == 40 and versus["n_retained"] == 160 and versus["conclusion"] in ("inconclusive", "lower", "higher")
    assert versus["kappa_new_minus_retained"]["n_audit"] == 40


def test_every_report_command_cites_the_golden_version(data, runner):
    make(data)
    digest = show(data, "g")["hash"]
    with write_session(data) as session:
        source = session.exec(select(Judge).where(Judge.name == "j")).one()
        other = Judge(name="k", kind="imported")
        session.add(other)
        session.flush()
        for v in session.exec(select(Verdict).where(Verdict.judge_id == source.id)).all():
            session.add(Verdict(judge_id=other.id, task_id=v.task_id, sample_id=v.sample_id, claim_id=v.claim_id,
                                target_key=v.target_key, value="supported", source="import"))
    compared = runner.invoke(["compare", "--dataset", DS, "--judge", "j", "--judge", "k", "--bootstrap", "200",
                              "--golden", "g@1"])
    assert compared.exit_code == 0, compared.output
    result = json.loads(compared.output)
    assert result["golden"]["hash"] == digest and result["common_n"] == 200
    for fmt in ("md", "html"):
        written = runner.invoke(["compare", "--dataset", DS, "--judge", "j", "--judge", "k", "--bootstrap", "200",
                                 "--golden", "g@1", "--format", fmt]).output
        assert f"Golden set g@1 (sha256 {digest})" in written, fmt
        estimate_text = runner.invoke(["estimate", "--dataset", DS, "--judge", "j", "--task", "claim_support", "--golden", "g",
                                       "--method", "classical", "--format", fmt]).output
        assert f"g@1 (sha256 {digest})" in estimate_text, fmt
    estimated = runner.invoke(["estimate", "--dataset", DS, "--judge", "j", "--task", "claim_support", "--golden", "g",
                                "--method", "classical"])
    assert estimated.exit_code == 0, estimated.output
    assert json.loads(estimated.output)["golden"]["hash"] == digest
    alt = runner.invoke(["alt-test", "--dataset", DS, "--judge", "j", "--task", "claim_support", "--golden", "g"])
    # Two experts: the test needs three, so the command refuses it; what it computed still cites the version.
    assert alt.exit_code == 2 and "error:" in alt.output
    from calibrate import calibration
    with Session(data) as session:
        samples, cited = golden.golden_scope(session, DS, "g")
        tested = calibration.run_alt_test(session, DS, "claim_support", "j", samples=samples, golden=cited)
    assert tested["golden"]["hash"] == digest and cited["n_items"] == 200
    from calibrate.reports.alt_test_report import render_alt_test
    for fmt in ("md", "html"):
        assert f"Golden set g@1 (sha256 {digest})" in render_alt_test({**tested, "status": "ok"}, fmt), fmt
    unknown = runner.invoke(["report", "--dataset", DS, "--judge", "j", "--golden", "nope"])
    assert unknown.exit_code == 2 and "no golden set 'nope'" in unknown.output


def test_the_cli(data, runner):
    created = runner.invoke(["golden", "create", "g", "--dataset", DS, "--split", "test", "--json"])
    assert created.exit_code == 0, created.output
    assert json.loads(created.output)["n_items"] == 200
    listed = runner.invoke(["golden", "list", "--dataset", DS])
    assert listed.exit_code == 0 and listed.output.startswith("g@1  200 items")
    refreshed = runner.invoke(["golden", "refresh", "g", "--dataset", DS, "--from", "metadata.source=live", "--renew", "0.2",
                               "--anchor-share", "0.5", "--strata", "metadata.topic", "--seed", "7"])
    assert refreshed.exit_code == 0, refreshed.output
    assert "40 retired, 40 added, 100 anchors" in refreshed.output and "queued to ana, ben, cleo" in refreshed.output
    status = runner.invoke(["golden", "status", "g", "--dataset", DS, "--json"])
    assert json.loads(status.output)["version"] == 2
    shown = json.loads(runner.invoke(["golden", "show", "g@2", "--dataset", DS, "--json"]).output)
    assert shown["version"] == 2 and len(shown["items"]) == 200
    bad = runner.invoke(["golden", "refresh", "g", "--dataset", DS, "--from", "nonsense"])
    assert bad.exit_code == 2 and "WHERE term" in bad.output


def test_drift_of_a_golden_set(data):
    engine = data
    with write_session(engine) as session:  # an audit: 120 production samples labelled by two experts
        task = session.exec(select(Task).where(Task.name == "claim_support")).one()
        users = session.exec(select(User).order_by(User.username)).all()[:2]
        for sample in session.exec(select(Sample).where(Sample.external_id < "p120", Sample.external_id >= "p000")):
            claim = session.exec(select(Claim).where(Claim.sample_id == sample.id)).one()
            value = "supported" if sample.id % 3 else "unsupported"
            for user in users:
                session.add(Label(task_id=task.id, sample_id=sample.id, claim_id=claim.id,
                                  target_key=target_key("claim", claim.id), annotator_id=user.id, value=value))
    make(engine)
    with Session(engine) as session:
        found = golden.golden_drift(session, DS, "g", against="metadata.source=live", fields=["metadata.topic"], judge="j",
                                    n_permutations=49)
    json.dumps(found)  # JSON-safe as `golden drift --json` writes it
    topic = found["fields"]["metadata.topic"]
    assert topic["kind"] == "categorical" and topic["p_holm"] < 0.001 and topic["mde"] is not None and "psi" in topic
    for field in ("question_length", "answer_length", "n_contexts"):
        assert found["fields"][field]["kind"] == "numeric"
    assert "top_retrieval_score" not in found["fields"]  # no sample carries retrieval scores
    assert found["fields"]["question"]["kind"] == "text"
    # Holm across m = 5 fields: the MDE is the decision's (at 0.05 / 5) and the text test's permutations are raised
    # from the 49 asked so that its p-value floor 1 / (B + 1) sits well below 0.05 / 5
    assert found["alpha"] == 0.05 and found["n_fields"] == 5 and topic["mde_alpha"] == pytest.approx(0.01)
    assert found["fields"]["question"]["n_permutations"] == 499
    assert found["judge"]["kappa"]["n_golden"] == 200 and found["judge"]["kappa"]["n_audit"] == 120
    with Session(engine) as session:
        retained = golden.retained_vs_new(session, DS, "g", judge="j")
    assert retained["n_new"] == 200 and retained["n_retained"] == 0 and retained["conclusion"] == "inconclusive"


def test_drift_compares_the_top_retrieval_score_when_both_sides_carry_scores(data):
    assert golden.top_retrieval_score({"retrieval_scores": [None, "x", True, 0.8, 0.9]}) == 0.8  # the first-ranked number
    assert golden.top_retrieval_score({"retrieval_scores": "0.8"}) is None and golden.top_retrieval_score(None) is None
    make(data)
    with write_session(data) as session:  # production's retriever got worse: its top scores fall from ~0.8 to ~0.5
        dataset = session.exec(select(Dataset).where(Dataset.name == DS)).one()
        for sample in session.exec(select(Sample).where(Sample.dataset_id == dataset.id)):
            meta = dict(sample.meta or {})
            live = meta.get("source") == "live"
            meta["retrieval_scores"] = [(0.5 if live else 0.8) + (sample.id % 10) / 100, 0.1]
            sample.meta = meta
            session.add(sample)
    with Session(data) as session:
        found = golden.golden_drift(session, DS, "g", against="metadata.source=live", n_permutations=0)
    score = found["fields"]["top_retrieval_score"]
    assert score["kind"] == "numeric" and score["test"] == "ks" and score["value"] == 1.0 and score["p_holm"] < 1e-6
    assert found["n_fields"] == 5  # three lengths and counts, the score, the text


def test_the_dataset_page_lists_golden_sets_and_refreshes_them(data, client, login):
    from bs4 import BeautifulSoup

    make(data)
    token = login("eve", "engineer")
    page = BeautifulSoup(client.get(f"/datasets/{DS}").data, "html.parser")
    row = page.select_one("#golden-table tr[data-golden=g]")
    assert row is not None and "g@1" in row.get_text() and "200" in row.get_text()
    form = page.select_one("form.golden-refresh")
    fields = {"csrf_token": token, "source": "metadata.source=live", "renew": "0.2", "anchor_share": "0.5",
              "strata": "metadata.topic", "seed": "7"}
    done = client.post(form["action"], data=fields)
    assert done.status_code == 303
    with Session(data) as session:
        assert golden.show_golden(session, DS, "g")["version"] == 2
    after = BeautifulSoup(client.get(f"/datasets/{DS}").data, "html.parser")
    assert "g@2" in after.select_one("#golden-table").get_text() and "40 retired, 40 added" in after.get_text()
    refused = client.post(form["action"], data={**fields, "renew": "lots"}, headers={"Accept-Language": "es"})
    assert refused.status_code == 303
    spanish = BeautifulSoup(client.get(f"/datasets/{DS}", headers={"Accept-Language": "es"}).data, "html.parser")
    assert "--renew debe estar en (0, 1]" in spanish.get_text() and "Conjuntos de referencia" in spanish.get_text()
    with Session(data) as session:
        assert golden.show_golden(session, DS, "g")["version"] == 2  # the refused refresh wrote nothing


def test_the_dataset_page_checks_drift_against_a_where_in_english_and_spanish(data, client, login):
    from bs4 import BeautifulSoup

    make(data)
    login("eve", "engineer")
    page = BeautifulSoup(client.get(f"/datasets/{DS}").data, "html.parser")
    form = page.select_one("form.golden-drift-form")
    assert form is not None and form.select_one("input[name=drift]")["value"] == "g" and page.select_one("#golden-drift") is None
    asked = {"drift": "g", "against": "metadata.source=live", "fields": "metadata.topic"}
    checked = BeautifulSoup(client.get(f"/datasets/{DS}", query_string=asked).data, "html.parser")
    topic = checked.select_one("#drift-table tr[data-field='metadata.topic']")
    cells = [td.get_text(strip=True) for td in topic.select("td")]
    assert cells[1] == "chi2" and cells[-1] == "drift" and cells[6] != ""  # test, verdict, the MDE at 0.05 / m
    assert checked.select_one("#drift-verdict").get_text() == "drift found"
    assert checked.select_one("#drift-table tr[data-field=question]") is not None
    assert "Holm across 5 fields" in checked.select_one("#golden-drift").get_text()
    spanish = BeautifulSoup(client.get(f"/datasets/{DS}", query_string=asked, headers={"Accept-Language": "es"}).data, "html.parser")
    assert spanish.select_one("#drift-verdict").get_text() == "deriva detectada"
    assert "Holm sobre 5 campos" in spanish.select_one("#golden-drift").get_text()
    refused = client.get(f"/datasets/{DS}", query_string={**asked, "against": "nonsense"}, headers={"Accept-Language": "es"})
    assert refused.status_code == 404  # a page that cannot be built for these arguments, worded from its reason
    assert "WHERE" in refused.get_data(as_text=True) and b"drift-table" not in refused.data


def test_annotators_see_no_golden_section_and_cannot_refresh(data, client, login):
    make(data)
    token = login("zoe", "annotator")
    assert b"golden-table" not in client.get(f"/datasets/{DS}").data
    response = client.post(f"/datasets/{DS}/golden/g/refresh", data={"csrf_token": token, "source": "split=test"})
    assert response.status_code == 403


def test_the_dashboard_names_the_golden_version_of_its_decisions(data, client, login):
    from bs4 import BeautifulSoup

    with write_session(data) as session:  # the test split stays frozen on the dashboard: this golden set is dev's
        for sample in session.exec(select(Sample).where(Sample.split == "test")):
            sample.split = "dev"
            session.add(sample)
    with write_session(data) as session:
        golden.create_golden(session, DS, "g", split="dev")
    login("eve", "engineer")
    page = BeautifulSoup(client.get(f"/datasets/{DS}/calibration?golden=g@1").data, "html.parser")
    cited = page.select_one("#golden-version")
    assert cited is not None and cited.get_text() == "g@1"
    assert show(data, "g@1")["hash"][:12] in page.select_one("#dashboard-scope").get_text()
    assert page.select_one("select[name=golden] option[selected]")["value"] == "g"
    assert "200 labelled targets" in page.select_one("#dashboard-scope").get_text()  # the version's, not the dataset's
    assert "Scored on the 200 targets" in page.select_one("#common-targets").get_text()
    spanish = BeautifulSoup(client.get(f"/datasets/{DS}/calibration?golden=g", headers={"Accept-Language": "es"}).data,
                            "html.parser")
    assert "decisiones tomadas sobre el conjunto de referencia" in spanish.select_one("#dashboard-scope").get_text()
    plain = BeautifulSoup(client.get(f"/datasets/{DS}/calibration").data, "html.parser")
    assert plain.select_one("#golden-version") is None
