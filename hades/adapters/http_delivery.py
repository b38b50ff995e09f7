"""One HTTP POST of a JSON body to a client's URL: the status code or what went wrong, and how long it took.

No retries here: the notifier retries through JetStream redelivery, so that every attempt is one recorded event.
The whole attempt (connect, send, response head) is bounded by one deadline, as the Go Log Manager bounds its send
by a 10 s context. The response body is never read: only the status matters, and a receiver cannot make us buffer
an endless answer. Redirects are not followed (a 3xx is a failed attempt).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

JSON_HEADERS = {"Content-Type": "application/json"}


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    """How one POST went: ``status_code`` when the receiver answered, ``error`` unless it answered 2xx."""

    duration_ms: int
    status_code: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """The receiver answered 2xx."""
        return self.error is None


class HttpDelivery:
    """POSTs JSON bodies with one shared connection pool; ``aclose`` when done."""

    def __init__(self, timeout: float, client: httpx.AsyncClient | None = None) -> None:
        self._timeout = timeout
        self._client = client or httpx.AsyncClient(timeout=timeout, follow_redirects=False)

    async def post_json(self, url: str, body: bytes, headers: Mapping[str, str] | None = None) -> DeliveryResult:
        """POST ``body`` (JSON already encoded) to ``url`` with ``Content-Type: application/json`` and ``headers``."""
        started = time.monotonic()
        try:
            async with asyncio.timeout(self._timeout):
                status = await self._post(url, body, {**JSON_HEADERS, **(headers or {})})
        except TimeoutError:
            return DeliveryResult(_ms_since(started), error=f"no answer within {self._timeout:g} s")
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as error:
            return DeliveryResult(_ms_since(started), error=_describe(error))
        if 200 <= status < 300:
            return DeliveryResult(_ms_since(started), status_code=status)
        return DeliveryResult(_ms_since(started), status_code=status, error=f"receiver answered HTTP {status}")

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> int:
        async with self._client.stream("POST", url, content=body, headers=headers) as response:
            return response.status_code

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()


def _ms_since(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def _describe(error: Exception) -> str:
    if isinstance(error, httpx.TimeoutException):
        return f"timed out: {type(error).__name__}"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
