"""One served app on the demo data (labels, users, queue, demo judges) for a whole test module.

Serving and logging in are the slow part: the polish and crawl tests share one
database and one waitress server per module (`demo_site`), each test logging a fresh browser context in.
"""

from __future__ import annotations

import shutil
import threading
from contextlib import contextmanager
from dataclasses import dataclass

from calibrate import create_app
from calibrate.db import dispose_engine, get_engine
from calibrate.demo import DEMO_USERS

PASSWORDS = {username: password for username, _role, _display, password in DEMO_USERS}


@dataclass
class DemoSite:
    url: str
    engine: object
    app: object


@contextmanager
def serve(app):
    """Serve `app` with waitress on a free port; yield its base URL (as tests/browser/conftest.py's live_server)."""
    from waitress.server import create_server

    server = create_server(app, host="127.0.0.1", port=0, threads=4)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.effective_port}"
    finally:
        channels = [channel for channel in server._map.values() if channel is not server]
        server._map.clear()
        server.trigger.pull_trigger()
        thread.join(timeout=5)
        for channel in channels:
            channel.close()
        server.close()
        server.task_dispatcher.shutdown()


@contextmanager
def demo_site(tmp_path_factory, demo_template):
    """Yield a DemoSite: a copy of the session's demo database (the demo and its judges' runs, tests/conftest.py), served."""
    folder = tmp_path_factory.mktemp("demo-site")
    path = folder / "calibrate.sqlite"
    shutil.copyfile(demo_template, path)
    url = f"sqlite:///{path}"
    engine = get_engine(url)
    app = create_app({"TESTING": True, "DATABASE_URL": url, "INSTANCE_PATH": str(folder / "instance"), "SECRET_KEY": "test"})
    try:
        with serve(app) as base:
            yield DemoSite(base, engine, app)
    finally:
        dispose_engine(url)


def login(page, base: str, username: str) -> None:
    """Log the page in as a demo user and wait for her landing page."""
    page.goto(f"{base}/login")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORDS[username])
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login" not in url)
