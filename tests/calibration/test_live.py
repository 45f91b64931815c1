"""One live number: `monitor`, `estimate --by-window`, `gate --production` and the Production page give the same figures.

A random production dataset of claim-level verdicts (answers of 2–6 claims, thumbs-down traces kept always and the others
one in five, a judge that errs, fails and abstains, audit and triage streams filled day by day, experts who label the
queues, ties and `not_applicable` golds): every window of `calibrate monitor` equals the same window of
`calibrate estimate --by-window week` to 1e-9 in the estimate and both ends of its interval, at both levels.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from bs4 import BeautifulSoup
from labelstore import Store
from sqlmodel import select

from calibrate.accounts import ensure_annotator
from calibrate.annotation.auto_queue import queue_auto
from calibrate.calibration import monitor, production_gate, run_estimate
from calibrate.models import Assignment, AuditDraw, User

START = datetime(2026, 11, 2, tzinfo=UTC)
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def random_production(session, *, seed: int, n: int = 100, daily: int = 14) -> None:
    """Store a random production dataset `d` judged by `J` on claim_support, its queues filled and labelled."""
    rng = np.random.default_rng(seed)
    store = Store(session)
    for name in ("ana", "ben", "eva"):
        ensure_annotator(session, name)
    truth: dict[tuple[str, int], str] = {}
    days: dict[int, list[str]] = {}
    for i in range(n):
        claims = int(rng.integers(2, 7))
        rate = rng.beta(4, 1)  # claims of one answer share its support rate
        gold = ["supported" if rng.random() < rate else "unsupported" for _ in range(claims)]
        if rng.random() < 0.05:
            gold[0] = "not_applicable"
        down = any(g == "unsupported" for g in gold) and rng.random() < 0.5
        when = START + timedelta(hours=int(rng.integers(0, 21 * 24)))
        ext = f"s{i}"
        sample = store.sample(ext, n_claims=claims, meta={"started_at": when.isoformat(), "inclusion_prob": 1.0 if down else 0.2})
        sample.feedback = -1 if down else None
        for c, g in enumerate(gold):
            truth[(ext, c)] = g
        days.setdefault((when - START).days, []).append(ext)
    store.commit()
    for day in sorted(days):
        for ext in days[day]:
            for c in range(sum(1 for key in truth if key[0] == ext)):
                g = truth[(ext, c)]
                roll = rng.random()
                if roll < 0.03:
                    store.verdict("J", "claim_support", ext, None, claim=c)  # unparsed: counted, taken as not supported
                elif roll < 0.05:
                    store.verdict("J", "claim_support", ext, "not_applicable", claim=c)
                else:
                    flip = rng.random() < (0.1 if g == "supported" else 0.35)
                    value = g if g == "not_applicable" or not flip else ("unsupported" if g == "supported" else "supported")
                    store.verdict("J", "claim_support", ext, value, claim=c)
        store.commit()
        queue_auto(session, "d", daily=daily, assign=["ana", "ben", "eva"], overlap=2, overlap_share=0.3, seed=seed,
                   now=START + timedelta(days=day, hours=23))
        session.commit()
    ids = {s.id: ext for ext, s in store.samples.items()}
    users = {u.id: u.username for u in session.exec(select(User)).all()}
    for a in session.exec(select(Assignment).where(Assignment.stream.is_not(None))).all():
        if rng.random() < 0.1:
            continue  # an expert who has not labelled yet: the pass's response rate adjusts the weights
        ext = ids[a.sample_id]
        for (e, c), g in truth.items():
            if e == ext:
                value = g if rng.random() < 0.92 else ("unsupported" if g == "supported" else "supported")
                store.label("claim_support", users[a.user_id], ext, value, claim=c)
    store.commit()


def _windows_equal(monitored: dict, estimated: dict) -> None:
    by_key = {w["window"]: w for w in estimated["windows"]}
    assert [w["window"] for w in monitored["windows"]] == list(by_key)
    for w in monitored["windows"]:
        e = by_key[w["window"]]
        assert (w["status"] == "too_few") == (e["status"] == "too_few")
        if w["estimate"] is None:
            assert e["estimate"] is None
            continue
        assert e["estimate"] == pytest.approx(w["estimate"], abs=1e-9)
        assert e["ci"] == pytest.approx(w["ci"], abs=1e-9)
        assert e["method"] == w["method"]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("level", ["answers", "claims"])
def test_monitor_equals_estimate_by_window_on_random_data(session, seed, level):
    random_production(session, seed=seed)
    assert session.exec(select(AuditDraw)).first() is not None
    monitored = monitor(session, "d", "J", task="claim_support", level=level, now=NOW)
    estimated = run_estimate(session, "d", "claim_support", "J", level=level, by_window="week")
    assert monitored["estimand"] == estimated["estimand"] == {"level": level, "positive": "supported", "metric": "share"}
    assert monitored["labels"] == estimated["labels"] == "audit" and estimated["n_outside_audit"] > 0
    assert any(w["estimate"] is not None for w in monitored["windows"])
    _windows_equal(monitored, estimated)
    gated = production_gate(monitor(session, "d", "J", task="claim_support", level=level, now=NOW, min_value=0.5))
    latest = next(w for w in monitored["windows"] if w["window"] == gated["checked"])
    assert (gated["window"]["estimate"], gated["window"]["ci"]) == (latest["estimate"], latest["ci"])
    for w in monitored["windows"]:
        if w["ci"]:
            low, high = w["ci"]
            assert 0.0 <= low < high <= 1.0  # a share: inside [0, 1], never a point


def test_the_two_levels_are_two_questions(session):
    """The share of supported claims is far above the share of answers whose every claim is supported."""
    random_production(session, seed=3)
    answers = run_estimate(session, "d", "claim_support", "J")
    claims = run_estimate(session, "d", "claim_support", "J", level="claims")
    assert answers["unit"] == "answer" and claims["unit"] == "target"
    assert claims["estimate"] > answers["estimate"] + 0.15


def test_the_command_line_and_the_production_page_show_the_monitor_s_figures(runner, client, session, login):
    random_production(session, seed=4)
    cli = runner.invoke(["monitor", "--dataset", "d", "--judge", "J", "--task", "claim_support", "--level", "claims"])
    assert cli.exit_code == 0, cli.output
    data = json.loads(cli.output)
    login("eng", role="engineer")
    page = client.get("/datasets/d/production?judge=J&level=claims")
    assert page.status_code == 200
    soup = BeautifulSoup(page.data, "html.parser")
    for w in data["windows"]:
        card = soup.select_one(f'article.window-card[data-window="{w["window"]}"]')
        assert card["data-status"] == w["status"]
        if w["estimate"] is not None:
            assert float(card["data-estimate"]) == pytest.approx(w["estimate"], abs=1e-9)
            assert [float(card["data-low"]), float(card["data-high"])] == pytest.approx(w["ci"], abs=1e-9)


def _one_window(session, meta_of):
    """Twenty judged and labelled samples of a sample task, the metadata of sample i from meta_of(i)."""
    runner_task = "ok_task"
    from calibrate.tasks import add_task

    add_task(session, runner_task, target="sample", kind="categorical", labels=["pass", "fail"])
    store = Store(session)
    for i in range(20):
        store.sample(f"s{i}", meta=meta_of(i))
        store.verdict("J", runner_task, f"s{i}", "pass" if i % 4 else "fail")
        store.label(runner_task, "ana", f"s{i}", "pass" if i % 5 else "fail")
    store.commit()


def test_a_start_in_year_9999_or_1_falls_back_to_the_creation_time(session, runner, client, login):
    """Issue 30: a stored start in year 9999 (or 0001) broke `monitor --by-window week`, the gate and the page."""
    _one_window(session, lambda i: {"started_at": "9999-12-31T23:00:00Z" if i % 2 else "0001-01-01T00:00:00Z"})
    result = runner.invoke(["monitor", "--dataset", "d", "--judge", "J", "--by-window", "week"])
    assert result.exit_code == 0, result.output
    windows = json.loads(result.output)["windows"]
    assert len(windows) == 1 and windows[0]["window"][:4] not in ("9999", "0001")
    gate = runner.invoke(["gate", "--production", "--dataset", "d", "--judge", "J", "--min", "0.5"])
    assert gate.exit_code in (0, 1, 2, 3) and "Traceback" not in gate.output
    login("eng", role="engineer")
    assert client.get("/datasets/d/production?judge=J").status_code == 200


def test_a_stored_inclusion_probability_below_the_floor_is_refused_in_one_line(session, runner, client, login):
    """Issue 30: 1e-300 flipped the gate to PASS with [5.000, 5.000] and put NaN in the monitor's JSON."""
    _one_window(session, lambda i: {"inclusion_prob": 1e-300 if i == 3 else 1.0})
    for args in (["monitor", "--dataset", "d", "--judge", "J"], ["gate", "--production", "--dataset", "d", "--judge", "J", "--min", "0.5"],
                 ["estimate", "--dataset", "d", "--judge", "J", "--task", "ok_task"]):
        result = runner.invoke(args)
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        assert "sample s3: metadata.inclusion_prob must lie in [1e-06, 1], not 1e-300" in result.output
    login("eng", role="engineer")
    page = BeautifulSoup(client.get("/datasets/d/production?judge=J").data, "html.parser")
    assert "1e-300" in page.select_one("#production-message").get_text()


