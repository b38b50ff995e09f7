"""The operator's pure parts: admission order (Hypothesis), the status it writes (against the chart's CRD schema),
and the Pods it creates (strictly valid Kubernetes, owned by their BuildJob)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import kubernetes_validate
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hades.adapters.k8s.buildjob import buildjob_manifest
from hades.adapters.k8s.operator.admission import Candidate, admission_order, admit, effective_limit, priority_of
from hades.adapters.k8s.operator.status import buildjob_status, current_step, owned_pod
from hades.adapters.k8s.pods import PodSettings, pod_manifest
from hades.adapters.k8s.status import disrupted
from hades.core.spec import JobSpec, Priority, Step
from hades.core.state import JobState, Status, StepState, StepStatus
from tests.deploy.manifests import buildjob_validator

VERSIONS = ("1.25.0", kubernetes_validate.latest_version())
BUILDJOB = buildjob_validator()
AT = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
JOB_ID = "0b6c0f5e-8a63-4c2f-9d55-0f6f3a7c2e11"
SPEC = JobSpec(name="j", steps=(Step(id=1, image="alpine:3"), Step(id=2, image="alpine:3", script="exit 1")))

candidates = st.builds(
    Candidate,
    namespace=st.just("ops"),
    name=st.uuids().map(str),
    priority=st.integers(1, 3),
    created=st.integers(0, 5000).map(lambda s: (AT + timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%SZ")),
)


@given(st.lists(candidates, max_size=30, unique_by=lambda c: c.name), st.integers(0, 12), st.integers(1, 10))
def test_admission_never_exceeds_the_limit_and_takes_priority_then_age(
    waiting: list[Candidate], active: int, limit: int
) -> None:
    admitted = admit(waiting, active, limit)

    assert len(admitted) == min(len(waiting), max(0, limit - active))
    assert active + len(admitted) <= max(limit, active)  # never more running than the limit allows
    order = [(-c.priority, c.created) for c in admitted]
    assert order == sorted(order)
    left = [c for c in waiting if c not in admitted]
    for taken in admitted:  # nobody left behind outranks anyone admitted
        assert all((-taken.priority, taken.created) <= (-c.priority, c.created) for c in left)


@given(st.lists(candidates, min_size=1, max_size=20, unique_by=lambda c: c.name), st.integers(1, 5))
def test_admitting_one_slot_at_a_time_gives_the_same_order_as_all_at_once(waiting: list[Candidate], limit: int) -> None:
    remaining, running, started = list(waiting), 0, []
    while remaining:
        batch = admit(remaining, running, limit)
        assert batch and running + len(batch) <= limit
        started += batch
        remaining = [c for c in remaining if c not in batch]
        running = limit - 1  # one finished
    assert started == admission_order(waiting)


def test_priority_comes_from_the_label_then_the_spec_then_defaults_to_one() -> None:
    manifest = buildjob_manifest(JOB_ID, SPEC, "ops", Priority.HIGH)
    assert priority_of(manifest) == 3
    manifest["metadata"]["labels"].pop("hades.tum.de/priority")
    manifest["spec"]["metadata"]["hades.tum.de/priority"] = "2"
    assert priority_of(manifest) == 2
    assert priority_of({"metadata": {"labels": {"hades.tum.de/priority": "x"}}}) == 1
    assert effective_limit(0) == 100 and effective_limit(3) == 3


def state(status: Status, *steps: StepStatus, reason: str | None = None) -> JobState:
    return JobState(
        job_id=JOB_ID,
        spec=SPEC,
        priority=Priority.MEDIUM,
        status=status,
        submitted_at=AT,
        attempt=2,
        executor_id="operator-0",
        started_at=AT + timedelta(seconds=1) if steps else None,
        finished_at=AT + timedelta(seconds=9) if status.is_terminal else None,
        reason=reason,
        steps=tuple(StepState(index=i, step_id=i + 1, status=s) for i, s in enumerate(steps)),
    )


def with_status(status: dict[str, Any]) -> dict[str, Any]:
    return {**buildjob_manifest(JOB_ID, SPEC, "ops"), "status": status}


def pod(*containers: dict[str, Any], phase: str = "Pending", **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": f"hades-{JOB_ID}-2"},
        "status": {"phase": phase, "initContainerStatuses": list(containers), **extra},
    }


@pytest.mark.parametrize(
    ("job", "the_pod", "phase", "states"),
    [
        (state(Status.QUEUED), None, "Pending", None),
        (
            state(Status.RUNNING, StepStatus.RUNNING, StepStatus.PENDING),
            pod({"name": "step-1", "state": {"waiting": {"reason": "ErrImagePull"}}}),
            "Running",
            ["Pending", "Pending"],
        ),
        (
            state(Status.RUNNING, StepStatus.SUCCEEDED, StepStatus.RUNNING),
            pod(
                {"name": "step-1", "state": {"terminated": {"exitCode": 0}}},
                {"name": "step-2", "state": {"running": {}}},
            ),
            "Running",
            ["Succeeded", "Running"],
        ),
        (
            state(Status.FAILED, StepStatus.FAILED, StepStatus.PENDING, reason="ImagePullBackOff (step 1): alpine:3"),
            None,
            "Failed",
            ["Failed", "Unknown"],
        ),
        (
            state(Status.STOPPED, StepStatus.RUNNING, StepStatus.PENDING, reason="cancelled by alice"),
            None,
            "Failed",
            None,
        ),
        (state(Status.SUCCEEDED, StepStatus.SUCCEEDED, StepStatus.SUCCEEDED), None, "Succeeded", None),
    ],
    ids=["waiting", "pulling", "second-step", "stuck", "stopped", "succeeded"],
)
def test_the_status_fits_the_crd_and_says_where_the_job_stands(
    job: JobState, the_pod: dict[str, Any] | None, phase: str, states: list[str] | None
) -> None:
    status = buildjob_status(job, the_pod, retry_count=1, waiting="waiting for a slot" if the_pod is None else None)

    BUILDJOB.validate(with_status(status))
    assert status["phase"] == phase and status["retryCount"] == 1
    if states is not None:
        assert [c["state"] for c in status["containerStatuses"]] == states
    if job.status is Status.STOPPED:
        assert status["message"] == "Stopped: cancelled by alice"
    if job.status.is_terminal:
        assert status["completionTime"] == "2026-12-03T09:00:09Z" and status["podName"] == f"hades-{JOB_ID}-2"
    if job.status is Status.QUEUED:
        assert status == {"phase": "Pending", "message": "waiting for a slot", "retryCount": 1}


def test_the_current_step_is_the_first_unfinished_one_and_n_plus_one_when_all_are_done() -> None:
    assert current_step(state(Status.RUNNING, StepStatus.SUCCEEDED, StepStatus.RUNNING).steps) == 2
    assert current_step(state(Status.SUCCEEDED, StepStatus.SUCCEEDED, StepStatus.FAILED).steps) == 3


@pytest.mark.parametrize(
    ("the_pod", "retried"),
    [
        (None, True),
        (pod(phase="Failed", reason="Evicted"), True),
        (pod(phase="Failed", conditions=[{"type": "DisruptionTarget", "status": "True"}]), True),
        (pod({"name": "step-1", "state": {"terminated": {"exitCode": 1}}}, phase="Failed"), False),
        (pod(phase="Failed", reason="DeadlineExceeded"), False),
    ],
    ids=["gone", "evicted", "disruption-target", "step-exit", "deadline"],
)
def test_only_a_pod_the_cluster_ended_counts_as_disrupted(the_pod: dict[str, Any] | None, retried: bool) -> None:
    assert disrupted(the_pod) is retried


@pytest.mark.parametrize("version", VERSIONS)
def test_the_operators_pod_is_valid_kubernetes_and_owned_by_its_buildjob(version: str) -> None:
    settings = PodSettings(namespace="ops", executor_id="operator-0", service_account="hades-job")
    buildjob = buildjob_manifest(JOB_ID, SPEC, "ops")
    buildjob["metadata"]["uid"] = str(uuid.uuid4())
    manifest = owned_pod(pod_manifest(JOB_ID, 2, SPEC, settings), buildjob)

    kubernetes_validate.validate(manifest, version, strict=True)
    (owner,) = manifest["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "build.hades.tum.de/v1",
        "kind": "BuildJob",
        "name": JOB_ID,
        "uid": buildjob["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    labels = manifest["metadata"]["labels"]
    assert labels["hades.tum.de/buildjob"] == JOB_ID and labels["app.kubernetes.io/managed-by"] == "hades-operator"
    assert labels["hades/job-id"] == JOB_ID and labels["hades/attempt"] == "2"
    elsewhere = owned_pod(
        pod_manifest(JOB_ID, 2, SPEC, settings),
        {**buildjob, "metadata": {**buildjob["metadata"], "namespace": "team-a"}},
    )
    assert "ownerReferences" not in elsewhere["metadata"]  # a cross-namespace owner would get the Pod collected
