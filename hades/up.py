"""``hades up``: every role in one process, over an embedded nats-server (the quick start) or ``NATS_URL``; and
what the other commands that start something share with it (the event loop, the topology, a free port)."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from hades.adapters.nats.topology import ApplyReport
from hades.config import Settings

if TYPE_CHECKING:
    from hades.adapters.nats.server import EmbeddedNats

log = logging.getLogger("hades")

_T = TypeVar("_T")


def run_async(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coroutine`` to its end on uvloop (asyncio's own loop where uvloop does not build)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency where it builds
        return asyncio.run(coroutine)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


def up(settings: Settings) -> int:
    """Every role in this process: over ``NATS_URL`` when set, else over an embedded nats-server whose data folder
    is locked against a second ``hades up``."""
    from hades.adapters.data_lock import DataDirLock
    from hades.adapters.nats.server import start_nats, store_dir_for
    from hades.runtime import Roles, serve

    url = settings.nats_url
    ensure_free("API_PORT", settings.api_host, settings.api_port)
    if url is not None:
        run_async(apply_topology(url, settings, quiet=True))
        log.info("API on http://localhost:%d", settings.api_port)
        run_async(serve(settings, Roles.all(), url))
        return 0
    lock = DataDirLock(Path(settings.data_dir).absolute())  # before any nats-server touches the store
    try:
        ensure_free("NATS_PORT", "127.0.0.1", settings.nats_port, "or set NATS_URL to use the server already there")
        store = store_dir_for(settings.data_dir)
        embedded = start_nats(
            store,
            port=settings.nats_port,
            sync_interval=settings.nats_sync_interval,
            log_file=store / "server.log",
            hold=(lock.fd,),
        )
        log.info("embedded nats-server at %s, data in %s", embedded.url, store)
        try:
            run_async(apply_topology(embedded.url, settings, quiet=True))
            log.info("API on http://localhost:%d", settings.api_port)
            run_async(_serve_embedded(settings, embedded))
        finally:
            embedded.stop()
    finally:
        lock.release()
    return 0


async def _serve_embedded(settings: Settings, embedded: EmbeddedNats) -> None:
    """Every role over the embedded server, and the server watched: if it dies, the process stops at once.

    Without its server the process could only spin (every append timing out) and nothing it did could be recorded,
    so it exits non-zero for its supervisor (systemd, Docker's restart policy, ``make up`` again) to restart it;
    JetStream recovers from its store, and the executors' sweep and the watchdog take back what was running.
    """
    from hades.runtime import Roles, serve, stop_at_once

    serving = asyncio.create_task(serve(settings, Roles.all(), embedded.url))
    watching = asyncio.create_task(embedded.exited())
    await asyncio.wait({serving, watching}, return_when=asyncio.FIRST_COMPLETED)
    if serving.done():
        watching.cancel()
        serving.result()  # what stopped it, if anything did
        return
    stop_at_once(
        1,
        f"the embedded nats-server exited unexpectedly (status {watching.result()}; its log: "
        f"{embedded.store_dir / 'server.log'}): stopping hades at once, for its supervisor to start it again",
    )


def ensure_free(variable: str, host: str, port: int, alternative: str = "") -> None:
    """Refuse to start, naming the setting, when something already listens on ``port`` (another Hades, often)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers themselves bind
        try:
            probe.bind((host, port))
        except OSError as error:
            extra = f", {alternative}" if alternative else ""
            raise RuntimeError(
                f"{variable} {port} on {host} is taken ({error.strerror}): stop what listens there (another "
                f"`hades up`?), or set {variable} to a free port{extra}"
            ) from None


async def apply_topology(url: str, settings: Settings, quiet: bool) -> ApplyReport:
    """``streams.yaml`` (with ``HADES_STREAM_REPLICAS``) applied to the NATS at ``url``, each change logged."""
    from hades.adapters.nats.connection import connect
    from hades.adapters.nats.topology import apply, load_topology

    topology = load_topology(settings.streams_file)
    if settings.stream_replicas is not None:
        topology = topology.with_replicas(settings.stream_replicas)
    nc = await connect(url, settings.nats_username, settings.nats_password, settings.nats_tls_enabled)
    try:
        report = await apply(nc.jetstream(), topology)
    finally:
        await nc.close()
    for verb, names in (
        ("created", report.created),
        ("updated", report.updated),
        ("unchanged", report.unchanged),
    ):
        for name in names:
            if not quiet or verb != "unchanged":
                log.info("%s %s", verb, name)
    return report
