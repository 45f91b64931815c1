"""The offline baseline judge: deterministic, no network, documented in docs/judges.md.

Every LLM judge should beat it; the demo and the tests run it. Per task:

- claim_support — lexical and numeric support. A claim that states nothing checkable
  (a question, courtesy, "see your doctor") is `not_applicable`. Otherwise it is
  `unsupported` when one of its numbers is absent from the sample's contexts (0,4 and 0.4
  are one number), when one of its names (a capitalised word inside the sentence, an
  acronym) is absent, or when fewer than `min_overlap` of its content words (stop words
  removed, accents folded, crudely stemmed to 5 letters) occur in the contexts; else
  `supported`.
- context_relevance — TF-IDF cosine similarity (character 3–5-grams within words, fitted
  on the run's questions and contexts) between the question and the passage; `relevant` at
  `relevance_threshold` or above.
- answer_quality — 1 + (scale − 1) × the share of the answer's checkable claims that the
  claim rule finds supported, rounded; an answer with no checkable claim gets the middle.
- claim_extraction — the sentence segmenter's claims (calibrate/text/sentences.py) as
  `{"claims": [...]}`: an offline stand-in, so the extraction flow runs without a model.
- pairwise tasks (any name) — content overlap: the response that shares the most content-word
  stems with the question and the contexts wins; equal overlap is a tie when the task has
  `tie`, else the response with more content words wins, then the one shown first. It reads
  the responses, not their places, so it names the same response in every presentation order
  unless that last rule decides. Its answer is a position ({"winner": "2"}), as an LLM's is.

Settings come from the version's parameters whose names start with `baseline.`
(`baseline.min_overlap`, `baseline.entities`, `baseline.numbers`, `baseline.relevance_threshold`);
HTTP backends never send those.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer

from calibrate.judges.errors import RunSetupError
from calibrate.models import Task
from calibrate.reasons import Reason
from calibrate.text.sentences import segment

TASKS = ("claim_support", "answer_quality", "context_relevance", "claim_extraction")
PREFIX = "baseline."

SPANISH_STOP_WORDS = frozenset("""
a al algo algunas algunos ante antes como con contra cual cuando de del desde donde durante e el ella ellas ellos
en entre era es esa esas ese eso esos esta estas este esto estos fue ha hasta hay la las le les lo los mas me mi
mucho muy nada ni no nos o os otra otro para pero poco por porque que quien se sea ser si sin sobre son su sus
tambien te tiene tienen toda todo todos tu un una uno unos usted y ya puede debe deben hacer cada suele bien
""".split())
STOP_WORDS = frozenset(ENGLISH_STOP_WORDS) | SPANISH_STOP_WORDS
NON_CLAIM_RE = re.compile(
    r"^\W*(espero que|ojal[aá]|gracias|un saludo|no dude|buen viaje|enhorabuena|[aá]nimo|si tiene (alguna )?dudas?|"
    r"consulte|hable con|pregunte|i hope|hope this|thank|feel free|good luck|don'?t worry|consult|talk to|ask your)",
    re.I,
)
NUMBER_RE = re.compile(r"(?<![\w§])\d+(?:[.,]\d+)?")
WORD_RE = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*", re.U)


@dataclass(frozen=True)
class Settings:
    min_overlap: float = 0.5
    entities: bool = True
    numbers: bool = True
    relevance_threshold: float = 0.12


def settings_from(params: dict[str, Any]) -> Settings:
    """Read the baseline's settings from a version's `baseline.*` parameters."""
    values = {key[len(PREFIX):]: value for key, value in params.items() if key.startswith(PREFIX)}
    known = set(Settings.__dataclass_fields__)
    unknown = set(values) - known
    if unknown:
        raise RunSetupError(Reason("baseline_unknown_params", listed=', '.join(PREFIX + k for k in sorted(unknown)),
                                   listed2=', '.join(PREFIX + k for k in sorted(known))))
    try:
        return Settings(
            min_overlap=float(values.get("min_overlap", Settings.min_overlap)),
            entities=bool(values.get("entities", Settings.entities)),
            numbers=bool(values.get("numbers", Settings.numbers)),
            relevance_threshold=float(values.get("relevance_threshold", Settings.relevance_threshold)),
        )
    except (TypeError, ValueError) as exc:
        raise RunSetupError(Reason("baseline_bad_param", exc=str(exc))) from exc


def fold(text: str) -> str:
    """Return text casefolded with accents removed ("Ácido" → "acido")."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def numbers_in(text: str) -> set[float]:
    """Return the numbers written in a text (decimal comma or point)."""
    return {float(m.group(0).replace(",", ".")) for m in NUMBER_RE.finditer(text)}


def stems(text: str) -> set[str]:
    """Return the content-word stems of a text (stop words out, accents folded, first 5 letters)."""
    return {word[:5] for word in (fold(w) for w in WORD_RE.findall(text)) if len(word) > 2 and word not in STOP_WORDS}


def names_in(text: str) -> set[str]:
    """Return the names in a text: capitalised words not opening a sentence, and acronyms."""
    names = set()
    words = list(re.finditer(r"[^\W\d_]+", text))
    for i, match in enumerate(words):
        word = match.group(0)
        before = text[:match.start()].rstrip()
        opens_sentence = i == 0 or before.endswith((".", "!", "?", ":", "¿", "¡", "\n", "(", '"', "«"))
        acronym = len(word) >= 2 and word.isupper()
        if acronym or (word[0].isupper() and not opens_sentence and fold(word) not in STOP_WORDS):
            names.add(fold(word))
    return names


