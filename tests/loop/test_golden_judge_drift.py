"""Golden drift's judge figures (`golden drift --judge`, `retained_vs_new`): production's side from the audit
labels only on a dataset with production queues, unweighted kappa said so, excluded labels and the judge's few-shot
examples left out and counted.

A small dataset, written straight into the database: 30 golden samples (split test, two experts each) and 40
production samples (metadata.source=live), one claim each, every one judged by `j`. On production, ana has an
audit assignment on p00–p19 and ben a triage one on p20–p39, each with a label.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from labelstore import Store
from prompt_helpers import prompt_version
from sklearn.metrics import cohen_kappa_score
from sqlmodel import select

from calibrate.accounts import ensure_annotator
from calibrate.loop import golden
from calibrate.models import Assignment, Dataset, FewShot, Judge, Label, Sample, Verdict

TASK = "claim_support"
N_GOLDEN, N_LIVE, N_AUDIT = 30, 40, 20


def _flip(value: str) -> str:
    return "unsupported" if value == "supported" else "supported"


def _build(session, *, streams=True, gold_na=(), verdict_na=()):
    """Return the Store; `gold_na`/`verdict_na`: external ids whose gold / the judge's verdict is not_applicable."""
    rng = np.random.default_rng(35)
    store = Store(session)
    ana, ben = ensure_annotator(session, "ana"), ensure_annotator(session, "ben")
    for i in range(N_GOLDEN + N_LIVE):
        sid = f"g{i:02d}" if i < N_GOLDEN else f"p{i - N_GOLDEN:02d}"
        sample = store.sample(sid, n_claims=1, meta={} if i < N_GOLDEN else {"source": "live"})
        sample.split = "test" if i < N_GOLDEN else None
        gold = "not_applicable" if sid in gold_na else ("supported" if rng.random() < 0.6 else "unsupported")
        # The judge agrees with the gold on about 85 % of the golden set, 70 % of the audit, and rarely on triage.
        agree = rng.random() < (0.85 if i < N_GOLDEN else 0.7 if i < N_GOLDEN + N_AUDIT else 0.2)
        verdict = "not_applicable" if sid in verdict_na else gold if agree or gold == "not_applicable" else _flip(gold)
        store.verdict("j", TASK, sid, verdict, claim=0)
        if i < N_GOLDEN:
            store.label(TASK, "ana", sid, gold, claim=0)
            store.label(TASK, "ben", sid, gold, claim=0)
        else:
            audit = i < N_GOLDEN + N_AUDIT
            store.label(TASK, "ana" if audit else "ben", sid, gold, claim=0)
            if streams:
                session.add(Assignment(sample_id=sample.id, user_id=(ana if audit else ben).id, status="done",
                                       stream="audit" if audit else "triage", audit_prob=0.5 if audit else None))
    store.commit()
    golden.create_golden(session, "d", "g", split="test")
    session.commit()
    return store


def _judge(session, **kwargs):
    found = golden.golden_drift(session, "d", "g", against="metadata.source=live", judge="j", n_permutations=0, **kwargs)
    json.dumps(found)  # JSON-safe as `golden drift --json` writes it
    return found["judge"]


def _verdict(session, sample):
    return session.exec(select(Verdict.value).where(Verdict.sample_id == sample.id)).one()


def test_production_uses_the_audit_labels_only_and_says_kappa_is_unweighted(session):
    store = _build(session)
    found = _judge(session)
    assert found["labels"] == "audit" and found["weighted"] is False and found["n_excluded"] == 0
    assert "unweighted" in found["labels_note"] and "golden set" in found["labels_note"]
    kappa = found["kappa"]
    assert kappa["n_golden"] == N_GOLDEN and kappa["n_audit"] == N_AUDIT
    # The audit's kappa is Cohen's on the 20 audit pairs alone (scikit-learn), not on the 40 labelled production samples.
    gold, verdicts = [], []
    for i in range(N_AUDIT):
        sample = store.samples[f"p{i:02d}"]
        gold.append(session.exec(select(Label.value).where(Label.sample_id == sample.id)).one())
        verdicts.append(_verdict(session, sample))
    assert kappa["audit"] == pytest.approx(cohen_kappa_score(gold, verdicts, labels=["supported", "unsupported"]), abs=1e-12)


def test_changing_every_triage_label_leaves_the_judge_figures_unchanged(session):
    _build(session)
    before = _judge(session)
    triage = session.exec(select(Assignment).where(Assignment.stream == "triage")).all()
    for assignment in triage:
        label = session.exec(select(Label).where(Label.sample_id == assignment.sample_id)).one()
        label.value = _flip(label.value)
        session.add(label)
    session.commit()
    assert len(triage) == N_LIVE - N_AUDIT
    assert _judge(session) == before


def test_without_production_queues_every_label_counts_and_the_output_says_so(session):
    _build(session, streams=False)
    found = _judge(session)
    assert found["labels"] == "all" and found["weighted"] is False
    assert found["kappa"]["n_audit"] == N_LIVE and "no production queues" in found["labels_note"]


