"""``hades operator`` has what the executor role has: its labels in ``started``, its slots, attempts and appends on
its own ``/metrics`` (METRICS_PORT), and constrained jobs placed as on ``HADES_EXECUTOR=k8s``: the hand-off takes
every job whose placement Kubernetes can express and its Pod carries it; a job Kubernetes cannot place is taken by
no one, whatever the operator's labels say (the operator runs BuildJobs; it never takes from the queues).

The whole Hades (API, scheduler, the ``k8s-operator`` hand-off) runs in one process, the operator in another, on
this module's own nats-server (no other test's queued jobs or pools) and the in-test API server; a ``Kubelet``
plays the Pods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext

from hades.adapters.k8s.pods import pod_name
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.server import EmbeddedNats
from hades.core.events import JobStarted
from hades.runtime import Roles
from tests.adapters.k8s.test_k8s_pipeline import kubeconfig
from tests.conftest import StartHades, eventually, free_port
from tests.http.test_prometheus import Samples, append_counts, samples
from tests.support.k8s_api import KubeApi
from tests.support.kubelet import Kubelet, Outcome

NAMESPACE = "metered"
GROUP = "build.hades.tum.de/v1"
LABELS = {"pool": "grading", "zone": "a"}
BUSY, FREE = ("hades_executor_slots", (("state", "busy"),)), ("hades_executor_slots", (("state", "free"),))


@pytest.fixture
def nats_url(fresh_nats: EmbeddedNats, js: JetStreamContext) -> str:
    """This module's own nats-server (streams.yaml applied by ``js``), for ``start_hades`` and ``nc`` alike."""
    return fresh_nats.url


def _job(name: str, constraint: dict[str, str]) -> dict[str, Any]:
    steps = [{"id": 1, "image": "alpine:3.22", "script": "echo graded"}]
    return {"name": name, "steps": steps, "constraints": [constraint]}


async def test_the_operator_records_its_labels_serves_its_metrics_and_runs_what_kubernetes_can_place(
    start_hades: StartHades, nc: Client, tmp_path: Path
) -> None:
    async with KubeApi() as kube:
        k8s = {"K8S_NAMESPACE": NAMESPACE, "K8S_KUBECONFIG": str(kubeconfig(tmp_path / "kubeconfig", kube.url))}
        hades = await start_hades(HADES_EXECUTOR="k8s-operator", HADES_WATCHDOG_SECONDS=0.2, **k8s)
        port = free_port()
        await start_hades(
            Roles(operator=True),
            HADES_EXECUTOR_ID="operator-0",
            HADES_EXECUTOR_LABELS="pool=grading,zone=a",
            LEADER_ELECT="false",
            WATCH_NAMESPACE=NAMESPACE,
            MAX_PARALLELISM=3,
            METRICS_PORT=port,
            HEALTH_PROBE_BIND_ADDRESS=f"127.0.0.1:{free_port()}",
            **k8s,
        )
        # The operator's labels satisfy this regexp, but no node selector can say it: nobody may take the job.
        unplaceable = await hades.submit(_job("regexp", {"attribute": "pool", "operator": "regexp", "value": "^grad"}))
        placed = await hades.submit(_job("linux", {"attribute": "os", "operator": "=", "value": "linux"}))

        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as operator:

            async def slots(busy: float, free: float) -> Samples | None:
                values = samples((await operator.get("/metrics")).text)
                return values if (values.get(BUSY), values.get(FREE)) == (busy, free) else None

            pod = await kube.wait_for(lambda: kube.get(NAMESPACE, "pods", pod_name(placed, 1)), timeout=15)
            await eventually(lambda: slots(1, 2), timeout=10)  # its attempt holds one of MAX_PARALLELISM's slots
            outcome = await Kubelet(kube, NAMESPACE).run(pod_name(placed, 1), {"step-1": Outcome(("graded",))})
            assert outcome == "Succeeded"
            assert (await hades.wait_terminal(placed, timeout=20))["status"] == "Succeeded"
            scraped: Samples = await eventually(lambda: slots(0, 3), timeout=10)

        required = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert required["nodeSelectorTerms"] == [
            {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}
        ]
        started = [e for r in await NatsEventStore(nc).history(placed) if isinstance(e := r.event, JobStarted)]
        assert [e.executor_id for e in started] == ["operator-0"]
        labels = started[0].executor_labels or {}
        assert labels.items() >= LABELS.items() and {"os", "arch", "cpu"} <= labels.keys(), labels
        assert (await hades.client.get(f"/jobs/{placed}")).json()["executor_labels"] == labels

        assert scraped[("hades_executor_attempts_started_total", ())] == 1
        assert scraped[("hades_executor_attempts_finished_total", (("status", "Succeeded"),))] == 1
        counts = append_counts(scraped)
        for kind in ("started", "step_started", "step_finished"):
            assert counts.get(kind, 0) >= 1, (kind, counts)
        assert "submitted" not in counts and "queued" not in counts  # the API's and the scheduler's appends
        assert not any(name.startswith("hades_phase_seconds") for name, _ in scraped)  # read models: the API's

        phases = samples((await hades.client.get("/metrics")).text)  # the operator's step events, folded
        for phase in ("scheduling", "queue_wait", "run"):
            assert phases[("hades_phase_seconds_count", (("phase", phase),))] >= 1, phase

        async def marked() -> dict[str, Any] | None:
            detail: dict[str, Any] = (await hades.client.get(f"/jobs/{unplaceable}")).json()
            return detail if str(detail.get("reason", "")).startswith("no executor with") else None

        detail = await eventually(marked, timeout=10)  # the watchdog found no taker: neither hand-off nor operator
        assert detail["status"] == "Queued" and "^grad" in detail["reason"], detail
        assert kube.get(NAMESPACE, "buildjobs", unplaceable, api=GROUP) is None
