"""One WHERE grammar (calibrate/where.py): parsing, refusals naming the term, what each term selects on SQLite (and, through
`check_semantics`, on PostgreSQL in tests/test_postgres.py), and the same sample set from estimate, sample and export.

The SQL the evaluator compiles is checked against a plain Python reading of docs/cli.md's "WHERE expressions" on
samples built for the edge cases: numbers written 3 and 3.0, booleans, null, lists, nested objects, a key holding a dot.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import pytest
from labelstore import Store
from sqlmodel import Session, select

from calibrate import where as grammar
from calibrate.db import write_session
from calibrate.errors import GoldenError, WhereError
from calibrate.ingest.sampling import sample_dataset
from calibrate.models import Assignment, Dataset, Label, Task
from calibrate.reasons import Reason
from calibrate.tasks import add_task

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
TASK = "verdict_ok"


# --------------------------------------------------------------------------- parsing


def test_every_term_parses_with_spaces_around_and_values_holding_operators():
    parsed = grammar.parse(" split=test & metadata.topic = iron&metadata.url=a=b<c & last=30d&labelled&unlabelled"
                           "&stream=audit&started_at>=2026-12-01&started_at<2026-12-02T10:00:00+02:00&started_at<=2026-12-05"
                           "&started_at>2026-11-30T23:00")
    names = [(t.name, t.op, t.value) for t in parsed.terms]
    assert names[:7] == [("split", "=", "test"), ("metadata", "=", "iron"), ("metadata", "=", "a=b<c"), ("last", "=", 30),
                         ("labelled", "", None), ("unlabelled", "", None), ("stream", "=", "audit")]
    assert parsed.terms[1].path == "topic" and parsed.terms[2].path == "url"
    assert [(t.op, t.value) for t in parsed.terms[7:]] == [
        (">=", datetime(2026, 12, 1, tzinfo=UTC)), ("<", datetime(2026, 12, 2, 8, tzinfo=UTC)),  # an offset: to UTC
        ("<=", datetime(2026, 12, 5, tzinfo=UTC)), (">", datetime(2026, 11, 30, 23, tzinfo=UTC))]  # no offset: UTC


@pytest.mark.parametrize(("text", "code", "words"), [
    ("", "where_length", "a WHERE expression is 1 to 500 characters, got 0"),
    ("   ", "where_length", "got 3"),
    ("x" * 501, "where_length", "got 501"),
    ("&".join(["labelled"] * 21), "where_terms", "at most 20 terms joined by &, got 21"),
    ("split=test&", "where_empty_term", "an empty WHERE term"),
    ("nonsense", "where_unknown", "WHERE term 'nonsense' in --where: not a term"),
    ("=x", "where_unknown", "WHERE term '=x'"),
    ("topic=x", "where_field", "--where must be metadata.FIELD=VALUE, got 'topic=x': 'topic' is not a WHERE term"),
    ("labelled=yes", "where_flag", "WHERE term 'labelled=yes' in --where: labelled takes no value"),
    ("metadata.n>=3", "where_operator", "WHERE term 'metadata.n>=3' in --where: metadata.n takes ="),
    ("split=", "where_split", "WHERE term 'split=' in --where: split= needs a split's name"),
    ("last=10", "where_last", "write last=Nd, 1d to 36,500d"),
    ("last=0d", "where_last", "'last=0d'"),
    ("last=36501d", "where_last", "'last=36501d'"),
    ("stream=gold", "where_stream", "WHERE term 'stream=gold' in --where: the stream is audit or triage"),
    ("metadata.=x", "where_metadata", "WHERE term 'metadata.=x'"),
    ("metadata.topic=", "where_metadata", "WHERE term 'metadata.topic='"),
    ("metadata.a..b=x", "where_metadata", "'metadata.a..b=x'"),
    ('metadata.a"b=x', "where_metadata", "'metadata.a\"b=x'"),
    ("metadata." + "k" * 201 + "=x", "where_metadata", "at most 200 characters"),
    ("started_at>=yesterday", "where_started_at", "WHERE term 'started_at>=yesterday' in --where: write started_at>=DATE"),
    ("started_at=2026-12-01", "where_started_at", "'started_at=2026-12-01'"),
    ("started_at>=1969-12-31", "where_started_at", "from 1970 to 2199"),
    ("started_at<2200-01-01", "where_started_at", "'started_at<2200-01-01'"),
    ("labelled&metadata.topic=iron&stream=both", "where_stream", "'stream=both'"),  # the term at fault, not the first
])
def test_a_bad_expression_is_refused_in_one_line_naming_the_term(text, code, words):
    with pytest.raises(WhereError) as caught:
        grammar.parse(text)
    assert caught.value.reason.code == code
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_the_refusal_names_the_option_and_takes_the_callers_kind_and_the_readers_language():
    with pytest.raises(GoldenError) as caught:
        grammar.parse("nonsense", option="--from", error=GoldenError)
    assert str(caught.value).startswith("WHERE term 'nonsense' in --from: not a term")
    from calibrate import i18n
    from calibrate.reports.summary import reason_text

    reason: Reason = caught.value.reason
    with i18n.using("es"):
        spanish = reason_text({"note": str(caught.value), "reason": reason.to_dict()})
    assert spanish.startswith("término WHERE 'nonsense' en --from: no es un término; use split=NAME")


# --------------------------------------------------------------------------- what each term selects


SAMPLES = [  # (external id, metadata, created_at, the sample's time by the one rule)
    ("s0", {"topic": "iron", "n": 3, "flag": True, "x": None, "started_at": "2026-11-01T10:00:00Z"},
     datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 11, 1, 10, tzinfo=UTC)),
    ("s1", {"topic": "zinc", "n": 3.0, "flag": False, "nested": {"a": {"b": "deep"}},
            "started_at": "2026-11-02T00:00:00+02:00"}, datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 11, 1, 22, tzinfo=UTC)),
    ("s2", {"topic": "Iron", "n": "3", "a.b": "lit", "a": {"b": "nest"}, "started_at": "yesterday"},
     datetime(2026, 11, 20, tzinfo=UTC), datetime(2026, 11, 20, tzinfo=UTC)),  # not a time: its creation time
    ("s3", {"topic": "", "n": 2.5, "list": [1], "obj": {"k": 1}, "started_at": "1900-01-01T00:00:00Z"},
     datetime(2026, 11, 25, tzinfo=UTC), datetime(2026, 11, 25, tzinfo=UTC)),  # outside calibrate.bounds: its creation time
    ("s4", {"n": 1e20, "word": "café", "flag": "true", "started_at": 1.7e9},
     datetime(2026, 12, 2, 23, tzinfo=UTC), datetime(2026, 12, 2, 23, tzinfo=UTC)),  # a number: its creation time
    ("s5", {"a": {"b": "nest"}, "flag": 1, "started_at": "2026-12-03"}, datetime(2026, 12, 3, tzinfo=UTC), datetime(2026, 12, 3, tzinfo=UTC)),
    ("s6", {}, datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC)),
]
SPLITS = {"s0": "test", "s1": "test", "s2": "dev"}


def _number(text):
    return float(text) if grammar.JSON_NUMBER.fullmatch(text) else None


def metadata_matches(meta: dict, path: str, value: str) -> bool:
    """docs/cli.md's rule, read plainly: text equal, a number equal as a number, a boolean by true/false in any case."""
    found = grammar.metadata_value(meta, path)
    if isinstance(found, bool):
        return value.lower() == str(found).lower()
    if isinstance(found, (int, float)):
        return _number(value) is not None and math.isclose(_number(value), found, rel_tol=0, abs_tol=0)
    return isinstance(found, str) and found == value


