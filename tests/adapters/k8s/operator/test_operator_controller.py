"""The operator's controller against the in-test API server (tests/support/k8s_api.py) and a real nats-server.

Each test puts a job into the event log as the API and the scheduler would (submitted, queued), hands it over as
a BuildJob as the executor role in operator mode does, and runs the controller; a ``Kubelet`` plays the Pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, Configuration
from nats.aio.client import Client

from hades.adapters.k8s.operator.controller import Controller, OperatorSettings
from hades.adapters.k8s.operator.handoff import BuildJobHandoff
from hades.adapters.k8s.operator.pods import OperatorPods
from hades.adapters.k8s.operator.resources import BuildJobs
from hades.adapters.k8s.pods import PodSettings, pod_name
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.log_store import NatsLogStore
from hades.clock import SystemClock
from hades.core.errors import InvalidTransition
from hades.core.events import (
    JobFailed,
    JobPrepared,
    JobQueued,
    JobStarted,
    JobStopped,
    JobSubmitted,
    JobSucceeded,
    StepFinished,
    StepStarted,
)
from hades.core.lifecycle import QueueJob, RequestCancel, SubmitJob
from hades.core.logs import coalesce
from hades.core.spec import JobSpec, Step
from hades.tasks import stop
from hades.workers.attempt import AttemptRunner
from hades.workers.jobs import JobHandle
from tests.conftest import eventually
from tests.support.k8s_api import KubeApi
from tests.support.kubelet import Kubelet, Outcome

NAMESPACE = "ops"
GROUP = "build.hades.tum.de/v1"
TERMINAL = (JobSucceeded, JobFailed, JobStopped)
CLOCK = SystemClock()


@dataclass
class Rig:
    """The in-test cluster, the event log, and an operator's controller running over them."""

    kube: KubeApi
    store: NatsEventStore
    nc: Client
    buildjobs: BuildJobs
    controller: Controller
    kubelet: Kubelet
    jobs: list[str] = field(default_factory=list)

    async def submit(self, *steps: Step, priority: int = 2, max_retries: int = 0, **spec: Any) -> str:
        """A job submitted and queued in the log, and its BuildJob handed over."""
        job_id = str(uuid.uuid4())
        job = JobHandle(self.store, CLOCK, None, 0)
        body = JobSpec(name="op-job", steps=steps, priority=priority, **spec)
        await job.run(job_id, SubmitJob(job_id, body))
        await job.run(job_id, QueueJob())
        writers = NatsLogStore(self.nc).writer
        handoff = BuildJobHandoff(self.buildjobs, writers, "handoff", self.store.watch, max_retries)
        assert job.state is not None
        assert await handoff.run(job, job.state.attempt)
        self.jobs.append(job_id)
        return job_id

    async def cancel_unfinished(self) -> None:
        """Stop what a test left running or waiting, so no later test's executor on this NATS picks it up."""
        for job_id in self.jobs:
            with contextlib.suppress(InvalidTransition):
                await (await JobHandle.load(self.store, CLOCK, job_id)).run(job_id, RequestCancel(by="teardown"))

    def buildjob(self, job_id: str) -> dict[str, Any] | None:
        return self.kube.get(NAMESPACE, "buildjobs", job_id, api=GROUP)

    def status(self, job_id: str) -> dict[str, Any]:
        return (self.buildjob(job_id) or {}).get("status") or {}

    async def events(self, job_id: str) -> list[Any]:
        return [r.event for r in await self.store.history(job_id)]

    async def ended(self, job_id: str) -> Any:
        async def end() -> Any:
            return next((e for e in await self.events(job_id) if isinstance(e, TERMINAL)), None)

        return await eventually(end, timeout=10)

    def play(self, job_id: str, attempt: int = 1, **outcomes: Outcome) -> asyncio.Task[str]:
        named = {name.replace("_", "-"): outcome for name, outcome in outcomes.items()}
        return asyncio.create_task(self.kubelet.run(pod_name(job_id, attempt), named))


