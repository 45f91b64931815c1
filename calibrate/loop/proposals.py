"""What `calibrate optimise` proposes, from the train split only (docs/loop.md, "Optimise").

`train_pool` reads a version's verdicts on the train split against the gold (the report's
per-target rows, `build_report` on `split=train`): every train target with gold and a verdict,
whether they agree, the target's text. Dev and test targets never enter it, so nothing built from
it — few-shot examples, rewrite requests — can show them.

- `choose_examples`: few-shot examples for the next version: the parent's train disagreements
  first, label-balanced (a round over the gold values, the rarest first), diverse by text
  (farthest-first on word sets from what is already chosen or shown), ties broken by the seed; never
  a target the parent already shows, nor a sample of a golden set (versions.py refuses those).
- `rewrite_batch`: the disagreements a rewrite request shows, chosen the same way, each with the
  experts' rationale (the gold's, gold.py) and the judge's verdict and reason.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from sqlmodel import Session, col, select

from calibrate import lookup
from calibrate.calibration import Options, build_report, human_gold
from calibrate.loop.disagreements import Disagreement, fill_texts
from calibrate.models import GoldenMember, Judge, Sample, Task, Verdict

WORD_RE = re.compile(r"\w+")


@dataclass
class TrainItem:
    """One train target with gold and a verdict of the parent."""

    target: str  # target key ("claim:42")
    sample: str  # the sample's id as imported
    position: int | None  # claim index or context rank (None: the answer or a pairwise sample)
    gold: str
    verdict: str | None
    agree: bool
    text: str = ""
    question: str = ""

    @property
    def ref(self) -> str:
        """Return the target as a few-shot reference: SAMPLE or SAMPLE:N (`prompt new --few-shot`)."""
        return self.sample if self.position is None else f"{self.sample}:{self.position}"


def train_pool(session: Session, dataset_name: str, task_name: str, judge_name: str, options: Options) -> list[TrainItem]:
    """Return the train targets the judge was scored on (gold and a verdict, its own few-shots left out), with texts."""
    opts = Options(**{**options.__dict__, "split": "train", "group_by": None, "bootstrap": 100})
    report = build_report(session, dataset_name, judge_name, options=opts, tasks=[task_name])
    rows = [r for r in report.rows.get(task_name, []) if r.agree is not None and r.gold is not None and not r.excluded]
    kind = "responses" if lookup.task(session, task_name).kind == "pairwise" else lookup.task(session, task_name).target
    found = [Disagreement(r.target, r.sample_id, r.claim if r.claim is not None else r.context, str(r.gold),
                          "" if r.judge is None else str(r.judge), r.humans, kind=kind) for r in rows]
    fill_texts(session, found)
    dataset = lookup.dataset(session, dataset_name)
    questions = dict(session.exec(select(Sample.external_id, Sample.question).where(Sample.dataset_id == dataset.id,
                                                                                   Sample.split == "train")).all())
    golden = set(session.exec(select(Sample.external_id).join(GoldenMember, GoldenMember.sample_id == Sample.id)
                              .where(Sample.dataset_id == dataset.id, col(GoldenMember.retired_in).is_(None))).all())
    return [TrainItem(d.target, d.sample, d.position, d.gold, d.judge or None, r.agree, d.text or questions.get(d.sample, ""),
                      questions.get(d.sample, ""))
            for d, r in zip(found, rows, strict=True) if d.sample in questions and d.sample not in golden]


def _words(text: str) -> frozenset[str]:
    return frozenset(word.lower() for word in WORD_RE.findall(text or ""))


def _distance(a: frozenset[str], b: frozenset[str]) -> float:
    """Return the Jaccard distance of two word sets (1: nothing shared)."""
    union = a | b
    return 1.0 - (len(a & b) / len(union)) if union else 0.0


def _diverse_balanced(items: list[TrainItem], k: int, shown: list[str], rng: random.Random) -> list[TrainItem]:
    """Return k items: a round over the gold values (rarest first), in each the one farthest from the texts chosen
    or `shown`, disagreements before agreements."""
    order = list(items)
    rng.shuffle(order)  # the seed breaks ties
    by_gold: dict[str, list[TrainItem]] = {}
    for item in order:
        by_gold.setdefault(item.gold, []).append(item)
    golds = sorted(by_gold, key=lambda g: (len(by_gold[g]), g))
    taken_words = [_words(text) for text in shown]
    chosen: list[TrainItem] = []
    while len(chosen) < k and any(by_gold.values()):
        for gold in golds:
            group = by_gold[gold]
            if not group or len(chosen) >= k:
                continue
            pick = max(group, key=lambda it: (not it.agree, min((_distance(_words(it.text), w) for w in taken_words), default=1.0)))
            group.remove(pick)
            chosen.append(pick)
            taken_words.append(_words(pick.text))
    return chosen


def choose_examples(pool: list[TrainItem], shown: set[str], shown_texts: list[str], *, k: int,
                    rng: random.Random) -> list[TrainItem]:
    """Return up to k new few-shot examples from the pool (targets in `shown` excluded): disagreements first,
    label-balanced, diverse by text."""
    fresh = [item for item in pool if item.target not in shown]
    disagreements = [item for item in fresh if not item.agree]
    chosen = _diverse_balanced(disagreements, k, shown_texts, rng)
    if len(chosen) < k:
        rest = [item for item in fresh if item.agree]
        chosen += _diverse_balanced(rest, k - len(chosen), shown_texts + [c.text for c in chosen], rng)
    return chosen


def rewrite_batch(session: Session, task: Task, judge: Judge, pool: list[TrainItem], *, size: int,
                  rng: random.Random) -> list[dict]:
    """Return the disagreements a rewrite request shows (label-balanced, diverse), each as the template sees it."""
    chosen = _diverse_balanced([item for item in pool if not item.agree], size, [], rng)
    reasons = dict(session.exec(select(Verdict.target_key, Verdict.reason).where(
        Verdict.judge_id == judge.id, Verdict.task_id == task.id, Verdict.sample_index == 0,
        Verdict.target_key.in_([item.target for item in chosen]))).all()) if chosen else {}
    out = []
    for item in chosen:
        _, rationale = human_gold(session, task, item.target)
        out.append({"sample_id": item.ref, "question": item.question, "text": item.text, "gold": item.gold,
                    "verdict": item.verdict or "", "rationale": rationale if isinstance(rationale, str) else "",
                    "reason": reasons.get(item.target, "") or ""})
    return out
