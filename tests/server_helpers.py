"""Helpers for tests that start `calibrate serve --workers N` in a subprocess and talk HTTP to it."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def children(pid: int) -> list[int]:
    """Return the ids of a process's child processes (from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == str(pid):
            out.append(int(stat.parent.name))
    return out


def session_cookie(response, default: str = "") -> str:
    """Return the `session=…` pair a response sets (a login also sets the device cookie, first), else `default`."""
    for header in response.msg.get_all("Set-Cookie") or []:
        if header.startswith("session="):
            return header.split(";", 1)[0]
    return default


def request(port, method, path, body=None, cookie=""):
    """Send one request on a fresh connection; return the response and its text."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Cookie": cookie} if cookie else {}
    if body is not None:
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    conn.request(method, path, body=urlencode(body) if body is not None else None, headers=headers)
    response = conn.getresponse()
    text = response.read().decode()
    conn.close()
    return response, text


def start_workers(db_url: str, instance: Path, *, workers: int = 2, threads: int = 2, timeout: float = 30.0):
    """Start `calibrate serve --workers N` and wait until it answers /login and all N workers have forked.

    Return (process, port, login response, login page). The first answer can come from the
    first worker before the others exist: waiting for the page alone makes a count racy.
    """
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "calibrate", "serve", "--workers", str(workers), "--threads", str(threads),
                               "--port", str(port), "--db", db_url], env={**os.environ, "CALIBRATE_INSTANCE": str(instance)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + timeout
    while True:
        try:
            response, page = request(port, "GET", "/login")
            if len(children(server.pid)) == workers:
                return server, port, response, page
        except OSError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            server.terminate()
            output = server.communicate(timeout=30)[0]
            raise AssertionError(f"the server did not start {workers} workers:\n{output}")
        time.sleep(0.2)



def launch_serve(db_url: str, instance: Path, *args: str, env: dict | None = None) -> tuple[subprocess.Popen, int]:
    """Start `calibrate serve ARGS…` (one waitress process) on a free port without waiting; return (process, port)."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "calibrate", "serve", "--port", str(port), "--db", db_url, *args],
                              env={**os.environ, "CALIBRATE_INSTANCE": str(instance), **(env or {})},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return server, port


def wait_serving(server: subprocess.Popen, port: int, timeout: float = 30.0) -> None:
    """Wait until a launched server answers `GET /health` with 200; fail with its output if it exits or never does."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            response, _ = request(port, "GET", "/health")
            if response.status == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            server.terminate()
            output = server.communicate(timeout=30)[0]
            raise AssertionError(f"calibrate serve {' '.join(server.args[3:])} did not start:\n{output}")
        time.sleep(0.1)
