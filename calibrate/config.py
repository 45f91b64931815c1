"""Default settings; every one can be overridden, in this order, by `instance/config.py`,
by an environment variable `CALIBRATE_<NAME>` (values parsed as JSON when they can be, so
`CALIBRATE_BOOTSTRAP=500` is a number) and by the test configuration.

No secret lives here: SECRET_KEY is generated once per install into the instance folder.
"""

# SQLAlchemy URL of the database; None means `sqlite:///<instance>/calibrate.sqlite`.
DATABASE_URL = None
# Seconds a SQLite connection waits for a competing writer before "database is locked".
SQLITE_BUSY_TIMEOUT = 10
# Session cookie: HttpOnly and SameSite=Lax always; Secure when served over HTTPS
# (set CALIBRATE_SESSION_COOKIE_SECURE=true behind TLS).
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SECURE = False
PERMANENT_SESSION_LIFETIME = 12 * 3600
# Largest upload accepted by the web import form, in bytes.
MAX_CONTENT_LENGTH = 200 * 1024 * 1024
# Import: how many problems a rejected file reports before it stops listing them.
IMPORT_MAX_ERRORS = 50
# Import: the largest text field accepted, in characters.
IMPORT_MAX_FIELD_CHARS = 1_000_000
# Judge prompt templates: every render (the trial render when a version is saved, and each
# item of a run) is stopped after this many seconds, and refused when its text would be longer
# than this many characters (a template may also build at most 20 times as much text along the
# way). A run records an item that hits a limit as that item's error. See docs/security.md.
PROMPT_RENDER_SECONDS = 2
PROMPT_RENDER_MAX_CHARS = 200_000
# Statistics defaults (the report and gate take these unless told otherwise).
THRESHOLD = 0.75
# The decision rule: False decides `passed` on the estimate (rule `point`), True on the CI's lower
# bound (rule `ci_lower`, what `--ci-lower` asks for); the dashboard, the test split and the gate use it.
CI_LOWER = False
BOOTSTRAP = 2000
CONFIDENCE = 0.95
SEED = 0
