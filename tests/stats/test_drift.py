"""Drift statistics and the refresh rule: cross-checked with SciPy/statsmodels, hand examples, error rates.

The large simulations (text included, 200 splits each) are in bench/bench_drift.py; here the
error rates are checked on the fast fields only, with fixed seeds.
"""

from __future__ import annotations

import gc
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from calibrate.reasons import Reason
from calibrate.stats import (
    DRIFT_REASONS,
    categorical_drift,
    chi2_mde,
    cohen_kappa,
    holm_adjust,
    judge_drift,
    largest_remainder_allocation,
    min_permutations,
    numeric_drift,
    psi,
    refresh_plan,
    renew_count,
    retire_items,
    text_drift,
)

TOPICS = np.array(["billing", "login", "refunds", "shipping"])
SHARES = np.array([0.4, 0.3, 0.2, 0.1])


def shifted(shares: np.ndarray, delta: float) -> np.ndarray:
    """Move `delta` of share out of the largest category into the others, in proportion (TV = delta)."""
    top = int(np.argmax(shares))
    out = shares + delta * shares / (1 - shares[top])
    out[top] = shares[top] - delta
    return out


# --------------------------------------------------------------------------- categorical


def test_chi2_equals_scipy_without_continuity_correction():
    ref = ["a"] * 30 + ["b"] * 50 + ["c"] * 20
    cur = ["a"] * 45 + ["b"] * 35 + ["c"] * 40
    est = categorical_drift(ref, cur)
    stat, p, df, _ = sps.chi2_contingency([[30, 50, 20], [45, 35, 40]], correction=False)
    assert est.extra["test"] == "chi2"
    assert est.extra["statistic"] == pytest.approx(stat)
    assert est.p_value == pytest.approx(p)
    assert est.extra["df"] == df == 2
    assert est.value == pytest.approx(0.5 * (abs(0.3 - 45 / 120) + abs(0.5 - 35 / 120) + abs(0.2 - 40 / 120)))
    assert est.extra["pooled"] == []


def test_rare_categories_are_pooled_rarest_first_until_expected_counts_reach_five():
    ref = ["a"] * 40 + ["b"] * 40 + ["c"] * 3 + ["d"] * 2 + ["e"] * 1
    cur = ["a"] * 30 + ["b"] * 50 + ["c"] * 2 + ["d"] * 1 + ["e"] * 2
    est = categorical_drift(ref, cur)
    # e (3) joins d (3), then c (5) joins {d, e} (6): one column c+d+e of 11, expected 5.5
    assert est.extra["pooled"] == [["c", "d", "e"]]
    stat, p, df, _ = sps.chi2_contingency([[40, 40, 6], [30, 50, 5]], correction=False)
    assert (est.extra["statistic"], est.p_value, est.extra["df"]) == (pytest.approx(stat), pytest.approx(p), df)
    assert est.extra["categories"] == ["a", "b", "c", "d", "e"]  # PSI and TV stay on the unpooled categories


def test_permutation_on_total_variation_when_pooling_cannot_help():
    ref, cur = ["a"] * 12 + ["b"] * 2, ["a"] * 1 + ["b"] * 4
    est = categorical_drift(ref, cur, n_permutations=999, seed=3)
    assert est.extra["test"] == "permutation_tv" and "permutation" in est.note
    assert est.value == pytest.approx(0.5 * (abs(12 / 14 - 0.2) + abs(2 / 14 - 0.8)))
    # exact permutation p: P(TV* >= TV) over all C(19, 5) splits, i.e. the hypergeometric count of b's in cur
    tvs = {x: abs(x / 5 - (6 - x) / 14) for x in range(6)}
    exact = sum(sps.hypergeom.pmf(x, 19, 6, 5) for x in range(6) if tvs[x] >= tvs[4] - 1e-12)
    assert est.p_value == pytest.approx(exact, abs=0.03)
    assert est.p_value >= 1 / 1000
    assert categorical_drift(ref, cur, n_permutations=999, seed=3).p_value == est.p_value
    assert categorical_drift(ref, ref, n_permutations=99).p_value == 1.0


