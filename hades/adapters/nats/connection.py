"""Connecting to NATS with the Go Hades's options (client name, timeouts, credentials, TLS)."""

from __future__ import annotations

import ssl
from typing import Any

import nats
from nats.aio.client import Client


async def connect(
    url: str,
    username: str | None = None,
    password: str | None = None,
    tls: bool = False,
    name: str = "Hades",
) -> Client:
    """Open a connection that keeps reconnecting, as a long-running service needs."""
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
    return await nats.connect(**options)
