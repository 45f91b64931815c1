"""The whole calibration loop as a prompt engineer runs it, end to end on a fresh database:
import, label in the workbench, run v1, add two disagreements as few-shot examples, run the new
version, compare the two, evaluate on test — every number cross-checked with scikit-learn/SciPy."""

from __future__ import annotations

import json
import re

import pytest
from bs4 import BeautifulSoup
from sklearn.metrics import cohen_kappa_score
from sqlmodel import select

from calibrate.judges.versions import stored_examples
from calibrate.loop.dashboard import add_fewshot
from calibrate.loop.disagreements import disagreements
from calibrate.loop.testsplit import evaluate_on_test
from calibrate.models import Assignment, Claim, Sample, TestEvaluation, Verdict

CONTEXT = "Se recomienda 0,4 mg diarios de ácido fólico desde antes de la concepción."
# Per claim text: the experts' label. The baseline judge (lexical and numeric support) gets
# the first two right and calls the third supported: its words are in the context, its sense is not.
CLAIMS = {
    "Tome 0,4 mg de ácido fólico al día.": "supported",
    "Tome 4 mg de ácido fólico al día.": "unsupported",
    "El ácido fólico se recomienda solo después de la concepción.": "unsupported",
}
N_SAMPLES = 30


def _samples_file(tmp_path):
    rows = []
    for i in range(N_SAMPLES):
        # Some answers carry only the first two claims, so the judge's errors are spread unevenly.
        claims = list(CLAIMS) if i % 3 else list(CLAIMS)[:2]
        rows.append({"id": f"s{i:02d}", "question": "¿Cuánto ácido fólico?", "answer": " ".join(claims),
                     "claims": claims, "contexts": [{"text": CONTEXT, "doc_id": "guia-4.2"}],
                     "metadata": {"topic": "suplementos"}})
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def _log_in(client, username, password="password-123"):
    token = BeautifulSoup(client.get("/login").data, "html.parser").select_one("input[name=csrf_token]")["value"]
    assert client.post("/login", data={"username": username, "password": password, "csrf_token": token}).status_code == 303
    return BeautifulSoup(client.get("/datasets").data, "html.parser").select_one(".whoami input[name=csrf_token]")["value"]


def _label_everything(client, session, username, *, dissent: set[str] = frozenset()):
    """Label every item of the user's queue in the workbench, as the keyboard flow posts it; return how many."""
    token = _log_in(client, username)
    headers = {"HX-Request": "true", "X-CSRFToken": token}
    done = 0
    response = client.get("/annotate/next")
    while response.status_code in (302, 303) and re.search(r"/annotate/(\d+)$", response.headers["Location"]):
        assignment_id = int(re.search(r"/annotate/(\d+)$", response.headers["Location"]).group(1))
        assignment = session.get(Assignment, assignment_id)
        session.refresh(assignment)
        claims = session.exec(select(Claim).where(Claim.sample_id == assignment.sample_id).order_by(Claim.index)).all()
        external_id = session.get(Sample, assignment.sample_id).external_id
        for claim in claims:
            value = CLAIMS[claim.text]
            if external_id in dissent and claim.index == 0:  # a disagreement between the experts: no gold
                value = "unsupported"
            posted = client.post(f"/annotate/{assignment_id}/label", headers=headers,
                                 data={"task": "claim_support", "target": f"claim:{claim.id}", "value": value})
            assert posted.status_code == 200, posted.data
        posted = client.post(f"/annotate/{assignment_id}/label", headers=headers,
                             data={"task": "answer_quality", "target": f"sample:{assignment.sample_id}", "value": "4"})
        assert posted.status_code == 200, posted.data
        response = client.post(f"/annotate/{assignment_id}/submit", data={"csrf_token": token})
        done += 1
    client.post("/logout", data={"csrf_token": token})
    return done


def _gold_and_verdicts(session, judge_name, split):
    """Return (gold, verdict) per scored claim of a split, straight from the database."""
    from calibrate.models import Judge, Label

    judge = session.exec(select(Judge).where(Judge.name == judge_name)).one()
    samples = {s.id for s in session.exec(select(Sample).where(Sample.split == split))}
    votes: dict[str, list[str]] = {}
    for label in session.exec(select(Label).where(Label.claim_id.is_not(None))):
        if label.sample_id in samples:
            votes.setdefault(label.target_key, []).append(label.value)
    pairs = {}
    for verdict in session.exec(select(Verdict).where(Verdict.judge_id == judge.id)):
        values = votes.get(verdict.target_key, [])
        if verdict.sample_id in samples and values and len(set(values)) == 1:  # unanimous: the gold
            pairs[verdict.target_key] = (values[0], verdict.value)
    return pairs


