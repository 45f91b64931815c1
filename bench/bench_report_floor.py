"""Benchmark: `calibrate report --format json` at 10^5 and 10^6 claims against the floor (bench/report_floor.py).

The world (tests/report_world.py, seeded): samples of 10 claims, experts ann1 and ann2 and the judge on every
claim (a wrong label is the other one of supported / unsupported), no adjudications or stale labels — 3 rows
(2 labels, 1 verdict) a claim, written by bulk SQL into a database `calibrate init` migrated, cached under
bench/.cache/ (not committed; delete it to rebuild). Per size, in rounds, alternating: the floor, then the report
of each source tree given (A/B interleaved, so a change of the machine's load falls on all alike); each run is a
subprocess whose wall time, CPU time (user + system) and peak RSS (os.wait4's rusage) are taken; the table gives
medians (on a machine shared and loaded, the CPU ratio is the steadier one). The floor's κ
must equal the report's (1e-12) and its CI lie within Monte-Carlo error of the report's (another random stream).

    .venv/bin/python bench/bench_report_floor.py [--sizes 100000 1000000] [--rounds 3] [--tree NAME=PATH ...]

Each round also times the fixed costs: the floor's imports alone (numpy, pandas) and each tree's report start-up (the
same command on a dataset that does not exist: every import, the engine, the database check and the report module,
refused before a row is read). After the table, each wall time is split into start-up and work, with the bound the
start-up sets: the report's start-up plus the floor's own work, the least a report could take if its work were no
longer than the floor's (docs/report.md, "Speed").

`--tree main=/tmp/main` adds a `git archive` of another commit (its `calibrate` first on PYTHONPATH): before/after
in one run. Without --tree, this checkout only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from report_world import DATASET, JUDGE, fill_world

CACHE = ROOT / "bench" / ".cache"
CLAIMS_PER_SAMPLE = 10


def world(n_claims: int) -> Path:
    """Return the cached database of `n_claims` claims, building it first when missing."""
    path = CACHE / f"report-floor-{n_claims}.sqlite"
    if path.exists():
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    env = {**os.environ, "CALIBRATE_INSTANCE": str(CACHE)}
    subprocess.run([sys.executable, "-m", "calibrate", "init", "--db", f"sqlite:///{partial}"], check=True, env=env,
                   capture_output=True, cwd=ROOT)
    start = time.perf_counter()
    fill_world(partial, n_claims // CLAIMS_PER_SAMPLE, CLAIMS_PER_SAMPLE, seed=0, binary=True)
    print(f"built {n_claims:,} claims in {time.perf_counter() - start:.0f} s: {partial.stat().st_size / 2**20:.0f} MiB",
          file=sys.stderr)
    partial.rename(path)
    return path


def run_child(command: list[str], env: dict, cwd: Path, *, status_ok: int = 0) -> tuple[float, float, float, str]:
    """Run a command as a child this process waits for itself; return its wall seconds, CPU seconds (user + system: on a
    shared, loaded machine the steadier measure), its own peak RSS in MiB and its stdout. An exit status other than
    `status_ok` fails the run."""
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: stdout to a file, stderr kept for a failure
        out = os.open(f"/tmp/bench-floor-{os.getpid()}.out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, 1)
        os.chdir(cwd)
        os.execve(command[0], command, env)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - start
    path = Path(f"/tmp/bench-floor-{pid}.out")
    text = path.read_text()
    path.unlink()
    if os.waitstatus_to_exitcode(status) != status_ok:
        raise SystemExit(f"{' '.join(command[:4])} failed (status {status})")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, text


FLOOR_IMPORTS = "import json, sqlite3, sys\nimport numpy, pandas"  # what bench/report_floor.py imports
STARTUP_DATASET = "no-such-dataset"


def bound_lines(size: int, times: dict[str, list[tuple[float, float, float]]], trees: list[str]) -> list[str]:
    """Return lines giving each tree's wall time split into start-up and work, against the floor's imports and work (medians), and
    the bound start-up sets: a report whose work took no longer than the floor's own would still take its start-up
    plus the floor's work."""
    wall = {name: statistics.median(s for s, _, _ in measured) for name, measured in times.items()}
    floor, floor_work = wall["floor"], wall["floor"] - wall["floor imports"]
    lines = [f"- {size:,}: floor {floor:.2f} s = imports {wall['floor imports']:.2f} s + work {floor_work:.2f} s"]
    for name in trees:
        startup = wall[f"{name} start-up"]
        bound = startup + floor_work
        lines.append(f"- {size:,}: {name} {wall[name]:.2f} s = start-up {startup:.2f} s + work {wall[name] - startup:.2f} s; "
                     f"its start-up + the floor's work = {bound:.2f} s = {bound / floor:.2f}× the floor")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree", action="append", default=[], help="NAME=PATH of another source tree to time too")
    args = parser.parse_args()
    trees = [tuple(t.split("=", 1)) for t in args.tree] + [("this", str(ROOT))]
    print(f"machine: {os.cpu_count()} cores, load before {os.getloadavg()}, Python {sys.version.split()[0]}")
    print("| claims | run | wall (median) | runs | ratio to floor | CPU (median) | CPU ratio | peak RSS (median) | κ | CI |")
    print("| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | --- | --- |")
    bounds: list[str] = []
    for size in args.sizes:
        path = world(size)
        # As an installed package runs: its bytecode compiled once (a machine with PYTHONDONTWRITEBYTECODE would
        # otherwise compile ~70 of calibrate's modules from source in every run, 0.15 s the floor never pays).
        env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        env |= {"CALIBRATE_INSTANCE": str(CACHE), "PYTHONHASHSEED": "0"}
        for _name, tree in trees:
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(tree) / "calibrate")], check=True, env=env)
        runs = {"floor": [sys.executable, str(ROOT / "bench" / "report_floor.py"), str(path)]}
        for name, _tree in trees:
            runs[name] = [sys.executable, "-m", "calibrate", "report", "--db", f"sqlite:///{path}", "--dataset", DATASET,
                          "--judge", JUDGE, "--format", "json"]
        # The fixed costs, timed in the same rounds: the floor's imports alone, and each tree's report up to its first
        # read (every import, the engine, the database check, the report module; a dataset that does not exist is
        # refused before any row is read: exit 2). The work is what each takes beyond them.
        fixed = {"floor imports": [sys.executable, "-c", FLOOR_IMPORTS]}
        for name, _tree in trees:
            fixed[f"{name} start-up"] = [sys.executable, "-m", "calibrate", "report", "--db", f"sqlite:///{path}", "--dataset",
                                         STARTUP_DATASET, "--judge", JUDGE, "--format", "json"]
        times: dict[str, list[tuple[float, float, float]]] = {name: [] for name in [*runs, *fixed]}
        found: dict[str, dict] = {}
        for _ in range(args.rounds):
            for name, command in runs.items():
                tree = dict(trees).get(name, str(ROOT))
                seconds, cpu, mib, out = run_child(command, {**env, "PYTHONPATH": tree}, Path(tree))
                times[name].append((seconds, cpu, mib))
                print(f"  {size:,} {name}: {seconds:.1f} s wall, {cpu:.1f} s CPU, {mib:.0f} MiB", file=sys.stderr, flush=True)
                data = json.loads(out)
                found[name] = data if name == "floor" else data["tasks"]["claim_support"]["cohen_kappa"]
            for name, command in fixed.items():
                tree = dict(trees).get(name.removesuffix(" start-up"), str(ROOT))
                seconds, cpu, mib, _ = run_child(command, {**env, "PYTHONPATH": tree}, Path(tree),
                                                 status_ok=0 if name == "floor imports" else 2)
                times[name].append((seconds, cpu, mib))
        floor = statistics.median(s for s, _, _ in times["floor"])
        floor_cpu = statistics.median(c for _, c, _ in times["floor"])
        for name in runs:
            measured = times[name]
            wall, cpu = statistics.median(s for s, _, _ in measured), statistics.median(c for _, c, _ in measured)
            value = found[name]["kappa"] if name == "floor" else found[name]["value"]
            print(f"| {size:,} | {name} | {wall:.2f} s | {', '.join(f'{s:.1f}' for s, _, _ in measured)} | {wall / floor:.2f}× | "
                  f"{cpu:.2f} s | {cpu / floor_cpu:.2f}× | {statistics.median(m for _, _, m in measured):.0f} MiB | {value:.12f} | "
                  f"[{found[name]['ci'][0]:.5f}, {found[name]['ci'][1]:.5f}] |", flush=True)
        bounds += bound_lines(size, times, [name for name, _ in trees])
        for name in runs:
            if name != "floor":
                assert abs(found[name]["value"] - found["floor"]["kappa"]) < 1e-12, (name, found[name], found["floor"])
    print("\nStart-up and work (medians of wall time):", *bounds, sep="\n")
    print(f"load after {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
