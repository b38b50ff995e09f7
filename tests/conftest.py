"""Shared fixtures: a real nats-server with the Hades topology, a real Docker engine, a running Hades."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from nats.aio.client import Client

from hades.adapters.nats.connection import connect
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.server import EmbeddedNats, start_nats
from hades.adapters.nats.topology import apply, load_topology
from hades.config import Settings
from hades.runtime import Roles, serve
from hades.tracing import Tracing
from tests.support.docker_env import BUSYBOX_TAG, SEED_TAGS, ensure_test_images, require_docker

#: A nats-server of a test's own (``fresh_nats``, ``js``), for tests that change the topology.
pytest_plugins = ["tests.support.fresh_nats"]


def free_port() -> int:
    """A loopback port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def eventually(condition: Callable[[], Awaitable[Any]], timeout: float = 30.0, interval: float = 0.05) -> Any:
    """Poll ``condition`` until it returns something truthy; fail with the last value after ``timeout``."""
    deadline = asyncio.get_running_loop().time() + timeout
    last: Any = None
    while asyncio.get_running_loop().time() < deadline:
        last = await condition()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s; last value: {last!r}")


@pytest.fixture(autouse=True)
def _docker_marker(request: pytest.FixtureRequest) -> None:
    """Tests marked ``docker`` skip without an engine on a laptop and fail without one under CI=true."""
    if request.node.get_closest_marker("docker") is not None:
        require_docker()


@pytest.fixture(scope="session")
def nats_server() -> Iterator[EmbeddedNats]:
    """One nats-server with JetStream for the session, on a free port, storing in a temp folder."""
    with tempfile.TemporaryDirectory(prefix="hades-test-nats-") as store:
        server = start_nats(Path(store))
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="session")
async def nats_url(nats_server: EmbeddedNats) -> str:
    """The session server's URL, with streams.yaml applied."""
    nc = await connect(nats_server.url)
    try:
        await apply(nc.jetstream(), load_topology())
    finally:
        await nc.close()
    return nats_server.url


@pytest.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    """A client connection for one test."""
    client = await connect(nats_url)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def event_store(nc: Client) -> NatsEventStore:
    """The event store on the session server."""
    return NatsEventStore(nc)


@pytest.fixture(scope="session")
def docker_images() -> list[str]:
    """The local busybox image under the tags the tests use; skips (or fails in CI) without Docker."""
    require_docker()
    ensure_test_images([BUSYBOX_TAG, *SEED_TAGS])
    return [BUSYBOX_TAG, *SEED_TAGS]


@dataclass
class RunningHades:
    """A Hades running in this test's loop: its API client and how to stop it."""

    url: str
    settings: Settings
    client: httpx.AsyncClient
    stop: Callable[[], Awaitable[None]]

    async def submit(self, job: dict[str, Any]) -> str:
        """POST /build and return the job id."""
        response = await self.client.post("/build", json=job)
        assert response.status_code == 200, response.text
        return str(response.json()["job_id"])

    async def wait_terminal(self, job_id: str, timeout: float = 60.0) -> dict[str, Any]:
        """The job's detail once it reached Succeeded, Failed or Stopped."""

        async def finished() -> dict[str, Any] | None:
            detail: dict[str, Any] = (await self.client.get(f"/jobs/{job_id}")).json()
            return detail if detail.get("status") in ("Succeeded", "Failed", "Stopped") else None

        result: dict[str, Any] = await eventually(finished, timeout=timeout)
        return result


StartHades = Callable[..., Awaitable[RunningHades]]


@pytest.fixture
async def start_hades(nats_url: str) -> AsyncIterator[StartHades]:
    """Start Hades roles in-process against the session NATS; everything started is stopped at the end."""
    running: list[RunningHades] = []

    async def start(roles: Roles | None = None, tracing: Tracing | None = None, **env: Any) -> RunningHades:
        port = free_port()
        defaults = {"API_PORT": port, "API_HOST": "127.0.0.1", "DOCKER_PULL_POLICY": "never", "METRICS_PORT": 0}
        settings = Settings(**{**defaults, **env})
        stop = asyncio.Event()
        task = asyncio.create_task(serve(settings, roles or Roles.all(), nats_url, stop, tracing))
        client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10)

        async def api_up() -> bool:
            if task.done():
                task.result()
            with contextlib.suppress(httpx.HTTPError):
                return (await client.get("/ping")).status_code == 200
            return False

        async def stop_it() -> None:
            stop.set()
            await asyncio.wait_for(task, 30)
            await client.aclose()

        hades = RunningHades(url=str(client.base_url), settings=settings, client=client, stop=stop_it)
        running.append(hades)
        if roles is None or roles.api:
            await eventually(api_up, timeout=20)
        return hades

    yield start
    for hades in running:
        with contextlib.suppress(Exception):
            await hades.stop()


@dataclass
class RoleProcess:
    """A Hades role running as its own OS process, to be killed like a real one."""

    process: subprocess.Popen[bytes]
    executor_id: str

    def kill(self) -> None:
        """SIGKILL, as a crash or a lost machine would."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM and wait for the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)


SpawnRole = Callable[..., RoleProcess]


@pytest.fixture
def spawn_role(nats_url: str) -> Iterator[SpawnRole]:
    """Start ``hades <role>`` processes against the session NATS; all are killed at the end."""
    started: list[RoleProcess] = []

    def spawn(role: str = "executor", **env: str) -> RoleProcess:
        executor_id = env.pop("HADES_EXECUTOR_ID", f"proc-{uuid.uuid4().hex[:8]}")
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("HADES_", "API_", "AUTH_"))}
        environment.update(NATS_URL=nats_url, HADES_EXECUTOR_ID=executor_id, DOCKER_PULL_POLICY="never")
        environment.update({"METRICS_PORT": "0", **env})  # a role's own /metrics only where a test asks for it
        process = subprocess.Popen([sys.executable, "-m", "hades.cli", role], env=environment)
        role_process = RoleProcess(process, executor_id)
        started.append(role_process)
        return role_process

    yield spawn
    for role_process in started:
        role_process.kill()
