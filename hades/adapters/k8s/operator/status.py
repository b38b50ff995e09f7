"""A BuildJob's status, and the operator's Pods: pure functions over the job's state and its Pod as the API returns it.

The job's events are the truth, so the phase, the message and the times come from its state (``Stopped``, which
the CRD's phase enum lacks, shows as ``Failed`` with a message that says it was stopped). The Pod adds what the
events cannot know yet: whether a step's container is still waiting for its image or already runs. A step's
``logsPublished`` is true once its ``step_finished`` landed, which records the last log sequence it wrote.

A Pod that failed for a reason outside its steps (evicted, its node lost or shut down, deleted by someone else)
is what ``maxRetries`` retries (``hades.adapters.k8s.status.disrupted``); a step that exits non-zero, a stuck
image and the deadline are the job's own outcome and are never retried: a grading job that fails its tests must
not run three times.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from hades.adapters.k8s.buildjob import GROUP, KIND, VERSION
from hades.adapters.k8s.pods import LABEL_MANAGED_BY, container_names, pod_name
from hades.adapters.k8s.status import view_step
from hades.core.state import JobState, Status, StepState, StepStatus

LABEL_BUILDJOB = "hades.tum.de/buildjob"
MANAGED_BY_OPERATOR = "hades-operator"
PHASES = {
    Status.QUEUED: "Pending",
    Status.RUNNING: "Running",
    Status.SUCCEEDED: "Succeeded",
    Status.FAILED: "Failed",
    Status.STOPPED: "Failed",
}
_STEP_STATES = {
    StepStatus.PENDING: "Pending",
    StepStatus.RUNNING: "Running",
    StepStatus.SUCCEEDED: "Succeeded",
    StepStatus.FAILED: "Failed",
}
_VIEW_STATES = {"waiting": "Pending", "running": "Running", "stuck": "Failed", "ended": "Unknown"}


def timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC, seconds precision, as Kubernetes writes ``metav1.Time``."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def buildjob_status(
    state: JobState, pod: dict[str, Any] | None, retry_count: int = 0, waiting: str | None = None
) -> dict[str, Any]:
    """The status a BuildJob shows for its job, given its attempt's Pod if it exists (``waiting``: why a queued
    job has not started yet)."""
    status: dict[str, Any] = {"phase": PHASES[state.status], "message": _message(state, waiting)}
    if retry_count:
        status["retryCount"] = retry_count
    if state.status is Status.QUEUED:
        return status
    if state.started_at is not None:
        status["podName"] = pod_name(state.job_id, state.attempt)
    if state.started_at is not None:
        status["startTime"] = timestamp(state.started_at)
    if state.status.is_terminal and state.finished_at is not None:
        status["completionTime"] = timestamp(state.finished_at)
    if state.steps:
        status["currentStep"] = current_step(state.steps)
        status["containerStatuses"] = container_statuses(state, pod)
    return status


def current_step(steps: tuple[StepState, ...]) -> int:
    """The 1-based position of the first step not finished; the number of steps plus one once all are."""
    for position, step in enumerate(steps, start=1):
        if step.status not in (StepStatus.SUCCEEDED, StepStatus.FAILED):
            return position
    return len(steps) + 1


def container_statuses(state: JobState, pod: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One entry per step: a finished step as its event says, an unfinished one as its container stands."""
    entries = []
    names = container_names(state.spec.steps)
    for position, (step, spec, name) in enumerate(zip(state.steps, state.spec.steps, names, strict=True), start=1):
        finished = step.status in (StepStatus.SUCCEEDED, StepStatus.FAILED)
        if finished or pod is None:
            shown = _STEP_STATES[step.status]
            if shown == "Pending" and state.status.is_terminal:
                shown = "Unknown"  # it never ran and never will
        else:
            view = view_step(pod, name, position, spec.image)
            shown = _VIEW_STATES.get(view.phase) or ("Succeeded" if view.exit_code == 0 else "Failed")
        entries.append({"name": name, "stepId": spec.id, "state": shown, "logsPublished": finished})
    return entries


def _message(state: JobState, waiting: str | None) -> str:
    if state.status is Status.QUEUED:
        return waiting or f"queued (attempt {state.attempt})"
    if state.status is Status.RUNNING:
        return f"running attempt {state.attempt} on {state.executor_id}"
    if state.status is Status.SUCCEEDED:
        return "all steps succeeded"
    if state.status is Status.STOPPED:
        return f"Stopped: {state.reason or ''}".rstrip(": ")
    return state.reason or "failed"


def status_differs(current: dict[str, Any] | None, wanted: dict[str, Any]) -> bool:
    """Whether writing ``wanted`` would change anything (the operator writes only changes: no write loops)."""
    return (current or {}) != wanted


def owned_pod(pod: dict[str, Any], buildjob: dict[str, Any]) -> dict[str, Any]:
    """The Pod as the operator creates it: labelled with its BuildJob and, in the same namespace, owned by it
    (deleting the BuildJob deletes the Pod)."""
    owned = copy.deepcopy(pod)
    metadata = owned["metadata"]
    owner = buildjob["metadata"]
    metadata["labels"] = {**metadata["labels"], LABEL_MANAGED_BY: MANAGED_BY_OPERATOR, LABEL_BUILDJOB: owner["name"]}
    if owner.get("namespace") != metadata.get("namespace"):
        return owned  # an owner in another namespace counts as missing, and the garbage collector would delete the Pod
    metadata["ownerReferences"] = [
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "name": owner["name"],
            "uid": owner["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return owned
