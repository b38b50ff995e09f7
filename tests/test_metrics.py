"""The process's own metrics: one registry per process (two Hades in one process do not collide), slots read at
scrape time, and the METRICS_PORT server, which never stops a role when its port is taken and answers ``/health``
by the role's NATS connection."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client import generate_latest

from hades.adapters.nats.connection import connect
from hades.adapters.nats.server import start_nats
from hades.adapters.nats.topology import apply, load_topology
from hades.metrics import MetricsServer, ProcessMetrics
from tests.conftest import eventually, free_port
from tests.http.test_prometheus import samples


def test_each_process_has_its_own_registry_and_slots_are_read_at_scrape_time() -> None:
    first, second = ProcessMetrics(), ProcessMetrics()  # the default registry would refuse the second
    running: list[str] = []
    first.executor_slots(lambda: 3, lambda: len(running))
    first.append_seconds.labels("submitted").observe(0.002)

    running.append("job")
    values = samples(generate_latest(first.registry).decode())

    assert values[("hades_executor_slots", (("state", "busy"),))] == 1
    assert values[("hades_executor_slots", (("state", "free"),))] == 2
    assert values[("hades_event_append_seconds_count", (("kind", "submitted"),))] == 1
    assert values[("hades_event_append_seconds_bucket", (("kind", "submitted"), ("le", "0.0025")))] == 1
    assert values[("hades_event_append_seconds_bucket", (("kind", "submitted"), ("le", "0.001")))] == 0
    assert "hades_event_append_seconds_count" not in generate_latest(second.registry).decode()


def test_the_metrics_port_serves_the_registry_until_stopped() -> None:
    metrics = ProcessMetrics()
    metrics.attempts_started.inc()
    server = MetricsServer.start(metrics.registry, "127.0.0.1", free_port())
    assert server is not None
    try:
        response = httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=5)
        assert response.status_code == 200
        assert samples(response.text)[("hades_executor_attempts_started_total", ())] == 1
    finally:
        server.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=5)


def test_a_taken_metrics_port_is_a_warning_not_a_failure(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with caplog.at_level(logging.WARNING, logger="hades.metrics"):
            assert MetricsServer.start(ProcessMetrics().registry, "127.0.0.1", port) is None
    assert f"cannot serve /metrics on 127.0.0.1:{port}" in caplog.text


def test_the_metrics_port_answers_health_by_the_connection() -> None:
    """A role without the API has no other readiness: ``/health`` on its metrics port says whether it reaches
    NATS, read on each request."""
    connected = [True]
    server = MetricsServer.start(ProcessMetrics().registry, "127.0.0.1", free_port(), connected=lambda: connected[0])
    assert server is not None
    try:
        url = f"http://127.0.0.1:{server.port}"
        assert httpx.get(f"{url}/health", timeout=5).json() == {"status": "ok"}
        connected[0] = False
        down = httpx.get(f"{url}/health", timeout=5)
        assert down.status_code == 503
        assert down.json() == {"status": "unavailable", "error": "not connected to NATS (reconnecting)"}
        assert httpx.get(f"{url}/metrics", timeout=5).status_code == 200  # metrics whatever the connection
    finally:
        server.stop()


async def test_a_role_process_is_unready_while_its_nats_is_away(tmp_path: Path) -> None:
    """A real ``hades scheduler`` with METRICS_PORT: its ``/health`` goes 503 when its nats-server stops and back to
    200 once it is there again, without the process restarting."""
    port, metrics_port = free_port(), free_port()
    server = start_nats(tmp_path / "nats", port=port)
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("HADES_", "API_", "AUTH_"))}
    environment.update(NATS_URL=server.url, METRICS_PORT=str(metrics_port))
    nc = await connect(server.url)
    await apply(nc.jetstream(), load_topology())
    await nc.close()
    role = await asyncio.create_subprocess_exec(sys.executable, "-m", "hades.cli", "scheduler", env=environment)
    health = f"http://127.0.0.1:{metrics_port}/health"

    async def answers(status: int) -> bool:
        async with httpx.AsyncClient(timeout=2) as client:
            try:
                return (await client.get(health)).status_code == status
            except httpx.HTTPError:
                return False

    try:
        await eventually(lambda: answers(200), timeout=30)
        server.stop()
        await eventually(lambda: answers(503), timeout=15)
        server = start_nats(tmp_path / "nats", port=port)
        await eventually(lambda: answers(200), timeout=15)
        assert role.returncode is None
    finally:
        role.kill()
        await role.wait()
        server.stop()
