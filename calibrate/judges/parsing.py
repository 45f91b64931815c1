"""Read a verdict out of a judge's answer, tolerantly but without guessing.

Order: the whole answer as JSON; else JSON inside a ``` code fence; else the first JSON
object embedded in text. An object must carry the verdict under "verdict" (or "label",
"score", "rating"). Without JSON, a fallback reads "verdict: X" / "score: 4", or a lone
label (whole word) or a lone number in the text. The value is then validated by the task
(`canonical_value`). Anything else — an empty message, two different labels, a label the
task does not have, a number outside the scale, JSON nested deeper than `MAX_NESTING` levels —
is `unparsed`, with the raw text kept. Nothing in an answer makes parsing raise.

An extraction task (claim_extraction) reads `{"claims": ["…", …]}` instead (`parse_claims`):
the same JSON search, then a bare JSON list is accepted too; its value is the canonical claim
list (`task_values.canonical_claims`), and an empty list is `unparsed` with the error "empty: …".

Pairwise tasks (`order` given: the response ids as shown): the winner is read under "winner"
(or the keys above) and is a *position* — "1", "2", "Response 2", "first", "second" — mapped
back to the id of the response shown there, or "tie" when the task has it. An answer that names
a response id instead is accepted when it cannot be read as a position (a number from 1 to the
number of responses is always a position). Without JSON: "winner: 2", or one position word or
"Response N" alone in the text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from calibrate.models import TIE, Task
from calibrate.task_values import canonical_claims, canonical_value, is_extraction, is_rewrite
from calibrate.tasks import TaskError
from calibrate.text.json_values import MAX_NESTING, NestingTooDeep, check_nesting, load_json

VERDICT_KEYS = ("verdict", "label", "score", "rating")
WINNER_KEYS = ("winner", "verdict", "preferred", "better", "choice", "label")
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth")
POSITION_RE = re.compile(r"^\s*(?:(?:response|answer|output|assistant)\s*)?[#(\[]?\s*(\d{1,2})\s*[)\]]?\s*$", re.I)
WINNER_TEXT_RE = re.compile(r"\b(?:winner|verdict|better|preferred)\b\s*(?:is|[:=])\s*\**\s*\"?([^\"\n.,;*]{1,80})", re.I)
RESPONSE_WORD_RE = re.compile(r"\b(?:response|answer|output)\s*#?\s*(\d{1,2})\b", re.I)
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


def parse_verdict(task: Task, raw: str | None, order: tuple[str, ...] | list[str] | None = None) -> Parsed:
    """Return the verdict in `raw` for `task`, or an `unparsed` result saying why.

    `order`: a pairwise call's response ids in the order shown (positions are mapped to them).
    """
    text = (raw if isinstance(raw, str) else "").strip()
    if not text:
        return Parsed(None, "unparsed", error="empty answer")
    if is_extraction(task):
        return parse_claims(text)
    if is_rewrite(task):
        return parse_instructions(text)
    if task.kind == "pairwise":
        return _pairwise(task, text, list(order or []))
    try:
        obj = _find_object(text)
    except NestingTooDeep:
        return Parsed(None, "unparsed", error=f"JSON nested deeper than {MAX_NESTING} levels")
    if obj is not None:
        return _from_object(task, obj)
    return _from_text(task, text)


CLAIM_KEYS = ("claims", "statements")


def parse_claims(text: str) -> Parsed:
    """Return the claim list in an extraction's answer, or `unparsed` saying why (empty list: "empty: …")."""
    try:
        obj = _find_object(text)
    except NestingTooDeep:
        return Parsed(None, "unparsed", error=f"JSON nested deeper than {MAX_NESTING} levels")
    claims: object = None
    if obj is not None:
        key = next((key for key in CLAIM_KEYS if key in obj), None)
        if key is None:
            return Parsed(None, "unparsed", error=f"JSON without \"claims\" (keys: {', '.join(map(str, obj)) or 'none'})")
        claims = obj[key]
    else:
        try:
            claims = _whole_json(text, list)
        except NestingTooDeep:
            return Parsed(None, "unparsed", error=f"JSON nested deeper than {MAX_NESTING} levels")
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


MAX_INSTRUCTIONS = 100_000  # characters of rewritten instructions (render.MAX_TEMPLATE_CHARS)


def parse_instructions(text: str) -> Parsed:
    """Return the rewritten instructions in an instruction_rewrite answer (`{"instructions": "…"}`), or `unparsed`."""
    try:
        obj = _find_object(text)
    except NestingTooDeep:
        return Parsed(None, "unparsed", error=f"JSON nested deeper than {MAX_NESTING} levels")
    if obj is None:
        return Parsed(None, "unparsed", error='no JSON object with "instructions" in the answer')
    value = obj.get("instructions")
    if not isinstance(value, str) or not value.strip():
        return Parsed(None, "unparsed", error='no text under "instructions"')
    if len(value) > MAX_INSTRUCTIONS:
        return Parsed(None, "unparsed", error=f"instructions longer than {MAX_INSTRUCTIONS:,} characters")
    reason = obj.get("reason") if isinstance(obj.get("reason"), str) else ""
    return Parsed(value.replace("\r\n", "\n").strip("\n"), "ok", reason[:MAX_REASON])


