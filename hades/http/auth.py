"""HTTP Basic auth for ``/build``: user ``hades``, password ``AUTH_KEY``, only when ``AUTH_KEY`` is set."""

from __future__ import annotations

import base64
import binascii
import hmac

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler

USER = "hades"
REALM = 'Basic realm="Authorization Required"'


def credentials_ok(header: str | None, auth_key: str) -> bool:
    """Compare user and password in constant time; both comparisons always run."""
    if not header or not header.startswith("Basic "):
        return False
    try:
        user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return False
    user_ok = hmac.compare_digest(user.encode(), USER.encode())
    password_ok = hmac.compare_digest(password.encode(), auth_key.encode())
    return user_ok and password_ok


async def basic_auth_guard(connection: ASGIConnection, _: BaseRouteHandler) -> None:  # type: ignore[type-arg]
    """Refuse with 401 and a ``WWW-Authenticate`` challenge unless the credentials match.

    A coroutine, though it never waits: litestar runs a plain-function guard in its thread pool, a thread hop
    (and the GIL handed back and forth) per request, about a tenth of the API's CPU on ``POST /build``."""
    require_basic_auth(connection, connection.app.state.services.auth_key)


def require_basic_auth(connection: ASGIConnection, auth_key: str) -> None:  # type: ignore[type-arg]
    """The guard's check, for a handler that makes it itself: litestar hands every guard call a copy of the route
    handler (``copy.copy``), which cost ``POST /build`` 5% of the API's CPU."""
    if auth_key and not credentials_ok(connection.headers.get("authorization"), auth_key):
        raise NotAuthorizedException(headers={"WWW-Authenticate": REALM})
