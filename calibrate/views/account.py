"""The Account page: who I am, and the interface's language I read it in (else my browser's)."""

from __future__ import annotations

from flask import Blueprint, flash, g, redirect, render_template, request, url_for

from calibrate import i18n
from calibrate.accounts import set_locale
from calibrate.i18n import _
from calibrate.models import User
from calibrate.views.auth import login_required
from calibrate.views.errors import back_to
from calibrate.views.session import writing

bp = Blueprint("account", __name__)


@bp.route("/account")
@login_required
def show():
    """Show my account and the language setting."""
    return render_template("account/show.html", locales=i18n.LOCALES)


@bp.route("/account", methods=("POST",))
@login_required
def update():
    """Save my interface language ("" follows the browser's)."""
    back_to(url_for("account.show"))
    with writing() as db:
        user = db.get(User, g.user.id)
        set_locale(db, user, request.form.get("locale", ""))
    # The message in the language just chosen: the next page is in it.
    with i18n.using(user.locale or i18n.supported(request.accept_languages.best_match(i18n.LOCALES))):
        flash(_("Language saved: %(language)s.", language=i18n.LANGUAGE_NAMES.get(user.locale or "", _("as your browser asks"))),
              "done")
    return redirect(url_for("account.show"), code=303)
