"""Dashboard sessions, lockout, client addresses and configuration (contract 6.1-6.2), without a server."""

from __future__ import annotations

import base64
import ipaddress
import json
from datetime import timedelta

import bcrypt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hades.config import Settings
from hades.http.dashboard.config import DashboardConfig, DashboardConfigError, parse_go_duration, parse_networks
from hades.http.dashboard.session import (
    LOCKOUT_SECONDS,
    MAX_TRACKED_CLIENTS,
    InvalidSession,
    Lockout,
    check_password,
    client_address,
    sign_session,
    verify_session,
)

SECRET = b"s" * 32
HASH = bcrypt.hashpw(b"correct horse", bcrypt.gensalt(rounds=4))


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


# -- tokens ------------------------------------------------------------------------------------------------------


def test_a_token_is_the_go_format_and_verifies_until_it_expires() -> None:
    token = sign_session(SECRET, "admin", 1_000)
    payload, _ = token.split(".")
    assert json.loads(base64.urlsafe_b64decode(payload + "==")) == {"u": "admin", "exp": 1_000}
    assert "=" not in token
    assert verify_session(SECRET, token, 999.9) == "admin"
    with pytest.raises(InvalidSession, match="expired"):
        verify_session(SECRET, token, 1_000)  # expired when now >= exp


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("no-dot", "malformed"),
        ("!!!.!!!", "encoding"),
        (f"{b64(b'not json')}.{b64(b'x')}", "encoding"),
        (f"{b64(json.dumps({'u': 'admin', 'exp': 10**12}).encode())}.{b64(b'forged')}", "signature"),
    ],
)
def test_bad_tokens_are_refused(token: str, why: str) -> None:
    with pytest.raises(InvalidSession, match=why):
        verify_session(SECRET, token, 0)


def test_a_token_signed_with_another_secret_is_refused() -> None:
    with pytest.raises(InvalidSession, match="signature"):
        verify_session(SECRET, sign_session(b"t" * 32, "admin", 10**12), 0)


def test_a_well_signed_token_with_a_bad_payload_is_refused() -> None:
    import hmac
    from hashlib import sha256

    payload = b64(json.dumps({"u": 7, "exp": "soon"}).encode())
    token = f"{payload}.{b64(hmac.new(SECRET, payload.encode(), sha256).digest())}"
    with pytest.raises(InvalidSession, match="payload"):
        verify_session(SECRET, token, 0)


@given(st.text(max_size=40), st.integers(min_value=1, max_value=2**40))
def test_any_user_round_trips_and_any_flipped_character_is_refused(user: str, expires: int) -> None:
    token = sign_session(SECRET, user, expires)
    assert verify_session(SECRET, token, expires - 1) == user
    for i in range(0, len(token), max(len(token) // 8, 1)):
        if token[i] == ".":
            continue
        tampered = token[:i] + ("A" if token[i] != "A" else "B") + token[i + 1 :]
        with pytest.raises(InvalidSession):
            verify_session(SECRET, tampered, expires - 1)


# -- passwords ---------------------------------------------------------------------------------------------------


def test_password_check_needs_both_the_user_and_the_password() -> None:
    assert check_password(HASH, "admin", "correct horse", "admin")
    assert not check_password(HASH, "admin", "wrong", "admin")
    assert not check_password(HASH, "root", "correct horse", "admin")
    assert not check_password(b"not a hash", "admin", "correct horse", "admin")


def test_htpasswd_2y_hashes_work() -> None:
    assert check_password(b"$2y$" + HASH[4:], "admin", "correct horse", "admin")


# -- lockout -----------------------------------------------------------------------------------------------------


def test_five_failures_lock_a_client_for_fifteen_sliding_minutes() -> None:
    lockout = Lockout()
    for i in range(4):
        lockout.failed("10.0.0.1", 100.0 + i)
    assert not lockout.locked("10.0.0.1", 104.0)
    lockout.failed("10.0.0.1", 104.0)
    assert lockout.locked("10.0.0.1", 104.0)
    assert not lockout.locked("10.0.0.2", 104.0)
    assert lockout.locked("10.0.0.1", 104.0 + LOCKOUT_SECONDS - 1)
    assert not lockout.locked("10.0.0.1", 104.0 + LOCKOUT_SECONDS)


def test_an_expired_entry_restarts_its_count_and_a_success_forgets_it() -> None:
    lockout = Lockout()
    for _ in range(5):
        lockout.failed("a", 0.0)
    lockout.failed("a", LOCKOUT_SECONDS + 1.0)  # window over: this is failure 1 of a new count
    assert not lockout.locked("a", LOCKOUT_SECONDS + 1.0)
    for _ in range(4):
        lockout.failed("b", 0.0)
    lockout.succeeded("b")
    lockout.failed("b", 1.0)
    assert lockout.clients["b"].count == 1


def test_the_table_is_bounded() -> None:
    lockout = Lockout()
    for i in range(MAX_TRACKED_CLIENTS + 10):
        lockout.failed(f"c{i}", 0.0)
    assert len(lockout.clients) == MAX_TRACKED_CLIENTS
    lockout.failed("late", LOCKOUT_SECONDS + 1.0)  # expired entries are purged on a failure
    assert list(lockout.clients) == ["late"]


# -- client addresses --------------------------------------------------------------------------------------------

PROXIES = parse_networks("10.0.0.0/8, 192.168.1.5")


def test_forwarded_for_is_ignored_unless_the_peer_is_a_trusted_proxy() -> None:
    assert client_address("203.0.113.9", "1.2.3.4", PROXIES) == "203.0.113.9"
    assert client_address("10.1.2.3", "1.2.3.4", ()) == "10.1.2.3"
    assert client_address("10.1.2.3", "1.2.3.4", PROXIES) == "1.2.3.4"


def test_a_client_cannot_choose_its_address_by_prepending_hops() -> None:
    # the client sent "X-Forwarded-For: 6.6.6.6"; the trusted proxies appended what they saw
    assert client_address("10.0.0.1", "6.6.6.6, 198.51.100.7, 192.168.1.5", PROXIES) == "198.51.100.7"


def test_bad_proxy_settings_are_named() -> None:
    with pytest.raises(DashboardConfigError, match="DASHBOARD_TRUSTED_PROXIES: 'nope'"):
        parse_networks("10.0.0.0/8,nope")
    assert parse_networks("") == ()
    assert parse_networks("::1")[0] == ipaddress.ip_network("::1/128")


# -- durations and configuration ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12h", timedelta(hours=12)),
        ("1h30m", timedelta(minutes=90)),
        ("90s", timedelta(seconds=90)),
        ("500ms", timedelta(milliseconds=500)),
        ("1.5h", timedelta(minutes=90)),
        ("0", timedelta(0)),
        ("-1h", timedelta(hours=-1)),
    ],
)
def test_go_durations(text: str, expected: timedelta) -> None:
    assert parse_go_duration(text, "X") == expected