def test_psi_hand_computed_and_epsilon_for_an_empty_category():
    # shares (.5, .3, .2) -> (.4, .3, .3): (-.1) ln .8 + 0 + .1 ln 1.5 = 0.022314 + 0.040547
    assert psi([50, 30, 20], [40, 30, 30]) == pytest.approx(0.0628609, abs=1e-6)
    # an empty category: share 0 becomes 1e-4 -> (.5 - 1) ln .5 + (.5 - 1e-4) ln(.5 / 1e-4)
    assert psi([10, 0], [5, 5]) == pytest.approx(0.5 * math.log(2) + 0.4999 * math.log(5000), rel=1e-9)
    assert psi([10, 0], [5, 5], epsilon=1e-3) < psi([10, 0], [5, 5])
    assert psi([3, 7], [3, 7]) == 0.0


@pytest.mark.parametrize(
    ("ref", "cur", "status", "reason"),
    [
        ([], ["a"], "no_data", "empty_sample"),
        ([None, float("nan")], ["a"], "no_data", "empty_sample"),
        (["a", "a"], ["a"], "undefined", "one_category"),
    ],
)
def test_categorical_undefined_cases_carry_a_stable_reason_code(ref, cur, status, reason):
    est = categorical_drift(ref, cur)
    assert status == "no_data" or est.note == "every value of both samples is in one category: there is no share to shift ('a')"
    assert (est.value, est.status, est.reason.code) == (None, status, reason) and "reason" not in est.extra
    assert est.note == est.reason.text() and est.note.startswith(DRIFT_REASONS[reason].partition(" ({")[0])
    assert json.loads(json.dumps(est.to_dict(), allow_nan=False))["reason"]["code"] == reason


def test_mde_is_the_shift_with_eighty_percent_power_and_shrinks_with_n():
    est = chi2_mde(SHARES, 200, 200)
    delta = est.value
    shares = shifted(SHARES, delta)
    assert 0.5 * np.abs(shares - SHARES).sum() == pytest.approx(delta)
    crit = sps.chi2.isf(0.05, 3)
    pooled = (SHARES + shares) / 2
    lam = 200 * (((SHARES - pooled) ** 2 + (shares - pooled) ** 2) / pooled).sum()
    assert sps.ncx2.sf(crit, 3, lam) == pytest.approx(0.8, abs=1e-4)
    assert chi2_mde(SHARES, 800, 800).value < delta < chi2_mde(SHARES, 50, 50).value
    assert chi2_mde([1.0], 10, 10).reason.code == "mde_one_category"
    assert chi2_mde([0.5, 0.5], 2, 2).reason.code == "mde_unreachable"


# --------------------------------------------------------------------------- Holm


def test_holm_equals_statsmodels_and_keeps_undefined_fields(monkeypatch):
    # statsmodels' Holm calls gc.collect() on every call: 1.5-3 s each late in the suite's process (its heap is
    # large by then), 22-41 s for this test; the collection changes no result, so it is skipped here.
    monkeypatch.setattr(gc, "collect", lambda *args, **kwargs: 0)
    rng = np.random.default_rng(5)
    cases = [[0.01, 0.04, 0.03, 0.005], [0.5], [0.0, 1.0, 0.2], [0.02, 0.02, 0.02]]
    cases += [list(rng.random(k) ** 3) for k in range(1, 12)]
    for ps in cases:
        assert holm_adjust(ps) == pytest.approx(list(multipletests(ps, method="holm")[1]))
    ours = holm_adjust([0.01, None, 0.04, float("nan"), 0.03])
    assert ours == [pytest.approx(0.03), None, pytest.approx(0.06), None, pytest.approx(0.06)]


def test_holm_rejects_bad_p_values():
    with pytest.raises(ValueError, match="p-values"):
        holm_adjust([0.2, 1.5])


# --------------------------------------------------------------------------- numeric


def test_ks_and_wasserstein_equal_scipy_and_are_normalised_by_the_golden_iqr():
    rng = np.random.default_rng(0)
    ref, cur = rng.lognormal(4, 0.5, 150), rng.lognormal(4.2, 0.5, 120)
    est = numeric_drift(list(ref) + [None], cur, n_permutations=0)
    ks = sps.ks_2samp(ref, cur)
    w = sps.wasserstein_distance(ref, cur)
    iqr = sps.iqr(ref)
    assert (est.value, est.p_value) == (pytest.approx(ks.statistic), pytest.approx(ks.pvalue))
    assert est.extra["wasserstein"] == pytest.approx(w)
    assert est.extra["wasserstein_normalised"] == pytest.approx(w / iqr)
    assert (est.extra["normalised_by"], est.extra["n_missing"], est.extra["wasserstein_p_value"]) == ("iqr", 1, None)
    assert numeric_drift(ref, cur, normalise="std", n_permutations=0).extra["scale"] == pytest.approx(np.std(ref, ddof=1))


