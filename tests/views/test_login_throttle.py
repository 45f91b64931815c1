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


# --------------------------------------------------------------------------- issue 20, finding 6: not a weapon


def _form(client, address):
    page = client.get("/login", environ_base={"REMOTE_ADDR": address})
    return BeautifulSoup(page.data, "html.parser").select_one("input[name=csrf_token]")["value"]


def test_a_burst_of_40_concurrent_wrong_logins_checks_no_more_passwords_than_the_limit(db_url, tmp_path, make_user, hashes):
    """The check and the count are one write transaction: 40 at once check exactly LOGIN_MAX_FAILURES passwords."""
    import threading

    make_user("admin", "admin")
    app = _app(db_url, tmp_path)
    clients = []
    for i in range(40):  # 40 addresses: only the account's limit (3) can stop them
        client = app.test_client()
        clients.append((client, f"203.0.113.{i + 1}", _form(client, f"203.0.113.{i + 1}")))
    hashes.clear()
    codes = []
    barrier = threading.Barrier(40)

    def attack(client, address, token):
        barrier.wait(timeout=600)  # a bound against a hang, not a timing: a busy machine only waits longer
        response = client.post("/login", data={"username": "admin", "password": "guess", "csrf_token": token},
                               environ_base={"REMOTE_ADDR": address})
        codes.append(response.status_code)

    threads = [threading.Thread(target=attack, args=args) for args in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(hashes) == 3  # the red team's burst checked 17 against a limit of 10
    assert sorted(codes) == [401] * 3 + [429] * 37


def test_the_owner_with_a_device_cookie_logs_in_while_the_name_is_under_attack(db_url, tmp_path, make_user, hashes):
    make_user("admin", "admin")
    app = _app(db_url, tmp_path)
    owner, attacker = app.test_client(), app.test_client()
    assert _post(owner, "admin", "password-123", address="198.51.100.1").status_code == 303  # a past login: the cookie
    device = owner.get_cookie("calibrate_device")
    assert device is not None and device.http_only and device.same_site == "Lax"
    owner.post("/logout", data={"csrf_token": BeautifulSoup(owner.get("/datasets").data, "html.parser")
                                .select_one(".whoami input[name=csrf_token]")["value"]})
    for _ in range(3):
        assert _post(attacker, "admin", "wrong-password", address="192.0.2.66").status_code == 401
    assert _post(attacker, "admin", "password-123", address="192.0.2.66").status_code == 429  # locked for everyone else
    assert _post(app.test_client(), "admin", "password-123", address="198.51.100.1").status_code == 429  # the owner elsewhere
    assert _post(owner, "admin", "password-123", address="198.51.100.1").status_code == 303  # the owner's browser: in
    # The owner's own typos count against the device, not the name, and are limited there too.
    owner.delete_cookie("session")
    for _ in range(3):
        assert _post(owner, "admin", "typo", address="198.51.100.1").status_code == 401
    assert _post(owner, "admin", "password-123", address="198.51.100.1").status_code == 429
    # A forged or another account's device cookie gives nothing.
    forged = app.test_client()
    forged.set_cookie("calibrate_device", device.value[:-1] + ("0" if device.value[-1] != "0" else "1"))
    assert _post(forged, "admin", "password-123", address="198.51.100.2").status_code == 429


def test_an_attacker_without_the_cookie_is_slowed_exponentially_not_locked_for_an_hour(session):
    """Each guess past the limit doubles the wait, up to LOGIN_LOCKOUT_MAX (15 minutes by default): 4 guesses an hour."""
    from calibrate.logins import begin_attempt

    throttle = Throttle()  # the defaults: 10 failures, 60 s doubling, 900 s at most
    start = now = 1_000_000
    waits, guessed_at = [], []
    while now < start + 3 * 3600:
        attempt = begin_attempt(session, "admin", f"198.51.100.{len(guessed_at) % 200}", throttle, now=now)
        if attempt.wait:
            waits.append(attempt.wait)
            now += attempt.wait
            continue
        guessed_at.append(now - start)
    per_hour = [sum(h * 3600 <= t < (h + 1) * 3600 for t in guessed_at) for h in range(3)]
    # 10 at once, then after 60, 120, 240 and 480 s, then one every 900 s: 16 in the first hour, 4 an hour after.
    assert per_hour == [16, 4, 4]
    assert max(waits) == 900