def _whole_json(text: str, kind: type) -> Any:
    """Return the first JSON value of `kind` that is the whole answer or a whole ``` fenced block, else None."""
    for candidate in (text, *FENCE_RE.findall(text)):
        try:
            value = load_json(candidate.strip())
        except NestingTooDeep:
            raise
        except ValueError:
            continue
        if isinstance(value, kind):
            return value
    return None


def json_object(text: str) -> dict | None:
    """Return the JSON object in an answer (the whole text, a fenced block, or one embedded in prose), else None."""
    try:
        return _find_object(text)
    except NestingTooDeep:
        return None


def _find_object(text: str) -> dict | None:
    """Return the first JSON object in `text`, or None; NestingTooDeep if the JSON found nests too deeply."""
    value = _whole_json(text, dict)
    if value is not None:
        return value
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except RecursionError:
            raise NestingTooDeep(None) from None  # every later "{" is inside the same deep value
        except ValueError:
            continue
        if isinstance(value, dict):
            check_nesting(value)
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


def _pairwise(task: Task, text: str, order: list[str]) -> Parsed:
    """Read a pairwise answer: a position (mapped to the response shown there), tie, or an unambiguous response id."""
    if not order:
        return Parsed(None, "unparsed", error="no presentation order for a pairwise answer")
    obj = json_object(text)
    if obj is not None:
        reason = next((str(obj[key]) for key in REASON_KEYS if isinstance(obj.get(key), (str, int, float))), "")[:MAX_REASON]
        key = next((key for key in WINNER_KEYS if key in obj), None)
        if key is None:
            return Parsed(None, "unparsed", reason, f"JSON without a winner (keys: {', '.join(map(str, obj)) or 'none'})")
        value = obj[key]
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            return Parsed(None, "unparsed", reason, f"the winner must be a response number or tie, got {json.dumps(value)[:60]}")
        return _winner(task, str(value), order, reason)
    if len(text) <= 40:  # the whole answer is the winner: "1", "first", "Response 2", "tie", an id
        whole = _winner(task, text.rstrip(".!"), order, "")
        if whole.status == "ok":
            return whole
    keyed = WINNER_TEXT_RE.search(text)
    if keyed:
        found = _winner(task, keyed.group(1).strip(), order, "")
        if found.status == "ok":
            return found
    mentioned = {int(n) for n in RESPONSE_WORD_RE.findall(text)} | {ORDINALS.index(w.casefold()) + 1 for w in
                                                                     re.findall(r"\b(" + "|".join(ORDINALS) + r")\b", text, re.I)}
    mentioned = {n for n in mentioned if 1 <= n <= len(order)}
    tie = TIE in (task.labels or []) and re.search(r"\btie\b", text, re.I) is not None
    if len(mentioned) == 1 and not tie:
        return Parsed(order[mentioned.pop() - 1], "ok")
    if tie and not mentioned:
        return Parsed(TIE, "ok")
    if not mentioned and not tie:
        return Parsed(None, "unparsed", error="no JSON and no response named in the answer")
    return Parsed(None, "unparsed", error="no JSON and several responses (or a response and tie) named in the answer")


def _winner(task: Task, value: str, order: list[str], reason: str) -> Parsed:
    """Map a winner as written (a position, an ordinal, tie or a response id) to a response id or tie."""
    text = value.strip().strip("\"'").strip()
    folded = text.casefold()
    position = None
    match = POSITION_RE.match(text)
    if match:
        position = int(match.group(1))
    elif folded in ORDINALS or folded.removesuffix(" response") in ORDINALS:
        position = ORDINALS.index(folded.removesuffix(" response")) + 1
    if position is not None:
        if 1 <= position <= len(order):
            return Parsed(order[position - 1], "ok", reason)
        return Parsed(None, "unparsed", reason, f"response {position} was not shown (there are {len(order)})")
    if folded in (TIE, "draw", "equal", "neither", "both"):
        if TIE in (task.labels or []):
            return Parsed(TIE, "ok", reason)
        return Parsed(None, "unparsed", reason, f"the answer is a tie, and task {task.name} has no tie")
    named = [key for key in order if key.casefold() == folded]
    if len(named) == 1:
        return Parsed(named[0], "ok", reason)
    return Parsed(None, "unparsed", reason, f"the winner {text[:60]!r} is neither a shown response's number "
                                            f"(1–{len(order)}) nor one of its ids ({', '.join(order)})")


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
