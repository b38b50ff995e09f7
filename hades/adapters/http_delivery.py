"""One HTTP POST of a JSON body to a client's URL: the status code or what went wrong, and how long it took.

No retries here: the notifier retries through JetStream redelivery, so that every attempt is one recorded event.
The whole attempt (connect, send, response head) is bounded by one deadline, as the Go Log Manager bounds its send
by a 10 s context. The response body is never read: only the status matters, and a receiver cannot make us buffer
an endless answer. Redirects are not followed (a 3xx is a failed attempt).

Where a :class:`CallbackPolicy` restricts the targets, the URL's host is checked before anything is sent, and every
address the host resolves to is checked when the connection is made, then the connection goes to that very address:
a name that resolved to a public address when the job was submitted cannot be turned towards an internal one later
(DNS rebinding). A refused target is a failed attempt whose error says why; not a byte is sent to it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import httpcore
import httpx

from hades.core.redact import mask_urls
from hades.core.urls import CallbackPolicy, callback_host

JSON_HEADERS = {"Content-Type": "application/json"}


class _MaskedUrls(logging.Filter):
    """httpx logs every request's full URL at INFO, and a callback or input URL may carry a password or a token in
    its query: such a record's URLs are masked before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_urls(message)
        if masked != message:
            record.msg, record.args = masked, ()
        return True


logging.getLogger("httpx").addFilter(_MaskedUrls())  # on import: the notifier and the input fetcher import this module


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


class TargetRefused(Exception):
    """The callback policy forbids the target: nothing was sent."""


class HttpDelivery:
    """POSTs JSON bodies with one shared connection pool; ``aclose`` when done."""

    def __init__(
        self, timeout: float, client: httpx.AsyncClient | None = None, policy: CallbackPolicy | None = None
    ) -> None:
        self._timeout = timeout
        self._policy = policy or CallbackPolicy()
        transport = _GuardedTransport(self._policy) if self._policy.restricts else None
        self._client = client or httpx.AsyncClient(
            timeout=timeout, follow_redirects=False, transport=transport, trust_env=transport is None
        )

    async def post_json(self, url: str, body: bytes, headers: Mapping[str, str] | None = None) -> DeliveryResult:
        """POST ``body`` (JSON already encoded) to ``url`` with ``Content-Type: application/json`` and ``headers``."""
        started = time.monotonic()
        try:
            refused = self._policy.host_refusal(callback_host(url)) if self._policy.restricts else None
            if refused is not None:
                raise TargetRefused(refused)
            async with asyncio.timeout(self._timeout):
                status = await self._post(url, body, {**JSON_HEADERS, **(headers or {})})
        except TargetRefused as error:
            return DeliveryResult(_ms_since(started), error=f"not sent: {error}")
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


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves the host itself, refuses unless the policy allows every address, then connects to one of them."""

    def __init__(self, policy: CallbackPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as error:
            raise httpcore.ConnectError(f"cannot resolve {host}: {error}") from error
        addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
        for address in addresses:  # every one: a name must not smuggle an internal address in among public ones
            refused = self._policy.address_refusal(host, address)
            if refused is not None:
                raise TargetRefused(refused)
        return await self._inner.connect_tcp(addresses[0], port, timeout, local_address, socket_options)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise TargetRefused("callbacks are never delivered over a unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport over a connection pool whose connections go through :class:`_GuardedBackend`.

    No proxy: a proxy would make the connection (and the check) to itself, not to the target.
    """

    def __init__(self, policy: CallbackPolicy) -> None:
        super().__init__(trust_env=False)
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_GuardedBackend(policy),
        )


def guarded_transport(policy: CallbackPolicy) -> httpx.AsyncHTTPTransport:
    """A transport whose every connection is checked against ``policy`` (for other fetches than callbacks: inputs)."""
    return _GuardedTransport(policy)


def _ms_since(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def _describe(error: Exception) -> str:
    if isinstance(error, httpx.TimeoutException):
        return f"timed out: {type(error).__name__}"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
