"""The pool of render worker processes user templates render in, so that no template can take
the server, the command line or a run down with it.

    call(request, limits)   send one request to a worker, return its answer (a dict), or raise
                            WorkerLost with the reason the worker died or was stopped
    shutdown()              stop every worker (at exit; tests)

The sandbox (calibrate.judges.sandbox) bounds what a template may build and for how long, but a
bug below Python — a C stack overflow while hashing a 160,000-level tuple, a single filter that
cannot be interrupted — would still kill or freeze the process it runs in. So every render of a
user template runs in a worker: a long-lived child process (`python -m
calibrate.judges.render_worker`, started with `subprocess`, which is safe from a threaded
server) that speaks length-prefixed JSON over its stdin and stdout, with `RLIMIT_AS` (memory)
and `RLIMIT_CPU` (CPU seconds per request) set by itself, while this side enforces the wall
clock by killing it. A worker that dies (a signal, the memory or CPU limit) or overruns is
killed and replaced; the request it held gets WorkerLost with the reason, the other requests are
on other workers and never see it.

Workers are started on first use, up to `Limits.workers` of them, each used for one request at
a time; they exit when this process closes their stdin (its exit). A caller that must not wait
for a free worker (a web request's trial render: `Limits.wait` False) is refused with `Busy`
(HTTP 503) instead; `trial_slot` bounds the trial renders in flight per user and in all (429 / 503),
so a user who saves templates that run into the time limit over and over never takes the server's
request threads (issue 30).
"""

from __future__ import annotations

import atexit
import json
import math
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from calibrate.errors import Busy
from calibrate.reasons import Reason

HEADER = struct.Struct(">I")
MAX_FRAME = 256 * 1024 * 1024  # a frame longer than this is a broken worker, not an answer
START_SECONDS = 30.0  # a worker that has not said hello by then is taken as broken
GRACE_SECONDS = 1.0  # the wall-clock limit a worker gets beyond the render's own limit
MAX_REQUESTS = 5_000  # a worker is replaced after this many requests (memory fragmentation)
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class WorkerLost(Exception):
    """The worker died or was stopped while it held a request; the message says why."""


def write_frame(stream: IO[bytes], message: dict[str, Any]) -> None:
    """Write one length-prefixed JSON message and flush it."""
    data = json.dumps(message, ensure_ascii=False, default=_plain).encode("utf-8")
    stream.write(HEADER.pack(len(data)) + data)
    stream.flush()


def read_frame(stream: IO[bytes]) -> dict[str, Any] | None:
    """Read one length-prefixed JSON message (blocking); None at the end of the stream."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (size,) = HEADER.unpack(head)
    if size > MAX_FRAME:
        raise ValueError(f"a frame of {size:,} bytes")
    data = stream.read(size)
    if len(data) < size:
        return None
    return json.loads(data)


def _plain(value: Any) -> Any:
    """JSON for the values an item may hold beyond JSON's own (tuples are lists already)."""
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def death_reason(returncode: int | None) -> str:
    """Return how a worker ended, in words: "SIGSEGV", "exit status 1"…"""
    if returncode is None:
        return "no answer"
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