async def until(condition: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Poll a condition on in-process state (watch counters, the controller's books) that no event announces."""
    return await eventually(lambda: asyncio.sleep(0, condition()), timeout)


def step(n: int, script: str = "true", **fields: Any) -> Step:
    return Step(**{"id": n, "name": f"s{n}", "image": f"alpine:{n}", "script": script, **fields})


RigFactory = Callable[..., Awaitable[Rig]]


@pytest.fixture
async def rig(nc: Client, event_store: NatsEventStore) -> AsyncIterator[RigFactory]:
    """``await rig(max_parallelism=..., delete_on_complete=...)``: a controller running against a fresh API."""
    stack: list[Callable[[], Awaitable[None]]] = []

    async def make(**options: Any) -> Rig:
        kube = await KubeApi().__aenter__()
        stack.append(lambda: kube.__aexit__(None, None, None))
        configuration = Configuration(host=kube.url)
        api = ApiClient(configuration)
        stack.append(api.close)
        buildjobs = BuildJobs(api, NAMESPACE, NAMESPACE)
        pods = OperatorPods(PodSettings(namespace=NAMESPACE, executor_id="operator-test"), configuration, 0.3)
        await pods.start()
        stack.append(pods.close)
        runner = AttemptRunner(pods, NatsLogStore(nc).writer, "operator-test", event_store.watch)
        settings = OperatorSettings(NAMESPACE, NAMESPACE, **{"resync_seconds": 30.0, **options})
        controller = Controller(nc, event_store, CLOCK, buildjobs, pods, runner, settings)
        task = asyncio.create_task(controller.run())
        rig = Rig(kube, event_store, nc, buildjobs, controller, Kubelet(kube, NAMESPACE))
        stack.append(rig.cancel_unfinished)  # after the controller stopped and handed its attempts back
        stack.append(lambda: stop(task))
        return rig

    yield make
    for close in reversed(stack):
        await close()


async def test_a_buildjob_becomes_a_pod_and_its_job_succeeds_with_events_logs_and_status(rig: RigFactory) -> None:
    r = await rig(delete_on_complete=False)
    job_id = await r.submit(step(1, "echo one"), step(2, "echo two"))
    node = r.play(job_id, step_1=Outcome(("one",)), step_2=Outcome(("two", "2b")))

    assert isinstance(await r.ended(job_id), JobSucceeded)
    assert await node == "Succeeded"
    kinds = [type(e) for e in await r.events(job_id) if not isinstance(e, JobPrepared)]
    assert kinds == [
        JobSubmitted,
        JobQueued,
        JobStarted,
        StepStarted,
        StepFinished,
        StepStarted,
        StepFinished,
        JobSucceeded,
    ]
    logs = coalesce(await NatsLogStore(r.nc).read(job_id))
    assert [(log.container_id, [e.message for e in log.logs or []]) for log in logs] == [
        ("step-1", ["one"]),
        ("step-2", ["two", "2b"]),
    ]
    status = await r.kube.wait_for(lambda: r.status(job_id).get("completionTime") and r.status(job_id))
    assert status["phase"] == "Succeeded" and status["podName"] == pod_name(job_id, 1)
    assert status["currentStep"] == 3 and status["startTime"] <= status["completionTime"]
    assert status["containerStatuses"] == [
        {"name": "step-1", "stepId": 1, "state": "Succeeded", "logsPublished": True},
        {"name": "step-2", "stepId": 2, "state": "Succeeded", "logsPublished": True},
    ]
    await r.kube.wait_for(lambda: not r.kube.items(NAMESPACE, "pods"))  # the Pod is gone, the BuildJob stays
    assert r.buildjob(job_id) is not None


async def test_the_status_passes_through_running_with_the_current_step(rig: RigFactory) -> None:
    r = await rig()
    hold = asyncio.Event()
    job_id = await r.submit(step(1), step(2))
    node = r.play(job_id, step_2=Outcome(hold=hold))

    running = await r.kube.wait_for(lambda: r.status(job_id).get("phase") == "Running" and r.status(job_id))
    await r.kube.wait_for(lambda: r.status(job_id).get("currentStep") == 2)
    states = [c["state"] for c in r.status(job_id)["containerStatuses"]]
    assert running["message"].startswith("running attempt 1") and states == ["Succeeded", "Running"]
    hold.set()
    assert isinstance(await r.ended(job_id), JobSucceeded) and await node == "Succeeded"
    await r.kube.wait_for(lambda: r.buildjob(job_id) is None)  # DELETE_ON_COMPLETE (Go's default)


async def test_a_stuck_image_fails_the_job_once_in_the_contracts_words(rig: RigFactory) -> None:
    r = await rig(delete_on_complete=False)
    job_id = await r.submit(step(1), step(2, image="registry.invalid/nope:1"), max_retries=2)
    r.play(job_id, step_2=Outcome(waiting="ImagePullBackOff"))

    ended = await r.ended(job_id)
    assert isinstance(ended, JobFailed)
    assert ended.reason == "ImagePullBackOff (step 2): registry.invalid/nope:1"
    status = await r.kube.wait_for(lambda: r.status(job_id).get("phase") == "Failed" and r.status(job_id))
    assert status["message"] == ended.reason and "retryCount" not in status  # stuck is not retried
    await r.kube.wait_for(lambda: not r.kube.items(NAMESPACE, "pods"))


async def test_a_disrupted_pod_is_retried_max_retries_times_then_the_job_fails_once(rig: RigFactory) -> None:
    r = await rig(delete_on_complete=False)
    job_id = await r.submit(step(1), max_retries=2)
    for attempt in (1, 2, 3):
        pod = await r.kube.wait_for(lambda a=attempt: r.kube.get(NAMESPACE, "pods", pod_name(job_id, a)))
        evicted = {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}
        container = {"name": "step-1", "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}
        r.kube.set_status(NAMESPACE, "pods", pod["metadata"]["name"], {**evicted, "containerStatuses": [container]})
        r.kube.end_log(NAMESPACE, pod["metadata"]["name"], "step-1")

    ended = await r.ended(job_id)
    events = await r.events(job_id)
    assert isinstance(ended, JobFailed) and ended.attempt == 3
    assert ended.reason == "container exited with status 137"
    assert sum(isinstance(e, TERMINAL) for e in events) == 1
    retries = [e.reason for e in events if isinstance(e, JobQueued) and e.attempt > 1]
    assert retries == [
        "step 1: container exited with status 137; retry 1 of 2",
        "step 1: container exited with status 137; retry 2 of 2",
    ]
    status = await r.kube.wait_for(lambda: r.status(job_id).get("phase") == "Failed" and r.status(job_id))
    assert status["retryCount"] == 2 and status["podName"] == pod_name(job_id, 3)


async def test_a_failing_step_is_the_jobs_outcome_and_is_not_retried(rig: RigFactory) -> None:
    r = await rig()
    job_id = await r.submit(step(1, "exit 3"), step(2), max_retries=3)
    r.play(job_id, step_1=Outcome(("bad",), exit_code=3))

    ended = await r.ended(job_id)
    assert isinstance(ended, JobFailed) and ended.attempt == 1
    assert ended.reason == "container exited with status 3"


async def test_reconciling_a_finished_buildjob_again_appends_no_second_terminal_event(rig: RigFactory) -> None:
    r = await rig(delete_on_complete=False)
    job_id = await r.submit(step(1))
    r.play(job_id)
    await r.ended(job_id)
    await r.kube.wait_for(lambda: r.status(job_id).get("phase") == "Succeeded")
    before = r.controller.reconciles

    def relist() -> None:
        r.kube.compact()
        r.kube.drop_watches()

    def rewrite() -> None:
        r.kube.put(NAMESPACE, "buildjobs", r.buildjob(job_id) or {}, api=GROUP)

    for touch in (r.controller.resync, relist, rewrite):
        seen = r.controller.reconciles
        touch()  # a resync, a re-list after 410 Gone, the BuildJob written by someone
        await until(lambda n=seen: r.controller.reconciles > n)
    await r.controller.reconcile()

    assert r.controller.reconciles >= before + 3
    events = await r.events(job_id)
    assert sum(isinstance(e, TERMINAL) for e in events) == 1
    assert r.status(job_id)["phase"] == "Succeeded"


async def test_a_status_write_that_meets_409_re_reads_and_writes_again(rig: RigFactory) -> None:
    r = await rig(delete_on_complete=False)
    r.kube.conflict("buildjobs/status", times=2)
    job_id = await r.submit(step(1))
    r.play(job_id)

    await r.ended(job_id)
    await r.kube.wait_for(lambda: r.status(job_id).get("phase") == "Succeeded")
    assert r.buildjobs.status_conflicts >= 2


async def test_a_watch_that_ends_resumes_and_one_that_expired_re_lists(rig: RigFactory) -> None:
    r = await rig(delete_on_complete=False)
    first = await r.submit(step(1))
    r.play(first)
    assert isinstance(await r.ended(first), JobSucceeded)
    r.kube.drop_watches()
    await until(lambda: r.controller.watch.reconnects >= 1 and r.kube.open_watches)
    r.kube.compact()
    r.kube.drop_watches()
    job_id = await r.submit(step(1))  # created while the watch is away: found by the re-list
    r.play(job_id)

    assert isinstance(await r.ended(job_id), JobSucceeded)
    assert r.controller.watch.relists >= 1


async def test_at_most_max_parallelism_run_and_the_rest_wait_pending(rig: RigFactory) -> None:
    r = await rig(max_parallelism=1)
    hold = asyncio.Event()
    first = await r.submit(step(1), priority=1)
    node = r.play(first, step_1=Outcome(hold=hold))
    await r.kube.wait_for(lambda: r.status(first).get("phase") == "Running")
    low, high = await r.submit(step(1), priority=1), await r.submit(step(1), priority=3)

    await r.kube.wait_for(lambda: r.status(low).get("phase") == r.status(high).get("phase") == "Pending")
    assert "MAX_PARALLELISM" in r.status(high)["message"]
    assert len(r.kube.items(NAMESPACE, "pods")) == 1
    hold.set()
    await node
    r.play(high), r.play(low)
    for job_id in (high, low):
        assert isinstance(await r.ended(job_id), JobSucceeded)
    assert [key[1] for key in r.controller.books.admitted] == [first, high, low]


async def test_a_refused_pod_fails_the_job_with_the_api_servers_message(rig: RigFactory) -> None:
    r = await rig()
    message = 'pods "x" is forbidden: exceeded quota: compute, requested: limits.memory=2Gi'
    r.kube.refuse("pods", 403, "Forbidden", message)
    job_id = await r.submit(step(1))

    ended = await r.ended(job_id)
    assert isinstance(ended, JobFailed) and ended.reason == f"Kubernetes refused the Pod: 403 {message}"


async def test_a_refused_buildjob_fails_the_job_with_the_api_servers_message(rig: RigFactory) -> None:
    r = await rig()
    message = 'BuildJob.build.hades.tum.de "x" is invalid: spec.steps[0].memoryLimit: Invalid value: "2x"'
    r.kube.refuse("buildjobs", 422, "Invalid", message)
    job_id = await r.submit(step(1))

    ended = await r.ended(job_id)
    assert isinstance(ended, JobFailed) and ended.reason == f"Kubernetes refused the BuildJob: 422 {message}"
    assert ended.attempt == 1 and r.buildjob(job_id) is None


async def test_a_cancel_deletes_the_pod_and_the_job_ends_stopped(rig: RigFactory) -> None:
    r = await rig()
    job_id = await r.submit(step(1))
    r.play(job_id, step_1=Outcome(hold=asyncio.Event()))
    await r.kube.wait_for(lambda: r.status(job_id).get("phase") == "Running")
    await r.kube.wait_for(lambda: r.status(job_id).get("containerStatuses", [{}])[0].get("state") == "Running")

    await (await JobHandle.load(r.store, CLOCK, job_id)).run(job_id, RequestCancel(by="alice"))

    ended = await r.ended(job_id)
    assert isinstance(ended, JobStopped) and ended.reason == "cancelled by alice"
    await r.kube.wait_for(lambda: not r.kube.items(NAMESPACE, "pods") and r.buildjob(job_id) is None)


async def test_deleting_a_waiting_buildjob_stops_its_job(rig: RigFactory) -> None:
    r = await rig(max_parallelism=1)
    busy = await r.submit(step(1))
    r.play(busy, step_1=Outcome(hold=asyncio.Event()))
    await r.kube.wait_for(lambda: r.status(busy).get("phase") == "Running")
    job_id = await r.submit(step(1))
    await r.kube.wait_for(lambda: r.status(job_id).get("phase") == "Pending")

    await r.buildjobs.delete((NAMESPACE, job_id))

    ended = await r.ended(job_id)
    assert isinstance(ended, JobStopped)
    assert ended.reason == f"cancelled by kubernetes: BuildJob {NAMESPACE}/{job_id} was deleted"
