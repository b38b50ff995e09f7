"""A 3-node nats-server cluster with JetStream on loopback, for the chaos suite: start it, kill a node, bring it back.

Each node has its own store folder and fixed ports (client, route, monitoring) chosen free at start, so a restarted
node comes back where the others and the clients expect it. Readiness is a condition, never a sleep: every running
node's ``/jsz`` names a JetStream meta leader, and a restarted node's ``/healthz`` says its streams caught up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from hades.adapters.nats.server import _die_with_parent, nats_server_binary
from tests.conftest import eventually, free_port

CLUSTER_NAME = "hades-chaos"


@dataclass
class ClusterNode:
    """One nats-server of the cluster."""

    name: str
    port: int
    route_port: int
    http_port: int
    store_dir: Path
    log_file: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def config(self, routes: list[int]) -> str:
        """The node's nats-server configuration (JSON is valid nats-server config syntax)."""
        settings: dict[str, Any] = {
            "server_name": self.name,
            "listen": f"127.0.0.1:{self.port}",
            "http": f"127.0.0.1:{self.http_port}",
            "jetstream": {"store_dir": str(self.store_dir), "max_memory_store": 256 * 2**20},
            "cluster": {
                "name": CLUSTER_NAME,
                "listen": f"127.0.0.1:{self.route_port}",
                "routes": [f"nats-route://127.0.0.1:{port}" for port in routes],
            },
        }
        return json.dumps(settings, indent=2)

    def start(self, routes: list[int]) -> None:
        config = self.store_dir.parent / f"{self.name}.conf"
        config.write_text(self.config(routes))
        args = [nats_server_binary(), "-c", str(config), "-l", str(self.log_file)]
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent
        )

    def kill(self) -> None:
        """SIGKILL: no flush, no goodbye to the peers, as a lost machine."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def terminate(self, timeout: float = 15) -> None:
        """SIGTERM (the server flushes JetStream and leaves), SIGKILL if it does not go in time."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class NatsCluster:
    """Three (or ``size``) routed nats-servers with JetStream; ``url`` lists them all, as NATS_URL does."""

    root: Path
    size: int = 3
    nodes: list[ClusterNode] = field(default_factory=list)

    def __post_init__(self) -> None:
        for index in range(1, self.size + 1):
            name = f"n{index}"
            self.nodes.append(
                ClusterNode(
                    name=name,
                    port=free_port(),
                    route_port=free_port(),
                    http_port=free_port(),
                    store_dir=self.root / name / "jetstream",
                    log_file=self.root / f"{name}.log",
                )
            )

    @property
    def url(self) -> str:
        return ",".join(node.url for node in self.nodes)

    @property
    def routes(self) -> list[int]:
        return [node.route_port for node in self.nodes]

    def start(self) -> None:
        for node in self.nodes:
            node.store_dir.mkdir(parents=True, exist_ok=True)
            node.start(self.routes)

    def stop(self) -> None:
        for node in self.nodes:
            node.terminate()

    async def wait_ready(self, timeout: float = 30) -> str:
        """Until every running node names the same JetStream meta leader (and a full cluster of peers)."""

        async def agreed() -> str | None:
            leaders = {await self._meta_leader(node) for node in self.nodes if node.running}
            return leaders.pop() if len(leaders) == 1 and None not in leaders else None

        leader: str = await eventually(agreed, timeout=timeout, interval=0.1)
        return leader

    async def wait_healthy(self, node: ClusterNode, timeout: float = 60) -> None:
        """Until ``node`` reports JetStream healthy: its meta layer and every stream replica it holds are current."""

        async def healthy() -> bool:
            with contextlib.suppress(httpx.HTTPError):
                async with httpx.AsyncClient(timeout=2) as client:
                    return (await client.get(f"http://127.0.0.1:{node.http_port}/healthz")).status_code == 200
            return False

        await eventually(healthy, timeout=timeout, interval=0.1)

    async def restart(self, node: ClusterNode) -> None:
        """Start a stopped node again on its ports and store, then wait until it caught up."""
        node.start(self.routes)
        await self.wait_ready()
        await self.wait_healthy(node)

    async def _meta_leader(self, node: ClusterNode) -> str | None:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            async with httpx.AsyncClient(timeout=2) as client:
                jsz = (await client.get(f"http://127.0.0.1:{node.http_port}/jsz")).json()
            meta = jsz.get("meta_cluster") or {}
            if meta.get("leader") and meta.get("cluster_size") == self.size:
                return str(meta["leader"])
        return None


@contextlib.asynccontextmanager
async def nats_cluster(root: Path | None = None, size: int = 3) -> AsyncIterator[NatsCluster]:
    """A running cluster with a meta leader; every node is stopped at the end.

    Stores and server logs go under ``root`` (kept, for a failed test's post-mortem), else a temp folder removed after.
    """
    workdir = root or Path(tempfile.mkdtemp(prefix="hades-cluster-"))
    cluster = NatsCluster(workdir, size)
    try:
        cluster.start()
        await cluster.wait_ready()
        yield cluster
    finally:
        await asyncio.to_thread(cluster.stop)
        if root is None:
            shutil.rmtree(workdir, ignore_errors=True)
