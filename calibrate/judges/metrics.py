"""Metric judges: the RAG metrics (faithfulness, answer relevancy, context precision, context
recall) run as prompt versions, one score in 0–1 per sample.

A metric version judges a sample in *steps*, one model call each, rendered from the version's
template with the step's field beside the sample's (`render.STEP_FIELDS`):

    faithfulness       one step per active claim of the answer        → supported | unsupported | not_applicable
    context_precision  one step per retrieved context, in rank order  → relevant | not_relevant
    context_recall     one step per statement of the ground truth     → attributed | not_attributed
    answer_relevancy   one step writing `n_questions` questions the answer answers
                       (+ one embeddings call: the question and the generated questions)

This module is the pure part: which steps a sample has (`steps_for`), why a sample has nothing
to measure (`skip_reason`), reading a step's answer (`read_step`, `read_questions`), the score
(`score_steps`, `relevancy`), and the offline baseline's step answers (`BaselineSteps`). The
runner (`calibrate.judges.metric_runs` on `calibrate.judges.runner`) makes the calls with its cache, retries, budgets and
concurrency and stores one verdict per sample.

Rules (docs/judges.md, "Metric judges"; formulas in docs/statistics.md §8):

- The denominator is the steps, not the answers that could be read: a step whose answer is
  unparsable counts as not supported / not relevant / not attributed (Es et al. 2024; the
  issue's rule), and the reason says how many steps were unparsed.
- faithfulness leaves out claims judged `not_applicable` (numerator and denominator), as the
  human side does with claims whose gold is `not_applicable`; an answer whose claims are all
  `not_applicable` has no faithfulness (the verdict is stored without a value, as unparsed).
- answer relevancy is 0 for an answer the model calls noncommittal (RAGAS); otherwise the mean
  cosine similarity of the question with the generated questions, clipped at 0 (the task's
  range is 0–1; embeddings of unrelated texts can have a slightly negative cosine).
- context_recall's reference leakage guard (`LeakageGuard`, the version parameter
  `leakage_guard: off | lexical | embedding`, default off): each ground-truth statement is first
  checked against the contexts offline; one without lexical (or TF-IDF embedding) support is
  `not_attributed` without asking the model, so the model's own knowledge of the reference
  cannot mark a fact the retrieval missed as retrieved. Statements that pass are asked as usual.

References
----------
.. [1] Es, S., James, J., Espinosa-Anke, L. and Schockaert, S. (2024). RAGAS: automated
   evaluation of retrieval augmented generation. *Proceedings of EACL 2024: System
   Demonstrations*, 150-158 (arXiv:2309.15217).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calibrate import stats
from calibrate.judges.baseline import BaselineJudge, Settings, numbers_in, stems
from calibrate.judges.embeddings import TfidfEmbedder, cosine_to
from calibrate.judges.errors import RunSetupError
from calibrate.judges.parsing import MAX_REASON, REASON_KEYS, json_object, parse_verdict
from calibrate.models import Task
from calibrate.reasons import Reason
from calibrate.task_values import format_number
from calibrate.tasks import METRIC_TASKS
from calibrate.text.sentences import segment

# The verdicts a step may give and the one that counts for the score.
STEP_LABELS: dict[str, tuple[str, ...]] = {
    "faithfulness": ("supported", "unsupported", "not_applicable"),
    "context_precision": ("relevant", "not_relevant"),
    "context_recall": ("attributed", "not_attributed"),
}
POSITIVE = {"faithfulness": "supported", "context_precision": "relevant", "context_recall": "attributed"}
EXCLUDED = {"faithfulness": "not_applicable"}
STEP_NOUN = {"faithfulness": "claim", "context_precision": "context", "context_recall": "statement"}
# Parameters that configure the metric, never sent to the model.
METRIC_PARAMS = ("n_questions", "embedding_model", "embedder", "leakage_guard", "leakage_threshold")
LEAKAGE_GUARDS = ("off", "lexical", "embedding")
# lexical: the share of the statement's terms (content-word stems and numbers) found in the contexts;
# embedding: the highest TF-IDF cosine of the statement with one context. Below it: not attributed, not asked.
LEAKAGE_THRESHOLDS = {"lexical": 0.5, "embedding": 0.1}
DEFAULT_N_QUESTIONS = 3
MAX_N_QUESTIONS = 20


def is_metric(task: Task) -> bool:
    """Return whether a task is one of the built-in metric tasks."""
    return task.name in METRIC_TASKS


def chat_params(params: dict[str, Any]) -> dict[str, Any]:
    """Return a version's parameters without the metric's own (what the chat call sends)."""
    return {k: v for k, v in params.items() if k not in METRIC_PARAMS}


def n_questions(params: dict[str, Any]) -> int:
    """Return the number of questions answer relevancy asks for (RunSetupError if not 1–20)."""
    value = params.get("n_questions", DEFAULT_N_QUESTIONS)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_N_QUESTIONS:
        raise RunSetupError(Reason("n_questions_range", max_n_questions=MAX_N_QUESTIONS, value=value))
    return value


def embedder_choice(params: dict[str, Any], backend: str) -> str:
    """Return "tfidf" or "http": how answer relevancy embeds (RunSetupError when an HTTP run names no model)."""
    choice = params.get("embedder", "http" if backend != "baseline" else "tfidf")
    if choice not in ("tfidf", "http"):
        raise RunSetupError(Reason("embedder_unknown", choice=choice))
    if backend == "baseline":
        return "tfidf"
    if choice == "http" and backend != "openai":
        raise RunSetupError(Reason("answer_relevancy_no_embeddings", backend=backend))
    if choice == "http" and not str(params.get("embedding_model") or "").strip():
        raise RunSetupError(Reason("answer_relevancy_needs_model"))
    return choice


@dataclass(frozen=True)
class LeakageGuard:
    """context_recall's offline pre-check of each statement against the contexts (see the module docstring)."""

    mode: str
    threshold: float
    embedder: TfidfEmbedder | None = None

    @classmethod
    def from_params(cls, metric: str, params: dict[str, Any], items: Sequence[dict[str, Any]] = ()) -> LeakageGuard | None:
        """Return the guard a version asks for (None: off); RunSetupError for a bad value or another metric."""
        mode = params.get("leakage_guard", "off")
        if mode not in LEAKAGE_GUARDS:
            raise RunSetupError(Reason("leakage_guard_unknown", leakage_guards=', '.join(LEAKAGE_GUARDS), mode=mode))
        if "leakage_threshold" in params and mode == "off":
            raise RunSetupError(Reason("leakage_threshold_needs_guard"))
        if mode == "off":
            return None
        if metric != "context_recall":
            raise RunSetupError(Reason("leakage_guard_wrong_metric", metric=metric))
        threshold = params.get("leakage_threshold", LEAKAGE_THRESHOLDS[mode])
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            raise RunSetupError(Reason("leakage_threshold_range", threshold=threshold))
        embedder = None
        if mode == "embedding":
            corpus = [item["ground_truth"] or "" for item in items] + [c["text"] for item in items for c in item["contexts"]]
            embedder = TfidfEmbedder(corpus)
        return cls(mode, float(threshold), embedder)

    def check(self, statement: str, contexts: Sequence[str]) -> str | None:
        """Return the reason a statement is not attributed without asking (None: ask the model)."""
        if self.mode == "lexical":
            terms = stems(statement) | {format_number(n) for n in numbers_in(statement)}
            if not terms:
                return None  # nothing lexical to check ("Sí."): the model decides
            text = " ".join(contexts)
            found = terms & (stems(text) | {format_number(n) for n in numbers_in(text)})
            share = len(found) / len(terms)
            if share >= self.threshold:
                return None
            return (f"leakage guard (lexical): {len(found)} of {len(terms)} terms of the statement in the contexts "
                    f"({share:.0%} < {self.threshold:.0%}): not attributed, the model was not asked")
        vectors = self.embedder.embed([statement, *contexts])
        best = float(np.max(cosine_to(vectors[0], vectors[1:]))) if len(contexts) and vectors.shape[1] else 0.0
        if best >= self.threshold:
            return None
        return (f"leakage guard (embedding): highest TF-IDF cosine with a context {best:.2f} < {self.threshold:g}: "
                "not attributed, the model was not asked")

    def decided(self, item: dict[str, Any], steps: Sequence[Step]) -> dict[int, str]:
        """Return step index → the answer the guard gives without a call, for the statements it refuses."""
        contexts = [c["text"] for c in item["contexts"]]
        out = {}
        for i, step in enumerate(steps):
            reason = self.check(step.fields["statement"]["text"], contexts)
            if reason is not None:
                out[i] = json.dumps({"verdict": "not_attributed", "reason": reason}, ensure_ascii=False)
        return out


