"""Two judges compared in the browser, and the annotation queue's order switched from the dashboard."""

from __future__ import annotations

from hostile import XSS_ANSWER
from loop_helpers import copy_verdicts
from sqlmodel import select

from calibrate.calibration import Options
from calibrate.calibration.compare import compare_judges
from calibrate.db import write_session
from calibrate.judges import save_version
from calibrate.models import Assignment, Judge, Sample, Verdict
from calibrate.reports.compare_report import person_target


def test_compare_page_shows_what_calibrate_compare_gives_on_the_split(demo, client, login, session, app, soup):
    login("eng", "engineer")
    board = soup(client.get(f"/datasets/{demo}/calibration"))
    form = board.select_one("#compare-form")
    assert form.select_one("select[name=a] option[selected]")["value"] == "demo-claims@1"
    assert form.select_one("select[name=b] option[selected]")["value"] == "demo-claims@2"
    fields = {"task": "claim_support", "split": "dev", "a": "demo-claims@1", "b": "demo-claims@2"}
    assert {f["name"]: f.get("value") for f in form.select("input[type=hidden]")} == {"task": "claim_support", "split": "dev"}
    response = client.get(form["action"], query_string=fields)
    assert response.status_code == 200
    page = soup(response)
    config = app.config
    expected = compare_judges(session, demo, "demo-claims@1", "demo-claims@2", task="claim_support",
                              options=Options(bootstrap=config["BOOTSTRAP"], confidence=config["CONFIDENCE"], seed=config["SEED"], split="dev"))
    assert page.select_one("#compare-scope .split").get_text() == "split dev"
    row = [td.get_text() for td in page.select("#task-claim_support table.stats tbody tr")[0].select("td")]
    assert row[1:4] == [f"{expected['a']['value']:.3f}", f"{expected['b']['value']:.3f}", f"{expected['difference']['value']:.3f}"]
    assert row[4] == f"[{expected['difference']['ci'][0]:.3f}, {expected['difference']['ci'][1]:.3f}]"
    assert f"b01) {expected['mcnemar']['b01']}" in page.select_one("#task-claim_support .mcnemar").get_text()
    # every flip is listed and opens the disagreement of the judge that got it wrong
    fixed = page.select("#task-claim_support ul.fixed a")
    broken = page.select("#task-claim_support ul.broken a")
    # The JSON's file-style ids ("demo-004/claim/4", 0-based), named for people on the page ("demo-004 · claim 5").
    assert [a.get_text() for a in fixed] == [person_target(t) for t in expected["flips"]["fixed"]]
    assert [a.get_text() for a in broken] == [person_target(t) for t in expected["flips"]["broken"]]
    assert fixed or broken
    for a, judge in [(x, "demo-claims@1") for x in fixed] + [(x, "demo-claims@2") for x in broken]:
        assert f"/judges/{judge}/disagreements/claim:" in a["href"]
    first = (fixed + broken)[0]
    detail = client.get(first["href"])
    assert detail.status_code == 200 and soup(detail).select_one("#gold").get_text(strip=True)
    assert page.select_one("#compare .versions pre.diff")  # the diff of the two prompt versions
    assert page.select_one("#compare").has_attr("hx-disable")


def _bad_input_cases(session, engine, demo):
    with write_session(engine) as s:
        save_version(s, "fresh", task="claim_support")  # fresh@1: a version without any run
    return [
        ({"a": "demo-claims@1", "b": ""}, "pick two judges to compare"),
        ({"a": "demo-claims@1", "b": "demo-claims@1"}, "pick two different judges: A and B are both demo-claims@1"),
        ({"a": "demo-claims@1", "b": "nobody"}, "unknown judge 'nobody'"),
        ({"a": "demo-claims@1", "b": "fresh@1"}, f"fresh@1 has no run on {demo}: run it first"),
        ({"a": "demo-claims@1", "b": "demo-claims@2", "split": "test"}, "the test split of"),
        ({"a": "demo-claims@1", "b": "demo-claims@2", "split": "nope"}, "is in split 'nope'"),
        ({"a": "demo-claims@1", "b": "demo-claims@2", "task": "answer_quality"}, "nothing to compare"),
    ]


def test_bad_input_gives_a_message_never_a_crash_or_an_empty_chart(demo, client, login, session, engine, soup):
    cases = _bad_input_cases(session, engine, demo)
    login("eng", "engineer")
    for args, message in cases:
        response = client.get(f"/datasets/{demo}/calibration/compare", query_string={"split": "dev", **args})
        assert response.status_code == 200, (args, response.data[:300])
        page = soup(response)
        assert message in page.select_one("#compare-message").get_text(), args
        assert page.select("#compare") == [] and page.select("section.compare-task") == []
        assert page.select_one("#compare-form")  # the form stays, to pick again
    assert client.get("/datasets/nope/calibration/compare").status_code == 404


