"""Browser fixtures: the app behind a real WSGI server (waitress) and headless system Chromium.

Chromium is required: without /usr/bin/chromium these tests fail (CI installs it; deselect
them locally with `-m "not browser"`).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CALIBRATE_CHROMIUM", "/usr/bin/chromium")
# Chromium on a closed network: no background traffic, no first-run dialogs, no sandbox as root.
CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture
def live_server(app):
    """Serve the test app with waitress on a free port; yield its base URL."""
    from waitress.server import create_server

    server = create_server(app, host="127.0.0.1", port=0, threads=4)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.effective_port}"
    # The loop runs while its map holds a socket, and the browser keeps connections alive:
    # empty the map so the loop ends now (not after the join's timeout), then close them all.
    channels = [channel for channel in server._map.values() if channel is not server]
    server._map.clear()
    server.trigger.pull_trigger()  # wake the loop's poll
    thread.join(timeout=5)
    for channel in channels:
        channel.close()
    server.close()
    server.task_dispatcher.shutdown()


@pytest.fixture(scope="session")
def browser():
    """Launch headless system Chromium once per test session."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium) to run the browser tests")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    """A fresh browser context and page; fails the test if any dialog (alert) opens."""
    context = browser.new_context()
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(10_000)
    yield page
    context.close()
    assert dialogs == [], f"a dialog fired: {dialogs}"
    assert errors == [], f"JavaScript errors: {errors}"


@pytest.fixture
def browser_login(page, live_server, make_user):
    """Return a function that logs the browser page in as a new user."""

    def do(username="ana", role="annotator", password="password-123"):
        make_user(username, role, password)
        page.goto(f"{live_server}/login")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", password)
        page.click("button[type=submit]")
        # Annotators land on their queue, engineers and admins on the datasets.
        page.wait_for_url(lambda url: url in (f"{live_server}/datasets", f"{live_server}/annotate"))

    return do
