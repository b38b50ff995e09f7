"""streams.yaml applied to a fresh server: idempotent, and roles refuse to start without it."""

from __future__ import annotations

import pytest

from hades.adapters.nats.connection import connect
from hades.adapters.nats.server import EmbeddedNats
from hades.adapters.nats.topology import EVENTS_STREAM, LOGS_STREAM, apply, load_topology, verify


async def test_apply_creates_everything_once_and_then_changes_nothing(fresh_nats: EmbeddedNats) -> None:
    topology = load_topology()
    nc = await connect(fresh_nats.url)
    try:
        js = nc.jetstream()
        with pytest.raises(RuntimeError, match="run `hades streams apply`"):
            await verify(js, topology)

        first = await apply(js, topology)
        second = await apply(js, topology)

        assert f"stream {EVENTS_STREAM}" in first.created and f"stream {LOGS_STREAM}" in first.created
        assert "consumer HADES_EVENTS/executor-high" in first.created
        assert second.created == [] and second.updated == []
        assert len(second.unchanged) == len(first.created)
        await verify(js, topology)
        info = await js.stream_info(EVENTS_STREAM)
        assert info.config.subjects == ["hades.events.>"] and info.config.allow_direct
    finally:
        await nc.close()


async def test_apply_restores_a_changed_stream_setting(fresh_nats: EmbeddedNats) -> None:
    topology = load_topology()
    nc = await connect(fresh_nats.url)
    try:
        js = nc.jetstream()
        await apply(js, topology)
        config = (await js.stream_info(LOGS_STREAM)).config
        config.max_age = 60
        await js.update_stream(config=config)

        report = await apply(js, topology)

        assert report.updated == [f"stream {LOGS_STREAM}"]
        assert (await js.stream_info(LOGS_STREAM)).config.max_age == topology.streams[LOGS_STREAM].max_age
    finally:
        await nc.close()