def test_no_common_targets_says_what_is_missing(demo, client, login, session, soup):
    # judge "C" only judged a (new) claim nobody labelled
    from calibrate.models import Claim, Task

    sample = session.exec(select(Sample).where(Sample.split == "dev")).first()
    claim = Claim(sample_id=sample.id, index=99, text="nueva", start=-1, end=-1)
    judge = Judge(name="C", kind="imported")
    session.add_all([claim, judge])
    session.flush()
    task = session.exec(select(Task).where(Task.name == "claim_support")).one()
    session.add(Verdict(judge_id=judge.id, task_id=task.id, sample_id=sample.id, claim_id=claim.id,
                        target_key=f"claim:{claim.id}", value="supported", source="import"))
    session.commit()
    login("eng", "engineer")
    page = soup(client.get(f"/datasets/{demo}/calibration/compare", query_string={"a": "demo-claims@1", "b": "C", "split": "dev"}))
    assert "nothing to compare between demo-claims@1 and C" in page.select_one("#compare-message").get_text()


def test_names_are_escaped(demo, client, login, session, soup):
    source = session.exec(select(Judge).where(Judge.name == "demo-claims@2")).one()
    hostile = copy_verdicts(session, source, XSS_ANSWER[:100])
    login("eng", "engineer")
    response = client.get(f"/datasets/{demo}/calibration/compare", query_string={"a": "demo-claims@1", "b": hostile.name, "split": "dev"})
    page = soup(response)
    assert page.select_one("#compare-scope .judge-b").get_text() == hostile.name
    assert not page.select("script:not([src]):not(#calibrate-strings)") and not page.select("[style]") and not page.select("#compare img")


def _fresh(session):
    """End the test's read transaction and forget loaded rows: the next query sees what the requests wrote."""
    session.rollback()
    session.expire_all()


def test_queue_order_switch_on_the_dashboard(demo, client, login, session, soup):
    from calibrate.models import Dataset

    pending = session.exec(select(Assignment).join(Sample, Sample.id == Assignment.sample_id).join(Dataset, Dataset.id == Sample.dataset_id)
                           .where(Assignment.status == "pending", Dataset.name == demo)).all()
    assert pending  # the demo leaves some items to label
    before = {a.id: (a.priority, a.status) for a in session.exec(select(Assignment)).all()}
    token = login("eng", "engineer")
    board = soup(client.get(f"/datasets/{demo}/calibration"))
    assert board.select_one("#queue-mode").get_text() == "in the sampled order"
    form = board.select_one("#queue-order-form")
    assert client.post(form["action"], data={"mode": "uncertain", "task": "claim_support"}).status_code == 400  # no CSRF token
    done = client.post(form["action"], data={"mode": "uncertain", "task": "claim_support", "split": "dev", "csrf_token": token})
    assert done.status_code == 303 and done.headers["Location"].endswith("/calibration?task=claim_support&split=dev")
    board = soup(client.get(done.headers["Location"]))
    assert board.select_one("#queue-mode").get_text() == "uncertain first"
    assert "uncertain first on claim_support by demo-claims@1, demo-claims@2" in board.select_one(".flash").get_text()
    _fresh(session)
    after = {a.id: (a.priority, a.status) for a in session.exec(select(Assignment)).all()}
    mine = {a.id for a in pending}
    assert all(after[i] == before[i] for i in before if i not in mine)  # done, skipped, other datasets: untouched
    assert [after[a.id][0] for a in pending if after[a.id][0] >= 0] == []
    client.post(form["action"], data={"mode": "sampled", "task": "claim_support", "csrf_token": token})
    _fresh(session)
    assert {a.id: (a.priority, a.status) for a in session.exec(select(Assignment)).all()} == before
    bad = client.post(form["action"], data={"mode": "random", "task": "claim_support", "csrf_token": token}, follow_redirects=True)
    assert "mode must be one of uncertain, sampled" in soup(bad).select(".flash")[-1].get_text()


def test_annotators_get_403(demo, client, login):
    token = login("ana", "annotator")
    assert client.get(f"/datasets/{demo}/calibration/compare?a=demo-claims@1&b=demo-claims@2").status_code == 403
    assert client.post(f"/datasets/{demo}/calibration/queue-order", data={"mode": "uncertain", "csrf_token": token}).status_code == 403
