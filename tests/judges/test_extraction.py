"""`calibrate claims extract`: claim_extraction prompts through the judge runner, against the fake LLM server."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakellm import FakeLLM, claims_for
from sqlmodel import col, select

from calibrate.db import write_session
from calibrate.ingest import import_file
from calibrate.judges import save_version
from calibrate.models import Claim, Judge, JudgeRun, Label, LabelRevision, Sample, Task, Verdict

ROOT = Path(__file__).resolve().parents[2]

FOLIC = "Tome 0,4 mg al día desde antes de la concepción y hasta la semana 12. Consulte a su médico."
IRON = "El hierro se toma en ayunas. Tómelo con vitamina C."
SAMPLES = [
    {"id": "folic", "question": "¿Ácido fólico?", "answer": FOLIC, "contexts": ["Se recomiendan 0,4 mg diarios."]},
    {"id": "iron", "question": "¿Hierro?", "answer": IRON, "contexts": ["El hierro: 30–60 mg diarios."]},
    {"id": "sleep", "question": "¿Sueño?", "answer": "Duerma ocho horas. Evite pantallas y cafeína.", "contexts": []},
]


@pytest.fixture
def fake(fake_llm):
    fake_llm.claims = True
    return fake_llm


@pytest.fixture
def dataset(engine, tmp_path):
    """Import the three samples above (claims by the segmenter) into dataset d."""

    def make(records=SAMPLES, name="d"):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
        with write_session(engine) as session:
            import_file(session, "samples", path, dataset=name)
        return name

    return make


@pytest.fixture
def extractor(engine):
    with write_session(engine) as session:
        save_version(session, "ex", task="claim_extraction", model="fake-model")
    return "ex@1"


def extract(runner, fake, *more, prompt="ex@1", dataset="d"):
    return runner.invoke(["claims", "extract", "--dataset", dataset, "--prompt", prompt, "--backend", "openai",
                          "--base-url", fake.openai_base, "--api-key-env", "", *more])


def claims_of(session, external_id, *, active=True):
    session.commit()  # end the read transaction: a later one sees what the command wrote
    session.expire_all()
    sample = session.exec(select(Sample).where(Sample.external_id == external_id)).one()
    rows = session.exec(select(Claim).where(Claim.sample_id == sample.id, Claim.active == active).order_by(Claim.index)).all()
    return sample, rows


def test_the_extracted_claims_replace_the_segmenters_with_spans_into_the_answer(runner, session, fake, dataset, extractor):
    dataset()
    _, before = claims_of(session, "folic")
    assert [c.text for c in before] == ["Tome 0,4 mg al día desde antes de la concepción y hasta la semana 12.",
                                        "Consulte a su médico."]
    result = extract(runner, fake)
    assert result.exit_code == 0, result.output
    assert fake.stats()["requests"] == 3  # one call per answer
    sample, claims = claims_of(session, "folic")
    assert [c.text for c in claims] == claims_for(FOLIC) == ["Tome 0,4 mg al día desde antes de la concepción",
                                                             "hasta la semana 12.", "Consulte a su médico."]
    assert all(FOLIC[c.start:c.end] == c.text for c in claims)
    assert [c.origin for c in claims] == ["ex@1"] * 3 and sample.claim_source == "ex@1"
    # The segmenter's claims are retired, never deleted.
    _, retired = claims_of(session, "folic", active=False)
    assert before[0].id in {c.id for c in retired}
    verdict = session.exec(select(Verdict).join(Judge).where(Judge.name == "ex@1", Verdict.sample_id == sample.id)).one()
    assert verdict.status == "ok" and json.loads(verdict.value) == claims_for(FOLIC)
    run = session.exec(select(JudgeRun)).one()
    assert run.params["claim_sources"] == {"segmenter": 3} and run.params["force"] is False
    assert "ex@1 on d: 3 of 3 answers carry its claims (8 claims, 0 not found verbatim in the answer)" in result.output


def test_a_claim_not_in_the_answer_verbatim_has_no_span_and_shows_under_the_answer(
        runner, session, client, login, fake, dataset, extractor):
    dataset()
    fake.claims_replies = {"hierro": json.dumps({"claims": ["El hierro se toma en ayunas.", "El hierro se toma con vitamina C"]})}
    result = extract(runner, fake)
    assert result.exit_code == 0, result.output
    _, claims = claims_of(session, "iron")
    assert [(c.text, c.start, c.end) for c in claims] == [("El hierro se toma en ayunas.", 0, 28),
                                                          ("El hierro se toma con vitamina C", -1, -1)]
    assert "(8 claims, 1 not found verbatim in the answer)" in result.output
    from bs4 import BeautifulSoup

    login("eng", role="engineer")
    page = BeautifulSoup(client.get("/datasets/d/samples/iron").data, "html.parser")
    assert [li.get_text(strip=True) for li in page.select("#unplaced li")] == ["El hierro se toma con vitamina C"]
    assert [m.get_text() for m in page.select("#answer mark.claim")] == ["El hierro se toma en ayunas."]
    assert page.select_one("#claim-source").get_text(strip=True) == "ex@1"


def test_a_repeated_claim_takes_the_next_occurrence(runner, session, fake, dataset, extractor):
    dataset([{"id": "rep", "question": "?", "answer": "Sí. Tome agua. Sí.", "contexts": []}])
    fake.claims_replies = {"agua": json.dumps({"claims": ["Sí.", "Tome agua.", "Sí."]})}
    assert extract(runner, fake).exit_code == 0
    _, claims = claims_of(session, "rep")
    assert [(c.start, c.end) for c in claims] == [(0, 3), (4, 14), (15, 18)]


def test_a_rerun_makes_no_call(runner, session, fake, dataset, extractor):
    dataset()
    assert extract(runner, fake).exit_code == 0
    fake.reset()
    again = extract(runner, fake)
    assert again.exit_code == 0, again.output
    assert fake.stats()["requests"] == 0
    assert "nothing to do: all 3 answers already carry the claims of ex@1" in again.output
    assert len(session.exec(select(Verdict)).all()) == 3


def test_unparseable_and_empty_extractions_keep_the_old_claims_are_recorded_and_fail_the_command(
        runner, session, fake, dataset, extractor):
    dataset()
    fake.claims_replies = {"hierro": "I would rather not split this.", "Duerma": json.dumps({"claims": []})}
    _, iron_before = claims_of(session, "iron")
    _, sleep_before = claims_of(session, "sleep")
    result = extract(runner, fake)
    assert result.exit_code == 1, result.output
    assert "2 answers could not be extracted: 1 empty, 1 unparsed (sleep, iron); their claims are unchanged" in result.output
    for external, before in (("iron", iron_before), ("sleep", sleep_before)):
        sample, after = claims_of(session, external)
        assert [c.id for c in after] == [c.id for c in before] and sample.claim_source == "segmenter"
    statuses = {v.sample_id: (v.status, v.value, v.error) for v in session.exec(select(Verdict)).all()}
    iron, _ = claims_of(session, "iron")
    sleep, _ = claims_of(session, "sleep")
    assert statuses[iron.id][:2] == ("unparsed", None) and "claims" in statuses[iron.id][2]
    assert statuses[sleep.id] == ("unparsed", None, "empty: the extraction has no claims")
    # The rerun asks nothing (an unparsed answer is in the response cache) and still fails, saying why.
    fake.reset()
    again = extract(runner, fake)
    assert fake.stats()["requests"] == 0
    assert again.exit_code == 1 and "2 answers could not be extracted: 1 empty, 1 unparsed" in again.output


def test_a_failed_call_is_recorded_and_made_again_on_the_next_run(runner, session, fake, dataset, extractor):
    dataset([SAMPLES[0]])
    fake.script = ["500"] * 5
    first = runner.invoke(["claims", "extract", "--dataset", "d", "--prompt", "ex@1", "--backend", "openai",
                           "--base-url", fake.openai_base, "--api-key-env", ""])
    # The first call goes alone and a 500 is retried; five attempts fail: an error verdict.
    assert first.exit_code == 1 and "1 answer could not be extracted: error (folic); its claims are unchanged" in first.output
    second = extract(runner, fake)
    assert second.exit_code == 0, second.output
    _, claims = claims_of(session, "folic")
    assert [c.text for c in claims] == claims_for(FOLIC)


def _label(session, external_id, username="ana", value="supported", index=0):
    """Store an expert's claim_support label on a claim of the sample (with its "create" revision)."""
    from calibrate.accounts import add_user, get_user

    user = get_user(session, username) or add_user(session, username, role="annotator", password="password-123")
    sample, claims = claims_of(session, external_id)
    task = session.exec(select(Task).where(Task.name == "claim_support")).one()
    label = Label(task_id=task.id, sample_id=sample.id, claim_id=claims[index].id, target_key=f"claim:{claims[index].id}",
                  annotator_id=user.id, value=value)
    session.add(label)
    session.flush()
    session.add(LabelRevision(label_id=label.id, action="create", value=value, changed_by_id=user.id))
    session.commit()
    return label


