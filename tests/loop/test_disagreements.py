"""Disagreements of a judge: the list and its filters, one item opened, and "add as few-shot example"."""

from __future__ import annotations

import pytest
from hostile import XSS_ANSWER
from loop_helpers import copy_verdicts
from sqlmodel import select

from calibrate.calibration import CalibrationError, Options, alignment_sections
from calibrate.judges import PromptError
from calibrate.judges.versions import stored_examples
from calibrate.loop.dashboard import add_fewshot
from calibrate.loop.disagreements import disagreement_detail, disagreements
from calibrate.models import Claim, Judge, Sample, Verdict


def test_list_and_filters(demo, session):
    found = disagreements(session, demo, "demo-claims@1")
    assert found.total == len(found.items) > 0 and found.split == "dev"
    assert all(d.gold != d.judge for d in found.items)
    dev = {s for s in session.exec(select(Sample.external_id).where(Sample.split == "dev")).all()}
    assert {d.sample for d in found.items} <= dev
    pair = found.pairs[0]
    by_pair = disagreements(session, demo, "demo-claims@1", pair=pair.replace("→", "->"))
    assert by_pair.items and all(d.pair == pair for d in by_pair.items)
    unanimous = disagreements(session, demo, "demo-claims@1", agreement="unanimous").items
    split = disagreements(session, demo, "demo-claims@1", agreement="split").items
    assert len(unanimous) + len(split) == found.total and all(d.unanimous for d in unanimous)
    first = session.exec(select(Sample).where(Sample.external_id == found.items[0].sample)).one()
    key, value = next(iter(first.meta.items()))
    by_meta = disagreements(session, demo, "demo-claims@1", meta=f"{key}={value}").items
    assert found.items[0] in by_meta
    assert all(str(session.exec(select(Sample).where(Sample.external_id == d.sample)).one().meta.get(key)) == str(value) for d in by_meta)
    with pytest.raises(CalibrationError, match="FIELD=VALUE"):
        disagreements(session, demo, "demo-claims@1", meta="nothing")
    with pytest.raises(CalibrationError, match="unanimous or split"):
        disagreements(session, demo, "demo-claims@1", agreement="maybe")


def test_add_as_fewshot_creates_the_next_version_and_excludes_the_target(demo, session):
    target = disagreements(session, demo, "demo-claims@1").items[0].target
    detail = disagreement_detail(session, demo, "demo-claims@1", target)
    assert detail.labels and detail.gold and detail.verdict is not None and not detail.fewshot_refusal
    result = add_fewshot(session, demo, "demo-claims@1", target, "  El texto lo dice.  ")
    session.commit()
    assert result.created and result.version.number == 3
    examples = stored_examples(session, result.version)
    assert len(examples) == 3 and examples[-1].target_key == target  # @2's two, then this one
    assert examples[-1].value == detail.gold and examples[-1].rationale == "El texto lo dice."
    first = session.exec(select(Judge).where(Judge.name == "demo-claims@1")).one()
    copy_verdicts(session, first, "demo-claims@3", result.version.id)
    sections = alignment_sections(session, demo, "claim_support", ["demo-claims@1", "demo-claims@3"], Options(bootstrap=100, split="dev"))
    assert sections["demo-claims@1"]["n_fewshot"] == 0 and sections["demo-claims@3"]["n_fewshot"] == 1
    assert sections["demo-claims@3"]["n"] == sections["demo-claims@1"]["n"] - 1
    with pytest.raises(PromptError, match="given twice"):
        add_fewshot(session, demo, "demo-claims@3", target, "")
    session.rollback()


def test_test_split_and_imported_judges_are_refused(demo, session):
    claim = session.exec(select(Claim).join(Sample, Sample.id == Claim.sample_id).where(Sample.split == "test")).first()
    detail = disagreement_detail(session, demo, "demo-claims@1", f"claim:{claim.id}")
    assert "test split" in detail.fewshot_refusal
    with pytest.raises(PromptError, match="test split"):
        add_fewshot(session, demo, "demo-claims@1", f"claim:{claim.id}", "")
    session.rollback()
    with pytest.raises(CalibrationError, match="not a claim target"):
        disagreement_detail(session, demo, "demo-claims@1", "sample:1")


