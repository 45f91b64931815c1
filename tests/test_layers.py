"""The layers hold (docs/architecture.md, "Layers"): low floors load no web or database layer, quick commands load
no heavy library, every import edge points down the floors or stays on its floor, no package reaches into another's
private module, no import circles, no private helper imported across modules.

An edge is every way a module can come to use another: an import at module level, inside a function, under
`TYPE_CHECKING`, a lazy string (`lazy.module("calibrate.x")`, `importlib.import_module("calibrate.x")`) and a
package's `_API` table (name → module, lazy.api_getattr). The floors are data (`FLOORS`); the last tests plant
violations in a copy of the sources and show that each check fails on them.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
from report_world import fill_world

from calibrate import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "calibrate"
HEAVY = ("scipy", "sklearn", "pandas", "alembic")
WEB_AND_DB = ("flask", "werkzeug", "sqlalchemy", "sqlmodel")

# The floors of docs/architecture.md, from the bottom: a package (calibrate.X, a subpackage or a top module) may use
# packages of its own floor or below, never above. `calibrate` itself (the thin face: __version__, PROJECT_ROOT and a
# create_app that imports app.py on first call) stands outside the floors.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("stats", "errors", "reasons", "reason_templates", "bounds", "settings", "config", "lazy", "text", "i18n"),
    ("db", "models", "lookup", "migrations", "targets"),
    ("tasks", "task_values", "task_scopes", "datasets", "gold", "sample_time", "where", "ingest", "claimsets", "accounts",
     "logins", "judged", "trajectories"),
    ("annotation", "judges", "reports"),
    ("calibration",),
    ("loop",),
    ("demo",),
    ("views", "cli", "app", "server", "__main__"),
)
# Packages whose modules are private to them: every other package uses them through the package (its __init__'s API).
SEALED = ("calibrate.calibration",)


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


def test_task_list_maps_no_table_and_loads_no_orm(db_url):
    """Issue 34: mapping every SQLModel table (calibrate.models, with SQLModel, pydantic and the ORM) was most of
    `task list`'s start-up; it reads its two tables with SQLAlchemy Core (no SQLModel: no table was mapped)."""
    probe = _cli(["task", "list", "--db", db_url]) + "\nprint('ORM', 'sqlalchemy.orm' in sys.modules)"
    assert _loaded_after(probe, ("sqlmodel", "pydantic")) == []
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=PROJECT_ROOT, check=True)
    assert done.stdout.splitlines()[-1] == "ORM False" and "claim_support\tclaim\tcategorical" in done.stdout


def _modules_after(code: str, names: tuple[str, ...]) -> tuple[list[str], str]:
    """Run `code` in a fresh interpreter; return which of the modules `names` (full dotted names) it left in
    sys.modules, and its standard output."""
    probe = f"{code}\nimport sys\nprint('LOADED', *sorted(set(sys.modules) & {set(names)!r}))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=PROJECT_ROOT, check=True)
    last = done.stdout.splitlines()[-1].split()
    assert last[0] == "LOADED", done.stdout + done.stderr
    return last[1:], done.stdout


# What `calibrate report --format json` does not use, and once loaded before it read a row (issue 34): scipy.stats
# (~1.4 s; its statistics import SciPy where a figure needs it, docs/architecture.md), the HTML and Markdown
# renderers with Jinja, scikit-learn, the PostgreSQL dialect on SQLite.
NOT_FOR_A_JSON_REPORT = ("scipy.stats", "sklearn", "jinja2", "calibrate.reports.html_report", "calibrate.reports.md_report",
                         "sqlalchemy.dialects.postgresql")


def test_the_statistics_load_no_scipy_until_a_figure_needs_it():
    assert _loaded_after("import calibrate.stats", ("scipy", "sklearn")) == []
    loaded, _ = _modules_after("from calibrate import stats\nstats.spearman_rho([1, 2, 3, 4], [1, 3, 2, 4])", ("scipy.stats",))
    assert loaded == []  # Spearman's rho and its p-value without scipy.stats (bit for bit: tests/stats)
    loaded, _ = _modules_after("from calibrate import stats\nstats.kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4])", ("scipy.stats",))
    assert loaded == ["scipy.stats"]  # the probe sees a figure that needs it


