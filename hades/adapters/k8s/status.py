"""Reading a Pod's status for one step: pure functions over the Pod as the API returns it (a JSON dict).

A step's container is waiting, running, terminated, stuck (a waiting reason that will not clear by itself), or
will never run (the Pod ended or is gone before it started). Stuck reasons are worded as the Go operator words
them: ``<Reason> (step <n>): <image>``, ``n`` the step's 1-based position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from hades.adapters.k8s.pods import EXIT_CODE_PREFIX

#: Waiting reasons that do not clear without someone changing the Pod or the registry.
STUCK_REASONS = frozenset(
    {
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "CrashLoopBackOff",
    }
)
#: Waiting reasons that are stuck only once they last (a pull that failed once is retried by the kubelet).
STUCK_IF_LASTING = frozenset({"ErrImagePull"})
DEADLINE_EXCEEDED = "DeadlineExceeded"
#: Pod-level reasons of a Pod that the cluster, not the job, ended.
DISRUPTIONS = frozenset(
    {"Evicted", "NodeLost", "NodeShutdown", "Shutdown", "Terminated", "Preempting", "UnexpectedAdmissionError"}
)

Phase = Literal["waiting", "running", "terminated", "stuck", "ended"]


@dataclass(frozen=True, slots=True)
class StepView:
    """Where one step's container stands in a Pod.

    ``reason`` is the waiting reason while waiting, the failure for ``stuck`` and ``ended``, and for a
    terminated container what its exit means beyond the code (out of memory, the deadline), if anything.
    """

    phase: Phase
    reason: str | None = None
    exit_code: int | None = None

    @property
    def started(self) -> bool:
        """Its log can be read: the container runs or ran."""
        return self.phase in ("running", "terminated")


def container_status(pod: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The container's entry in the Pod's init or app container statuses, if the kubelet reported it yet."""
    status = pod.get("status") or {}
    for entry in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        if entry.get("name") == name:
            found: dict[str, Any] = entry
            return found
    return None


def view_step(pod: dict[str, Any] | None, name: str, position: int, image: str) -> StepView:
    """How the step at ``position`` (1-based), in container ``name``, stands in ``pod`` (None: the Pod is gone)."""
    if pod is None:
        return StepView("ended", f"the Pod was deleted before step {position} finished")
    state = (container_status(pod, name) or {}).get("state") or {}
    if "terminated" in state:
        return _terminated(pod, state["terminated"])
    if "running" in state:
        return StepView("running")
    waiting = (state.get("waiting") or {}).get("reason")
    if waiting in STUCK_REASONS:
        return StepView("stuck", stuck_reason(waiting, position, image))
    if pod_ended(pod):
        return StepView("ended", never_ran_reason(pod, position))
    return StepView("waiting", waiting)


def stuck_reason(waiting: str, position: int, image: str) -> str:
    """The Go operator's wording for a stuck container."""
    return f"{waiting} (step {position}): {image}"


def pod_ended(pod: dict[str, Any]) -> bool:
    """The Pod reached Succeeded or Failed: nothing in it will start any more."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def deadline_reason(pod: dict[str, Any]) -> str:
    """What a job whose Pod ran out of ``activeDeadlineSeconds`` failed of."""
    seconds = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    return f"{DEADLINE_EXCEEDED}: the Pod ran longer than its activeDeadlineSeconds ({seconds} s)"


def never_ran_reason(pod: dict[str, Any], position: int) -> str:
    """Why a step's container never started although the Pod ended."""
    status = pod.get("status") or {}
    if status.get("reason") == DEADLINE_EXCEEDED:
        return deadline_reason(pod)
    for entry in status.get("initContainerStatuses") or []:
        code = ((entry.get("state") or {}).get("terminated") or {}).get("exitCode")
        if code:
            return (
                f"step {position} did not run: the Pod failed when {entry.get('name')} exited with status {code} "
                "(a continue_on_error step without a script runs its image's own entrypoint, which cannot be "
                "shielded from ending the Pod)"
            )
    detail = ": ".join(part for part in (status.get("reason"), status.get("message")) if part)
    return f"step {position} did not run: the Pod ended {status.get('phase')}" + (f" ({detail})" if detail else "")


def _terminated(pod: dict[str, Any], terminated: dict[str, Any]) -> StepView:
    code = exit_code(terminated)
    if code != 0 and (pod.get("status") or {}).get("reason") == DEADLINE_EXCEEDED:
        return StepView("terminated", deadline_reason(pod), code)
    if code != 0 and terminated.get("reason") == "OOMKilled":
        return StepView("terminated", f"container exited with status {code} (out of memory)", code)
    return StepView("terminated", None, code)


def exit_code(terminated: dict[str, Any]) -> int:
    """The step's exit code: the script's own for a tolerated step (its wrapper always exits 0)."""
    message = str(terminated.get("message") or "")
    if message.startswith(EXIT_CODE_PREFIX) and message[len(EXIT_CODE_PREFIX) :].isdigit():
        return int(message[len(EXIT_CODE_PREFIX) :])
    return int(terminated.get("exitCode", -1))


def disrupted(pod: dict[str, Any] | None) -> bool:
    """Whether the Pod failed for a reason outside its steps: gone, evicted, its node lost, preempted."""
    if pod is None:
        return True
    status = pod.get("status") or {}
    if status.get("reason") in DISRUPTIONS:
        return True
    conditions = status.get("conditions") or []
    return any(c.get("type") == "DisruptionTarget" and c.get("status") == "True" for c in conditions)


def disruption(pod: dict[str, Any] | None) -> str:
    """What ended a disrupted Pod, in words: ``deleted from outside``, or its reason and message."""
    if pod is None:
        return "the Pod was deleted from outside"
    status = pod.get("status") or {}
    detail = ": ".join(part for part in (status.get("reason"), status.get("message")) if part)
    return f"the Pod was ended by the cluster ({detail or 'DisruptionTarget'})"