class Worker:
    """One render worker process: one request at a time."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
        env.pop("PYTHONFAULTHANDLER", None)  # a crash is reported by this side, not dumped on the server's stderr
        self.process = subprocess.Popen(
            [sys.executable, "-m", "calibrate.judges.render_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, close_fds=True)
        self.requests = 0
        self.buffer = b""
        hello = self._receive(time.monotonic() + START_SECONDS)
        if hello.get("ready") is not True:
            self.kill()
            raise WorkerLost("the render process did not start")

    def request(self, message: dict[str, Any], seconds: float) -> dict[str, Any]:
        """Send `message`, wait at most `seconds` for the answer; WorkerLost (and the worker killed) otherwise."""
        self.requests += 1
        try:
            write_frame(self.process.stdin, message)
        except (BrokenPipeError, OSError):
            self.kill()
            raise WorkerLost(f"the render process ended ({death_reason(self.process.returncode)})") from None
        return self._receive(time.monotonic() + seconds)

    def _receive(self, deadline: float) -> dict[str, Any]:
        fd = self.process.stdout.fileno()
        need = HEADER.size
        while True:
            if len(self.buffer) >= HEADER.size:
                (size,) = HEADER.unpack(self.buffer[:HEADER.size])
                if size > MAX_FRAME:
                    self.kill()
                    raise WorkerLost(f"the render process answered a frame of {size:,} bytes")
                need = HEADER.size + size
                if len(self.buffer) >= need:
                    data, self.buffer = self.buffer[HEADER.size:need], self.buffer[need:]
                    return json.loads(data)
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise WorkerLost("the render took longer than its time limit and its process was stopped")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, max(65536, need - len(self.buffer)))
            if not chunk:
                self.process.wait()
                raise WorkerLost(f"the template crashed the render process ({death_reason(self.process.returncode)})")
            self.buffer += chunk

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


class Pool:
    """Up to `size` workers, each lent to one request at a time (threads wait for a free one)."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.idle: list[Worker] = []
        self.busy = 0
        self.started = 0  # workers started, for the record (tests, bench)

    def call(self, message: dict[str, Any], *, seconds: float, size: int, wait: bool = True) -> dict[str, Any]:
        worker = self._acquire(max(1, size), wait=wait, retry_after=max(1, math.ceil(seconds)))
        healthy = False
        try:
            answer = worker.request(message, seconds)
            healthy = not answer.get("retire") and worker.requests < MAX_REQUESTS
            return answer
        finally:
            self._release(worker, healthy)

    def _acquire(self, size: int, *, wait: bool = True, retry_after: int = 1) -> Worker:
        with self.lock:
            if not wait and not self.idle and self.busy >= size:
                raise Busy(Reason("render_workers_busy", workers=size, seconds=retry_after), status=503,
                           retry_after=retry_after)
            while not self.idle and self.busy >= size:
                self.lock.wait()
            self.busy += 1
            if self.idle:
                return self.idle.pop()
        try:
            worker = Worker()
        except BaseException:
            with self.lock:
                self.busy -= 1
                self.lock.notify()
            raise
        with self.lock:
            self.started += 1
        return worker

    def _release(self, worker: Worker, healthy: bool) -> None:
        if not healthy or not worker.alive:
            worker.kill()
        with self.lock:
            self.busy -= 1
            if healthy and worker.alive:
                self.idle.append(worker)
            self.lock.notify()

    def shutdown(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for worker in idle:
            worker.kill()


POOL = Pool()
atexit.register(POOL.shutdown)


def call(message: dict[str, Any], *, seconds: float, workers: int, wait: bool = True) -> dict[str, Any]:
    """Send `message` to a free worker (starting one if fewer than `workers` run); raise WorkerLost if it dies.

    `seconds`: the wall-clock limit of the request (the render's own limit plus GRACE_SECONDS).
    `wait`: False refuses with Busy (503) at once when every worker is busy, instead of waiting for one.
    """
    return POOL.call(message, seconds=seconds, size=workers, wait=wait)


class TrialSlots:
    """The trial renders in flight in this process, per user and in all (`trial_slot`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_user: Counter[Any] = Counter()

    @contextmanager
    def slot(self, user: Any, *, per_user: int, total: int, retry_after: int) -> Iterator[None]:
        with self.lock:
            if self.by_user[user] >= per_user:
                raise Busy(Reason("trials_per_user", limit=per_user, seconds=retry_after), status=429,
                           retry_after=retry_after)
            if sum(self.by_user.values()) >= total:
                raise Busy(Reason("trials_total", limit=total, seconds=retry_after), status=503, retry_after=retry_after)
            self.by_user[user] += 1
        try:
            yield
        finally:
            with self.lock:
                self.by_user[user] -= 1
                if self.by_user[user] <= 0:
                    del self.by_user[user]


TRIALS = TrialSlots()


def trial_slot(user: Any, *, per_user: int, total: int, seconds: float) -> Any:
    """Hold one of the `total` trial-render slots of this process, and one of `user`'s `per_user`, for a `with` block.

    Refused at once, never waited for: Busy 429 when the user has `per_user` trials in flight
    already, 503 when everyone's `total` are; `seconds` (a render's wall-clock limit) is the
    Retry-After. The render inside should not wait for a worker either (`call(..., wait=False)`).
    """
    retry_after = max(1, math.ceil(seconds))
    return TRIALS.slot(user, per_user=max(1, per_user), total=max(1, total), retry_after=retry_after)


def shutdown() -> None:
    """Stop the idle workers (the busy ones stop when their request ends)."""
    POOL.shutdown()
