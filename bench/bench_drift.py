"""Benchmark: the error rates of `golden drift`'s statistics, and the cost of the text test.

Data: one synthetic Spanish dataset of RAG questions (prenatal care, the demo's domain) with
every field `golden drift` tests: `metadata.topic` (4 categories, shares 0.4/0.3/0.2/0.1),
question and answer length (log-normal), number of contexts (1 + Poisson), top retrieval score
(beta) and the question text (templates with accents and ñ).

Sizes: the golden set has n = 200 items; production (the `--against` window) has
`--production` items, one run per size (default 200 and 1000: the old symmetric bench and a
realistic window — a month of traces is many more than 200). The tests run as `golden drift`
runs them: Holm across the six fields (m = 6), the text test with
`min_permutations(6)` = 599 permutations, the MDE at alpha / m.

1. False alarms: 200 random 200/P splits of one (200 + P)-item sample; a split "alarms" when any
   of the six fields has a Holm-adjusted p < 0.05 (and per field: its own p < 0.05).
2. Power: a 50 % shift of one field, golden 200 vs production P, 200 seeds per field: the
   largest topic's share halves (0.4 -> 0.2, TV 0.2: half of production drawn from a mix without
   that topic), answers 50 % longer, half of the questions from another topic (childcare
   instead of pregnancy).  Flagged: the field's own p < 0.05, and Holm across the six fields.
3. MDE: the Holm decision's rejection rate (chi-squared p < 0.05 / 6) at shifts of 0.5-1.5 x
   the reported `mde` (computed at alpha / 6; 1,000 seeds each) against the power the MDE's
   noncentral chi-squared predicts, at each production size.
4. Cost of the text test at 200 + 200 texts, 199 permutations: the kernel-ridge classifier
   (one solve per fold for all permutations) against the baseline in the same run, the
   brief's example (TF-IDF + LogisticRegression, 5-fold cross-validated AUC, refitted per
   permutation; measured on 19 permutations and scaled per permutation).

    .venv/bin/python bench/bench_drift.py [--splits 200] [--seeds 200] [--production 200,1000]
        [--shift-fields topic,answer_length,text] [--mde-seeds 1000] [--parts alarms,shift,mde,timing]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
from scipy import stats as sps

from calibrate.stats import categorical_drift, chi2_mde, holm_adjust, min_permutations, numeric_drift, text_drift

TOPICS = np.array(["dosis", "síntomas", "pruebas", "parto"])
SHARES = np.array([0.4, 0.3, 0.2, 0.1])
GOLDEN = 200
FIELDS = 6  # topic, question length, answer length, contexts, top score, text: Holm's m
ALPHA = 0.05
PREGNANCY = {
    "start": ["¿Cuánto", "¿Cuándo", "¿Es normal", "¿Puedo", "¿Qué hago si", "¿Por qué", "¿Hasta qué semana"],
    "noun": ["ácido fólico", "la ecografía", "el cribado", "las náuseas", "la tensión", "el hierro", "la glucosa",
             "el yodo", "las contracciones", "la epidural", "el tapón mucoso", "la matrona"],
    "tail": ["en el embarazo", "en la semana 12", "antes del parto", "en el tercer trimestre", "si tengo diabetes",
             "con la dieta", "al día", "según la guía"],
}
CHILDCARE = {
    "start": ["¿Cuánto", "¿Cuándo", "¿Es normal", "¿Puedo", "¿Qué hago si", "¿Por qué", "¿A qué edad"],
    "noun": ["el bebé", "la papilla", "el pañal", "la fiebre del niño", "la vacuna", "el chupete", "la lactancia",
             "los dientes", "el sueño del recién nacido", "la cuna", "el cólico", "la niña"],
    "tail": ["a los seis meses", "por la noche", "en la guardería", "con el pediatra", "después de comer",
             "en invierno", "al año", "según la pediatra"],
}


def away_from_largest(shares: np.ndarray, delta: float) -> np.ndarray:
    """Return `shares` with `delta` moved from the largest category to the others pro rata: the MDE's alternative."""
    top = int(np.argmax(shares))
    moved = shares + delta * shares / (1.0 - shares[top])
    moved[top] = shares[top] - delta
    return moved


def questions(rng: np.random.Generator, n: int, vocab: dict) -> list[str]:
    """Return `n` questions drawn from the templates of `vocab`."""
    parts = [rng.choice(vocab[k], n) for k in ("start", "noun", "tail")]
    return [f"{a} {b} {c}?" for a, b, c in zip(*parts, strict=True)]


