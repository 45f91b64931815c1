"""The report's every figure, pinned: the JSON of the demo's reports and of a synthetic world, against a golden file.

The golden file (tests/data/report_golden.json) was written by main's code before issue 34 changed how the report
reads and computes (integer target ids, the gold computed once, the blocks in arrays): a change in how a figure is
computed must not change the figure. Numbers compare to 1e-12 (relative, or absolute near 0); every other value,
every key and the keys' order compare exactly. Regenerate the file only for a documented change of a figure (a
seeded bootstrap stream: docs/changelog.md), and then compare its CIs within Monte-Carlo error first:

    PYTHONPATH=tests .venv/bin/python tests/calibration/test_report_golden.py tests/data/report_golden.json
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from report_world import DATASET, JUDGE, fill_world

GOLDEN = Path(__file__).parent.parent / "data" / "report_golden.json"
# 10^5 claims (20,000 samples of 5) with the same kinds of rows, the report with and without the judge: written by the
# code of 41bd7cb (main before issue 34's changes) with `python tests/calibration/test_report_golden.py --100k FILE` (write_golden)
# run from a `git archive 41bd7cb` with this function copied in (its report_world.py is this one).
GOLDEN_100K = Path(__file__).parent.parent / "data" / "report_golden_100k.json"
WORLD_100K = dict(n_samples=20_000, n_claims=5, seed=11, third=0.3, adjudicated=0.05, stale=0.05, unparsed=0.03,
                  abstain=0.03, not_applicable=0.05)
GENERATED_AT = "2026-01-01T00:00:00+00:00"
BOOTSTRAP = 200
# A few hundred claims with everything the report separates: a third expert on some claims, adjudications, stale
# labels, ties, unparsed verdicts, abstentions and not_applicable gold.
WORLD = dict(n_samples=60, n_claims=5, seed=3, third=0.3, adjudicated=0.05, stale=0.05, unparsed=0.03, abstain=0.03,
             not_applicable=0.05)


def golden_reports(url: str) -> dict[str, dict]:
    """Return every pinned report's JSON (name → parsed JSON) from the database at `url` (the demo and the world)."""
    from sqlmodel import Session, select

    from calibrate.calibration import Options, build_report
    from calibrate.db import dispose_engine, get_engine
    from calibrate.demo import AB_DATASET, AGENT_JUDGE
    from calibrate.demo import DATASET as DEMO
    from calibrate.models import Judge
    from calibrate.reports import render

    out = {}
    with Session(get_engine(url)) as session:
        # the judges pinned when the file was written (the agent demo's came later: its step sections have their tests)
        judges = sorted(name for name in session.exec(select(Judge.name)).all() if name != AGENT_JUDGE)
        runs = [(dataset, judge, Options(bootstrap=BOOTSTRAP)) for dataset in (DEMO, AB_DATASET)
                for judge in [None, *[j for j in judges if j != JUDGE]]]
        runs += [(DEMO, judges[0], Options(bootstrap=BOOTSTRAP, group_by="split")),
                 (DATASET, None, Options(bootstrap=BOOTSTRAP)), (DATASET, JUDGE, Options(bootstrap=BOOTSTRAP)),
                 (DATASET, JUDGE, Options(bootstrap=BOOTSTRAP, group_by="metadata.topic", ci_method="bca", seed=7))]
        for dataset, judge, options in runs:
            name = f"{dataset}|{judge}|{options.group_by}|{options.ci_method}"
            try:
                report = build_report(session, dataset, judge, options=options)
            except Exception as exc:  # a judge with nothing on this dataset: the refusal is pinned too
                out[name] = {"refused": f"{type(exc).__name__}: {exc}"}
                continue
            report.data["generated_at"] = GENERATED_AT
            out[name] = json.loads(render(report, "json"))
    dispose_engine(url)
    return out


def reports_100k(url: str) -> dict[str, dict]:
    """Return the 10^5-claim world's report JSON without a judge and with it (judge name or "None" → JSON)."""
    from sqlmodel import Session

    from calibrate.calibration import Options, build_report
    from calibrate.db import dispose_engine, get_engine
    from calibrate.reports import render

    out = {}
    with Session(get_engine(url)) as session:
        for judge in (None, JUDGE):
            report = build_report(session, DATASET, judge, options=Options(bootstrap=BOOTSTRAP))
            report.data["generated_at"] = GENERATED_AT
            out[str(judge)] = json.loads(render(report, "json"))
    dispose_engine(url)
    return out