def test_the_whole_loop_from_import_to_test_evaluation(app, client, session, runner, make_user, tmp_path):
    # 1. Import, create the experts, sample with overlap 2 and a frozen test split.
    assert runner.invoke(["import", "samples", str(_samples_file(tmp_path)), "--dataset", "d"]).exit_code == 0
    make_user("ann1")
    make_user("ann2")
    make_user("eng", role="engineer")
    out = runner.invoke(["sample", "--dataset", "d", "--n", str(N_SAMPLES), "--seed", "3", "--overlap", "2",
                         "--assign", "ann1", "--assign", "ann2", "--split", "train=0.2,dev=0.5,test=0.3"])
    assert out.exit_code == 0, out.output

    # 2. Both experts label every item in the workbench; ann2 dissents on the first claim of a few.
    assert _label_everything(client, session, "ann1") == N_SAMPLES
    assert _label_everything(client, session, "ann2", dissent={"s00", "s07", "s14", "s21"}) == N_SAMPLES
    session.rollback()  # end the read snapshot: the workbench wrote through its own connections
    assert session.exec(select(Assignment).where(Assignment.status != "done")).all() == []

    # 3. Version 1 of a claim-support prompt, run with the offline baseline judge.
    assert runner.invoke(["prompt", "new", "claims", "--task", "claim_support"]).output.strip() == "claims@1"
    run = runner.invoke(["judge", "run", "--dataset", "d", "--prompt", "claims@1", "--backend", "baseline"])
    assert run.exit_code == 0, run.output

    # 4. Its disagreements on dev: the claim the baseline misreads. Add two as few-shot examples.
    session.rollback()
    found = disagreements(session, "d", "claims@1")
    assert found.items and {(d.gold, d.judge) for d in found.items} == {("unsupported", "supported")}
    first, second = found.items[0].target, found.items[1].target
    add_fewshot(session, "d", "claims@1", first, "Dice «antes de la concepción», no «después».")
    session.commit()
    latest = add_fewshot(session, "d", "claims@1", second, "")
    session.commit()
    assert latest.created and latest.version.number == 3
    assert [e.target_key for e in stored_examples(session, latest.version)] == [first, second]

    # 5. Run the version with both examples: they are excluded from its scores, never judged.
    run = runner.invoke(["judge", "run", "--dataset", "d", "--prompt", "claims@3", "--backend", "baseline"])
    assert run.exit_code == 0, run.output
    session.rollback()
    judged3 = _gold_and_verdicts(session, "claims@3", "dev")
    assert first not in judged3 and second not in judged3

    # 6. Compare v1 and v3 on dev: the common targets leave out the few-shots of either version.
    out = runner.invoke(["compare", "--dataset", "d", "--judge", "claims@1", "--judge", "claims@3", "--split", "dev",
                         "--bootstrap", "200", "--format", "json"])
    assert out.exit_code == 0, out.output
    comparison = json.loads(out.output)
    judged1 = _gold_and_verdicts(session, "claims@1", "dev")
    common = sorted(set(judged1) & set(judged3))
    assert comparison["common_n"] == len(common) == len(judged1) - 2
    gold = [judged1[k][0] for k in common]
    kappa1 = cohen_kappa_score(gold, [judged1[k][1] for k in common])
    kappa3 = cohen_kappa_score(gold, [judged3[k][1] for k in common])
    assert {"supported", "unsupported"} <= set(gold) and 0 < kappa1 < 1  # a real kappa, not a degenerate one
    assert comparison["a"]["value"] == pytest.approx(kappa1) and comparison["b"]["value"] == pytest.approx(kappa3)
    assert comparison["difference"]["value"] == pytest.approx(kappa3 - kappa1)
    # The baseline reads no prompt: the same verdicts, so no target flipped and McNemar's test is
    # undefined (no discordant pair), said so rather than given a p-value.
    assert comparison["mcnemar"]["b01"] == comparison["mcnemar"]["b10"] == 0
    assert comparison["mcnemar"]["p_value"] is None and comparison["mcnemar"]["reason"] == {"code": "no_discordant_pair"}
    assert comparison["flips"] == {**comparison["flips"], "fixed": [], "broken": []}

    # 7. Evaluate the final version on the frozen test split, on demand: recorded with a timestamp.
    row = evaluate_on_test(session, "d", "claims@3")
    session.commit()
    test_pairs = _gold_and_verdicts(session, "claims@3", "test")
    assert row.n == len(test_pairs) > 0
    assert row.value == pytest.approx(cohen_kappa_score([g for g, _ in test_pairs.values()], [j for _, j in test_pairs.values()]))
    looked = session.exec(select(TestEvaluation)).all()
    assert len(looked) == 1 and looked[0].created_at is not None
