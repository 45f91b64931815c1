"""The interface's language in the web app: Flask-Babel, the request's locale, and what templates and scripts need.

The locale of a request (`select_locale`): the logged-in user's setting (the Account page), else
the best match of the browser's Accept-Language among calibrate.i18n.LOCALES, else English.
Flask-Babel gives the templates `_`, `gettext` and `ngettext` in that locale; calibrate.i18n
is told the same locale (a provider), so sentences worded outside the views — a domain refusal,
the dashboard's decision, a report served to the reader — come out in it too.

Templates also get the locale's number and date formats (`num`, `pct`, `when`, `day`), `reason` (a JSON
block's note worded from its reason code, reports.summary.reason_text), the
label and task names people read (`label_name`, `task_title`, `choice_text` for a workbench button), and `js_strings`: every message
the scripts show, translated, for base.html's JSON data block `#calibrate-strings` (data, never executed: the CSP stays
`script-src 'self'`).
"""

from __future__ import annotations

from flask import Flask, g, has_request_context, request
from flask_babel import Babel, get_locale

from calibrate import i18n
from calibrate.annotation.items import choice_text
from calibrate.i18n import N_
from calibrate.reports.summary import finite, number, reason_text
from calibrate.tasks import display_name, guideline_text, label_name, task_description, task_title


def select_locale() -> str:
    """Return the request's locale: the user's setting, else the browser's best supported language, else English."""
    user = g.get("user")
    chosen = i18n.supported(getattr(user, "locale", None)) if user is not None else None
    if chosen:
        return chosen
    return request.accept_languages.best_match(i18n.LOCALES) or i18n.DEFAULT_LOCALE


def request_locale() -> str | None:
    """Return the locale of the request being answered, or None outside a request (calibrate.i18n's provider)."""
    if not has_request_context():
        return None
    return str(get_locale() or i18n.DEFAULT_LOCALE)


def pct(value, digits: int = 0) -> str:
    """Return a proportion as a percentage in the reader's notation ("50%", "50 %"), or "undefined"."""
    return i18n.current().percent(value, digits) if finite(value) else i18n.gettext("undefined")


def when(value, seconds: bool = False) -> str:
    """Return a date and time as the reader writes them ("Jan 5, 2025 15:04")."""
    return i18n.current().datetime(value, seconds=seconds) if value is not None else ""


def day(value) -> str:
    """Return a date as the reader writes it ("Jan 5, 2025")."""
    return i18n.current().date(value) if value is not None else ""


# The roles as people read them (base.html and the Account page translate `user.role`).
ROLE_NAMES = (N_("annotator"), N_("engineer"), N_("admin"))
# Statuses as people read them (an item's badge, a run's state, a verdict's): templates translate the stored value.
STATUS_NAMES = (N_("pending"), N_("done"), N_("skipped"), N_("flagged"), N_("running"), N_("failed"), N_("stopped"),
                N_("ok"), N_("unparsed"), N_("error"))

# What the scripts (static/annotate.js, static/calibrate.js) say, by key; `{n}`, `{what}`… are filled in by the script.
JS_STRINGS = {
    "saving": N_("saving…"),
    "saved": N_("✓ saved"),
    "not_saved": N_("not saved"),
    "retrying_cell": N_("not saved yet: retrying"),
    "no_connection": N_("No connection"),
    "server_error": N_("Server error {status}"),
    "waiting_one": N_("{why}: 1 change waiting, retrying in {seconds} s. Nothing is lost."),
    "waiting_many": N_("{why}: {n} changes waiting, retrying in {seconds} s. Nothing is lost."),
    "session_ended": N_("Your session has ended: log in again and your change will be saved."),
    "token_refused": N_("This change was refused (security token). Reload the page and make it again."),
    "not_yours": N_("This item is not yours or no longer exists."),
    "undone": N_("Undone: {what}"),
    "error_status": N_("Error {status}"),
    "no_context": N_("There is no context #{n}."),
    "label_first_evidence": N_("Label the claim first, then mark its evidence."),
    "focus_claim_sentence": N_("Focus a claim first (j/k), then pick the sentence that supports it."),
    "no_sentence": N_("Context #{n} has no sentence {m}."),
    "no_such_context": N_("There is no such context."),
    "focus_claim_edit": N_("Focus a claim first (j/k): then Shift+D splits it, Shift+M merges it with the next, Shift+T edits it."),
    "split_mode": N_("Split: move the caret to where the second claim starts"),
    "edit_mode": N_("Edit the claim"),
    "split_verb": N_("split here"),
    "save_verb": N_("save"),
    "split_help": N_("Split: move the caret (arrows), Enter splits there, Esc cancels."),
    "edit_help": N_("Edit: Enter saves, Esc cancels."),
    "split_only_caret": N_("Split only moves the caret: Esc, then Shift+T to edit the text."),
    "saving_claim": N_("Saving the claim change…"),
    "last_claim": N_("This is the last claim: there is no next claim to merge it with."),
    "merging": N_("Merging the claim with the next…"),
    "evidence_context": N_("Evidence in context #{n}: press the number of the sentence (1–9)."),
    "label_first_rationale": N_("Label it first; then r writes the rationale."),
    "evidence_prompt": N_("Evidence: press the number of the context (1–9)."),
    "label_first_e": N_("Label the claim first, then e and a number mark its evidence."),
    "evidence_on_claims": N_("Evidence is marked on claims."),
    "sentence_prompt": N_("Evidence sentence: press the number of the context (1–9), then of the sentence (1–9)."),
    "label_first_E": N_("Label the claim first, then E marks a sentence as its evidence."),
    "error_type_prompt": N_("Error type: press its number (0: none given); any other key goes on."),
    "no_error_types": N_("This task has no error types."),
    "label_negative_first": N_("Label it {label} first; then w and a number give the error type."),
    "no_error_type": N_("There is no error type {n}."),
    "sending_one": N_("Saving 1 change made before the page was left…"),
    "sending_many": N_("Saving {n} changes made before the page was left…"),
    "not_submitted": N_("Not submitted yet: {what}."),
    "complete": N_("Every label is in: press Enter to submit."),
    "refused": N_("Refused ({status}): {message}"),
    "network_error": N_("The server could not be reached: check the connection and try again."),
}


def js_strings() -> dict[str, str]:
    """Return the scripts' messages in the request's locale (base.html's JSON data block #calibrate-strings)."""
    translate = i18n.current().gettext
    return {key: translate(text) for key, text in JS_STRINGS.items()}


def init_app(app: Flask) -> None:
    """Install Flask-Babel with calibrate's catalogs, tell calibrate.i18n the request's locale, give templates their helpers."""
    Babel(app, locale_selector=select_locale, default_translation_directories=str(i18n.TRANSLATIONS),
          default_domain=i18n.DOMAIN)
    i18n.set_locale_provider(request_locale)
    app.jinja_env.filters.update(num=number, pct=pct, when=when, day=day, reason=reason_text)
    app.jinja_env.globals.update(display_name=display_name, label_name=label_name, task_title=task_title,
                                 task_description=task_description, guideline_text=guideline_text, choice_text=choice_text, js_strings=js_strings,
                                 LANGUAGE_NAMES=i18n.LANGUAGE_NAMES, current_locale=request_locale)
