"""Jobs through the real Hades in operator mode: the API, the scheduler and the executor role with
``HADES_EXECUTOR=k8s-operator`` in one process, ``hades operator`` replicas in more (all on a real nats-server of
this test's own, each pointed by a kubeconfig at the in-test API server), a ``Kubelet`` playing the Pods. A
pipeline's stage run by the operator gets the pipeline's variables in its Pod, and adds a stage with them.

The nats-server is the test's own, not the session's: jobs that earlier tests left queued there (pipeline stage
jobs no executor ever ran) were taken by this test's executor and handed to the operator as BuildJobs, so the
operator created their Pods beside this job's and the test counted 7 Pods instead of 1 (it failed when run after
tests/workers, tests/pools and tests/pipelines in one process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext

from hades.adapters.k8s.operator.lease import LEASE_NAME
from hades.adapters.k8s.pods import pod_name
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.log_store import NatsLogStore
from hades.adapters.nats.pipeline_tokens import pipeline_token, token_key
from hades.adapters.nats.server import EmbeddedNats
from hades.core.events import JobFailed, JobStopped, JobSucceeded
from hades.core.logs import coalesce
from hades.core.stages import stage_job_id
from hades.runtime import Roles
from tests.adapters.k8s.test_k8s_pipeline import kubeconfig
from tests.conftest import StartHades, eventually, free_port
from tests.support.k8s_api import KubeApi
from tests.support.kubelet import Kubelet, Outcome

NAMESPACE = "pipeline"
GROUP = "build.hades.tum.de/v1"


@pytest.fixture
def nats_url(fresh_nats: EmbeddedNats, js: JetStreamContext) -> str:
    """This module's own nats-server (streams.yaml applied by ``js``), for ``start_hades`` and ``nc`` alike."""
    return fresh_nats.url


async def test_jobs_run_through_hades_as_buildjobs_and_only_the_leading_operator_reconciles(
    start_hades: StartHades, nc: Client, tmp_path: Path
) -> None:
    async with KubeApi() as kube:
        config = str(kubeconfig(tmp_path / "kubeconfig", kube.url))
        k8s = {"K8S_NAMESPACE": NAMESPACE, "K8S_KUBECONFIG": config}
        hades = await start_hades(HADES_EXECUTOR="k8s-operator", MAX_ATTEMPTS=2, **k8s)
        ports = [free_port(), free_port()]
        for replica, port in enumerate(ports):
            await start_hades(
                Roles(operator=True),
                POD_NAME=f"operator-{replica}",
                HADES_EXECUTOR_ID=f"operator-{replica}",
                WATCH_NAMESPACE=NAMESPACE,
                DELETE_ON_COMPLETE="false",
                HEALTH_PROBE_BIND_ADDRESS=f"127.0.0.1:{port}",
                **k8s,
            )
        async with httpx.AsyncClient() as client:
            for port in ports:
                health = await eventually(lambda p=port: _get(client, f"http://127.0.0.1:{p}/healthz"), timeout=10)
                assert health == "ok"
                assert await _get(client, f"http://127.0.0.1:{port}/readyz") == "ok"

        job = {
            "name": "on-the-operator",
            "steps": [
                {"id": 1, "image": "alpine:3.22", "script": "echo compiled"},
                {"id": 2, "image": "alpine:3.22", "script": "echo tested"},
            ],
        }
        job_id = await hades.submit(job)
        outcomes = {"step-1": Outcome(("compiled",)), "step-2": Outcome(("tested",))}
        assert await Kubelet(kube, NAMESPACE).run(pod_name(job_id, 1), outcomes) == "Succeeded"
        detail = await hades.wait_terminal(job_id, timeout=20)

        assert detail["status"] == "Succeeded", detail
        buildjob = kube.get(NAMESPACE, "buildjobs", job_id, api=GROUP)
        assert buildjob is not None and buildjob["spec"]["maxRetries"] == 1  # MAX_ATTEMPTS - 1
        assert buildjob["metadata"]["labels"]["hades/source"] == "scheduler"
        status = await kube.wait_for(
            lambda: _status(kube, job_id).get("phase") == "Succeeded" and _status(kube, job_id)
        )
        assert status["currentStep"] == 3
        logs = coalesce(await NatsLogStore(nc).read(job_id))
        assert [(log.container_id, [e.message for e in log.logs or []]) for log in logs] == [
            ("step-1", ["compiled"]),
            ("step-2", ["tested"]),
        ]
        history = [r.event for r in await NatsEventStore(nc).history(job_id)]
        assert sum(isinstance(e, JobSucceeded | JobFailed | JobStopped) for e in history) == 1

        lease = kube.get(NAMESPACE, "leases", LEASE_NAME, api="coordination.k8s.io/v1")
        assert lease is not None
        leader = lease["spec"]["holderIdentity"]
        started = {e.executor_id for e in history if type(e).__name__ == "JobStarted"}
        assert started == {leader}  # the attempt ran under the leader, and only there
        pods_created_by = [r for r in kube.requests if r[0] == "POST" and r[1].endswith("/pods")]
        assert len(pods_created_by) == 1
        await kube.wait_for(lambda: kube.get(NAMESPACE, "pods", pod_name(job_id, 1)) is None)


