"""Shared fixtures: a real SQLite file per test, migrated with Alembic like a real install."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
from click.testing import CliRunner
from hostile import XSS_ANSWER, XSS_CONTEXT, XSS_QUESTION
from sqlmodel import Session

from calibrate import create_app
from calibrate.db import dispose_engine, get_engine, write_session
from calibrate.migrations import upgrade
from calibrate.tasks import ensure_builtin_tasks


@pytest.fixture(scope="session")
def template_db(tmp_path_factory):
    """Migrate one database per test session; each test gets a copy (migrating is the slow part)."""
    path = tmp_path_factory.mktemp("template") / "calibrate.sqlite"
    url = f"sqlite:///{path}"
    engine = get_engine(url)
    upgrade(engine)
    with write_session(engine) as session:
        ensure_builtin_tasks(session)
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    dispose_engine(url)
    return path


@pytest.fixture
def db_url(tmp_path, template_db):
    """Return the URL of a fresh, migrated SQLite database with the built-in tasks."""
    path = tmp_path / "calibrate.sqlite"
    shutil.copyfile(template_db, path)
    url = f"sqlite:///{path}"
    yield url
    dispose_engine(url)


@pytest.fixture
def engine(db_url):
    return get_engine(db_url)


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory, template_db):
    """Load the bundled demo once per test session into a copy of the migrated database (loading it takes ~1 s)."""
    from calibrate.demo import load_demo

    path = tmp_path_factory.mktemp("demo-template") / "calibrate.sqlite"
    shutil.copyfile(template_db, path)
    url = f"sqlite:///{path}"
    engine = get_engine(url)
    load_demo(engine)
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    dispose_engine(url)
    return path


def copy_database(source_path, engine) -> None:
    """Replace the content of an engine's SQLite database by a copy of another file, with SQLite's backup API.

    The backup replaces every page of the target inside one transaction, so the engine (and the app
    or live server sharing it) need not be disposed: their next statement sees the copied database.
    """
    source = sqlite3.connect(source_path)
    target = sqlite3.connect(engine.url.database)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()


@pytest.fixture
def load_demo_copy(demo_template):
    """Return `load(engine)`: what `load_demo(engine)` does to a fresh test database, copied from the session's demo.

    Call it where `load_demo` would run: it replaces everything written before (users included).
    """
    return lambda engine: copy_database(demo_template, engine)


@pytest.fixture
def demo_engine(engine, load_demo_copy):
    """The test's engine with the demo loaded (a copy of the session's demo database)."""
    load_demo_copy(engine)
    return engine


@pytest.fixture
def session(engine):
    """A session on the test database; the test commits what it wants kept."""
    with Session(engine, expire_on_commit=False) as s:
        yield s


@pytest.fixture
def app(tmp_path, db_url):
    instance = tmp_path / "instance"
    return create_app({"TESTING": True, "DATABASE_URL": db_url, "INSTANCE_PATH": str(instance), "SECRET_KEY": "test"})


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    """Invoke `calibrate` commands against the test app (and so the test database)."""
    from calibrate.cli import cli

    class Runner:
        def invoke(self, args, **kwargs):
            return CliRunner().invoke(cli, args, obj=app, catch_exceptions=False, **kwargs)

    return Runner()


@pytest.fixture
def make_sample(session):
    """Return a function that stores a sample (with contexts and claims) directly, no import code involved."""
    from calibrate.models import Claim, Context, Dataset, Sample

    def make(dataset="d", external_id="s1", question=XSS_QUESTION, answer=XSS_ANSWER, contexts=(XSS_CONTEXT,),
             claims=None, is_demo=False, **fields):
        ds = session.exec(__import__("sqlmodel").select(Dataset).where(Dataset.name == dataset)).first()
        if ds is None:
            ds = Dataset(name=dataset, is_demo=is_demo, source="test")
            session.add(ds)
            session.flush()
        sample = Sample(dataset_id=ds.id, external_id=external_id, question=question, answer=answer,
                        content_hash="x", segmenter="given", **fields)
        session.add(sample)
        session.flush()
        for rank, text in enumerate(contexts):
            session.add(Context(sample_id=sample.id, rank=rank, text=text, doc_id=f"doc-{rank}"))
        if claims is None:
            claims = [part for part in answer.split(". ") if part]
        pos = 0
        for index, text in enumerate(claims):
            start = answer.find(text, pos)
            end = start + len(text) if start >= 0 else -1
            pos = max(end, pos)
            session.add(Claim(sample_id=sample.id, index=index, text=text, start=start, end=end))
        session.commit()
        return sample

    return make


@pytest.fixture
def make_user(session):
    """Return a function that stores a user with a password."""
    from calibrate.accounts import add_user

    def make(username="ana", role="annotator", password="password-123"):
        user = add_user(session, username, role=role, password=password)
        session.commit()
        return user

    return make


@pytest.fixture
def login(client, make_user):
    """Return a function that creates a user and logs the test client in as them."""
    from bs4 import BeautifulSoup

    def do(username="ana", role="annotator", password="password-123"):
        make_user(username, role, password)
        page = client.get("/login")
        token = BeautifulSoup(page.data, "html.parser").select_one("input[name=csrf_token]")["value"]
        response = client.post("/login", data={"username": username, "password": password, "csrf_token": token})
        assert response.status_code == 303, response.data
        # Logging in rotates the session and its CSRF token: return the new one.
        page = client.get("/datasets")
        return BeautifulSoup(page.data, "html.parser").select_one(".whoami input[name=csrf_token]")["value"]

    return do


def pytest_collection_finish(session):
    """Fail, never skip, when the suite's own dependencies are missing (CI must notice)."""
    import importlib

    for name in ("hypothesis", "statsmodels", "krippendorff", "playwright", "bs4", "sklearn", "scipy", "psycopg", "ruff",
                 "opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.common", "opentelemetry.proto"):
        importlib.import_module(name)
