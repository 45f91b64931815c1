"""Error handling shared by the annotation-area blueprints (annotate, adjudicate, admin, guidelines).

A missing row (calibrate.annotation.NotFound) is the site's 404 page; a refused action (AnnotationError) is a flash message and
a 303 back to a page the blueprint names, or, for script requests where `script_aware`, a plain
422 whose text the page shows.
"""

from __future__ import annotations

from collections.abc import Callable

from flask import Blueprint, flash, make_response, redirect, render_template
from werkzeug.exceptions import NotFound as HTTPNotFound

from calibrate.annotation import AnnotationError, NotFound
from calibrate.views.auth import is_script_request


def install_refusal_handlers(bp: Blueprint, back: Callable[[], str], *, script_aware: bool = False,
                             vary_on_htmx: bool = False) -> None:
    """Register the 404 page and the AnnotationError answer on `bp`."""

    @bp.errorhandler(NotFound)
    def _not_found(_exc):  # noqa: ANN001, ANN202
        return render_template("error.html", error=HTTPNotFound()), 404

    @bp.errorhandler(AnnotationError)
    def _refused(exc: AnnotationError):  # noqa: ANN202
        if script_aware and is_script_request():
            response = make_response(str(exc), 422)
            response.mimetype = "text/plain"
            return response
        flash(str(exc), "error")
        return redirect(back(), code=303)

    if vary_on_htmx:
        # One URL serves the page and its fragment: caches must key on HX-Request.
        @bp.after_request
        def _vary(response):  # noqa: ANN001, ANN202
            response.vary.add("HX-Request")
            return response
