"""Benchmark the annotation workbench under load: 100,000 samples, 1,000,000 labels, SQLite.

The database is built with bulk SQL (fast, independent of the import code): 100,000 samples of
four claims and three contexts; two earlier annotators labelled every claim and every answer
(1,000,000 labels, each with its "create" revision; 200,000 done assignments); each bench
annotator has pending items of their own. The app runs in its own process(es) as
`calibrate serve --workers N --threads T` runs it (waitress for one process, gunicorn's
threaded workers for more; `--server gunicorn` with one worker compares the two servers),
wrapped in a WSGI middleware that reports the server time of each request
(`Server-Timing: app;dur=…, cpu;dur=…`: from the WSGI call to the response headers, so the
server's queueing is not in it; the clients' own latency, which is, is reported too).

The load generator (this process, loopback only) runs 16 clients on threads with http.client
and keep-alive, each logged in as its own annotator, for a fixed time. Each client does what an
annotator does, as fast as the server answers: the next item (GET /annotate/next, then the
item page), a label POST per claim and one for the quality (one POST in twenty sent twice,
like a double click), then submit. Baseline in the same run, same clients: GET /login (a page
with a session and a template, no database query).

After the run the database is checked: every acknowledged label is there with its last value,
none is duplicated, a double POST added no revision, every submitted item is done.

Then, in the browser: headless system Chromium labels claims with the keyboard on the same
server (idle) and measures, in the page, from the keydown (performance.now()) to the cell's
"saved" state being in the DOM (a MutationObserver).

    .venv/bin/python bench/bench_annotate.py [--samples 100000] [--clients 16] [--seconds 30] [--keys 200]
        [--workers 1] [--server waitress|gunicorn] [--threads 4] [--keep PRISTINE.sqlite]

Prints a Markdown section for bench/results/annotate.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import os
import platform
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "bench-password"
CLAIMS, CONTEXTS = 4, 3
HISTORIC = ("h1", "h2")
TARGET_P95_MS = 50
TARGET_WRITES = 300
TARGET_SAVED_MS = 100

WORDS = ("dosis ácido fólico semana embarazo hierro control presión vacuna gripe tos fiebre ecografía trimestre "
         "glucosa análisis riesgo consulta matrona obstetra suplemento diario mg µg recomendación guía").split()


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words)).capitalize()


# --------------------------------------------------------------------------- the database


def build_db(path: Path, n_samples: int, n_bench_users: int, per_user: int, seed: int = 0) -> dict:
    """Create a migrated database and fill it with bulk SQL; return what was written."""
    env = {**os.environ, "CALIBRATE_INSTANCE": str(path.parent)}
    subprocess.run([sys.executable, "-m", "calibrate", "init", "--db", f"sqlite:///{path}"], check=True, env=env,
                   capture_output=True, cwd=ROOT)
    from werkzeug.security import generate_password_hash

    rng = random.Random(seed)
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=OFF")
    now = "2026-01-01 00:00:00.000000"
    tasks = dict(con.execute("SELECT name, id FROM task"))
    cs, aq = tasks["claim_support"], tasks["answer_quality"]
    con.execute("INSERT INTO dataset (id, name, description, source, is_demo, created_at) VALUES (1, 'bench', '', 'bench', 0, ?)", (now,))
    pw = generate_password_hash(PASSWORD)
    names = list(HISTORIC) + [f"b{i:02d}" for i in range(1, n_bench_users + 1)]
    con.executemany("INSERT INTO user (id, username, display_name, role, password_hash, active, created_at) "
                    "VALUES (?, ?, ?, 'annotator', ?, 1, ?)", [(i + 1, n, n, pw, now) for i, n in enumerate(names)])
    pieces = [[_text(rng, 9) + "." for _ in range(CLAIMS)] for _ in range(64)]  # reused answer texts
    contexts = [_text(rng, 45) for _ in range(64)]
    samples, claim_rows, context_rows = [], [], []
    claim_id = context_id = 0
    for s in range(1, n_samples + 1):
        claims = pieces[s % 64]
        answer = " ".join(claims)
        samples.append((s, f"s{s:06d}", _text(rng, 10) + "?", answer, now, now))
        pos = 0
        for index, text in enumerate(claims):
            start = answer.index(text, pos)
            pos = start + len(text)
            claim_id += 1
            claim_rows.append((claim_id, s, index, text, start, pos))
        for rank in range(CONTEXTS):
            context_id += 1
            context_rows.append((context_id, s, rank, contexts[(s + rank) % 64], f"doc-{(s * 7 + rank) % 5000}"))
    con.executemany("INSERT INTO sample (id, dataset_id, external_id, question, answer, metadata, content_hash, segmenter, "
                    "created_at, updated_at) VALUES (?, 1, ?, ?, ?, '{}', 'h', 'given', ?, ?)", samples)
    con.executemany('INSERT INTO claim (id, sample_id, "index", text, start, "end", active) VALUES (?, ?, ?, ?, ?, ?, 1)', claim_rows)
    con.executemany("INSERT INTO context (id, sample_id, rank, text, doc_id, active) VALUES (?, ?, ?, ?, ?, 1)", context_rows)
    del samples, context_rows

    label_rows, revision_rows = [], []
    label_id = 0
    values = ("supported", "unsupported", "not_applicable")
    for user_id in (1, 2):
        for cid, s, _index, _claim_text, _start, _end in claim_rows:
            label_id += 1
            value = values[rng.random() < 0.3]
            label_rows.append((label_id, cs, s, cid, f"claim:{cid}", user_id, value))
            revision_rows.append((label_id, value))
        for s in range(1, n_samples + 1):
            label_id += 1
            value = str(rng.randint(1, 5))
            label_rows.append((label_id, aq, s, None, f"sample:{s}", user_id, value))
            revision_rows.append((label_id, value))
    con.executemany("INSERT INTO label (id, task_id, sample_id, claim_id, target_key, annotator_id, value, rationale, "
                    "guideline_version, adjudicated, stale, stale_reason, source, created_at, updated_at) "
                    f"VALUES (?, ?, ?, ?, ?, ?, ?, '', 1, 0, 0, '', 'import', '{now}', '{now}')", label_rows)
    con.executemany("INSERT INTO labelrevision (label_id, action, value, rationale, changed_by_id, changed_at) "
                    f"VALUES (?, 'create', ?, '', NULL, '{now}')", revision_rows)
    n_labels = len(label_rows)
    del label_rows, revision_rows, claim_rows
    assignments = [(s, u, "done", now, now) for u in (1, 2) for s in range(1, n_samples + 1)]
    # Each bench annotator gets its own pending items, spread over the whole dataset.
    for user_id in range(3, 3 + n_bench_users):
        picks = rng.sample(range(1, n_samples + 1), per_user)
        assignments += [(s, user_id, "pending", now, now) for s in picks]
    con.executemany("INSERT INTO assignment (sample_id, user_id, status, note, priority, created_at, updated_at) "
                    "VALUES (?, ?, ?, '', 1, ?, ?)", assignments)
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return {"samples": n_samples, "claims": claim_id, "contexts": context_id, "labels": n_labels,
            "assignments": len(assignments), "users": len(names), "size_mb": path.stat().st_size / 1e6}


# --------------------------------------------------------------------------- the server


SERVER = r'''
import sys, time
THREADS = int(sys.argv[4])
from calibrate import create_app
import waitress

app = create_app({"DATABASE_URL": sys.argv[1], "SECRET_KEY": "bench", "INSTANCE_PATH": sys.argv[3]})

def timed(environ, start_response):
    t0, c0 = time.perf_counter(), time.thread_time()
    def start(status, headers, exc_info=None):
        headers.append(("Server-Timing", f"app;dur={(time.perf_counter() - t0) * 1000:.3f}, cpu;dur={(time.thread_time() - c0) * 1000:.3f}"))
        return start_response(status, headers, exc_info)
    return app(environ, start)

WORKERS, SERVER = int(sys.argv[5]), sys.argv[6]
if SERVER == "waitress":  # what `calibrate serve` runs
    waitress.serve(timed, host="127.0.0.1", port=int(sys.argv[2]), threads=THREADS, ident="calibrate", _quiet=True)
else:  # what `calibrate serve --workers N` runs
    from calibrate.server import serve_processes
    serve_processes(timed, host="127.0.0.1", port=int(sys.argv[2]), threads=THREADS, workers=WORKERS)
'''


def start_server(db: Path, port: int, threads: int, workers: int, server: str) -> subprocess.Popen:
    # waitress logs a line whenever requests queue up: to a file, never to a pipe nobody reads
    log = open(db.parent / "server.log", "wb")
    process = subprocess.Popen([sys.executable, "-c", SERVER, f"sqlite:///{db}", str(port), str(db.parent), str(threads),
                                str(workers), server], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/login")
            conn.getresponse().read()
            return process
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("the server did not start: " + (db.parent / "server.log").read_text())


# --------------------------------------------------------------------------- the clients


class Client:
    """One annotator: a keep-alive connection, a session cookie, the CSRF token."""

    def __init__(self, port: int, username: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.username = username
        self.cookie = ""
        self.token = ""
        self.samples: dict[str, list] = defaultdict(list)  # op -> [(client ms, server ms)]
        self.cpu: dict[str, list] = defaultdict(list)  # op -> [server thread CPU ms]
        self.errors: Counter = Counter()
        self.acked: dict[tuple[str, str], str] = {}  # (task, target) -> last acknowledged value
        self.doubles = 0
        self.revisions = 0  # revisions the acknowledged writes imply
        self.submitted: list[int] = []

    def request(self, op: str, method: str, path: str, body: dict | None = None, headers: dict | None = None):
        data = urlencode(body) if body is not None else None
        all_headers = {"Cookie": self.cookie} if self.cookie else {}
        if data is not None:
            all_headers["Content-Type"] = "application/x-www-form-urlencoded"
        all_headers.update(headers or {})
        t0 = time.perf_counter()
        self.conn.request(method, path, body=data, headers=all_headers)
        response = self.conn.getresponse()
        text = response.read().decode()
        elapsed = (time.perf_counter() - t0) * 1000
        timing = response.getheader("Server-Timing", "")
        match = re.search(r"app;dur=([0-9.]+)", timing)
        cpu = re.search(r"cpu;dur=([0-9.]+)", timing)
        if op:
            self.samples[op].append((elapsed, float(match.group(1)) if match else float("nan")))
            self.cpu[op].append(float(cpu.group(1)) if cpu else float("nan"))
        cookie = response.getheader("Set-Cookie")
        if cookie:
            self.cookie = cookie.split(";", 1)[0]
        return response.status, response.getheader("Location") or response.getheader("HX-Redirect"), text

    def login(self) -> None:
        status, _, page = self.request("", "GET", "/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
        status, location, _ = self.request("", "POST", "/login", {"username": self.username, "password": PASSWORD, "csrf_token": token})
        if status != 303:
            raise RuntimeError(f"login failed for {self.username}: {status}")
        status, _, page = self.request("", "GET", "/annotate")
        self.token = re.search(r'"X-CSRFToken": "([^"]+)"', page).group(1)

    def baseline(self, stop: float) -> None:
        conn, cookie = self.conn, self.cookie
        self.cookie = ""
        while time.monotonic() < stop:
            status, _, _ = self.request("baseline GET /login", "GET", "/login")
            if status != 200:
                self.errors[f"baseline {status}"] += 1
            self.cookie = ""
        self.conn, self.cookie = conn, cookie

    def _label(self, op: str, path: str, task: str, target: str, value: str) -> bool:
        """POST one label; keep what the server acknowledged and how many revisions it implies."""
        status, _, _ = self.request(op, "POST", f"{path}/label", {"task": task, "target": target, "value": value},
                                    {"HX-Request": "true", "X-CSRFToken": self.token})
        if status != 200:
            self.errors[f"label {status}"] += 1
            return False
        if self.acked.get((task, target)) != value:
            self.revisions += 1  # a new label or a change: one revision; a repeat: none
        self.acked[(task, target)] = value
        return True

    def _open(self, path: str) -> tuple[str, list[tuple[str, str]]] | None:
        status, _, page = self.request("GET item page", "GET", path)
        if status != 200:
            self.errors[f"item {status}"] += 1
            return None
        return path, re.findall(r'data-task="([a-z_]+)" data-target="([a-z]+:\d+)"\s+data-state="[a-z]+" data-required="1"', page)

    def _open_next(self) -> tuple[str, list[tuple[str, str]]] | None:
        status, location, _ = self.request("GET /annotate/next", "GET", "/annotate/next")
        if status != 302 or not location or "/annotate/" not in location or location.rstrip("/").endswith("/annotate"):
            self.errors[f"next {status} {location}"] += 1
            return None
        return self._open(location[location.index("/annotate/"):])

    def work(self, stop: float, rng: random.Random) -> None:
        """What an annotator's browser does, as fast as the server answers: label every claim and the
        quality of the open item, submit (Enter), and open the item the answer names (HX-Redirect)."""
        opened = self._open_next()
        while opened is not None and time.monotonic() < stop:
            path, cells = opened
            for task, target in cells:
                value = rng.choice(("supported", "unsupported", "not_applicable")) if task == "claim_support" else str(rng.randint(1, 5))
                repeats = 2 if rng.random() < 0.05 else 1  # a double click
                for _ in range(repeats):
                    if not self._label("POST label", path, task, target, value):
                        break
                self.doubles += repeats - 1
            t0 = time.perf_counter()
            status, location, _ = self.request("POST submit", "POST", f"{path}/submit", {}, {"HX-Request": "true", "X-CSRFToken": self.token})
            if status != 204 or not location or location.rstrip("/").endswith("/annotate"):
                self.errors[f"submit {status} {location}"] += 1
                return
            self.submitted.append(int(path.rsplit("/", 1)[1]))
            opened = self._open(location[location.index("/annotate/"):])
            if opened is not None:
                server_ms = self.samples["POST submit"][-1][1] + self.samples["GET item page"][-1][1]
                self.samples["submit → next item page"].append(((time.perf_counter() - t0) * 1000, server_ms))

    def burst(self, stop: float, rng: random.Random) -> None:
        """Label writes only: on the open item, change the claims' labels back and forth (each a write kept in history)."""
        opened = self._open_next()
        if opened is None:
            return
        path, cells = opened
        claims = [(task, target) for task, target in cells if task == "claim_support"]
        values = ("supported", "unsupported", "not_applicable")
        i = 0
        while time.monotonic() < stop:
            task, target = claims[i % len(claims)]
            current = self.acked.get((task, target))
            self._label("POST label (writes only)", path, task, target,
                        rng.choice([v for v in values if v != current]))
            i += 1


