"""The live estimator's targets by integer key codes (issue 34): the same targets as the text-keyed path it replaced.

live_targets maps the gold and the few-shot examples onto the verdicts through the report's categorical key codes
(plain text keys are coded once), makes each distinct value a number once, counts answers with bincounts, and reads
the parts per sample once per report (report._Frames.parts_per_sample). Each piece is checked here against the previous
text-keyed path, kept below as the reference, on a random world with ties, adjudications, stale labels, unparsed and
abstaining verdicts, retired claims, few-shot examples and a sample filter; the RAG block's per-row value flags
(rag.value_flags) against pandas' own comparisons.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from report_world import DATASET, JUDGE, fill_world
from sqlalchemy import func, text
from sqlalchemy import select as sa_select
from sqlmodel import Session, select

from calibrate import lookup
from calibrate.calibration import live as live_module
from calibrate.calibration import report as report_module
from calibrate.calibration.budget import budget_candidates
from calibrate.calibration.frames import coded_frames, labels_frame, part_totals, verdicts_frame
from calibrate.calibration.live import Estimand, estimand_for, live_targets, numbers_of
from calibrate.calibration.rag import value_flags
from calibrate.db import read_frame
from calibrate.gold import gold_frame
from calibrate.models import Claim, Context, Dataset, Sample


def reference_numbers(values: pd.Series, estimand: Estimand, excluded: set[str]) -> np.ndarray:
    text_ = values.astype(str)
    if estimand.metric == "share":
        out = (text_ == estimand.positive).to_numpy(dtype=float, copy=True)
    else:
        out = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, copy=True)
    out[text_.isin(excluded).to_numpy()] = np.nan
    return out


def reference_answers(claims: pd.DataFrame, totals: pd.Series) -> tuple[pd.DataFrame, int, int]:
    few = pd.unique(claims.loc[claims["fewshot"], "sample_id"])
    claims = claims[~claims["sample_id"].isin(few)]
    counted = ~np.isnan(claims["yhat"].to_numpy())
    gold_counted = claims["labelled"].to_numpy() & ~np.isnan(claims["y"].to_numpy())
    per = pd.DataFrame({
        "sample_id": claims["sample_id"].to_numpy(), "judged": 1, "counted": counted,
        "positive": counted & (claims["yhat"].to_numpy() == 1), "failed": claims["failed"].to_numpy(),
        "labelled": claims["labelled"].to_numpy(), "gold_counted": gold_counted,
        "gold_positive": gold_counted & (claims["y"].to_numpy() == 1),
    }).groupby("sample_id").sum()
    complete = per["judged"].to_numpy() >= totals.reindex(per.index, fill_value=0).to_numpy()
    per = per[complete]
    yhat = np.where(per["counted"] > 0, (per["positive"] == per["counted"]).astype(float), np.nan)
    labelled = (per["labelled"] == per["judged"]).to_numpy()
    y = np.where(labelled & (per["gold_counted"] > 0).to_numpy(), (per["gold_positive"] == per["gold_counted"]).astype(float), np.nan)
    out = pd.DataFrame({"sample_id": per.index.to_numpy(dtype=np.int64), "yhat": yhat, "failed": (per["failed"] > 0).to_numpy(),
                        "labelled": labelled, "y": y})
    return out, len(few), int((~complete).sum())


def reference_targets(verdicts: pd.DataFrame, labels: pd.DataFrame, fewshot: set[str], totals: pd.Series,
                      estimand: Estimand, excluded: set[str], samples: set[int] | None) -> tuple[pd.DataFrame, dict]:
    """The previous live_targets between the verdicts and the weights: text keys, isin and map."""
    verdicts = verdicts[verdicts["active"]].drop_duplicates("target_key")
    labels = labels[~labels["stale"]]
    if samples is not None:
        verdicts = verdicts[verdicts["sample_id"].isin(samples)]
        labels = labels[labels["sample_id"].isin(samples)]
    ok = (verdicts["status"] == "ok") & verdicts["value"].notna()
    yhat = np.where(ok.to_numpy(), reference_numbers(verdicts["value"].where(ok, ""), estimand, excluded), np.nan)
    failed = ~ok.to_numpy()
    yhat[failed] = 0.0
    gold = gold_frame(labels, "categorical")
    gold = gold[gold["gold"].notna()]
    keys = verdicts["target_key"].astype(object).to_numpy()
    frame = pd.DataFrame({"target_key": keys, "sample_id": verdicts["sample_id"].astype(np.int64).to_numpy(),
                          "yhat": yhat, "failed": failed})
    frame["fewshot"] = frame["target_key"].isin(fewshot)
    gold_of = gold.drop_duplicates("target_key").set_index("target_key")["gold"]
    frame["labelled"] = frame["target_key"].isin(gold_of.index)
    frame["y"] = np.nan
    if frame["labelled"].any():
        frame.loc[frame["labelled"], "y"] = reference_numbers(frame.loc[frame["labelled"], "target_key"].map(gold_of), estimand,
                                                              excluded)
    counts = {"n_labelled_unjudged": int((~gold_of.index.isin(frame["target_key"])).sum())}
    if estimand.level == "answers":
        frame, few, incomplete = reference_answers(frame, totals)
        counts.update(n_fewshot_excluded=few, n_incomplete_answers=incomplete)
    else:
        counts["n_fewshot_excluded"] = int(frame["fewshot"].sum())
        frame = frame[~frame["fewshot"]]
    return frame, counts


@pytest.fixture
def world(db_url, engine):
    fill_world(db_url.removeprefix("sqlite:///"), 40, 5, seed=11, third=0.4, adjudicated=0.1, stale=0.1, unparsed=0.1,
               abstain=0.1, not_applicable=0.1)
    with engine.begin() as conn:  # retired claims (their verdicts are not current targets), claims the judge has not judged
        conn.execute(text("UPDATE claim SET active = 0 WHERE id % 17 = 3"))
        conn.execute(text("DELETE FROM verdict WHERE claim_id % 23 = 5"))
    return engine


@pytest.mark.parametrize("level", ["answers", "claims"])
@pytest.mark.parametrize("coded", [True, False])
@pytest.mark.parametrize("subset", [False, True])
def test_live_targets_by_codes_are_the_text_keyed_targets(world, monkeypatch, level, coded, subset):
    rng = np.random.default_rng(7)
    with Session(world) as session:
        dataset, task, judge = lookup.dataset(session, DATASET), lookup.task(session, "claim_support"), lookup.judge(session, JUDGE)
        plain, plain_v = labels_frame(session, dataset, task), verdicts_frame(session, dataset, task, judge)
        labels, verdicts = coded_frames(session, dataset, task, judge) if coded else (plain, plain_v)
        keys = sorted(set(plain_v["target_key"]))
        fewshot = set(rng.choice(keys, size=6, replace=False).tolist()) | {"claim:999999"}
        monkeypatch.setattr(live_module, "fewshot_keys", lambda *_: fewshot)
        samples = set(rng.choice(sorted(set(plain_v["sample_id"])), size=25, replace=False).tolist()) if subset else None
        estimand = estimand_for(task, level=level)
        # the report's frames: its gold formed once (used unless a sample filter drops labels: then formed again)
        targets = live_targets(session, dataset, task, judge, estimand, samples=samples, with_time=False,
                               frames=(verdicts, labels, gold_frame(labels, task.kind)))
        excluded = set(task.excluded or [])
        expected, counts = reference_targets(plain_v, plain, fewshot, part_totals(session, dataset, Claim), estimand, excluded,
                                             samples)
    assert len(expected) > 10 and expected["labelled"].any() and (~expected["labelled"]).any()
    assert np.isnan(expected["y"]).any() and expected["failed"].any()
    np.testing.assert_array_equal(targets.sample_id, expected["sample_id"].to_numpy(dtype=np.int64))
    np.testing.assert_array_equal(targets.yhat, expected["yhat"].to_numpy(dtype=float))
    np.testing.assert_array_equal(targets.failed, expected["failed"].to_numpy(dtype=bool))
    np.testing.assert_array_equal(targets.labelled, expected["labelled"].to_numpy(dtype=bool))
    np.testing.assert_array_equal(targets.y, np.where(expected["labelled"], expected["y"], np.nan))
    assert {key: targets.counts[key] for key in counts} == counts
    assert counts["n_fewshot_excluded"] > 0 or subset
    assert level == "claims" or counts["n_incomplete_answers"] > 0


@pytest.mark.parametrize("metric", ["share", "mean"])
def test_numbers_of_are_the_numbers_of_every_value(metric):
    rng = np.random.default_rng(5)
    estimand = Estimand("claims", "supported" if metric == "share" else None, metric)
    texts = np.array(["supported", "unsupported", "not_applicable", "", "0.5", "1", "x"], dtype=object)
    for values in (pd.Series(texts[rng.integers(0, len(texts), 500)]),
                   pd.Series(pd.Categorical(texts[rng.integers(0, 3, 300)])),
                   pd.Series(rng.integers(0, 5, 300) / 4.0), pd.Series(texts[:3])):
        expected = reference_numbers(values, estimand, {"not_applicable"})
        np.testing.assert_array_equal(numbers_of(values, estimand, {"not_applicable"}), expected)


def test_the_report_reads_the_parts_per_sample_once_for_the_estimate_and_faithfulness(world, monkeypatch):
    """The estimate block's answers and faithfulness divide by the same active claims per sample: the report reads them
    once per task (its frames hand them to both), with the figures of separate reads."""
    reads = []
    real = part_totals

    def counted(session, dataset, row):
        reads.append(row)
        return real(session, dataset, row)

    with Session(world) as session:
        plain = report_module.build_report(session, DATASET, JUDGE).data
    monkeypatch.setattr(report_module, "part_totals", counted)
    monkeypatch.setattr("calibrate.calibration.live.part_totals", counted)
    with Session(world) as session:
        once = report_module.build_report(session, DATASET, JUDGE).data
    section = once["tasks"]["claim_support"]
    assert "estimate" in section and "faithfulness" in once["rag"]  # both blocks ran on the counts
    assert reads == [Claim]
    for data in (plain, once):
        data.pop("generated_at")
    assert once == plain


@pytest.mark.parametrize("kind", ["object", "str", "category", "mixed"])
def test_value_flags_are_notna_isin_and_equality_per_row(kind):
    """rag.value_flags (faithfulness's flags, made once per distinct value) equal pandas' notna, isin and == per row."""
    rng = np.random.default_rng(8)
    pool = np.array(["supported", "unsupported", "not_applicable", None, "ok", "failed"], dtype=object)
    raw = pool[rng.integers(0, len(pool), 400)]
    if kind == "mixed":
        raw[::7] = np.nan
        raw[::11] = 1.0
    values = pd.Series(raw) if kind in ("object", "mixed") else pd.Series(raw).astype(kind)
    for positive in ("supported", "ok", "absent"):
        present, excluded, equal = value_flags(values, {"not_applicable", "failed"}, positive)
        np.testing.assert_array_equal(present, values.notna().to_numpy())
        np.testing.assert_array_equal(excluded, values.isin({"not_applicable", "failed"}).to_numpy(dtype=bool))
        np.testing.assert_array_equal(equal, (values == positive).to_numpy(dtype=bool))
    assert all(flags.size == 0 for flags in value_flags(pd.Series([], dtype=object), set(), "supported"))


def reference_part_totals(session: Session, dataset, row) -> pd.Series:
    """The previous part_totals: the parts joined to their samples and grouped."""
    query = (sa_select(row.sample_id, func.count()).join(Sample, Sample.id == row.sample_id)
             .where(Sample.dataset_id == dataset.id, row.active.is_(True)).group_by(row.sample_id))
    frame = read_frame(session, query, ["sample_id", "n"])
    return pd.Series(frame["n"].to_numpy(dtype=np.int64), index=frame["sample_id"].to_numpy(dtype=np.int64))


def test_part_totals_by_an_id_range_are_the_joined_counts(world):
    """A dataset whose sample ids are one dense range is counted by that range; one with a gap (a sample of another
    dataset between its own) by the join: the same counts, in id order, either way."""
    with Session(world) as session:
        dataset = lookup.dataset(session, DATASET)
        ids = sorted(session.exec(select(Sample.id).where(Sample.dataset_id == dataset.id)).all())
        assert ids == list(range(ids[0], ids[-1] + 1))  # dense: the range read
        dense = part_totals(session, dataset, Claim)
        pd.testing.assert_series_equal(dense, reference_part_totals(session, dataset, Claim))
        assert dense.index.is_monotonic_increasing and (dense < 5).any()  # (retired claims are not counted)
        other = Dataset(name="other")
        session.add(other)
        session.flush()
        session.get(Sample, ids[len(ids) // 2]).dataset_id = other.id  # a gap: its claims are the other dataset's
        session.flush()
        for name in (DATASET, "other"):
            chosen = lookup.dataset(session, name)
            got = part_totals(session, chosen, Claim)
            pd.testing.assert_series_equal(got, reference_part_totals(session, chosen, Claim))
            assert len(got) == (1 if name == "other" else len(dense) - 1)
        pd.testing.assert_series_equal(part_totals(session, dataset, Context), reference_part_totals(session, dataset, Context))
        empty = Dataset(name="empty")
        session.add(empty)
        session.flush()
        assert part_totals(session, empty, Claim).empty


def test_budget_candidates_are_the_keys_sorted_by_sample_then_target():
    """budget_candidates' one lexsort against the previous stable sort with a key per target: text and categorical
    keys, ties on the sample, equal keys, other rows left out."""

    def reference(merged: pd.DataFrame) -> list[str]:
        mask = (merged["excluded"] == "no_gold").to_numpy()
        pairs = zip(merged["sample_id"].to_numpy()[mask].tolist(), merged["target_key"].to_numpy()[mask].tolist(), strict=True)
        return [key for _, key in sorted(pairs, key=lambda p: (p[0], int(p[1].partition(":")[2])))]

    rng = np.random.default_rng(3)
    n = 3000
    keys = [f"claim:{i}" for i in rng.integers(1, 2000, n)]
    merged = pd.DataFrame({"sample_id": rng.integers(1, 200, n), "target_key": keys,
                           "excluded": np.where(rng.random(n) < 0.6, "no_gold", None)})
    expected = reference(merged)
    assert len(expected) > 1000
    assert budget_candidates(merged) == expected
    assert budget_candidates(merged.astype({"target_key": "category"})) == expected
    assert budget_candidates(merged.astype({"sample_id": object})) == expected
    assert budget_candidates(merged.assign(excluded=None)) == []
    assert budget_candidates(merged.iloc[:0]) == []


def test_sample_info_reads_the_metadata_fields_json_extract_reads(world, monkeypatch):
    """sample_info parses a sample's metadata only where its text holds the key or an escape: the same probabilities
    and times as json_extract on every sample (keys escaped, nested, in a value, absent; numbers as text; no metadata)."""
    metas = ['{"topic": "t0"}', '{"inclusion_prob": 0.25}', '{"inclusion_prob": "0.5", "started_at": "2026-11-02T10:00:00Z"}',
             '{"\\u0069nclusion_prob": 0.125, "started_\\u0061t": "2026-10-01T00:00:00+02:00"}',
             '{"note": "inclusion_prob started_at"}', '{"x": {"inclusion_prob": 0.9, "started_at": "2020-01-01"}}',
             '{"started_at": "not a time", "inclusion_prob": null}', '{"started_at": 5}', '[]', '{}']
    with world.begin() as conn:
        conn.execute(text(f"UPDATE sample SET metadata = CASE id % {len(metas)} "
                          + " ".join(f"WHEN {i} THEN :m{i}" for i in range(len(metas))) + " END"),
                     {f"m{i}": meta for i, meta in enumerate(metas)})

    def json_extract_field(session, key):  # the previous expression: json_extract on every sample
        return func.json_extract(Sample.meta, text(f"'$.{key}'"))

    with Session(world) as session:
        dataset = lookup.dataset(session, DATASET)
        for with_time in (True, False):
            got = live_module.sample_info(session, dataset, with_time=with_time)
            with monkeypatch.context() as patched:
                patched.setattr(live_module, "_meta_field", json_extract_field)
                expected = live_module.sample_info(session, dataset, with_time=with_time)
            pd.testing.assert_frame_equal(got, expected)
            # (whether an escaped key is found depends on the SQLite version: either way as json_extract finds it)
            assert got["inclusion_prob"].notna().sum() >= 8 and got["inclusion_prob"].isna().sum() >= 8
