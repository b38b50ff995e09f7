"""Jobs submitted over HTTP while the processes under them are SIGKILLed: every role in turn and a node of a 3-node
NATS cluster (R3 streams), then a single-node NATS with file storage restarted by SIGTERM, by SIGKILL, and away for
25 s (clients retrying with their job's Idempotency-Key: no job may be made twice).

After each campaign: every accepted job (a 200 from POST /build) has exactly one terminal event in the raw stream,
no attempt ran its step to the end twice, every line a finished step printed is in its log view, every webhook was
delivered; the recovery time after each fault goes to test-artifacts/chaos/recovery.json.

500 jobs in the cluster campaign (100 per fault, 5 faults), 300 in the single-node one (100 per fault); each phase
waits for its backlog to drain before the next fault, so every recovery time is the fault's own.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from hades.adapters.nats.connection import connect
from hades.adapters.nats.server import EmbeddedNats, start_nats
from hades.adapters.nats.topology import EVENTS_STREAM, apply, load_topology
from tests.chaos.audit import job_body
from tests.chaos.campaign import Campaign, Inject
from tests.chaos.fleet import ROLES, RoleFleet, Submitter, role_fleet
from tests.conftest import eventually, free_port
from tests.support.cluster import NatsCluster, nats_cluster
from tests.support.receiver import receiving

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(240)]

JOBS_PER_FAULT = 100
RATE = 25.0  # jobs/s submitted during a phase
LONG_OUTAGE = 25.0  # seconds a single-node NATS stays away in the last phase
ROLE_ENV = {
    "HADES_EXECUTOR": "process",
    "CONCURRENCY": "4",
    "MAX_ATTEMPTS": "5",
    "HADES_WATCHDOG_SECONDS": "0.5",
    "HADES_SWEEP_SECONDS": "2",
}


async def fleet_up(fleet: RoleFleet) -> None:
    """Until every API replica answers /ping (it does once its views caught up with the log)."""

    async def answering() -> bool:
        async with httpx.AsyncClient(timeout=2) as client:
            for url in fleet.api_urls:
                try:
                    if (await client.get(f"{url}/ping")).status_code != 200:
                        return False
                except httpx.HTTPError:
                    return False
        assert fleet.exited() == [], fleet.exited()
        return True

    await eventually(answering, timeout=60, interval=0.2)


async def test_no_job_lost_or_ended_twice_through_role_and_nats_node_crashes(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    async with nats_cluster(tmp_path / "nats") as cluster, receiving(200) as receiver:
        applied = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "hades.cli", "streams", "apply", "--replicas", "3"],
            env={**os.environ, "NATS_URL": cluster.url},
            capture_output=True,
            timeout=60,
        )
        assert applied.returncode == 0, applied.stderr
        nc = await connect(cluster.url)
        try:
            assert (await nc.jetstream().stream_info(EVENTS_STREAM)).config.num_replicas == 3
            with role_fleet(cluster.url, tmp_path / "fleet", **ROLE_ENV) as fleet:
                fleet.start_all()
                await fleet_up(fleet)
                submitter = Submitter(fleet.api_urls, lambda i: job_body(i, markers, f"{receiver.url}/hook"))
                campaign = Campaign(fleet, nc, submitter, markers, receiver, JOBS_PER_FAULT, RATE)
                for role in ROLES:
                    await campaign.phase(role, kill_and_restart(fleet, role))
                await campaign.phase("nats_node", kill_and_restart_node(campaign, cluster))
                await fleet_up(fleet)
                figures = await campaign.audit("cluster", fleet.api_urls[0])
        finally:
            await nc.close()
    assert figures["jobs_submitted"] == 5 * JOBS_PER_FAULT


def kill_and_restart(fleet: RoleFleet, role: str) -> Inject:
    """SIGKILL every process of the role and start as many again, as a supervisor would."""

    async def inject() -> None:
        fleet.kill(role)
        fleet.start(role)

    return inject


def kill_and_restart_node(campaign: Campaign, cluster: NatsCluster) -> Inject:
    """SIGKILL the node leading HADES_EVENTS; bring it back once another third of the phase's jobs got in."""

    async def inject() -> None:
        leader = (await campaign.nc.jetstream().stream_info(EVENTS_STREAM)).cluster.leader  # type: ignore[union-attr]
        node = next(n for n in cluster.nodes if n.name == leader)
        node.kill()
        target = len(campaign.submitter.accepted) + campaign.jobs_per_fault // 3
        await eventually(lambda: campaign.accepted_at_least(target), timeout=60)
        await cluster.restart(node)

    return inject


@dataclass
class SingleNode:
    """One nats-server with file storage on a fixed port, restarted on the same store."""

    store: Path
    port: int
    server: EmbeddedNats | None = None

    def start(self) -> EmbeddedNats:
        self.server = start_nats(self.store, port=self.port)
        return self.server

    def restart(self, kill: bool) -> None:
        """SIGKILL (nothing flushed) or SIGTERM (JetStream flushed), then start again at once."""
        assert self.server is not None
        if kill:
            self.server.process.kill()
            self.server.process.wait()
        else:
            self.server.stop()
        self.start()


def restart_node(node: SingleNode, kill: bool) -> Inject:
    async def inject() -> None:
        await asyncio.to_thread(node.restart, kill)

    return inject


def long_outage(node: SingleNode, seconds: float) -> Inject:
    """SIGKILL, and start again only after ``seconds``: longer than an append's patience (20 s), a submission's wait
    for the connection (5 s) and a client's request timeout (10 s), so every path that gives up does."""

    async def inject() -> None:
        assert node.server is not None
        node.server.process.kill()
        node.server.process.wait()
        await asyncio.sleep(seconds)  # the outage itself, not a synchronisation
        await asyncio.to_thread(node.start)

    return inject


async def test_no_job_lost_or_ended_twice_through_single_node_nats_restarts(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    node = SingleNode(tmp_path / "nats", free_port())
    server = node.start()
    try:
        nc = await connect(server.url)
        try:
            await apply(nc.jetstream(), load_topology())
            async with receiving(200) as receiver:
                with role_fleet(server.url, tmp_path / "fleet", **ROLE_ENV) as fleet:
                    fleet.start_all()
                    await fleet_up(fleet)
                    submitter = Submitter(fleet.api_urls, lambda i: job_body(i, markers, f"{receiver.url}/hook"))
                    campaign = Campaign(fleet, nc, submitter, markers, receiver, JOBS_PER_FAULT, RATE)
                    await campaign.phase("nats_restart_sigterm", restart_node(node, kill=False))
                    await campaign.phase("nats_restart_sigkill", restart_node(node, kill=True))
                    await campaign.phase("nats_long_outage", long_outage(node, LONG_OUTAGE), drain_timeout=180)
                    await fleet_up(fleet)
                    figures = await campaign.audit("single_node", fleet.api_urls[0])
        finally:
            await nc.close()
    finally:
        if node.server is not None:
            node.server.stop()
    assert figures["jobs_submitted"] == 3 * JOBS_PER_FAULT
