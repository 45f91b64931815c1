"""The seam for what is judged (calibrate/judged.py, issue 33): the registry, and no branch on a kind's name elsewhere.

The runner, the watcher (and the jobs both make), the report, the workbench's item code and label posts,
few-shots, compare, the common targets, the Alt-Test, the live estimator, adjudication, the gold and the
tasks' checks decide what is judged by asking the registry: this walks their source for a comparison
with a task kind's or a target kind's name, a test of `.kind` / `.target` against a name, the
name lists of models.py, or the old predicates (is_extraction, is_metric…).

A line that is legitimately about a name (the user's `--target claim`, a built-in task's own definition,
a built-in task's derived metric) says so in a comment starting `# names:` with its reason; the walker
lets that line pass, and only that line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from calibrate import judged
from calibrate.judged import TARGET_KINDS, TASK_KINDS, TargetKind, TaskKind, judging, ordered_targets, target_kind
from calibrate.models import KINDS, TARGETS, Task

ROOT = Path(__file__).resolve().parent.parent / "calibrate"
# Whole modules, and (report.py) the functions that pick and fill a task's section.
WALKED = {
    "judges/runner.py": None,
    "judges/watch.py": None,
    "judges/jobs.py": None,
    "judges/items.py": None,
    "judges/versions.py": None,
    "calibration/sections.py": None,
    "calibration/report.py": None,
    "calibration/common.py": None,
    "calibration/alttest.py": None,
    "calibration/compare.py": None,
    "calibration/live.py": None,
    "annotation/items.py": None,
    "annotation/adjudication.py": None,
    "annotation/label_posts.py": None,
    "gold.py": None,
    "tasks.py": None,
}
HONOURED = "# names:"  # a line that is about a name on purpose, with the reason after it
NAMES = set(TARGET_KINDS) | set(TASK_KINDS) | set(KINDS) | set(TARGETS) | {"responses"}
NAME_LISTS = {"LABEL_KINDS", "KINDS", "TARGETS", "EXTRACTION", "REWRITE", "METRIC_TASKS"}
PREDICATES = {"is_extraction", "is_rewrite", "is_metric", "has_labels", "uses_claims"}


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for elt in node.elts for s in _strings(elt)]
    return []


def branches(tree: ast.AST, lines: list[str] | None = None) -> list[str]:
    """Return, one line each, the branches on a kind's or target's name in `tree` (`lines`: its source, whose lines
    marked HONOURED with a reason are let pass)."""
    found = []
    for node in ast.walk(tree):
        if lines is not None and hasattr(node, "lineno") and HONOURED in lines[node.lineno - 1] and \
                lines[node.lineno - 1].split(HONOURED, 1)[1].strip():
            continue
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = [s for side in sides for s in _strings(side) if s in NAMES]
            attrs = [side.attr for side in sides if isinstance(side, ast.Attribute) and side.attr in ("kind", "target", "name")
                     and ast.unparse(side.value).endswith("task")]  # a task's (a judge's kind is not a task's)
            literal = any(_strings(side) for side in sides)
            if named or (attrs and literal):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Name) and node.id in NAME_LISTS | PREDICATES:
            found.append(f"line {node.lineno}: {node.id}")
        elif isinstance(node, ast.alias) and (node.asname or node.name) in NAME_LISTS | PREDICATES:
            found.append(f"import {node.name}")
    return found


def test_the_checker_finds_a_branch_on_a_name():
    source = """
def f(task, cell):
    if task.kind == "pairwise" or cell.target in ("claim", "context") or is_metric(task) or task.name == "faithfulness":
        return task.kind in LABEL_KINDS
    return judging(task).kind.orders
"""
    found = branches(ast.parse(source))
    assert len(found) == 5 and any("LABEL_KINDS" in f for f in found) and any("is_metric" in f for f in found)
    assert branches(ast.parse("x = judging(task).kind.orders and target is kind and kind.step == step")) == []


def test_a_line_about_a_name_on_purpose_passes_only_with_its_reason():
    source = """
