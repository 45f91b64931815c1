"""Every CSV export (labels, verdicts, samples) against a formula hidden after a lone CR (issue 20, finding 2).

The red team's rationale `looks fine\r=cmd|' /C calc'!A0` was written unquoted: a spreadsheet
split the row at the CR and ran `=cmd…`, and the file no longer imported. Each export must
quote it, neutralise the `=` after the CR, and import back unchanged; `-o x.csv` without
`--format` writes CSV, and a contradicting `--format` is refused.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from sqlmodel import select

from calibrate.models import Dataset, Label, Sample, Verdict

GOOD = Path(__file__).resolve().parent.parent / "data" / "good"
HOSTILE = "looks fine\r=cmd|' /C calc'!A0"
MORE = ["a\n+1", "x\r\n@SUM(1)", "\n'kept", "-5", "ok, \"quoted\""]


def _no_line_starts_a_formula(raw: str) -> None:
    """A spreadsheet that cuts at any CR or LF never sees a line (or a cell) start with = + - @."""
    for line in re.split(r"\r\n|\r|\n", raw):
        for cell in line.split(","):
            stripped = cell.lstrip('"')
            assert stripped[:1] not in ("=", "+", "@") and not re.match(r"-[^\d]", stripped), (line, raw)


def _rows(path: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_bytes().decode("utf-8"), newline="")))


def _dataset_rows(session, model, column, dataset):
    session.rollback()
    ds = session.exec(select(Dataset).where(Dataset.name == dataset)).one()
    return sorted(session.exec(select(column).join(Sample, Sample.id == model.sample_id).where(Sample.dataset_id == ds.id)).all())


def _two_datasets(runner):
    for dataset in ("d", "e"):
        assert runner.invoke(["import", "samples", str(GOOD / "samples.jsonl"), "--dataset", dataset]).exit_code == 0


def test_labels_with_a_formula_after_a_lone_cr_round_trip(runner, session, tmp_path):
    _two_datasets(runner)
    assert runner.invoke(["import", "labels", str(GOOD / "labels.jsonl"), "--dataset", "d"]).exit_code == 0
    session.rollback()
    for label, text in zip(session.exec(select(Label).order_by(Label.id)).all(), [HOSTILE, *MORE], strict=False):
        label.rationale = text
    session.commit()
    exported = tmp_path / "labels.csv"
    out = runner.invoke(["export", "labels", "--dataset", "d", "-o", str(exported)])  # the format from the extension
    assert out.exit_code == 0, out.output
    raw = exported.read_bytes().decode("utf-8")
    assert not raw.startswith("{") and len(_rows(exported)) == 7
    _no_line_starts_a_formula(raw)
    assert '"looks fine\r\'=cmd|\' /C calc\'!A0"' in raw  # quoted, and the = after the CR neutralised
    imported = runner.invoke(["import", "labels", str(exported), "--dataset", "e"])
    assert imported.exit_code == 0 and "7 added" in imported.output, imported.output
    assert _dataset_rows(session, Label, Label.rationale, "e") == _dataset_rows(session, Label, Label.rationale, "d")
    again = tmp_path / "again.csv"
    assert runner.invoke(["export", "labels", "--dataset", "e", "-o", str(again)]).exit_code == 0
    assert again.read_bytes() == exported.read_bytes()


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_verdicts_export_imports_back_unchanged(runner, session, tmp_path, fmt):
    _two_datasets(runner)
    out = runner.invoke(["import", "verdicts", str(GOOD / "verdicts.jsonl"), "--dataset", "d", "--judge", "j"])
    assert out.exit_code == 0, out.output
    session.rollback()
    for verdict, text in zip(session.exec(select(Verdict).order_by(Verdict.id)).all(), [HOSTILE, *MORE], strict=False):
        verdict.reason = text
    session.commit()
    exported = tmp_path / f"verdicts.{fmt}"
    out = runner.invoke(["export", "verdicts", "--dataset", "d", "--judge", "j", "-o", str(exported)])
    assert out.exit_code == 0 and "exported 4 verdicts of 1 judge(s) on d" in out.stderr, out.output
    if fmt == "csv":
        _no_line_starts_a_formula(exported.read_bytes().decode("utf-8"))
        assert {row["value"] for row in _rows(exported)} == {"supported", "", "2.5"}  # an empty cell: a null verdict
    imported = runner.invoke(["import", "verdicts", str(exported), "--dataset", "e"])
    assert imported.exit_code == 0, imported.output

    def state(dataset):
        session.rollback()
        ds = session.exec(select(Dataset).where(Dataset.name == dataset)).one()
        return sorted((v.task_id, v.target_key.split(":", 1)[-1], v.value, v.status, v.reason, v.error, v.latency_ms)
                      for v in session.exec(select(Verdict).join(Sample, Sample.id == Verdict.sample_id)
                                            .where(Sample.dataset_id == ds.id)))
    assert len(state("e")) == 4
    again = tmp_path / f"again.{fmt}"
    assert runner.invoke(["export", "verdicts", "--dataset", "e", "-o", str(again)]).exit_code == 0
    assert again.read_bytes() == exported.read_bytes()
    assert [row[2:] for row in state("e")] == [row[2:] for row in state("d")]


def test_samples_with_a_formula_after_a_lone_cr_round_trip(runner, session, tmp_path):
    source = tmp_path / "in.jsonl"
    records = [{"id": "s1", "question": HOSTILE, "answer": "Fine.", "ground_truth": MORE[0], "contexts": []},
               {"id": "=s2", "question": MORE[1], "answer": MORE[2], "contexts": [HOSTILE]}]
    source.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert runner.invoke(["import", "samples", str(source), "--dataset", "d"]).exit_code == 0
    exported, again = tmp_path / "s.csv", tmp_path / "t.csv"
    assert runner.invoke(["export", "samples", "--dataset", "d", "-o", str(exported)]).exit_code == 0
    _no_line_starts_a_formula(exported.read_bytes().decode("utf-8"))
    out = runner.invoke(["import", "samples", str(exported), "--dataset", "e"])
    assert out.exit_code == 0, out.output
    session.rollback()
    questions = {s.external_id: (s.question, s.answer, s.ground_truth) for s in session.exec(select(Sample))
                 if s.dataset_id == session.exec(select(Dataset.id).where(Dataset.name == "e")).one()}
    assert questions == {"s1": (HOSTILE, "Fine.", MORE[0]), "=s2": (MORE[1], MORE[2], None)}
    assert runner.invoke(["export", "samples", "--dataset", "e", "-o", str(again)]).exit_code == 0
    assert again.read_bytes() == exported.read_bytes()


def test_output_extension_decides_the_format_or_a_mismatch_is_refused(runner, tmp_path):
    _two_datasets(runner)
    assert runner.invoke(["import", "labels", str(GOOD / "labels.jsonl"), "--dataset", "d"]).exit_code == 0
    jsonl = tmp_path / "x.jsonl"
    assert runner.invoke(["export", "labels", "--dataset", "d", "-o", str(jsonl)]).exit_code == 0
    assert jsonl.read_bytes().decode("utf-8").startswith("{")
    for kind in ("labels", "verdicts", "samples"):
        out = runner.invoke(["export", kind, "--dataset", "d", "--format", "jsonl", "-o", str(tmp_path / "x.csv")])
        assert out.exit_code == 2 and "--format jsonl contradicts the extension of 'x.csv' (csv)" in out.output, out.output
    assert not (tmp_path / "x.csv").exists()
