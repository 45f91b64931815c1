"""Blueprints: one per area. A view turns a request into one domain call and renders a template.

The request's database session and the writer lock are session.py's; every refusal a domain
call raises (calibrate.errors) is answered in one place, errors.py.
"""

from __future__ import annotations

import json

from flask import Flask, Response, render_template, request

from calibrate.views import (
    account,
    adjudicate,
    admin,
    annotate,
    auth,
    calibration_loop,
    datasets,
    errors,
    fields,
    guidelines,
    i18n,
    optimise,
    otlp,
    production,
    prompts,
    runs,
    security,
    tasks,
)

ROLES = ("all", "web", "traces")
# What a `traces` server answers (`calibrate serve --role traces`): the receiver (traces, feedback), the health check.
TRACES_ENDPOINTS = frozenset({"otlp.receive", "otlp.feedback", "auth.health"})


def init_app(app: Flask, role: str = "all") -> None:
    """Register the blueprints, the request hooks and the error pages for a server's role.

    `all`: the workbench and the OTLP receiver. `web`: the workbench without the receiver
    (`/v1/traces` is a 404). `traces`: only `POST /v1/traces` and `GET /health`; anything else is
    a 404 before any session, cookie or CSRF check (docs/cli.md, "calibrate serve").
    """
    if role not in ROLES:
        raise ValueError(f"unknown server role {role!r} (roles: {', '.join(ROLES)})")
    app.config["SERVE_ROLE"] = role
    if role == "traces":
        app.before_request(_traces_only)  # first of the hooks: a page is refused before the session is read
    fields.init_app(app)  # the bounded `int` converter: before any route is added
    security.init_app(app)
    errors.init_app(app)
    i18n.init_app(app)
    app.register_blueprint(auth.bp)
    app.register_blueprint(account.bp)
    app.register_blueprint(datasets.bp)
    app.register_blueprint(annotate.bp)
    app.register_blueprint(admin.bp)
    app.register_blueprint(adjudicate.bp)
    app.register_blueprint(guidelines.bp)
    app.register_blueprint(prompts.bp)
    app.register_blueprint(runs.bp)
    app.register_blueprint(calibration_loop.bp)
    app.register_blueprint(optimise.bp)
    app.register_blueprint(tasks.bp)
    app.register_blueprint(production.bp)
    if role != "web":
        app.register_blueprint(otlp.bp)  # POST /v1/traces: a bearer token, no session, no CSRF (security.py)

    for code in (400, 403, 404, 405, 413):
        app.register_error_handler(code, _error_page)


def _traces_only():
    """A `traces` server's gate: anything but the receiver and the health check is not found here.

    Answered as the receiver answers its errors (a google.rpc.Status, code 5 NOT_FOUND, in JSON), not
    with a page: the server's callers are exporters, and it starts no session and sets no cookie.
    """
    if request.endpoint not in TRACES_ENDPOINTS:
        message = "not found: this calibrate server receives traces only (POST /v1/traces, POST /v1/feedback, GET /health)"
        return Response(json.dumps({"code": 5, "message": message}), status=404, mimetype="application/json")
    return None


def _error_page(error):
    return render_template("error.html", error=error), error.code