if task.name == "claim_support":  # names: this built-in task's gold gives faithfulness
    pass
if task.target == "claim":  # names:
    pass
if task.kind == "pairwise":
    pass
"""
    found = branches(ast.parse(source), source.splitlines())
    assert [f.split(":")[0] for f in found] == ["line 4", "line 6"]  # no reason given, and no comment at all


@pytest.mark.parametrize("path", sorted(WALKED))
def test_no_branch_on_a_kind_or_target_name(path):
    source = (ROOT / path).read_text()
    tree, lines = ast.parse(source), source.splitlines()
    functions = WALKED[path]
    if functions is not None:
        defs = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in functions]
        assert sorted(d.name for d in defs) == sorted(functions)  # the walked functions exist (a rename is seen)
        found = [f for d in defs for f in branches(d, lines)]
    else:
        found = branches(tree, lines)
    assert found == [], f"{path} branches on a kind's or target's name (ask calibrate/judged.py): {found}"


def test_every_kind_of_the_schema_is_registered():
    assert set(TARGET_KINDS) == set(TARGETS)
    assert set(KINDS) <= set(TASK_KINDS)
    assert [k.name for k in ordered_targets()] == ["claim", "sample", "context", "step"]  # the workbench's keyboard order


def test_an_unknown_kind_is_refused_at_registration():
    with pytest.raises(ValueError, match="models.TARGETS"):
        judged.register_target(TargetKind("paragraph", 99))
    with pytest.raises(ValueError, match="models.KINDS"):
        judged.register_task_kind(TaskKind("ranking"))


def test_what_each_kind_says():
    claim, sample, context, step = (TARGET_KINDS[n] for n in ("claim", "sample", "context", "step"))
    assert claim.attach(7) == {"claim_id": 7, "context_id": None, "step_id": None}
    assert context.attach(3) == {"claim_id": None, "context_id": 3, "step_id": None}
    assert step.attach(5) == {"claim_id": None, "context_id": None, "step_id": 5}
    assert sample.attach(None) == {"claim_id": None, "context_id": None, "step_id": None}
    assert (step.where(2), step.sequence, claim.sequence) == ("step 3", True, False)
    assert (claim.key(42), target_kind("context:9") is context, claim.within, sample.within) == ("claim:42", True, True, False)
    assert (claim.where(0), context.where(1), sample.where(None)) == ("claim 1", "context #2", "the answer")
    assert claim.fields(5, {"_claims": {5: {"index": 0, "text": "x"}}}) == {"claim": {"index": 0, "text": "x"}}
    assert sample.fields(None, {}) == {}
    assert {k.cluster for k in TARGET_KINDS.values()} == {"sample_id"}
    assert (TASK_KINDS["categorical"].alignment, TASK_KINDS["ordinal"].alignment, TASK_KINDS["extraction"].alignment) == \
        ("cohen_kappa", "spearman_rho", None)
    assert TASK_KINDS["ordinal"].tolerance == 0.5 and TASK_KINDS["continuous"].tolerance is None
    assert not TASK_KINDS["rewrite"].runs and TASK_KINDS["extraction"].extraction and TASK_KINDS["pairwise"].orders


def test_judging_joins_the_kinds_with_what_the_name_adds():
    faithfulness = judging(Task(name="faithfulness", target="sample", kind="continuous"))
    assert faithfulness.metric and faithfulness.reads_claims and faithfulness.needs_answer
    support = judging(Task(name="claim_support", target="claim", kind="categorical"))
    assert not support.metric and support.reads_claims and not support.needs_answer
    pairwise = judging(Task(name="preference", target="sample", kind="pairwise", labels=["a", "b"]))
    assert not pairwise.needs_answer and pairwise.where(None, shown=True) == "the responses"
    assert judging(Task(name="claim_extraction", target="sample", kind="extraction")).reads_claims
    steps = judging(Task(name="step_correctness", target="step", kind="categorical", labels=["correct", "incorrect"]))
    assert steps.target.within and not steps.needs_answer and steps.kind.section == "categorical"