def step_task(metric: str) -> Task:
    """Return the categorical task a step's answer is read against (never stored)."""
    return Task(name=f"{metric}_step", target="sample", kind="categorical", labels=list(STEP_LABELS[metric]))


# --------------------------------------------------------------------------- steps


def statements(ground_truth: str) -> list[dict[str, Any]]:
    """Return the statements of a ground truth: its claims by the claim segmenter (index, text)."""
    return [{"index": i, "text": span.text} for i, span in enumerate(segment(ground_truth or ""))]


def skip_reason(metric: str, item: dict[str, Any]) -> str | None:
    """Return why a sample has nothing to measure for the metric, or None when it has."""
    if metric == "faithfulness":
        if not item["claims"]:
            return "no claims"
        return None if item["contexts"] else "no contexts"
    if metric == "context_precision":
        if not item["contexts"]:
            return "no contexts"
        return None if item["question"].strip() else "no question"
    if metric == "context_recall":
        if not (item["ground_truth"] or "").strip() or not statements(item["ground_truth"]):
            return "no ground truth"
        return None if item["contexts"] else "no contexts"
    if not item["question"].strip():
        return "no question"
    return None if item["answer"].strip() else "no answer"


@dataclass(frozen=True)
class Step:
    """One call of a metric judge on a sample: its name and the field it adds to the template's."""

    name: str
    fields: dict[str, Any]


