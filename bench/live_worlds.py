"""Simulated production windows for bench/bench_live_number.py (issue 35's coverage grid).

**One window** (one production window per run, from a seeded generator) is a finite population of traffic, some of it
kept as samples by the trace sampling, judged, and an audit drawn from the samples:

- kind ``targets``: ``TRACES[scheme]`` traces, one target each; the positive label is "good", the
  negative label's prevalence is 3 % or 30 % (each trace bad independently). Thumbs-down: P(down | bad)
  0.5, P(down | good) 0.03.
- kind ``claims``: ``ANSWERS[scheme]`` answers of 4–10 claims each (uniform); an answer's rate of
  supported claims is Beta(μ·s, (1 − μ)·s) with s = 1/ρ − 1, ρ = 0.3, so the intra-answer correlation of
  the claims' gold is ρ (beta-binomial; the empirical ICC, one-way ANOVA estimator with unequal
  sizes, is printed). μ = 1 − prevalence: the negative label's share among the claims is 3 % or 30 %.
  The thumbs-down probability rises with the answer's share of unsupported claims: 0.03 + 0.5·share.
  The estimand is the share of supported claims over every claim of the window.
- kind ``answers``: the same clustered answers, the estimand the share of answers whose every claim is
  supported (faithfulness = 1). Its prevalence is the share of answers with at least one unsupported
  claim, 3 % or 30 %: μ is solved for it (``answer_claim_rate``; the claims' share of unsupported claims
  is then 0.85 % and 9.7 %). An answer's verdict is good when the judge supports each of its claims.
- Trace sampling ("scheme"): ``none`` (π_t = 1), ``td5`` (thumbs-down first at 5 %: a thumbs-down
  trace is kept with π_t = 1, any other with 0.05), ``w100`` (100-fold weights: 1 and 0.01).
- Judges (two columns on the same windows): ``good`` P(verdict good | good) 0.95, P(good | bad) 0.25;
  ``lenient`` 0.97 and 0.6. Clustered worlds get one verdict per claim.
- The audit draws n samples (answers) uniformly among the window's samples: π_a = n / samples; a
  labelled target weighs 1/(π_t·π_a), a judged one 1/π_t. The truth is the window's traffic share (every
  trace or claim of the window, sampled or not), so the interval must cover the trace sampling's
  variance as well as the audit's.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import scipy.optimize as spo

KINDS = ("targets", "claims", "answers")
PREVALENCES = (0.03, 0.30)
SCHEMES = {"none": 1.0, "td5": 0.05, "w100": 0.01}  # π_t of a trace without a thumbs-down
JUDGES = {"good": (0.95, 0.25), "lenient": (0.97, 0.60)}  # P(verdict good | good), P(verdict good | bad)
#: Window sizes: traces (targets) and answers (clustered worlds) per scheme, enough samples for a 200-label audit.
TRACES = {"none": 1500, "td5": 8000, "w100": 20000}
ANSWERS = {"none": 600, "td5": 4000, "w100": 10000}
RHO = 0.3
CLAIMS = (4, 10)
DOWN = (0.03, 0.5)  # P(thumbs-down | good), P(thumbs-down | bad); clustered: DOWN[0] + DOWN[1]·share unsupported


@dataclass
class Window:
    """One window's truth, its audit-labelled targets and every judged target, with each judge's verdicts."""

    truth: float
    y: np.ndarray  # labelled targets' gold (1 = good)
    w: np.ndarray  # 1/(π_t·π_a)
    pi: np.ndarray  # π_t
    g: np.ndarray  # cluster (sample id)
    w_all: np.ndarray  # every judged target: 1/π_t
    pi_all: np.ndarray
    g_all: np.ndarray
    verdicts: dict[str, tuple[np.ndarray, np.ndarray]]  # judge -> (labelled verdicts, every verdict)
    icc: float | None = None
    codes: dict = field(default_factory=dict)  # cluster codes 0..k−1 of the labelled and judged sets (filled once)

    def cluster_codes(self) -> tuple[np.ndarray, int, np.ndarray, int]:
        if not self.codes:
            ids, inv = np.unique(self.g, return_inverse=True)
            ids_all, inv_all = np.unique(self.g_all, return_inverse=True)
            self.codes.update(lab=(inv, ids.size), all=(inv_all, ids_all.size))
        return (*self.codes["lab"], *self.codes["all"])


def _verdicts(rng: np.random.Generator, gold: np.ndarray) -> dict[str, np.ndarray]:
    """Return each judge's verdicts (1 = good) on the targets whose gold is `gold`."""
    u = rng.random(gold.size)  # one draw for both judges: the lenient one passes whatever the good one passes
    return {name: np.where(gold == 1, u < good, u < bad).astype(float) for name, (good, bad) in JUDGES.items()}


def _audit(rng: np.random.Generator, samples: int, n: int) -> tuple[np.ndarray, float]:
    drawn = np.sort(rng.choice(samples, size=min(n, samples), replace=False))
    return drawn, drawn.size / samples