def dataset(rng: np.random.Generator, n: int, *, shift: str | None = None) -> dict:
    """Return the six fields of `n` items; `shift` names the one field moved by 50 %."""
    shares = away_from_largest(SHARES, 0.2) if shift == "topic" else SHARES
    text = questions(rng, n, PREGNANCY)
    if shift == "text":
        half = rng.random(n) < 0.5
        other = questions(rng, n, CHILDCARE)
        text = [o if h else t for t, o, h in zip(text, other, half.tolist(), strict=True)]
    return {
        "topic": rng.choice(TOPICS, n, p=shares),
        "question_length": np.array([len(t) for t in text], dtype=float),
        "answer_length": rng.lognormal(5.5, 0.5, n) * (1.5 if shift == "answer_length" else 1.0),
        "n_contexts": 1 + rng.poisson(3, n),
        "top_score": rng.beta(5, 2, n),
        "text": text,
    }


def p_values(a: dict, b: dict, *, seed: int, permutations: int) -> dict:
    """Return each field's p-value, as `golden drift` computes it."""
    out = {"topic": categorical_drift(a["topic"], b["topic"], alpha=ALPHA / FIELDS, seed=seed).p_value}
    for f in ("question_length", "answer_length", "n_contexts", "top_score"):
        out[f] = numeric_drift(a[f], b[f], n_permutations=0).p_value
    # permutations 0: the text test is left out with p = 1 (it never flags, and Holm's m stays 6), so a
    # power is a lower bound and a false-alarm rate is exact up to the text test's own alpha / m (a
    # permutation test: P(p <= alpha / m) <= alpha / m under no drift)
    out["text"] = text_drift(a["text"], b["text"], n_permutations=permutations, seed=seed).p_value if permutations else 1.0
    return out


def rates(pairs, *, permutations: int) -> tuple[dict, float]:
    """Return the per-field rate of p < 0.05 and the rate of any Holm-adjusted p < 0.05."""
    hits, any_holm, n = {}, 0, 0
    for seed, (a, b) in enumerate(pairs):
        ps = p_values(a, b, seed=seed, permutations=permutations)
        for f, p in ps.items():
            hits[f] = hits.get(f, 0) + (p < ALPHA)
        any_holm += min(holm_adjust(list(ps.values()))) < ALPHA
        n += 1
    return {f: h / n for f, h in hits.items()}, any_holm / n


def splits(n_splits: int, production: int):
    rng = np.random.default_rng(2026)
    total = GOLDEN + production
    whole = dataset(rng, total)
    for _ in range(n_splits):
        order = rng.permutation(total)
        yield tuple({f: np.asarray(v)[idx].tolist() if f == "text" else np.asarray(v)[idx] for f, v in whole.items()}
                    for idx in (order[:GOLDEN], order[GOLDEN:]))


def shifted_pairs(field: str, n_seeds: int, production: int):
    for seed in range(n_seeds):
        rng = np.random.default_rng(10_000 + seed)
        yield dataset(rng, GOLDEN), dataset(rng, production, shift=field)


def predicted_power(cur: np.ndarray, production: int, alpha: float) -> float:
    """The noncentral chi-squared power of the test of homogeneity against `cur` at these sizes."""
    pooled = (GOLDEN * SHARES + production * cur) / (GOLDEN + production)
    lam = ((GOLDEN * (SHARES - pooled) ** 2 + production * (cur - pooled) ** 2) / pooled).sum()
    return float(sps.ncx2.sf(sps.chi2.isf(alpha, 3), 3, lam))


def mde_curve(n_seeds: int, production: int) -> list[tuple[float, float, float]]:
    """The Holm decision's first step (chi-squared p < alpha / m) at multiples of the reported MDE."""
    level = ALPHA / FIELDS
    mde = chi2_mde(SHARES, GOLDEN, production, alpha=level).value
    out = []
    for factor in (0.5, 0.75, 1.0, 1.25, 1.5):
        cur = away_from_largest(SHARES, factor * mde)
        rejected = 0
        for seed in range(n_seeds):
            rng = np.random.default_rng(seed)
            rejected += categorical_drift(rng.choice(TOPICS, GOLDEN, p=SHARES), rng.choice(TOPICS, production, p=cur)).p_value < level
        out.append((factor, rejected / n_seeds, predicted_power(cur, production, level)))
    return out


