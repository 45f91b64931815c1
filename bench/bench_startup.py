"""Benchmark: how long every `calibrate` command takes to start.

Each command runs as a fresh subprocess (`python -m calibrate …`, what the console script
does), `--repeat` times, interleaved with the baseline `python -c "import flask, sqlalchemy,
click"` so that both see the same machine load; the table gives the median and the minimum
wall time and the ratio of the medians to the baseline's. Measured: `calibrate --help`,
`calibrate task list` (the target: both within 2× the baseline), every command's and
group's `--help`, a real `report` and `gate` on the demo database (loaded once), what
`calibrate report` imports before it computes (`report --help`, `import calibrate.calibration.report`),
and `report-empty`: `calibrate report --format json` on an empty database (one dataset of one sample,
nothing labelled: the report reads no row, so its time is its start-up), beside a second baseline,
what the report's floor script imports (`import numpy, pandas, sqlite3`, bench/report_floor.py).
Besides the wall time, each run's CPU time (user + system of the child): under load the steadier figure.

    .venv/bin/python bench/bench_startup.py [--repeat 7] [--tree DIR] [--only help,task-list,report-import,report-empty]
        [--large /tmp/large.sqlite [--large-samples 100000]]

`--tree DIR`: measure another checkout (for example HEAD exported with `git archive`), put
first on PYTHONPATH. `--large FILE`: also `calibrate task list` on a large database (issue 34:
every command's start grew with the file), built there first when it does not exist:
bench_report's seeded data, `--large-samples` samples of 10 claims (default 10^5: 10^6 claims,
2·10^6 labels, 10^6 verdicts, about 0.5 GB). Keep it outside the repository (/tmp). `--trees A,B`:
measure several checkouts in one session, their runs interleaved (same load for all), one table
each. The figures go to standard output as Markdown tables.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ("baseline", [sys.executable, "-c", "import flask, sqlalchemy, click"])
FLOOR_IMPORTS = '`python -c "import numpy, pandas, sqlite3"` (the report floor\'s imports)'
ONE_SAMPLE = '{"id": "s1", "question": "q?", "answer": "One answer.", "contexts": []}\n'


def command_paths(tree: Path, cwd: str) -> list[list[str]]:
    """Return every command and group of the CLI as argument lists (["task", "list"], …), from `--help` output."""
    out: list[list[str]] = []

    def walk(path: list[str]) -> None:
        text = subprocess.run([sys.executable, "-m", "calibrate", *path, "--help"], capture_output=True, text=True,
                              env=env_for(tree), cwd=cwd, check=True).stdout
        if "Commands:" not in text:
            return
        for line in text.split("Commands:", 1)[1].splitlines():
            words = line.split()
            if words and line.startswith("  ") and not line.startswith("    "):
                out.append([*path, words[0]])
                walk([*path, words[0]])

    walk([])
    return out


_COMPILED: set = set()


def env_for(tree: Path) -> dict[str, str]:
    """Return the environment of a run of `tree`: first on the path, and as an installed package runs, from its
    bytecode (compiled once here; PYTHONDONTWRITEBYTECODE, set on some machines, would compile ~70 modules from
    source in every run, a cost no baseline import pays)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    if tree not in _COMPILED:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(tree) / "calibrate")], check=True, env=env)
        _COMPILED.add(tree)
    env["PYTHONPATH"] = str(tree) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("CALIBRATE_DATABASE_URL", None)
    return env