def test_report_help_loads_neither_the_report_nor_its_renderers():
    loaded, _ = _modules_after(_cli(["report", "--help"]), ("pandas", "scipy", "calibrate.models", *NOT_FOR_A_JSON_REPORT))
    assert loaded == []


@pytest.fixture(scope="module")
def claim_world(tmp_path_factory, template_db) -> str:
    """A small claim task with two experts and a judge (tests/report_world.py): the report computes every block of a
    claim task, faithfulness's Spearman rho and the estimate block included."""
    path = tmp_path_factory.mktemp("claim_world") / "world.sqlite"
    shutil.copyfile(template_db, path)
    fill_world(path, 24, 4, seed=0, third=0.5)
    return f"sqlite:///{path}"


def _report(db: str, fmt: str) -> list[str]:
    return ["report", "--dataset", "synthetic", "--judge", "synthetic-judge", "--format", fmt, "--bootstrap", "100", "--db", db]


def test_a_json_report_loads_only_what_it_uses(claim_world):
    """Issue 34: `calibrate report --format json` paid ~3 s of imports before reading a row; what the JSON report
    does not use stays out (scipy.special stays in: the estimate block's t quantile), and reading rows builds no
    table's pydantic validator (calibrate/models.py, `Table`: defer_build)."""
    probe = _cli(_report(claim_world, "json")) + "\nfrom calibrate.models import Label, Sample\n" \
        "print('VALIDATORS', type(Label.__pydantic_validator__).__name__, type(Sample.__pydantic_validator__).__name__)"
    loaded, out = _modules_after(probe, (*NOT_FOR_A_JSON_REPORT, "scipy.special", "calibrate.models"))
    assert loaded == ["calibrate.models", "scipy.special"]
    assert "VALIDATORS MockValSer MockValSer" in out
    rho = json.loads(out[: out.rindex("VALIDATORS")])["rag"]["faithfulness"]["spearman_rho"]
    assert rho["status"] == "ok" and 0 < rho["p_value"] < 1  # the figure that used to load scipy.stats was computed


def test_an_html_report_loads_its_renderer(claim_world):
    """The other side of the JSON report's test: the HTML format loads its renderer and Jinja when it renders."""
    loaded, out = _modules_after(_cli(_report(claim_world, "html")), NOT_FOR_A_JSON_REPORT)
    assert loaded == ["calibrate.reports.html_report", "jinja2"] and "<html" in out


def test_the_help_lines_of_the_command_registry_are_the_commands_own():
    """`calibrate --help` lists commands from the registry without importing them: the lines must not drift."""
    import click

    from calibrate.cli import COMMANDS, load_command

    for name, (_, _, line) in COMMANDS.items():
        command = load_command(name)
        assert command.name == name
        assert click.Command(name, help=line).get_short_help_str(200) == command.get_short_help_str(200), name


# --------------------------------------------------------------------------- the edges


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        if "migrations/versions" in path.as_posix():
            continue
        parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _sources() -> dict[str, str]:
    """Return every module's source by its dotted name (a package by its own name: its __init__)."""
    return {name: path.read_text() for name, path in _modules().items()}


class Edge(NamedTuple):
    """One module using another: where, and how (module-level, function-level, TYPE_CHECKING, lazy string, _API table)."""

    source: str
    target: str
    line: int
    kind: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line} -> {self.target} ({self.kind})"


LAZY_CALLS = ("module", "import_module")  # lazy.module(...), importlib.import_module(...)