def test_wasserstein_permutation_p_matches_a_naive_loop():
    rng = np.random.default_rng(1)
    ref, cur = rng.normal(0, 1, 30), rng.normal(0.6, 1, 25)
    est = numeric_drift(ref, cur, n_permutations=199, seed=7)
    pooled = np.concatenate([ref, cur])
    member = (np.arange(55) < 30).astype(np.int8)
    rows = np.random.default_rng(7).permuted(np.broadcast_to(member, (199, 55)).copy(), axis=1)
    null = np.array([sps.wasserstein_distance(pooled[r == 1], pooled[r == 0]) for r in rows])
    w = sps.wasserstein_distance(ref, cur)
    assert est.extra["wasserstein_p_value"] == pytest.approx((1 + np.sum(null >= w - 1e-12)) / 200)


def test_numeric_spread_fallbacks_and_undefined_cases():
    est = numeric_drift([3, 3, 3, 3, 3, 4], [3, 5, 6], n_permutations=0)  # IQR 0: the standard deviation is used
    assert est.extra["normalised_by"] == "std"
    flat = numeric_drift([2, 2, 2], [2, 5], n_permutations=0)
    assert flat.ok and flat.extra["wasserstein_normalised"] is None and flat.extra["normalise_reason"] == {"code": "zero_spread"}
    const = numeric_drift([1, 1], [1, 1, 1])
    assert (const.value, const.reason.code, const.note) == (None, "constant_values", "every value of both samples is the same (all 1)")
    assert numeric_drift([], [1.0]).reason.code == "empty_sample"
    with pytest.raises(ValueError, match="finite"):
        numeric_drift([1, float("inf")], [1, 2])


# --------------------------------------------------------------------------- text

SPANISH = [
    "¿Cómo cambio la contraseña de mi cuenta?", "No puedo iniciar sesión desde el móvil", "¿Dónde está mi pedido?",
    "El envío llegó dañado, ¿qué hago?", "Quiero la devolución del importe", "La factura tiene un error en el año",
    "¿Por qué me cobraron dos veces?", "El niño no recibe el correo de verificación",
]
CLIMATE = [
    "¿Cuándo lloverá en la montaña este otoño?", "La sequía afectó la cosecha de caña", "El huracán destruyó la isla",
    "¿Qué temperatura hará mañana en Cádiz?", "La nieve cubrió los Pirineos en enero", "El río creció tras la tormenta",
]


def _texts(pool, n, rng):
    return [f"{pool[i]} {w}" for i, w in zip(rng.integers(0, len(pool), n), rng.choice(["por favor", "gracias", "hola", "urgente"], n), strict=True)]


def test_text_classifier_sees_a_change_of_topic_in_spanish_and_not_a_random_split():
    rng = np.random.default_rng(2)
    ref = _texts(SPANISH, 80, rng)
    cur = _texts(SPANISH, 40, rng) + _texts(CLIMATE, 40, rng)  # half of production is about something else
    est = text_drift(ref, cur, n_permutations=99, seed=1)
    assert est.value > 0.7 and est.p_value == pytest.approx(0.01)
    assert est.extra["n_features"] > 100
    same = _texts(SPANISH, 160, rng)
    null = text_drift(same[:80], same[80:], n_permutations=99, seed=1)
    assert null.p_value > 0.05 and abs(null.value - 0.5) < 0.15
    assert text_drift(ref, cur, n_permutations=99, seed=1).value == est.value


def test_text_subsampling_and_undefined_cases():
    rng = np.random.default_rng(3)
    big = text_drift(_texts(SPANISH, 40, rng), _texts(CLIMATE, 30, rng), n_permutations=19, max_texts=20)
    assert big.extra["subsampled"] and (big.extra["n_reference"], big.extra["n_current"]) == (20, 20)
    assert text_drift(["a b"] * 3, ["c d"] * 10).reason.code == "too_few_texts"
    assert text_drift(["", " "] * 5, [""] * 5).reason.code == "no_text_features"
    assert text_drift([None], ["hola"]).status == "no_data"
    with pytest.raises(ValueError, match="strings"):
        text_drift([1, 2], ["a", "b"])


# --------------------------------------------------------------------------- judge


