"""A nats-server of a test's own, with streams.yaml applied: for tests that change the topology behind Hades's back
(``hades doctor``, ``hades streams show``), which must not disturb the session's shared server."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from nats.js import JetStreamContext

from hades.adapters.nats.connection import connect
from hades.adapters.nats.server import EmbeddedNats, start_nats
from hades.adapters.nats.topology import apply, load_topology


@pytest.fixture
def fresh_nats() -> Iterator[EmbeddedNats]:
    """A nats-server of this test's own."""
    with tempfile.TemporaryDirectory(prefix="hades-own-nats-") as store:
        server = start_nats(Path(store))
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
async def js(fresh_nats: EmbeddedNats) -> AsyncIterator[JetStreamContext]:
    """JetStream on that server, with streams.yaml applied."""
    nc = await connect(fresh_nats.url)
    try:
        await apply(nc.jetstream(), load_topology())
        yield nc.jetstream()
    finally:
        await nc.close()