def test_a_not_applicable_gold_and_verdict_are_left_out_and_counted_not_a_traceback(session):
    # g03's experts say not_applicable (golden side), the judge says not_applicable on audit sample p05 and on
    # triage sample p30 (never read: triage), and p07's audit label is not_applicable.
    _build(session, gold_na={"g03", "p07"}, verdict_na={"p05", "p30"})
    found = _judge(session)
    assert found["n_excluded"] == 3
    assert found["kappa"]["n_golden"] == N_GOLDEN - 1 and found["kappa"]["n_audit"] == N_AUDIT - 2
    assert found["kappa"]["value"] is not None and found["kappa"]["ci"] is not None


def test_retained_vs_new_leaves_excluded_labels_out_and_uses_the_members_gold(session):
    flagged = [f"g{i:02d}" for i in range(10)]  # g00–g04: a not_applicable gold, g05–g09: a not_applicable verdict
    _build(session, gold_na=set(flagged[:5]), verdict_na=set(flagged[5:]))
    golden.refresh_golden(session, "d", "g", source="metadata.source=live", renew=0.5, anchor_share=0.0, seed=3)
    session.commit()
    dataset = session.exec(select(Dataset).where(Dataset.name == "d")).one()
    members = {m.sample_id: m for m in golden.members_of(session, golden.find_golden(session, dataset, "g"), 2)}
    new = [sid for sid, m in members.items() if m.added_in == 2]
    found = golden.retained_vs_new(session, "d", "g", judge="j")
    json.dumps(found)
    kept = [s.id for s in session.exec(select(Sample).where(Sample.external_id.in_(flagged))) if s.id in members]
    # Both sides are golden members with their gold from all their labels: the new members drawn from production
    # count whether they were labelled in the audit or in triage.
    triage = {a.sample_id for a in session.exec(select(Assignment).where(Assignment.stream == "triage"))}
    assert set(new) & triage and len(kept) > 0
    assert found["labels"] == "all" and found["weighted"] is False and "golden members" in found["labels_note"]
    assert found["n_new"] == 15 and found["n_retained"] == N_GOLDEN - 15 and found["n_excluded"] == len(kept)
    kappa = found["kappa_new_minus_retained"]
    assert kappa["n_audit"] == 15 and kappa["n_golden"] == N_GOLDEN - 15 - len(kept)


def test_the_cli_prints_the_judge_figures_and_their_labels(session, runner):
    _build(session, gold_na={"g03"})
    out = runner.invoke(["golden", "drift", "g", "--dataset", "d", "--against", "metadata.source=live", "--judge", "j"])
    assert out.exit_code == 0, out.output
    line = next(text for text in out.output.splitlines() if text.strip().startswith("judge j"))
    assert "audit labels only" in line and "unweighted" in line and "1 pair with an excluded label left out" in line
    assert f"on {N_AUDIT} pairs, golden" in line and f"on {N_GOLDEN - 1})" in line
    as_json = runner.invoke(["golden", "drift", "g", "--dataset", "d", "--against", "metadata.source=live", "--judge", "j",
                             "--json"])
    assert json.loads(as_json.output)["judge"]["n_excluded"] == 1


def test_with_production_queues_but_no_audit_label_the_kappa_is_undefined_and_said_so(session, runner):
    _build(session)
    drawn = session.exec(select(Assignment.sample_id).where(Assignment.stream == "audit")).all()
    for label in session.exec(select(Label).where(Label.sample_id.in_(drawn))).all():  # the audit's labels are not made yet
        session.delete(label)
    session.commit()
    found = _judge(session)
    assert found["labels"] == "audit" and found["kappa"]["n_audit"] == 0 and found["kappa"]["value"] is None
    out = runner.invoke(["golden", "drift", "g", "--dataset", "d", "--against", "metadata.source=live", "--judge", "j"])
    assert out.exit_code == 0 and "kappa undefined:" in out.output


def _examples(session, store, sids, *, attach=True):
    """Make a prompt version whose few-shot examples are claim 0 of `sids` (shown with their gold); with `attach`,
    judge `j` becomes that version (as a prompt run's judge is), else it stays an imported judge."""
    version = prompt_version(session, TASK)
    for order, sid in enumerate(sids):
        claim = store.claims[(sid, 0)]
        value = session.exec(select(Label.value).where(Label.claim_id == claim.id)).first()
        session.add(FewShot(version_id=version.id, order=order, sample_id=claim.sample_id, claim_id=claim.id,
                            target_key=f"claim:{claim.id}", value=value))
    if attach:
        judge = session.exec(select(Judge).where(Judge.name == "j")).one()
        judge.kind, judge.prompt_version_id = "prompt", version.id
        session.add(judge)
    session.commit()


