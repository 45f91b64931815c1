"""One WHERE grammar: which of a dataset's samples a `--where` names (docs/cli.md, "WHERE expressions").

Every option that chooses samples by a WHERE reads it here: `estimate --where`, `golden create --where`,
`golden refresh --from`, `golden drift --against`, `sample --where`, the `export` commands' `--where` and
`import run|qrels --where`. A WHERE is 1 to WHERE_MAX characters: terms joined by `&`, every one of which
must hold (at most TERMS_MAX):

    split=NAME              the sample's split is NAME
    metadata.PATH=VALUE     the metadata value at PATH (a key; else a dotted path into nested objects) is the
                            text VALUE, a number equal to VALUE (3 matches 3 and 3.0), or true/false (any case)
                            when VALUE says so; an absent field, null, a list or an object never matches
    last=Nd                 the sample row was created in the last N days (1 to 36,500)
    started_at>=DATE        the sample's time (sample_time.py: `metadata.started_at` within calibrate.bounds,
                            else its creation time) is at or after DATE; also >, <= and <. DATE is an ISO 8601
                            date (its midnight, UTC) or date-time (UTC when it has no offset)
    stream=audit|triage     the sample was given to an expert in that production stream (an assignment of
                            `calibrate queue auto`'s stream: the one the live estimator reads, streams.py)
    labelled, unlabelled    the sample has (has not) a current label — not stale, on a current claim or
                            context, adjudicated ones included — of the task in scope (`estimate`'s task,
                            `export labels --task`), or of any task when none is

Spaces around a term, its name and its value are ignored; a VALUE cannot contain `&`. A term that does
not parse is refused naming the term (a `Reason`, worded in the reader's language where the web shows it).

`select_ids` compiles every term but `started_at` to SQL on the sample table (the JSON of `metadata` read
by SQLite's json_type/json_extract and PostgreSQL's json_typeof/#>>), so the database does the filtering;
a `started_at` term is then applied in Python to the rows left, by the one time rule (an ISO 8601 time with
an offset is not something both databases' SQL can read the same way).

Where the three parsers this replaces disagreed, the stricter meaning was kept: `&` always joins terms; an
empty VALUE is refused; an absent field never matches (one of them matched an absent field to "None").
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from sqlalchemy import JSON, Float, Text, and_, bindparam, case, cast, exists, false, func, or_, select
from sqlmodel import Session, col

from calibrate.bounds import EARLIEST, LATEST
from calibrate.errors import CalibrateError, WhereError
from calibrate.models import Assignment, Claim, Context, Dataset, Label, Sample, utcnow
from calibrate.reasons import Reason
from calibrate.sample_time import sample_times

__all__ = ["STREAMS", "TERMS_MAX", "WHERE_MAX", "Term", "Where", "metadata_value", "parse", "select_ids"]

WHERE_MAX = 500
TERMS_MAX = 20
PATH_MAX = 200
LAST_MAX_DAYS = 36_500
STREAMS = ("audit", "triage")
FLAGS = ("labelled", "unlabelled")
COMPARISONS = (">=", "<=", ">", "<")
JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
DAYS = re.compile(r"(\d{1,5})d")


@dataclass(frozen=True)
class Term:
    """One term: its name (split, metadata, last, started_at, stream, labelled, unlabelled), operator and value."""

    text: str
    name: str
    op: str = "="
    value: Any = None
    path: str = ""


@dataclass(frozen=True)
class Where:
    """A parsed WHERE: its text as given and its terms (all must hold)."""

    text: str
    terms: tuple[Term, ...]


# --------------------------------------------------------------------------- parsing


def parse(text: str, *, option: str = "--where", error: type[CalibrateError] = WhereError) -> Where:
    """Return the parsed WHERE; refuse (`error`, a Reason naming `option` and the term) one that does not parse."""
    raw = text if isinstance(text, str) else ""
    if not raw.strip() or len(raw) > WHERE_MAX:
        raise error(Reason("where_length", option=option, length=len(raw), limit=WHERE_MAX))
    parts = raw.split("&")
    if len(parts) > TERMS_MAX:
        raise error(Reason("where_terms", option=option, count=len(parts), limit=TERMS_MAX))
    return Where(raw, tuple(_term(part.strip(), option, error) for part in parts))


def _term(term: str, option: str, error: type[CalibrateError]) -> Term:
    def refuse(code: str, **figures: Any) -> CalibrateError:
        return error(Reason(code, term=term, option=option, **figures))

    if not term:
        raise refuse("where_empty_term")
    if term in FLAGS:
        return Term(term, term, "", None)
    at = min((i for i in (term.find(c) for c in "<>=") if i >= 0), default=-1)
    name = term[:at].strip() if at > 0 else ""
    if not name:
        raise refuse("where_unknown")
    op = term[at:at + 2] if term[at:at + 2] in COMPARISONS else term[at]
    value = term[at + len(op):].strip()
    if name in FLAGS:
        raise refuse("where_flag", name=name)
    if name == "started_at":
        moment = _moment(value) if op != "=" else None
        if moment is None:
            raise refuse("where_started_at")
        return Term(term, name, op, moment)
    if name not in VALUES and not name.startswith("metadata."):
        raise refuse("where_field", name=name)
    if op != "=":
        raise refuse("where_operator", name=name)
    if name in VALUES:
        parsed = VALUES[name](value)
        if parsed is None:
            raise refuse(f"where_{name}", limit=LAST_MAX_DAYS)
        return Term(term, name, op, parsed)
    path = name.removeprefix("metadata.").strip()
    if (not value or not path or len(path) > PATH_MAX or any(not part for part in path.split(".")) or '"' in path
            or not path.isprintable()):
        raise refuse("where_metadata", limit=PATH_MAX)
    return Term(term, "metadata", op, value, path)


def _days(text: str) -> int | None:
    days = DAYS.fullmatch(text)
    return int(days.group(1)) if days and 1 <= int(days.group(1)) <= LAST_MAX_DAYS else None


# The terms NAME=VALUE besides metadata's: each VALUE read (None: refused by the code `where_NAME`).
VALUES = {"split": lambda text: text or None, "last": _days, "stream": lambda text: text if text in STREAMS else None}


def _moment(text: str) -> datetime | None:
    """Return an ISO 8601 date (its midnight) or date-time as an aware UTC time within calibrate.bounds, else None."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return moment if EARLIEST <= moment < LATEST else None