def test_pages_escape_model_text_and_post_needs_csrf(demo, client, login, session, soup):
    target = disagreements(session, demo, "demo-claims@1").items[0].target
    verdict = session.exec(select(Verdict).join(Judge).where(Judge.name == "demo-claims@1", Verdict.target_key == target)).one()
    verdict.raw, verdict.reason = XSS_ANSWER, XSS_ANSWER
    session.commit()
    token = login("eng", "engineer")
    listing = soup(client.get(f"/datasets/{demo}/calibration/judges/demo-claims@1/disagreements"))
    link = listing.select_one(f"#disagreements tr[data-target='{target}'] a")["href"]
    page = soup(client.get(link))
    assert page.select_one("#judge-raw").get_text() == XSS_ANSWER
    assert page.select_one("#verdict").has_attr("hx-disable") and page.select_one("#humans").has_attr("hx-disable")
    assert not page.select("script:not([src]):not(#calibrate-strings)") and not page.select("[style]")
    action = page.select_one("#fewshot-form")["action"]
    assert client.post(action, data={"rationale": "x"}).status_code == 400  # no CSRF token
    done = client.post(action, data={"rationale": "porque sí", "csrf_token": token})
    assert done.status_code == 303 and done.headers["Location"].endswith("/prompts/demo-claims/3")
    board = soup(client.get(f"/datasets/{demo}/calibration"))
    assert board.select_one("#judges tr[data-judge='demo-claims@3'] .note").get_text(strip=True).startswith("no run of this version")


def test_annotators_get_403(demo, client, login, session):
    target = disagreements(session, demo, "demo-claims@1").items[0].target
    token = login("ana", "annotator")
    base = f"/datasets/{demo}/calibration/judges/demo-claims@1/disagreements"
    assert client.get(base).status_code == 403
    assert client.get(f"{base}/{target}").status_code == 403
    assert client.post(f"{base}/{target}/fewshot", data={"csrf_token": token}).status_code == 403
    assert client.post(f"{base}/{target}/triage", data={"kind": "judge_error", "csrf_token": token}).status_code == 403
    assert client.post(f"/datasets/{demo}/calibration/judges/demo-claims@1/evaluate-test", data={"csrf_token": token}).status_code == 403


def test_triage_is_stored_counted_and_human_error_goes_to_adjudication(demo, session, client, login, soup):
    from calibrate.annotation.queue import for_review
    from calibrate.loop.dashboard import dashboard, triage
    from calibrate.models import Triage

    items = disagreements(session, demo, "demo-claims@1").items
    first, second = items[0].target, items[1].target
    triage(session, demo, "demo-claims@1", first, "judge_error", note="missed the dose")
    result = triage(session, demo, "demo-claims@1", second, "human_error")
    session.commit()
    assert result.flagged
    flagged = [(a.note, s.external_id) for a, s, _, _ in for_review(session) if a.status == "flagged"]
    assert len(flagged) == 1 and second in flagged[0][0] and flagged[0][1] == items[1].sample
    # triaging again changes the row, never adds one
    triage(session, demo, "demo-claims@1", first, "ambiguous_guideline")
    session.commit()
    assert len(session.exec(select(Triage)).all()) == 2
    board = dashboard(session, demo, options=Options(bootstrap=100))
    assert board.rows[0].triage == {"ambiguous_guideline": 1, "human_error": 1} and board.rows[1].triage == {}
    listed = {d.target: d.triage for d in disagreements(session, demo, "demo-claims@1").items}
    assert listed[first] == "ambiguous_guideline" and listed[second] == "human_error"
    with pytest.raises(CalibrationError, match="triage must be one of"):
        triage(session, demo, "demo-claims@1", first, "nobody")
    # the page: form posts with CSRF, shows the counts on the dashboard, and the adjudication page lists the sample
    token = login("eng", "engineer")
    base = f"/datasets/{demo}/calibration/judges/demo-claims@2/disagreements"
    target = disagreements(session, demo, "demo-claims@2").items[0].target
    page = soup(client.get(f"{base}/{target}"))
    action = page.select_one("#triage-form")["action"]
    assert client.post(action, data={"kind": "judge_error"}).status_code == 400
    done = client.post(action, data={"kind": "judge_error", "csrf_token": token}, follow_redirects=True)
    assert soup(done).select_one("#triage-kind").get_text() == "judge error"
    board_page = soup(client.get(f"/datasets/{demo}/calibration"))
    assert board_page.select_one("#judges tr[data-judge='demo-claims@2'] .triage").get_text(strip=True) == "1 / 0 / 0"
    adjudication = soup(client.get("/adjudicate")).get_text()
    assert items[1].sample in adjudication
