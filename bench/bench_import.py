"""Benchmark `calibrate import samples` on a generated 100,000-sample JSONL file.

Each sample has a 300–600 character answer (segmented into about five claims, since the file
gives none) and five contexts, like a RAG log. The import runs through the real CLI in a
subprocess (start-up, both passes, segmentation, bulk inserts and the commit included) and is
measured for wall time and peak RSS (os.wait4's rusage of that child alone). As a baseline
from the same run and machine, the parent times a plain `json.loads` of every line, so the
result is also a ratio. A second import of the same file measures the idempotent path.

    .venv/bin/python bench/bench_import.py [--n 100000] [--record]

`--record` writes the figures to bench/results/import.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "import.md"
TARGET_RATE = 5_000
TARGET_RSS_MB = 500

SENTENCES = [
    "Paracetamol can be taken every 4 to 6 hours by adults, up to a maximum of 4 g in any 24-hour period.",
    "Children under 12 need a dose based on their weight, e.g. 15 mg/kg, measured with the syringe provided.",
    "Ibuprofen should be taken with or just after food so that it does not irritate the lining of the stomach.",
    "Dr. Smith recommends rest, plenty of fluids and a light diet for the first 3 days of the infection.",
    "Do not take ibuprofen from week 20 of pregnancy onwards unless a doctor has prescribed it for you.",
    "The seasonal flu vaccine takes about two weeks to protect you, so it is best given early in autumn.",
    "Store the vaccine in a fridge between 2 and 8 °C, keep it in the original box and never freeze it.",
    "If the fever lasts more than 3 days or goes above 39.5 °C, contact your doctor or the out-of-hours line.",
    "Amoxicillin is usually taken three times a day for 5 to 7 days, at evenly spaced times if possible.",
    "Finish the full course of antibiotics even if you feel better, because stopping early can cause relapse.",
    "Antihistamines such as chlorphenamine may cause drowsiness, so avoid driving or operating machinery.",
    "The usual adult dose of cetirizine is 10 mg once a day, and 5 mg for people with reduced kidney function.",
    "Blood pressure should be checked at least once every five years in adults over 40, more often if high.",
    "A clinic reading above 140/90 mmHg is considered high and is usually confirmed with home monitoring.",
    "Metformin is taken with meals or straight after them to reduce stomach upset, diarrhoea and nausea.",
    "A daily vitamin D supplement of 10 micrograms is advised in autumn and winter for most adults in the UK.",
    "Drink plenty of water during treatment, i.e. around 2 litres a day, unless your doctor has told you not to.",
    "Keep all medicines in their original packaging and out of the sight and reach of children at all times.",
    "Ask your pharmacist before combining two painkillers, as many cold remedies already contain paracetamol.",
    "Aspirin is not recommended for children under 16 because of the rare but serious risk of Reye's syndrome.",
    "Is the dose different for older adults? Sometimes it is lower, especially when the kidneys work less well.",
    "Side effects are uncommon but include skin rash, nausea and headache; stop the tablets if a rash appears.",
]


def passage(rng: random.Random, low: int, high: int) -> str:
    """Return sentences joined until the text is between `low` and `high` characters."""
    text = ""
    while len(text) < low:
        text = (text + " " + rng.choice(SENTENCES)).strip()
    return text[:high]


def generate(path: Path, n: int, seed: int = 0) -> None:
    """Write `n` samples as JSONL: 300–600 character answers, five contexts each, no claims."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            answer = passage(rng, rng.randint(300, 560), 600)
            fh.write(json.dumps({
                "id": f"q{i:06d}",
                "question": "What should I know about " + rng.choice(SENTENCES).split(" ")[0].lower() + "?",
                "answer": answer,
                "contexts": [{"text": passage(rng, 200, 400), "doc_id": f"doc-{rng.randrange(10_000)}"} for _ in range(5)],
                "ground_truth": rng.choice(SENTENCES),
                "metadata": {"topic": rng.choice(["dosing", "pregnancy", "vaccines", "side effects"]),
                             "model": rng.choice(["a", "b"])},
                "feedback": rng.choice([-1, 0, 1]),
            }, ensure_ascii=False) + "\n")


def json_baseline(path: Path) -> float:
    """Return the seconds a plain json.loads of every line takes."""
    start = time.perf_counter()
    with path.open("rb") as fh:
        for line in fh:
            json.loads(line)
    return time.perf_counter() - start