def test_labelled_answers_keep_their_claims_unless_force_which_flags_the_labels_stale(
        runner, session, fake, dataset, extractor):
    dataset()
    label = _label(session, "folic")
    _, before = claims_of(session, "folic")
    result = extract(runner, fake)
    assert result.exit_code == 0, result.output
    assert fake.stats()["requests"] == 2  # the labelled answer is not even asked
    assert "1 answer kept its claims: they carry expert labels or corrections (--force re-extracts them" in result.output
    sample, after = claims_of(session, "folic")
    assert [c.id for c in after] == [c.id for c in before] and sample.claim_source == "segmenter"
    forced = extract(runner, fake, "--force")
    assert forced.exit_code == 0, forced.output
    assert fake.stats()["requests"] == 3  # only the labelled answer was left
    sample, after = claims_of(session, "folic")
    assert [c.text for c in after] == claims_for(FOLIC) and sample.claim_source == "ex@1"
    session.expire_all()
    stored = session.get(Label, label.id)
    assert stored.stale and stored.stale_reason == "claims re-extracted by ex@1" and stored.value == "supported"
    revisions = session.exec(select(LabelRevision).where(LabelRevision.label_id == label.id)).all()
    assert [r.action for r in revisions] == ["create", "stale"]
    assert "1 label flagged stale (claims re-extracted by ex@1)" in forced.output
    # The report counts it: left out of the statistics, counted as stale.
    report = runner.invoke(["report", "--dataset", "d", "--format", "json"])
    data = json.loads(report.output)
    assert data["tasks"]["claim_support"]["n_stale"] == 1
    assert data["tasks"]["claim_support"]["claim_sources"] == {"ex@1": 1}
    assert data["claim_sets"]["sources"] == {"ex@1": 3}
    markdown = runner.invoke(["report", "--dataset", "d", "--format", "md"]).output
    assert "Claim sets: ex@1: 1 answer." in markdown and "stale labels 1" in markdown
    from bs4 import BeautifulSoup

    html = BeautifulSoup(runner.invoke(["report", "--dataset", "d", "--format", "html"]).output, "html.parser")
    # Every label of the section is stale: it has no data, and says how many and on which claim sets.
    assert html.select_one("#task-claim_support .no-data-stale").get_text() == "Stale labels: 1 (kept in the history, left out)."
    assert html.select_one("#task-claim_support .no-data-claim-sources").get_text() == "Claim sets: ex@1: 1 answer."