def test_judge_drift_is_audit_minus_golden_with_an_interval():
    rng = np.random.default_rng(4)
    gh = rng.integers(0, 2, 300)
    gj = np.where(rng.random(300) < 0.9, gh, 1 - gh)  # the judge agreed 90 % of the time on the golden set
    ah = rng.integers(0, 2, 300)
    aj = np.where(rng.random(300) < 0.7, ah, 1 - ah)  # and 70 % on today's audit
    out = judge_drift(gh, gj, ah, aj, positive=1, n_resamples=500)
    kap = out["kappa"]
    assert kap.value == pytest.approx(cohen_kappa(ah, aj).value - cohen_kappa(gh, gj).value)
    assert kap.extra["golden"] == pytest.approx(cohen_kappa(gh, gj).value)
    assert kap.ci[0] < kap.value < kap.ci[1] < 0 and kap.p_value < 0.01 and kap.note == ""
    sens = out["sensitivity"]
    assert sens.extra["audit"] == pytest.approx(np.mean(aj[ah == 1] == 1))
    assert out["specificity"].extra["golden"] == pytest.approx(np.mean(gj[gh == 0] == 0))
    same = judge_drift(gh[:150], gj[:150], gh[150:], gj[150:], n_resamples=500)["kappa"]
    assert same.ci[0] <= 0 <= same.ci[1] and same.note.startswith("inconclusive")
    assert judge_drift(gh, gj, ah, aj, positive=1, n_resamples=500)["kappa"].ci == kap.ci


def test_judge_drift_undefined_cases():
    out = judge_drift([0, 0, 0], [0, 1, 0], [1, 0, 1], [1, 0, 0], positive=1, n_resamples=50)
    assert out["sensitivity"].reason.code == "no_positives" and out["specificity"].ok
    assert judge_drift([1, 1], [1, 1], [0, 1], [1, 0], n_resamples=50)["kappa"].reason.code == "kappa_undefined"
    assert judge_drift([], [], [1], [1])["kappa"].status == "no_data"


# --------------------------------------------------------------------------- refresh


def _golden(n=200, seed=0):
    rng = np.random.default_rng(seed)
    return rng.choice(TOPICS, n, p=SHARES), rng.integers(1, 5, n)


def test_refresh_of_200_at_renew_02_and_anchor_share_05():
    strata, added = _golden()
    production = np.random.default_rng(1).choice(TOPICS, 3000, p=[0.1, 0.2, 0.3, 0.4])
    plan = refresh_plan(strata, added, production, renew=0.2, anchor_share=0.5, seed=11)
    assert plan.retired.size == 40 and plan.added.size == 40
    assert plan.anchors.sum() == 100 and not plan.anchors[plan.retired].any()
    target = {t: 40 * np.mean(production == t) for t in TOPICS}
    assert plan.target == pytest.approx(target)
    assert all(abs(plan.allocation[t] - target[t]) < 1 for t in TOPICS)
    assert {t: int(np.sum(production[plan.added] == t)) for t in TOPICS} == plan.allocation
    again = refresh_plan(strata, added, production, renew=0.2, anchor_share=0.5, seed=11)
    assert json.dumps(again.to_dict()) == json.dumps(plan.to_dict())
    other = refresh_plan(strata, added, production, renew=0.2, anchor_share=0.5, seed=12)
    assert not np.array_equal(other.added, plan.added)
    # existing anchors are kept as they are, whatever the seed
    kept = refresh_plan(strata, added, production, renew=0.2, anchor_share=0.5, anchor=plan.anchors, seed=99)
    assert np.array_equal(kept.anchors, plan.anchors)


def test_retire_takes_the_oldest_of_the_most_over_represented_stratum():
    strata = ["a"] * 8 + ["b"] * 2
    added = [1, 1, 2, 3, 4, 5, 6, 7, 1, 1]
    anchor = [True, False, False, False, False, False, False, False, False, False]
    retired = retire_items(strata, added, anchor, renew=0.3, target_shares={"a": 0.5, "b": 0.5})
    assert retired.tolist() == [1, 2, 3]  # a is 3 over target; its anchor (item 0) stays
    with pytest.raises(ValueError, match="anchors"):
        retire_items(strata, added, [True] * 9 + [False], renew=0.2, target_shares={"a": 1})


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(0, 100), min_size=1, max_size=8).filter(lambda w: sum(w) > 0), st.integers(0, 60), st.integers(0, 5))
def test_hamilton_allocation_sums_to_k_and_stays_within_one_of_the_quota(w, k, seed):
    seats = largest_remainder_allocation(w, k, seed=seed)
    quota = k * np.asarray(w) / sum(w)
    assert seats.sum() == k and np.all(np.abs(seats - quota) < 1 + 1e-9)
    assert np.array_equal(seats, largest_remainder_allocation(w, k, seed=seed))


