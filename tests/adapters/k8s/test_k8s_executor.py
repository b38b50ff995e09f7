"""The Kubernetes executor driven end to end against the in-test API server (tests/support/k8s_api.py).

The server speaks the routes kubernetes-asyncio calls with real Kubernetes JSON; a ``Kubelet`` plays each Pod's
containers as a node would. What needs a real cluster (image pulls, the kubelet's own timing, RBAC) is in
docs/kubernetes.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes_asyncio.client import Configuration

from hades.adapters.k8s.executor import K8sExecutor, PodDisrupted
from hades.adapters.k8s.pods import PodSettings, pod_manifest, pod_name
from hades.core.ports import AttemptLost, ExecutionError
from hades.core.spec import JobSpec, Priority, Step
from hades.core.state import JobState, Status
from tests.conftest import eventually
from tests.support.k8s_api import KubeApi
from tests.support.kubelet import Kubelet, Outcome

NAMESPACE = "hades-test"
SETTINGS = PodSettings(namespace=NAMESPACE, executor_id="k8s-test")


class Lines:
    """StepLogs that keeps what it is given."""

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.lines: list[tuple[str, str]] = []

    async def open(self, container_id: str) -> None:
        self.opened.append(container_id)

    async def write(self, stream: str, timestamp: datetime, message: str) -> None:
        self.lines.append((stream, message))

    @property
    def messages(self) -> list[str]:
        return [message for _, message in self.lines]


@pytest.fixture
async def kube() -> AsyncIterator[KubeApi]:
    async with KubeApi() as api:
        yield api


@pytest.fixture
def kubelet(kube: KubeApi) -> Kubelet:
    return Kubelet(kube, NAMESPACE)


@pytest.fixture
async def executor(kube: KubeApi) -> AsyncIterator[K8sExecutor]:
    engine = K8sExecutor(SETTINGS, Configuration(host=kube.url), pull_grace=0.3)
    await engine.start()
    yield engine
    await engine.close()


def job(*steps: Step, attempt: int = 1, **spec: Any) -> JobState:
    return JobState(
        job_id=str(uuid.uuid4()),
        spec=JobSpec(name="k8s-job", steps=steps, **spec),
        priority=Priority.HIGH,
        status=Status.RUNNING,
        submitted_at=datetime.now(UTC),
        attempt=attempt,
    )


def step(n: int, script: str = "true", **fields: Any) -> Step:
    return Step(id=n, name=f"s{n}", image=f"alpine:{n}", script=script, **fields)


def play(kubelet: Kubelet, state: JobState, **outcomes: Outcome) -> asyncio.Task[str]:
    """The kubelet runs the attempt's Pod in the background (container names use ``_`` for ``-``)."""
    named = {name.replace("_", "-"): outcome for name, outcome in outcomes.items()}
    return asyncio.create_task(kubelet.run(pod_name(state.job_id, state.attempt), named))


async def test_a_two_step_job_runs_in_one_pod_with_each_steps_log_in_order(
    kube: KubeApi, kubelet: Kubelet, executor: K8sExecutor
) -> None:
    state = job(step(1, "echo one"), step(2, "echo two"), metadata={"COURSE": "ds"})
    phases = await executor.prepare(state)
    pod = kube.get(NAMESPACE, "pods", pod_name(state.job_id, 1))
    assert pod is not None and pod["metadata"]["labels"]["hades/job-id"] == state.job_id
    assert pod["spec"] == pod_manifest(state.job_id, 1, state.spec, SETTINGS, Priority.HIGH)["spec"]
    assert "pod" in phases
    node = play(kubelet, state, step_1=Outcome(("one", "1b")), step_2=Outcome(("two",)))

    first, second = Lines(), Lines()
    results = [await executor.run_step(state, 0, first), await executor.run_step(state, 1, second)]

    assert [r.exit_code for r in results] == [0, 0] and [r.error for r in results] == [None, None]
    assert (first.opened, first.messages) == (["step-1"], ["one", "1b"])
    assert (second.opened, second.messages) == (["step-2"], ["two"])
    assert await node == "Succeeded"
    await executor.cleanup(state)
    assert kube.get(NAMESPACE, "pods", pod_name(state.job_id, 1)) is None
    await executor.cleanup(state)  # already gone: fine