METADATA_CASES = [
    ("topic", "iron"), ("topic", "Iron"), ("topic", "zinc"), ("n", "3"), ("n", "3.0"), ("n", "2.5"), ("n", "1e20"),
    ("n", "100000000000000000000"), ("n", "03"), ("flag", "true"), ("flag", "True"), ("flag", "false"), ("flag", "1"),
    ("x", "None"), ("x", "null"), ("nested.a.b", "deep"), ("nested.a", "deep"), ("a.b", "lit"), ("a.b", "nest"),
    ("list", "[1]"), ("obj", '{"k": 1}'), ("word", "café"), ("missing", "x"), ("started_at", "yesterday"),
]


def build(session) -> dict[str, int]:
    """Store SAMPLES in dataset d with labels, streams and a verdict each; return external id → sample id."""
    add_task(session, TASK, target="sample", kind="categorical", labels=["pass", "fail"])
    store = Store(session)
    for sid, meta, created, _time in SAMPLES:
        sample = store.sample(sid, n_claims=1, meta=meta)
        sample.created_at, sample.split = created, SPLITS.get(sid)
    store.label(TASK, "ana", "s0", "pass")
    store.label(TASK, "ana", "s1", "pass")
    store.label("claim_support", "ana", "s2", "supported", claim=0)  # another task
    store.label(TASK, "ben", "s3", "fail", adjudicated=True)
    store.label("claim_support", "ben", "s4", "supported", claim=0)
    session.flush()
    ids = {sid: s.id for sid, s in store.samples.items()}
    stale = session.exec(select(Label).where(Label.sample_id == ids["s1"])).one()
    stale.stale = True  # a stale label: not current
    store.claims[("s4", 0)].active = False  # a label on a retired claim: not current
    ana = session.exec(select(Label).where(Label.sample_id == ids["s0"])).one().annotator_id
    for sid, stream in (("s0", "audit"), ("s2", "audit"), ("s3", "triage"), ("s5", None)):
        session.add(Assignment(sample_id=ids[sid], user_id=ana, stream=stream, audit_prob=1.0 if stream == "audit" else None))
    for sid in ids:
        store.verdict("J", TASK, sid, "pass")
    store.commit()
    return ids