def timed(argv: list[str], env: dict[str, str], cwd: str, expect: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """Return the run's wall time and its CPU time (user + system of the child, from the children's rusage)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env, cwd=cwd)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in expect:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def build_large(path: Path, samples: int) -> None:
    """Build the large database with bench_report's seeded bulk SQL (10 claims a sample, two annotators and a judge)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_report import build_db

    print(f"building {path} ({samples * 10:,} claims)…", file=sys.stderr, flush=True)
    build_db(path, samples, 10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--tree", type=Path, default=ROOT, help="checkout to measure (default: this one)")
    parser.add_argument("--trees", help="comma-separated checkouts measured in one interleaved session (instead of --tree)")
    parser.add_argument("--only", help="comma-separated subset: help, task-list, commands, report, report-import, report-empty")
    parser.add_argument("--large", type=Path, help="also `task list` on this large SQLite file (built when missing)")
    parser.add_argument("--large-samples", type=int, default=100_000, help="samples of the large database (10 claims each)")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else {"help", "task-list", "commands", "report", "report-import", "report-empty"}
    if args.large is not None and not args.large.exists():
        build_large(args.large, args.large_samples)
    trees = [Path(tree).resolve() for tree in args.trees.split(",")] if args.trees else [args.tree.resolve()]
    python = [sys.executable, "-m", "calibrate"]

    # Every run starts in the temporary folder: `python -m` puts the working directory first on
    # sys.path, which would shadow --tree with a checkout in the current folder.
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp) / 'demo.sqlite'}"
        envs = {tree: {**env_for(tree), "CALIBRATE_INSTANCE": str(Path(tmp) / "instance")} for tree in trees}
        subprocess.run([*python, "demo", "--no-serve", "--db", db], capture_output=True, env=envs[trees[0]], cwd=tmp, check=True)
        empty = build_empty(python, envs[trees[0]], tmp) if "report-empty" in only else ""
        cases: list[tuple[str, list[str], tuple[int, ...]]] = []
        if "help" in only:
            cases.append(("`calibrate --help`", [*python, "--help"], (0,)))
        if "task-list" in only:
            cases.append(("`calibrate task list` (demo database)", [*python, "task", "list", "--db", db], (0,)))
            if args.large is not None:
                size = args.large.stat().st_size / 1e6
                cases.append((f"`calibrate task list` (large database, {size:,.0f} MB)",
                              [*python, "task", "list", "--db", f"sqlite:///{args.large.resolve()}"], (0,)))
        if "report" in only:
            cases.append(("`calibrate report --dataset demo-prenatal --judge demo-claims@1` (json)",
                          [*python, "report", "--dataset", "demo-prenatal", "--judge", "demo-claims@1", "--db", db], (0,)))
            cases.append(("`calibrate gate --dataset demo-prenatal --judge demo-claims@1`",
                          [*python, "gate", "--dataset", "demo-prenatal", "--judge", "demo-claims@1", "--db", db], (0, 1)))
        if "report-import" in only:  # what `calibrate report` loads before it computes anything
            cases.append(("`calibrate report --help`", [*python, "report", "--help"], (0,)))
            cases.append(("`python -c \"import calibrate.calibration.report\"`",
                          [sys.executable, "-c", "import calibrate.calibration.report"], (0,)))
        if "report-empty" in only:
            cases.append((FLOOR_IMPORTS, [sys.executable, "-c", "import numpy, pandas, sqlite3"], (0,)))
            cases.append(("`calibrate report --dataset empty --format json` (empty database)",
                          [*python, "report", "--dataset", "empty", "--format", "json", "--db", empty], (0,)))
        if "commands" in only:
            for path in command_paths(trees[0], tmp):
                cases.append((f"`calibrate {' '.join(path)} --help`", [*python, *path, "--help"], (0,)))

        runs = [(BASELINE[0], BASELINE[1], (0,)), *cases]
        times: dict[Path, dict[str, list[tuple[float, float]]]] = {tree: {name: [] for name, _, _ in runs} for tree in trees}
        started_load = os.getloadavg()
        for _ in range(args.repeat):
            for name, argv, expect in runs:
                for tree in trees:
                    times[tree][name].append(timed(argv, envs[tree], tmp, expect))

    print_tables(times, args.repeat, started_load)


def build_empty(python: list[str], env: dict[str, str], tmp: str) -> str:
    """Return the URL of an empty database in `tmp`: migrated, one dataset `empty` of one sample, nothing labelled."""
    empty = f"sqlite:///{Path(tmp) / 'empty.sqlite'}"
    (Path(tmp) / "one.jsonl").write_text(ONE_SAMPLE)
    for step in (["init", "--db", empty], ["import", "samples", "one.jsonl", "--dataset", "empty", "--db", empty]):
        subprocess.run([*python, *step], capture_output=True, env=env, cwd=tmp, check=True)
    return empty


def print_tables(times: dict[Path, dict[str, list[tuple[float, float]]]], repeat: int, started_load: tuple[float, ...]) -> None:
    """Print the machine and its load, then one Markdown table a tree: wall and CPU medians, ratios to the baseline."""
    load = os.getloadavg()
    print(f"Machine: {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}, "
          f"load {started_load[0]:.2f} at the start, {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end; "
          f"{repeat} interleaved runs each")
    for tree in times:
        base = statistics.median(wall for wall, _ in times[tree][BASELINE[0]])
        base_cpu = statistics.median(cpu for _, cpu in times[tree][BASELINE[0]])
        print(f"\nTree {tree}:\n")
        print("| command | median | min | median / baseline | median CPU | CPU / baseline's |")
        print("|---|---|---|---|---|---|")
        for name, values in times[tree].items():
            label = '`python -c "import flask, sqlalchemy, click"` (baseline)' if name == BASELINE[0] else name
            walls, cpus = [wall for wall, _ in values], [cpu for _, cpu in values]
            median, cpu = statistics.median(walls), statistics.median(cpus)
            print(f"| {label} | {median * 1000:.0f} ms | {min(walls) * 1000:.0f} ms | {median / base:.2f}× "
                  f"| {cpu * 1000:.0f} ms | {cpu / base_cpu:.2f}× |")


if __name__ == "__main__":
    main()