def _edge_of(node: ast.AST, name: str, package: str, kind: str, known: set[str]) -> list[Edge]:
    """Return the edges one AST node makes (none for most nodes)."""
    if isinstance(node, ast.Import):
        return [Edge(name, a.name, node.lineno, kind) for a in node.names if a.name.split(".")[0] == "calibrate"]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
        if base.split(".")[0] != "calibrate":
            return []
        return [Edge(name, f"{base}.{a.name}" if f"{base}.{a.name}" in known else base, node.lineno, kind) for a in node.names]
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str) and node.args[0].value.split(".")[0] == "calibrate":
        called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if called in LAZY_CALLS:
            return [Edge(name, node.args[0].value, node.lineno, "lazy string")]
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) \
            and any(isinstance(t, ast.Name) and t.id == "_API" for t in node.targets):
        return [Edge(name, v.value if "." in v.value else f"{name}.{v.value}", v.lineno, "_API table")
                for v in node.value.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return []


def edges(sources: dict[str, str]) -> list[Edge]:
    """Return every edge between calibrate's modules that `sources` (dotted name → source text) draw."""
    known = set(sources)
    packages = {name.rpartition(".")[0] for name in known}
    out: list[Edge] = []
    for name, text in sources.items():
        package = name if name in packages else name.rpartition(".")[0]

        def visit(node: ast.AST, kind: str, name: str = name, package: str = package) -> None:
            for child in ast.iter_child_nodes(node):
                inner = kind
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    inner = "TYPE_CHECKING"
                elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and kind == "module-level":
                    inner = "function-level"
                out.extend(_edge_of(child, name, package, inner, known))
                visit(child, inner)

        visit(ast.parse(text), "module-level")
    return out


def _package(module: str) -> str:
    """Return the package a module lives in: calibrate.X for a subpackage's modules or a top module."""
    return ".".join(module.split(".")[:2])


def _floor(package: str) -> int | None:
    short = package.removeprefix("calibrate.")
    return next((i for i, floor in enumerate(FLOORS) if short in floor), None)


# --------------------------------------------------------------------------- the checks (each returns what breaks it)


def upward(found: list[Edge]) -> list[str]:
    """Return the edges that point up the floors, and the packages on no floor."""
    out = []
    for edge in found:
        source, target = _package(edge.source), _package(edge.target)
        if "calibrate" in (source, target) or source == target:
            continue
        low, high = _floor(target), _floor(source)
        if low is None or high is None:
            out.append(f"{edge}: {source if high is None else target} is on no floor (add it to FLOORS)")
        elif low > high:
            out.append(f"{edge}: points up, from floor {high + 1} to floor {low + 1}")
    return out


def private_reaches(found: list[Edge]) -> list[str]:
    """Return the edges that reach across packages into a private module: a `_name` module, or one of a sealed package's."""
    out = []
    for edge in found:
        if _package(edge.source) == _package(edge.target):
            continue
        sealed = next((p for p in SEALED if edge.target.startswith(p + ".") and not edge.source.startswith(p + ".")
                       and edge.source != p), None)
        if sealed is not None:
            out.append(f"{edge}: {sealed}'s modules are its own: use `from {sealed} import …` (its API)")
        elif any(part.startswith("_") and not part.startswith("__") for part in edge.target.split(".")):
            out.append(f"{edge}: a private module of another package")
    return out


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected components of more than one node (Tarjan's algorithm)."""
    index, low, stack, on_stack, circles, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
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


def module_circles(found: list[Edge]) -> list[list[str]]:
    """Return the circles of module-level imports (what would fail or half-load at import time)."""
    graph: dict[str, set[str]] = {}
    for edge in found:
        if edge.kind == "module-level" and edge.source != edge.target:
            graph.setdefault(edge.source, set()).add(edge.target)
    return _circles(graph)


def package_graph(found: list[Edge]) -> dict[str, set[str]]:
    """Return the graph of packages (calibrate.X) that every kind of edge draws; `calibrate` itself is no floor."""
    graph: dict[str, set[str]] = {}
    for edge in found:
        source, target = _package(edge.source), _package(edge.target)
        if "calibrate" not in (source, target) and source != target:
            graph.setdefault(source, set()).add(target)
    return graph


# --------------------------------------------------------------------------- the rules, on the code as it is


def test_every_edge_points_down_the_floors():
    """No module uses, in any way, a package on a floor above its own (FLOORS, docs/architecture.md)."""
    assert upward(edges(_sources())) == []


def test_no_package_reaches_into_another_s_private_module():
    """Across packages only public modules are used: never a `_name` module, never a module of calibration (its API)."""
    assert private_reaches(edges(_sources())) == []
    from calibrate import calibration

    assert all(hasattr(calibration, n) for n in calibration.__all__)


def test_there_are_no_import_circles():
    """No module imports at module level, directly or through others, a module that imports it back."""
    assert module_circles(edges(_sources())) == []


def test_the_packages_form_no_circle():
    """No package (calibration, judges, reports, …) uses, through any of its modules and any kind of edge, one that uses it back."""
    assert _circles(package_graph(edges(_sources()))) == []


def test_every_floor_names_a_package_that_exists():
    """FLOORS is kept with the code: no package twice, none that is gone."""
    named = [p for floor in FLOORS for p in floor]
    assert len(named) == len(set(named))
    assert sorted(named) == sorted({_package(m).removeprefix("calibrate.") for m in _modules()} - {"calibrate"})


def test_the_edges_are_all_seen():
    """The reader sees each kind of edge the code has (a reader that saw none would pass anything); the code's
    TYPE_CHECKING imports (db.py, task_values.py: issue 34) point down, so an upward one is planted."""
    assert {edge.kind for edge in edges(_sources())} == {"module-level", "function-level", "lazy string", "_API table",
                                                          "TYPE_CHECKING"}
    sources = _sources()
    sources["calibrate.reports.summary"] += "\nif TYPE_CHECKING:\n    from calibrate.calibration import Report\n"
    [planted] = upward(edges(sources))
    assert planted.startswith("calibrate.reports.summary:") and "(TYPE_CHECKING): points up, from floor 4 to floor 5" in planted


# --------------------------------------------------------------------------- the checks fail on planted violations

PLANTED = {
    "reports imports calibration": ("calibrate.reports.summary", "from calibrate.calibration import build_report\n"),
    "a circle through a lazy string": ("calibrate.calibration.common",
                                       "from calibrate import lazy\ndashboard = lazy.module(\"calibrate.loop.dashboard\")\n"),
    "gold.py imports views in a function": ("calibrate.gold", "def _planted():\n    from calibrate.views import session\n"
                                                              "    return session\n"),
}


def _planted(which: str) -> list[Edge]:
    module, code = PLANTED[which]
    sources = _sources()
    sources[module] += "\n\n" + code
    return edges(sources)


@pytest.mark.parametrize("which", sorted(PLANTED))
def test_each_planted_violation_points_up(which):
    module, _ = PLANTED[which]
    found = upward(_planted(which))
    assert len(found) == 1 and found[0].startswith(f"{module}:") and "points up" in found[0]


def test_the_planted_lazy_string_closes_a_circle_of_packages():
    assert ["calibrate.calibration", "calibrate.loop"] in _circles(package_graph(_planted("a circle through a lazy string")))


def test_the_checks_see_a_private_module_and_a_module_circle():
    sources = _sources()
    sources["calibrate.views.production"] += "\nfrom calibrate.calibration.production import monitor\n"
    sources["calibrate.judges.parsing"] += "\nfrom calibrate.stats._common import to_list\n"
    reached = private_reaches(edges(sources))
    assert sorted(r.split(" ")[0] for r in reached) == [f"calibrate.judges.parsing:{sources['calibrate.judges.parsing'].count(chr(10))}",
                                                         f"calibrate.views.production:{sources['calibrate.views.production'].count(chr(10))}"]
    sources["calibrate.lazy"] += "\nimport calibrate.stats.result\n"
    sources["calibrate.stats.result"] += "\nimport calibrate.lazy\n"
    assert ["calibrate.lazy", "calibrate.stats.result"] in module_circles(edges(sources))


def test_the_package_check_sees_a_circle_of_packages():
    """Two packages whose modules import each other's other modules are a circle."""
    found = [Edge("calibrate.a.x", "calibrate.b.y", 1, "module-level"), Edge("calibrate.b.z", "calibrate.a.w", 1, "function-level")]
    assert module_circles(found) == []
    assert _circles(package_graph(found)) == [["calibrate.a", "calibrate.b"]]


# --------------------------------------------------------------------------- other rules of docs/architecture.md


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
