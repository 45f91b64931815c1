"""Default settings; every one can be overridden, in this order, by `instance/config.py`,
by an environment variable `CALIBRATE_<NAME>` (values parsed as JSON when they can be, so
`CALIBRATE_BOOTSTRAP=500` is a number) and by the test configuration.

No secret lives here: SECRET_KEY is generated once per install into the instance folder, or
given as CALIBRATE_SECRET_KEY (the same on every machine that serves one database).
"""

# SQLAlchemy URL of the database; None means `sqlite:///<instance>/calibrate.sqlite`.
DATABASE_URL = None
# Seconds a SQLite connection waits for a competing writer before "database is locked".
SQLITE_BUSY_TIMEOUT = 10
# Session cookie: HttpOnly and SameSite=Lax always. Secure: None (the default) sets it on every
# response to a request that came over HTTPS (directly, or through a proxy trusted with
# TRUSTED_PROXY_HOPS); true or false forces it. The cookie carries a random session id (no
# password-hash material); the session itself lives in the database, so logout, a password
# change and a deactivation end every copy of it. See docs/security.md.
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SECURE = None
# A session ends after this many seconds without a request (idle), and in any case this many
# seconds after its login (absolute).
PERMANENT_SESSION_LIFETIME = 8 * 3600
SESSION_ABSOLUTE_LIFETIME = 12 * 3600
# Login throttling (per account name and per client address, state in the database so that
# every server process and machine shares it): after LOGIN_MAX_FAILURES failed logins of one
# account (LOGIN_MAX_FAILURES_PER_ADDRESS from one address) within LOGIN_WINDOW seconds of
# each other, further attempts get 429 with Retry-After for LOGIN_LOCKOUT seconds, doubled by
# every further failure, at most LOGIN_LOCKOUT_MAX. A throttled attempt is answered at once,
# without checking the password.
LOGIN_MAX_FAILURES = 10
LOGIN_MAX_FAILURES_PER_ADDRESS = 30
LOGIN_WINDOW = 15 * 60
LOGIN_LOCKOUT = 60
LOGIN_LOCKOUT_MAX = 900
# The cookie that exempts a browser which logged in before from its account's lock (not from its address's).
LOGIN_DEVICE_DAYS = 180
# Behind a reverse proxy: how many proxies to trust for the client address (X-Forwarded-For)
# and the scheme (X-Forwarded-Proto). 0 (the default): trust no header, the address is the
# connection's. Set it to the number of proxies in front of calibrate (usually 1).
TRUSTED_PROXY_HOPS = 0
# Largest upload accepted by the web import form, in bytes.
MAX_CONTENT_LENGTH = 200 * 1024 * 1024
# Import: how many problems a rejected file reports before it stops listing them.
IMPORT_MAX_ERRORS = 50
# Import: the largest text field accepted, in characters.
IMPORT_MAX_FIELD_CHARS = 1_000_000
# Import: records written per write transaction. A CLI import validates the whole file first,
# then writes it in chunks this size, each a short transaction (a web write waits for one chunk
# at most), invisible until one last small transaction publishes the whole file. See
# docs/security.md and calibrate/ingest/batches.py.
IMPORT_CHUNK_SIZE = 1000
# Import: an unfinished import whose last chunk is older than this many seconds (or whose
# process is gone, on this machine) was killed; the next import, `calibrate init`, `calibrate
# serve` and `calibrate cleanup` remove what it left (never visible).
IMPORT_STALE_SECONDS = 600
# Judge prompt templates: every render (the trial render when a version is saved, and each
# item of a run) is stopped after this many seconds, and refused when its text would be longer
# than this many characters (a template may also build at most 20 times as much text along the
# way). A run records an item that hits a limit as that item's error. See docs/security.md.
PROMPT_RENDER_SECONDS = 2
PROMPT_RENDER_MAX_CHARS = 200_000
# Untrusted templates (issue 20): every check and render runs in one of PROMPT_RENDER_WORKERS
# long-lived worker processes per server or command, each limited to PROMPT_RENDER_MEMORY_MB MiB
# of address space and killed when a render overruns PROMPT_RENDER_SECONDS (plus a second): a
# template that crashes or exhausts its worker costs one item, never the server or the run.
# Lists, tuples and dicts a template builds may nest at most PROMPT_RENDER_MAX_DEPTH levels.
PROMPT_RENDER_WORKERS = 2
# The trial render of a prompt version saved in the browser: at most PROMPT_TRIALS_PER_USER of one user's and
# PROMPT_TRIALS_TOTAL of everyone's at once per server process (429, resp. 503, with Retry-After past them), and
# never one waiting for a busy render worker (503): a request thread never waits on renders. See docs/security.md.
PROMPT_TRIALS_PER_USER = 1
PROMPT_TRIALS_TOTAL = 2
PROMPT_RENDER_MEMORY_MB = 512
PROMPT_RENDER_MAX_DEPTH = 100
# Judge answers: the largest answer body read, in bytes after decompression (twice that on the
# wire); a longer one is the item's error, naming its size, and nothing of it is stored.
JUDGE_MAX_ANSWER_BYTES = 1024 * 1024
# Statistics defaults (the report and gate take these unless told otherwise).
THRESHOLD = 0.75
# The decision rule: False decides `passed` on the estimate (rule `point`), True on the CI's lower
# bound (rule `ci_lower`, what `--ci-lower` asks for); the dashboard, the test split and the gate use it.
CI_LOWER = False
BOOTSTRAP = 2000
CONFIDENCE = 0.95
SEED = 0
# The OTLP/HTTP receiver (`POST /v1/traces`, docs/formats.md "Receiving traces over OTLP/HTTP"):
# the largest request body accepted, in bytes, on the wire and again after gzip is undone (413 over it);
# a staged trace settles into a sample once its root span is there and nothing new arrived for
# TRACES_SETTLE_S seconds; `calibrate serve` looks for settled traces every TRACES_SETTLE_EVERY seconds.
TRACES_MAX_BODY = 64 * 1024 * 1024
TRACES_SETTLE_S = 30
TRACES_SETTLE_EVERY = 5
# Traces the server's settler settles per write transaction: a label save waits for one such transaction
# at most. A transaction's cost is mostly fixed: with 10,000 samples 50 traces cost what 250 do (~80 ms,
# bench/results/receiver.md), and at 50 the settler fell behind a stream of 4,000 spans/s. (It does not grow
# with the dataset: the comparison with the stored samples reads only the batch's ids and contents.)
TRACES_SETTLE_BATCH = 250
# At most this many export requests per server process at once: being decoded, waiting for their write, or
# being written (the chunks of concurrent requests are written together, one transaction: views/otlp.py,
# GroupCommit). One more is answered 503 with Retry-After: 1 (the queue is full; OTLP exporters retry it).
# Each holds a request thread while it waits (`calibrate serve --threads`, default 4): past the threads, requests
# wait in the server's own queue. It was 2, with no queue: 4 exporters got 4.8–9.1 % 503 (bench/results/receiver.md).
TRACES_MAX_CONCURRENT = 8
# At most this many spans per `POST /v1/traces` request, and feedback records per `POST /v1/feedback` (413 past
# them, counted before anything is decoded or stored). A request is staged in write transactions of 512 spans
# that give the writer lock back between them; these bounds cap how long one request keeps a slot. The SDKs'
# batch processors send 512 spans; a Collector's batch processor: keep send_batch_max_size under TRACES_MAX_SPANS.
TRACES_MAX_SPANS = 50_000
TRACES_MAX_FEEDBACK = 10_000
# A JSON body (OTLP/JSON, feedback) is parsed whole, in one call that holds the interpreter (15–50 ms a MB): past this
# many bytes (unpacked) it is refused with 413, so no request stops the server's other threads for long. A batch of
# 512 spans is about 0.7 MB of OTLP/JSON; larger batches go as protobuf (the SDKs' and the Collector's default).
TRACES_MAX_JSON_BODY = 8 * 1024 * 1024
