"""`calibrate serve --workers N`: N gunicorn worker processes on one port, each with its own database connections."""

from __future__ import annotations

import http.client
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest

from calibrate.server import gunicorn_options


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == str(pid):
            out.append(int(stat.parent.name))
    return out


def _request(port, method, path, body=None, cookie=""):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Cookie": cookie} if cookie else {}
    if body is not None:
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    conn.request(method, path, body=urlencode(body) if body is not None else None, headers=headers)
    response = conn.getresponse()
    text = response.read().decode()
    conn.close()
    return response, text


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
    port = _free_port()
    server = subprocess.Popen([*run, "serve", "--workers", "2", "--threads", "2", "--port", str(port), "--db", url], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                response, page = _request(port, "GET", "/login")
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
        assert response.status == 200
        assert len(_children(server.pid)) == 2  # two worker processes under the gunicorn arbiter
        cookie = response.getheader("Set-Cookie").split(";", 1)[0]
        token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
        response, _ = _request(port, "POST", "/login", {"username": "ana", "password": "password-123", "csrf_token": token}, cookie)
        assert response.status == 303
        cookie = response.getheader("Set-Cookie").split(";", 1)[0]
        # Each request reads the user from the database, in whichever worker accepts the connection.
        statuses = {_request(port, "GET", "/annotate", cookie=cookie)[0].status for _ in range(20)}
        assert statuses == {200}
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    assert server.returncode == 0, output
    assert "Booting worker" in output and output.count("Booting worker") == 2