@pytest.mark.parametrize("text", ["", "12", "h", "1d", "1h 30m", "abc", "1hh"])
def test_bad_durations_name_the_variable(text: str) -> None:
    with pytest.raises(DashboardConfigError, match="DASHBOARD_SESSION_TTL"):
        parse_go_duration(text, "DASHBOARD_SESSION_TTL")


def settings(**env: str) -> Settings:
    base = {
        "DASHBOARD_USERNAME": "admin",
        "DASHBOARD_PASSWORD_HASH": HASH.decode(),
        "DASHBOARD_SESSION_SECRET": "x" * 32,
    }
    return Settings(**{**base, **env})  # type: ignore[arg-type]


def test_the_dashboard_is_off_unless_all_three_are_set() -> None:
    assert DashboardConfig.from_settings(settings(DASHBOARD_USERNAME="")) is None
    assert DashboardConfig.from_settings(settings(DASHBOARD_PASSWORD_HASH="")) is None
    assert DashboardConfig.from_settings(settings(DASHBOARD_SESSION_SECRET="")) is None
    config = DashboardConfig.from_settings(settings())
    assert config is not None
    assert config.session_ttl == timedelta(hours=12)
    assert config.job_retention == timedelta(hours=1)
    assert config.cookie_secure
    assert config.version == "dev"


def test_non_positive_durations_become_the_defaults() -> None:
    config = DashboardConfig.from_settings(settings(DASHBOARD_SESSION_TTL="0", DASHBOARD_JOB_RETENTION="-5m"))
    assert config is not None
    assert (config.session_ttl, config.job_retention) == (timedelta(hours=12), timedelta(hours=1))


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DASHBOARD_SESSION_SECRET": "x" * 31}, "DASHBOARD_SESSION_SECRET must be at least 32"),
        ({"DASHBOARD_PASSWORD_HASH": "hunter2"}, "DASHBOARD_PASSWORD_HASH is not a bcrypt hash"),
        ({"DASHBOARD_SESSION_TTL": "forever"}, "DASHBOARD_SESSION_TTL"),
        ({"DASHBOARD_JOB_RETENTION": "1 day"}, "DASHBOARD_JOB_RETENTION"),
        ({"SECRET_KEY_PATTERNS": "("}, "SECRET_KEY_PATTERNS"),
    ],
)
def test_a_bad_setting_stops_start_up_with_its_name(env: dict[str, str], message: str) -> None:
    with pytest.raises(DashboardConfigError, match=message):
        DashboardConfig.from_settings(settings(**env))