def expected(ids: dict[str, int], task_ids_named: bool, text: str) -> list[int]:
    """The samples WHERE `text` names, by docs/cli.md read plainly (labels and streams as `build` stored them)."""
    labelled = {"s0", "s3"} if task_ids_named else {"s0", "s2", "s3"}
    streams = {"audit": {"s0", "s2"}, "triage": {"s3"}}
    out = []
    for sid, meta, created, time in SAMPLES:
        keep = True
        for term in grammar.parse(text).terms:
            if term.name == "metadata":
                keep &= metadata_matches(meta, term.path, term.value)
            elif term.name == "split":
                keep &= SPLITS.get(sid) == term.value
            elif term.name == "last":
                keep &= created >= NOW - timedelta(days=term.value)
            elif term.name == "stream":
                keep &= sid in streams[term.value]
            elif term.name in ("labelled", "unlabelled"):
                keep &= (sid in labelled) == (term.name == "labelled")
            else:
                keep &= {">=": time >= term.value, ">": time > term.value, "<=": time <= term.value,
                         "<": time < term.value}[term.op]
        if keep:
            out.append(ids[sid])
    return sorted(out)


COMBINED = ["split=test", "split=dev&metadata.topic=Iron", "labelled", "unlabelled", "stream=audit", "stream=triage",
            "stream=audit&labelled", "last=7d", "last=2d&unlabelled", "started_at>=2026-11-20",
            "started_at<2026-11-01T22:00:00Z", "started_at<=2026-11-01T22:00:00Z", "started_at>2026-11-01T22:00:00Z",
            "started_at>=2026-11-01&started_at<2026-11-02", "started_at>=2026-12-02T23:00:00+00:00",
            "started_at>=2026-12-03T01:00:00+02:00", "metadata.a.b=nest&started_at>=2026-12-01&unlabelled",
            "stream=audit&metadata.topic=Iron&started_at<2026-12-01&labelled"]


def check_semantics(engine) -> int:
    """Compare what select_ids selects with `expected` for every case; return how many were checked (on any database)."""
    with Session(engine, expire_on_commit=False) as session:
        ids = build(session)
        dataset = session.exec(select(Dataset).where(Dataset.name == "d")).one()
        task_id = session.exec(select(Task).where(Task.name == TASK)).one().id
        checked = 0
        for path, value in METADATA_CASES:
            text = f"metadata.{path}={value}"
            assert grammar.select_ids(session, dataset, text, now=NOW) == expected(ids, False, text), text
            checked += 1
        for text in COMBINED:
            assert grammar.select_ids(session, dataset, text, now=NOW) == expected(ids, False, text), text
            assert grammar.select_ids(session, dataset, text, now=NOW, task_ids=[task_id]) == expected(ids, True, text), text
            checked += 2
        assert grammar.select_ids(session, dataset, "labelled", task_ids=[]) == []  # no task in scope: nothing labelled
        with pytest.raises(WhereError, match="no sample of d has metadata.topic=gold"):
            grammar.select_ids(session, dataset, "metadata.topic=gold", required=True)
    return checked


def test_each_term_selects_what_the_docs_say_on_sqlite(engine):
    assert check_semantics(engine) == len(METADATA_CASES) + 2 * len(COMBINED)


def test_the_reference_itself_tells_the_cases_apart():
    """The cases are not vacuous: the plain reading selects different, non-empty sets for most of them."""
    ids = {sid: n for n, (sid, *_rest) in enumerate(SAMPLES)}
    found = {text: tuple(expected(ids, False, text)) for text in [f"metadata.{p}={v}" for p, v in METADATA_CASES] + COMBINED}
    assert sum(1 for chosen in found.values() if chosen) >= 30 and len(set(found.values())) >= 15
    assert found["metadata.n=3"] == (0, 1, 2) and found["metadata.a.b=lit"] == (2,) and found["metadata.a.b=nest"] == (5,)
    assert found["metadata.flag=True"] == (0,) and found["metadata.flag=true"] == (0, 4) and found["metadata.x=None"] == ()


# --------------------------------------------------------------------------- one sample set, whichever command asks


