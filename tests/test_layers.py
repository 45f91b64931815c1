"""The layers hold: low floors load no web or database layer, quick commands load no heavy library,
no import circles, no private helper imported across modules (docs/architecture.md, "Layers")."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from calibrate import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "calibrate"
HEAVY = ("scipy", "sklearn", "pandas", "alembic")
WEB_AND_DB = ("flask", "werkzeug", "sqlalchemy", "sqlmodel")


def _loaded_after(code: str, roots: tuple[str, ...]) -> list[str]:
    """Run `code` in a fresh interpreter; return which of `roots` it left in sys.modules."""
    probe = f"{code}\nimport sys\nprint('LOADED', *sorted({{m.split('.')[0] for m in sys.modules}} & {set(roots)!r}))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=PROJECT_ROOT, check=True)
    last = done.stdout.splitlines()[-1].split()
    assert last[0] == "LOADED", done.stdout + done.stderr
    return last[1:]


@pytest.mark.parametrize("module", ["calibrate", "calibrate.stats", "calibrate.errors", "calibrate.reasons", "calibrate.settings",
                                    "calibrate.bounds"])
def test_low_floors_load_no_web_or_database_layer(module):
    assert _loaded_after(f"import {module}", WEB_AND_DB) == []


def _cli(args: list[str]) -> str:
    return f"import sys\nfrom calibrate.cli import main\nsys.argv = ['calibrate', *{args!r}]\ntry:\n    main()\nexcept SystemExit:\n    pass"


def test_help_loads_no_heavy_library_and_no_flask():
    assert _loaded_after(_cli(["--help"]), (*HEAVY, "flask")) == []


def test_task_list_loads_no_heavy_library_and_no_flask(db_url):
    assert _loaded_after(_cli(["task", "list", "--db", db_url]), (*HEAVY, "flask")) == []


def test_the_help_lines_of_the_command_registry_are_the_commands_own():
    """`calibrate --help` lists commands from the registry without importing them: the lines must not drift."""
    import click

    from calibrate.cli import COMMANDS, load_command

    for name, (_, _, line) in COMMANDS.items():
        command = load_command(name)
        assert command.name == name
        assert click.Command(name, help=line).get_short_help_str(200) == command.get_short_help_str(200), name


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        if "migrations/versions" in path.as_posix():
            continue
        parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _top_level_imports(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """Return the calibrate modules a module imports when it is imported (not inside functions or TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for child in ast.walk(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                break
            if isinstance(child, ast.Import):
                found |= {a.name for a in child.names if a.name.startswith("calibrate")}
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - child.level + 1] + ([base] if base else []))
                if not base.startswith("calibrate"):
                    continue
                for alias in child.names:
                    found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return found & set(modules)


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected components of more than one node (Tarjan's algorithm)."""
    index, low, stack, on_stack, circles, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for name in sorted(graph):
        if name not in index:
            visit(name)
    return circles


def _module_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _top_level_imports(path, name, modules) - {name} for name, path in modules.items()}


def test_there_are_no_import_circles():
    """No module imports, directly or through others, a module that imports it back."""
    assert _circles(_module_graph()) == []


def _package(module: str) -> str:
    """Return the floor a module lives on: calibrate.X for a subpackage's modules or a top module."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Return the graph of packages (calibrate.X) that the module graph draws; `calibrate` itself is no floor."""
    packages: dict[str, set[str]] = {_package(name): set() for name in graph if name != "calibrate"}
    for name, imported in graph.items():
        if name != "calibrate":
            packages[_package(name)] |= {_package(other) for other in imported if other != "calibrate"} - {_package(name)}
    return packages


def test_the_packages_form_no_circle():
    """No package (calibration, judges, reports, …) imports, through any of its modules, one that imports it back."""
    assert _circles(package_graph(_module_graph())) == []


def test_the_package_check_sees_a_circle_of_packages():
    """The check above can fail: two packages whose modules import each other's other modules are a circle."""
    graph = {"calibrate.a.x": {"calibrate.b.y"}, "calibrate.b.z": {"calibrate.a.w"}, "calibrate.a.w": set(), "calibrate.b.y": set()}
    assert _circles(graph) == []
    assert _circles(package_graph(graph)) == [["calibrate.a", "calibrate.b"]]


def test_no_private_helper_is_imported_across_modules():
    offenders = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("calibrate"):
                # `_` alone is gettext's conventional name (calibrate.i18n), not a private helper
                offenders += [f"{name} takes {node.module}.{a.name}" for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__") and a.name != "_"]
    assert offenders == []


def test_no_module_is_over_800_lines_without_a_reason_at_its_top():
    long = []
    for name, path in _modules().items():
        lines = path.read_text().splitlines()
        if len(lines) > 800 and "Over 800 lines because" not in "\n".join(lines[:40]):
            long.append(f"{name}: {len(lines)} lines")
    assert long == []


def test_calibration_is_used_through_its_public_api():
    """Outside calibration/, modules import `from calibrate.calibration import …`, never one of its modules."""
    offenders = []
    for name, path in _modules().items():
        if name.startswith("calibrate.calibration"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in getattr(node, "names", [])] \
                if isinstance(node, ast.Import) else []
            offenders += [f"{name} imports {t}" for t in targets if t.startswith("calibrate.calibration.")]
    assert offenders == []
    from calibrate import calibration

    assert all(hasattr(calibration, n) for n in calibration.__all__)


def test_one_lazy_loading_mechanism():
    """Lazy names and modules come from calibrate/lazy.py: no other module builds a LazyLoader or its own PEP 562 hook."""
    own = []
    for name, path in _modules().items():
        if name == "calibrate.lazy":
            continue
        tree = ast.parse(path.read_text())
        own += [f"{name}: LazyLoader" for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "LazyLoader"]
        own += [f"{name}: def __getattr__" for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"]
    assert own == []
