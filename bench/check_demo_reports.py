"""Check: the demo's reports are the same, byte for byte, from two source trees (a refactoring changes no output).

Each tree (a checkout or a `git archive` of one) runs as its own subprocess with its own
`calibrate` first on the path: `calibrate demo --no-serve` loads the bundled demo into a fresh
SQLite file, then every report the demo offers is built and rendered — both datasets, without a
judge and with each demo judge, as JSON, Markdown, HTML and CSV (`calibrate report`'s default
options: 2,000 bootstrap resamples). The one value that differs by design, the time a report was
generated, is set to a fixed value before rendering. The script prints each report's size and
SHA-256 per tree and exits 1 on any difference.

    .venv/bin/python bench/check_demo_reports.py BEFORE_TREE [AFTER_TREE] [--bootstrap N]

AFTER_TREE defaults to this checkout. Example (the tree before issue 31, then this branch):

    git archive e077d06 | tar -x -C /tmp/before && .venv/bin/python bench/check_demo_reports.py /tmp/before
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GENERATED_AT = "2026-01-01T00:00:00+00:00"

# Run inside the tree: every demo report, rendered in every format (JSON on stdout: name → text).
BUILD = """
import json, sys
from sqlmodel import Session, select
from calibrate.calibration import Options, build_report
from calibrate.db import get_engine
from calibrate.demo import AB_DATASET, DATASET
from calibrate.models import Judge
from calibrate.reports import render

url, bootstrap, generated = sys.argv[1], int(sys.argv[2]), sys.argv[3]
out = {}
with Session(get_engine(url)) as session:
    judges = [None, *sorted(session.exec(select(Judge.name)).all())]
    for dataset in (DATASET, AB_DATASET):
        for judge in judges:
            try:
                report = build_report(session, dataset, judge, options=Options(bootstrap=bootstrap))
            except Exception as exc:  # a judge with nothing on this dataset: the refusal is part of the output
                out[f"{dataset}|{judge}|refused"] = f"{type(exc).__name__}: {exc}"
                continue
            report.data["generated_at"] = generated
            for fmt in ("json", "md", "html", "csv"):
                out[f"{dataset}|{judge}|{fmt}"] = render(report, fmt)
print(json.dumps(out))
"""


def reports_of(tree: Path, bootstrap: int) -> dict[str, str]:
    """Return every demo report the tree renders (name → text), from a fresh demo database."""
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/calibrate.sqlite"
        env = {**os.environ, "PYTHONPATH": str(tree), "CALIBRATE_INSTANCE": folder, "PYTHONHASHSEED": "0"}
        subprocess.run([sys.executable, "-m", "calibrate", "demo", "--no-serve", "--db", url], cwd=tree, env=env,
                       check=True, capture_output=True, text=True)
        done = subprocess.run([sys.executable, "-c", BUILD, url, str(bootstrap), GENERATED_AT], cwd=tree, env=env,
                              check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path, nargs="?", default=ROOT)
    parser.add_argument("--bootstrap", type=int, default=2000)
    args = parser.parse_args()
    before, after = reports_of(args.before.resolve(), args.bootstrap), reports_of(args.after.resolve(), args.bootstrap)
    differ = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    print("| report | bytes | sha-256 (first 16) | same |\n| --- | ---: | --- | --- |")
    for name in sorted(before.keys() | after.keys()):
        text = after.get(name, before.get(name))
        print(f"| {name} | {len(text.encode())} | {digest(text)} | {'no' if name in differ else 'yes'} |")
    print(f"\n{len(before.keys() | after.keys())} reports, {len(differ)} differ" + (f": {', '.join(differ)}" if differ else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
