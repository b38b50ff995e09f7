"""How a job becomes a ``BuildJob`` custom resource for the operator: a pure function, in the Go scheduler's shape
(contract 4.3) with its holes closed.

Name = job id; labels ``hades/job-id``, ``hades/source`` and ``hades.tum.de/priority``; ``spec.name``,
``spec.metadata`` (the job's, plus the two priority keys the Go scheduler added), ``spec.timeoutSeconds`` when
set, ``spec.maxRetries`` (declared but never read by the Go operator; ours honours it), and per step ``id``,
``name``, ``image`` and ``continueOnError`` always, ``script`` and ``metadata`` when non-empty, ``cpuLimit`` as the
string ``"<n>"`` and ``memoryLimit`` as given. The CRD takes memory in the API's own units (``2G`` and ``2g`` both
2×1024³ bytes, as on Docker); the operator converts it with ``quantities`` when it builds the Pod. ``callback_url``
stays out, as in Go: it is read from the job's history.
"""

from __future__ import annotations

from typing import Any

from hades.adapters.k8s.pods import LABEL_JOB, LABEL_PRIORITY, PRIORITY_KEYS
from hades.core.spec import JobSpec, Priority, Step

GROUP = "build.hades.tum.de"
VERSION = "v1"
PLURAL = "buildjobs"
KIND = "BuildJob"
LABEL_SOURCE = "hades/source"
_INT32_MAX = 2**31 - 1


class BuildJobError(ValueError):
    """A job the BuildJob CRD would refuse (the message says which step and why)."""


def buildjob_manifest(
    job_id: str,
    spec: JobSpec,
    namespace: str,
    priority: Priority | None = None,
    max_retries: int | None = None,
    source: str = "scheduler",
) -> dict[str, Any]:
    """The BuildJob for a job (``priority`` defaults to the spec's own). Raises BuildJobError for a job the CRD
    refuses: no steps, a step id outside 1..2³¹-1, or a step without an image."""
    if not spec.steps:
        raise BuildJobError("a BuildJob needs at least one step")
    level = priority or spec.priority_name
    body: dict[str, Any] = {
        "name": spec.name,
        "metadata": {**spec.metadata, PRIORITY_KEYS[0]: str(level.as_int), PRIORITY_KEYS[1]: level.value},
        "steps": [_step(step, position) for position, step in enumerate(spec.steps, start=1)],
    }
    if spec.timeout_seconds > 0:
        body["timeoutSeconds"] = spec.timeout_seconds
    if max_retries is not None:
        body["maxRetries"] = max_retries
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {
            "name": job_id,
            "namespace": namespace,
            "labels": {LABEL_JOB: job_id, LABEL_SOURCE: source, LABEL_PRIORITY: str(level.as_int)},
        },
        "spec": body,
    }


def _step(step: Step, position: int) -> dict[str, Any]:
    if not 1 <= step.id <= _INT32_MAX:
        raise BuildJobError(f"step {position}: a BuildJob step id must be between 1 and {_INT32_MAX}, not {step.id}")
    if not step.image:
        raise BuildJobError(f"step {position}: a BuildJob step needs an image")
    body: dict[str, Any] = {
        "id": step.id,
        "name": step.name,
        "image": step.image,
        "continueOnError": step.continue_on_error,
    }
    if step.script:
        body["script"] = step.script
    if step.metadata:
        body["metadata"] = dict(step.metadata)
    if step.cpu_limit:
        body["cpuLimit"] = str(step.cpu_limit)
    optional = (("memoryLimit", step.memory_limit), ("network", step.network), ("memorySwap", step.memory_swap))
    body.update({key: value for key, value in optional if value})
    if step.pids_limit:
        body["pidsLimit"] = step.pids_limit
    return body