async def test_a_failing_step_reports_its_exit_code_and_the_next_never_runs(
    kubelet: Kubelet, executor: K8sExecutor
) -> None:
    state = job(step(1, "exit 3"), step(2))
    await executor.prepare(state)
    node = play(kubelet, state, step_1=Outcome(("bad",), exit_code=3))

    result = await executor.run_step(state, 0, Lines())
    after = await executor.run_step(state, 1, Lines())

    assert (result.exit_code, result.error) == (3, None)
    assert await node == "Failed"
    assert after.exit_code is None and after.error is not None and "did not run" in (after.error or "")


async def test_continue_on_error_keeps_the_scripts_exit_code_and_the_pod_going(
    kube: KubeApi, kubelet: Kubelet, executor: K8sExecutor
) -> None:
    state = job(step(1, "exit 4", continue_on_error=True), step(2, "echo after"))
    await executor.prepare(state)
    pod = kube.get(NAMESPACE, "pods", pod_name(state.job_id, 1))
    assert pod is not None
    wrapper = pod["spec"]["initContainers"][0]
    assert {"name": "HADES_STEP_SCRIPT", "value": "exit 4"} in wrapper["env"]
    assert wrapper["command"][-1].endswith("exit 0")  # the wrapper itself always exits 0
    # what the kubelet reports for the wrapper: exit 0, the script's code in the termination message
    node = play(kubelet, state, step_1=Outcome(message="hades-exit-code=4"), step_2=Outcome(("after",)))
    logs = Lines()

    tolerated = await executor.run_step(state, 0, Lines())
    after = await executor.run_step(state, 1, logs)

    assert tolerated.exit_code == 4 and after.exit_code == 0 and logs.messages == ["after"]
    assert await node == "Succeeded"


async def test_a_tolerated_step_without_a_script_that_fails_says_why_the_next_did_not_run(
    kubelet: Kubelet, executor: K8sExecutor
) -> None:
    state = job(step(1, "", continue_on_error=True), step(2))
    await executor.prepare(state)
    play(kubelet, state, step_1=Outcome(exit_code=2))

    tolerated = await executor.run_step(state, 0, Lines())
    after = await executor.run_step(state, 1, Lines())

    assert tolerated.exit_code == 2
    assert after.error is not None
    assert after.error.startswith("step 2 did not run: the Pod failed when step-1 exited with status 2")


@pytest.mark.parametrize(
    "reason",
    [
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "CrashLoopBackOff",
    ],
)
async def test_a_stuck_container_fails_the_step_with_the_operators_wording(
    kubelet: Kubelet, executor: K8sExecutor, reason: str
) -> None:
    state = job(step(1), step(7))
    await executor.prepare(state)
    play(kubelet, state, step_7=Outcome(waiting=reason))

    assert (await executor.run_step(state, 0, Lines())).exit_code == 0
    stuck = await executor.run_step(state, 1, Lines())

    assert stuck.exit_code is None and stuck.error == f"{reason} (step 2): alpine:7"


async def test_a_pull_error_is_stuck_only_once_it_lasts(kube: KubeApi, kubelet: Kubelet, executor: K8sExecutor) -> None:
    state = job(step(1))
    await executor.prepare(state)
    play(kubelet, state, step_1=Outcome(waiting="ErrImagePull"))
    began = asyncio.get_running_loop().time()

    stuck = await executor.run_step(state, 0, Lines())

    assert stuck.error == "ErrImagePull (step 1): alpine:1"
    assert asyncio.get_running_loop().time() - began >= 0.3  # the grace the executor was given


async def test_a_pull_error_that_clears_is_not_stuck(kube: KubeApi, kubelet: Kubelet, executor: K8sExecutor) -> None:
    state = job(step(1))
    await executor.prepare(state)
    name = pod_name(state.job_id, 1)
    waiting = {"name": "step-1", "state": {"waiting": {"reason": "ErrImagePull"}}}
    kube.set_status(NAMESPACE, "pods", name, {"containerStatuses": [waiting]})
    running = asyncio.create_task(executor.run_step(state, 0, Lines()))
    await eventually(lambda: _true(kube.open_watches))

    node = play(kubelet, state, step_1=Outcome(("pulled at last",)))  # the retry pulled it

    assert (await running).exit_code == 0
    assert await node == "Succeeded"


