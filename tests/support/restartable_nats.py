"""A nats-server on a fixed port with streams.yaml applied, to be SIGKILLed or SIGTERMed and started again on the same
store: what a client sees through a NATS restart."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from hades.adapters.nats.connection import connect
from hades.adapters.nats.server import EmbeddedNats, start_nats
from hades.adapters.nats.topology import apply, load_topology
from tests.conftest import free_port


class Restartable:
    """A nats-server on a fixed port, started again on the same store."""

    def __init__(self, store: Path) -> None:
        self.store, self.port = store, free_port()
        self.server: EmbeddedNats = start_nats(store, port=self.port)

    def restart(self, kill: bool) -> None:
        """SIGKILL (nothing flushed) or SIGTERM (JetStream flushed), then start again at once."""
        self.stop(kill)
        self.start()

    def stop(self, kill: bool = True) -> None:
        if kill:
            self.server.process.kill()
            self.server.process.wait()
        else:
            self.server.stop()

    def start(self) -> None:
        self.server = start_nats(self.store, port=self.port)


@contextlib.asynccontextmanager
async def restartable_node(store: Path) -> AsyncIterator[Restartable]:
    """A restartable nats-server with the topology applied, killed at the end."""
    node = Restartable(store)
    try:
        nc = await connect(node.server.url)
        await apply(nc.jetstream(), load_topology())
        await nc.close()
        yield node
    finally:
        node.server.process.kill()
        node.server.process.wait()
