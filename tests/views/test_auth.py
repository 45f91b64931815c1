"""Logging in and out, CSRF, security headers."""

from __future__ import annotations

from bs4 import BeautifulSoup


def _token(client, path="/login"):
    return BeautifulSoup(client.get(path).data, "html.parser").select_one("input[name=csrf_token]")["value"]


def test_pages_require_login(client):
    response = client.get("/datasets")
    assert response.status_code == 302
    assert response.headers["Location"].startswith("/login?next=/datasets")


def test_login_and_logout(client, make_user):
    make_user("ana", "engineer")
    token = _token(client)
    response = client.post("/login?next=/datasets", data={"username": "ana", "password": "password-123", "csrf_token": token})
    assert response.status_code == 303 and response.headers["Location"] == "/datasets"
    page = BeautifulSoup(client.get("/datasets").data, "html.parser")
    assert "ana" in page.select_one(".whoami").get_text()
    # The login rotated the session, and with it the CSRF token.
    fresh = page.select_one(".whoami input[name=csrf_token]")["value"]
    assert fresh != token
    assert client.post("/logout", data={"csrf_token": token}).status_code == 400
    response = client.post("/logout", data={"csrf_token": fresh})
    assert response.status_code == 303
    assert client.get("/datasets").status_code == 302


def test_wrong_password_and_unknown_user_get_the_same_answer(client, make_user):
    make_user("ana")
    token = _token(client)
    wrong = client.post("/login", data={"username": "ana", "password": "nope-nope", "csrf_token": token})
    unknown = client.post("/login", data={"username": "zed", "password": "nope-nope", "csrf_token": token})
    assert wrong.status_code == unknown.status_code == 401
    flash = [BeautifulSoup(page.data, "html.parser").select_one(".flash").get_text() for page in (wrong, unknown)]
    assert flash[0] == flash[1]


def test_account_without_password_cannot_log_in(client, session):
    from calibrate.accounts import ensure_annotator

    ensure_annotator(session, "imported")
    session.commit()
    token = _token(client)
    assert client.post("/login", data={"username": "imported", "password": "", "csrf_token": token}).status_code == 401


def test_post_without_csrf_token_is_rejected(client, make_user):
    make_user("ana")
    response = client.post("/login", data={"username": "ana", "password": "password-123"})
    assert response.status_code == 400
    assert "security token" in response.get_data(as_text=True)


def test_csrf_token_accepted_in_header(client, make_user):
    make_user("ana")
    token = _token(client)
    response = client.post("/login", data={"username": "ana", "password": "password-123"}, headers={"X-CSRFToken": token})
    assert response.status_code == 303


def test_open_redirect_is_refused(client, make_user):
    make_user("ana")
    token = _token(client)
    response = client.post("/login?next=//evil.example/x", data={"username": "ana", "password": "password-123", "csrf_token": token})
    assert response.headers["Location"] == "/annotate"  # an annotator's own landing page, not the offered one


def test_security_headers(client):
    response = client.get("/login")
    csp = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["X-Content-Type-Options"] == "nosniff"


def test_session_cookie_flags(client, make_user):
    make_user("ana")
    token = _token(client)
    response = client.post("/login", data={"username": "ana", "password": "password-123", "csrf_token": token})
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie


def test_password_change_ends_other_sessions(app, client, make_user, session):
    from calibrate.accounts import get_user, set_password

    make_user("ana")
    token = _token(client)
    client.post("/login", data={"username": "ana", "password": "password-123", "csrf_token": token})
    assert client.get("/datasets").status_code == 200
    set_password(session, get_user(session, "ana"), "another-password")
    session.commit()
    assert client.get("/datasets").status_code == 302
