"""Benchmark: `calibrate export assignments` streams its rows; `calibrate export labels` (the baseline) holds them all.

One SQLite file per size: N samples, one assignment each (a third audit with π 0.25, a third triage, a third
without a stream, over four experts) and one current label per sample by its expert, so both commands write N
rows. Each command runs as a real subprocess writing to a file; its peak RSS is its own VmHWM. The assignments
export reads a few hundred samples at a time and writes as it goes, so its memory should stay flat from 10^4 to
10^5 rows while the labels export's grows with the file. Each figure is also taken on an empty dataset of the same
file (the commands' start-up: Python, SQLAlchemy, pandas), and the table gives what the rows add above it.

    .venv/bin/python bench/bench_export_assignments.py [--sizes 10000,100000] [--write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


EXPERTS = ("ana", "ben", "cleo", "dan")


def build(path: Path, n: int) -> None:
    """Create the database at `path` (`calibrate init`) with `n` samples, assignments and labels (sqlite3, executemany)."""
    env = {**os.environ, "CALIBRATE_INSTANCE": str(path.parent)}
    subprocess.run([sys.executable, "-m", "calibrate", "init", "--db", f"sqlite:///{path}"], check=True, env=env,
                   capture_output=True, cwd=ROOT)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    con = sqlite3.connect(path)
    task = con.execute("SELECT id FROM task WHERE name = 'answer_quality'").fetchone()[0]
    users = []
    for name in EXPERTS:
        users.append(con.execute("INSERT INTO user (username, display_name, role, active, created_at) "
                                 "VALUES (?, '', 'annotator', 1, ?)", (name, now)).lastrowid)
    datasets = [con.execute("INSERT INTO dataset (name, description, source, is_demo, created_at) VALUES (?, '', 'bench', 0, ?)",
                            (name, now)).lastrowid for name in ("bench", "empty")]
    sample_sql = ("INSERT INTO sample (id, dataset_id, external_id, question, answer, metadata, content_hash, segmenter, "
                  "created_at, updated_at) VALUES (?, ?, ?, 'q?', 'a.', '{}', ?, '', ?, ?)")
    con.execute(sample_sql, (n + 1, datasets[1], "only", "0", now, now))  # the empty dataset: one sample, nothing else
    con.executemany(sample_sql, ((i + 1, datasets[0], f"s{i:07d}", str(i), now, now) for i in range(n)))
    con.executemany(
        "INSERT INTO assignment (sample_id, user_id, status, note, priority, stream, audit_prob, created_at, updated_at) "
        "VALUES (?, ?, 'done', '', 0, ?, ?, ?, ?)",
        ((i + 1, users[i % len(users)], ("audit", "triage", None)[i % 3], 0.25 if i % 3 == 0 else None, now, now)
         for i in range(n)))
    con.executemany(
        "INSERT INTO label (task_id, sample_id, target_key, annotator_id, value, rationale, adjudicated, stale, stale_reason, "
        "source, created_at, updated_at) VALUES (?, ?, ?, ?, '4', '', 0, 0, '', 'import', ?, ?)",
        ((task, i + 1, f"sample:{i + 1}", users[i % len(users)], now, now) for i in range(n)))
    con.commit()
    con.close()


# The command runs under this wrapper, which prints its peak RSS (VmHWM of /proc/self/status) on exit: the
# rusage of a child counts the parent's memory at the fork, /proc the command's own after exec.
WRAPPER = """
import atexit, sys
def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            sys.stderr.write("PEAK_KB " + line.split()[1] + "\\n")
atexit.register(peak)
sys.argv = ["calibrate", *sys.argv[1:]]
from calibrate.cli import main
main()
"""


def run(args: list[str], path: Path) -> tuple[float, float, float]:
    """Return (wall s, CPU s, peak RSS MB) of `calibrate ARGS --db …` run as a subprocess."""
    env = {**os.environ, "CALIBRATE_INSTANCE": str(path.parent)}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", WRAPPER, *args, "--db", f"sqlite:///{path}"], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{args} failed: {err}")
    peak = next(int(line.split()[1]) for line in err.splitlines() if line.startswith("PEAK_KB "))
    return wall, usage.ru_utime + usage.ru_stime, peak / 1024


def measure(path: Path, n: int, out: Path) -> dict[str, tuple[float, float, float]]:
    """Return each command's (wall s, CPU s, peak RSS MB), on the dataset of n rows and on the empty one (start-up)."""
    found = {}
    for name, command in (("labels", ["export", "labels"]), ("assignments", ["export", "assignments"])):
        found[f"{name} empty"] = run([*command, "--dataset", "empty", "-o", str(out / f"{name}-empty.jsonl")], path)
        found[name] = run([*command, "--dataset", "bench", "-o", str(out / f"{name}.jsonl")], path)
        lines = sum(1 for _ in (out / f"{name}.jsonl").open(encoding="utf-8"))
        assert lines == n, (name, lines)
    found["assignments csv"] = run(["export", "assignments", "--dataset", "bench", "-o", str(out / "assignments.csv")], path)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="Comma-separated numbers of samples (= rows).")
    parser.add_argument("--write", action="store_true", help="Prepend the results to bench/results/export.md.")
    options = parser.parse_args()
    sizes = [int(s) for s in options.sizes.split(",")]
    load_before = "load average: {:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg())
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = Path(tmp) / f"bench-{n}.sqlite"
            built = time.perf_counter()
            build(path, n)
            print(f"n={n}: built in {time.perf_counter() - built:.1f} s", flush=True)
            results[n] = measure(path, n, Path(tmp))
            print(f"n={n}: {results[n]}", flush=True)
    load_after = "load average: {:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg())
    table = ["| rows | command | wall s | CPU s | CPU s above the empty export | peak RSS (MB) | RSS above the empty export (MB) |",
             "|---:|---|---:|---:|---:|---:|---:|"]
    above = {}
    for n, found in results.items():
        for key, name, empty in (("labels", "baseline: `export labels` (jsonl)", "labels empty"),
                                 ("assignments", "`export assignments` (jsonl)", "assignments empty"),
                                 ("assignments csv", "`export assignments` (csv)", "assignments empty")):
            wall, cpu, rss = found[key]
            above[(n, key)] = (cpu - found[empty][1], rss - found[empty][2])
            table.append(f"| {n:,} | {name} | {wall:.2f} | {cpu:.2f} | {above[(n, key)][0]:.2f} | {rss:.0f} | "
                         f"{above[(n, key)][1]:.0f} |")
        table.append(f"| 0 | the same two on an empty dataset (start-up) | {found['labels empty'][0]:.2f}, "
                     f"{found['assignments empty'][0]:.2f} | {found['labels empty'][1]:.2f}, {found['assignments empty'][1]:.2f} "
                     f"| – | {found['labels empty'][2]:.0f}, {found['assignments empty'][2]:.0f} | – |")
    findings = []
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        for key, name in (("assignments", "`export assignments`"), ("labels", "the baseline `export labels`")):
            findings.append(f"- {name}: from {small:,} to {large:,} rows its memory above the empty export goes from "
                            f"{above[(small, key)][1]:.0f} to {above[(large, key)][1]:.0f} MB")
        base = above[(large, "labels")][0]
        if base > 0.2:  # below that the start-up's noise decides the ratio
            findings.append(f"- at {large:,} rows `export assignments` takes {above[(large, 'assignments')][0] / base:.2f}× the "
                            "baseline's CPU time above start-up, for rows that also carry each expert's labelled tasks")
    text = "\n".join([
        f"## {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC: issue 35, `export assignments` streams its rows",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; before: `{load_before}`, "
        f"after: `{load_after}` (a shared machine: wall times move with the load, CPU time and RSS less)",
        f"- command: `python bench/bench_export_assignments.py --sizes {options.sizes}` (each command a subprocess writing a "
        "file; peak RSS its VmHWM, CPU from wait4)",
        "",
        *table,
        "",
        *findings,
        "",
    ])
    print(text)
    if options.write:
        path = ROOT / "bench" / "results" / "export.md"
        head = "# Export benchmark\n\nGenerated by `bench/bench_export_assignments.py --write`; newest run first.\n\n"
        old = path.read_text(encoding="utf-8").removeprefix(head) if path.exists() else ""
        path.write_text(head + text + ("\n" + old if old else ""), encoding="utf-8")


if __name__ == "__main__":
    main()
