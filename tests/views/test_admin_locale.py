"""An admin sets a user's interface language on the Admin page, as the user can on her Account page."""

from __future__ import annotations

from sqlmodel import select

from calibrate.models import User


def _user(session, name):
    session.rollback()  # end the read snapshot: the app wrote in its own session
    session.expire_all()
    return session.exec(select(User).where(User.username == name)).one()


def test_an_admin_sets_and_clears_a_users_language(client, login, make_user, session):
    token = login("root", "admin")
    ana = make_user("ana", "annotator")
    page = client.get("/admin")
    assert b"user-locale" in page.data
    done = client.post(f"/admin/users/{ana.id}/locale", data={"locale": "es", "csrf_token": token})
    assert done.status_code == 303 and _user(session, "ana").locale == "es"
    assert "Language of ana: Español." in client.get("/admin").get_data(as_text=True)
    cleared = client.post(f"/admin/users/{ana.id}/locale", data={"locale": "", "csrf_token": token})
    assert cleared.status_code == 303, cleared.data[:300]
    assert _user(session, "ana").locale is None


def test_a_language_not_offered_is_refused_with_a_message(client, login, make_user, session):
    token = login("root", "admin")
    ana = make_user("ana", "annotator")
    refused = client.post(f"/admin/users/{ana.id}/locale", data={"locale": "xx", "csrf_token": token}, follow_redirects=True)
    assert "language must be one of en, es" in refused.get_data(as_text=True)
    assert _user(session, "ana").locale is None


def test_account_and_guideline_refusals_are_in_the_readers_language(client, login, make_user, session):
    """Refusals raised with a reason (accounts.py, the guideline editor) are worded in Spanish on the web."""
    from bs4 import BeautifulSoup

    spanish = {"Accept-Language": "es"}
    token = login("root", "admin")
    ana = make_user("ana", "annotator")

    def flashed(response):
        return BeautifulSoup(response.get_data(as_text=True), "html.parser").select_one(".flash-error").get_text(strip=True)

    cases = [
        (f"/admin/users/{ana.id}/locale", {"locale": "xx"}, "el idioma debe ser uno de en, es"),
        ("/admin/users", {"username": "nuria", "role": "annotator", "password": "short"},
         "la contraseña debe tener al menos 8 caracteres"),
        ("/admin/users", {"username": "ana", "role": "annotator", "password": "a-good-password"},
         "el usuario 'ana' ya existe (cambie su contraseña con `calibrate users password ana`)"),
        ("/guidelines/claim_support", {"text": "   "}, "la guía está vacía: escriba qué deben hacer los anotadores"),
    ]
    for url, data, message in cases:
        response = client.post(url, data={"csrf_token": token, **data}, headers=spanish, follow_redirects=True)
        assert flashed(response) == message, url
    assert _user(session, "ana").locale is None


def test_only_admins_set_languages(client, login, make_user):
    token = login("eng", "engineer")
    ana = make_user("ana", "annotator")
    assert client.post(f"/admin/users/{ana.id}/locale", data={"locale": "es", "csrf_token": token}).status_code == 403

