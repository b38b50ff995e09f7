"""Connecting to NATS with the Go Hades's options (client name, timeouts, credentials, TLS)."""

from __future__ import annotations

import contextlib
import logging
import ssl
import sys
import weakref
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import nats
from nats.aio.client import Client
from nats.errors import Error as NatsError
from nats.errors import NoRespondersError
from nats.js.errors import NoStreamResponseError, ServiceUnavailableError

from hades.core.errors import StoreUnavailable

log = logging.getLogger(__name__)

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
    """Open a connection that keeps reconnecting, as a long-running service needs, each failure said in one line
    (nats-py's default logs a traceback per try, every 2 s while the server is down) and the return too."""
    made: list[Client] = []

    async def reconnected() -> None:
        log.info("reconnected to NATS")
        for listener in list(_reconnect_listeners.get(made[0], ())) if made else ():
            listener()

    client = await nats.connect(
        **connect_options(url, username, password, tls, name),
        error_cb=_connection_failed,
        reconnected_cb=reconnected,
    )
    made.append(client)
    return client


#: Per connection made by :func:`connect`, what to call each time it reconnects.
_reconnect_listeners: weakref.WeakKeyDictionary[Client, list[Callable[[], None]]] = weakref.WeakKeyDictionary()


def on_reconnect(nc: Client, listener: Callable[[], None]) -> Callable[[], None]:
    """Call ``listener`` each time ``nc`` is connected again after losing its server (for a connection made by
    :func:`connect`; others never call it); returns how to stop. A listener must not block: it may set an event
    or start a task."""
    listeners = _reconnect_listeners.setdefault(nc, [])
    listeners.append(listener)

    def forget() -> None:
        with contextlib.suppress(ValueError):
            listeners.remove(listener)

    return forget


def log_failure(logger: logging.Logger, message: str, *args: object) -> None:
    """In an ``except`` block of a loop that tries again: one warning line when the error is NATS being away (a
    restart, an election: every role meets it every few seconds until it is back, and the connection already says
    so), the traceback otherwise (a bug)."""
    error = sys.exc_info()[1]
    if isinstance(error, NatsError | OSError | StoreUnavailable):
        logger.warning(f"{message} (NATS unavailable: %r)", *args, error)
    else:
        logger.exception(message, *args)


async def _connection_failed(error: Exception) -> None:
    log.warning("NATS connection: %s", str(error) or type(error).__name__)


def connect_options(
    url: str,
    username: str | None = None,
    password: str | None = None,
    tls: bool = False,
    name: str = "Hades",
) -> dict[str, Any]:
    """The options of :func:`connect`: the servers, credentials, TLS and endless reconnecting every role uses.

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


class NatsUnreachable(RuntimeError):
    """No connection to any of the servers: the message names them and the last error."""


async def connect_once(
    url: str,
    username: str | None = None,
    password: str | None = None,
    tls: bool = False,
    timeout: float = 3.0,
    name: str = "Hades",
) -> Client:
    """One short attempt per server and no reconnecting, for a tool that must say at once that NATS is not there.

    nats-py keeps selecting servers forever unless ``max_reconnect_attempts`` is positive, hence 1 (two tries).
    """
    errors: list[Exception] = []

    async def record(error: Exception) -> None:
        errors.append(error)

    options = connect_options(url, username, password, tls, name)
    options.update(
        connect_timeout=timeout,
        allow_reconnect=False,
        max_reconnect_attempts=1,
        reconnect_time_wait=0.1,
        error_cb=record,
    )
    try:
        return await nats.connect(**options)
    except Exception as error:  # NoServersError, an auth violation, a TLS handshake failure, a timeout
        cause = errors[-1] if errors else error
        reason = str(cause) or type(cause).__name__
        raise NatsUnreachable(f"cannot connect to NATS at {_without_password(url)}: {reason}") from error


def _without_password(url: str) -> str:
    """``nats://user:****@host:4222`` for a URL that carries a password, so it can be printed."""
    parts = [urlsplit(u.strip()) for u in url.split(",") if u.strip()]
    shown = []
    for part in parts:
        if part.password:
            part = part._replace(netloc=f"{part.username}:****@{part.hostname}{f':{part.port}' if part.port else ''}")
        shown.append(part.geturl())
    return ",".join(shown)