def differences(found, pinned, path: str = "") -> list[str]:
    """Return where `found` differs from `pinned`: numbers beyond 1e-12, any other value, a key or its order."""
    if isinstance(pinned, dict) and isinstance(found, dict):
        if list(found) != list(pinned):
            return [f"{path}: keys {list(found)} != {list(pinned)}"]
        return [d for key in pinned for d in differences(found[key], pinned[key], f"{path}/{key}")]
    if isinstance(pinned, list) and isinstance(found, list):
        if len(found) != len(pinned):
            return [f"{path}: {len(found)} items != {len(pinned)}"]
        return [d for i, (f, p) in enumerate(zip(found, pinned, strict=True)) for d in differences(f, p, f"{path}/{i}")]
    if isinstance(pinned, float) and isinstance(found, float):  # (an int where a float was is a change: exact below)
        close = math.isclose(found, pinned, rel_tol=1e-12, abs_tol=1e-12)
        return [] if close else [f"{path}: {found!r} != {pinned!r}"]
    return [] if (type(found), found) == (type(pinned), pinned) else [f"{path}: {found!r} != {pinned!r}"]


@pytest.fixture(scope="module")
def world_db(tmp_path_factory, demo_template):
    """The demo database with the synthetic world added."""
    path = tmp_path_factory.mktemp("golden") / "calibrate.sqlite"
    shutil.copyfile(demo_template, path)
    fill_world(path, **WORLD)
    return f"sqlite:///{path}"


def test_every_figure_of_the_demo_and_world_reports_is_mains(world_db, monkeypatch):
    # The report reads labels and verdicts in chunks (db.read_frame's categorical read): chunks of 97 rows make
    # every read here several, so uniting their categories is what is tested, not one chunk alone.
    monkeypatch.setattr("calibrate.db.READ_CHUNK_ROWS", 97)
    pinned = json.loads(GOLDEN.read_text())
    found = golden_reports(world_db)
    assert list(found) == list(pinned)
    assert len(pinned) >= 10 and all("refused" in r or r["tasks"] for r in pinned.values())  # real reports, not empty
    problems = [d for name in pinned for d in differences(found[name], pinned[name], name)]
    assert not problems, "\n".join(problems[:40])


def test_every_figure_of_a_report_of_100000_claims_is_the_one_before_issue_34(tmp_path, template_db):
    """The report of 10^5 claims (adjudications, a third expert, stale labels, ties, abstentions, not_applicable) as
    main's code made it before the report read integers and computed its blocks on codes: every figure to 1e-12."""
    path = tmp_path / "calibrate.sqlite"
    shutil.copyfile(template_db, path)
    fill_world(path, **WORLD_100K)
    pinned = json.loads(GOLDEN_100K.read_text())
    found = reports_100k(f"sqlite:///{path}")
    assert list(found) == ["None", JUDGE] == list(pinned)
    assert pinned[JUDGE]["tasks"]["claim_support"]["n"] > 50_000  # a report of 10^5 claims, not an empty one
    problems = [d for name in pinned for d in differences(found[name], pinned[name], name)]
    assert not problems, "\n".join(problems[:40])


def test_the_comparison_catches_a_changed_figure_key_or_order():
    pinned = {"a": {"value": 0.5, "ci": [0.25, 0.75], "n": 10, "note": ""}, "b": None}
    assert differences(json.loads(json.dumps(pinned)), pinned) == []
    assert differences({"a": {**pinned["a"], "value": 0.5 + 1e-9}, "b": None}, pinned) == ["/a/value: 0.500000001 != 0.5"]
    assert differences({"a": {**pinned["a"], "n": 11}, "b": None}, pinned) == ["/a/n: 11 != 10"]
    assert differences({"a": {**pinned["a"], "n": 10.0}, "b": None}, pinned) == ["/a/n: 10.0 != 10"]
    assert differences({"b": None, "a": pinned["a"]}, pinned) == [": keys ['b', 'a'] != ['a', 'b']"]
    assert differences({"a": {**pinned["a"], "ci": [0.25]}, "b": None}, pinned) == ["/a/ci: 1 items != 2"]
    assert differences({"a": pinned["a"], "b": False}, pinned) == ["/b: False != None"]


def write_golden(out: Path, *, demo: bool) -> None:
    """Write a golden file from this tree's code: a fresh migrated database, the demo (`demo`) and the world, its
    reports (`golden_reports`, else the 10^5 world's `reports_100k`)."""
    from calibrate.db import dispose_engine, get_engine, write_session
    from calibrate.demo import load_demo
    from calibrate.migrations import upgrade
    from calibrate.tasks import ensure_builtin_tasks

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "calibrate.sqlite"
        url = f"sqlite:///{path}"
        engine = get_engine(url)
        upgrade(engine)
        with write_session(engine) as session:
            ensure_builtin_tasks(session)
        if demo:
            load_demo(engine)
        dispose_engine(url)
        fill_world(path, **(WORLD if demo else WORLD_100K))
        out.write_text(json.dumps(golden_reports(url) if demo else reports_100k(url), indent=1) + "\n")


if __name__ == "__main__":
    write_golden(Path(sys.argv[2]), demo=False) if sys.argv[1] == "--100k" else write_golden(Path(sys.argv[1]), demo=True)
