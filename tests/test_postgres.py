"""calibrate on PostgreSQL: the flows of a real install, against a throwaway cluster of its own.

The session fixture `pg_cluster` starts a cluster from the installed server binaries
(`initdb`, `pg_ctl` under /usr/lib/postgresql/*/bin; as the `postgres` user when the suite runs
as root, because initdb refuses root), listening on a unix socket in its own temporary folder.
One database is migrated with Alembic like a real install and every test gets a copy of it
(`CREATE DATABASE … TEMPLATE`, a file copy). Overriding `db_url` points conftest's engine,
session, app, client, login and runner at that copy, so the tests below drive the same
fixtures and flows as the SQLite suite; numbers are checked equal to the same flow on SQLite.

The server binaries are a test requirement like Chromium: without them these tests fail
(one line: what to install), they are never skipped.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner
from sqlalchemy import text
from sqlmodel import Session, SQLModel, func, select

from calibrate import create_app
from calibrate.calibration import Options, build_report
from calibrate.calibration.compare import compare_judges
from calibrate.db import dispose_engine, get_engine, write_session
from calibrate.demo import AB_DATASET, DATASET, DEMO_USERS, load_demo
from calibrate.judges.runner import RunSpec, run_judge
from calibrate.migrations import upgrade
from calibrate.models import Assignment, Claim, Label, LabelRevision, Response, ResponseCache, Verdict
from calibrate.tasks import ensure_builtin_tasks

sys.path.insert(0, str(Path(__file__).resolve().parent / "judges"))

from fakellm import FakeLLM
from judge_helpers import fast_options, write_samples
from server_helpers import free_port, request, session_cookie, start_workers

pytestmark = pytest.mark.postgres

DATA = Path(__file__).resolve().parent / "data"
HX = {"HX-Request": "true"}
# Every judge the demo stores, and the number of resamples that keeps the comparison quick.
DEMO_JUDGES = ("demo-claims@1", "demo-claims@2", "demo-faithfulness@1", "demo-context-precision@1")
QUICK = Options(bootstrap=200)


# --------------------------------------------------------------------------- the cluster


def _server_bin(root: Path = Path("/usr/lib/postgresql")) -> Path:
    """Return the folder of the newest installed PostgreSQL server binaries (Debian's layout, else PATH), or fail in one line."""
    found = sorted(root.glob("*/bin/initdb"),
                   key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0)
    initdb = found[-1] if found else shutil.which("initdb")
    if initdb is None:
        pytest.fail("PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql", pytrace=False)
    return Path(initdb).parent


@dataclass
class Cluster:
    """A running throwaway cluster: its socket folder and port, and the databases made from templates."""

    socket_dir: str
    port: int
    templates: set[str] = field(default_factory=set)
    copies: int = 0

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://calibrate@/{database}?host={self.socket_dir}&port={self.port}"

    def admin(self, sql: str) -> None:
        """Run a statement outside a transaction (CREATE DATABASE cannot run inside one)."""
        import psycopg

        with psycopg.connect(host=self.socket_dir, port=self.port, user="calibrate", dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(sql)

    def template(self, name: str, fill) -> str:
        """Return the name of a template database, made once: migrated, built-in tasks, then `fill(engine)`."""
        if name not in self.templates:
            self.admin(f"CREATE DATABASE {name}")
            url = self.url(name)
            engine = get_engine(url)
            upgrade(engine)
            with write_session(engine) as session:
                ensure_builtin_tasks(session)
            fill(engine)
            dispose_engine(url)  # a template must have no open connection when it is copied
            self.templates.add(name)
        return name

    def copy(self, template: str) -> str:
        """Return the URL of a new database copied from a template."""
        self.copies += 1
        name = f"test_{self.copies}"
        self.admin(f"CREATE DATABASE {name} TEMPLATE {template}")
        return self.url(name)


@pytest.fixture(scope="session")
def pg_cluster():
    """Start a PostgreSQL cluster on a unix socket in a temporary folder; stop and delete it at the end."""
    bin_dir = _server_bin()
    as_user: list[str] = []
    root = tempfile.mkdtemp(prefix="calibrate-pg-")  # short: a unix socket path has ~100 bytes
    if os.geteuid() == 0:  # initdb refuses root: the Debian package's `postgres` user runs it
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.fail("initdb refuses root and there is no `postgres` user: apt-get install postgresql, "
                        "or run the tests as another user", pytrace=False)
        os.chown(root, owner.pw_uid, owner.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, log, port = f"{root}/data", f"{root}/server.log", free_port()

    def run(*args: str) -> None:
        done = subprocess.run([*as_user, *args], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            log_text = Path(log).read_text() if Path(log).exists() else ""
            pytest.fail(f"{' '.join(args)} failed: {done.stderr.strip()} {log_text[-2000:]}", pytrace=False)

    # Throwaway: no fsync, trust on the socket only (no TCP listener at all).
    options = f"-p {port} -k {root} -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    try:
        run(str(bin_dir / "initdb"), "-D", data, "-U", "calibrate", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions")
        run(str(bin_dir / "pg_ctl"), "-D", data, "-l", log, "-o", options, "-w", "start")
        yield Cluster(socket_dir=root, port=port)
    finally:
        subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop"],
                       capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def demo():
    """Ask for the demo: a test that names this fixture gets a database with the demo loaded."""
    return DATASET


@pytest.fixture
def db_url(pg_cluster, request):
    """Return the URL of a fresh PostgreSQL database: migrated, built-in tasks (and the demo, for `demo` tests)."""
    if "demo" in request.fixturenames:
        template = pg_cluster.template("template_demo", load_demo)
    else:
        template = pg_cluster.template("template_empty", lambda engine: None)
    url = pg_cluster.copy(template)
    yield url
    dispose_engine(url)


@pytest.fixture(scope="module")
def sqlite_demo(template_db, tmp_path_factory):
    """The same demo on SQLite (the suite's usual migrated template): the reference for the numbers."""
    path = tmp_path_factory.mktemp("sqlite-demo") / "calibrate.sqlite"
    shutil.copyfile(template_db, path)
    url = f"sqlite:///{path}"
    load_demo(get_engine(url))
    yield SimpleNamespace(url=url, engine=get_engine(url),
                          app=create_app({"TESTING": True, "DATABASE_URL": url, "SECRET_KEY": "test",
                                          "INSTANCE_PATH": str(path.parent / "instance")}))
    dispose_engine(url)


def _dump(engine) -> dict[str, list[tuple]]:
    """Return every row of every table, in primary-key order."""
    with engine.connect() as conn:
        return {table.name: [tuple(row) for row in conn.execute(table.select().order_by(*table.primary_key.columns))]
                for table in SQLModel.metadata.sorted_tables}


def _as_json(data: dict) -> str:
    """Return a report's data as JSON without its timestamp (NaN compares equal to NaN this way)."""
    return json.dumps({k: v for k, v in data.items() if k != "generated_at"}, sort_keys=True, default=str)


def _soup(response):
    return BeautifulSoup(response.get_data(as_text=True), "html.parser")


# --------------------------------------------------------------------------- schema and imports


def test_missing_server_binaries_fail_with_the_line_to_install_them(monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception, match=r"^PostgreSQL server binaries \(initdb, pg_ctl\) not found: apt-get install postgresql$"):
        _server_bin(tmp_path)
    (tmp_path / "9" / "bin").mkdir(parents=True)
    (tmp_path / "15" / "bin").mkdir(parents=True)
    for version in ("9", "15"):
        (tmp_path / version / "bin" / "initdb").touch()
    assert _server_bin(tmp_path) == tmp_path / "15" / "bin"  # the newest, by number not by text


def test_the_cluster_is_postgresql_and_the_schema_matches_the_models(engine):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    assert engine.dialect.name == "postgresql"
    with engine.connect() as conn:
        assert conn.execute(text("SELECT current_setting('server_version_num')::int")).scalar() >= 120000
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": False}), SQLModel.metadata)
    assert diff == []


def test_the_demo_loads_once_and_ids_keep_counting_after_it(engine, session, demo, sqlite_demo):
    counts = {table: len(rows) for table, rows in _dump(engine).items()}
    assert counts == {table: len(rows) for table, rows in _dump(sqlite_demo.engine).items()}
    # 40 RAG samples and 8 pairwise items (16 responses), 500 + 14 labels, 80 + 16 assignments; the production
    # source (calibrate/demo/production.py): 210 samples (969 segmented claims), 158 labels and assignments; the agent
    # demo: 30 samples (90 segmented claims, 163 steps), 386 labels
    assert (counts["sample"], counts["claim"], counts["label"], counts["assignment"]) == (288, 1243, 1058, 254)
    assert counts["step"] == 163
    in_orders = session.exec(select(func.count()).select_from(Verdict).where(Verdict.order_key != "")).one()
    assert (counts["response"], in_orders) == (16, 16)  # the pairwise judge: 8 items × 2 orders
    before = _dump(engine)
    again = load_demo(engine)
    assert _dump(engine) == before
    assert any("unchanged" in line or "nothing changed" in line for line in again.lines())
    # Imports insert explicit ids; the sequences must have moved past them, or the next
    # ordinary insert collides with an imported row.
    from calibrate.accounts import add_user

    claim = session.exec(select(Claim)).first()
    task_id = session.exec(select(Label.task_id).where(Label.claim_id.is_not(None))).first()
    label = Label(task_id=task_id, sample_id=claim.sample_id, claim_id=claim.id, annotator_id=add_user(session, "new").id,
                  value="supported", target_key=f"claim:{claim.id}")
    session.add(label)
    session.commit()
    assert label.id > max(row[0] for row in before["label"])


def test_good_files_import_and_a_bad_file_is_rejected_whole(runner, engine):
    for kind, file, extra in (("samples", "samples.jsonl", []), ("labels", "labels.jsonl", []),
                              ("verdicts", "verdicts.jsonl", ["--judge", "gpt"])):
        result = runner.invoke(["import", kind, str(DATA / "good" / file), "--dataset", "d", *extra])
        assert result.exit_code == 0, result.output
    for kind, file in (("samples", "samples.csv"), ("samples", "samples.json"), ("samples", "samples_ragas.jsonl")):
        result = runner.invoke(["import", kind, str(DATA / "good" / file), "--dataset", file.replace(".", "-")])
        assert result.exit_code == 0 and " 3 added" in result.output, result.output
    before = _dump(engine)
    assert len(before["sample"]) == 12 and len(before["label"]) == 7 and len(before["verdict"]) == 4
    # Files whose problems are only found against the stored rows (a changed sample, a claim
    # index past the sample's claims, a sample the dataset lacks).
    for kind, file in (("samples", "changed_sample.jsonl"), ("labels", "claim_out_of_range.jsonl"),
                       ("labels", "unknown_sample.jsonl"), ("samples", "duplicate_ids.jsonl")):
        result = runner.invoke(["import", kind, str(DATA / "bad" / file), "--dataset", "d"])
        assert result.exit_code == 2 and "rejected, nothing imported" in result.output, result.output
        assert _dump(engine) == before


# --------------------------------------------------------------------------- labelling through the web


def test_labelling_autosaves_keeps_revisions_never_duplicates_and_submits(client, session, make_sample, login):
    from calibrate.accounts import get_user

    token = login("ana")
    ana = get_user(session, "ana")
    sample = make_sample()
    assignment = Assignment(sample_id=sample.id, user_id=ana.id)
    session.add(assignment)
    session.commit()
    url = f"/annotate/{assignment.id}"
    claims = session.exec(select(Claim).where(Claim.sample_id == sample.id).order_by(Claim.index)).all()

    def label(target: str, value: str | None = None, task: str = "claim_support", **fields):
        data = {"task": task, "target": target, **fields} | ({"value": value} if value is not None else {})
        return client.post(f"{url}/label", data=data, headers={**HX, "X-CSRFToken": token})

    def count(model) -> int:
        session.commit()  # end the read transaction and forget loaded rows: see what the app committed
        session.expire_all()
        return session.exec(select(func.count()).select_from(model)).one()

    page = _soup(client.get(url))
    assert page.select_one(f".cell[data-target='claim:{claims[0].id}']")["data-state"] == "empty"
    first = f"claim:{claims[0].id}"
    for _ in range(3):  # a double (triple) POST
        cell = _soup(label(first, "supported")).select_one(".cell")
        assert (cell["data-state"], cell["data-value"]) == ("saved", "supported")
    assert (count(Label), count(LabelRevision)) == (1, 1)
    assert label(first, "unsupported").status_code == 200
    assert label(first, rationale="<b>dice</b> 0,4 mg", evidence="0").status_code == 200
    assert label(first, "maybe").status_code == 422
    assert count(LabelRevision) >= 2
    stored = session.exec(select(Label)).one()
    assert (stored.value, stored.rationale, stored.evidence) == ("unsupported", "<b>dice</b> 0,4 mg", [0])
    history = _soup(client.get(f"{url}/history", query_string={"task": "claim_support", "target": first}, headers=HX))
    assert [[td.get_text() for td in tr.select("td")][1:4] for tr in history.select("#history tbody tr")][-2:] == [
        ["ana", "changed from", "Supported"], ["ana", "created as", "Supported"]]
    missing = client.post(f"{url}/submit", headers={**HX, "X-CSRFToken": token})
    assert missing.status_code == 422
    assert label(f"claim:{claims[1].id}", "supported").status_code == 200
    assert label(f"sample:{sample.id}", "4", task="answer_quality").status_code == 200
    done = client.post(f"{url}/submit", headers={**HX, "X-CSRFToken": token})
    assert done.status_code == 204 and done.headers["HX-Redirect"] == "/annotate"
    again = client.post(f"{url}/submit", data={"csrf_token": token})
    assert again.status_code == 303
    assert count(Label) == 3
    assert session.get(Assignment, assignment.id).status == "done"


def test_a_pairwise_item_labelled_through_the_web_records_the_order(client, session, make_sample, login):
    from calibrate.accounts import get_user
    from calibrate.annotation.items import presentation_order
    from calibrate.tasks import add_task

    token = login("ana")
    ana = get_user(session, "ana")
    sample = make_sample(external_id="ab", answer="", claims=[])
    for position, key in enumerate(("A", "B")):
        session.add(Response(sample_id=sample.id, position=position, key=key, text=f"respuesta {key}"))
    add_task(session, "pref", target="sample", kind="pairwise", labels=["A", "B", "tie"])
    assignment = Assignment(sample_id=sample.id, user_id=ana.id)
    session.add(assignment)
    session.commit()
    order = presentation_order(ana.id, sample.id, ["A", "B"])
    url = f"/annotate/{assignment.id}"
    for value in ("2", "tie", "2"):
        response = client.post(f"{url}/label", data={"task": "pref", "target": f"sample:{sample.id}", "value": value},
                               headers={**HX, "X-CSRFToken": token})
        assert response.status_code == 200
    assert client.post(f"{url}/undo", headers={**HX, "X-CSRFToken": token}).status_code == 200
    session.commit()
    session.expire_all()
    label = session.exec(select(Label)).one()
    assert (label.value, label.order) == ("tie", order)
    revisions = session.exec(select(LabelRevision).where(LabelRevision.label_id == label.id)).all()
    assert {tuple(r.order) for r in revisions} == {tuple(order)}


# --------------------------------------------------------------------------- judges


def test_a_baseline_run_and_an_http_run_then_its_rerun_from_the_cache(runner, engine, session, tmp_path):
    from calibrate.ingest import import_file
    from calibrate.judges import save_version

    with write_session(engine) as s:
        import_file(s, "samples", write_samples(tmp_path / "many.jsonl", 6, 5), dataset="many")
        save_version(s, "claims", task="claim_support", model="fake-model")
    result = runner.invoke(["judge", "run", "--dataset", "many", "--prompt", "claims@1", "--backend", "baseline"])
    assert result.exit_code == 0 and "30/30 targets judged" in result.output, result.output
    server = FakeLLM().start()
    try:
        spec = RunSpec(dataset="many", prompt="claims@1", backend="openai", base_url=server.openai_base, api_key_env="",
                       options=fast_options(), rerun=True)
        first = run_judge(engine, spec)
        assert (first.status, first.n_ok, server.stats()["counts"]["openai"]) == ("done", 30, 30)
        server.reset()
        again = run_judge(engine, spec)
        assert (again.status, again.n_ok, again.n_cached, again.calls) == ("done", 30, 30, 0)
        assert server.stats()["requests"] == 0
    finally:
        server.stop()
    session.commit()
    assert session.exec(select(func.count()).select_from(ResponseCache)).one() == 30
    latest = session.exec(select(Verdict.target_key, func.count()).where(Verdict.run_id == again.run_id)
                          .group_by(Verdict.target_key)).all()
    assert len(latest) == 30 and {n for _, n in latest} == {1}


# --------------------------------------------------------------------------- reports, compare, dashboard, queue


def test_reports_and_comparisons_equal_the_same_demo_on_sqlite(session, demo, sqlite_demo):
    with Session(sqlite_demo.engine) as reference:
        for judge in DEMO_JUDGES:
            expected = build_report(reference, DATASET, judge, options=QUICK).data
            got = build_report(session, DATASET, judge, options=QUICK).data
            assert _as_json(got) == _as_json(expected), judge
        for options in (QUICK, Options(bootstrap=200, split="dev")):
            expected = compare_judges(reference, DATASET, "demo-claims@1", "demo-claims@2", options=options)
            got = compare_judges(session, DATASET, "demo-claims@1", "demo-claims@2", options=options)
            assert _as_json(got) == _as_json(expected)
    assert expected["tasks"]["claim_support"]["common_n"] > 0
    # the pairwise demo: two orders, the order rules, the position block (JSON orders read with ->> on PostgreSQL)
    with Session(sqlite_demo.engine) as reference:
        for rule in ("consistent", "original"):
            options = Options(bootstrap=200, order_rule=rule)
            expected = build_report(reference, AB_DATASET, "demo-preference@1", options=options).data
            got = build_report(session, AB_DATASET, "demo-preference@1", options=options).data
            assert _as_json(got) == _as_json(expected), rule
    position = got["tasks"]["preference"]["position"]
    assert position["n_pairs"] == 8 and position["n_human_with_order"] == 13


def test_estimates_by_week_and_weighted_by_inclusion_prob_equal_sqlite(session, demo, sqlite_demo):
    """`calibrate estimate` reads metadata.started_at and metadata.inclusion_prob with the database's JSON operators
    (json_extract on SQLite, ->> on PostgreSQL): the same numbers on both (the weights set in the transaction only)."""
    from calibrate.calibration.estimate import run_estimate
    from calibrate.models import Sample

    def weigh(db_session):
        for sample in db_session.exec(select(Sample)).all():
            sample.meta = {**sample.meta, "inclusion_prob": 0.5 if sample.id % 3 else 0.9}
            db_session.add(sample)
        db_session.flush()

    results = []
    for db_session in (Session(sqlite_demo.engine), session):
        with db_session:
            plain = run_estimate(db_session, DATASET, "claim_support", "demo-claims@2", by_window="week")
            weigh(db_session)
            weighted = run_estimate(db_session, DATASET, "claim_support", "demo-claims@2", by_window="week")
            db_session.rollback()
        results.append((plain, weighted))
    (sqlite_plain, sqlite_weighted), (pg_plain, pg_weighted) = results
    assert _as_json(pg_plain) == _as_json(sqlite_plain) and _as_json(pg_weighted) == _as_json(sqlite_weighted)
    assert len(pg_plain["windows"]) == 4 and pg_weighted["weighted"] is True and pg_plain["weighted"] is False


def _judges_table(client, username: str, password: str) -> list[list[str]]:
    """Log a test client in and return the dashboard's judge rows as text (one list of cells per judge)."""
    token = _soup(client.get("/login")).select_one("input[name=csrf_token]")["value"]
    assert client.post("/login", data={"username": username, "password": password, "csrf_token": token}).status_code == 303
    page = _soup(client.get(f"/datasets/{DATASET}/calibration"))
    return [[cell.get_text(" ", strip=True) for cell in row.select("td, th")] for row in page.select("#judges tbody tr[data-judge]")]


def test_cli_report_dashboard_and_queue_order_agree_with_sqlite(runner, client, demo, sqlite_demo):
    def on_sqlite(args: list[str]) -> str:
        from calibrate.cli import cli

        return CliRunner().invoke(cli, args, obj=sqlite_demo.app, catch_exceptions=False).output

    report = ["report", "--dataset", DATASET, "--judge", "demo-claims@2", "--format", "json", "--bootstrap", "200"]
    result = runner.invoke(report)
    assert result.exit_code == 0, result.output
    assert _as_json(json.loads(result.output)) == _as_json(json.loads(on_sqlite(report)))
    _, _, _, password = next(user for user in DEMO_USERS if user[0] == "engineer")
    table = _judges_table(client, "engineer", password)
    assert [row[0] for row in table] == ["demo-claims@1", "demo-claims@2"]
    assert table == _judges_table(sqlite_demo.app.test_client(), "engineer", password)
    for mode in ("uncertain", "sampled"):
        order = ["queue", "order", "--dataset", DATASET, "--mode", mode]
        result = runner.invoke(order)
        assert result.exit_code == 0 and "12 of 12 pending items moved" in result.output, result.output
        assert result.output == on_sqlite(order)


def _streams(engine, dataset: str) -> list[tuple]:
    """Return a dataset's stream assignments and audit draws by external id and username (ids may differ)."""
    from calibrate.models import AuditDraw, Dataset, Sample, User

    with Session(engine) as db_session:
        dataset_id = db_session.exec(select(Dataset.id).where(Dataset.name == dataset)).one()
        assignments = db_session.exec(
            select(Sample.external_id, User.username, Assignment.stream, Assignment.audit_prob, Assignment.priority, Assignment.status)
            .join(Sample, Sample.id == Assignment.sample_id).join(User, User.id == Assignment.user_id)
            .where(Sample.dataset_id == dataset_id, Assignment.stream.is_not(None))).all()
        draws = db_session.exec(select(Sample.external_id, AuditDraw.drawn, AuditDraw.probability)
                                .join(Sample, Sample.id == AuditDraw.sample_id).where(AuditDraw.dataset_id == dataset_id)).all()
    return sorted(tuple(row) for row in assignments) + sorted(("draw", *row) for row in draws)


def test_queue_auto_and_monitor_on_the_demo_production_source_equal_sqlite(runner, engine, demo, sqlite_demo, tmp_path):
    """The demo's production source (its queue policy applied day by day), `queue auto` run again now, then `monitor`
    and `gate --production`: the same streams, draws, JSON and exit codes on PostgreSQL as on SQLite."""
    import sqlite3

    from calibrate.cli import cli
    from calibrate.demo.production import PROD_DATASET, PROD_JUDGE

    # queue auto writes: a copy of the module's SQLite demo, so the other tests keep theirs
    copy = tmp_path / "calibrate.sqlite"
    with sqlite3.connect(sqlite_demo.url.removeprefix("sqlite:///")) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    url = f"sqlite:///{copy}"
    sqlite_app = create_app({"TESTING": True, "DATABASE_URL": url, "SECRET_KEY": "test", "INSTANCE_PATH": str(tmp_path / "instance")})

    def on_sqlite(args: list[str]):
        return CliRunner().invoke(cli, args, obj=sqlite_app, catch_exceptions=False)

    try:
        before = _streams(engine, PROD_DATASET)
        assert before == _streams(get_engine(url), PROD_DATASET)
        assert sum(row[2] == "audit" for row in before) > 50 and sum(row[2] == "triage" for row in before) > 20
        # a fourth week arrives and is judged: today's pass has new samples to draw from and to triage
        new = [{"id": f"late-{i:02d}", "question": f"q{i}", "answer": f"a{i}", "contexts": [],
                "metadata": {"started_at": f"2026-11-{23 + i % 5}T{9 + i}:00:00Z", "inclusion_prob": 1.0 if i % 4 == 0 else 0.2},
                **({"feedback": -1} if i % 4 == 0 else {})} for i in range(12)]
        verdicts = [{"sample_id": f"late-{i:02d}", "task": "answer_quality", "value": 1 + i % 5} for i in range(12)]
        (tmp_path / "late.jsonl").write_text("".join(json.dumps(row) + "\n" for row in new), encoding="utf-8")
        (tmp_path / "late-verdicts.jsonl").write_text("".join(json.dumps(row) + "\n" for row in verdicts), encoding="utf-8")
        for args in (["import", "samples", str(tmp_path / "late.jsonl"), "--dataset", PROD_DATASET],
                     ["import", "verdicts", str(tmp_path / "late-verdicts.jsonl"), "--dataset", PROD_DATASET, "--judge", PROD_JUDGE]):
            result = runner.invoke(args)
            assert result.exit_code == 0 and on_sqlite(args).exit_code == 0, result.output
        auto = ["queue", "auto", "--dataset", PROD_DATASET, "--daily", "12", "--assign", "dra.garcia", "--assign", "matrona.ruiz",
                "--audit-share", "0.25", "--seed", "7"]
        result = runner.invoke(auto)
        assert result.exit_code == 0, result.output
        assert result.output == on_sqlite(auto).output and "triage +" in result.output
        after = _streams(engine, PROD_DATASET)
        assert after == _streams(get_engine(url), PROD_DATASET)
        added = [row for row in after if row not in before]
        assert {row[2] for row in added if row[0] != "draw"} == {"audit", "triage"}
        assert sum(1 for row in added if row[0] == "draw") == 12  # every new judged sample a candidate once
        for args in (["monitor", "--dataset", PROD_DATASET, "--judge", PROD_JUDGE, "--min", "3.5"],
                     ["monitor", "--dataset", PROD_DATASET, "--judge", PROD_JUDGE, "--by-window", "day", "--min", "4.0"]):
            result = runner.invoke(args)
            assert result.exit_code == 0, result.output
            pg, lite = json.loads(result.output), json.loads(on_sqlite(args).output)
            assert _as_json({k: v for k, v in pg.items() if k != "now"}) == _as_json({k: v for k, v in lite.items() if k != "now"})
        weekly = json.loads(runner.invoke(["monitor", "--dataset", PROD_DATASET, "--judge", PROD_JUDGE, "--min", "3.5"]).output)
        assert [w["status"] for w in weekly["windows"]] == ["ok", "ok", "alert", "no data"]  # the new week: no label yet
        assert weekly["windows"][-1]["counts"]["judged"] == 12
        gate = ["gate", "--production", "--dataset", PROD_DATASET, "--judge", PROD_JUDGE, "--min", "3.5", "--min-agreement", "0.2"]
        result, lite = runner.invoke(gate), on_sqlite(gate)
        assert (result.exit_code, result.output) == (lite.exit_code, lite.output)
        assert result.exit_code == 2 and "2026-W48" in result.output  # the latest complete week has no audit label yet
    finally:
        dispose_engine(url)


def test_export_assignments_streams_the_same_rows_as_on_sqlite(runner, demo, sqlite_demo, monkeypatch):
    """`export assignments` reads one server-side cursor while it asks for each chunk's labels: the same file as SQLite."""
    from calibrate.annotation import export
    from calibrate.cli import cli
    from calibrate.demo.production import PROD_DATASET

    monkeypatch.setattr(export, "SAMPLES_PER_CHUNK", 7)  # many label queries while the cursor is open
    args = ["export", "assignments", "--dataset", PROD_DATASET, "--format", "csv"]
    result = runner.invoke(args)
    lite = CliRunner().invoke(cli, args, obj=sqlite_demo.app, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.output == lite.output and result.output.count("\n") > 100 and ",audit,0." in result.output


# --------------------------------------------------------------------------- several writers


def test_write_transactions_that_read_first_take_turns_and_lose_no_update(engine, make_sample, session):
    """What BEGIN IMMEDIATE gives on SQLite: writers of other connections (other workers) wait, none overwrites."""
    import threading

    sample = make_sample()
    assignment = Assignment(sample_id=sample.id, priority=0)
    session.add(assignment)
    session.commit()
    start = threading.Barrier(4)

    def bump() -> None:
        start.wait()
        with write_session(engine) as s:
            row = s.get(Assignment, assignment.id)
            seen = row.priority
            time.sleep(0.05)  # another worker's writer runs now, unless it waits for this one
            row.priority = seen + 1
            s.add(row)

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    session.expire_all()
    assert session.get(Assignment, assignment.id).priority == 4


def test_two_server_workers_label_the_same_item_at_once_without_duplicates(db_url, session, make_sample, make_user, tmp_path):
    """`calibrate serve --workers 2` on PostgreSQL: the same POSTs at once, from eight connections to two worker
    processes, store each label once and the item is submitted."""
    import re
    from concurrent.futures import ThreadPoolExecutor

    ana = make_user("ana")
    sample = make_sample()
    assignment = Assignment(sample_id=sample.id, user_id=ana.id)
    session.add(assignment)
    session.commit()
    claims = session.exec(select(Claim).where(Claim.sample_id == sample.id).order_by(Claim.index)).all()
    server, port, response, page = start_workers(db_url, tmp_path, workers=2, threads=4)
    try:
        cookie = session_cookie(response)
        token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
        response, _ = request(port, "POST", "/login", {"username": "ana", "password": "password-123", "csrf_token": token}, cookie)
        assert response.status == 303
        cookie = session_cookie(response)
        response, page = request(port, "GET", "/datasets", cookie=cookie)
        cookie = session_cookie(response, cookie)  # the session now holds the form token
        token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
        posts = [{"task": "claim_support", "target": f"claim:{claim.id}", "value": "supported", "csrf_token": token}
                 for claim in claims] * 8 + [
                {"task": "answer_quality", "target": f"sample:{sample.id}", "value": "4", "csrf_token": token}] * 8
        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(lambda body: request(port, "POST", f"/annotate/{assignment.id}/label", body, cookie)[0].status,
                                     posts))
        assert statuses == [303] * len(posts)  # a plain form's answer: back to the item
        response, _ = request(port, "POST", f"/annotate/{assignment.id}/submit", {"csrf_token": token}, cookie)
        assert response.status == 303
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    assert server.returncode == 0, output
    session.commit()
    session.expire_all()
    assert session.exec(select(func.count()).select_from(Label)).one() == len(claims) + 1
    assert session.exec(select(func.count()).select_from(LabelRevision)).one() == len(claims) + 1
    assert session.get(Assignment, assignment.id).status == "done"


# --------------------------------------------------------------------------- imports in chunks


def test_imports_in_one_record_chunks_publish_updates_and_clean_up_as_on_sqlite(engine, session, tmp_path):
    from calibrate.ingest import import_in_chunks
    from calibrate.models import Dataset, ImportBatch, ImportStep, LabelRevision, StagedLabel, StagedVerdict

    good = DATA / "good"

    def rewritten(name: str, change) -> Path:
        rows = [json.loads(line) for line in (good / name).read_text(encoding="utf-8").splitlines() if line.strip()]
        path = tmp_path / name
        path.write_text("".join(json.dumps(change(row)) + "\n" for row in rows), encoding="utf-8")
        return path

    def run(kind, path, **kwargs):
        return import_in_chunks(engine, kind, path, dataset="d", chunk_size=1, **kwargs)

    assert run("samples", good / "samples.jsonl").added == 3
    assert run("labels", good / "labels.jsonl").added == 7
    assert run("verdicts", good / "verdicts.jsonl", judge="gpt").added == 4
    assert "nothing changed" in run("labels", good / "labels.jsonl").line()
    changed = run("labels", rewritten("labels.jsonl", lambda row: {**row, "rationale": "seen again"}))
    assert (changed.added, changed.updated) == (0, 7)
    assert session.exec(select(func.count()).select_from(LabelRevision)).one() == 14  # 7 creates, 7 updates
    reasons = run("verdicts", rewritten("verdicts.jsonl", lambda row: {**row, "reason": "again"}), judge="gpt")
    assert (reasons.added, reasons.updated) == (0, 4)
    update = run("samples", rewritten("samples.jsonl", lambda row: {**row, "question": row["question"] + " (v2)"}),
                 update=True)
    # Every question changed: the one sample-level verdict (answer_quality of sample 2) judged other text, set aside.
    assert update.updated == 3 and update.flagged > 0 and update.stale_verdicts == 1
    session.rollback()
    for model in (ImportBatch, ImportStep, StagedLabel, StagedVerdict):
        assert session.exec(select(func.count()).select_from(model)).one() == 0, model
    dump = _dump(engine)
    assert len(dump["sample"]) == 3 and len(dump["label"]) == 7 and len(dump["verdict"]) == 3
    assert [row[-1] for row in dump["staleverdict"]][0].startswith("sample '2' changed in an --update import (question")
    assert all(row[-1] is None for row in session.exec(select(Dataset.id, Dataset.import_batch_id)).all())


def test_golden_sets_refresh_and_hash_as_on_sqlite(engine, template_db, tmp_path, runner):
    """The same data and seed give the same versions and hashes on PostgreSQL as on SQLite; a pinned gate holds."""
    from golden_helpers import DS, REFRESH, build

    from calibrate.loop import golden

    def versions(target) -> list[str]:
        build(target)
        with write_session(target) as writing:
            golden.create_golden(writing, DS, "g", split="test")
        with write_session(target) as writing:
            made = golden.refresh_golden(writing, DS, "g", **REFRESH)
        assert (made["retired"], made["added"], made["anchors"]) == (40, 40, 100)
        with Session(target) as reading:
            return [golden.show_golden(reading, DS, f"g@{v}")["hash"] for v in (1, 2)]

    on_postgres = versions(engine)
    path = tmp_path / "reference.sqlite"
    shutil.copyfile(template_db, path)
    url = f"sqlite:///{path}"
    try:
        assert versions(get_engine(url)) == on_postgres
    finally:
        dispose_engine(url)
    gate = runner.invoke(["gate", "--dataset", DS, "--judge", "j", "--bootstrap", "200", "--golden", "g@1"])
    assert f"[golden g@1 sha256:{on_postgres[0]}]" in gate.output


def test_where_selects_what_the_docs_say_as_on_sqlite(engine):
    """The one WHERE grammar's SQL (json_typeof, #>>, the CASE that keeps a cast off strings) on PostgreSQL: every case
    of tests/test_where.py against the same plain reading of docs/cli.md."""
    from test_where import COMBINED, METADATA_CASES, check_semantics

    assert check_semantics(engine) == len(METADATA_CASES) + 2 * len(COMBINED)


def test_traces_posted_to_the_receiver_settle_into_the_samples_a_file_gives(runner, engine, client, tmp_path):
    """The receiver's staging, settling and the traces import's comparison queries (ids and content digests in IN lists) on PostgreSQL."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "ingest"))
    from trace_helpers import synthetic_request

    from calibrate.ingest.traces import import_traces
    from calibrate.models import Dataset, Sample

    made = runner.invoke(["traces", "token", "--dataset", "recv", "--rate", "0.5", "--salt", "s"])
    assert made.exit_code == 0, made.output
    token = made.stdout.strip()
    request_ = synthetic_request(60, repeat_every=10)
    body = request_.SerializeToString()
    headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {token}"}
    assert client.post("/v1/traces", data=body, headers=headers).status_code == 200
    assert client.post("/v1/traces", data=body, headers=headers).status_code == 200  # all repeated: nothing changes
    flushed = json.loads(runner.invoke(["traces", "flush", "--dataset", "recv", "--json"]).stdout)
    path = tmp_path / "same.pb"
    path.write_bytes(body)
    summary = import_traces(engine, [path], dataset="file", rate=0.5, salt="s")
    assert (flushed["traces"], flushed["created"]) == (60, summary.created) and summary.created > 10

    def samples(name):
        with Session(engine) as session:
            rows = session.exec(select(Sample).join(Dataset, Dataset.id == Sample.dataset_id).where(Dataset.name == name)).all()
            return {s.external_id: (s.question, s.answer, s.meta) for s in rows}

    assert samples("recv") == samples("file")
    again = import_traces(engine, [path], dataset="file", rate=0.5, salt="s")
    assert (again.created, again.unchanged) == (0, summary.created)


def test_the_traces_digest_revision_copies_metadata_content_sha256_on_postgresql(pg_cluster):
    """Revision 0018's backfill (metadata->>'content_sha256' of a JSON column): only a 64-character string is copied."""
    pg_cluster.admin("CREATE DATABASE revision_0018")
    url = pg_cluster.url("revision_0018")
    engine = get_engine(url)
    try:
        upgrade(engine, "0017")
        digest = "c" * 64
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO dataset (id, name, description, source, is_demo, created_at) VALUES "
                              "(1, 'd', '', '', false, '2026-01-01')"))
            for pk, metadata in enumerate([{"content_sha256": digest}, {"content_sha256": 7}, {"content_sha256": "short"},
                                           {}, {"x": {"content_sha256": digest}}], start=1):
                conn.execute(text("INSERT INTO sample (id, dataset_id, external_id, question, answer, metadata, content_hash, "
                                  "segmenter, claim_source, created_at, updated_at) VALUES (:id, 1, :ext, 'Q', 'A', "
                                  "CAST(:meta AS json), 'h', '', 'segmenter', '2026-01-01', '2026-01-01')"),
                             {"id": pk, "ext": f"s{pk}", "meta": json.dumps(metadata)})
        upgrade(engine)
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT external_id, content_sha256 FROM sample ORDER BY id")).all()
        assert [tuple(row) for row in rows] == [("s1", digest), ("s2", None), ("s3", None), ("s4", None), ("s5", None)]
    finally:
        dispose_engine(url)


# --------------------------------------------------------------------------- watchers sharing a dataset


def test_four_watcher_processes_share_a_dataset_with_no_repeated_call(db_url, engine, session, tmp_path):
    """`calibrate watch` ×4 on one PostgreSQL database: claims with FOR UPDATE SKIP LOCKED, each job called once."""
    import subprocess as _subprocess
    import threading

    from calibrate.ingest import import_file
    from calibrate.judges import save_version
    from calibrate.models import JudgeRun, WatchLease

    n_samples, per_sample = 20, 5
    with write_session(engine) as s:
        import_file(s, "samples", write_samples(tmp_path / "many.jsonl", n_samples, per_sample), dataset="many")
        save_version(s, "claims", task="claim_support", model="fake-model")
    server = FakeLLM().start()
    server.keep_requests = False
    server.gate = threading.Event()  # closed: each watcher's first call waits, so all four are in before any answer
    command = [sys.executable, "-m", "calibrate", "watch", "--db", db_url, "--dataset", "many", "--prompt", "claims@1",
               "--backend", "openai", "--base-url", server.openai_base, "--api-key-env", "", "--concurrency", "4", "--once"]
    env = dict(os.environ, CALIBRATE_INSTANCE=str(tmp_path / "instance"))
    root = Path(__file__).resolve().parent.parent
    procs = [_subprocess.Popen(command, cwd=root, env=env, stdout=_subprocess.PIPE, stderr=_subprocess.PIPE, text=True)
             for _ in range(4)]
    try:
        deadline = time.monotonic() + 120  # a hang guard, not a measurement
        while server.stats()["requests"] < 4:
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "four watchers calling"
            time.sleep(0.02)
        server.gate.set()
        results = [p.communicate(timeout=120) for p in procs]
    finally:
        server.gate.set()
        server.stop()
    assert [p.returncode for p in procs] == [0] * 4, results
    n = n_samples * per_sample
    stats = server.stats()
    assert stats["requests"] == n and len(stats["calls"]) == n and set(stats["calls"].values()) == {1}
    session.expire_all()
    rows = session.exec(select(Verdict.target_key, func.count()).group_by(Verdict.target_key)).all()
    assert len(rows) == n and {count for _, count in rows} == {1}
    runs = session.exec(select(JudgeRun)).all()
    assert len({run.params["watch"]["owner"] for run in runs}) == 4 and sum(run.n_done for run in runs) == n
    assert session.exec(select(func.count()).select_from(WatchLease)).one() == 0
