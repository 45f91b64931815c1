"""Judge prompt templates: a sandboxed Jinja2 environment, the fields a template may use, the
check that runs when a version is saved, the built-in defaults, and rendering.

A version has two templates:

- ``system`` — the unchanging prefix: instructions, rubric, labels, few-shot examples. It may
  use only the version's fields (``task``, ``examples``), so it renders to the same text for
  every item: providers cache that prefix (Anthropic's ``cache_control``, OpenAI's automatic
  prefix cache).
- ``template`` — the item, sent last as the user message. It may use the item's fields too.

Fields (see docs/judges.md):

    task        name, description, kind, target, labels, scale_min, scale_max, guidelines
    examples    list of: question, answer, ground_truth, contexts, claims, sample_id,
                metadata, verdict, rationale, and claim or context (by the task's target)
    question, answer, ground_truth, sample_id, metadata
    contexts    list of: rank (0-based), text, doc_id
    claims      list of: index (0-based), text
    responses   list of: position (1-based, in the order shown), id, text, model — a pairwise
                item's responses in the presentation order of this call (empty for others);
                examples of a pairwise version also give `winner`: the position ("1", "2"…)
                of the experts' choice in the example's order, or "tie"
    claim       (claim tasks) index, text
    context     (context tasks) rank, text, doc_id

Metric tasks (faithfulness, answer_relevancy, context_precision, context_recall) render one
*step* per call, with the step's field beside the sample's (`STEP_FIELDS`): faithfulness
`claim`, context_precision `context`, context_recall `statement` (index, text: a sentence of
the ground truth), answer_relevancy `n_questions`.

A template that uses any other field is refused at save time with the field's name
(`check_template`), so a run never fails for it. Every render — the save-time trial render and
each item of a run — runs in the bounded sandbox of `calibrate.judges.sandbox` (time and size
limits: `Limits`); a render that fails at run time is that item's error (`RenderError`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import StrictUndefined, TemplateError, TemplateSyntaxError, nodes

from calibrate.judges import render_pool
from calibrate.judges.errors import PromptError, RenderError
from calibrate.judges.sandbox import DEFAULT_LIMITS, BoundedEnvironment, Limits, render
from calibrate.reasons import Reason, known

TEMPLATES = Path(__file__).resolve().parent / "templates"
BUILTIN_DEFAULTS = ("claim_support", "answer_quality", "context_relevance",
                    "faithfulness", "answer_relevancy", "context_precision", "context_recall", "claim_extraction",
                    "instruction_rewrite")
PAIRWISE_TEMPLATES = ("pairwise.system.j2", "pairwise.user.j2")  # the default of every pairwise task
# The built-in sample-level trajectory task(s) (issue 33): judged on every step, then the answer (trajectories.fit).
TRAJECTORY_TASKS = ("trajectory_success",)
TRAJECTORY_TEMPLATES = ("trajectory.system.j2", "trajectory.user.j2")
MAX_TEMPLATE_CHARS = 100_000


class _Any:
    """A field whose inner structure is not checked (metadata, loop variables of unknown lists)."""


ANY = _Any()
SCALAR = "scalar"
CONTEXT = {"rank": SCALAR, "text": SCALAR, "doc_id": SCALAR}
CLAIM = {"index": SCALAR, "text": SCALAR}
RESPONSE = {"position": SCALAR, "id": SCALAR, "text": SCALAR, "model": SCALAR}
TASK = {name: SCALAR for name in ("name", "description", "kind", "target", "labels", "scale_min", "scale_max", "guidelines")}
TASK["labels"] = ("list", SCALAR)
STATEMENT = {"index": SCALAR, "text": SCALAR}
TOOL = {"name": SCALAR, "arguments": ANY, "result": ANY}
STEP = {"index": SCALAR, "kind": SCALAR, "name": SCALAR, "status": SCALAR, "input": SCALAR, "output": SCALAR,
        "tool": TOOL, "turn": SCALAR, "parent": SCALAR, "text": SCALAR}
CUT = {"steps": SCALAR, "chars": SCALAR}
# What every item offers about the sample's trajectory (calibrate/trajectories.py; empty lists without steps).
TRAJECTORY_FIELDS: dict[str, Any] = {"steps": ("list", STEP), "steps_shown": ("list", STEP), "steps_cut": CUT}
# The fields a target kind's item adds (calibrate/judged.py registers the kinds; their template side is here, because
# the render worker checks templates without loading the database layer the registry stands on).
TARGET_FIELDS: dict[str, dict[str, Any]] = {
    "claim": {"claim": CLAIM},
    "context": {"context": CONTEXT},
    "step": {"step": STEP, "trajectory": ("list", STEP), "trajectory_cut": CUT},
}
# A target kind's own built-in templates (others: the generic pair, fitted to a claim or a context below).
TARGET_TEMPLATES: dict[str, tuple[str, str]] = {"step": ("step.system.j2", "step.user.j2")}
# The field each step of a metric task adds to the sample's (calibrate.judges.metrics).
STEP_FIELDS: dict[str, dict[str, Any]] = {
    "faithfulness": {"claim": CLAIM},
    "context_precision": {"context": CONTEXT},
    "context_recall": {"statement": STATEMENT},
    "answer_relevancy": {"n_questions": SCALAR},
}
# The instruction_rewrite task's item (calibrate/judges/rewrite.py): the judge's instructions and a batch of the train
# split's disagreements; its `task` is the task of the judge being rewritten.
DISAGREEMENT = {name: SCALAR for name in ("sample_id", "question", "text", "gold", "verdict", "rationale", "reason")}
REWRITE_FIELDS: dict[str, Any] = {"instructions": SCALAR, "disagreements": ("list", DISAGREEMENT)}
REWRITE_TASK = "instruction_rewrite"
JINJA_GLOBALS = frozenset({"range", "dict", "lipsum", "cycler", "joiner", "namespace", "loop", "true", "false", "none",
                           "True", "False", "None"})


def item_fields(target: str, task: str | None = None) -> dict[str, Any]:
    """Return the fields an item of a task with this target (and name, for metric steps) offers to templates."""
    if task == REWRITE_TASK:
        return dict(REWRITE_FIELDS)
    fields: dict[str, Any] = {
        "question": SCALAR, "answer": SCALAR, "ground_truth": SCALAR, "sample_id": SCALAR, "metadata": ANY,
        "contexts": ("list", CONTEXT), "claims": ("list", CLAIM), "responses": ("list", RESPONSE), **TRAJECTORY_FIELDS,
    }
    fields.update(TARGET_FIELDS.get(target, {}))
    fields.update(STEP_FIELDS.get(task or "", {}))
    return fields


def version_fields(target: str) -> dict[str, Any]:
    """Return the fields every item shares (allowed in the system text)."""
    example = dict(item_fields(target), verdict=SCALAR, rationale=SCALAR, winner=SCALAR)
    return {"task": TASK, "examples": ("list", example)}


@lru_cache(maxsize=1)
def environment() -> BoundedEnvironment:
    """Return the bounded, immutable Jinja2 sandbox judge templates run in (no autoescape: this is not HTML)."""
    return BoundedEnvironment(undefined=StrictUndefined, autoescape=False, trim_blocks=True, lstrip_blocks=True,
                              keep_trailing_newline=False)


# --------------------------------------------------------------------------- checking


def check_template(source: str, *, target: str, part: str, task: str | None = None, limits: Limits = DEFAULT_LIMITS) -> None:
    """Raise PromptError if `source` (part "template" or "system") does not parse, uses an unknown field or
    hits a limit of `limits` in its trial render.

    `task` names the task so a metric task's step fields (`STEP_FIELDS`) are known. The trial
    render may take up to `limits.seconds`: callers run it before they take the write lock.
    With `limits.isolated` (the default) the whole check runs in a render worker process
    (calibrate.judges.render_pool): a template that crashes or exhausts it is refused with the reason.
    """
    if len(source) > MAX_TEMPLATE_CHARS:
        raise PromptError(Reason("template_too_long", part=part, max_template_chars=MAX_TEMPLATE_CHARS))
    if not limits.isolated:
        check_in_process(source, target=target, part=part, task=task, limits=limits)
        return
    answer = _pooled({"op": "check", "source": source, "target": target, "part": part, "task": task}, limits, part, PromptError)
    if "error" in answer:
        raise PromptError(answered_refusal(answer))


def answered_refusal(answer: dict[str, Any]) -> Reason | str:
    """Return the refusal a render worker answered: its reason when it sent a known one (worded on the page in the
    reader's language), else its English line."""
    reason = answer.get("reason")
    if isinstance(reason, dict) and known(reason):
        return Reason(reason["code"], **{key: value for key, value in reason.items() if key != "code"})
    return str(answer["error"])


def check_in_process(source: str, *, target: str, part: str, task: str | None = None, limits: Limits = DEFAULT_LIMITS) -> None:
    """`check_template` in this process (what a render worker runs)."""
    if len(source) > MAX_TEMPLATE_CHARS:
        raise PromptError(Reason("template_too_long", part=part, max_template_chars=MAX_TEMPLATE_CHARS))
    env = environment()
    check_nesting(source, part)
    try:
        tree = env.parse(source)
    except TemplateSyntaxError as exc:
        raise PromptError(Reason("template_syntax", part=part, lineno=exc.lineno, message=exc.message)) from exc
    except RecursionError:
        raise PromptError(Reason("template_nested_parse", part=part)) from None
    allowed = dict(version_fields(target))
    if part == "template":
        allowed.update(item_fields(target, task))
    _Checker(part, target, allowed, task).visit(tree, dict(allowed))
    # A trial render catches what the walk cannot (a filter given the wrong type, sandbox refusals).
    context = sample_context(target, task=task) if part == "template" else sample_version_context(target)
    try:
        render(env.from_string(source), context, limits, part=part)
    except RenderError as exc:
        raise PromptError.carrying(exc) from None
    except TemplateError as exc:
        raise PromptError(Reason("template_refused", part=part, exc=str(exc))) from exc
    except Exception as exc:
        raise PromptError(Reason("template_fails", part=part, name=type(exc).__name__, exc=str(exc))) from exc


MAX_PARSE_DEPTH = 40  # brackets or blocks one inside another; Jinja's parser recurses ~15 frames per bracket
_OPEN = {"(": ")", "[": "]", "{": "}"}
_BLOCKS = frozenset({"for", "if", "macro", "call", "filter", "with", "block", "autoescape"})


def check_nesting(source: str, part: str) -> None:
    """Raise PromptError naming the line where brackets or blocks nest deeper than MAX_PARSE_DEPTH.

    Jinja's parser and compiler are recursive: 300 nested parentheses end in RecursionError, so
    the depth is counted on the tokens first and refused with the line. Lexing errors are left
    to the parser, which reports them.
    """
    depth = 0
    after_block_begin = False
    try:
        for lineno, kind, value in environment().lex(source):
            if kind == "operator" and value in _OPEN:
                depth += 1
            elif kind == "operator" and value in _OPEN.values():
                depth -= 1
            elif after_block_begin and kind == "name":
                if value in _BLOCKS:
                    depth += 1
                elif value.startswith("end") and value[3:] in _BLOCKS:
                    depth -= 1
            if kind != "whitespace":
                after_block_begin = kind == "block_begin"
            if depth > MAX_PARSE_DEPTH:
                raise PromptError(Reason("template_nested_depth", part=part, lineno=lineno, max_parse_depth=MAX_PARSE_DEPTH))
    except TemplateSyntaxError:
        return


class _Checker:
    """Walk a template's syntax tree and refuse names and attributes that are not fields."""

    def __init__(self, part: str, target: str, allowed: dict[str, Any], task: str | None = None) -> None:
        self.part = part
        self.target = target
        self.allowed = allowed
        self.task = task

    def fail(self, field: str, node: nodes.Node, detail: Reason | str = "") -> None:
        names = ", ".join(sorted(self.allowed))
        raise PromptError(Reason("template_unknown_field", part=self.part, lineno=node.lineno, field=field, detail=detail,
                                 names=names))

    def visit(self, node: nodes.Node, scope: dict[str, Any]) -> None:
        """Check a node and its children: the nodes that bind names (loops, macros, assignments, with) have their
        own step; a name, attribute or item is a field; any other node is walked through."""
        for kinds, step in self._steps:
            if isinstance(node, kinds):
                step(self, node, scope)
                return
        for child in node.iter_child_nodes():
            self.visit(child, scope)

    def _for(self, node: nodes.For, scope: dict[str, Any]) -> None:
        self.visit(node.iter, scope)
        inner = dict(scope, loop=ANY)
        self.bind(node.target, self.element(self.spec(node.iter, scope)), inner)
        if node.test is not None:
            self.visit(node.test, inner)
        for child in node.body:
            self.visit(child, inner)
        for child in node.else_:
            self.visit(child, scope)

    def _macro(self, node: nodes.Macro | nodes.CallBlock, scope: dict[str, Any]) -> None:
        inner = dict(scope, varargs=ANY, kwargs=ANY, caller=ANY)
        for arg in node.args:
            inner[arg.name] = ANY
        for default in node.defaults:
            self.visit(default, scope)
        if isinstance(node, nodes.CallBlock):
            self.visit(node.call, scope)
        if isinstance(node, nodes.Macro):
            scope[node.name] = ANY
        for child in node.body:
            self.visit(child, inner)

    def _assign(self, node: nodes.Assign, scope: dict[str, Any]) -> None:
        self.visit(node.node, scope)
        self.bind(node.target, ANY, scope)

    def _assign_block(self, node: nodes.AssignBlock, scope: dict[str, Any]) -> None:
        for child in node.body:
            self.visit(child, scope)
        self.bind(node.target, ANY, scope)

    def _with(self, node: nodes.With, scope: dict[str, Any]) -> None:
        inner = dict(scope)
        for target, value in zip(node.targets, node.values, strict=True):
            self.visit(value, scope)
            self.bind(target, ANY, inner)
        for child in node.body:
            self.visit(child, inner)

    def _field(self, node: nodes.Name | nodes.Getattr | nodes.Getitem, scope: dict[str, Any]) -> None:
        self.spec(node, scope)
        if isinstance(node, nodes.Getitem):
            self.visit(node.arg, scope)

    _steps: tuple[tuple[type | tuple[type, ...], Any], ...] = (
        (nodes.For, _for), ((nodes.Macro, nodes.CallBlock), _macro), (nodes.Assign, _assign),
        (nodes.AssignBlock, _assign_block), (nodes.With, _with), ((nodes.Name, nodes.Getattr, nodes.Getitem), _field),
    )

    def bind(self, target: nodes.Node, spec: Any, scope: dict[str, Any]) -> None:
        if isinstance(target, nodes.Name):
            scope[target.name] = spec
        elif isinstance(target, nodes.Tuple):
            for item in target.items:
                self.bind(item, ANY, scope)

    @staticmethod
    def element(spec: Any) -> Any:
        return spec[1] if isinstance(spec, tuple) and spec[0] == "list" else ANY

    def spec(self, node: nodes.Node, scope: dict[str, Any]) -> Any:
        """Return what a name or attribute chain refers to, failing on unknown fields."""
        if isinstance(node, nodes.Name):
            if node.name in scope:
                return scope[node.name]
            if node.name in JINJA_GLOBALS:
                return ANY
            if self.part == "system" and node.name in item_fields(self.target, self.task):
                raise PromptError(
                    Reason("system_item_field", lineno=node.lineno, node=node.name)
                )
            self.fail(node.name, node)
        if isinstance(node, nodes.Getattr):
            return self.member(node, self.spec(node.node, scope), node.attr)
        if isinstance(node, nodes.Getitem):
            parent = self.spec(node.node, scope)
            if isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
                return self.member(node, parent, node.arg.value)
            return self.element(parent)
        self.visit(node, scope)
        return ANY

    def member(self, node: nodes.Node, parent: Any, attr: str) -> Any:
        if isinstance(parent, dict):
            if attr not in parent:
                self.fail(_dotted(node), node, Reason("template_known_fields", known=", ".join(parent)))
            return parent[attr]
        if isinstance(parent, tuple) or parent == SCALAR:
            # Methods of lists and strings (items, upper…) go to the sandbox, which allows safe ones.
            return ANY
        return ANY


def _dotted(node: nodes.Node) -> str:
    if isinstance(node, nodes.Name):
        return node.name
    if isinstance(node, nodes.Getattr):
        return f"{_dotted(node.node)}.{node.attr}"
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        return f"{_dotted(node.node)}.{node.arg.value}"
    return "?"


def sample_version_context(target: str) -> dict[str, Any]:
    """Return version fields filled with placeholders (for trial renders)."""
    example = dict(sample_context(target, with_version=False), verdict="supported", rationale="…", winner="1")
    return {"task": {"name": "task", "description": "…", "kind": "categorical", "target": target,
                     "labels": ["a", "b"], "scale_min": 1, "scale_max": 5, "guidelines": "…"},
            "examples": [example]}


def sample_context(target: str, *, with_version: bool = True, task: str | None = None) -> dict[str, Any]:
    """Return item fields filled with placeholders (for trial renders)."""
    if task == REWRITE_TASK:
        item = {"instructions": "…", "disagreements": [{name: "…" for name in DISAGREEMENT}]}
        return {**item, **sample_version_context(target)} if with_version else item
    contexts = [{"rank": 0, "text": "…", "doc_id": "d"}]
    claims = [{"index": 0, "text": "…"}]
    responses = [{"position": 1, "id": "A", "text": "…", "model": ""}, {"position": 2, "id": "B", "text": "…", "model": ""}]
    step = {"index": 0, "kind": "tool", "name": "…", "status": "ok", "input": "…", "output": "…", "turn": None,
            "parent": None, "tool": {"name": "…", "arguments": {}, "result": "…"}, "text": "#1 tool …"}
    cut = {"steps": 0, "chars": 0}
    item: dict[str, Any] = {"question": "…", "answer": "…", "ground_truth": "…", "sample_id": "s",
                            "metadata": Metadata(), "contexts": contexts, "claims": claims, "responses": responses,
                            "steps": [step], "steps_shown": [step], "steps_cut": cut}
    placeholders = {"claim": claims[0], "context": contexts[0], "statement": {"index": 0, "text": "…"}, "n_questions": 3,
                    "step": step, "trajectory": [step], "trajectory_cut": cut}
    item.update({name: placeholders[name] for name in TARGET_FIELDS.get(target, {})})
    item.update({name: placeholders[name] for name in STEP_FIELDS.get(task or "", {})})
    if with_version:
        item.update(sample_version_context(target))
    return item


class Metadata(dict):
    """A sample's metadata: a missing key renders as an empty string instead of failing the run."""

    def __missing__(self, key: str) -> str:
        return ""

    def __getattr__(self, key: str) -> Any:
        return self[key]


# --------------------------------------------------------------------------- defaults


def default_templates(task_name: str, target: str, kind: str = "") -> tuple[str, str]:
    """Return the built-in (system, template) of a task; pairwise tasks get the pairwise pair, other custom tasks a generic one."""
    if kind == "pairwise":
        return _read(PAIRWISE_TEMPLATES[0]), _read(PAIRWISE_TEMPLATES[1])
    if task_name in BUILTIN_DEFAULTS:
        return _read(f"{task_name}.system.j2"), _read(f"{task_name}.user.j2")
    if task_name in TRAJECTORY_TASKS:  # a whole trajectory's judge: every step, then the answer
        return _read(TRAJECTORY_TEMPLATES[0]), _read(TRAJECTORY_TEMPLATES[1])
    own = TARGET_TEMPLATES.get(target)
    if own is not None:  # the target kind's own pair (a step: the trajectory up to it, then the step)
        return _read(own[0]), _read(own[1])
    user, system = _read("generic.user.j2"), _read("generic.system.j2")
    # An example shows what the judge is asked about: the claim, or the passage (the experts' label is on it).
    example = "Answer: {{ ex.answer }}\n"
    if target == "claim":
        user += "\n\nClaim to judge: {{ claim.text }}"
        system = system.replace(example, example + "Claim: {{ ex.claim.text }}\n")
    elif target == "context":
        user = "Question: {{ question }}\n\nPassage to judge: {{ context.text }}"
        system = system.replace(example, "Passage: {{ ex.context.text }}\n")
    return system, user


def _read(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8").rstrip("\n")


# --------------------------------------------------------------------------- rendering


@dataclass(frozen=True)
class Rendered:
    """The messages of one judge call: the shared prefix first, the item last."""

    system: str
    user: str


# A run stops (failed, nothing sent) when its first items all fail to render with one same error:
# the template is wrong, not the items, and a template that hits the time limit on every item
# would otherwise cost PROMPT_RENDER_SECONDS per item before the run could end.
FAIL_FAST_ITEMS = 10


def stop_if_the_template_fails(refused: list[Any], rendered: int) -> None:
    """Raise RenderError when the first FAIL_FAST_ITEMS renders of a run all failed with the same error.

    `refused`: the outcomes of the items that failed so far, in order (each with its `error`);
    `rendered`: how many items rendered.
    """
    if rendered == 0 and len(refused) == FAIL_FAST_ITEMS and len({o.error for o in refused}) == 1:
        raise RenderError(f"the first {FAIL_FAST_ITEMS} items all failed to render with the same error, so the run "
                          f"stopped before any call: {refused[0].error}; fix the template in a new version")


class Renderer:
    """Render one version's messages: the system text once, the template per item, each within `limits`.

    A render that fails raises RenderError: for the system text the run cannot go on, for an
    item only that item fails.
    """

    def __init__(self, system: str, template: str, version_context: dict[str, Any], limits: Limits = DEFAULT_LIMITS) -> None:
        self.version_context = version_context
        self.limits = limits
        self.template_source = template
        self.system = self._render(system, version_context, "system").strip() if system else ""

    def render(self, item: dict[str, Any]) -> Rendered:
        """Return the messages for one item (the version's fields stay visible to the template)."""
        return Rendered(self.system, self._render(self.template_source, {**self.version_context, **item}, "template").strip())

    def _render(self, source: str, context: dict[str, Any], part: str) -> str:
        if not self.limits.isolated:
            return render_in_process(source, context, self.limits, part)
        answer = _pooled({"op": "render", "source": source, "part": part, "context": context}, self.limits, part, RenderError)
        if "error" in answer:
            raise RenderError(answer["error"])
        return answer["text"]


@lru_cache(maxsize=16)
def compiled(source: str) -> Any:
    """Return the compiled template of `source` (a worker renders the same few templates thousands of times)."""
    return environment().from_string(source)


def render_in_process(source: str, context: dict[str, Any], limits: Limits, part: str) -> str:
    """Render `source` in this process within `limits` (what a render worker runs); RenderError if it fails."""
    try:
        template = compiled(source)
    except RecursionError:
        raise RenderError(f"{part} fails to render: nested too deeply to parse") from None
    except Exception as exc:
        raise RenderError(f"{part} fails to render: {type(exc).__name__}: {exc}") from exc
    try:
        return render(template, context, limits, part=part)
    except RenderError:
        raise
    except Exception as exc:  # any failure of a user template is the item's error, not the run's
        raise RenderError(f"{part} fails to render: {type(exc).__name__}: {exc}") from exc


def restore_context(context: dict[str, Any]) -> dict[str, Any]:
    """Give back the Metadata type of an item's (and its examples') metadata after a trip through JSON."""
    if isinstance(context.get("metadata"), dict):
        context["metadata"] = Metadata(context["metadata"])
    for example in context.get("examples") or ():
        if isinstance(example, dict) and isinstance(example.get("metadata"), dict):
            example["metadata"] = Metadata(example["metadata"])
    return context


def _pooled(message: dict[str, Any], limits: Limits, part: str, error: type[Exception]) -> dict[str, Any]:
    """Send a check or render to a worker process; raise `error` ("{part} refused: …") if the worker is lost."""
    message["limits"] = {"seconds": limits.seconds, "max_chars": limits.max_chars, "max_depth": limits.max_depth,
                         "memory_mb": limits.memory_mb}
    try:
        return render_pool.call(message, seconds=limits.seconds + render_pool.GRACE_SECONDS, workers=limits.workers,
                                wait=limits.wait)
    except render_pool.WorkerLost as exc:
        raise error(f"{part} refused: {exc}") from None