async def test_the_deadline_fails_the_step_with_a_clear_reason(kubelet: Kubelet, executor: K8sExecutor) -> None:
    hold = asyncio.Event()
    state = job(step(1, "sleep 600"), timeout_seconds=5)
    await executor.prepare(state)
    play(kubelet, state, step_1=Outcome(hold=hold))
    running = asyncio.create_task(executor.run_step(state, 0, Lines()))
    await eventually(lambda: _true(_running(kubelet, state)))

    kubelet.deadline(pod_name(state.job_id, 1))
    result = await running
    hold.set()

    assert result.exit_code == 137
    assert result.error == "DeadlineExceeded: the Pod ran longer than its activeDeadlineSeconds (5 s)"


async def test_cancelling_a_step_deletes_the_pod(kube: KubeApi, kubelet: Kubelet, executor: K8sExecutor) -> None:
    hold = asyncio.Event()
    state = job(step(1, "sleep 600"))
    await executor.prepare(state)
    node = play(kubelet, state, step_1=Outcome(("started",), hold=hold))
    running = asyncio.create_task(executor.run_step(state, 0, Lines()))
    await eventually(lambda: _true(_running(kubelet, state)))

    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running

    assert kube.get(NAMESPACE, "pods", pod_name(state.job_id, 1)) is None
    hold.set()
    assert await node == ""  # the kubelet found its Pod gone


async def test_a_watch_that_drops_mid_step_is_resumed(kube: KubeApi, kubelet: Kubelet, executor: K8sExecutor) -> None:
    hold = asyncio.Event()
    state = job(step(1), step(2))
    await executor.prepare(state)
    play(kubelet, state, step_1=Outcome(("before",), hold=hold), step_2=Outcome(("after",)))
    logs = Lines()
    running = asyncio.create_task(executor.run_step(state, 0, logs))
    await eventually(lambda: _true(_running(kubelet, state) and kube.open_watches))

    assert kube.drop_watches() == 1
    hold.set()  # the container ends while the executor has no watch open

    assert (await running).exit_code == 0
    assert (await executor.run_step(state, 1, Lines())).exit_code == 0
    assert executor.stats.reconnects >= 1 and executor.stats.relists == 0


async def test_an_expired_resource_version_is_listed_again(
    kube: KubeApi, kubelet: Kubelet, executor: K8sExecutor
) -> None:
    hold = asyncio.Event()
    state = job(step(1))
    await executor.prepare(state)
    play(kubelet, state, step_1=Outcome(("x",), hold=hold))
    running = asyncio.create_task(executor.run_step(state, 0, Lines()))
    await eventually(lambda: _true(_running(kubelet, state) and kube.open_watches))

    kube.compact()
    kube.drop_watches()
    hold.set()

    assert (await running).exit_code == 0
    assert executor.stats.relists == 1
    lists = [
        query
        for method, _, query in kube.requests
        if method == "GET" and "watch" not in query and "fieldSelector" in query
    ]
    assert len(lists) == 2  # the first list, and the one after 410 Gone


@pytest.mark.parametrize(("kind", "seconds"), [("503", 1.0), ("disconnect", 3.5)])
async def test_an_api_server_down_for_a_few_seconds_mid_step_is_waited_out(
    kube: KubeApi, kubelet: Kubelet, executor: K8sExecutor, kind: str, seconds: float
) -> None:
    """An API server restarting (or a load balancer failing over) takes seconds; the step's watch retries through
    it. It gave up after six transport errors in a row (about 3 s of backoff) and failed the job."""
    hold = asyncio.Event()
    state = job(step(1))
    await executor.prepare(state)
    node = play(kubelet, state, step_1=Outcome(("x",), hold=hold))
    running = asyncio.create_task(executor.run_step(state, 0, Lines()))
    await eventually(lambda: _true(_running(kubelet, state) and kube.open_watches))

    kube.outage(kind)
    await asyncio.sleep(seconds)
    kube.outage(None)
    hold.set()

    assert (await running).exit_code == 0
    assert await node == "Succeeded"