# --------------------------------------------------------------------------- evaluating


def select_ids(session: Session, dataset: Dataset, where: str | Where, *, task_ids: Collection[int] | None = None,
               now: datetime | None = None, option: str = "--where", error: type[CalibrateError] = WhereError,
               required: bool = False) -> list[int]:
    """Return the ids of the dataset's samples matching WHERE, in id order.

    `task_ids`: the tasks `labelled`/`unlabelled` look at (None: any task). `now`: the clock of `last=Nd`.
    `required`: refuse (`error`, `where_none`) when no sample matches.
    """
    parsed = where if isinstance(where, Where) else parse(where, option=option, error=error)
    now = now or utcnow()
    dialect = session.connection().dialect.name
    clauses = [_clause(term, dialect, task_ids, now) for term in parsed.terms if term.name != "started_at"]
    timed = [term for term in parsed.terms if term.name == "started_at"]
    if timed:
        times = sample_times(session, dataset.id, *clauses)["time"]
        keep = pd.Series(True, index=times.index)
        for term in timed:
            keep &= _compare(times, term.op, pd.Timestamp(term.value))
        ids = sorted(int(i) for i in times.index[keep.to_numpy()])
    else:
        ids = list(session.scalars(select(Sample.id).where(Sample.dataset_id == dataset.id, *clauses).order_by(Sample.id)))
    if required and not ids:
        raise error(Reason("where_none", dataset=dataset.name, where=parsed.text))
    return ids