def test_bad_input_is_one_line_and_exit_2(runner, fake, dataset, extractor, engine):
    dataset()
    with write_session(engine) as session:
        save_version(session, "support", task="claim_support", model="fake-model")
    cases = [
        (["--prompt", "support@1"], "error: support@1 is a prompt of task claim_support: claims extract needs a prompt "
                                    "of task claim_extraction"),
        (["--dataset", "nope"], "error: unknown dataset 'nope' (datasets: d)"),
        (["--prompt", "nope@1"], "error: unknown prompt 'nope'"),
        (["--backend", "gpt"], "error: backend must be one of openai, anthropic, baseline; got 'gpt'"),
    ]
    for change, line in cases:
        args = {"--dataset": "d", "--prompt": "ex@1", "--backend": "openai"}
        args.update(dict(zip(change[::2], change[1::2], strict=True)))
        result = runner.invoke(["claims", "extract", *[x for kv in args.items() for x in kv],
                                "--base-url", fake.openai_base, "--api-key-env", ""])
        assert result.exit_code == 2, result.output
        assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(line), result.stderr
    assert fake.stats()["requests"] == 0
    wrong_way = runner.invoke(["judge", "run", "--dataset", "d", "--prompt", "ex@1"])
    assert wrong_way.exit_code == 2 and "run it with `calibrate claims extract`" in wrong_way.stderr


def test_the_offline_baseline_extracts_the_segmenters_claims(runner, session, dataset, extractor):
    dataset()
    result = runner.invoke(["claims", "extract", "--dataset", "d", "--prompt", "ex@1", "--backend", "baseline"])
    assert result.exit_code == 0, result.output
    sample, claims = claims_of(session, "folic")
    assert sample.claim_source == "ex@1" and len(claims) == 2
    # Same texts at the same indices: the claims (and any labels on them) stay, now made by ex@1.
    assert {c.origin for c in claims} == {"ex@1"} and not claims_of(session, "folic", active=False)[1]


def test_limit_extracts_the_first_answers_only(runner, session, fake, dataset, extractor):
    dataset()
    result = extract(runner, fake, "--limit", "1")
    assert result.exit_code == 0, result.output
    assert fake.stats()["requests"] == 1
    assert [s.claim_source for s in session.exec(select(Sample).order_by(Sample.id))] == ["ex@1", "segmenter", "segmenter"]