async def test_an_api_server_that_stays_down_loses_the_attempt(kube: KubeApi, kubelet: Kubelet) -> None:
    """Past the patience, the step ends with AttemptLost (the attempt is handed back, as for a lost Docker engine),
    and a server that only ever answers 503 is given up on as well (it was retried forever)."""
    engine = K8sExecutor(SETTINGS, Configuration(host=kube.url), pull_grace=0.3, api_patience=0.5)
    await engine.start()
    try:
        for kind in ("503", "disconnect"):
            hold = asyncio.Event()
            state = job(step(1))
            await engine.prepare(state)
            play(kubelet, state, step_1=Outcome(("x",), hold=hold))
            running = asyncio.create_task(engine.run_step(state, 0, Lines()))
            await eventually(lambda: _true(_running(kubelet, state) and kube.open_watches))  # noqa: B023

            kube.outage(kind)
            with pytest.raises(AttemptLost, match="lost the Kubernetes API"):
                async with asyncio.timeout(10):
                    await running
            kube.outage(None)
            hold.set()
    finally:
        await engine.close()


async def test_a_pod_deleted_from_outside_mid_step_loses_the_attempt(
    kube: KubeApi, kubelet: Kubelet, executor: K8sExecutor
) -> None:
    """As on Docker for a container removed from outside: the attempt is handed back, not the job failed."""
    hold = asyncio.Event()
    state = job(step(1, "sleep 600"), step(2))
    await executor.prepare(state)
    play(kubelet, state, step_1=Outcome(("started",), hold=hold))
    running = asyncio.create_task(executor.run_step(state, 0, Lines()))
    await eventually(lambda: _true(_running(kubelet, state)))

    await executor.cleanup(state)  # someone else's `kubectl delete pod`, as the API sees it
    with pytest.raises(PodDisrupted) as lost:
        await running
    hold.set()

    assert isinstance(lost.value, AttemptLost)
    assert lost.value.reason == "step 1: the Pod was deleted from outside"


