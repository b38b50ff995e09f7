"""How a job attempt becomes a Pod: pure functions from the job to the manifest dict, unit-tested without a cluster.

Layout: the steps run in order as the Pod's containers, all but the last as init containers (Kubernetes runs those
one after the other, each only after the previous one exited 0) and the last step as the Pod's one app container.
The Go operator added a ``busybox`` finalizer as the app container instead; that costs an extra image every node
must be able to pull (it fails in an air-gapped cluster) and a container that is not a step, for nothing: the last
step can end the Pod itself. So every container is a step, named ``step-<id>``, and the Pod's phase is the job's.

Every step sees the emptyDir ``shared`` at ``/shared`` (its working directory, as on Docker) and the environment
Docker gives it: the job's metadata, then the step's, then ``UUID`` and ``JOB_NAME``.

Kubernetes expands ``$(NAME)`` in commands, arguments and env values and turns ``$$`` into ``$``; a shell script
is full of both (``$(date)``, ``$$``), so every ``$`` is doubled here and the step sees its text unchanged.

``continue_on_error``: a failed init container fails the whole Pod, so a tolerated step with a script runs it in a
nested shell that always exits 0 and leaves the script's real exit code in the termination message (the Go
operator's ``|| true`` lost it). A tolerated step without a script runs the image's own entrypoint, which no
wrapper can name without the image's configuration; see ``hades.adapters.k8s.status`` for how its failure ends.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Literal

from hades.adapters.k8s.placement import node_affinity, requests, with_requests
from hades.adapters.k8s.quantities import cpu_quantity, memory_quantity
from hades.core.spec import JobSpec, Priority, Step

SHARED_VOLUME = "shared"
SHARED_PATH = "/shared"
LABEL_JOB = "hades/job-id"
LABEL_ATTEMPT = "hades/attempt"
LABEL_PRIORITY = "hades.tum.de/priority"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
#: Which Hades (which event log) made the Pod: a sweep deletes only its own deployment's, so two Hades sharing a
#: namespace never delete each other's running Pods.
LABEL_DEPLOYMENT = "hades/deployment"
MANAGED_BY = "hades-executor"
#: The executor that created the Pod; an annotation, since an executor id need not be a valid label value.
ANNOTATION_EXECUTOR = "hades/executor-id"
#: The keys the Go scheduler injected into job metadata; never passed on to a container's environment.
PRIORITY_KEYS = ("hades.tum.de/priority", "hades.tum.de/priorityName")
#: Where a tolerated step's wrapper leaves the script's exit code, as ``hades-exit-code=<n>``.
TERMINATION_LOG = "/dev/termination-log"
EXIT_CODE_PREFIX = "hades-exit-code="
STEP_SCRIPT_ENV = "HADES_STEP_SCRIPT"

PullPolicy = Literal["Always", "IfNotPresent", "Never"]


class PodSpecError(ValueError):
    """A job that cannot become a Pod (no steps)."""


@dataclass(frozen=True, slots=True)
class PodSettings:
    """Executor-wide settings that shape every Pod."""

    namespace: str = "hades-executor"
    executor_id: str = ""
    script_executor: str = "/bin/sh -c"
    image_pull_policy: PullPolicy | None = None
    service_account: str | None = None
    deployment: str = ""  # the event log's deployment id (``hades.adapters.nats.shared_keys``); "" labels none


def pod_name(job_id: str, attempt: int) -> str:
    """One Pod per attempt: a retried attempt starts from an empty workspace and never meets a leftover."""
    return f"hades-{job_id}-{attempt}"


def container_names(steps: tuple[Step, ...]) -> list[str]:
    """``step-<id>`` for each step; a repeated id gets its position too (``step-1-3``), as names must be unique."""
    names: list[str] = []
    for position, step in enumerate(steps, start=1):
        name = f"step-{step.id}"
        names.append(name if name not in names else f"{name}-{position}")
    return names


def pod_labels(job_id: str, attempt: int, priority: Priority) -> dict[str, str]:
    """What marks a Pod as this attempt's, for cleanup, for the sweep, and for people using kubectl."""
    return {
        LABEL_JOB: job_id,
        LABEL_ATTEMPT: str(attempt),
        LABEL_PRIORITY: str(priority.as_int),
        LABEL_MANAGED_BY: MANAGED_BY,
    }