def test_hamilton_with_capacity_and_renew_count_rounding():
    assert largest_remainder_allocation([0.5, 0.3, 0.2], 10, capacity=[2, 10, 10]).tolist() == [2, 5, 3]
    assert largest_remainder_allocation([1, 1, 1], 10, seed=0).sum() == 10
    with pytest.raises(ValueError, match="cannot allocate"):
        largest_remainder_allocation([1, 1], 5, capacity=[1, 1])
    assert (renew_count(30, 0.1), renew_count(200, 0.2), renew_count(7, 0.2), renew_count(5, 0.0)) == (3, 40, 2, 0)


# --------------------------------------------------------------------------- error rates (fast fields)


def _fields(rng, n, shares, length_scale=1.0):
    return rng.choice(TOPICS, n, p=shares), rng.lognormal(4, 0.5, n) * length_scale, rng.poisson(3, n)


def _p_values(ref, cur) -> list[float]:
    return [categorical_drift(ref[0], cur[0]).p_value] + [numeric_drift(r, c, n_permutations=0).p_value for r, c in zip(ref[1:], cur[1:], strict=True)]


def test_false_alarms_over_200_random_splits_of_one_dataset_are_at_most_5_percent():
    rng = np.random.default_rng(20)
    topic, length, contexts = _fields(rng, 400, SHARES)
    alarms = 0
    for _ in range(200):
        order = rng.permutation(400)
        a, b = order[:200], order[200:]
        alarms += min(holm_adjust(_p_values((topic[a], length[a], contexts[a]), (topic[b], length[b], contexts[b])))) < 0.05
    assert alarms <= 10  # any of the three fields, Holm-adjusted: a family-wise 5 %


@pytest.mark.parametrize(("field", "column"), [("topic", 0), ("length", 1)])
def test_a_50_percent_shift_of_one_field_at_n_200_is_flagged_in_95_percent_of_seeds(field, column):
    hits = 0
    for seed in range(100):
        rng = np.random.default_rng(seed)
        ref = _fields(rng, 200, SHARES)
        # topic: the largest category's share halves (0.4 -> 0.2, TV 0.2); length: answers 50 % longer
        cur = _fields(rng, 200, shifted(SHARES, 0.2)) if field == "topic" else _fields(rng, 200, SHARES, length_scale=1.5)
        hits += _p_values(ref, cur)[column] < 0.05
    assert hits >= 95  # the field's own test at 5 %; under Holm across fields see bench/results/drift.md


def test_mde_agrees_with_the_simulated_power():
    mde = chi2_mde(SHARES, 200, 200).value
    assert 0.12 < mde < 0.2  # the 50 % shift above (TV 0.2) is larger than what the test is built to see

    def p_value(seed: int) -> float:
        rng = np.random.default_rng(seed)
        return categorical_drift(rng.choice(TOPICS, 200, p=SHARES), rng.choice(TOPICS, 200, p=shifted(SHARES, mde))).p_value

    power = np.mean([p_value(s) < 0.05 for s in range(300)])
    assert 0.72 <= power <= 0.88  # 80 % power; 300 seeds give a binomial sd of 2.3 points
    rng = np.random.default_rng(0)
    reported = categorical_drift(rng.choice(TOPICS, 200, p=SHARES), rng.choice(TOPICS, 200, p=SHARES))
    assert reported.extra["mde"] == pytest.approx(mde, abs=0.03)  # every result reports it, from the observed golden shares


# Golden set 200 against a realistic production window (1,000 samples), Holm across six fields as
# `golden drift` runs it.  At 200 vs 200 the Holm decision (chi-squared at 0.05 / 6) has a predicted
# power of 0.885 against the topic shift and even a test aimed at that one direction 0.958: no
# omnibus test reaches 95 % there (bench/results/drift.md); a window of >= 300 samples does.
PRODUCTION = 1000


def _six(rng, n, shares=SHARES):
    """Six independent fields: topic; question and answer length, contexts, top score, claims per answer."""
    return (rng.choice(TOPICS, n, p=shares), rng.lognormal(4, 0.4, n), rng.lognormal(5.5, 0.5, n), 1 + rng.poisson(3, n),
            rng.beta(5, 2, n), rng.poisson(4, n))


def _holm_min(ref, cur) -> float:
    ps = [categorical_drift(ref[0], cur[0], alpha=0.05 / 6).p_value]
    ps += [numeric_drift(r, c, n_permutations=0).p_value for r, c in zip(ref[1:], cur[1:], strict=True)]
    return min(holm_adjust(ps))