async def test_an_evicted_pod_loses_the_attempt_and_says_why(
    kube: KubeApi, kubelet: Kubelet, executor: K8sExecutor
) -> None:
    state = job(step(1, "sleep 600", continue_on_error=True), step(2))
    await executor.prepare(state)
    name = pod_name(state.job_id, 1)
    killed = {"name": "step-1", "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}
    running = asyncio.create_task(executor.run_step(state, 0, Lines()))
    kube.set_status(NAMESPACE, "pods", name, {"initContainerStatuses": [{**killed, "state": {"running": {}}}]})
    await eventually(lambda: _true(kube.open_watches))

    evicted = {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}
    kube.set_status(NAMESPACE, "pods", name, {**evicted, "initContainerStatuses": [killed]})
    kube.end_log(NAMESPACE, name, "step-1")

    with pytest.raises(PodDisrupted) as lost:  # even for a tolerated step: the Pod, and so every later step, is gone
        await running
    assert lost.value.reason == (
        "step 1: the Pod was ended by the cluster (Evicted: The node was low on resource: memory.); "
        "container exited with status 137"
    )
    assert lost.value.result.exit_code == 137


async def test_a_pod_that_failed_by_its_own_steps_is_no_disruption(kubelet: Kubelet, executor: K8sExecutor) -> None:
    state = job(step(1, "exit 3"), step(2))
    await executor.prepare(state)
    play(kubelet, state, step_1=Outcome(exit_code=3))

    assert (await executor.run_step(state, 0, Lines())).exit_code == 3
    after = await executor.run_step(state, 1, Lines())  # the Pod ended Failed, and no one else ended it
    assert after.exit_code is None and (after.error or "").startswith("step 2 did not run")


async def test_an_api_server_down_at_prepare_is_waited_out_then_the_attempt_is_lost(kube: KubeApi) -> None:
    """The Pod's create is tried again through an outage; past the patience the attempt is handed back, where it
    failed the job at once ('cannot reach the Kubernetes API') while a create answered 5xx failed it as refused."""
    engine = K8sExecutor(SETTINGS, Configuration(host=kube.url), api_patience=1.0)
    await engine.start()
    try:
        state = job(step(1))
        kube.outage("503")
        creating = asyncio.create_task(engine.prepare(state))
        await asyncio.sleep(0.3)
        kube.outage(None)
        await creating
        assert kube.get(NAMESPACE, "pods", pod_name(state.job_id, 1)) is not None

        kube.outage("disconnect")
        with pytest.raises(AttemptLost, match=r"^cannot reach the Kubernetes API: .* tries\)$"):
            await engine.prepare(job(step(1)))
    finally:
        kube.outage(None)
        await engine.close()


async def test_create_is_idempotent_for_the_same_attempt_only(kube: KubeApi, executor: K8sExecutor) -> None:
    state = job(step(1))
    await executor.prepare(state)
    await executor.prepare(state)  # 409 AlreadyExists, and the Pod is this attempt's: fine
    assert [m for m, p, _ in kube.requests if m == "POST"] == ["POST", "POST"]

    stranger = pod_manifest(state.job_id, 2, state.spec, SETTINGS)
    stranger["metadata"]["labels"]["hades/attempt"] = "9"
    kube.put(NAMESPACE, "pods", stranger)
    with pytest.raises(ExecutionError, match="exists and is not this attempt's"):
        await executor.prepare(_same_job(state, attempt=2))


@pytest.mark.parametrize(
    ("code", "reason", "message"),
    [
        (403, "Forbidden", 'pods is forbidden: User "system:serviceaccount:hades:hades" cannot create resource "pods"'),
        (422, "Invalid", 'Pod "x" is invalid: spec.containers[0].image: Required value'),
    ],
)
async def test_a_refused_pod_is_an_execution_error_with_the_api_servers_message(
    kube: KubeApi, executor: K8sExecutor, code: int, reason: str, message: str
) -> None:
    """The job then fails (the attempt runner's FailJob) instead of waiting for a Pod that will never exist."""
    kube.refuse("pods", code, reason, message)
    with pytest.raises(ExecutionError) as refused:
        await executor.prepare(job(step(1)))
    assert refused.value.reason == f"Kubernetes refused the Pod: {code} {message}"
    assert kube.items(NAMESPACE, "pods") == []


async def test_sweep_deletes_pods_of_attempts_that_no_longer_run(kube: KubeApi, executor: K8sExecutor) -> None:
    mine_running, mine_over, theirs_gone, theirs_live = (job(step(1)) for _ in range(4))
    for state in (mine_running, mine_over):
        await executor.prepare(state)
    for state, owner in ((theirs_gone, "crashed"), (theirs_live, "alive")):
        kube.put(NAMESPACE, "pods", pod_manifest(state.job_id, 1, state.spec, PodSettings(NAMESPACE, owner)))
    kube.put(NAMESPACE, "pods", {"metadata": {"name": "unrelated", "labels": {"app": "x"}}, "spec": {"containers": []}})

    removed = await executor.sweep(lambda job_id: job_id == mine_running.job_id, {"k8s-test", "alive"})

    left = {pod["metadata"]["name"] for pod in kube.items(NAMESPACE, "pods")}
    assert removed == 2
    assert left == {pod_name(mine_running.job_id, 1), pod_name(theirs_live.job_id, 1), "unrelated"}


def _same_job(state: JobState, attempt: int) -> JobState:
    return JobState(
        job_id=state.job_id,
        spec=state.spec,
        priority=state.priority,
        status=state.status,
        submitted_at=state.submitted_at,
        attempt=attempt,
    )


def _running(kubelet: Kubelet, state: JobState) -> bool:
    pod = kubelet.api.get(NAMESPACE, "pods", pod_name(state.job_id, state.attempt)) or {}
    status = pod.get("status") or {}
    entries = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    return any("running" in entry["state"] for entry in entries)


async def _true(value: Any) -> bool:
    return bool(value)


async def test_a_sweep_leaves_another_deployments_pods_alone(kube: KubeApi) -> None:
    """Two Hades sharing a namespace: each deletes only the Pods labelled with its own deployment id."""
    ours = dataclasses.replace(SETTINGS, deployment="ours")
    engine = K8sExecutor(ours, Configuration(host=kube.url), pull_grace=0.3)
    await engine.start()
    try:
        our_leftover, their_running = job(step(1)), job(step(1))
        theirs = dataclasses.replace(SETTINGS, executor_id="their-live-executor", deployment="theirs")
        kube.put(
            NAMESPACE,
            "pods",
            pod_manifest(our_leftover.job_id, 1, our_leftover.spec, PodSettings(NAMESPACE, "gone", deployment="ours")),
        )
        kube.put(NAMESPACE, "pods", pod_manifest(their_running.job_id, 1, their_running.spec, theirs))

        removed = await engine.sweep(lambda _job_id: False, {ours.executor_id})

        left = {pod["metadata"]["name"] for pod in kube.items(NAMESPACE, "pods")}
        assert removed == 1
        assert pod_name(their_running.job_id, 1) in left and pod_name(our_leftover.job_id, 1) not in left
    finally:
        await engine.close()