def _pairs_of(session, store, sids):
    gold = [session.exec(select(Label.value).where(Label.sample_id == store.samples[sid].id)).first() for sid in sids]
    return gold, [_verdict(session, store.samples[sid]) for sid in sids]


def _agreeing(session, store, sids):
    """Return the samples of `sids` whose verdict agrees with their (one) label."""
    gold, verdicts = _pairs_of(session, store, sids)
    return [sid for sid, g, v in zip(sids, gold, verdicts, strict=True) if g == v]


def test_the_judges_few_shot_examples_are_left_out_of_both_kappas_and_counted(session):
    # p07's audit label is not_applicable: as a few-shot example it is counted once, as one (the report's precedence).
    store = _build(session, gold_na={"p07"})
    audit = [f"p{i:02d}" for i in range(N_AUDIT)]
    agree = _agreeing(session, store, audit)
    shown_audit = agree[:4]  # examples the judge saw with their answer: its verdicts agree with the gold
    assert len(shown_audit) == 4
    # g02 became an example after it joined (another version's rule does not stop an insert); p25 is a triage
    # sample (no audit label: no pair to leave out, not counted); p07 has an excluded label.
    _examples(session, store, [*shown_audit, "g02", "p25", "p07"])
    found = _judge(session)
    kept_audit = [sid for sid in audit if sid not in {*shown_audit, "p07"}]
    kept_golden = [f"g{i:02d}" for i in range(N_GOLDEN) if i != 2]
    kappa = found["kappa"]
    assert kappa["n_audit"] == len(kept_audit) and kappa["n_golden"] == len(kept_golden)
    labels = ["supported", "unsupported"]
    assert kappa["audit"] == pytest.approx(cohen_kappa_score(*_pairs_of(session, store, kept_audit), labels=labels), abs=1e-12)
    assert kappa["golden"] == pytest.approx(cohen_kappa_score(*_pairs_of(session, store, kept_golden), labels=labels),
                                            abs=1e-12)
    assert kappa["value"] == pytest.approx(kappa["audit"] - kappa["golden"], abs=1e-12)
    assert found["n_fewshot"] == len(shown_audit) + 2 and found["n_excluded"] == 0
    # With the examples in, the audit's kappa would be higher: they agree by construction.
    everything = [sid for sid in audit if sid != "p07"]
    assert kappa["audit"] < cohen_kappa_score(*_pairs_of(session, store, everything), labels=labels)


def test_an_imported_judge_has_no_few_shot_examples_and_its_figures_do_not_move(session):
    store = _build(session)
    before = _judge(session)
    _examples(session, store, ["p00", "p01", "g02"], attach=False)  # some prompt version's examples, not j's
    after = _judge(session)
    assert after["n_fewshot"] == 0 and after == before
    assert after["kappa"]["n_audit"] == N_AUDIT and after["kappa"]["n_golden"] == N_GOLDEN


def test_retained_vs_new_leaves_the_judges_few_shot_examples_out_and_counts_them(session):
    store = _build(session)
    golden.refresh_golden(session, "d", "g", source="metadata.source=live", renew=0.5, anchor_share=0.0, seed=3)
    session.commit()
    dataset = session.exec(select(Dataset).where(Dataset.name == "d")).one()
    members = golden.members_of(session, golden.find_golden(session, dataset, "g"), 2)
    by_id = {s.id: s.external_id for s in store.samples.values()}
    retained = [by_id[m.sample_id] for m in members if m.added_in < 2]
    new = [by_id[m.sample_id] for m in members if m.added_in == 2]
    _examples(session, store, [retained[0], new[0], new[1]])
    found = golden.retained_vs_new(session, "d", "g", judge="j")
    json.dumps(found)
    kappa = found["kappa_new_minus_retained"]
    labels = ["supported", "unsupported"]
    assert kappa["golden"] == pytest.approx(cohen_kappa_score(*_pairs_of(session, store, retained[1:]), labels=labels),
                                            abs=1e-12)
    assert kappa["audit"] == pytest.approx(cohen_kappa_score(*_pairs_of(session, store, new[2:]), labels=labels), abs=1e-12)
    assert kappa["n_golden"] == len(retained) - 1 and kappa["n_audit"] == len(new) - 2
    assert found["n_fewshot"] == 3 and found["n_excluded"] == 0


def test_the_cli_says_how_many_few_shot_examples_were_left_out(session, runner):
    store = _build(session)
    _examples(session, store, ["p00", "p01"])
    out = runner.invoke(["golden", "drift", "g", "--dataset", "d", "--against", "metadata.source=live", "--judge", "j"])
    assert out.exit_code == 0, out.output
    line = next(text for text in out.output.splitlines() if text.strip().startswith("judge j"))
    assert "2 few-shot examples of the judge left out" in line and "excluded label" not in line
    as_json = runner.invoke(["golden", "drift", "g", "--dataset", "d", "--against", "metadata.source=live", "--judge", "j",
                             "--json"])
    assert json.loads(as_json.output)["judge"]["n_fewshot"] == 2
