"""Connecting to NATS with the Go Hades's options (client name, timeouts, credentials, TLS)."""

from __future__ import annotations

import ssl
from typing import Any

import nats
from nats.aio.client import Client
from nats.errors import NoRespondersError
from nats.js.errors import NoStreamResponseError, ServiceUnavailableError

#: What a NATS that is there but cannot answer yet raises (a node restarting, a cluster electing leaders): worth
#: asking again. ``TimeoutError`` covers nats-py's own, which subclasses it.
UNAVAILABLE = (TimeoutError, NoRespondersError, NoStreamResponseError, ServiceUnavailableError)


async def connect(
    url: str,
    username: str | None = None,
    password: str | None = None,
    tls: bool = False,
    name: str = "Hades",
) -> Client:
    """Open a connection that keeps reconnecting, as a long-running service needs."""
    return await nats.connect(**connect_options(url, username, password, tls, name))


def connect_options(
    url: str,
    username: str | None = None,
    password: str | None = None,
    tls: bool = False,
    name: str = "Hades",
) -> dict[str, Any]:
    """The options of :func:`connect`, which FastStream's ``NatsBroker`` takes under the same names.

    ``url`` may list several servers, comma-separated (a cluster): the client picks one and fails over to the others.
    """
    options: dict[str, Any] = {
        "servers": [u.strip() for u in url.split(",") if u.strip()],
        "name": name,
        "connect_timeout": 10,
        "reconnect_time_wait": 2,
        "max_reconnect_attempts": -1,
    }
    if username and password:
        options["user"], options["password"] = username, password
    if tls:
        context = ssl.create_default_context()
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        options["tls"] = context
    return options