def _holm_min_fast(ref, cur) -> float:  # the same tests on counts: categorical_drift's chi-squared and KS are SciPy's (tests above)
    ps = [sps.chi2_contingency(np.vstack([(ref[0][:, None] == TOPICS).sum(0), (cur[0][:, None] == TOPICS).sum(0)]), correction=False)[1]]
    ps += [sps.ks_2samp(r, c).pvalue for r, c in zip(ref[1:], cur[1:], strict=True)]
    return min(holm_adjust(ps))


def test_golden_200_against_a_production_window_holm_over_six_fields_false_alarms_power_and_mde():
    # 200 random 200/1000 splits of each of three datasets: the rate of one dataset's 200 splits
    # is an estimate with a binomial sd of 1.5 points around that dataset's conditional rate.
    rates = []
    for data_seed in range(3):
        rng = np.random.default_rng(data_seed)
        whole = _six(rng, 200 + PRODUCTION)
        alarms = 0
        for _ in range(200):
            order = rng.permutation(200 + PRODUCTION)
            alarms += _holm_min_fast([f[order[:200]] for f in whole], [f[order[200:]] for f in whole]) < 0.05
        rates.append(alarms / 200)
    assert np.mean(rates) <= 0.05 and max(rates) <= 0.07, rates  # the decision's false alarms: at most 5 %
    flagged = sum(_holm_min(_six(np.random.default_rng(s), 200), _six(np.random.default_rng(s + 500), PRODUCTION, shifted(SHARES, 0.2)))
                  < 0.05 for s in range(100))
    assert flagged >= 95  # the largest topic's share halves (0.4 -> 0.2): flagged after Holm in >= 95 % of seeds
    rng = np.random.default_rng(26)
    mde = categorical_drift(rng.choice(TOPICS, 200, p=SHARES), rng.choice(TOPICS, PRODUCTION, p=SHARES), alpha=0.05 / 6)
    assert mde.extra["mde_alpha"] == pytest.approx(0.05 / 6)
    exact = chi2_mde(SHARES, 200, PRODUCTION, alpha=0.05 / 6).value
    assert mde.extra["mde"] == pytest.approx(exact, abs=0.03) and exact < 0.2  # the shift above is beyond what must be seen

    def p_value(seed: int) -> float:  # categorical_drift's chi-squared is SciPy's (a test above), on counts here for speed
        gen = np.random.default_rng(seed)
        table = np.vstack([gen.multinomial(200, SHARES), gen.multinomial(PRODUCTION, shifted(SHARES, exact))])
        return sps.chi2_contingency(table, correction=False)[1]

    power = np.mean([p_value(s) < 0.05 / 6 for s in range(300)])
    assert 0.72 <= power <= 0.88  # the MDE at 0.05 / 6 is the shift the Holm decision's first step sees 80 % of the time


def test_min_permutations_keeps_the_permutation_floor_below_holms_strictest_level():
    assert min_permutations(6) == 599 and min_permutations(1, requested=2000) == 2000
    for m in (1, 5, 9, 20):
        b = min_permutations(m)
        assert 1 / (b + 1) <= 0.05 / m / 5
    with pytest.raises(ValueError):
        min_permutations(0)


def test_hostile_sizes_are_bounded():
    rng = np.random.default_rng(9)
    many = categorical_drift(rng.integers(0, 3000, 4000), rng.integers(0, 3000, 30))  # 3,000 categories, few in production
    assert many.ok and many.extra["test"] in ("chi2", "permutation_tv") and len(many.extra["categories"]) > 2000
    with pytest.raises(ValueError, match="resamples"):
        judge_drift([0, 1] * 30_000, [0, 1] * 30_000, [0, 1], [1, 0], n_resamples=2000)


def test_a_refresh_whose_seats_moved_says_so_with_a_reason():
    strata, added = _golden()
    production = np.repeat(TOPICS, 100)
    exclude = (production == TOPICS[0]) & (np.arange(production.size) % 100 > 1)  # 2 of its 100 items are eligible
    plan = refresh_plan(strata, added, production, renew=0.2, anchor_share=0.5, exclude=exclude, seed=11)
    assert plan.allocation[TOPICS[0]] == 2 and plan.notes == [Reason("refresh_seats_moved")]
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["reasons"] == [{"code": "refresh_seats_moved"}]
    assert data["notes"] == ["some strata had too few eligible production items: their seats went to the others"]
