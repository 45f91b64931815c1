"""Login throttling per account and per client address, in the database (issue 14, point 2)."""

from __future__ import annotations

import logging

import pytest
from bs4 import BeautifulSoup
from sqlmodel import func, select

from calibrate import accounts, create_app
from calibrate.logins import Throttle, record_failure, retry_after
from calibrate.models import LoginThrottle

SETTINGS = {"LOGIN_MAX_FAILURES": 3, "LOGIN_MAX_FAILURES_PER_ADDRESS": 5, "LOGIN_LOCKOUT": 60, "LOGIN_LOCKOUT_MAX": 600}


def _app(db_url, tmp_path, name="i", **settings):
    return create_app({"TESTING": True, "DATABASE_URL": db_url, "INSTANCE_PATH": str(tmp_path / name), "SECRET_KEY": "k",
                       **SETTINGS, **settings})


def _post(client, username, password, address="198.51.100.7", headers=None):
    page = client.get("/login", environ_base={"REMOTE_ADDR": address})
    token = BeautifulSoup(page.data, "html.parser").select_one("input[name=csrf_token]")["value"]
    return client.post("/login", data={"username": username, "password": password, "csrf_token": token},
                       environ_base={"REMOTE_ADDR": address}, headers=headers or {})


@pytest.fixture
def hashes(monkeypatch):
    """Count the password hashes computed (every check, the dummy one for unknown users too)."""
    calls = []
    real = accounts.check_password_hash

    def counting(stored, password):
        calls.append(password)
        return real(stored, password)

    monkeypatch.setattr(accounts, "check_password_hash", counting)
    return calls


@pytest.mark.parametrize("username", ["ana", "nobody"])  # a known account and an unknown name: the same answers
def test_after_the_limit_an_account_gets_429_with_retry_after_and_no_hash_is_computed(db_url, tmp_path, make_user, hashes,
                                                                                       username):
    make_user("ana")
    client = _app(db_url, tmp_path).test_client()
    for _ in range(3):
        assert _post(client, username, "wrong-password").status_code == 401
    assert len(hashes) == 3
    throttled = _post(client, username, "password-123")  # even the right password: refused before it is checked
    assert throttled.status_code == 429
    assert 55 <= int(throttled.headers["Retry-After"]) <= 60
    assert "Too many failed logins" in BeautifulSoup(throttled.data, "html.parser").select_one(".flash").get_text()
    assert len(hashes) == 3  # the throttled attempt computed no hash
    # Another account from another address is not slowed.
    make_user("bea")
    assert _post(client, "bea", "password-123", address="198.51.100.8").status_code == 303


def test_an_address_is_throttled_across_account_names(db_url, tmp_path, make_user, hashes):
    client = _app(db_url, tmp_path).test_client()
    for i in range(5):
        assert _post(client, f"user{i}", "wrong-password").status_code == 401
    make_user("ana")
    assert _post(client, "ana", "password-123").status_code == 429
    assert len(hashes) == 5
    assert _post(client, "ana", "password-123", address="198.51.100.99").status_code == 303


def test_the_throttle_holds_across_two_app_instances_on_one_database(db_url, tmp_path, make_user, hashes):
    make_user("ana")
    first, second = _app(db_url, tmp_path, "a").test_client(), _app(db_url, tmp_path, "b").test_client()
    for client in (first, second, first):
        assert _post(client, "ana", "wrong-password").status_code == 401
    response = _post(second, "ana", "password-123", address="203.0.113.50")
    assert response.status_code == 429 and int(response.headers["Retry-After"]) > 0
    assert len(hashes) == 3


def test_failures_are_logged_with_the_name_and_address_never_the_password(db_url, tmp_path, make_user, caplog):
    make_user("ana")
    client = _app(db_url, tmp_path).test_client()
    with caplog.at_level(logging.INFO, logger="calibrate.security"):
        for _ in range(4):
            _post(client, "ana", "hunter2-secret")
    records = [r for r in caplog.records if r.name == "calibrate.security"]
    failed = [r.getMessage() for r in records if r.getMessage().startswith("login failed")]
    assert failed[0] == "login failed: user 'ana' from 198.51.100.7"
    assert failed[-1] == "login failed: user 'ana' from 198.51.100.7; locked for 60 s"
    assert any(r.getMessage().startswith("login throttled: user 'ana' from 198.51.100.7") for r in records)
    assert all(r.created > 0 for r in records)  # the time is the record's
    assert not any("hunter2" in r.getMessage() for r in caplog.records)


def test_the_lockout_doubles_with_each_further_failure_up_to_the_cap(session):
    throttle = Throttle(max_failures=3, max_failures_per_address=1000, window=900, lockout=60, lockout_max=600)
    now, locks = 1_000_000, []
    for _ in range(8):
        locks.append(record_failure(session, "ana", "10.0.0.1", throttle, now=now))
        now += max(locks[-1], 1)  # the next attempt comes when the lock is over
    assert locks == [0, 0, 60, 120, 240, 480, 600, 600]
    assert retry_after(session, "ana", "10.0.0.2", now=now - 1) == 1
    # Failures further apart than the window start counting again.
    assert record_failure(session, "ana", "10.0.0.1", throttle, now=now + 901) == 0


def test_old_failures_are_pruned_so_the_table_stays_small(session):
    throttle = Throttle(max_failures=10, max_failures_per_address=10, window=900)
    for i in range(50):
        record_failure(session, f"name{i}", f"10.0.0.{i}", throttle, now=1_000_000)
    assert session.exec(select(func.count()).select_from(LoginThrottle)).one() == 100
    record_failure(session, "late", "10.1.1.1", throttle, now=1_000_000 + 901)
    assert session.exec(select(func.count()).select_from(LoginThrottle)).one() == 2


def test_a_login_that_succeeds_clears_its_accounts_failures(db_url, tmp_path, make_user, hashes):
    make_user("ana")
    client = _app(db_url, tmp_path).test_client()
    for _ in range(2):
        _post(client, "ana", "wrong-password")
    assert _post(client, "ana", "password-123").status_code == 303
    client.post("/logout", data={"csrf_token": BeautifulSoup(client.get("/annotate").data, "html.parser")
                                 .select_one(".whoami input[name=csrf_token]")["value"]})
    for _ in range(2):  # two more: under the limit again, since the count started over
        assert _post(client, "ana", "wrong-password").status_code == 401
    assert _post(client, "ana", "password-123").status_code == 303


def test_x_forwarded_for_is_ignored_unless_a_proxy_is_trusted(db_url, tmp_path, make_user):
    make_user("ana")
    direct = _app(db_url, tmp_path, "a").test_client()
    for i in range(5):  # five addresses claimed in the header, one real address: throttled by the real one
        _post(direct, f"x{i}", "wrong-password", headers={"X-Forwarded-For": f"192.0.2.{i}"})
    assert _post(direct, "ana", "password-123", headers={"X-Forwarded-For": "192.0.2.200"}).status_code == 429

    proxied = _app(db_url, tmp_path, "b", TRUSTED_PROXY_HOPS=1).test_client()
    # Behind one trusted proxy the client is the address the proxy saw: another client is not throttled.
    response = _post(proxied, "ana", "password-123", headers={"X-Forwarded-For": "192.0.2.200"})
    assert response.status_code == 303