def steps_for(metric: str, item: dict[str, Any], params: dict[str, Any]) -> list[Step]:
    """Return the steps of one sample, in order (claim index, context rank, statement order)."""
    if metric == "faithfulness":
        return [Step(f"claim {c['index']}", {"claim": c}) for c in item["claims"]]
    if metric == "context_precision":
        return [Step(f"context {c['rank']}", {"context": c}) for c in item["contexts"]]
    if metric == "context_recall":
        return [Step(f"statement {s['index']}", {"statement": s}) for s in statements(item["ground_truth"])]
    return [Step("questions", {"n_questions": n_questions(params)})]


# --------------------------------------------------------------------------- reading answers


@dataclass
class StepResult:
    """A step's answer as read: its verdict (None: unparsable), reason and raw text."""

    name: str
    verdict: str | None
    reason: str = ""
    raw: str = ""
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        out = {"step": self.name, "verdict": self.verdict, "reason": self.reason}
        if self.error:
            out["unparsed"] = self.error
        return out


def read_step(metric: str, name: str, raw: str) -> StepResult:
    """Read a verdict step's answer (faithfulness, context_precision, context_recall)."""
    parsed = parse_verdict(step_task(metric), raw)
    return StepResult(name, parsed.value, parsed.reason, raw, parsed.error)


@dataclass
class Questions:
    """The question-generation step of answer relevancy, as read."""

    questions: list[str] = field(default_factory=list)
    noncommittal: bool = False
    reason: str = ""
    error: str = ""


def read_questions(raw: str) -> Questions:
    """Read `{"questions": [...], "noncommittal": 0|1}`; an answer without a usable question is unparsed."""
    obj = json_object((raw or "").strip())
    if obj is None:
        return Questions(error="no JSON object in the answer")
    reason = next((str(obj[key]) for key in REASON_KEYS if isinstance(obj.get(key), (str, int, float))), "")[:MAX_REASON]
    noncommittal = obj.get("noncommittal", 0)
    if noncommittal not in (0, 1, True, False):
        return Questions(reason=reason, error=f"noncommittal must be 0 or 1, got {str(noncommittal)[:40]!r}")
    questions = obj.get("questions")
    if not isinstance(questions, list):
        return Questions(reason=reason, error="JSON without a list of questions")
    texts = [q.strip() for q in questions if isinstance(q, str) and q.strip()]
    if not texts and not noncommittal:
        return Questions(reason=reason, error="no question in the answer")
    return Questions(texts, bool(noncommittal), reason)


# --------------------------------------------------------------------------- scores


@dataclass
class Score:
    """A sample's metric: its value (None: undefined), the readable reason, and the steps behind it."""

    value: float | None
    reason: str
    steps: list[dict[str, Any]]

    @property
    def text(self) -> str | None:
        """Return the value as stored (task_values.format_number), None when undefined."""
        return None if self.value is None else format_number(round(self.value, 6))

    def raw(self, metric: str) -> str:
        """Return the JSON kept as the verdict's raw text: the metric, the score and the steps behind it."""
        return json.dumps({"metric": metric, "score": self.value, "steps": self.steps}, ensure_ascii=False)


def score_steps(metric: str, results: Sequence[StepResult]) -> Score:
    """Return the score of a verdict metric from its steps (unparsed steps count against it).

    faithfulness = supported / claims not judged not_applicable; context_recall = attributed /
    statements; context_precision = (1/R) Σ_k precision@k · rel_k over the contexts in rank
    order (`stats.context_precision`), an unparsed verdict counting as not relevant.
    """
    positive, excluded, noun = POSITIVE[metric], EXCLUDED.get(metric), STEP_NOUN[metric]
    counted = [r for r in results if excluded is None or r.verdict != excluded]
    hits = [r.verdict == positive for r in counted]
    unparsed = sum(r.verdict is None for r in results)
    note = f"; {unparsed} unparsed step{'s' * (unparsed != 1)} counted as not {positive}" if unparsed else ""
    steps = [r.as_dict() for r in results]
    if metric == "context_precision":
        value = float(stats.context_precision(np.asarray([hits], dtype=float))[0])
        relevant = sum(hits)
        return Score(value, f"{relevant} of {len(results)} contexts relevant{note}", steps)
    if not counted:
        return Score(None, f"every {noun} was judged {excluded}: nothing to measure", steps)
    value = float(stats.faithfulness([sum(hits)], [len(counted)])[0])
    verb = "supported" if metric == "faithfulness" else "attributed to the contexts"
    left_out = len(results) - len(counted)
    out = f"; {left_out} {noun}{'s' * (left_out != 1)} {excluded} left out" if left_out else ""
    return Score(value, f"{sum(hits)} of {len(counted)} {noun}s {verb}{out}{note}", steps)