def test_a_constant_audit_gold_gives_no_pass_and_no_point_interval(session, runner):
    """The issue's case: 400 answers, 2.5 % bad, 15 audit labels all good. `monitor` printed ok 1.000 [1.000, 1.000] and
    `gate --production --min 0.99` passed with certainty for a system whose true share (0.975) is below the minimum."""
    from calibrate.tasks import add_task

    add_task(session, "ok_task", target="sample", kind="categorical", labels=["pass", "fail"])
    store = Store(session)
    ensure_annotator(session, "ana")
    bad = set(range(0, 400, 40))  # 10 of 400
    for i in range(400):
        store.sample(f"s{i}", meta={"started_at": (START + timedelta(hours=i % 100)).isoformat(), "inclusion_prob": 1.0})
        store.verdict("J", "ok_task", f"s{i}", "fail" if i in bad else "pass")
    store.commit()
    queue_auto(session, "d", daily=15, assign=["ana"], audit_share=1.0, seed=1, now=START + timedelta(days=5))
    session.commit()
    ids = {s.id: ext for ext, s in store.samples.items()}
    drawn = session.exec(select(Assignment).where(Assignment.stream == "audit")).all()
    assert len(drawn) == 15
    for a in drawn:
        store.label("ok_task", "ana", ids[a.sample_id], "pass")  # every audit label good: a constant gold
    store.commit()
    data = json.loads(runner.invoke(["monitor", "--dataset", "d", "--judge", "J", "--min", "0.99"]).output)
    (window,) = data["windows"]
    low, high = window["ci"]
    assert window["estimate"] <= high == 1.0 and low < 0.95 and window["status"] == "undecided"
    gate = runner.invoke(["gate", "--production", "--dataset", "d", "--judge", "J", "--min", "0.99"])
    assert gate.exit_code == 3 and gate.output.startswith("UNDECIDED ok_task window 2026-W45"), gate.output
    estimate = json.loads(runner.invoke(["estimate", "--dataset", "d", "--judge", "J", "--task", "ok_task"]).output)
    assert (estimate["estimate"], estimate["ci"]) == (window["estimate"], window["ci"])  # the same case, the same answer
