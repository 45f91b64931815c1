"""Server-side sessions: a copied cookie is refused after logout, a password change or a deactivation;
the cookie carries no password-hash material; lifetimes; the Secure flag; the secret key from the
environment; no-store on every page (issue 14, points 3 and 10)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup
from flask.sessions import SecureCookieSessionInterface
from sqlmodel import func, select

from calibrate import create_app
from calibrate.accounts import get_user, set_password
from calibrate.annotation.team import set_active
from calibrate.logins import SessionPolicy, load_session, start_session
from calibrate.models import Assignment, Claim, Label, LoginSession

HX = {"HX-Request": "true"}


def _token(client, path="/login"):
    return BeautifulSoup(client.get(path).data, "html.parser").select_one("input[name=csrf_token]")["value"]


def _login(client, username="ana", password="password-123", **kwargs):
    response = client.post("/login", data={"username": username, "password": password, "csrf_token": _token(client)},
                           **kwargs)
    assert response.status_code == 303, response.status_code
    page = BeautifulSoup(client.get("/annotate").data, "html.parser")
    return page.select_one(".whoami input[name=csrf_token]")["value"]


def _cookie(client) -> str:
    return client.get_cookie("session").value


def _decoded(app, value: str) -> dict:
    return dict(SecureCookieSessionInterface().get_signing_serializer(app).loads(value))


@pytest.fixture
def labelling(app, client, session, make_user, make_sample):
    """Ana logged in with one assigned item; `thief` is a second browser holding a copy of her cookie."""
    ana = make_user("ana")
    sample = make_sample()
    assignment = Assignment(sample_id=sample.id, user_id=ana.id, status="pending")
    session.add(assignment)
    session.commit()
    token = _login(client)
    thief = app.test_client()
    thief.set_cookie("session", _cookie(client))
    claim = session.exec(select(Claim).where(Claim.sample_id == sample.id).order_by(Claim.index)).first()
    return SimpleNamespace(user=ana, token=token, thief=thief, url=f"/annotate/{assignment.id}", claim=claim)


def _labels(session) -> int:
    session.commit()
    return session.exec(select(func.count()).select_from(Label)).one()


def _save(browser, item, value="supported"):
    return browser.post(f"{item.url}/label", data={"task": "claim_support", "target": f"claim:{item.claim.id}", "value": value},
                        headers={**HX, "X-CSRFToken": item.token})


def test_a_copied_cookie_works_while_the_session_lives(labelling, session):
    assert _save(labelling.thief, labelling).status_code == 200
    assert _labels(session) == 1


@pytest.mark.parametrize("how", ["logout", "password change", "deactivation"])
def test_a_copied_cookie_is_refused_once_the_session_ends(labelling, client, session, make_user, how):
    if how == "logout":
        assert client.post("/logout", data={"csrf_token": labelling.token}).status_code == 303
    elif how == "password change":
        set_password(session, get_user(session, "ana"), "a-new-password")
        session.commit()
    else:
        admin = make_user("root", "admin")
        set_active(session, get_user(session, "ana"), False, acting=admin)
        session.commit()
    # The copy gets the login page (a page) or 401 with HX-Redirect (a script): never a saved label.
    page = labelling.thief.get(labelling.url)
    assert page.status_code == 302 and page.headers["Location"].startswith("/login")
    response = _save(labelling.thief, labelling)
    assert response.status_code == 401 and response.headers["HX-Redirect"].startswith("/login")
    assert _labels(session) == 0
    # The original browser is logged out as well.
    assert client.get(labelling.url).status_code == 302


def test_logout_ends_only_that_session(app, client, session, make_user):
    make_user("ana")
    token = _login(client)
    other = app.test_client()
    _login(other)
    client.post("/logout", data={"csrf_token": token})
    assert client.get("/annotate").status_code == 302
    assert other.get("/annotate").status_code == 200


def test_the_cookie_carries_a_random_session_id_and_nothing_of_the_password_hash(app, client, session, make_user):
    make_user("ana")
    _login(client)
    value = _cookie(client)
    data = _decoded(app, value)
    assert set(data) == {"sid", "csrf_token", "_permanent"}
    password_hash = get_user(session, "ana").password_hash
    for piece in {password_hash[i:i + 8] for i in range(0, len(password_hash) - 8, 4)}:
        assert piece not in value and piece not in str(data)
    stored = session.exec(select(LoginSession)).one()
    assert stored.id != data["sid"] and len(data["sid"]) >= 40  # the table keeps the token's hash only


def test_default_lifetimes_are_eight_hours_idle_and_twelve_absolute(app):
    policy = SessionPolicy.from_settings(app.config)
    assert (policy.idle, policy.absolute) == (8 * 3600, 12 * 3600)


def test_a_session_ends_after_its_idle_time_and_at_its_absolute_end(session, make_user):
    user = make_user("ana")
    policy = SessionPolicy(idle=100, absolute=1000)
    token = start_session(session, user.id, policy, now=10_000)
    session.commit()
    assert load_session(session, token, policy, now=10_099) is not None
    assert load_session(session, token, policy, now=10_100) is None  # idle for 100 s
    alive = token
    for t in range(10_050, 11_000, 50):  # used every 50 s: never idle, still ends 1000 s after the login
        session.execute(LoginSession.__table__.update().values(last_seen=t))
        assert load_session(session, alive, policy, now=t + 1) is not None
    session.execute(LoginSession.__table__.update().values(last_seen=10_999))
    assert load_session(session, alive, policy, now=11_000) is None


def test_the_last_use_is_written_at_most_every_five_minutes(app, client, session, make_user, monkeypatch):
    from calibrate import logins

    clock = [1_000_000]
    monkeypatch.setattr(logins, "now_seconds", lambda: clock[0])
    make_user("ana")
    _login(client)

    def last_seen():
        session.commit()
        return session.exec(select(LoginSession.last_seen)).one()

    clock[0] += 299
    client.get("/annotate")
    assert last_seen() == 1_000_000
    clock[0] += 1
    client.get("/annotate")
    assert last_seen() == 1_000_300


def test_the_cookie_is_secure_when_the_request_came_over_https(app, make_user):
    make_user("ana")
    plain, tls = app.test_client(), app.test_client()
    tls_response = tls.post("/login", base_url="https://localhost", data={
        "username": "ana", "password": "password-123", "csrf_token": _token_over(tls, "https://localhost")})
    plain_response = plain.post("/login", data={"username": "ana", "password": "password-123", "csrf_token": _token(plain)})
    assert "Secure" in tls_response.headers["Set-Cookie"]
    assert "Secure" not in plain_response.headers["Set-Cookie"]


def _token_over(client, base_url):
    return BeautifulSoup(client.get("/login", base_url=base_url).data, "html.parser").select_one("input[name=csrf_token]")["value"]


@pytest.mark.parametrize(("hops", "secure"), [(0, False), (1, True)])
def test_behind_a_proxy_the_scheme_counts_only_when_the_proxy_is_trusted(db_url, tmp_path, make_user, hops, secure):
    app = create_app({"TESTING": True, "DATABASE_URL": db_url, "INSTANCE_PATH": str(tmp_path / "i"), "SECRET_KEY": "k",
                      "TRUSTED_PROXY_HOPS": hops})
    make_user("ana")
    client = app.test_client()
    headers = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}
    token = BeautifulSoup(client.get("/login", headers=headers).data, "html.parser").select_one("input[name=csrf_token]")["value"]
    response = client.post("/login", headers=headers, data={"username": "ana", "password": "password-123", "csrf_token": token})
    assert ("Secure" in response.headers["Set-Cookie"]) is secure


def test_session_cookie_secure_true_forces_the_flag(db_url, tmp_path, make_user):
    app = create_app({"TESTING": True, "DATABASE_URL": db_url, "INSTANCE_PATH": str(tmp_path / "i"), "SECRET_KEY": "k",
                      "SESSION_COOKIE_SECURE": True})
    make_user("ana")
    client = app.test_client()
    response = client.post("/login", data={"username": "ana", "password": "password-123", "csrf_token": _token(client)})
    assert "Secure" in response.headers["Set-Cookie"]


def test_the_secret_key_from_the_environment_lets_two_machines_share_sessions(db_url, tmp_path, make_user, monkeypatch):
    monkeypatch.setenv("CALIBRATE_SECRET_KEY", "one-key-for-every-machine-of-the-deployment")
    first = create_app({"TESTING": True, "DATABASE_URL": db_url, "INSTANCE_PATH": str(tmp_path / "a")})
    second = create_app({"TESTING": True, "DATABASE_URL": db_url, "INSTANCE_PATH": str(tmp_path / "b")})
    assert first.config["SECRET_KEY"] == second.config["SECRET_KEY"] == "one-key-for-every-machine-of-the-deployment"
    assert not (tmp_path / "a" / "secret_key").exists()
    make_user("ana")
    browser = first.test_client()
    _login(browser)
    elsewhere = second.test_client()
    elsewhere.set_cookie("session", _cookie(browser))
    assert elsewhere.get("/annotate").status_code == 200


@pytest.mark.parametrize("path", ["/login", "/annotate", "/datasets", "/prompts", "/no-such-page"])
def test_every_page_says_no_store(client, make_user, path):
    make_user("eng", "engineer")
    _login(client, "eng")
    response = client.get(path)
    assert response.headers["Cache-Control"] == "no-store", path


def test_a_static_file_may_be_cached(client):
    response = client.get("/static/calibrate.css")
    assert response.status_code == 200 and "no-store" not in response.headers.get("Cache-Control", "")
    response.close()