def relevancy(question_vector: np.ndarray, question_vectors: np.ndarray, questions: Questions) -> Score:
    """Return answer relevancy: 0 if noncommittal, else the mean cosine of the question with the generated ones (≥ 0)."""
    steps = [{"step": "questions", "questions": questions.questions, "noncommittal": int(questions.noncommittal),
              "reason": questions.reason}]
    if questions.noncommittal:
        return Score(0.0, "the answer is noncommittal: relevancy 0", steps)
    cosines = cosine_to(question_vector, question_vectors) if question_vectors.shape[1] else np.zeros(len(questions.questions))
    steps[0]["cosines"] = [round(float(c), 6) for c in cosines]
    value = max(0.0, float(np.mean(cosines)))
    return Score(value, f"mean cosine similarity {value:.3f} of the question with {len(cosines)} generated questions", steps)


def unparsed_questions(questions: Questions) -> Score:
    """Return the undefined score of an answer-relevancy sample whose question step could not be read."""
    return Score(None, f"the question-generation answer could not be read: {questions.error}",
                 [{"step": "questions", "unparsed": questions.error}])


# --------------------------------------------------------------------------- offline baseline


class BaselineSteps:
    """The offline baseline's answers to metric steps, in the JSON an LLM judge would give.

    faithfulness: the baseline claim-support rule per claim; context_precision: the baseline
    TF-IDF relevance of each context to the question; context_recall: the claim-support rule
    on each ground-truth statement (supported → attributed); answer_relevancy: the answer's
    first `n_questions` sentences stand in for generated questions (a lexical proxy, never
    noncommittal) and are embedded with `TfidfEmbedder` fitted on the run's corpus.
    """

    def __init__(self, metric: str, settings: Settings, corpus: list[str]) -> None:
        self.metric = metric
        # The baseline judges its built-in tasks; the steps have the same labels (recall maps them).
        self.claims = BaselineJudge(Task(name="claim_support", target="claim", kind="categorical",
                                         labels=list(STEP_LABELS["faithfulness"])), settings)
        self.relevance = None
        if metric == "context_precision":
            self.relevance = BaselineJudge(Task(name="context_relevance", target="context", kind="categorical",
                                                labels=list(STEP_LABELS["context_precision"])), settings, corpus=corpus)

    def answer(self, item: dict[str, Any], step: Step) -> str:
        """Return the JSON answer of one step."""
        contexts = [c["text"] for c in item["contexts"]]
        if self.metric == "faithfulness":
            verdict, reason = self.claims.claim(step.fields["claim"]["text"], contexts, na=True)
        elif self.metric == "context_precision":
            verdict, reason = self.relevance.relevance(item["question"], step.fields["context"]["text"])
        elif self.metric == "context_recall":
            label, reason = self.claims.claim(step.fields["statement"]["text"], contexts, na=False)
            verdict = "attributed" if label == "supported" else "not_attributed"
        else:
            sentences = [span.text for span in segment(item["answer"])][: step.fields["n_questions"]]
            return json.dumps({"questions": sentences, "noncommittal": 0,
                               "reason": "baseline: the answer's sentences stand in for generated questions"},
                              ensure_ascii=False)
        return json.dumps({"verdict": verdict, "reason": reason}, ensure_ascii=False)


def tfidf_embedder(items: Sequence[dict[str, Any]]) -> TfidfEmbedder:
    """Return the offline embedder fitted on the run's questions, answers and contexts."""
    corpus = [item["question"] for item in items] + [item["answer"] for item in items]
    corpus += [c["text"] for item in items for c in item["contexts"]]
    return TfidfEmbedder(corpus)


__all__ = ["BaselineSteps", "LEAKAGE_GUARDS", "LEAKAGE_THRESHOLDS", "METRIC_PARAMS", "LeakageGuard",
           "Questions", "Score", "Step", "StepResult", "chat_params", "embedder_choice",
           "is_metric", "n_questions", "read_questions", "read_step", "relevancy", "score_steps", "skip_reason",
           "statements", "steps_for", "tfidf_embedder", "unparsed_questions"]