def world_targets(rng: np.random.Generator, prev: float, n: int, scheme: str) -> Window:
    """One target per trace; the negative label's prevalence `prev` (module docstring)."""
    traces = TRACES[scheme]
    gold = (rng.random(traces) >= prev).astype(float)
    down = rng.random(traces) < np.where(gold == 1, DOWN[0], DOWN[1])
    pi_t = np.where(down, 1.0, SCHEMES[scheme])
    kept = np.flatnonzero(rng.random(traces) < pi_t)
    gold_s, pi_s = gold[kept], pi_t[kept]
    verdicts = _verdicts(rng, gold_s)
    drawn, pi_a = _audit(rng, kept.size, n)
    return Window(truth=float(gold.mean()), y=gold_s[drawn], w=1 / (pi_s[drawn] * pi_a), pi=pi_s[drawn], g=kept[drawn],
                  w_all=1 / pi_s, pi_all=pi_s, g_all=kept, verdicts={k: (v[drawn], v) for k, v in verdicts.items()})


def _all_good_share(mu: float) -> float:
    """Return P(every claim of an answer is supported) when the answer's rate is Beta(μs, (1 − μ)s), 4–10 claims."""
    s = 1 / RHO - 1
    a, b = mu * s, (1 - mu) * s
    sizes = np.arange(CLAIMS[0], CLAIMS[1] + 1)
    return float(np.mean([np.prod((a + np.arange(m)) / (a + b + np.arange(m))) for m in sizes]))


@functools.cache
def answer_claim_rate(prev: float) -> float:
    """Return μ (the claims' mean rate of support) for which a share `prev` of answers has an unsupported claim."""
    return float(spo.brentq(lambda mu: _all_good_share(mu) - (1 - prev), 1e-9, 1 - 1e-12, xtol=1e-14))


def anova_icc(gold: np.ndarray, owner: np.ndarray, sizes: np.ndarray) -> float:
    """Return the one-way ANOVA estimate of the intra-answer correlation of binary `gold` (unequal answer sizes)."""
    k, big_n = sizes.size, float(sizes.sum())
    sums = np.bincount(owner, weights=gold, minlength=k)
    between = float((sums ** 2 / sizes).sum()) - float(sums.sum()) ** 2 / big_n
    within = float(sums.sum()) - float((sums ** 2 / sizes).sum())
    msb, msw = between / (k - 1), within / (big_n - k)
    n0 = (big_n - float((sizes ** 2).sum()) / big_n) / (k - 1)
    return (msb - msw) / (msb + (n0 - 1) * msw) if msb + (n0 - 1) * msw > 0 else float("nan")


def world_clustered(rng: np.random.Generator, prev: float, n: int, scheme: str, level: str) -> Window:
    """Answers of 4–10 claims with intra-answer correlation RHO; `level` "claims" or "answers" (module docstring)."""
    answers = ANSWERS[scheme]
    mu = 1 - prev if level == "claims" else answer_claim_rate(prev)
    s = 1 / RHO - 1
    rate = rng.beta(mu * s, (1 - mu) * s, size=answers)
    sizes = rng.integers(CLAIMS[0], CLAIMS[1] + 1, size=answers)
    owner = np.repeat(np.arange(answers), sizes)
    gold = (rng.random(owner.size) < rate[owner]).astype(float)
    unsupported = np.bincount(owner, weights=1 - gold, minlength=answers)
    down = rng.random(answers) < DOWN[0] + DOWN[1] * unsupported / sizes
    pi_t = np.where(down, 1.0, SCHEMES[scheme])
    kept = np.flatnonzero(rng.random(answers) < pi_t)
    drawn, pi_a = _audit(rng, kept.size, n)
    drawn = kept[drawn]
    icc = anova_icc(gold, owner, sizes)
    in_kept = np.isin(owner, kept, assume_unique=False)
    claim_verdicts = {k: (v, owner[in_kept]) for k, v in _verdicts(rng, gold[in_kept]).items()}
    if level == "claims":
        in_drawn = np.isin(owner, drawn)
        kept_owner = owner[in_kept]
        lab = np.isin(kept_owner, drawn)
        return Window(truth=float(gold.mean()), y=gold[in_drawn], w=1 / (pi_t[owner[in_drawn]] * pi_a), pi=pi_t[owner[in_drawn]],
                      g=owner[in_drawn], w_all=1 / pi_t[kept_owner], pi_all=pi_t[kept_owner], g_all=kept_owner,
                      verdicts={k: (v[lab], v) for k, (v, _) in claim_verdicts.items()}, icc=icc)
    faithful = (unsupported == 0).astype(float)
    verdicts = {}
    position = np.searchsorted(kept, drawn)
    for name, (v, kept_owner) in claim_verdicts.items():
        rejected = np.bincount(kept_owner, weights=1 - v, minlength=answers)[kept]
        va = (rejected == 0).astype(float)
        verdicts[name] = (va[position], va)
    return Window(truth=float(faithful.mean()), y=faithful[drawn], w=1 / (pi_t[drawn] * pi_a), pi=pi_t[drawn], g=drawn,
                  w_all=1 / pi_t[kept], pi_all=pi_t[kept], g_all=kept, verdicts=verdicts, icc=icc)


def world(rng: np.random.Generator, kind: str, prev: float, n: int, scheme: str) -> Window:
    if kind == "targets":
        return world_targets(rng, prev, n, scheme)
    return world_clustered(rng, prev, n, scheme, kind)
