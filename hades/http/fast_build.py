"""``POST /build`` answered in front of litestar: the API's hot path without the framework's per-request work.

In the control-plane bench's profile litestar's own work on ``POST /build`` (routing, the handler's signature model
and kwargs, the exception middleware, response building, the ``before_send`` hook) cost about as much CPU as
enqueueing the job. A plain request — ``POST`` on exactly ``/build``, a ``Content-Length`` within
``MAX_REQUEST_BYTES``, credentials that pass (or no ``AUTH_KEY``), no ``Idempotency-Key`` — is answered here by the
handler's own function (``build.enqueue``) with the same status, body and headers; anything else (a challenge, a
body too large or chunked, a keyed submission, any other route) goes to litestar unchanged, so those answers stay
the framework's. The route stays
declared in litestar too: it documents ``/build`` in the OpenAPI schema and answers what this path hands on.
"""

from __future__ import annotations

import json
import logging
from typing import Any, cast

from litestar.types import ASGIApp, Message, Receive, Scope, Send

from hades.http.auth import credentials_ok
from hades.http.build import enqueue
from hades.http.services import ApiServices

log = logging.getLogger(__name__)

_JSON = b"application/json"
_TEXT = b"text/plain; charset=utf-8"


class BuildFastPath:
    """ASGI in front of ``app``: plain ``POST /build`` requests are enqueued here, everything else goes to ``app``."""

    def __init__(self, app: ASGIApp, services: ApiServices, max_body: int, security_headers: dict[str, str]) -> None:
        self._app = app
        self._services = services
        self._max_body = max_body
        self._headers = [(name.lower().encode(), value.encode()) for name, value in security_headers.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = cast(dict[str, Any], scope)
        if raw["type"] != "http" or raw["path"] != "/build" or raw["method"] != "POST" or not self._plain(raw):
            await self._app(scope, receive, send)
            return
        body = await _read(receive)
        if body is None:
            return  # the client went away before it had sent the body
        try:
            status, answer = await enqueue(self._services, body)
        except Exception:  # as litestar's exception middleware would: logged, and a bare 500
            log.exception("POST /build failed")
            await self._answer(send, 500, _JSON, b'{"status_code":500,"detail":"Internal Server Error"}')
            return
        if isinstance(answer, str):
            await self._answer(send, status, _TEXT, answer.encode())
        else:
            await self._answer(send, status, _JSON, json.dumps(answer, separators=(",", ":")).encode())

    def _plain(self, scope: dict[str, Any]) -> bool:
        """A body of a known size within the limit, and credentials that pass: what this path answers itself."""
        length: bytes | None = None
        authorization: bytes | None = None
        for name, value in scope["headers"]:
            if name == b"content-length":
                length = value
            elif name == b"authorization":
                authorization = value
            elif name in (b"transfer-encoding", b"idempotency-key"):
                return False  # a chunked body, or a keyed submission: the handler's own path
        if length is None or not length.isdigit() or int(length) > self._max_body:
            return False
        key = self._services.auth_key
        return not key or credentials_ok(authorization.decode("latin-1") if authorization else None, key)

    async def _answer(self, send: Send, status: int, media_type: bytes, body: bytes) -> None:
        headers = [(b"content-type", media_type), (b"content-length", str(len(body)).encode()), *self._headers]
        await send(cast(Message, {"type": "http.response.start", "status": status, "headers": headers}))
        await send(cast(Message, {"type": "http.response.body", "body": body, "more_body": False}))


async def _read(receive: Receive) -> bytes | None:
    """The whole request body; None when the client disconnected first."""
    chunks: list[bytes] = []
    while True:
        message = cast(dict[str, Any], await receive())
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)