def logistic_baseline(a: list[str], b: list[str], permutations: int) -> float:
    """The brief's example: TF-IDF char_wb 2-4 + LogisticRegression, 5-fold AUC, refitted per permutation."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score

    x = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4)).fit_transform(a + b)
    y = np.r_[np.zeros(len(a)), np.ones(len(b))]
    rng = np.random.default_rng(0)
    aucs = [cross_val_score(LogisticRegression(max_iter=1000), x, rng.permutation(y) if i else y, cv=5, scoring="roc_auc").mean()
            for i in range(permutations + 1)]
    return float(aucs[0])


def timing() -> dict:
    rng = np.random.default_rng(7)
    a, b = dataset(rng, 200)["text"], dataset(rng, 200, shift="text")["text"]
    t0 = time.perf_counter()
    ours = text_drift(a, b, n_permutations=199, seed=0)
    t1 = time.perf_counter()
    auc_lr = logistic_baseline(a, b, 19)
    t2 = time.perf_counter()
    return {"ridge_s": t1 - t0, "ridge_auc": ours.value, "ridge_p": ours.p_value, "lr_s_per_perm": (t2 - t1) / 20, "lr_auc": auc_lr}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--splits", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--production", default="200,1000", help="production sizes, comma-separated (golden: 200)")
    parser.add_argument("--permutations", type=int, default=min_permutations(FIELDS, alpha=ALPHA),
                        help="text test permutations in the simulations (golden drift: min_permutations(6) = 599; "
                             "0 leaves the text test out with p = 1: fast bounds)")
    parser.add_argument("--mde-seeds", type=int, default=1000)
    parser.add_argument("--shift-fields", default="topic,answer_length,text", help="fields to shift, comma-separated")
    parser.add_argument("--parts", default="alarms,shift,mde,timing", help="which parts to run (separate processes can share them)")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}; "
          f"load average before {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for production in (int(x) for x in args.production.split(",")):
        t0 = time.perf_counter()
        print(f"== golden {GOLDEN} vs production {production}; text permutations {args.permutations}")
        parts = set(args.parts.split(","))
        if "alarms" in parts:
            per_field, holm = rates(splits(args.splits, production), permutations=args.permutations)
            print(f"false alarms over {args.splits} splits: any field after Holm {holm:.3f}; per field "
                  + ", ".join(f"{f} {r:.3f}" for f, r in per_field.items()))
        for field in args.shift_fields.split(",") if "shift" in parts else []:
            per_field, holm = rates(shifted_pairs(field, args.seeds, production), permutations=args.permutations)
            print(f"50 % shift of {field} over {args.seeds} seeds: its own p < 0.05 {per_field[field]:.3f}; "
                  f"any field after Holm {holm:.3f}")
        mde = chi2_mde(SHARES, GOLDEN, production, alpha=ALPHA / FIELDS).value
        print(f"mde at alpha/{FIELDS} for shares {SHARES.tolist()}: {mde:.4f} (at alpha 0.05: "
              f"{chi2_mde(SHARES, GOLDEN, production).value:.4f}); the topic shift (TV 0.2) = {0.2 / mde:.2f} x mde, "
              f"predicted Holm-first-step power {predicted_power(away_from_largest(SHARES, 0.2), production, ALPHA / FIELDS):.3f}")
        for factor, observed, predicted in mde_curve(args.mde_seeds, production) if "mde" in parts else []:
            print(f"  shift {factor:.2f} x mde: rejected at alpha/{FIELDS} {observed:.3f}, noncentral chi-squared power {predicted:.3f}")
        print(f"took {time.perf_counter() - t0:.1f} s; load average {os.getloadavg()[0]:.2f}")
    if "timing" not in args.parts.split(","):
        return
    t = timing()
    print(f"text test, 200 + 200 texts: kernel ridge with 199 permutations {t['ridge_s']:.3f} s (AUC {t['ridge_auc']:.3f}, p {t['ridge_p']:.3f}); "
          f"logistic baseline {t['lr_s_per_perm']:.3f} s per permutation (AUC {t['lr_auc']:.3f}) -> "
          f"{t['lr_s_per_perm'] * 200:.1f} s for 199; ratio {t['lr_s_per_perm'] * 200 / t['ridge_s']:.0f}x")
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