def test_estimate_sample_and_export_choose_the_same_samples(runner, session, tmp_path):
    """60 samples, iron/zinc, audit and triage, a start time per day of November: the WHERE of every command names the
    same samples (estimate: its targets; sample: what it queued; export: samples, labels and assignments written)."""
    assert runner.invoke(["task", "add", TASK, "--target", "sample", "--kind", "categorical",
                          "--labels", "pass,fail"]).exit_code == 0
    store = Store(session)
    for i in range(60):
        store.sample(f"s{i:02d}", meta={"topic": "iron" if i % 2 == 0 else "zinc",
                                        "started_at": f"2026-11-{i % 30 + 1:02d}T08:00:00Z"})
        store.verdict("J", TASK, f"s{i:02d}", "pass" if i % 5 else "fail")
        if i % 4 != 3:
            store.label(TASK, "ana", f"s{i:02d}", "pass" if i % 7 else "fail")
    session.flush()
    ana = session.exec(select(Label)).first().annotator_id
    for i in range(60):
        stream = "audit" if i % 3 != 2 else "triage"
        session.add(Assignment(sample_id=store.samples[f"s{i:02d}"].id, user_id=ana, stream=stream,
                               audit_prob=0.5 if stream == "audit" else None, status="done"))
    store.commit()
    where = "metadata.topic=iron & stream=audit & started_at>=2026-11-10"
    want = sorted(f"s{i:02d}" for i in range(60) if i % 2 == 0 and i % 3 != 2 and i % 30 + 1 >= 10)
    assert 10 <= len(want) < 30

    estimated = runner.invoke(["estimate", "--dataset", "d", "--judge", "J", "--task", TASK, "--where", where])
    assert estimated.exit_code == 0, estimated.output
    data = json.loads(estimated.output)
    assert data["where"] == where and data["n_labelled"] + data["n_unlabelled"] == len(want)
    assert data["n_labelled"] == sum(1 for sid in want if int(sid[1:]) % 4 != 3)

    out = tmp_path / "samples.jsonl"
    exported = runner.invoke(["export", "samples", "--dataset", "d", "--where", where, "-o", str(out)])
    assert exported.exit_code == 0, exported.output
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == want
    labels = runner.invoke(["export", "labels", "--dataset", "d", "--where", where])
    assert sorted({json.loads(line)["sample_id"] for line in labels.stdout.splitlines()}) == \
        [sid for sid in want if int(sid[1:]) % 4 != 3]
    verdicts = runner.invoke(["export", "verdicts", "--dataset", "d", "--where", where])
    assert sorted(json.loads(line)["sample_id"] for line in verdicts.stdout.splitlines()) == want
    assignments = runner.invoke(["export", "assignments", "--dataset", "d", "--where", where])
    assert sorted(json.loads(line)["sample_id"] for line in assignments.stdout.splitlines()) == want

    sampled = runner.invoke(["sample", "--dataset", "d", "--n", "1000", "--where", where])
    assert sampled.exit_code == 0, sampled.output
    assert sampled.output.startswith(f"sampled all {len(want)} samples of d (asked for 1000; seed 0, among those matching {where})")
    with write_session(session.get_bind()) as writing:  # what it took (queued already: the audit's assignments)
        taken = sample_dataset(writing, "d", n=1000, where=where).external_ids
    assert sorted(taken) == want
    part = runner.invoke(["sample", "--dataset", "d", "--n", "3", "--where", where, "--seed", "4"])
    assert part.output.startswith(f"sampled 3 of {len(want)} samples of d (seed 4, among those matching")


@pytest.mark.parametrize("args", [
    ["estimate", "--dataset", "d", "--judge", "J", "--task", TASK],
    ["sample", "--dataset", "d", "--n", "2"],
    ["export", "samples", "--dataset", "d", "-o", "OUT"],
    ["export", "labels", "--dataset", "d"],
    ["export", "verdicts", "--dataset", "d"],
    ["export", "assignments", "--dataset", "d"],
    ["golden", "create", "g", "--dataset", "d"],
])
def test_every_command_refuses_a_bad_where_and_an_empty_match_in_one_line(runner, session, tmp_path, args):
    assert runner.invoke(["task", "add", TASK, "--target", "sample", "--kind", "categorical",
                          "--labels", "pass,fail"]).exit_code == 0
    store = Store(session)
    for i in range(4):
        store.sample(f"s{i}", meta={"topic": "iron"})
        store.verdict("J", TASK, f"s{i}", "pass")
        store.label(TASK, "ana", f"s{i}", "pass")
    store.commit()
    args = [str(tmp_path / "out.jsonl") if a == "OUT" else a for a in args]
    bad = runner.invoke([*args, "--where", "metadata.topic=iron&stream=gold"])
    assert bad.exit_code == 2 and bad.output.count("\n") == 1
    assert "error: WHERE term 'stream=gold' in --where: the stream is audit or triage" in bad.output
    none = runner.invoke([*args, "--where", "metadata.topic=zinc"])
    assert none.exit_code == 2 and none.output.count("\n") == 1
    assert "no sample of d " in none.output and "metadata.topic=zinc" in none.output
