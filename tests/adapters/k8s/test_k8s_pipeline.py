"""One job through the real Hades (API, scheduler, executor on a real nats-server) with HADES_EXECUTOR=k8s, the
executor pointed by a kubeconfig at the in-test API server, whose Kubelet plays the Pod."""

from __future__ import annotations

from pathlib import Path

import yaml
from nats.aio.client import Client

from hades.adapters.k8s.pods import pod_name
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.log_store import NatsLogStore
from hades.core.events import StepFinished
from hades.core.logs import coalesce
from tests.conftest import StartHades
from tests.support.k8s_api import KubeApi, Kubelet, Outcome


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


async def test_a_job_runs_through_hades_on_the_k8s_executor(
    start_hades: StartHades, nc: Client, tmp_path: Path
) -> None:
    async with KubeApi() as kube:
        hades = await start_hades(
            HADES_EXECUTOR="k8s",
            K8S_NAMESPACE="pipeline",
            K8S_KUBECONFIG=str(kubeconfig(tmp_path / "kubeconfig", kube.url)),
        )
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
