"""The process's own metrics: one registry per process (two Hades in one process do not collide), slots read at
scrape time, and the METRICS_PORT server, which never stops a role when its port is taken."""

from __future__ import annotations

import logging
import socket

import httpx
import pytest
from prometheus_client import generate_latest

from hades.metrics import MetricsServer, ProcessMetrics
from tests.conftest import free_port
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