def escape_expansion(text: str) -> str:
    """``text`` such that Kubernetes's ``$(VAR)`` expansion gives it back unchanged."""
    return text.replace("$", "$$")


def step_env(spec: JobSpec, step: Step, job_id: str) -> dict[str, str]:
    """Job metadata, then step metadata (overriding), then ``UUID`` and ``JOB_NAME``: as on Docker."""
    env = {**spec.metadata, **step.metadata}
    for key in PRIORITY_KEYS:
        env.pop(key, None)
    env["UUID"] = job_id
    env["JOB_NAME"] = spec.name
    return env


def step_command(step: Step, shell: list[str]) -> tuple[list[str] | None, dict[str, str]]:
    """The container's command (None: the image's own) and the env it needs besides the step's."""
    if not step.script.strip():
        return None, {}
    if not step.continue_on_error:
        return [*shell, step.script], {}
    nested = shlex.join(shell) + f' "${STEP_SCRIPT_ENV}"'
    wrapper = f"{nested}; printf '{EXIT_CODE_PREFIX}%d' \"$?\" > {TERMINATION_LOG}; exit 0"
    return [*shell, wrapper], {STEP_SCRIPT_ENV: step.script}


def resources(step: Step) -> dict[str, Any]:
    """Limits only (Kubernetes then requests the same): whole cores, memory in Docker's bytes."""
    limits = {
        key: value
        for key, value in (("cpu", cpu_quantity(step.cpu_limit)), ("memory", memory_quantity(step.memory_limit)))
        if value is not None
    }
    return {"limits": limits} if limits else {}


def container(spec: JobSpec, index: int, name: str, job_id: str, settings: PodSettings) -> dict[str, Any]:
    """One step's container."""
    step = spec.steps[index]
    command, extra_env = step_command(step, shlex.split(settings.script_executor))
    env = {**step_env(spec, step, job_id), **extra_env}
    body: dict[str, Any] = {
        "name": name,
        "image": step.image,
        "env": [{"name": key, "value": escape_expansion(value)} for key, value in env.items()],
        "workingDir": SHARED_PATH,
        "volumeMounts": [{"name": SHARED_VOLUME, "mountPath": SHARED_PATH}],
        "securityContext": {"allowPrivilegeEscalation": False},
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "File",
    }
    if command is not None:
        body["command"] = [escape_expansion(part) for part in command]
    if settings.image_pull_policy is not None:
        body["imagePullPolicy"] = settings.image_pull_policy
    limits = with_requests(resources(step), requests(spec.placement), index + 1)
    if limits:
        body["resources"] = limits
    return body


def pod_manifest(
    job_id: str, attempt: int, spec: JobSpec, settings: PodSettings, priority: Priority | None = None
) -> dict[str, Any]:
    """The Pod that runs one attempt of a job (``priority`` defaults to the spec's own).

    Raises PodSpecError for a job without steps, MemoryFormatError for a memory limit Docker would refuse, and
    PlacementError for constraints or resources Kubernetes cannot express (``hades.adapters.k8s.placement``).
    """
    if not spec.steps:
        raise PodSpecError("a job without steps has nothing to run in a Pod")
    names = container_names(spec.steps)
    containers = [container(spec, index, name, job_id, settings) for index, name in enumerate(names)]
    pod_spec: dict[str, Any] = {"restartPolicy": "Never"}
    if len(containers) > 1:
        pod_spec["initContainers"] = containers[:-1]
    pod_spec |= {
        "containers": containers[-1:],
        "volumes": [{"name": SHARED_VOLUME, "emptyDir": {}}],
        "automountServiceAccountToken": False,  # a step has no business with the cluster's API
        "enableServiceLinks": False,  # nor with every Service's address in its environment (Docker has none)
    }
    affinity = node_affinity(spec.placement)
    if affinity is not None:
        pod_spec["affinity"] = affinity
    if spec.timeout_seconds > 0:
        pod_spec["activeDeadlineSeconds"] = spec.timeout_seconds
    if settings.service_account:
        pod_spec["serviceAccountName"] = settings.service_account
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(job_id, attempt),
            "namespace": settings.namespace,
            "labels": pod_labels(job_id, attempt, priority or spec.priority_name)
            | ({LABEL_DEPLOYMENT: settings.deployment} if settings.deployment else {}),
            "annotations": {ANNOTATION_EXECUTOR: settings.executor_id},
        },
        "spec": pod_spec,
    }
