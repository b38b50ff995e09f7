"""Basic auth compares both parts in constant time, always both: a refusal does not tell which part was wrong."""

from __future__ import annotations

import base64
import hmac

import pytest

from hades.http import auth

KEY = "the-auth-key"


def header(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize(
    ("user", "password", "ok"),
    [
        ("hades", KEY, True),
        ("hades", "wrong", False),
        ("hades", KEY + "x", False),
        ("nobody", KEY, False),
        ("h", KEY, False),
        ("nobody", "wrong", False),
        ("", "", False),
    ],
)
def test_both_parts_are_always_compared_with_compare_digest(
    monkeypatch: pytest.MonkeyPatch, user: str, password: str, ok: bool
) -> None:
    compared: list[tuple[bytes, bytes]] = []
    compare = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return compare(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", recording)
    assert auth.credentials_ok(header(user, password), KEY) is ok
    assert compared == [(user.encode(), b"hades"), (password.encode(), KEY.encode())]


@pytest.mark.parametrize("value", [None, "", "Bearer x", "Basic !!!", "Basic " + base64.b64encode(b"\xff:x").decode()])
def test_malformed_headers_are_refused(value: str | None) -> None:
    assert not auth.credentials_ok(value, KEY)
