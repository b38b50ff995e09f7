"""Dashboard sessions and login lockout, as the Go Hades has them (contract 6.2).

A session is a stateless signed token, ``b64url(JSON{"u","exp"}) + "." + b64url(HMAC-SHA256(secret, payload))``,
so any API replica with the same secret accepts it and none keeps a session store. The lockout counts failed logins
per client address in this process.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from hashlib import sha256

import bcrypt

from hades.http.dashboard.config import Network

COOKIE = "hades_dashboard_session"
MAX_FAILURES = 5
LOCKOUT_SECONDS = 15 * 60
MAX_TRACKED_CLIENTS = 4096


class InvalidSession(Exception):
    """A token with a bad signature, encoding or payload, or one that has expired."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign_session(secret: bytes, username: str, expires: int) -> str:
    """The token for ``username``, valid until the unix second ``expires``."""
    payload = _b64(json.dumps({"u": username, "exp": expires}, separators=(",", ":")).encode())
    return f"{payload}.{_b64(hmac.new(secret, payload.encode(), sha256).digest())}"


def verify_session(secret: bytes, token: str, now: float) -> str:
    """The token's user; raises InvalidSession."""
    payload, dot, signature = token.partition(".")
    if not dot:
        raise InvalidSession("malformed token")
    expected = hmac.new(secret, payload.encode(), sha256).digest()
    try:
        given = _unb64(signature)
        claims = json.loads(_unb64(payload))
    except (binascii.Error, ValueError):
        raise InvalidSession("bad encoding") from None
    if not hmac.compare_digest(given, expected):
        raise InvalidSession("bad signature")
    if not isinstance(claims, dict) or not isinstance(claims.get("u"), str) or not isinstance(claims.get("exp"), int):
        raise InvalidSession("bad payload")
    if now >= claims["exp"]:
        raise InvalidSession("expired")
    return str(claims["u"])


def check_password(password_hash: bytes, username: str, password: str, configured_user: str) -> bool:
    """Both checks always run: the username in constant time, the password with bcrypt."""
    user_ok = hmac.compare_digest(username.encode(), configured_user.encode())
    try:
        password_ok = bcrypt.checkpw(password.encode(), _bcrypt_hash(password_hash))
    except ValueError:
        password_ok = False
    return user_ok and password_ok


def _bcrypt_hash(password_hash: bytes) -> bytes:
    """``$2y$`` (htpasswd's prefix) is the same algorithm as ``$2b$``; the bcrypt package wants the latter."""
    return b"$2b$" + password_hash[4:] if password_hash.startswith(b"$2y$") else password_hash


@dataclass
class _Failures:
    count: int
    until: float


@dataclass
class Lockout:
    """Five failures within a sliding 15 minutes lock a client out; a success forgets it."""

    clients: dict[str, _Failures] = field(default_factory=dict)

    def locked(self, client: str, now: float) -> bool:
        """True while the client has 5 failures and its window has not passed."""
        entry = self.clients.get(client)
        return entry is not None and entry.count >= MAX_FAILURES and now < entry.until

    def failed(self, client: str, now: float) -> None:
        """Record a failure; each one moves the window's end to now + 15 minutes."""
        self._purge(now)
        entry = self.clients.get(client)
        if entry is None or now >= entry.until:
            if entry is None and len(self.clients) >= MAX_TRACKED_CLIENTS:
                return  # a full table tracks no new clients rather than grow without bound
            entry = self.clients[client] = _Failures(count=0, until=0.0)
        entry.count += 1
        entry.until = now + LOCKOUT_SECONDS

    def succeeded(self, client: str) -> None:
        """Forget the client's failures."""
        self.clients.pop(client, None)

    def _purge(self, now: float) -> None:
        expired = [client for client, entry in self.clients.items() if now >= entry.until]
        for client in expired:
            del self.clients[client]


def client_address(peer: str | None, forwarded_for: str | None, trusted: Sequence[Network]) -> str:
    """The client's address: the peer's, unless the peer is a trusted proxy, then the nearest untrusted hop.

    ``X-Forwarded-For`` is read right to left, skipping trusted proxies, so a client cannot pick its own lockout
    key by sending the header itself.
    """
    address = peer or ""
    if not trusted or not forwarded_for or not _is_trusted(address, trusted):
        return address
    for hop in reversed([part.strip() for part in forwarded_for.split(",") if part.strip()]):
        address = hop
        if not _is_trusted(hop, trusted):
            break
    return address


def _is_trusted(address: str, trusted: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in trusted)
