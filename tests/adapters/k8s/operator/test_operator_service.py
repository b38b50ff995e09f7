"""``hades operator`` put together: the settings reach the Pods the leader runs (against the in-test API server)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from kubernetes_asyncio.client import Configuration
from prometheus_client import generate_latest

from hades.adapters.k8s.operator.controller import OperatorSettings
from hades.adapters.k8s.operator.pods import OperatorPods
from hades.adapters.k8s.operator.service import Operator, OperatorProcess, health_server
from hades.adapters.k8s.pods import PodSettings
from hades.config import Settings
from hades.executor_role import operator_settings
from hades.metrics import ProcessMetrics
from tests.http.test_prometheus import samples
from tests.support.k8s_api import KubeApi

NAMESPACE = "ops"


def test_the_operators_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "K8S_NAMESPACE": "builds",
        "WATCH_NAMESPACE": "builds",
        "DELETE_ON_COMPLETE": "false",
        "MAX_PARALLELISM": "4",
        "K8S_PULL_GRACE_SECONDS": "7.5",
    }.items():
        monkeypatch.setenv(key, value)
    settings = Settings(_env_file=None)

    assert operator_settings(settings) == OperatorSettings(
        namespace="builds", watch_namespace="builds", delete_on_complete=False, max_parallelism=4, pull_grace=7.5
    )


async def test_the_leaders_pods_wait_out_the_pull_grace_it_is_configured_with() -> None:
    """K8S_PULL_GRACE_SECONDS was read by the executor but not by the operator, whose Pods kept the 60 s default."""
    made: list[OperatorPods] = []

    class Finished:
        async def run(self) -> None:
            return None

    def controller(_buildjobs: Any, pods: OperatorPods, _runner: Any) -> Any:
        made.append(pods)
        return Finished()

    async with KubeApi() as kube:
        operator = Operator(
            Configuration(host=kube.url),
            OperatorSettings(namespace=NAMESPACE, pull_grace=7.5),
            PodSettings(namespace=NAMESPACE),
            OperatorProcess(identity="op-0", leader_elect=False, health_address="127.0.0.1:0"),
            lambda _pods: None,  # type: ignore[arg-type,return-value]
            controller,
        )
        await operator.run()

    assert [pods.pull_grace for pods in made] == [7.5]


async def test_a_replica_has_max_parallelism_slots_while_it_leads_and_none_while_it_waits() -> None:
    """Two standby replicas must not add 2 × MAX_PARALLELISM free slots to a dashboard's sum."""
    metrics = ProcessMetrics()
    seen: list[tuple[float, float]] = []

    def slots() -> tuple[float, float]:
        values = samples(generate_latest(metrics.registry).decode())
        return values[("hades_executor_slots", (("state", "busy"),))], values[
            ("hades_executor_slots", (("state", "free"),))
        ]

    class Leading:
        running = 2  # attempts its books hold

        async def run(self) -> None:
            seen.append(slots())

    async with KubeApi() as kube:
        operator = Operator(
            Configuration(host=kube.url),
            OperatorSettings(namespace=NAMESPACE, max_parallelism=5),
            PodSettings(namespace=NAMESPACE),
            OperatorProcess(identity="op-0", leader_elect=False, health_address="127.0.0.1:0"),
            lambda _pods: None,  # type: ignore[arg-type,return-value]
            lambda *_: Leading(),  # type: ignore[arg-type,return-value]
            metrics=metrics,
        )
        assert slots() == (0, 0)
        await operator.run()

    assert seen == [(2, 3)]
    assert slots() == (0, 0)


async def test_a_replica_is_alive_but_not_ready_while_its_nats_connection_is_down() -> None:
    """A reconnecting NATS takes the replica out of readiness; liveness stays, so Kubernetes does not kill it."""
    connected = True
    async with health_server("127.0.0.1:0", lambda: connected) as site, httpx.AsyncClient() as client:
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        assert (await client.get(f"http://127.0.0.1:{port}/readyz")).text == "ok"

        connected = False

        ready = await client.get(f"http://127.0.0.1:{port}/readyz")
        assert (ready.status_code, ready.text) == (503, "not ready: not connected to NATS (reconnecting)")
        assert (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