def run(args: list[str], env: dict[str, str]) -> tuple[float, float, float, str]:
    """Run a command; return (wall seconds, CPU seconds, peak RSS in MB of that process, its output)."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{out}")
    cpu = usage.ru_utime + usage.ru_stime
    return seconds, cpu, usage.ru_maxrss / 1024, out.strip()  # ru_maxrss is in KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="samples to generate")
    parser.add_argument("--record", action="store_true", help=f"write the figures to {RESULTS.relative_to(ROOT)}")
    options = parser.parse_args()
    calibrate = str(Path(sys.executable).with_name("calibrate"))
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        tmp_path = Path(tmp)
        data = tmp_path / "samples.jsonl"
        generate(data, options.n)
        size_mb = data.stat().st_size / 1e6
        db = f"sqlite:///{tmp_path / 'bench.sqlite'}"
        env = {**os.environ, "CALIBRATE_INSTANCE": str(tmp_path / "instance")}
        run([calibrate, "init", "--db", db], env)
        load = os.getloadavg()[0]
        baseline = min(json_baseline(data) for _ in range(3))
        seconds, cpu, rss, output = run([calibrate, "import", "samples", str(data), "--dataset", "bench", "--db", db], env)
        again, again_cpu, again_rss, again_output = run(
            [calibrate, "import", "samples", str(data), "--dataset", "bench", "--db", db], env)
        startup, startup_cpu, startup_rss, _ = run([calibrate, "--version"], env)
        import sqlite3

        con = sqlite3.connect(tmp_path / "bench.sqlite")
        counts = {t: con.execute(f"select count(*) from {t}").fetchone()[0] for t in ("sample", "context", "claim")}
        con.close()
    rate = options.n / seconds
    lines = [
        f"## {dt.date.today().isoformat()}: {options.n:,} samples ({size_mb:.0f} MB JSONL)",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs (nproc), Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.release()}",
        f"- command: `{Path(sys.executable).name} bench/bench_import.py --n {options.n}` "
        f"(runs `calibrate import samples FILE --dataset bench --db sqlite:///…` in a subprocess)",
        f"- rows written: {counts['sample']:,} samples, {counts['context']:,} contexts, {counts['claim']:,} claims "
        f"({counts['claim'] / max(counts['sample'], 1):.1f} segmented claims per sample)",
        f"- load average before the run: {load:.2f} (on {os.cpu_count()} CPUs; other work on the machine slows the wall time, not the CPU time)",
        "",
        "| measurement | wall s | CPU s | samples/s (wall) | samples per CPU s | peak RSS (MB) |",
        "|---|---:|---:|---:|---:|---:|",
        f"| baseline: `json.loads` of every line (in the parent) | {baseline:.2f} | – | {options.n / baseline:,.0f} | – | – |",
        f"| `calibrate import samples` (new dataset) | {seconds:.2f} | {cpu:.2f} | **{rate:,.0f}** | {options.n / cpu:,.0f} | **{rss:.0f}** |",
        f"| the same import again (nothing changed) | {again:.2f} | {again_cpu:.2f} | {options.n / again:,.0f} "
        f"| {options.n / again_cpu:,.0f} | {again_rss:.0f} |",
        f"| `calibrate --version` (start-up alone) | {startup:.2f} | {startup_cpu:.2f} | – | – | {startup_rss:.0f} |",
        "",
        f"- import / json.loads time ratio: **{seconds / baseline:.1f}×** (the import parses the file twice, "
        "validates, hashes, segments and writes about 11 rows per sample)",
        f"- target: ≥ {TARGET_RATE:,} samples/s and < {TARGET_RSS_MB} MB: "
        f"{'met' if rate >= TARGET_RATE and rss < TARGET_RSS_MB else 'NOT MET'}",
        f"- outputs: `{output}` / `{again_output}`",
    ]
    text = "\n".join(lines)
    print(text)
    if options.record:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        header = ("# Import benchmark\n\nGenerated by `bench/bench_import.py --record`; newest run first. "
                  "Each section is one invocation.\n\n")
        previous = RESULTS.read_text(encoding="utf-8").split("\n", 4)[-1] if RESULTS.exists() else ""
        previous = previous[previous.find("## "):] if "## " in previous else ""
        RESULTS.write_text(header + text + "\n\n" + previous, encoding="utf-8")


if __name__ == "__main__":
    main()
