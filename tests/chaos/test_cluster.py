"""Hades on a 3-node NATS cluster: R3 everywhere, appends that outlast a lost leader, roles that wait out no quorum."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from hades.adapters.nats.connection import connect
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.topology import EVENTS_STREAM, apply, load_topology, verify
from hades.core.events import JobSubmitted
from hades.core.spec import JobSpec, Priority
from tests.chaos.fleet import role_fleet
from tests.conftest import eventually
from tests.support.cluster import nats_cluster

pytestmark = pytest.mark.chaos


async def test_streams_apply_with_replicas_puts_everything_on_three_nodes(tmp_path: Path) -> None:
    topology = load_topology()
    async with nats_cluster(tmp_path / "nats") as cluster:
        nc = await connect(cluster.url)
        try:
            js = nc.jetstream()
            await apply(js, topology)  # R1 first, as streams.yaml says: apply --replicas 3 must scale it up
            command = [sys.executable, "-m", "hades.cli", "streams", "apply", "--replicas", "3"]
            environment = {**os.environ, "NATS_URL": cluster.url}
            applied = await asyncio.to_thread(subprocess.run, command, env=environment, capture_output=True)
            assert applied.returncode == 0, applied.stderr

            streams = [*topology.streams, *(f"KV_{b}" for b in topology.key_value)]
            streams += [f"OBJ_{b}" for b in topology.object_stores]
            for name in streams:
                assert (await js.stream_info(name)).config.num_replicas == 3, name
            consumers = [(stream, name) for stream, names in topology.consumers.items() for name in names]
            for stream, name in consumers:  # asks for no count of its own: follows its stream
                assert (await js.consumer_info(stream, name)).config.num_replicas in (0, None), name

            async def three_copies_each() -> list[str]:  # followers show up once they caught up after the scaling
                infos = [await js.stream_info(name) for name in streams]
                infos += [await js.consumer_info(stream, name) for stream, name in consumers]
                short = [i for i in infos if i.cluster is None or len(i.cluster.replicas or []) != 2]
                return [] if short else ["all"]

            await eventually(three_copies_each, timeout=30)
            await verify(js, topology)  # roles read streams.yaml (replicas: 1) and accept the R3 cluster
            again = await apply(js, topology.with_replicas(3))
            assert again.updated == [] and again.created == []
        finally:
            await nc.close()


async def test_an_append_outlasts_the_loss_of_the_stream_leader(tmp_path: Path) -> None:
    async with nats_cluster(tmp_path / "nats") as cluster:
        nc = await connect(cluster.url)
        try:
            js = nc.jetstream()
            await apply(js, load_topology().with_replicas(3))
            store = NatsEventStore(nc, publish_timeout=1.0)  # shorter than a leader election
            leader = (await js.stream_info(EVENTS_STREAM)).cluster.leader  # type: ignore[union-attr]
            node = next(n for n in cluster.nodes if n.name == leader)
            job_id = str(uuid.uuid4())
            event = JobSubmitted(job_id=job_id, at=datetime.now(UTC), spec=JobSpec(name="t"), priority=Priority.LOW)

            node.kill()
            seq = await store.append(job_id, [event], 0)

            history = await store.history(job_id)
            assert [(r.seq, r.event.type) for r in history] == [(seq, "submitted")]
            await cluster.restart(node)
        finally:
            await nc.close()


async def test_a_role_started_while_the_cluster_has_no_quorum_comes_up_once_it_has(tmp_path: Path) -> None:
    async with nats_cluster(tmp_path / "nats") as cluster:
        nc = await connect(cluster.url)
        try:
            await apply(nc.jetstream(), load_topology().with_replicas(3))
        finally:
            await nc.close()
        first, *others = cluster.nodes
        for node in others:  # one node of three left: no JetStream leader, the API does not answer
            node.kill()
        with role_fleet(cluster.url, tmp_path / "fleet", HADES_SNAPSHOT_SECONDS="0") as fleet:
            fleet.replicas = 1
            fleet.start("api")
            log = tmp_path / "fleet" / "api-0.log"

            async def waiting_it_out() -> bool:
                assert fleet.exited() == [], log.read_text()
                return "NATS did not answer while starting" in log.read_text()

            await eventually(waiting_it_out, timeout=30)
            for node in others:
                node.start(cluster.routes)

            async def answering() -> bool:
                assert fleet.exited() == [], log.read_text()
                async with httpx.AsyncClient(timeout=2) as client:
                    try:
                        return (await client.get(f"{fleet.api_urls[0]}/ping")).status_code == 200
                    except httpx.HTTPError:
                        return False

            await eventually(answering, timeout=60)
            assert first.running