def _compare(times: pd.Series, op: str, moment: pd.Timestamp) -> pd.Series:
    return {">=": times >= moment, ">": times > moment, "<=": times <= moment, "<": times < moment}[op]


def _clause(term: Term, dialect: str, task_ids: Collection[int] | None, now: datetime):
    """Return the SQL condition on the sample table of one term (every term but started_at)."""
    if term.name == "split":
        return Sample.split == term.value
    if term.name == "last":
        since = now if now.tzinfo else now.replace(tzinfo=UTC)
        return col(Sample.created_at) >= since - timedelta(days=term.value)
    if term.name == "stream":
        return exists().where(Assignment.sample_id == Sample.id, Assignment.stream == term.value)
    if term.name in FLAGS:
        labelled = _labelled(task_ids)
        return labelled if term.name == "labelled" else ~labelled
    return _metadata_equals(term.path, term.value, dialect)


def _labelled(task_ids: Collection[int] | None):
    """Return EXISTS a current label of the sample (not stale, on a current target; of `task_ids` when given)."""
    query = (select(Label.id).outerjoin(Claim, Claim.id == Label.claim_id).outerjoin(Context, Context.id == Label.context_id)
             .where(Label.sample_id == Sample.id, col(Label.stale).is_(False),
                    or_(col(Label.claim_id).is_(None), col(Claim.active).is_(True)),
                    or_(col(Label.context_id).is_(None), col(Context.active).is_(True))))
    if task_ids is not None:
        query = query.where(col(Label.task_id).in_(sorted(task_ids)) if task_ids else false())
    return query.exists()


def _metadata_equals(path: str, value: str, dialect: str):
    """Return the SQL condition "the metadata value at `path` equals `value`" (module docstring), on either database.

    A key holding a dot is looked up whole first (as `metadata_value` does), then as a path into nested objects.
    """
    whole = _json_equals((path,), value, dialect)
    if "." not in path:
        return whole[1]
    nested = _json_equals(tuple(path.split(".")), value, dialect)
    return case((whole[0].is_not(None), whole[1]), else_=nested[1])


def _json_equals(parts: tuple[str, ...], value: str, dialect: str):
    """Return (the JSON type at `parts` — NULL when absent —, the condition that the value there equals `value`)."""
    number = float(value) if JSON_NUMBER.fullmatch(value) else None
    truth = value.lower() if value.lower() in ("true", "false") else None
    if dialect == "sqlite":
        at = bindparam(None, "$" + "".join(f'."{part}"' for part in parts), type_=Text)
        kind, extracted = func.json_type(Sample.meta, at), func.json_extract(Sample.meta, at)
        tests = [and_(kind == "text", extracted == value)]
        if number is not None:
            tests.append(and_(kind.in_(("integer", "real")), extracted == number))
        if truth is not None:
            tests.append(kind == truth)
    else:
        from sqlalchemy.dialects.postgresql import ARRAY  # noqa: PLC0415 - the PostgreSQL dialect loads only where it is the database

        at = bindparam(None, list(parts), type_=ARRAY(Text))
        kind = func.json_typeof(Sample.meta.op("#>", return_type=JSON)(at))
        extracted = Sample.meta.op("#>>", return_type=Text)(at)
        tests = [and_(kind == "string", extracted == value)]
        if number is not None:  # CASE: the cast is never tried on a string
            tests.append(case((kind == "number", cast(extracted, Float)), else_=None) == number)
        if truth is not None:
            tests.append(and_(kind == "boolean", extracted == truth))
    return kind, or_(*tests)


def metadata_value(meta: Any, path: str) -> Any:
    """Return the value at a dotted path of a sample's metadata (a literal key first), None when absent.

    The Python side of `metadata.PATH` (strata, drift fields, a golden member's trace id); WHERE's SQL reads the same.
    """
    if not isinstance(meta, dict):
        return None
    if path in meta:
        return meta[path]
    current: Any = meta
    for part in path.split("."):
        if not isinstance(current, dict) or part not in current:
            return None
        current = current[part]
    return current
