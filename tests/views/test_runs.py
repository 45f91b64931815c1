"""The Run button, the run page and its live-progress fragment."""

from __future__ import annotations

import time

from bs4 import BeautifulSoup
from sqlmodel import func, select

from calibrate.db import write_session
from calibrate.judges import save_version
from calibrate.models import JudgeRun, Verdict


def soup(response):
    return BeautifulSoup(response.data, "html.parser")


def wait_done(client, run_id, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fragment = soup(client.get(f"/runs/{run_id}/status"))
        root = fragment.select_one("#run-status")
        if root["data-status"] not in ("pending", "running"):
            return fragment
        time.sleep(0.05)
    raise AssertionError("the run did not finish")


def test_run_button_starts_a_baseline_run_with_live_progress(app, client, login, engine, make_sample, session):
    for i in range(3):
        make_sample(external_id=f"s{i}", answer="Tome 0,4 mg al día. Tome 4 mg al día.",
                    contexts=("Se recomienda: tome 0,4 mg al día de ácido fólico.",), claims=["Tome 0,4 mg al día.", "Tome 4 mg al día."])
    with write_session(engine) as s:
        save_version(s, "claims", task="claim_support")
    token = login("eng", "engineer")
    response = client.post("/prompts/claims/1/run", data={"dataset": "d", "backend": "baseline", "csrf_token": token})
    assert response.status_code == 303
    run_id = int(response.headers["Location"].rsplit("/", 1)[1])
    page = soup(client.get(f"/runs/{run_id}"))
    status = page.select_one("#run-status")
    assert status is not None and page.select_one("#run-progress") is not None
    fragment = wait_done(client, run_id)
    app.extensions["judge_threads"][run_id].join(5)
    root = fragment.select_one("#run-status")
    assert root["data-status"] == "done" and not root.has_attr("hx-get")  # polling stops when done
    assert fragment.select_one("#run-count").get_text() == "6/6"
    values = dict(session.exec(select(Verdict.value, func.count()).group_by(Verdict.value)).all())
    assert values == {"supported": 3, "unsupported": 3}
    listing = soup(client.get("/runs"))
    assert listing.select_one("#runs tbody tr td a")["href"] == f"/runs/{run_id}"
    # Nothing left to judge: the button says so and starts nothing.
    again = client.post("/prompts/claims/1/run", data={"dataset": "d", "backend": "baseline", "csrf_token": token},
                        follow_redirects=True)
    assert "nothing to do" in soup(again).select_one(".flash").get_text()
    assert session.exec(select(func.count()).select_from(JudgeRun)).one() == 1


def test_an_active_run_polls_its_status_fragment(client, login, engine, make_sample, session):
    make_sample(external_id="s1")
    with write_session(engine) as s:
        save_version(s, "claims", task="claim_support")
    from calibrate.judges import RunSpec, prepare_run

    run_id = prepare_run(engine, RunSpec(dataset="d", prompt="claims@1"))  # pending, owned by this live process
    login("eng", "engineer")
    root = soup(client.get(f"/runs/{run_id}")).select_one("#run-status")
    assert root["hx-get"] == f"/runs/{run_id}/status" and root["hx-trigger"] == "every 1s" and root["hx-swap"] == "outerHTML"
    fragment = soup(client.get(f"/runs/{run_id}/status"))
    assert fragment.select_one("#run-status")["id"] == "run-status" and fragment.select_one("html") is None


def test_a_run_with_a_bad_request_says_why(client, login, engine, make_sample):
    make_sample(external_id="s1")
    with write_session(engine) as s:
        save_version(s, "quality", task="answer_quality")
    token = login("eng", "engineer")
    page = client.post("/prompts/quality/1/run", data={"dataset": "nope", "backend": "baseline", "csrf_token": token},
                       follow_redirects=True)
    assert "unknown dataset 'nope'" in soup(page).select_one(".flash-error").get_text()
    page = client.post("/prompts/quality/1/run", data={"dataset": "nope", "backend": "baseline", "csrf_token": token},
                       headers={"Accept-Language": "es-ES,es;q=0.9"}, follow_redirects=True)  # worded from its code
    assert soup(page).select_one(".flash-error").get_text(strip=True) == "conjunto de datos 'nope': no existe (conjuntos de datos: d)"
    refused = client.post("/prompts/quality/1/run", data={"dataset": "d", "backend": "openai", "csrf_token": token})
    assert refused.status_code == 400


def test_the_dataset_pages_button_extracts_claims_in_the_background(app, client, login, engine, make_sample, session):
    make_sample(external_id="s1", answer="Tome 0,4 mg al día. Gracias.", claims=["Tome 0,4 mg al día. Gracias."])
    token = login("eng", "engineer")
    page = soup(client.get("/datasets/d"))
    assert page.select_one("#claim-sets") is not None and page.select_one("#extract-form") is None  # no extraction prompt yet
    with write_session(engine) as s:
        save_version(s, "ex", task="claim_extraction")
    page = soup(client.get("/datasets/d"))
    assert [o.get_text() for o in page.select("#extract-form select[name=prompt] option")] == ["ex@1"]
    assert page.select_one("#claim-sets").get_text(" ", strip=True).count("segmenter") >= 1
    response = client.post("/datasets/d/extract", data={"prompt": "ex@1", "backend": "baseline", "csrf_token": token})
    assert response.status_code == 303
    run_id = int(response.headers["Location"].rsplit("/", 1)[1])
    app.extensions["judge_threads"][run_id].join(10)
    status = wait_done(client, run_id)
    assert status.select_one("#run-claim-sources").get_text(strip=True) == "segmenter: 1 answer"
    assert "ex@1 on d: 1 of 1 answers carry its claims (2 claims" in status.select_one("#run-extraction").get_text()
    rows = soup(client.get("/datasets/d")).select("#claim-changes tbody tr")
    assert [(r["data-method"], r.select("td")[3].get_text()) for r in rows] == [("ex@1", "2")]
    # Again: nothing to do, said on the dataset page; a claim_support prompt is refused with its reason.
    again = client.post("/datasets/d/extract", data={"prompt": "ex@1", "backend": "baseline", "csrf_token": token})
    assert again.status_code == 303 and again.headers["Location"].endswith("/datasets/d")
    assert "already carry the claims of ex@1" in soup(client.get("/datasets/d")).select_one(".flash").get_text()
    with write_session(engine) as s:
        save_version(s, "support", task="claim_support")
    wrong = client.post("/datasets/d/extract", data={"prompt": "support@1", "backend": "baseline", "csrf_token": token},
                        follow_redirects=True)
    assert "claims extract needs a prompt of task claim_extraction" in soup(wrong).select_one(".flash").get_text()


def test_annotators_neither_see_nor_start_extractions(client, login, make_sample):
    make_sample(external_id="s1")
    token = login("ana")
    assert soup(client.get("/datasets/d")).select_one("#claim-sets") is None
    response = client.post("/datasets/d/extract", data={"prompt": "ex@1", "backend": "baseline", "csrf_token": token})
    assert response.status_code == 403



def _claims_run_form(engine, make_sample, n=2):
    for i in range(n):
        make_sample(external_id=f"s{i}", answer="Tome 0,4 mg al día. Tome 4 mg al día.",
                    contexts=("Se recomienda: tome 0,4 mg al día de ácido fólico.",), claims=["Tome 0,4 mg al día.", "Tome 4 mg al día."])
    with write_session(engine) as s:
        save_version(s, "claims", task="claim_support")


def test_the_run_buttons_samples_make_k_verdicts_per_target_as_the_command_line(app, client, login, engine, make_sample,
                                                                                 session, runner):
    _claims_run_form(engine, make_sample)
    token = login("eng", "engineer")
    field = soup(client.get("/prompts/claims/1")).select_one("#run-form input[name=samples]")
    assert (field["value"], field["min"], field["max"]) == ("1", "1", "20")
    response = client.post("/prompts/claims/1/run", data={"dataset": "d", "backend": "baseline", "samples": "3",
                                                          "csrf_token": token})
    assert response.status_code == 303
    run_id = int(response.headers["Location"].rsplit("/", 1)[1])
    wait_done(client, run_id)
    app.extensions["judge_threads"][run_id].join(5)
    page = soup(client.get(f"/runs/{run_id}"))
    assert page.select_one("#run-count").get_text() == "12/12"
    assert page.select_one("#run-samples").get_text().startswith("3 (self-consistency")
    spanish = soup(client.get(f"/runs/{run_id}", headers={"Accept-Language": "es"}))
    assert spanish.select_one("#run-samples").get_text().startswith("3 (autoconsistencia")
    web = session.exec(select(Verdict.target_key, Verdict.sample_index, Verdict.value).order_by(Verdict.target_key,
                                                                                                Verdict.sample_index)).all()
    by_target: dict[str, list[int]] = {}
    for key, index, _value in web:
        by_target.setdefault(key, []).append(index)
    assert len(by_target) == 4 and all(indexes == [0, 1, 2] for indexes in by_target.values())
    assert session.get(JudgeRun, run_id).params["samples"] == 3
    # The command line's run of the same version on the same targets stores the same verdicts, sample by sample.
    with write_session(engine) as s:
        save_version(s, "claims2", task="claim_support")
    result = runner.invoke(["judge", "run", "--dataset", "d", "--prompt", "claims2@1", "--backend", "baseline", "--samples", "3"])
    assert result.exit_code == 0, result.output
    session.rollback()
    cli_run = session.exec(select(JudgeRun).where(JudgeRun.id != run_id)).one()
    cli = session.exec(select(Verdict.target_key, Verdict.sample_index, Verdict.value).where(Verdict.judge_id == cli_run.judge_id)
                       .order_by(Verdict.target_key, Verdict.sample_index)).all()
    assert [tuple(row) for row in cli] == [tuple(row) for row in web] and cli_run.params["samples"] == 3
    assert cli_run.n_total == session.get(JudgeRun, run_id).n_total == 12


def test_the_run_buttons_samples_are_bounded_as_the_command_lines(client, login, engine, make_sample, session):
    _claims_run_form(engine, make_sample, n=1)
    token = login("eng", "engineer")
    for bad in ("0", "21", "x", "²"):
        response = client.post("/prompts/claims/1/run", data={"dataset": "d", "backend": "baseline", "samples": bad,
                                                              "csrf_token": token}, headers={"HX-Request": "true"})
        assert response.status_code == 400 and response.headers["X-Invalid-Field"] == "samples", bad
    assert "samples" in client.post("/prompts/claims/1/run", data={"dataset": "d", "backend": "baseline", "samples": "21",
                                                                    "csrf_token": token}).get_data(as_text=True)
    assert session.exec(select(func.count()).select_from(JudgeRun)).one() == 0  # nothing started
    with write_session(engine) as s:
        save_version(s, "faith", task="faithfulness")
    assert soup(client.get("/prompts/faith/1")).select_one("#run-form input[name=samples]") is None
    refused = client.post("/prompts/faith/1/run", data={"dataset": "d", "backend": "baseline", "samples": "2", "csrf_token": token},
                          headers={"Accept-Language": "es"}, follow_redirects=True)
    assert "faithfulness" in soup(refused).select_one(".flash-error").get_text()
    assert session.exec(select(func.count()).select_from(JudgeRun)).one() == 0
