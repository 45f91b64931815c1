"""Import TREC run files (rankings) and qrels (relevance judgments) onto a dataset's samples.

Formats (whitespace-separated columns, one line per document, as trec_eval reads them):

- run:   ``qid Q0 docid rank score tag`` → `Sample.retrieved_ids`, the documents of the
  query ranked by `rank` (ascending), ties by `score` (descending), then by line;
- qrels: ``qid iteration docid relevance`` → `Sample.relevant_ids`, the documents with
  relevance > 0 in file order (graded levels are collapsed: the metrics use binary gain).

A query id names the samples whose `metadata.query_id` equals it (compared as text); a
sample without `metadata.query_id` is named by its own id. Several samples can share a query
id (two systems answering the same question): the run or qrels line then applies to each of
them, unless `where` (a WHERE of calibrate/where.py, e.g. `metadata.system=a`) keeps only some, such as one system's samples
for that system's run.

All or nothing: every line is checked first (column count, integer rank and relevance,
finite score, a document ranked or judged twice for a query), and a file with any problem is
rejected with its line numbers before anything is written. Query ids that match no sample,
and samples the file says nothing about, are not problems: they are counted in the summary.

The samples' `content_hash` is not changed: it stays the hash of the samples file, so
importing that file again still changes nothing (an `--update` of a sample replaces its id
lists with the file's: import the run or qrels again after one).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import bindparam, select, update
from sqlmodel import Session

from calibrate import lookup
from calibrate.errors import NotFound, WhereError
from calibrate.ingest.problems import Problems, TooManyProblems, reject
from calibrate.ingest.readers import EMPTY_FILE, Progress, utf8_lines
from calibrate.models import Sample, utcnow
from calibrate.reasons import Reason
from calibrate.where import Where, select_ids
from calibrate.where import parse as parse_where

KINDS = ("run", "qrels")
COLUMNS = {"run": ("qid", "Q0", "docid", "rank", "score", "tag"), "qrels": ("qid", "iteration", "docid", "relevance")}
_SAMPLES = Sample.__table__
UPDATE_BATCH = 1000
SHOWN = 5  # unmatched query ids named in the summary


@dataclass
class TrecSummary:
    """What a run or qrels import did (the CLI prints `line()`)."""

    kind: str
    dataset: str
    n_queries: int = 0
    n_lines: int = 0
    changed: int = 0
    unchanged: int = 0
    unmatched: list[str] = field(default_factory=list)
    n_samples_without: int = 0
    n_shared: int = 0
    where: str | None = None
    tags: list[str] = field(default_factory=list)

    @property
    def matched(self) -> int:
        return self.changed + self.unchanged

    def line(self) -> str:
        """Return the one line the CLI prints."""
        what = "rankings" if self.kind == "run" else "relevance judgments"
        scope = f" where {self.where}" if self.where else ""
        head = f"{self.kind} → {self.dataset}{scope}: "
        parts = [(f"{self.n_queries:,} queries, {self.n_lines:,} lines; {what} set on {self.matched:,} samples "
                  f"({self.changed:,} changed, {self.unchanged:,} unchanged)")]
        if self.unmatched:
            named = ", ".join(self.unmatched[:SHOWN]) + (", …" if len(self.unmatched) > SHOWN else "")
            parts.append(f"{len(self.unmatched):,} query ids match no sample ({named})")
        if self.n_samples_without:
            parts.append(f"{self.n_samples_without:,} samples have no {'ranking' if self.kind == 'run' else 'judgments'} "
                         "in the file (left as they were)")
        if self.n_shared:
            parts.append(f"{self.n_shared:,} query ids name several samples (each got the same list; --where "
                         "metadata.FIELD=VALUE keeps one system's)")
        if self.kind == "run" and self.tags:
            parts.append(f"run tag{'s' if len(self.tags) > 1 else ''} {', '.join(self.tags[:SHOWN])}")
        return head + "; ".join(parts)


def _lines(path: Path) -> Iterator[tuple[int, str | None, str | None]]:
    """Yield (line number, text, problem) for every non-blank line; text is None when undecodable."""
    with open(path, "rb") as fh:
        yield from utf8_lines(fh)


def parse(path: Path, kind: str, problems: Problems, tick: Callable[[], None]) -> tuple[dict[str, list[str]], int, list[str]]:
    """Return query id → document ids (ranked for a run, relevant for qrels), the line count and the run tags.

    Problems are filed in `problems` (each with its line and column); the result is only
    meaningful when there are none.
    """
    columns = COLUMNS[kind]
    entries: dict[str, list[tuple]] = {}
    first_seen: dict[tuple[str, str], int] = {}
    tags: dict[str, None] = {}
    n_lines = 0
    for number, text, problem in _lines(path):
        tick()
        n_lines += 1
        if problem is not None:
            problems.add(number, None, problem)
            continue
        cells = text.split()
        if len(cells) != len(columns):
            problems.add(number, None, f"expected {len(columns)} columns ({' '.join(columns)}), found {len(cells)}")
            continue
        if kind == "run":
            qid, _, docid, rank_text, score_text, tag = cells
            try:
                rank = int(rank_text)
            except ValueError:
                problems.add(number, "rank", f"must be an integer, found {rank_text!r}")
                continue
            try:
                score = float(score_text)
            except ValueError:
                problems.add(number, "score", f"must be a number, found {score_text!r}")
                continue
            if not math.isfinite(score):
                problems.add(number, "score", f"must be a finite number, found {score_text!r}")
                continue
            tags.setdefault(tag)
            entry: tuple = (rank, -score, number, docid)
        else:
            qid, _, docid, rel_text = cells
            try:
                relevance = int(rel_text)
            except ValueError:
                problems.add(number, "relevance", f"must be an integer (relevant when > 0), found {rel_text!r}")
                continue
            entry = (number, docid, relevance)
        first = first_seen.setdefault((qid, docid), number)
        if first != number:
            verb = "ranked" if kind == "run" else "judged"
            problems.add(number, "docid", f"document {docid!r} is {verb} twice for query {qid!r} (first on line {first})")
            continue
        entries.setdefault(qid, []).append(entry)
    if n_lines == 0:
        problems.add(None, None, EMPTY_FILE)
    if kind == "run":
        return {qid: [e[3] for e in sorted(rows)] for qid, rows in entries.items()}, n_lines, list(tags)
    return {qid: [docid for _, docid, rel in rows if rel > 0] for qid, rows in entries.items()}, n_lines, []


def _where(where: str | None) -> Where | None:
    """Return the parsed --where (calibrate/where.py's grammar), or None; a WHERE that does not parse rejects the file."""
    try:
        return parse_where(where) if where is not None else None
    except WhereError as exc:
        raise reject(str(exc), field="where") from None


def import_trec(session: Session, path: str | Path, kind: str, *, dataset: str, where: str | None = None,
                progress: Callable[[int], object] | None = None, max_errors: int = 50) -> TrecSummary:
    """Import a TREC run (`kind="run"`) or qrels file onto the samples of `dataset`, all or nothing."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    try:
        ds = lookup.dataset(session, dataset, hint=Reason("hint_import_its_samples"))
    except NotFound as exc:
        raise reject(str(exc)) from exc
    condition = _where(where)
    problems = Problems(max_errors)
    tick = Progress(progress)
    try:
        lists, n_lines, tags = parse(Path(path), kind, problems, tick)
    except TooManyProblems:
        raise problems.rejected(0) from None
    if problems:
        raise problems.rejected(n_lines)
    tick.flush()

    column = "retrieved_ids" if kind == "run" else "relevant_ids"
    by_key: dict[str, list[tuple[int, list[str] | None]]] = {}
    in_scope = 0
    chosen = set(select_ids(session, ds, condition)) if condition is not None else None
    rows = session.execute(select(_SAMPLES.c.id, _SAMPLES.c.external_id, _SAMPLES.c.metadata, _SAMPLES.c[column])
                           .where(_SAMPLES.c.dataset_id == ds.id))
    for sid, external_id, meta, current in rows:
        meta = meta if isinstance(meta, dict) else {}
        if chosen is not None and sid not in chosen:
            continue
        in_scope += 1
        query_id = meta.get("query_id")
        key = external_id if query_id is None or str(query_id) == "" else str(query_id)
        by_key.setdefault(key, []).append((sid, current))
    if chosen is not None and in_scope == 0:
        raise reject(f"no sample of {ds.name} has {where} (nothing to import the {kind} onto)")

    summary = TrecSummary(kind, ds.name, n_queries=len(lists), n_lines=n_lines, where=where, tags=tags)
    summary.unmatched = sorted(qid for qid in lists if qid not in by_key)
    summary.n_samples_without = sum(len(samples) for key, samples in by_key.items() if key not in lists)
    summary.n_shared = sum(1 for qid in lists if len(by_key.get(qid, ())) > 1)
    now = utcnow()
    statement = (update(_SAMPLES).where(_SAMPLES.c.id == bindparam("b_id"))
                 .values({column: bindparam("b_ids"), "updated_at": bindparam("b_now")}))
    batch: list[dict] = []
    for qid, ids in lists.items():
        for sid, current in by_key.get(qid, ()):
            if current == ids:
                summary.unchanged += 1
                continue
            summary.changed += 1
            batch.append({"b_id": sid, "b_ids": ids, "b_now": now})
            if len(batch) >= UPDATE_BATCH:
                session.execute(statement, batch)
                batch = []
    if batch:
        session.execute(statement, batch)
    return summary
