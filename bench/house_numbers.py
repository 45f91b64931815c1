"""The house's numbers of a source tree (issue 31): long functions, complex functions and large modules.

For each tree given (a checkout or a `git archive` of one), over calibrate/ without the Alembic revisions:

- functions of 80 lines or more, counted from `def` to the last line (the issue's count), and the
  functions over 80 lines less their docstring (what tests/test_lint.py holds them to);
- functions over complexity 15 (ruff's C901, run isolated from the tree's configuration);
- modules of 750 lines or more, and over 800.

    .venv/bin/python bench/house_numbers.py TREE [TREE ...]

Prints one Markdown table, a row per tree, then the long and complex functions of each.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_lint import complex_functions, function_lines  # the suite's own counts


def numbers(tree: Path) -> dict:
    """Return the tree's counts and the names behind them."""
    files = [p for p in (tree / "calibrate").rglob("*.py") if "migrations/versions" not in p.as_posix()]
    long80, over80 = {}, {}
    sizes = {}
    for path in files:
        text = path.read_text()
        name = path.relative_to(tree).as_posix()
        sizes[name] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                whole, body = node.end_lineno - node.lineno + 1, function_lines(node)
                if whole >= 80:
                    long80[f"{name}::{node.name}"] = whole
                if body > 80:
                    over80[f"{name}::{node.name}"] = body
    complex_ = {name: message.split("(")[-1].rstrip(")") for name, message in complex_functions(tree / "calibrate", tree).items()
                if "migrations/versions" not in name}
    return {"long80": long80, "over80": over80, "complex": complex_,
            "modules750": {k: v for k, v in sizes.items() if v >= 750}, "modules800": {k: v for k, v in sizes.items() if v > 800}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", type=Path, nargs="+")
    args = parser.parse_args()
    found = {tree: numbers(tree.resolve()) for tree in args.trees}
    print("| tree | functions ≥ 80 lines | over 80 less docstring | complexity > 15 | modules ≥ 750 lines | over 800 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for tree, n in found.items():
        print(f"| {tree} | {len(n['long80'])} | {len(n['over80'])} | {len(n['complex'])} | {len(n['modules750'])} | "
              f"{len(n['modules800'])} |")
    for tree, n in found.items():
        print(f"\n{tree}:")
        for key in ("long80", "complex", "modules750"):
            print(f"- {key}: " + (", ".join(f"{name} ({v})" for name, v in sorted(n[key].items())) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