class BaselineJudge:
    """Judge one task offline; `answer(item)` returns the JSON text an LLM judge would."""

    def __init__(self, task: Task, settings: Settings, corpus: list[str] | None = None) -> None:
        if task.name not in TASKS and task.kind != "pairwise":
            raise RunSetupError(Reason("baseline_task_unknown", tasks=', '.join(TASKS), task=task.name))
        self.task = task
        self.settings = settings
        self.vectorizer = None
        if task.name == "context_relevance":
            texts = [t for t in (corpus or []) if t.strip()] or ["empty"]
            self.vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), preprocessor=fold, sublinear_tf=True)
            self.vectorizer.fit(texts)

    def answer(self, item: dict[str, Any]) -> str:
        """Return {"verdict", "reason"} as JSON text for one item ({"claims"} for claim_extraction, {"winner", "reason"}
        for a pairwise task)."""
        if self.task.name == "claim_extraction":
            return json.dumps({"claims": [span.text for span in segment(item["answer"])]}, ensure_ascii=False)
        if self.task.kind == "pairwise":
            winner, reason = self.preference(item)
            return json.dumps({"winner": winner, "reason": reason}, ensure_ascii=False)
        if self.task.name == "claim_support":
            verdict, reason = self.claim(item["claim"]["text"], [c["text"] for c in item["contexts"]])
        elif self.task.name == "context_relevance":
            verdict, reason = self.relevance(item["question"], item["context"]["text"])
        else:
            verdict, reason = self.quality(item)
        return json.dumps({"verdict": verdict, "reason": reason}, ensure_ascii=False)

    def claim(self, claim: str, contexts: list[str], *, na: bool | None = None) -> tuple[str, str]:
        """Return (label, reason) for one claim against its sample's contexts."""
        if na is None:
            na = "not_applicable" in (self.task.labels or [])
        text = " ".join(contexts)
        claim_stems = stems(claim)
        if na and (claim.rstrip().endswith("?") or NON_CLAIM_RE.match(claim) or not claim_stems):
            return "not_applicable", "states nothing that can be checked against the contexts"
        if self.settings.numbers:
            missing = sorted(numbers_in(claim) - numbers_in(text))
            if missing:
                return "unsupported", f"the number {missing[0]:g} does not appear in the contexts"
        if self.settings.entities:
            context_words = {fold(w) for w in re.findall(r"[^\W\d_]+", text)}
            absent = sorted(names_in(claim) - context_words)
            if absent:
                return "unsupported", f"the name '{absent[0]}' does not appear in the contexts"
        if not claim_stems:
            return "supported", "no content words to check"
        overlap = len(claim_stems & stems(text)) / len(claim_stems)
        if overlap < self.settings.min_overlap:
            return "unsupported", f"only {overlap:.0%} of the claim's words appear in the contexts"
        return "supported", f"its numbers and names, and {overlap:.0%} of its words, appear in the contexts"

    def preference(self, item: dict[str, Any]) -> tuple[str, str]:
        """Return (position of the better response as shown, or "tie"; reason) by content overlap with question and contexts."""
        reference = stems(" ".join([item["question"], *(c["text"] for c in item["contexts"])]))
        scored = []
        for response in item["responses"]:
            own = stems(response["text"])
            scored.append((len(own & reference), len(own), response["position"]))
        best = max(scored, key=lambda s: s[0])
        leaders = [s for s in scored if s[0] == best[0]]
        if len(leaders) == 1:
            return str(best[2]), f"response {best[2]} shares {best[0]} content words with the question and contexts, the most"
        if "tie" in (self.task.labels or []):
            return "tie", f"responses {', '.join(str(s[2]) for s in leaders)} share {best[0]} content words each"
        longest = max(leaders, key=lambda s: (s[1], -s[2]))
        return str(longest[2]), f"equal overlap ({best[0]} words); response {longest[2]} has more content words or is shown first"

    def relevance(self, question: str, passage: str) -> tuple[str, str]:
        """Return (label, reason) from the TF-IDF cosine similarity of question and passage."""
        matrix = self.vectorizer.transform([question, passage])
        similarity = float((matrix[0] @ matrix[1].T).toarray()[0, 0])
        if similarity >= self.settings.relevance_threshold:
            return "relevant", f"TF-IDF similarity to the question {similarity:.2f} ≥ {self.settings.relevance_threshold:g}"
        return "not_relevant", f"TF-IDF similarity to the question {similarity:.2f} < {self.settings.relevance_threshold:g}"

    def quality(self, item: dict[str, Any]) -> tuple[int | float, str]:
        """Return (score, reason): the scale mapped from the share of supported claims."""
        low = self.task.scale_min if self.task.scale_min is not None else 1
        high = self.task.scale_max if self.task.scale_max is not None else 5
        contexts = [c["text"] for c in item["contexts"]]
        verdicts = [self.claim(c["text"], contexts, na=True)[0] for c in item["claims"]]
        checkable = [v for v in verdicts if v != "not_applicable"]
        if not checkable:
            return int(np.round((low + high) / 2)), "no checkable claim"
        share = sum(v == "supported" for v in checkable) / len(checkable)
        score = int(np.round(low + (high - low) * share))
        return score, f"{sum(v == 'supported' for v in checkable)} of {len(checkable)} claims supported by the contexts"
