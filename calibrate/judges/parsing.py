"""Read a verdict out of a judge's answer, tolerantly but without guessing.

Order: the whole answer as JSON; else JSON inside a ``` code fence; else the first JSON
object embedded in text. An object must carry the verdict under "verdict" (or "label",
"score", "rating"). Without JSON, a fallback reads "verdict: X" / "score: 4", or a lone
label (whole word) or a lone number in the text. The value is then validated by the task
(`canonical_value`). Anything else — an empty message, two different labels, a label the
task does not have, a number outside the scale — is `unparsed`, with the raw text kept.

An extraction task (claim_extraction) reads `{"claims": ["…", …]}` instead (`parse_claims`):
the same JSON search, then a bare JSON list is accepted too; its value is the canonical claim
list (`tasks.canonical_claims`), and an empty list is `unparsed` with the error "empty: …".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from calibrate.models import Task
from calibrate.tasks import TaskError, canonical_claims, canonical_value, is_extraction

VERDICT_KEYS = ("verdict", "label", "score", "rating")
REASON_KEYS = ("reason", "rationale", "explanation", "justification")
MAX_REASON = 2000
FENCE_RE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
KEYED_RE = re.compile(r"\b(?:verdict|label|score|rating)\b\s*[:=]\s*\**\s*\"?([A-Za-z_][\w\- ]*?|-?\d+(?:[.,]\d+)?)\"?\s*(?:[.,;\n*/]|$)", re.I)
NUMBER_RE = re.compile(r"(?<![\w.])-?\d+(?:[.,]\d+)?(?!\w|[.,]\d)")


@dataclass(frozen=True)
class Parsed:
    value: str | None
    status: str  # ok | unparsed
    reason: str = ""
    error: str = ""


def parse_verdict(task: Task, raw: str | None) -> Parsed:
    """Return the verdict in `raw` for `task`, or an `unparsed` result saying why."""
    text = (raw or "").strip()
    if not text:
        return Parsed(None, "unparsed", error="empty answer")
    if is_extraction(task):
        return parse_claims(text)
    obj = json_object(text)
    if obj is not None:
        return _from_object(task, obj)
    return _from_text(task, text)


CLAIM_KEYS = ("claims", "statements")


def parse_claims(text: str) -> Parsed:
    """Return the claim list in an extraction's answer, or `unparsed` saying why (empty list: "empty: …")."""
    obj = json_object(text)
    claims: object = None
    if obj is not None:
        key = next((key for key in CLAIM_KEYS if key in obj), None)
        if key is None:
            return Parsed(None, "unparsed", error=f"JSON without \"claims\" (keys: {', '.join(map(str, obj)) or 'none'})")
        claims = obj[key]
    else:
        claims = _whole_json(text, list)
        if claims is None:
            return Parsed(None, "unparsed", error='no JSON object with "claims" in the answer')
    if isinstance(claims, list):
        # Some models answer [{"text": "…"}] or [{"claim": "…"}]: read the text, never guess further.
        claims = [next((item[k] for k in ("text", "claim", "statement") if isinstance(item.get(k), str)), item)
                  if isinstance(item, dict) else item for item in claims]
    try:
        value = canonical_claims(claims)
    except TaskError as exc:
        return Parsed(None, "unparsed", error=str(exc))
    n = len(json.loads(value))
    return Parsed(value, "ok", f"{n} claim{'s' * (n != 1)}")


def _whole_json(text: str, kind: type) -> Any:
    """Return the first JSON value of `kind` that is the whole answer or a whole ``` fenced block, else None."""
    for candidate in (text, *FENCE_RE.findall(text)):
        try:
            value = json.loads(candidate.strip())
        except ValueError:
            continue
        if isinstance(value, kind):
            return value
    return None


def json_object(text: str) -> dict | None:
    """Return the JSON object in an answer (the whole text, a fenced block, or one embedded in prose), else None."""
    value = _whole_json(text, dict)
    if value is not None:
        return value
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _from_object(task: Task, obj: dict[str, Any]) -> Parsed:
    reason = next((str(obj[key]) for key in REASON_KEYS if isinstance(obj.get(key), (str, int, float))), "")[:MAX_REASON]
    key = next((key for key in VERDICT_KEYS if key in obj), None)
    if key is None:
        return Parsed(None, "unparsed", reason, f"JSON without a verdict (keys: {', '.join(map(str, obj)) or 'none'})")
    value = obj[key]
    if isinstance(value, str) and task.kind != "categorical":
        value = value.strip()
    try:
        return Parsed(canonical_value(task, value), "ok", reason)
    except TaskError as exc:
        return Parsed(None, "unparsed", reason, str(exc))


def _from_text(task: Task, text: str) -> Parsed:
    keyed = KEYED_RE.search(text)
    if keyed:
        try:
            return Parsed(canonical_value(task, keyed.group(1).strip()), "ok")
        except TaskError:
            pass  # "Verdict: the claim is supported" — fall through to the label search
    if task.kind == "categorical":
        found = _labels_in(task, text)
        if None in found:
            return Parsed(None, "unparsed", error="no JSON and a negated label in the answer (\"not …\")")
        if len(found) == 1:
            return Parsed(found.pop(), "ok")
        if not found:
            return Parsed(None, "unparsed", error="no JSON and no label of the task in the answer")
        return Parsed(None, "unparsed", error=f"no JSON and several labels in the answer ({', '.join(sorted(found))})")
    numbers = NUMBER_RE.findall(text)
    if len(numbers) == 1:
        try:
            return Parsed(canonical_value(task, numbers[0]), "ok")
        except TaskError as exc:
            return Parsed(None, "unparsed", error=str(exc))
    if not numbers:
        return Parsed(None, "unparsed", error="no JSON and no number in the answer")
    return Parsed(None, "unparsed", error=f"no JSON and {len(numbers)} numbers in the answer")


def _labels_in(task: Task, text: str) -> set[str | None]:
    """Return the task's labels that occur as whole words (longest match first: "not relevant" ≠ "relevant").

    A label right after "not" or "no" that is not itself a spelling of a label ("not
    supported") adds None: reading it as its opposite label would be a guess.
    """
    spellings: list[tuple[str, str]] = []
    for label in task.labels or []:
        spellings.append((label, label))
        if "_" in label:
            spellings.append((label.replace("_", " "), label))
            spellings.append((label.replace("_", "-"), label))
    spellings.sort(key=lambda pair: len(pair[0]), reverse=True)
    pattern = re.compile(r"(?<![\w-])(" + "|".join(re.escape(s) for s, _ in spellings) + r")(?![\w-])", re.I)
    lookup = {s.casefold(): label for s, label in spellings}
    found: set[str | None] = set()
    for match in pattern.finditer(text):
        before = text[max(0, match.start() - 4):match.start()].casefold()
        found.add(None if before.endswith(("not ", "no ")) else lookup[match.group(1).casefold()])
    return found
