"""One job through the real Hades (API, scheduler, executor on a real nats-server) with HADES_EXECUTOR=k8s, the
executor pointed by a kubeconfig at the in-test API server, whose Kubelet plays the Pod."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from nats.aio.client import Client
from nats.js import JetStreamContext

from hades.adapters.k8s.pods import pod_name
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.log_store import NatsLogStore
from hades.adapters.nats.server import EmbeddedNats
from hades.core.events import JobQueued, StepFinished
from hades.core.logs import coalesce
from tests.conftest import RunningHades, StartHades, eventually
from tests.support.k8s_api import KubeApi
from tests.support.kubelet import Kubelet, Outcome


@pytest.fixture
def nats_url(fresh_nats: EmbeddedNats, js: JetStreamContext) -> str:
    """This module's own nats-server: a job left queued on the shared one by another test would become a Pod here."""
    return fresh_nats.url


def kubeconfig(path: Path, server: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": {"server": server}}],
        "users": [{"name": "test", "user": {"token": "t"}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        "current-context": "test",
    }
    path.write_text(yaml.safe_dump(config))
    return path


async def on_kube(start_hades: StartHades, kube: KubeApi, namespace: str, tmp_path: Path, **env: str) -> RunningHades:
    """A Hades whose executor is the Kubernetes one, pointed at the in-test API server's ``namespace``."""
    config = kubeconfig(tmp_path / "kubeconfig", kube.url)
    return await start_hades(HADES_EXECUTOR="k8s", K8S_NAMESPACE=namespace, K8S_KUBECONFIG=str(config), **env)


async def test_a_job_runs_through_hades_on_the_k8s_executor(
    start_hades: StartHades, nc: Client, tmp_path: Path
) -> None:
    async with KubeApi() as kube:
        hades = await on_kube(start_hades, kube, "pipeline", tmp_path)
        job = {
            "name": "on-k8s",
            "steps": [
                {"id": 1, "image": "alpine:3.22", "script": "echo compiled"},
                {"id": 2, "image": "alpine:3.22", "script": "exit 5", "continue_on_error": True},
                {"id": 3, "image": "alpine:3.22", "script": "echo tested"},
            ],
        }
        job_id = await hades.submit(job)
        outcomes = {
            "step-1": Outcome(("compiled",)),
            "step-2": Outcome(("failing",), message="hades-exit-code=5"),
            "step-3": Outcome(("tested",)),
        }

        assert await Kubelet(kube, "pipeline").run(pod_name(job_id, 1), outcomes) == "Succeeded"
        detail = await hades.wait_terminal(job_id, timeout=20)

        assert detail["status"] == "Succeeded", detail
        logs = coalesce(await NatsLogStore(nc).read(job_id))
        assert [(log.container_id, [e.message for e in log.logs or []]) for log in logs] == [
            ("step-1", ["compiled"]),
            ("step-2", ["failing"]),
            ("step-3", ["tested"]),
        ]
        finished = [r.event for r in await NatsEventStore(nc).history(job_id) if isinstance(r.event, StepFinished)]
        assert [(e.step_id, e.exit_code, e.tolerated) for e in finished] == [(1, 0, False), (2, 5, True), (3, 0, False)]
        await kube.wait_for(lambda: kube.get("pipeline", "pods", pod_name(job_id, 1)) is None)  # cleaned up


async def test_constraints_and_resources_become_node_affinity_and_requests(
    start_hades: StartHades, nc: Client, tmp_path: Path
) -> None:
    """A Kubernetes executor takes jobs its own machine's labels would not satisfy (os=windows here): the cluster
    places them, by the Pod's node affinity and requests; the scheduler does not call such a job unschedulable."""
    async with KubeApi() as kube:
        hades = await on_kube(start_hades, kube, "placed", tmp_path, HADES_WATCHDOG_SECONDS="0.2")
        job = {
            "name": "on-windows",
            "constraints": [
                {"attribute": "os", "value": "windows"},
                {"attribute": "pool", "operator": "!=", "value": "gpu"},
            ],
            "resources": {"cpu": 1.5, "memory": "2g"},
            "steps": [{"id": 1, "image": "mcr.microsoft.com/windows/nanoserver", "script": "echo built"}],
        }
        job_id = await hades.submit(job)

        async def created() -> dict[str, Any] | None:
            return kube.get("placed", "pods", pod_name(job_id, 1))

        pod = await eventually(created, timeout=20)
        terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms["nodeSelectorTerms"] == [
            {
                "matchExpressions": [
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]},
                    {"key": "pool", "operator": "NotIn", "values": ["gpu"]},
                ]
            }
        ]
        assert pod["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1500m", "memory": "2Gi"}}
        assert await Kubelet(kube, "placed").run(pod_name(job_id, 1), {"step-1": Outcome(("built",))}) == "Succeeded"
        detail = await hades.wait_terminal(job_id, timeout=20)
        assert detail["status"] == "Succeeded", detail
        kinds = [type(r.event).__name__ for r in await NatsEventStore(nc).history(job_id)]
        assert "JobMarkedUnschedulable" not in kinds, kinds


