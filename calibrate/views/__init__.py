"""Blueprints: one per area. A view turns a request into one domain call and renders a template.

The request's database session and the writer lock are session.py's; every refusal a domain
call raises (calibrate.errors) is answered in one place, errors.py.
"""

from __future__ import annotations

from flask import Flask, render_template

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
    otlp,
    production,
    prompts,
    runs,
    security,
    tasks,
)


def init_app(app: Flask) -> None:
    """Register the blueprints, the request hooks and the error pages."""
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
    app.register_blueprint(tasks.bp)
    app.register_blueprint(production.bp)
    app.register_blueprint(otlp.bp)  # POST /v1/traces: a bearer token, no session, no CSRF (security.py)

    for code in (400, 403, 404, 405, 413):
        app.register_error_handler(code, _error_page)


def _error_page(error):
    return render_template("error.html", error=error), error.code