def test_killed_with_sigkill_the_extraction_resumes_without_asking_an_answered_sample_again(
        db_url, engine, session, tmp_path, extractor):
    server = FakeLLM(latency=0.02, claims=True).start()
    server.keep_requests = False
    try:
        records = [{"id": f"s{i:03d}", "question": f"¿Pregunta {i}?", "contexts": [],
                    "answer": f"Tome {i} mg al día y descanse {i} horas. Consulte a su médico {i} veces."} for i in range(120)]
        path = tmp_path / "many.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
        with write_session(engine) as s:
            import_file(s, "samples", path, dataset="many")
        command = [sys.executable, "-m", "calibrate", "claims", "extract", "--db", db_url, "--dataset", "many",
                   "--prompt", extractor, "--backend", "openai", "--base-url", server.openai_base, "--api-key-env", "",
                   "--concurrency", "4"]
        env = dict(os.environ, CALIBRATE_INSTANCE=str(tmp_path / "instance"))
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        database = db_url.removeprefix("sqlite:///")
        deadline = time.monotonic() + 30
        applied = 0
        while time.monotonic() < deadline:
            conn = sqlite3.connect(database, timeout=10)
            try:
                applied = conn.execute("select count(*) from sample where claim_source = ?", (extractor,)).fetchone()[0]
            finally:
                conn.close()
            if applied >= 20:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        assert 20 <= applied < 120, "the kill must land mid-run"
        before = server.stats()["requests"]
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "120 of 120 answers carry its claims (360 claims" in done.stdout
        # Answers applied before the kill were never asked again; at most those in flight or unwritten were.
        assert server.stats()["requests"] - before <= 120 - applied + 4
        session.expire_all()
        verdicts = session.exec(select(Verdict.sample_id)).all()
        assert len(verdicts) == len(set(verdicts)) == 120
        for sample in session.exec(select(Sample)).all():
            claims = session.exec(select(Claim).where(Claim.sample_id == sample.id, col(Claim.active).is_(True))).all()
            assert sample.claim_source == extractor and sorted(c.index for c in claims) == [0, 1, 2]
    finally:
        server.stop()


def test_a_few_shot_example_is_an_answer_whose_claims_experts_corrected(runner, session, engine, fake, dataset):
    from calibrate.accounts import add_user
    from calibrate.annotation.claim_edits import split_claim
    from calibrate.judges import FewShotSpec, PromptError

    dataset()
    with write_session(engine) as s:
        with pytest.raises(PromptError, match="were not corrected by an expert"):
            save_version(s, "ex", task="claim_extraction", model="fake-model", few_shots=[FewShotSpec("folic")])
    ana = add_user(session, "ana", role="annotator", password="password-123")
    sample, claims = claims_of(session, "folic")
    split_claim(session, sample, ana, claims[0].id, len("Tome 0,4 mg al día desde antes de la concepción "))
    session.commit()
    with write_session(engine) as s:
        saved = save_version(s, "ex", task="claim_extraction", model="fake-model", few_shots=[FewShotSpec("folic")])
        assert saved.created and saved.version.number == 1
    corrected = ["Tome 0,4 mg al día desde antes de la concepción", "y hasta la semana 12.", "Consulte a su médico."]
    result = extract(runner, fake)
    assert result.exit_code == 0, result.output
    # The example is shown in the system text, and never extracted itself (its corrected claims stay).
    system = fake.requests[0]["body"]["messages"][0]["content"]
    assert 'Reply: {"claims": ' + json.dumps(corrected, ensure_ascii=False) + "}" in system
    assert fake.stats()["requests"] == 2
    sample, claims = claims_of(session, "folic")
    assert [c.text for c in claims] == corrected and sample.claim_source == "segmenter+edited"


def test_an_answer_an_expert_corrected_keeps_its_claims_against_another_version(runner, session, engine, fake, dataset,
                                                                              extractor):
    from calibrate.accounts import add_user
    from calibrate.annotation.claim_edits import merge_with_next

    dataset([SAMPLES[0]])
    assert extract(runner, fake).exit_code == 0
    sample, claims = claims_of(session, "folic")
    merge_with_next(session, sample, add_user(session, "ana", password="password-123"), claims[0].id)
    session.commit()
    corrected = [c.text for c in claims_of(session, "folic")[1]]
    with write_session(engine) as s:
        save_version(s, "ex2", task="claim_extraction", model="fake-model-2")
    fake.reset()
    kept = extract(runner, fake, prompt="ex2@1")
    assert kept.exit_code == 0 and fake.stats()["requests"] == 0
    assert "all 1 answers in scope keep their claims, which carry expert labels or corrections" in kept.output
    assert [c.text for c in claims_of(session, "folic")[1]] == corrected
    # The same version's rerun leaves it alone too: its claims are ex@1's, corrected.
    assert "nothing to do" in extract(runner, fake).output and fake.stats()["requests"] == 0
    forced = extract(runner, fake, "--force", prompt="ex2@1")
    assert forced.exit_code == 0 and claims_of(session, "folic")[0].claim_source == "ex2@1"
