"""A judge whose accuracy depends on its prompt, served by the fake LLM server (tests and bench/bench_optimise.py).

    world = PromptWorld.make(n_train=24, n_dev=24, n_test=24, hard={"dosage", "timing"})
    world.write(tmp_path)                    # samples.jsonl and labels.jsonl (splits in each sample's metadata)
    server = FakeLLM().start(); server.responder = world

Each sample has one claim about one topic ("Claim about dosage: …") with a gold label two
experts agree on. A claim_support call is answered from the claim's gold:

- signal world: a claim of a *hard* topic is judged wrong (accuracy `hard_accuracy`) unless the
  system text holds a rule for the topic ("Rule for dosage") or an example of it (a few-shot
  "Claim about dosage: …"); other claims are judged right with `easy_accuracy`;
- null world (`null=True`): every claim is judged right with `null_accuracy`, whatever the prompt.

Every answer is a draw seeded by the whole request (system and item), so each prompt version
draws its own noise and a request asked again gets the same answer (as a cached LLM would).
An instruction-rewrite request (its system text asks for "instructions") is answered with the
current instructions plus one rule line per topic of the disagreements shown, inserted before the
reply-format line, constructs untouched; `break_fields=True` drops `{{ task.guidelines }}` instead
(a rewrite the optimiser must refuse).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

TOPICS = ("dosage", "timing", "allergy", "storage", "diet", "exercise")
LABELS = ("supported", "unsupported")


@dataclass
class PromptWorld:
    gold: dict[str, str]  # claim text → gold label
    topic: dict[str, str]  # claim text → topic
    split: dict[str, str]  # claim text → split
    hard: set[str]
    samples: list[dict] = field(default_factory=list)
    labels: list[dict] = field(default_factory=list)
    easy_accuracy: float = 1.0
    hard_accuracy: float = 0.0
    null: bool = False
    null_accuracy: float = 0.8
    seed: int = 0
    break_fields: bool = False
    rewrites: int = 0

    @classmethod
    def make(cls, *, n_train: int, n_dev: int, n_test: int, hard: set[str], topics: tuple[str, ...] = TOPICS[:4],
             seed: int = 0, **options) -> PromptWorld:
        rng = random.Random(seed)
        world = cls({}, {}, {}, set(hard), seed=seed, **options)
        i = 0
        for split, n in (("train", n_train), ("dev", n_dev), ("test", n_test)):
            for j in range(n):
                topic = topics[j % len(topics)]
                label = LABELS[(j // len(topics)) % 2] if rng.random() < 0.8 else rng.choice(LABELS)
                text = f"Claim about {topic}: item {i} says {rng.randint(1, 900)} units."
                sid = f"{split}-{i:04d}"
                world.gold[text], world.topic[text], world.split[text] = label, topic, split
                world.samples.append({"id": sid, "question": f"What about {topic} for case {i}?", "answer": text,
                                      "claims": [text], "contexts": [f"Passage {i} on {topic}."],
                                      "metadata": {"topic": topic, "split": split}})
                for annotator in ("ann1", "ann2"):
                    world.labels.append({"sample_id": sid, "annotator": annotator, "task": "claim_support", "claim": 0,
                                         "value": label, "rationale": f"the experts' rule for {topic} claims"})
                i += 1
        return world

    def write(self, folder: Path) -> tuple[Path, Path]:
        samples, labels = folder / "world-samples.jsonl", folder / "world-labels.jsonl"
        samples.write_text("".join(json.dumps(s) + "\n" for s in self.samples), encoding="utf-8")
        labels.write_text("".join(json.dumps(lab) + "\n" for lab in self.labels), encoding="utf-8")
        return samples, labels

    def texts(self, split: str) -> set[str]:
        return {text for text, s in self.split.items() if s == split}

    # ---- the server's side
    def __call__(self, body: dict) -> str | None:
        messages = body.get("messages") or []
        # The prompt: every message before the item (calibrate's system text; a DSPy program's demos are turns).
        system = "\n".join(m.get("content", "") for m in messages[:-1] if isinstance(m.get("content"), str))
        user = messages[-1].get("content", "") if messages else ""
        if not isinstance(user, str):
            return None
        if '"instructions"' in system:
            return self.rewrite(user)
        if "[[ ## " in system:  # a DSPy program (ChatAdapter): its claim field, its reply format
            return self.dspy_answer(system, user)
        found = re.search(r"Claim to check: (.*)", user)
        claim = found.group(1).strip() if found else None
        if claim not in self.gold:
            return None
        return json.dumps({"verdict": self.verdict(system, user, claim), "reason": f"judged the {self.topic[claim]} claim"})

    def verdict(self, system: str, user: str, claim: str) -> str:
        """Return the verdict the world's judge gives `claim` under the prompt `system`."""
        draw = random.Random(hashlib.sha256(f"{self.seed}|{system}|{user}".encode()).hexdigest()).random()
        topic = self.topic[claim]
        if self.null:
            accuracy = self.null_accuracy
        else:
            helped = f"Rule for {topic}" in system or f"about {topic}:" in system
            accuracy = self.hard_accuracy if topic in self.hard and not helped else self.easy_accuracy
        gold = self.gold[claim]
        return gold if draw < accuracy else next(lab for lab in LABELS if lab != gold)

    def dspy_answer(self, system: str, user: str) -> str | None:
        found = re.search(r"\[\[ ## claim ## \]\]\n(.*)", user)
        claim = found.group(1).strip() if found else None
        if claim not in self.gold:
            return None
        return f"[[ ## verdict ## ]]\n{self.verdict(system, user, claim)}\n\n[[ ## completed ## ]]"

    def rewrite(self, user: str) -> str:
        self.rewrites += 1
        found = re.search(r"<<<\n(.*)\n>>>", user, re.S)
        current = found.group(1) if found else ""
        topics = sorted({self.topic[t.strip()] for t in re.findall(r"Judged text: (.*)", user) if t.strip() in self.topic})
        rules = [f"Rule for {topic} claims: judge them as the experts do." for topic in topics if f"Rule for {topic}" not in current]
        lines = current.split("\n")
        at = next((i for i, line in enumerate(lines) if line.startswith("Reply with")), 0)
        new = "\n".join(lines[:at] + rules + ([""] if rules else []) + lines[at:])
        if self.break_fields:
            new = new.replace("{{ task.guidelines }}", "(the guidelines)")
        return json.dumps({"instructions": new})