async def test_a_constraint_kubernetes_cannot_express_is_not_taken(
    start_hades: StartHades, nc: Client, tmp_path: Path
) -> None:
    """``regexp`` has no node-selector form: the Kubernetes executor leaves the job, which waits with a reason."""
    async with KubeApi() as kube:
        hades = await on_kube(start_hades, kube, "unplaced", tmp_path, HADES_WATCHDOG_SECONDS="0.2")
        zone = f"zone-{uuid.uuid4().hex[:6]}"  # a label no executor of any test advertises
        job = {
            "name": "by-pattern",
            "constraints": [{"attribute": zone, "operator": "regexp", "value": "^eu-"}],
            "steps": [{"id": 1, "image": "alpine:3.22", "script": "true"}],
        }
        job_id = await hades.submit(job)

        async def waiting() -> dict[str, Any] | None:
            detail = await hades.client.get(f"/jobs/{job_id}")
            body: dict[str, Any] = detail.json()
            return body if body.get("reason") else None

        detail = await eventually(waiting, timeout=20)
        assert detail["status"] == "Queued"
        assert detail["reason"] == f"no executor with {zone} matching ^eu- is alive", detail
        assert kube.get("unplaced", "pods", pod_name(job_id, 1)) is None


async def test_an_evicted_pod_hands_the_attempt_back_and_the_next_attempt_runs(
    start_hades: StartHades, nc: Client, tmp_path: Path
) -> None:
    """The cluster ending a Pod (here an eviction) is no verdict on the job: as on Docker for a container removed
    from outside, the attempt is handed back (counted against MAX_ATTEMPTS) and the next one gets a new Pod."""
    async with KubeApi() as kube:
        hades = await on_kube(start_hades, kube, "evicting", tmp_path)
        job_id = await hades.submit(
            {"name": "evicted", "steps": [{"id": 1, "image": "alpine:3.22", "script": "echo hi"}]}
        )

        async def created() -> dict[str, Any] | None:
            return kube.get("evicting", "pods", pod_name(job_id, 1))

        await eventually(created, timeout=20)
        killed = {"name": "step-1", "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}
        evicted = {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}
        kube.set_status("evicting", "pods", pod_name(job_id, 1), {**evicted, "containerStatuses": [killed]})
        kube.end_log("evicting", pod_name(job_id, 1), "step-1")

        assert await Kubelet(kube, "evicting").run(pod_name(job_id, 2), {"step-1": Outcome(("hi",))}) == "Succeeded"
        detail = await hades.wait_terminal(job_id, timeout=20)

        assert detail["status"] == "Succeeded", detail
        requeued = [
            r.event.reason
            for r in await NatsEventStore(nc).history(job_id)
            if isinstance(r.event, JobQueued) and r.event.attempt == 2
        ]
        assert requeued == [
            "step 1: the Pod was ended by the cluster (Evicted: The node was low on resource: memory.); "
            "container exited with status 137; attempt 1 handed back"
        ]
        await kube.wait_for(lambda: not kube.items("evicting", "pods"))  # both attempts' Pods cleaned up