async def test_a_stage_run_by_the_operator_gets_the_pipeline_variables_and_adds_a_stage_with_them(
    start_hades: StartHades, nc: Client, tmp_path: Path
) -> None:
    async with KubeApi() as kube:
        config = str(kubeconfig(tmp_path / "kubeconfig", kube.url))
        k8s = {"K8S_NAMESPACE": NAMESPACE, "K8S_KUBECONFIG": config}
        hades = await start_hades(HADES_EXECUTOR="k8s-operator", **k8s)
        api_url = hades.url.rstrip("/")  # the operator's HADES_API_URL: what its stages are told
        await start_hades(
            Roles(operator=True),
            HADES_EXECUTOR_ID="operator-0",
            LEADER_ELECT="false",
            WATCH_NAMESPACE=NAMESPACE,
            HEALTH_PROBE_BIND_ADDRESS=f"127.0.0.1:{free_port()}",
            HADES_API_URL=api_url,
            **k8s,
        )
        steps = [
            {"id": 1, "image": "alpine:3.22", "script": "echo planned"},
            {"id": 2, "image": "alpine:3.22", "script": "hades stages add more.json"},
        ]
        pid = await hades.submit({"name": "overwatch", "stages": [{"name": "plan", "steps": steps}]})
        token = pipeline_token(await token_key(nc), pid)
        kubelet = Kubelet(kube, NAMESPACE)

        plan = await _stage_env(kube, stage_job_id(pid, "plan"))
        expected = {"HADES_PIPELINE_ID": pid, "HADES_STAGE": "plan", "HADES_PIPELINE_TOKEN": token}
        assert list(plan) == ["step-1", "step-2"]  # every step's container, the init container's too
        for env in plan.values():
            assert env.items() >= {**expected, "HADES_API_URL": api_url}.items(), env

        # the second step does what `hades stages add` does in its container, with only what its Pod carries
        env, more = plan["step-2"], {"name": "more", "steps": [{"id": 1, "image": "alpine:3.22", "script": "true"}]}
        async with httpx.AsyncClient() as client:
            added = await client.post(
                f"{env['HADES_API_URL']}/jobs/{env['HADES_PIPELINE_ID']}/stages",
                json={"stages": [more], "stage": env["HADES_STAGE"]},
                headers={"Authorization": f"Bearer {env['HADES_PIPELINE_TOKEN']}"},
            )
        assert added.status_code == 202, added.text
        assert await kubelet.run(pod_name(stage_job_id(pid, "plan"), 1)) == "Succeeded"

        later = await _stage_env(kube, stage_job_id(pid, "more"))
        assert later["step-1"].items() >= {**expected, "HADES_STAGE": "more"}.items()
        assert await kubelet.run(pod_name(stage_job_id(pid, "more"), 1)) == "Succeeded"
        ended = await hades.wait_terminal(pid, timeout=20)
        assert ended["status"] == "Succeeded", ended
        assert [(row["name"], row["status"]) for row in ended["stages"]] == [
            ("plan", "Succeeded"),
            ("more", "Succeeded"),
        ]
        events = (await hades.client.get(f"/jobs/{pid}/events")).json()["events"]
        assert [e["by"] for e in events if e["type"] == "stages_added"] == ["stage:plan"]
        store = NatsEventStore(nc)
        for job_id in (pid, stage_job_id(pid, "plan"), stage_job_id(pid, "more")):  # in the Pods, in no event
            assert all(token not in r.event.model_dump_json() for r in await store.history(job_id))
        for name in ("plan", "more"):  # nor in a BuildJob
            assert token not in str(kube.get(NAMESPACE, "buildjobs", stage_job_id(pid, name), api=GROUP))


async def _stage_env(kube: KubeApi, job_id: str) -> dict[str, dict[str, str]]:
    """Each container's environment in the job's first Pod, once the operator created it."""
    pod = await kube.wait_for(lambda: kube.get(NAMESPACE, "pods", pod_name(job_id, 1)), timeout=15)
    containers = [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]
    return {c["name"]: {e["name"]: e["value"] for e in c.get("env", [])} for c in containers}


def _status(kube: KubeApi, job_id: str) -> dict[str, Any]:
    return (kube.get(NAMESPACE, "buildjobs", job_id, api=GROUP) or {}).get("status") or {}


async def _get(client: httpx.AsyncClient, url: str) -> str | None:
    try:
        response = await client.get(url)
    except httpx.HTTPError:
        return None
    return response.text if response.status_code == 200 else None