def percentile(values: list[float], q: float) -> float:
    values = sorted(v for v in values if v == v)
    if not values:
        return float("nan")
    index = min(len(values) - 1, max(0, round(q / 100 * (len(values) - 1))))
    return values[index]


def cpu_seconds(pid: int) -> float:
    """Return the user + system CPU time so far of a process and its children (gunicorn's workers) (Linux /proc)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # a process that just ended
        if stat.parent.name == str(pid) or fields[1] == str(pid):
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def run_clients(ports: list[int], n: int, seconds: float, phase: str, clients: list[Client] | None = None) -> tuple[list[Client], float]:
    """Run `phase` (baseline | work | burst) on n logged-in clients for `seconds`; return them and the wall time.

    With several server processes, the clients are spread over them in turn (as a load balancer would).
    """
    if clients is None:
        clients = [Client(ports[i % len(ports)], f"b{i + 1:02d}") for i in range(n)]
        for client in clients:
            client.login()
    stop = time.monotonic() + seconds
    threads = []
    for i, client in enumerate(clients):
        target = getattr(client, phase)
        args = (stop,) if phase == "baseline" else (stop, random.Random(i))
        threads.append(threading.Thread(target=_guard(target, client), args=args))
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return clients, time.monotonic() - t0


def _guard(function, client):
    def run(*args):
        try:
            function(*args)
        except Exception as exc:
            client.errors[f"exception {type(exc).__name__}: {exc}"] += 1
    return run


# --------------------------------------------------------------------------- checks


def check_db(db: Path, clients: list[Client]) -> dict:
    """Compare what the server acknowledged with what the database holds."""
    con = sqlite3.connect(db)
    users = dict(con.execute("SELECT username, id FROM user"))
    lost = wrong = 0
    expected = 0
    for client in clients:
        rows = {(task, key): value for task, key, value in con.execute(
            "SELECT t.name, l.target_key, l.value FROM label l JOIN task t ON t.id = l.task_id "
            "WHERE l.annotator_id = ? AND l.adjudicated = 0", (users[client.username],))}
        for key, value in client.acked.items():
            expected += 1
            if key not in rows:
                lost += 1
            elif rows[key] != value:
                wrong += 1
        wrong += len(set(rows) - set(client.acked))  # a label nobody acknowledged
    duplicates = con.execute("SELECT count(*) FROM (SELECT 1 FROM label GROUP BY task_id, target_key, annotator_id, adjudicated "
                             "HAVING count(*) > 1)").fetchone()[0]
    bench_ids = tuple(users[c.username] for c in clients)
    marks = ",".join("?" * len(bench_ids))
    revisions = con.execute(f"SELECT count(*) FROM labelrevision r JOIN label l ON l.id = r.label_id WHERE l.annotator_id IN ({marks})",
                            bench_ids).fetchone()[0]
    submitted = [a for c in clients for a in c.submitted]
    not_done = 0
    for chunk in range(0, len(submitted), 500):
        part = submitted[chunk:chunk + 500]
        not_done += con.execute(f"SELECT count(*) FROM assignment WHERE id IN ({','.join('?' * len(part))}) AND status != 'done'",
                                part).fetchone()[0]
    con.close()
    return {"expected": expected, "lost": lost, "wrong_or_unacknowledged": wrong, "duplicates": duplicates,
            "revisions": revisions, "expected_revisions": sum(c.revisions for c in clients),
            "submitted": len(submitted), "submitted_not_done": not_done}


# --------------------------------------------------------------------------- the browser


OBSERVE = """() => {
  window.__lat = []; window.__pending = null;
  document.addEventListener('keydown', (e) => {
    if (!['1', '2', '3', 's', 'x', 'n'].includes(e.key)) return;
    const cell = document.activeElement && document.activeElement.closest('.cell');
    if (cell && cell.dataset.state === 'empty') window.__pending = {t: performance.now(), id: cell.id};
  }, true);
  new MutationObserver(() => {
    const p = window.__pending; if (!p) return;
    const el = document.getElementById(p.id);
    if (el && el.querySelector('.save-state[data-state=saved]')) { window.__lat.push(performance.now() - p.t); window.__pending = null; }
  }).observe(document.getElementById('annotate'), {subtree: true, childList: true, attributes: true});
}"""


def browser_latency(port: int, username: str, keys: int) -> list[float]:
    from playwright.sync_api import sync_playwright

    base = f"http://127.0.0.1:{port}"
    latencies: list[float] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless=new", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto(f"{base}/login")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_url(f"{base}/annotate")
        page.goto(f"{base}/annotate/next")
        while len(latencies) < keys:
            page.wait_for_load_state()
            page.evaluate(OBSERVE)
            n = page.locator("#claims .cell").count()
            for i in range(n):
                page.keyboard.press("123"[i % 3])
                deadline = time.monotonic() + 5
                while page.evaluate("window.__pending !== null") and time.monotonic() < deadline:
                    time.sleep(0.002)
                time.sleep(0.05)  # an expert does not press faster than this
            latencies += page.evaluate("window.__lat")
            page.keyboard.press("4")
            page.locator(".whole .save-state[data-state=saved]").wait_for()
            here = page.url
            page.keyboard.press("Enter")
            page.wait_for_url(lambda url, here=here: url != here)
        browser.close()
    return latencies[:keys]


# --------------------------------------------------------------------------- main


def _row(name: str, samples: list[tuple[float, float]], cpu: list[float], seconds: float) -> str:
    client = [c for c, _ in samples]
    server = [s for _, s in samples]
    rate = len(samples) / seconds if seconds else 0
    return (f"| {name} | {len(samples):,} | {rate:,.0f} | {percentile(server, 50):.1f} | {percentile(server, 95):.1f} | "
            f"{percentile(server, 99):.1f} | {percentile(client, 50):.1f} | {percentile(client, 95):.1f} | "
            f"{percentile(cpu, 50):.2f} |")


def _merge(clients: list[Client]) -> tuple[dict, dict, Counter]:
    ops: dict[str, list] = defaultdict(list)
    cpu: dict[str, list] = defaultdict(list)
    errors: Counter = Counter()
    for client in clients:
        for op, values in client.samples.items():
            ops[op] += values
        for op, values in client.cpu.items():
            cpu[op] += values
        errors.update(client.errors)
    return ops, cpu, errors


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30, help="length of each measured phase")
    parser.add_argument("--baseline-seconds", type=float, default=10)
    parser.add_argument("--keys", type=int, default=200, help="keystrokes measured in the browser (0: skip)")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--threads", type=int, default=4, help="waitress threads per process (calibrate serve --threads)")
    parser.add_argument("--workers", type=int, default=1, help="server processes, as `calibrate serve --workers N`")
    parser.add_argument("--server", choices=("waitress", "gunicorn"),
                        help="default: as `calibrate serve` (waitress for one process, gunicorn for more); "
                        "gunicorn with --workers 1 compares the servers")
    parser.add_argument("--keep", help="build the database once at this path and reuse it (each run works on a copy)")
    args = parser.parse_args()
    args.server = args.server or ("waitress" if args.workers == 1 else "gunicorn")
    if args.server == "waitress" and args.workers != 1:
        parser.error("waitress serves one process: use --server gunicorn for more")
    per_user = 2000
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        pristine = Path(args.keep) if args.keep else Path(tmp) / "pristine.sqlite"
        t0 = time.perf_counter()
        if not pristine.exists():
            built = build_db(pristine, args.samples, args.clients + 1, per_user)
            print(f"built {built} in {time.perf_counter() - t0:.1f} s", flush=True)
        db = Path(tmp) / "bench.sqlite"  # every run starts from the same pristine copy
        shutil.copyfile(pristine, db)
        with sqlite3.connect(db) as con:
            labels_before = con.execute("SELECT count(*) FROM label").fetchone()[0]
            samples = con.execute("SELECT count(*) FROM sample").fetchone()[0]
        ports = [args.port]
        servers = [start_server(db, args.port, args.threads, args.workers, args.server)]

        def cpu() -> float:
            return sum(cpu_seconds(server.pid) for server in servers)

        try:
            base_clients, base_seconds = run_clients(ports, args.clients, args.baseline_seconds, "baseline")
            cpu0 = cpu()
            clients, seconds = run_clients(ports, args.clients, args.seconds, "work")
            work_cpu = (cpu() - cpu0) / seconds
            cpu0 = cpu()
            _, burst_seconds = run_clients(ports, args.clients, args.seconds, "burst", clients)
            burst_cpu = (cpu() - cpu0) / burst_seconds
            keys = browser_latency(args.port, f"b{args.clients + 1:02d}", args.keys) if args.keys else []
        finally:
            for server in servers:
                server.terminate()
                server.wait(timeout=10)
        check = check_db(db, clients)
        with sqlite3.connect(db) as con:
            labels_after = con.execute("SELECT count(*) FROM label").fetchone()[0]

    ops, cpu, errors = _merge(base_clients + clients)
    writes = len(ops["POST label"]) / seconds
    burst_writes = len(ops["POST label (writes only)"]) / burst_seconds
    label_p95 = percentile([s for _, s in ops["POST label"]], 95)
    burst_p95 = percentile([s for _, s in ops["POST label (writes only)"]], 95)
    page_p95 = percentile([s for _, s in ops["GET item page"]], 95)
    next_p95 = percentile([s for _, s in ops["submit → next item page"]], 95)
    base_p50 = percentile([s for _, s in ops["baseline GET /login"]], 50)
    print()
    print(f"## {dt.date.today().isoformat()}: {samples:,} samples, {labels_before:,} labels, {args.clients} clients")
    print()
    print(f"- machine: {platform.machine()}, {os.cpu_count()} CPUs (shared), Python {platform.python_version()}, "
          f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.release()}; load average before the run: {load_before:.2f}")
    print(f"- command: `python bench/bench_annotate.py --samples {args.samples} --clients {args.clients} "
          f"--seconds {args.seconds:g} --workers {args.workers} --server {args.server} --threads {args.threads} --keys {args.keys}`")
    server = "waitress, 1 process" if args.server == "waitress" else \
        f"gunicorn (gthread), {args.workers} worker process{'es' if args.workers > 1 else ''}"
    print(f"- server: {server} × {args.threads} threads; CPU used: {work_cpu * 100:.0f} % in the annotate phase, "
          f"{burst_cpu * 100:.0f} % in the writes-only phase (of {os.cpu_count()} CPUs)")
    print()
    print("| request | count | per s | server p50 ms | server p95 ms | server p99 ms | client p50 ms | client p95 ms | app CPU p50 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(_row("baseline: GET /login (no database)", ops["baseline GET /login"], cpu["baseline GET /login"], base_seconds))
    for op in ("GET item page", "POST label", "POST submit"):
        print(_row(f"annotate: {op}", ops[op], cpu[op], seconds))
    print(_row("annotate: submit → next item page (both)", ops["submit → next item page"], [], seconds))
    print(_row("writes only: POST label", ops["POST label (writes only)"], cpu["POST label (writes only)"], burst_seconds))
    print()
    print(f"- annotate phase ({seconds:.1f} s: open the next item, label each claim and the quality, submit): "
          f"**{writes:,.0f} label writes/s**; server p95: item page **{page_p95:.1f} ms** (with the submit that finds it: "
          f"{next_p95:.1f} ms), label POST **{label_p95:.1f} ms**")
    print(f"- writes-only phase ({burst_seconds:.1f} s: change claim labels back and forth, each change kept in history): "
          f"**{burst_writes:,.0f} label writes/s**; server p95 **{burst_p95:.1f} ms**")
    print(f"- ratios to the baseline's server p50 ({base_p50:.2f} ms): item page p95 {page_p95 / base_p50:.0f}×, "
          f"label POST p95 {label_p95 / base_p50:.0f}×")
    print(f"- errors: **{sum(errors.values())}** {dict(errors) if errors else ''}")
    print(f"- database after the run ({labels_after:,} labels): {check['expected']:,} acknowledged labels of the bench "
          f"annotators, lost **{check['lost']}**, wrong or unacknowledged **{check['wrong_or_unacknowledged']}**, "
          f"duplicated **{check['duplicates']}**; revisions {check['revisions']:,} for {check['expected_revisions']:,} "
          f"acknowledged changes ({sum(c.doubles for c in clients)} double POSTs added none); "
          f"{check['submitted']:,} items submitted, not done {check['submitted_not_done']}")
    if keys:
        print(f"- browser (headless Chromium, idle server, {len(keys)} keystrokes, one every ~50 ms): keydown → the cell shows "
              f"saved: p50 **{statistics.median(keys):.1f} ms**, p95 **{percentile(keys, 95):.1f} ms**, max {max(keys):.1f} ms")


if __name__ == "__main__":
    main()
