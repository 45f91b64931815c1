"""`calibrate serve --workers N`: N gunicorn worker processes on one port, each with its own database connections."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from server_helpers import request, session_cookie, start_workers

from calibrate.server import gunicorn_options


def test_gunicorn_options_fork_threaded_workers_that_drop_inherited_connections():
    options = gunicorn_options(host="127.0.0.1", port=5001, threads=3, workers=2)
    assert (options["bind"], options["workers"], options["threads"], options["worker_class"]) == ("127.0.0.1:5001", 2, 3, "gthread")
    assert options["post_fork"].__name__ == "_post_fork"


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="gunicorn runs on Unix only")
def test_serve_with_two_workers_answers_logged_in_pages_from_both(tmp_path):
    url = f"sqlite:///{tmp_path / 'serve.sqlite'}"
    env = {**os.environ, "CALIBRATE_INSTANCE": str(tmp_path)}
    run = [sys.executable, "-m", "calibrate"]
    subprocess.run([*run, "init", "--db", url], check=True, env=env, capture_output=True)
    subprocess.run([*run, "users", "add", "ana", "--password-stdin", "--db", url], input="password-123\n", text=True,
                   check=True, env=env, capture_output=True)
    server, port, response, page = start_workers(url, tmp_path, workers=2, threads=2)
    try:
        assert response.status == 200
        cookie = session_cookie(response)
        token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
        response, _ = request(port, "POST", "/login", {"username": "ana", "password": "password-123", "csrf_token": token}, cookie)
        assert response.status == 303
        cookie = session_cookie(response)
        # Each request reads the user from the database, in whichever worker accepts the connection.
        statuses = {request(port, "GET", "/annotate", cookie=cookie)[0].status for _ in range(20)}
        assert statuses == {200}
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    assert server.returncode == 0, output
    assert "Booting worker" in output and output.count("Booting worker") == 2
